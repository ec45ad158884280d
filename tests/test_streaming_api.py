"""pods/exec, attach and portforward refuse bad requests with kube's Status errors before
anything is dialed: no kubelet is needed for these (the pod's node has none)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support import unique

NS = "default"
WEBSOCKET_UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket",
                     "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                     "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}


CREATED: list[str] = []


@pytest.fixture(autouse=True)
async def remove_pods(http: httpx.AsyncClient) -> AsyncIterator[None]:
    """The pods a test made are deleted at once (no kubelet would ever confirm it)."""
    yield
    while CREATED:
        await http.delete(f"/api/v1/namespaces/{NS}/pods/{CREATED.pop()}",
                          params={"gracePeriodSeconds": "0"})


async def make_pod(http: httpx.AsyncClient, *, node: str | None = "nowhere",
                   containers: tuple[str, ...] = ("main",)) -> str:
    name = unique("stream-api")
    CREATED.append(name)
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if node:
        spec["nodeName"] = node
    answer = await http.post(f"/api/v1/namespaces/{NS}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    assert answer.status_code == 201, answer.text
    return name


def assert_status(answer: httpx.Response, code: int, reason: str, message: str) -> None:
    assert answer.status_code == code, answer.text
    body = answer.json()
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status", "Failure", reason, code)
    assert body["message"].startswith(message), body["message"]


@pytest.mark.parametrize(("subresource", "params", "message"), [
    ("exec", {"command": "ls"}, "you must specify at least 1 of stdin, stdout, stderr"),
    ("exec", {"stdout": "true"}, "you must specify at least 1 command"),
    ("exec", {"stdout": "maybe", "command": "ls"},
     'invalid value for query parameter "stdout": "maybe" is not a boolean'),
    ("exec", {"stdout": "true", "command": "ls", "follow": "true"},
     'unknown query parameter "follow" for pods/exec'),
    ("attach", {"stdout": "true", "command": "ls"},
     'unknown query parameter "command" for pods/attach'),
    ("portforward", {"ports": "http"}, 'invalid port "http"'),
    ("portforward", {"ports": "70000"}, 'invalid port "70000"'),
    ("exec", {"stdout": "true", "command": "ls", "container": "nope"},
     "container nope is not valid for pod"),
    ("exec", {"stdout": "true", "command": "ls"}, "Upgrade request required"),
    ("portforward", {"ports": "80"}, "Upgrade request required"),
])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_bad_stream_requests_are_refused(http: httpx.AsyncClient, subresource: str,
                                               params: dict[str, str], message: str,
                                               method: str) -> None:
    name = await make_pod(http)
    answer = await http.request(method, f"/api/v1/namespaces/{NS}/pods/{name}/{subresource}",
                                params=params)
    assert_status(answer, 400, "BadRequest", message)


async def test_a_pod_of_several_containers_needs_one_named(http: httpx.AsyncClient) -> None:
    name = await make_pod(http, containers=("app", "sidecar"))
    answer = await http.post(f"/api/v1/namespaces/{NS}/pods/{name}/exec",
                             params={"stdout": "true", "command": "ls"},
                             headers=WEBSOCKET_UPGRADE)
    assert_status(answer, 400, "BadRequest",
                  f"a container name must be specified for pod {name}, choose one of: "
                  f"[app sidecar]")


async def test_an_unscheduled_pod_has_no_host_to_stream_from(http: httpx.AsyncClient) -> None:
    name = await make_pod(http, node=None)
    answer = await http.post(f"/api/v1/namespaces/{NS}/pods/{name}/exec",
                             params={"stdout": "true", "command": "ls"},
                             headers=WEBSOCKET_UPGRADE)
    assert_status(answer, 400, "BadRequest", f"pod {name} does not have a host assigned")


async def test_a_missing_pod_or_node_is_not_found(http: httpx.AsyncClient) -> None:
    answer = await http.get(f"/api/v1/namespaces/{NS}/pods/no-such-pod/exec",
                            params={"stdout": "true", "command": "ls"},
                            headers=WEBSOCKET_UPGRADE)
    assert_status(answer, 404, "NotFound", 'pods "no-such-pod" not found')
    name = await make_pod(http, node=unique("no-such-node"))
    answer = await http.get(f"/api/v1/namespaces/{NS}/pods/{name}/portforward",
                            params={"ports": "80"}, headers=WEBSOCKET_UPGRADE)
    assert_status(answer, 404, "NotFound", 'nodes "no-such-node')


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
async def test_other_verbs_are_not_allowed(http: httpx.AsyncClient, method: str) -> None:
    name = await make_pod(http)
    answer = await http.request(method, f"/api/v1/namespaces/{NS}/pods/{name}/exec",
                                content=b"{}", headers={"Content-Type": "application/json"})
    assert answer.status_code == 405, answer.text
    assert answer.json()["reason"] == "MethodNotAllowed"


async def test_openapi_describes_the_connect_subresources(http: httpx.AsyncClient) -> None:
    paths = (await http.get("/openapi/v3/api/v1")).json()["paths"]
    item = paths["/api/v1/namespaces/{namespace}/pods/{name}/exec"]
    assert [item["get"]["operationId"], item["post"]["operationId"]] == [
        "connectCoreV1GetNamespacedPodExec", "connectCoreV1PostNamespacedPodExec"]
    assert [p["name"] for p in item["get"]["parameters"]] == [
        "command", "container", "stderr", "stdin", "stdout", "tty"]
    assert item["get"]["x-kubernetes-action"] == "connect"
    forward = paths["/api/v1/namespaces/{namespace}/pods/{name}/portforward"]
    assert [p["name"] for p in forward["post"]["parameters"]] == ["ports"]
    assert forward["post"]["x-kubernetes-group-version-kind"]["kind"] == \
        "PodPortForwardOptions"
    assert "/api/v1/namespaces/{namespace}/pods/{name}/attach" in paths
