"""ApiClient: requests on the wire (MockTransport), error mapping, watch; then the real thing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import httpx
import pytest

from common import ApiClient
from common.client import decode_watch_line
from common.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from tests.support import ApiServer, unique

BASE = "http://127.0.0.1:6443"


class Recorder:
    """A MockTransport that keeps every request and answers with `respond`."""

    def __init__(self, respond: Callable[[httpx.Request], httpx.Response] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.respond = respond or (lambda request: httpx.Response(200, json={"kind": "Pod"}))

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.respond(request)

    def client(self) -> ApiClient:
        return ApiClient(BASE, transport=httpx.MockTransport(self.handler))

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "prod"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node1"}}
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": "node1", "namespace": "kube-node-lease", "resourceVersion": "9"},
         "spec": {"holderIdentity": "node1"}}
LEASES = "/apis/coordination.k8s.io/v1"

Call = Callable[[ApiClient], Awaitable[Any]]

REQUESTS: list[tuple[str, Call, str, str, dict[str, str], str | None, Any]] = [
    # (id, call, method, path, query, content type, body)
    ("get pod", lambda c: c.get("pods", "web", namespace="prod"),
     "GET", "/api/v1/namespaces/prod/pods/web", {}, None, None),
    ("get node status", lambda c: c.get("nodes", "node1", subresource="status"),
     "GET", "/api/v1/nodes/node1/status", {}, None, None),
    ("list all pods", lambda c: c.list("pods"), "GET", "/api/v1/pods", {}, None, None),
    ("list with selectors",
     lambda c: c.list("pods", namespace="prod", label_selector="app in (a,b),tier!=db",
                      field_selector="spec.nodeName=node1"),
     "GET", "/api/v1/namespaces/prod/pods",
     {"labelSelector": "app in (a,b),tier!=db", "fieldSelector": "spec.nodeName=node1"},
     None, None),
    ("create takes the namespace from the object", lambda c: c.create("pods", POD),
     "POST", "/api/v1/namespaces/prod/pods", {}, "application/json", POD),
    ("create cluster-scoped", lambda c: c.create("nodes", NODE),
     "POST", "/api/v1/nodes", {}, "application/json", NODE),
    ("update", lambda c: c.update("pods", POD),
     "PUT", "/api/v1/namespaces/prod/pods/web", {}, "application/json", POD),
    ("update status", lambda c: c.update_status("nodes", NODE),
     "PUT", "/api/v1/nodes/node1/status", {}, "application/json", NODE),
    ("merge patch", lambda c: c.patch("nodes", "node1", {"spec": {"unschedulable": True}}),
     "PATCH", "/api/v1/nodes/node1", {}, "application/merge-patch+json",
     {"spec": {"unschedulable": True}}),
    ("json patch on status",
     lambda c: c.patch("pods", "web", [{"op": "replace", "path": "/status/phase",
                                        "value": "Running"}],
                       namespace="prod", subresource="status", patch_type="json"),
     "PATCH", "/api/v1/namespaces/prod/pods/web/status", {}, "application/json-patch+json",
     [{"op": "replace", "path": "/status/phase", "value": "Running"}]),
    ("strategic merge patch",
     lambda c: c.patch("pods", "web", {"metadata": {"labels": {"a": "b"}}}, namespace="prod",
                       patch_type="strategic"),
     "PATCH", "/api/v1/namespaces/prod/pods/web", {}, "application/strategic-merge-patch+json",
     {"metadata": {"labels": {"a": "b"}}}),
    ("delete", lambda c: c.delete("pods", "web", namespace="prod"),
     "DELETE", "/api/v1/namespaces/prod/pods/web", {}, None, None),
    ("delete now", lambda c: c.delete("pods", "web", namespace="prod", grace_period_seconds=0),
     "DELETE", "/api/v1/namespaces/prod/pods/web", {"gracePeriodSeconds": "0"},
     "application/json", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}),
    ("get lease (a group's resource)",
     lambda c: c.get("leases", "node1", namespace="kube-node-lease"),
     "GET", f"{LEASES}/namespaces/kube-node-lease/leases/node1", {}, None, None),
    ("list leases everywhere", lambda c: c.list("leases"),
     "GET", f"{LEASES}/leases", {}, None, None),
    ("create lease", lambda c: c.create("leases", LEASE),
     "POST", f"{LEASES}/namespaces/kube-node-lease/leases", {}, "application/json", LEASE),
    ("update lease", lambda c: c.update("leases", LEASE),
     "PUT", f"{LEASES}/namespaces/kube-node-lease/leases/node1", {}, "application/json",
     LEASE),
    ("delete lease", lambda c: c.delete("leases", "node1", namespace="kube-node-lease"),
     "DELETE", f"{LEASES}/namespaces/kube-node-lease/leases/node1", {}, None, None),
    ("bind", lambda c: c.bind("prod", "web", "node2"),
     "POST", "/api/v1/namespaces/prod/pods/web/binding", {}, "application/json",
     {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": "prod"},
      "target": {"apiVersion": "v1", "kind": "Node", "name": "node2"}}),
]


@pytest.mark.parametrize(("call", "method", "path", "query", "content_type", "body"),
                         [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
async def test_request_on_the_wire(call: Call, method: str, path: str, query: dict[str, str],
                                   content_type: str | None, body: Any) -> None:
    recorder = Recorder()
    async with recorder.client() as client:
        await call(client)
    request = recorder.last
    assert (request.method, request.url.path, dict(request.url.params)) == (method, path, query)
    assert request.headers.get("Content-Type") == content_type
    assert body_of(request) == body
    assert request.headers["User-Agent"] == "kubelite"
    assert request.headers["Accept"] == "application/json"


async def test_answers_are_returned_as_dicts_and_bind_accepts_a_status() -> None:
    pod_list = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                "items": [POD]}
    recorder = Recorder(lambda request: httpx.Response(
        201 if request.method == "POST" else 200,
        json=pod_list if request.method == "GET" else {"kind": "Status", "status": "Success"}))
    async with recorder.client() as client:
        assert await client.list("pods") == pod_list
        await client.bind("prod", "web", "node1")
    assert [r.method for r in recorder.requests] == ["GET", "POST"]


async def test_more_groups_can_be_mapped_and_watches_use_the_group_path() -> None:
    seen: list[str] = []

    def respond(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, content=b"")

    transport = httpx.MockTransport(respond)
    async with ApiClient(BASE, transport=transport,
                         group_versions={"deployments": "apps/v1"}) as client:
        await client.list("deployments", namespace="prod")
        await client.list("leases")  # not in this client's map: the core group
        async with aclosing(client.watch("deployments")) as stream:
            assert [event async for event in stream] == []
    async with ApiClient(BASE, transport=transport) as client:
        async with aclosing(client.watch("leases", namespace="kube-node-lease")) as stream:
            assert [event async for event in stream] == []
    assert seen == ["/apis/apps/v1/namespaces/prod/deployments", "/api/v1/leases",
                    "/apis/apps/v1/deployments",
                    f"{LEASES}/namespaces/kube-node-lease/leases"]


async def test_unknown_patch_type_is_refused_before_sending() -> None:
    recorder = Recorder()
    async with recorder.client() as client:
        with pytest.raises(ValueError, match="unknown patch type 'apply'"):
            await client.patch("pods", "web", {}, namespace="prod", patch_type="apply")
    assert recorder.requests == []


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code, **extra}


@pytest.mark.parametrize(("code", "reason", "error"), [
    (400, "BadRequest", BadRequest),
    (404, "NotFound", NotFound),
    (409, "AlreadyExists", AlreadyExists),
    (409, "Conflict", Conflict),
    (410, "Expired", Gone),
    (415, "UnsupportedMediaType", UnsupportedMediaType),
    (422, "Invalid", Invalid),
    (500, "InternalError", InternalError),
    (503, "ServiceUnavailable", ServiceUnavailable),
])
async def test_status_answers_raise_their_reason(code: int, reason: str,
                                                 error: type[ApiError]) -> None:
    details = {"name": "web", "kind": "pods"}
    answer = status(code, reason, f"pods \"web\" {reason}", details=details)
    recorder = Recorder(lambda request: httpx.Response(code, json=answer,
                                                       headers={"Retry-After": "1"}))
    async with recorder.client() as client:
        with pytest.raises(error) as caught:
            await client.get("pods", "web", namespace="prod")
    assert type(caught.value) is error
    assert caught.value.message == f"pods \"web\" {reason}"
    assert caught.value.details == details
    assert caught.value.headers["retry-after"] == "1"
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)
    assert caught.value.__cause__.response.status_code == code


async def test_a_non_status_error_body_maps_by_code() -> None:
    recorder = Recorder(lambda request: httpx.Response(404, text="404 page not found"))
    async with recorder.client() as client:
        with pytest.raises(NotFound, match="404 page not found") as caught:
            await client.get("pods", "web", namespace="prod")
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)


async def test_connection_failures_are_httpx_transport_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with ApiClient(BASE, transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(httpx.ConnectError):
            await client.list("nodes")
        with pytest.raises(httpx.ConnectError):
            async for _ in client.watch("nodes"):
                pass


# -- watch ------------------------------------------------------------------------------


def watch_answer(chunks: list[bytes], *, then: BaseException | None = None,
                 code: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
            await asyncio.sleep(0)
        if then is not None:
            raise then

    return lambda request: httpx.Response(code, content=body(),
                                          headers={"Content-Type": "application/json"})


def line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "prod", "resourceVersion": rv}}


async def collect(client: ApiClient, **options: Any) -> list[dict]:
    return [event async for event in client.watch("pods", **options)]


async def test_watch_reads_json_lines_across_chunk_boundaries() -> None:
    stream = (line("ADDED", pod("a", "5")) + b"\n" + line("MODIFIED", pod("a", "6"))
              + line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": "9"}})
              + line("DELETED", pod("a", "10")))
    chunks = [stream[i:i + 17] for i in range(0, len(stream), 17)]
    recorder = Recorder(watch_answer(chunks))
    async with recorder.client() as client:
        events = await collect(client, namespace="prod", resource_version="4",
                               label_selector="app=web", field_selector="spec.nodeName=n1",
                               timeout_seconds=60)
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "5"), ("MODIFIED", "6"), ("BOOKMARK", "9"), ("DELETED", "10")]
    request = recorder.last
    assert request.url.path == "/api/v1/namespaces/prod/pods"
    assert dict(request.url.params) == {
        "watch": "true", "resourceVersion": "4", "labelSelector": "app=web",
        "fieldSelector": "spec.nodeName=n1", "timeoutSeconds": "60",
        "allowWatchBookmarks": "true"}


async def test_watch_is_never_cut_by_the_read_timeout() -> None:
    recorder = Recorder(watch_answer([]))
    async with recorder.client() as client:
        await collect(client, allow_bookmarks=False)
        await client.list("pods")
    watch_request, list_request = recorder.requests
    assert dict(watch_request.url.params) == {"watch": "true"}
    assert watch_request.extensions["timeout"]["read"] is None
    assert list_request.extensions["timeout"]["read"] == 30.0


async def test_watch_error_event_410_raises_gone_after_earlier_events() -> None:
    expired = status(410, "Expired", "too old resource version: 5 (120)")
    recorder = Recorder(watch_answer([line("ADDED", pod("a", "121")), line("ERROR", expired)]))
    seen: list[str] = []
    async with recorder.client() as client:
        with pytest.raises(Gone, match=r"too old resource version: 5 \(120\)"):
            async for event in client.watch("pods", resource_version="5"):
                seen.append(event["type"])
    assert seen == ["ADDED"]


@pytest.mark.parametrize(("obj", "error"), [
    ({"kind": "Status", "code": 410, "message": "gone"}, Gone),
    (status(500, "InternalError", "boom"), InternalError),
])
async def test_watch_error_events_raise_their_error(obj: dict, error: type[ApiError]) -> None:
    recorder = Recorder(watch_answer([line("ERROR", obj)]))
    async with recorder.client() as client:
        with pytest.raises(error):
            await collect(client)


async def test_watch_refused_with_an_http_status_raises_it() -> None:
    body = json.dumps(status(410, "Expired", "too old resource version: 1 (2)")).encode()
    recorder = Recorder(watch_answer([body], code=410))
    async with recorder.client() as client:
        with pytest.raises(Gone) as caught:
            await collect(client, resource_version="1")
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)


async def test_watch_dropped_mid_stream_raises_the_transport_error() -> None:
    recorder = Recorder(watch_answer([line("ADDED", pod("a", "2"))],
                                     then=httpx.ReadError("connection reset")))
    seen: list[str] = []
    async with recorder.client() as client:
        with pytest.raises(httpx.ReadError):
            async for event in client.watch("pods"):
                seen.append(event["object"]["metadata"]["name"])
    assert seen == ["a"]


# -- against the real apiserver ---------------------------------------------------------


def new_pod(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[ApiClient]:
    async with ApiClient(apiserver.connection(), timeout=10) as c:
        yield c


async def test_pod_crud_against_the_apiserver(client: ApiClient) -> None:
    name = unique("crud")
    created = await client.create("pods", new_pod(name, app=name))
    assert created["metadata"]["uid"]
    assert created["status"]["phase"] == "Pending"

    with pytest.raises(AlreadyExists, match=f'pods "{name}" already exists'):
        await client.create("pods", new_pod(name))

    fetched = await client.get("pods", name, namespace="default")
    assert fetched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    listed = await client.list("pods", namespace="default", label_selector=f"app={name}")
    assert listed["kind"] == "PodList"
    assert int(listed["metadata"]["resourceVersion"]) >= int(
        created["metadata"]["resourceVersion"])
    assert [p["metadata"]["name"] for p in listed["items"]] == [name]

    fetched["metadata"]["labels"]["tier"] = "web"
    updated = await client.update("pods", fetched)
    assert updated["metadata"]["labels"]["tier"] == "web"
    with pytest.raises(Conflict) as conflict:
        await client.update("pods", fetched)  # stale resourceVersion
    assert isinstance(conflict.value.__cause__, httpx.HTTPStatusError)

    updated["status"]["phase"] = "Running"
    assert (await client.update_status("pods", updated))["status"]["phase"] == "Running"
    patched = await client.patch("pods", name, {"metadata": {"labels": {"tier": "db"}}},
                                 namespace="default")
    assert patched["metadata"]["labels"] == {"app": name, "tier": "db"}
    assert patched["status"]["phase"] == "Running"

    await client.delete("pods", name, namespace="default", grace_period_seconds=0)
    with pytest.raises(NotFound, match=f'pods "{name}" not found') as missing:
        await client.get("pods", name, namespace="default")
    assert missing.value.details.get("name") == name


async def test_lease_crud_against_the_apiserver(client: ApiClient) -> None:
    name = unique("lease")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": "me", "leaseDurationSeconds": 40}}
    created = await client.create("leases", lease)
    assert (created["apiVersion"], created["kind"]) == ("coordination.k8s.io/v1", "Lease")
    fetched = await client.get("leases", name, namespace="kube-node-lease")
    fetched["spec"]["renewTime"] = "2025-01-02T03:04:05.000006Z"
    renewed = await client.update("leases", fetched)
    assert renewed["spec"]["renewTime"] == "2025-01-02T03:04:05.000006Z"
    with pytest.raises(Conflict, match=f'on leases.coordination.k8s.io "{name}"'):
        await client.update("leases", fetched)
    listed = await client.list("leases", field_selector=f"metadata.name={name}")
    assert listed["kind"] == "LeaseList"
    assert [item["metadata"]["namespace"] for item in listed["items"]] == ["kube-node-lease"]
    await client.delete("leases", name, namespace="kube-node-lease")
    with pytest.raises(NotFound, match=f'leases.coordination.k8s.io "{name}" not found'):
        await client.get("leases", name, namespace="kube-node-lease")


async def test_invalid_object_is_rejected_with_causes(client: ApiClient) -> None:
    with pytest.raises(Invalid) as caught:
        await client.create("pods", new_pod("Bad_Name"))
    assert caught.value.message.startswith('Pod "Bad_Name" is invalid: metadata.name')
    assert caught.value.details["causes"]


async def test_bind_sets_the_node_once(client: ApiClient) -> None:
    name = unique("bind")
    await client.create("pods", new_pod(name))
    await client.bind("default", name, "node2")
    bound = await client.get("pods", name, namespace="default")
    assert bound["spec"]["nodeName"] == "node2"
    with pytest.raises(Conflict, match=f'pod {name} is already assigned to node "node2"'):
        await client.bind("default", name, "node3")
    await client.delete("pods", name, namespace="default", grace_period_seconds=0)


async def test_watch_against_the_apiserver(client: ApiClient) -> None:
    name = unique("watch")
    start = (await client.list("pods", namespace="default"))["metadata"]["resourceVersion"]
    events: list[tuple[str, str]] = []

    async def follow() -> None:
        stream = client.watch("pods", namespace="default", resource_version=start,
                              field_selector=f"metadata.name={name}", timeout_seconds=30)
        async with aclosing(stream):
            async for event in stream:
                if event["type"] != "BOOKMARK":
                    events.append((event["type"], event["object"]["metadata"]["name"]))
                if event["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(follow())
    await client.create("pods", new_pod(name))
    await client.patch("pods", name, {"metadata": {"labels": {"x": "y"}}}, namespace="default")
    await client.delete("pods", name, namespace="default", grace_period_seconds=0)
    await asyncio.wait_for(watcher, timeout=20)
    assert events[0] == ("ADDED", name)
    assert events[-1] == ("DELETED", name)
    assert ("MODIFIED", name) in events


async def test_watch_ends_when_its_timeout_is_over(client: ApiClient) -> None:
    start = (await client.list("nodes"))["metadata"]["resourceVersion"]
    quiet = f"metadata.name={unique('no-such-node')}"
    events = await asyncio.wait_for(
        collect_nodes(client, resource_version=start, field_selector=quiet, timeout_seconds=1),
        timeout=15)
    assert all(e["type"] == "BOOKMARK" for e in events)


async def collect_nodes(client: ApiClient, **options: Any) -> list[dict]:
    return [event async for event in client.watch("nodes", **options)]


@pytest.mark.parametrize("line, event", [
    ('{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"é"}}}',
     {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "é"}}}),
    # Kubernetes' integers are int64: both ends decode exactly
    ('{"type":"MODIFIED","object":{"n":9223372036854775807,"m":-9223372036854775808}}',
     {"type": "MODIFIED", "object": {"n": 9223372036854775807, "m": -9223372036854775808}}),
    ("   ", None),
])
def test_watch_lines_decode_with_orjson(
        line: str, event: dict[str, Any] | None) -> None:
    assert decode_watch_line(line) == event


@pytest.mark.parametrize("line", ['{"type":', '["ADDED"]', '{"object":{}}'])
def test_a_broken_watch_line_is_a_value_error(line: str) -> None:
    with pytest.raises(ValueError):
        decode_watch_line(line)
