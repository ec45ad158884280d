"""The fuzz suite (issue 10): hostile and ordinary requests drawn by Hypothesis
(tests/fuzzing.py) and by schemathesis from the served OpenAPI, sent over HTTP to an
apiserver and etcd of this module's own. Properties: no 5xx; every non-2xx answer is a
Status; a refused request writes nothing; the server keeps answering a probe meanwhile.

Time-bounded: KUBELITE_FUZZ_SECONDS (45 by default, `make fuzz` 600) is shared out
between the tests below. Each prints its counts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests import fuzzing
from tests.fuzzing import (
    NAMESPACE,
    SEED_NODES,
    SEED_PODS,
    FuzzRequest,
    Probe,
    Tally,
    status_problems,
)
from tests.support import ApiServer, Etcd, keys_of, keys_range

# Shares of KUBELITE_FUZZ_SECONDS.
HYPOTHESIS_SHARE, SCHEMATHESIS_SHARE = 0.55, 0.35
BATCH = 25  # examples per Hypothesis run; runs repeat until the time is up
# Generous for a shared 2-core machine; the run prints the real p99 and max.
PROBE_WORST_MS = 1000.0
FUZZ_SETTINGS = settings(max_examples=BATCH, deadline=None, database=None,
                         suppress_health_check=list(HealthCheck),
                         phases=(Phase.generate, Phase.shrink))


class Cluster:
    def __init__(self, etcd: Etcd, apiserver: ApiServer) -> None:
        self.etcd = etcd
        self.apiserver = apiserver
        self.http = apiserver.sync_client(timeout=30)
        self.etcd_http = httpx.Client(base_url=etcd.endpoint, timeout=10)

    def keys(self) -> dict[str, int]:
        return keys_of(self.etcd_http.post("/v3/kv/range", json=keys_range()))

    def send(self, request: FuzzRequest) -> tuple[int, bytes]:
        """(status, body) of one request; a watch is read only up to its status line."""
        with self.http.stream(request.method, request.path, params=list(request.params),
                              headers=request.headers(), content=request.content) as r:
            if request.is_watch() and r.status_code == 200:
                return r.status_code, b""
            return r.status_code, r.read()

    def ensure_seeds(self) -> None:
        """The pods and nodes the patches, PUTs, bindings and deletes aim at, there and
        not terminating (the fuzzer deletes and binds them)."""
        for node in SEED_NODES:
            if self.http.get(f"/api/v1/nodes/{node}").status_code == 404:
                self.http.post("/api/v1/nodes", json={"metadata": {"name": node}})
        for pod in SEED_PODS:
            path = fuzzing.pod_path(pod)
            current = self.http.get(path)
            if current.status_code == 200 and (
                    "deletionTimestamp" in current.json()["metadata"]
                    or current.json()["spec"].get("nodeName")):
                self.http.delete(path, params={"gracePeriodSeconds": "0"})
                current = self.http.get(path)
            if current.status_code == 404:
                self.http.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json={
                    "metadata": {"name": pod, "labels": {"app": "seed"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}})

    def close(self) -> None:
        self.http.close()
        self.etcd_http.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """An etcd and apiserver for this module alone: nothing else writes to them."""
    etcd = Etcd(tmp_path_factory.mktemp("fuzz-etcd")).start()
    # plain: the fuzzers measure request decoding, validation and Status errors, and a
    # /readyz probe's latency from a process of its own and schemathesis' requests session
    # (neither of which can take the session PKI); authentication and authorization have
    # their own tests (test_authn, test_authz_e2e, test_rbac_http)
    apiserver = ApiServer(etcd, Path(tmp_path_factory.mktemp("fuzz-apiserver")),
                          name="fuzz-apiserver", plain=True).start()
    cluster = Cluster(etcd, apiserver)
    r = cluster.http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
    assert r.status_code == 201, r.text
    yield cluster
    cluster.close()
    apiserver.stop()
    etcd.stop()
    tracebacks = apiserver.process.log().count("Traceback")
    assert tracebacks == 0, f"the apiserver logged {tracebacks} traceback(s): see its log"


@pytest.fixture(scope="module")
def totals(request: pytest.FixtureRequest) -> Iterator[list[Tally]]:
    """Every test's tally, summed up and printed when the module is done."""
    tallies: list[Tally] = []
    yield tallies
    total = Tally()
    for tally in tallies:
        total.add(tally)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + total.report(f"fuzz suite in all ({fuzzing.FUZZ_SECONDS:.0f} s budget)",
                                   None, families=False))


def run_for(seconds: float, run: Callable[[], None]) -> None:
    """Hypothesis runs of BATCH examples, one after another, until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run()


def report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with capsys.disabled():
        print("\n" + text)


def assert_probe(probe: Probe) -> None:
    assert probe.result is not None and probe.result.count > 0
    assert probe.result.failures == 0
    assert probe.result.worst < PROBE_WORST_MS, probe.result.worst


# -- Hypothesis: hostile requests, checked one by one --------------------------------------


@pytest.mark.timeout(fuzzing.FUZZ_SECONDS * HYPOTHESIS_SHARE + 240)
def test_no_request_gets_a_5xx_or_a_non_status_or_writes_on_error(
        cluster: Cluster, totals: list[Tally], capsys: pytest.CaptureFixture[str]) -> None:
    tally = Tally()
    totals.append(tally)

    def one(request: FuzzRequest) -> None:
        if time.monotonic() > deadline and not first_round:
            return
        before = cluster.keys()
        status_code, body = cluster.send(request)
        problems = status_problems(status_code, body)
        tally.count(request.family, status_code, problems)
        assert not problems, (request, status_code, body[:500], problems)
        if status_code >= 300:
            after = cluster.keys()
            if after != before:
                tally.writes_on_error += 1
            assert after == before, (request, status_code, body[:300],
                                     {k: v for k, v in after.items() if before.get(k) != v},
                                     set(before) - set(after))

    # one Hypothesis run per family in turn, so that every family is fuzzed however short
    # the budget (a draw from all of them at once left some out of a 45 s run)
    runs = [FUZZ_SETTINGS(given(request=strategy)(one)) for strategy in fuzzing.FAMILIES.values()]
    seconds = fuzzing.FUZZ_SECONDS * HYPOTHESIS_SHARE
    deadline = time.monotonic() + seconds
    first_round = True
    with Probe(cluster.apiserver.url) as probe:
        def batch() -> None:
            nonlocal first_round
            for run in runs:
                cluster.ensure_seeds()
                run()
            first_round = False
        run_for(seconds, batch)
    report(capsys, tally.report("hypothesis", probe.result))
    assert_probe(probe)
    assert len(tally.families) >= len(fuzzing.FAMILIES)  # patch counts each patch type


# -- schemathesis against the served OpenAPI ------------------------------------------------


def cap_watch(case: Any) -> None:
    """A watch the generated query opens ends within a second (any value but 0/false is
    true to kube's parameter codec)."""
    query = case.query or {}
    if "watch" in query:
        case.query = {**query, "timeoutSeconds": "1"}


@pytest.mark.timeout(fuzzing.FUZZ_SECONDS * SCHEMATHESIS_SHARE + 240)
def test_schemathesis_finds_no_5xx_and_every_error_is_a_status(
        cluster: Cluster, totals: list[Tally], capsys: pytest.CaptureFixture[str]) -> None:
    url = cluster.apiserver.url
    schema = schemathesis.openapi.from_url(f"{url}/openapi/v3/api/v1")
    strategy = st.one_of(
        schema.as_strategy(generation_mode=GenerationMode.POSITIVE),
        schema.as_strategy(generation_mode=GenerationMode.NEGATIVE),
        # Objects that exist, so that more requests get past the 404.
        schema.as_strategy(generation_mode=GenerationMode.POSITIVE,
                           path_parameters={"namespace": NAMESPACE}),
        schema.as_strategy(generation_mode=GenerationMode.NEGATIVE,
                           path_parameters={"namespace": NAMESPACE, "name": SEED_PODS[0]}))
    tally = Tally()
    totals.append(tally)
    operations: set[str] = set()
    session = requests.Session()

    @FUZZ_SETTINGS
    @given(case=strategy)
    def one(case: Any) -> None:
        if time.monotonic() > deadline:
            return
        cap_watch(case)
        response = case.call(base_url=url, session=session, timeout=30)
        problems = status_problems(response.status_code, response.content)
        operations.add(f"{case.method.upper()} {case.path}")
        tally.count(case.method.upper(), response.status_code, problems)
        assert not problems, (case.method, case.formatted_path, case.query, case.body,
                              response.status_code, response.content[:500], problems)

    seconds = fuzzing.FUZZ_SECONDS * SCHEMATHESIS_SHARE
    deadline = time.monotonic() + seconds
    with Probe(url) as probe:
        def batch() -> None:
            cluster.ensure_seeds()
            one()
        run_for(seconds, batch)
    report(capsys, tally.report(f"schemathesis ({len(operations)} operations)", probe.result))
    assert_probe(probe)


# -- every route, every method ---------------------------------------------------------------

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "PROPFIND")
UNKNOWN_PATHS = (
    "/", "/x", "/api/v2/pods", "/api/v1/", "/api/v1/bogus", "/apis/bogus/v1/things",
    "/apis/coordination.k8s.io/v9/leases", "/api/v1/namespaces/default/pods/a/b/c",
    "/api/v1/namespaces/default/pods/a/bogus", "/openapi/v3/apis/bogus/v1", "/openapi/v9",
    "/api/v1/namespaces//pods", "/%00", "/api/v1/namespaces/%E2%82%AC/pods",
    "/api/v1/nodes/a%2Fb", "//api/v1/pods", "/version/", "/healthz/x",
)


def resource_paths(base: str, resources: list[dict[str, Any]]) -> set[str]:
    """Every path an APIResourceList says is served, with names that do not exist."""
    paths = set()
    for resource in resources:
        plural, _, subresource = resource["name"].partition("/")
        scoped = f"{base}/namespaces/walk-ns/{plural}" if resource["namespaced"] else (
            f"{base}/{plural}")
        if subresource:
            paths.add(f"{scoped}/walk-x/{subresource}")
            continue
        paths |= {scoped, f"{scoped}/walk-x", f"{base}/{plural}"}
    return paths


def served_paths(http: httpx.Client) -> set[str]:
    """Every path discovery and the OpenAPI index name, and their resources' paths."""
    paths = {"/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/metrics",
             "/openapi/v2", "/openapi/v3", "/api/v1"}
    paths |= resource_paths("/api/v1", http.get("/api/v1").json()["resources"])
    for group in http.get("/apis").json()["groups"]:
        for version in group["versions"]:
            base = f"/apis/{version['groupVersion']}"
            paths |= {f"/apis/{group['name']}", base}
            paths |= resource_paths(base, http.get(base).json()["resources"])
    paths |= {"/openapi/v3/" + p for p in http.get("/openapi/v3").json()["paths"]}
    return paths


def test_no_route_answers_without_a_status(
        cluster: Cluster, totals: list[Tally], capsys: pytest.CaptureFixture[str]) -> None:
    paths = served_paths(cluster.http)
    assert len(paths) > 30
    tally = Tally()
    totals.append(tally)
    failures = []
    for path in sorted(paths | set(UNKNOWN_PATHS)):
        for method in METHODS:
            # dryRun: a DELETE of a collection that works (nodes) deletes nothing
            r = cluster.http.request(method, path, params={"dryRun": "All"} if method in (
                "DELETE", "POST", "PUT", "PATCH") else None,
                content=b"{}" if method in ("POST", "PUT", "PATCH") else None,
                headers={"content-type": "application/json"})
            body = r.content if method != "HEAD" else json.dumps(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                 "code": r.status_code, "reason": "HEAD"}).encode()  # HEAD has no body
            problems = status_problems(r.status_code, body)
            if method == "HEAD" and r.status_code >= 300:
                problems += [] if r.headers.get("content-type") == "application/json" else [
                    f"content-type {r.headers.get('content-type')}"]
            tally.count(method, r.status_code, problems)
            if problems:
                failures.append((method, path, r.status_code, r.text[:200], problems))
    report(capsys, tally.report(f"every route ({len(paths)} served paths)", None))
    assert not failures, failures
