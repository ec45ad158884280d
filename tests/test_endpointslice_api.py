"""The EndpointSlice controller against a real apiserver (an etcd prefix of its own) and the
real controller-manager process, as system:kube-controller-manager; the test plays the kubelet, writing the pods' status
(IP, Ready) itself, so each step is exact. The Docker end to end is
test_endpointslice_e2e.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd, eventually, unique

PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


@pytest.fixture(scope="module")
def own_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("cm-eps")), name="apiserver-cm-eps",
                       extra_args=["--etcd-prefix", f"/{unique('cm-eps')}"]).start()
    yield server
    server.stop()


@pytest.fixture
async def api(own_apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with own_apiserver.client() as client:
        yield client


def controller_manager(apiserver: ApiServer, workdir: Path) -> ControllerManagerProcess:
    # One worker: the Services' syncs run in the order they were queued.
    return ControllerManagerProcess(apiserver, workdir, extra_args=(
        "--leader-elect=false", "--controllers=endpointslice", "--concurrent-syncs=1"))


async def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def make_node(api: httpx.AsyncClient, name: str, zone: str) -> None:
    await ok(await api.post("/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}}))


async def make_pod(api: httpx.AsyncClient, name: str, app: str, node: str, ip: str | None,
                   *, ready: bool, port: int = 8080) -> dict[str, Any]:
    pod = await ok(await api.post(PODS, json={
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [
            {"name": "web", "image": "kubelite/busybox:1.35",
             "ports": [{"name": "http", "containerPort": port}]}]}}))
    if ip is not None:
        pod = await set_status(api, pod, ip=ip, ready=ready)
    return pod


async def set_status(api: httpx.AsyncClient, pod: dict[str, Any], *, ip: str,
                     ready: bool) -> dict[str, Any]:
    """What the kubelet reports: Running, its IP, the Ready condition."""
    current = await ok(await api.get(f"{PODS}/{pod['metadata']['name']}"))
    current["status"] = {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return await ok(await api.put(f"{PODS}/{pod['metadata']['name']}/status", json=current))


async def slices_of(api: httpx.AsyncClient, service: str) -> list[dict[str, Any]]:
    listed = await ok(await api.get(SLICES, params={
        "labelSelector": f"kubernetes.io/service-name={service}"}))
    return list(listed["items"])


def by_pod(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["targetRef"]["name"]: e for s in slices for e in s.get("endpoints") or []}


async def test_slices_follow_pods(api: httpx.AsyncClient, own_apiserver: ApiServer,
                                  tmp_path: Path) -> None:
    app, node = unique("web"), unique("eps-node")
    await make_node(api, node, "zone-a")
    cm = controller_manager(own_apiserver, tmp_path).start()
    try:
        await cm.wait_synced()
        a = await make_pod(api, f"{app}-a", app, node, "10.1.0.2", ready=True)
        await make_pod(api, f"{app}-b", app, node, "10.1.0.3", ready=False)
        await make_pod(api, f"{app}-c", app, node, None, ready=False)  # no IP yet
        service = await ok(await api.post(SERVICES, json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
            "spec": {"selector": {"app": app},
                     "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}))

        async def two_endpoints() -> list[dict[str, Any]] | None:
            found = await slices_of(api, app)
            return found if len(by_pod(found)) == 2 else None

        [slice_] = await eventually(two_endpoints, timeout=30, what="2 endpoints")
        assert slice_["metadata"]["generateName"] == f"{app}-"
        assert slice_["metadata"]["ownerReferences"][0]["uid"] == service["metadata"]["uid"]
        assert slice_["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
        endpoints = by_pod([slice_])
        assert endpoints[f"{app}-a"] == {
            "addresses": ["10.1.0.2"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": node, "zone": "zone-a",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": f"{app}-a",
                          "uid": a["metadata"]["uid"]}}
        assert endpoints[f"{app}-b"]["conditions"]["ready"] is False

        # a turns unready, b ready: updated in place, the same slice
        await set_status(api, a, ip="10.1.0.2", ready=False)
        await set_status(api, {"metadata": {"name": f"{app}-b"}}, ip="10.1.0.3", ready=True)

        async def flipped() -> list[dict[str, Any]] | None:
            found = await slices_of(api, app)
            ready = {k: e["conditions"]["ready"] for k, e in by_pod(found).items()}
            return found if ready == {f"{app}-a": False, f"{app}-b": True} else None

        [updated] = await eventually(flipped, timeout=30, what="readiness flipped")
        assert updated["metadata"]["name"] == slice_["metadata"]["name"]

        # c gets its IP; a is deleted (no kubelet: it goes at once)
        await set_status(api, {"metadata": {"name": f"{app}-c"}}, ip="10.1.0.4", ready=True)
        assert (await api.delete(f"{PODS}/{app}-a", params={"gracePeriodSeconds": "0"})
                ).status_code == 200

        async def moved() -> bool:
            return set(by_pod(await slices_of(api, app))) == {f"{app}-b", f"{app}-c"}

        await eventually(moved, timeout=30, what="a out, c in")

        # A restarted controller-manager rewrites nothing (nothing changed), and writes no
        # second slice: the second Service's slice comes after the first Service's sync.
        before = await slices_of(api, app)
        cm.kill()
        cm = controller_manager(own_apiserver, tmp_path).start()
        await cm.wait_synced()
        other = unique("other")
        await ok(await api.post(SERVICES, json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": other},
            "spec": {"selector": {"app": other}, "ports": [{"port": 80}]}}))

        async def placeholder() -> list[dict[str, Any]] | None:
            found = await slices_of(api, other)
            return found if found else None

        [empty] = await eventually(placeholder, timeout=30, what="the placeholder slice")
        assert empty.get("endpoints") in (None, []) and empty.get("ports") in (None, [])
        after = await slices_of(api, app)
        assert [s["metadata"]["resourceVersion"] for s in after] == [
            s["metadata"]["resourceVersion"] for s in before]
    finally:
        cm.stop()


async def test_many_pods_split_in_slices_of_100(api: httpx.AsyncClient,
                                                own_apiserver: ApiServer,
                                                tmp_path: Path) -> None:
    app, node = unique("many"), unique("eps-node")
    await make_node(api, node, "zone-b")
    for i in range(150):
        await make_pod(api, f"{app}-{i:03d}", app, node, f"10.2.{i // 200}.{i % 200 + 2}",
                       ready=True)
    cm = controller_manager(own_apiserver, tmp_path).start()
    try:
        await cm.wait_synced()
        await ok(await api.post(SERVICES, json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
            "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}}))

        async def all_there() -> list[dict[str, Any]] | None:
            found = await slices_of(api, app)
            return found if len(by_pod(found)) == 150 else None

        found = await eventually(all_there, timeout=60, what="150 endpoints")
        assert sorted(len(s["endpoints"]) for s in found) == [50, 100]
    finally:
        cm.stop()
