"""What the fuzz suite (tests/test_fuzz.py, `make fuzz`) is made of: Hypothesis strategies
for hostile and ordinary requests, the properties every answer must have, a latency probe
in its own process, and the counts the run prints.

A request is data (`FuzzRequest`), drawn by `requests()`; the tests send it and check it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import quote

import httpx
import yaml
from hypothesis import strategies as st

# `make test` runs the suite for about this long in all; `make fuzz` sets 600.
FUZZ_SECONDS = float(os.environ.get("KUBELITE_FUZZ_SECONDS", "45"))

NAMESPACE = "fuzz"
SEED_PODS = ("seed-a", "seed-b", "seed-c")
SEED_NODES = ("fuzz-node-1", "fuzz-node-2")

JSON_TYPE = "application/json"
YAML_TYPE = "application/yaml"
PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
               "strategic": "application/strategic-merge-patch+json"}
CONTENT_TYPES = (JSON_TYPE, YAML_TYPE, PROTOBUF_TYPE, *PATCH_TYPES.values(), "text/plain",
                 "application/apply-patch+yaml", "", "application/json; charset=utf-8",
                 "multipart/form-data", "application/x-www-form-urlencoded")


@dataclass(frozen=True)
class FuzzRequest:
    family: str  # which strategy drew it, for the counts
    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None
    content: bytes | None = None

    def headers(self) -> dict[str, str]:
        return {} if self.content_type is None else {"content-type": self.content_type}

    def is_watch(self) -> bool:
        return self.method == "GET" and any(k == "watch" for k, _ in self.params)


# -- values -------------------------------------------------------------------------------

# Text a hostile client would put anywhere: control characters, NUL, quotes, non-ASCII,
# separators a path or a selector cares about.
nasty_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", " ", "€", "\n", "\x00", "\"", "\\", "../x", "a/b", "%2F", "é" * 3,
                     "Bad_Name", "-", "a" * 300, "\ud7ff", "0", "-1", "1e3", "null", "true",
                     "$patch", "$setElementOrder/containers", "spec.containers", "*", "~1"]),
)
dns_label = st.from_regex(r"\A[a-z]([a-z0-9-]{0,14}[a-z0-9])?\Z")
name = st.one_of(dns_label, dns_label, dns_label, nasty_text)  # mostly valid, to get further
integers = st.one_of(st.integers(-5, 100), st.integers(), st.sampled_from([2**63, -(2**63) - 1]))
scalars = st.one_of(st.none(), st.booleans(), integers, st.floats(allow_nan=False), nasty_text)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(nasty_text, children, max_size=4)),
    max_leaves=12)


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


depths = st.sampled_from([99, 100, 101, 990, 10_000, 50_000])
deep_text = st.one_of(depths.map(nested), depths.map(lambda d: '{"a":' * d + "1" + "}" * d))


def alias_bomb(levels: int, width: int) -> str:
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


# -- objects ------------------------------------------------------------------------------

labels = st.dictionaries(name, name, max_size=3)
images = st.one_of(st.sampled_from(["busybox:1.35", "nginx", "registry:5000/a/b:1", ""]),
                   nasty_text)


@st.composite
def containers(draw: st.DrawFn) -> dict[str, Any]:
    container: dict[str, Any] = {"name": draw(name),
                                 "image": draw(images)}
    if draw(st.booleans()):
        container["env"] = draw(st.lists(st.fixed_dictionaries(
            {"name": st.one_of(dns_label, nasty_text), "value": nasty_text}), max_size=3))
    if draw(st.booleans()):
        container["ports"] = draw(st.lists(st.fixed_dictionaries(
            {"containerPort": integers}, optional={"protocol": st.sampled_from(
                ["TCP", "UDP", "SCTP", "tcp"]), "name": dns_label}), max_size=2))
    if draw(st.booleans()):
        container["resources"] = {"limits": draw(st.dictionaries(
            st.sampled_from(["cpu", "memory", "bogus"]),
            st.one_of(st.sampled_from(["100m", "1Gi", "1.5", "-1", "1e400", "abc"]), integers),
            max_size=2))}
    return container


def mutate(obj: Any, draw: st.DrawFn, depth: int = 0) -> Any:
    """`obj` with one value somewhere below the top replaced by any JSON value, or with an
    unknown field."""
    if not isinstance(obj, dict | list) or not obj or (depth and draw(st.integers(0, 3)) == 0):
        return draw(json_values)
    if isinstance(obj, list):
        index = draw(st.integers(0, len(obj) - 1))
        return [mutate(v, draw, depth + 1) if i == index else v for i, v in enumerate(obj)]
    if draw(st.integers(0, 4)) == 0:
        return {**obj, draw(nasty_text): draw(json_values)}
    key = draw(st.sampled_from(sorted(obj)))
    return {**obj, key: mutate(obj[key], draw, depth + 1)}


@st.composite
def pods(draw: st.DrawFn, pod_name: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name or draw(name), "labels": draw(labels)},
        "spec": {"containers": draw(st.lists(containers(), min_size=1, max_size=3))}}
    if draw(st.booleans()):
        pod["spec"]["nodeName"] = draw(st.one_of(st.sampled_from(SEED_NODES), name))
    if draw(st.booleans()):
        pod["spec"]["restartPolicy"] = draw(st.sampled_from(["Always", "Never", "Sometimes"]))
    if draw(st.integers(0, 2)) == 0:
        pod = mutate(pod, draw)
    return pod


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": draw(name), "labels": draw(labels)},
        "spec": {"unschedulable": draw(st.booleans())},
        "status": {"addresses": draw(st.lists(st.fixed_dictionaries({
            "type": st.sampled_from(["InternalIP", "Hostname", "ExternalIP", "Bogus"]),
            "address": st.one_of(st.sampled_from(
                ["10.0.0.1", "::1", "[::ffff:127.0.0.1]:2379/version#", "node-1"]),
                nasty_text)}), max_size=2)),
            "capacity": draw(st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]),
                                             st.sampled_from(["4", "8Gi", "110", "x"]),
                                             max_size=3))}}
    if draw(st.integers(0, 2)) == 0:
        node = mutate(node, draw)
    return node


# -- patches ------------------------------------------------------------------------------

pointers = st.one_of(
    st.sampled_from(["/metadata/labels/app", "/metadata/labels", "/spec/containers/0/image",
                     "/spec/containers/00/image", "/spec/containers/-/image",
                     "/spec/containers/-1", "/spec/containers/99", "/metadata/name",
                     "/metadata/namespace", "/metadata/uid", "/kind", "/apiVersion",
                     "/metadata/annotations/a~1b", "/metadata/annotations/a~2", "", "/",
                     "spec", "/status/phase", "/metadata/resourceVersion"]),
    st.text(max_size=12).map(lambda t: "/" + t))
json_patch_ops = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]),
     "path": pointers},
    optional={"value": json_values, "from": pointers})
merge_patches = st.one_of(
    st.fixed_dictionaries({"metadata": st.fixed_dictionaries(
        {}, optional={"labels": st.dictionaries(dns_label, st.one_of(st.none(), dns_label),
                                                max_size=2),
                      "annotations": st.dictionaries(nasty_text, st.one_of(st.none(),
                                                                           nasty_text),
                                                     max_size=2),
                      "name": name, "namespace": name, "uid": nasty_text,
                      "resourceVersion": nasty_text, "finalizers": st.lists(name, max_size=2)})}),
    st.fixed_dictionaries({}, optional={"kind": nasty_text, "apiVersion": nasty_text}),
    st.fixed_dictionaries({"spec": st.fixed_dictionaries({}, optional={
        "containers": st.lists(containers(), max_size=2),
        "activeDeadlineSeconds": integers, "nodeName": name})}),
    st.just({}),
    json_values)
strategic_directives = st.one_of(
    st.fixed_dictionaries({"$patch": st.sampled_from(["replace", "delete", "merge", "bogus"])}),
    st.fixed_dictionaries({"spec": st.fixed_dictionaries({
        "$setElementOrder/containers": st.one_of(
            st.lists(st.fixed_dictionaries({"name": name}), max_size=2), json_values)})}),
    st.fixed_dictionaries({"spec": st.fixed_dictionaries({"containers": st.lists(
        st.one_of(st.fixed_dictionaries({"name": st.sampled_from(["c", "x"]),
                                         "$patch": st.sampled_from(["delete", "replace",
                                                                    "bogus"])}),
                  st.fixed_dictionaries({"image": images}), containers()), max_size=2)})}),
    st.fixed_dictionaries({"metadata": st.fixed_dictionaries({
        "$deleteFromPrimitiveList/finalizers": json_values,
        "$retainKeys": json_values})}))


@st.composite
def patch_documents(draw: st.DrawFn, kind: str) -> Any:
    if kind == "json":
        return draw(st.one_of(st.lists(json_patch_ops, max_size=4), json_values))
    if kind == "strategic":
        return draw(st.one_of(merge_patches, strategic_directives))
    return draw(merge_patches)


# -- query parameters ------------------------------------------------------------------------

query_values = {
    "limit": st.one_of(st.sampled_from(["abc", "1.5", "-1", "0", "2", "99999999999999999999"]),
                       integers.map(str)),
    "resourceVersion": st.one_of(st.sampled_from(["abc", "-5", "0", "", "1", "999999999"]),
                                 integers.map(str)),
    "resourceVersionMatch": st.sampled_from(["Bogus", "Exact", "NotOlderThan", ""]),
    "continue": st.one_of(st.sampled_from(["garbage", "", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"]),
                          nasty_text),
    "timeoutSeconds": st.sampled_from(["abc", "-1", "0", "1", "1.5"]),
    "labelSelector": st.one_of(st.sampled_from(["a in (b", "app=web", "!a", "a notin (x,y)",
                                                "a==b,c!=d", "=", "a=b=c"]), nasty_text),
    "fieldSelector": st.one_of(st.sampled_from(["spec.bogus=x", "metadata.name=seed-a",
                                                "status.phase!=Running", "a"]), nasty_text),
    "watch": st.sampled_from(["true", "1", "false", "0", "maybe", ""]),
    "allowWatchBookmarks": st.sampled_from(["true", "false", "x"]),
    "sendInitialEvents": st.sampled_from(["true", "false"]),
    "fieldValidation": st.sampled_from(["Strict", "Warn", "Ignore", "Sometimes", ""]),
    "dryRun": st.sampled_from(["All", "Yes", ""]),
    "gracePeriodSeconds": st.sampled_from(["0", "1", "abc", "1.5", "-1"]),
    "propagationPolicy": st.sampled_from(["Foreground", "Background", "Orphan", "Sometimes"]),
    "orphanDependents": st.sampled_from(["true", "false", "x"]),
    "includeObject": st.sampled_from(["None", "Metadata", "Object", "Bogus"]),
    "pretty": st.sampled_from(["true", "x"]),
}


@st.composite
def query_params(draw: st.DrawFn, names: tuple[str, ...] = tuple(query_values)) -> tuple[
        tuple[str, str], ...]:
    chosen = draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    params = [(key, draw(query_values[key])) for key in chosen]
    if draw(st.integers(0, 9)) == 0:
        params.append((draw(nasty_text), draw(nasty_text)))
    return tuple(params)


# On writes, mostly none: a bad one stops the request before the body is looked at.
write_params = st.one_of(st.just(()), st.just(()), query_params(("fieldValidation", "dryRun")))


# -- bodies ---------------------------------------------------------------------------------


def encode(document: Any, content_type: str) -> bytes:
    if content_type == YAML_TYPE:
        return yaml.safe_dump(document, allow_unicode=True).encode()
    return json.dumps(document).encode()


raw_bodies = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"{", b"[", b"null", b"1", b'"x"', b"{}", b"[]", b"\xff\xfe",
                     b'{"a":1,"a":2}', b"--- a\n--- b\n", b"!!python/object:os.system x",
                     b"a: !!binary AAAA", b"a: 2001-12-14", b"? [a]\n: b", b"&a [*a]",
                     b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}\x00',
                     b"\xef\xbb\xbf{}", "{\"€\": 1}".encode()]),
    deep_text.map(str.encode),
    depths.map(lambda d: ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"deep"},'
                          '"spec":' + '{"a":' * d + "[]" + "}" * d + "}").encode()),
    st.builds(alias_bomb, st.integers(2, 9), st.integers(2, 12)).map(str.encode),
    json_values.map(lambda v: json.dumps(v).encode()),
)


# -- requests -------------------------------------------------------------------------------


def pod_path(pod_name: str, subresource: str = "") -> str:
    """The pod's path, its name percent-encoded (any text may be a name here)."""
    return f"/api/v1/namespaces/{NAMESPACE}/pods/{quote(pod_name, safe='')}" + (
        f"/{subresource}" if subresource else "")


targets = st.one_of(st.sampled_from(SEED_PODS), name)
collections = st.sampled_from([
    f"/api/v1/namespaces/{NAMESPACE}/pods", "/api/v1/pods", "/api/v1/nodes",
    f"/api/v1/namespaces/{NAMESPACE}/events", "/api/v1/namespaces",
    f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases",
    f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events",
    "/api/v1/namespaces/does-not-exist/pods"])


@st.composite
def create_pod(draw: st.DrawFn) -> FuzzRequest:
    content_type = draw(st.sampled_from([JSON_TYPE, YAML_TYPE]))
    return FuzzRequest("create pod", "POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                       draw(write_params), content_type,
                       encode(draw(pods()), content_type))


@st.composite
def create_node(draw: st.DrawFn) -> FuzzRequest:
    content_type = draw(st.sampled_from([JSON_TYPE, YAML_TYPE]))
    return FuzzRequest("create node", "POST", "/api/v1/nodes",
                       draw(write_params), content_type,
                       encode(draw(nodes()), content_type))


@st.composite
def patch(draw: st.DrawFn) -> FuzzRequest:
    kind = draw(st.sampled_from(sorted(PATCH_TYPES)))
    on_node = draw(st.integers(0, 3)) == 0
    path = (f"/api/v1/nodes/{draw(st.sampled_from(SEED_NODES))}" if on_node
            else pod_path(draw(targets)))
    if draw(st.integers(0, 4)) == 0:
        path += "/status"
    return FuzzRequest(f"patch {kind}", "PATCH", path,
                       draw(write_params), PATCH_TYPES[kind],
                       json.dumps(draw(patch_documents(kind))).encode())


@st.composite
def put(draw: st.DrawFn) -> FuzzRequest:
    target = draw(targets)
    content_type = draw(st.sampled_from([JSON_TYPE, YAML_TYPE]))
    return FuzzRequest("put pod", "PUT", pod_path(target, draw(st.sampled_from(["", "status"]))),
                       draw(write_params), content_type,
                       encode(draw(pods(pod_name=target)), content_type))


delete_options = st.fixed_dictionaries({}, optional={
    "apiVersion": st.sampled_from(["v1", "meta.k8s.io/v1", "apps/v1"]),
    "kind": st.sampled_from(["DeleteOptions", "Pod"]),
    "dryRun": st.one_of(st.just(["All"]), st.just("All"), st.just(1), json_values),
    "gracePeriodSeconds": st.one_of(st.integers(-1, 60), st.just(1.5), st.just(True),
                                    st.just("abc"), json_values),
    "propagationPolicy": st.one_of(st.sampled_from(["Background", "Sometimes"]), json_values),
    "preconditions": st.one_of(st.fixed_dictionaries({}, optional={
        "uid": nasty_text, "resourceVersion": nasty_text}), st.just("x"), json_values),
    "orphanDependents": st.one_of(st.booleans(), json_values)})


@st.composite
def delete(draw: st.DrawFn) -> FuzzRequest:
    body = draw(st.one_of(st.none(), delete_options))
    path = draw(st.one_of(targets.map(pod_path), collections))
    return FuzzRequest("delete", "DELETE", path,
                       draw(query_params(("dryRun", "gracePeriodSeconds", "propagationPolicy",
                                          "orphanDependents", "labelSelector"))),
                       None if body is None else JSON_TYPE,
                       None if body is None else json.dumps(body).encode())


@st.composite
def binding(draw: st.DrawFn) -> FuzzRequest:
    target = draw(targets)
    body: Any = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": target},
                 "target": draw(st.one_of(
                     st.fixed_dictionaries({"kind": st.just("Node"),
                                            "name": st.sampled_from(SEED_NODES)}),
                     st.fixed_dictionaries({}, optional={"name": st.one_of(name, json_values),
                                                         "kind": nasty_text}),
                     json_values))}
    if draw(st.integers(0, 3)) == 0:
        body = mutate(body, draw)
    return FuzzRequest("binding", "POST", pod_path(target, "binding"),
                       draw(query_params(("dryRun",))), JSON_TYPE, json.dumps(body).encode())


@st.composite
def read(draw: st.DrawFn) -> FuzzRequest:
    path = draw(st.one_of(collections, targets.map(pod_path),
                          targets.map(lambda t: pod_path(t, "log"))))
    params = draw(query_params())
    if any(k == "watch" for k, _ in params):  # a watch that works ends within a second
        params = tuple((k, v) for k, v in params if k != "timeoutSeconds") + (
            ("timeoutSeconds", "1"),)
    return FuzzRequest("read/watch", "GET", path, params)


@st.composite
def raw(draw: st.DrawFn) -> FuzzRequest:
    method, path = draw(st.one_of(
        st.tuples(st.just("POST"), collections),
        st.tuples(st.sampled_from(["PUT", "PATCH", "DELETE"]), targets.map(pod_path)),
        st.tuples(st.just("POST"), targets.map(lambda t: pod_path(t, "binding"))),
        st.tuples(st.sampled_from(["PUT", "PATCH"]), st.just("/api/v1/nodes/fuzz-node-1"))))
    return FuzzRequest("raw body", method, path, (),
                       draw(st.sampled_from(CONTENT_TYPES)), draw(raw_bodies))


FAMILIES = {"create pod": create_pod(), "create node": create_node(), "patch": patch(),
            "put pod": put(), "delete": delete(), "binding": binding(), "read/watch": read(),
            "raw body": raw()}


# -- properties -----------------------------------------------------------------------------


def is_future_resource_version(status: dict[str, Any]) -> bool:
    """kube's one 5xx for a client's input: a resourceVersion etcd has not reached yet is a
    504 Timeout with a ResourceVersionTooLarge cause (NewTooLargeResourceVersionError),
    which clients retry or relist on. Not a failure of the server."""
    causes = (status.get("details") or {}).get("causes") or [{}]
    return (status.get("code") == 504 and status.get("reason") == "Timeout"
            and causes[0].get("reason") == "ResourceVersionTooLarge")


def status_problems(status_code: int, body: bytes) -> list[str]:
    """Why an answer is not what every non-2xx answer must be: a Failure Status (v1) whose
    integer code is the HTTP status and that names a reason; and no 5xx. [] when it is."""
    if status_code < 300:
        return []
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    problems = []
    if status_code >= 500 and not (isinstance(status, dict)
                                   and is_future_resource_version(status)):
        problems.append(f"a {status_code}")
    if status is None:
        return [*problems, f"not JSON: {body[:200]!r}"]
    if not isinstance(status, dict):
        return [*problems, f"not an object: {body[:200]!r}"]
    expected = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
    problems += [f"{k} is {status.get(k)!r}" for k, v in expected.items() if status.get(k) != v]
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code != status_code:
        problems.append(f"code {code!r} for HTTP {status_code}")
    if not isinstance(status.get("reason"), str) or not status["reason"]:
        problems.append(f"reason {status.get('reason')!r}")
    return problems


# -- counts ---------------------------------------------------------------------------------


@dataclass
class Tally:
    """What a fuzz run sent and got, printed at its end."""

    requests: int = 0
    families: Counter[str] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    server_errors: int = 0
    not_status: int = 0
    writes_on_error: int = 0

    def count(self, family: str, status_code: int, problems: list[str]) -> None:
        self.requests += 1
        self.families[family] += 1
        self.codes[status_code] += 1
        self.server_errors += any(p.startswith("a 5") for p in problems)
        self.not_status += any(not p.startswith("a 5") for p in problems)

    def add(self, other: Tally) -> None:
        self.requests += other.requests
        self.families.update(other.families)
        self.codes.update(other.codes)
        self.server_errors += other.server_errors
        self.not_status += other.not_status
        self.writes_on_error += other.writes_on_error

    def report(self, title: str, probe: ProbeResult | None, *, families: bool = True) -> str:
        lines = [f"== {title}: {self.requests} requests, 5xx (but kube's 504 for a future "
                 f"resourceVersion): {self.server_errors}, "
                 f"not a Status: {self.not_status}, writes on error: {self.writes_on_error}"]
        if families:
            lines.append("   families: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(self.families.items())))
        lines.append("   status codes: " + ", ".join(f"{k}: {v}" for k, v in
                                                   sorted(self.codes.items())))
        if probe is not None:
            lines.append(f"   probe GET /readyz: {probe.count} answers, p50 {probe.p(50):.1f} ms, "
                         f"p99 {probe.p(99):.1f} ms, max {probe.worst:.1f} ms, "
                         f"failures {probe.failures}")
        return "\n".join(lines)


# -- the probe ------------------------------------------------------------------------------


@dataclass
class ProbeResult:
    latencies_ms: list[float]
    failures: int

    @property
    def count(self) -> int:
        return len(self.latencies_ms)

    @property
    def worst(self) -> float:
        return max(self.latencies_ms, default=0.0)

    def p(self, percentile: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(len(ordered) * percentile / 100))]


def _probe(url: str, stop: Any, out: Connection) -> None:
    latencies: list[float] = []
    failures = 0
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                ok = client.get("/readyz").status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append((time.perf_counter() - began) * 1000)
            failures += not ok
            time.sleep(0.01)
    out.send((latencies, failures))
    out.close()


class Probe:
    """GET /readyz every 10 ms from another process (so the fuzzer's own work in this
    process never counts as the server's latency), for as long as the `with` lasts."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(target=_probe, args=(url, self._stop, send),
                                        daemon=True)
        self.result: ProbeResult | None = None

    def __enter__(self) -> Probe:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        latencies, failures = self._receive.recv() if self._receive.poll(30) else ([], -1)
        self._process.join(10)
        self.result = ProbeResult(latencies, failures)
