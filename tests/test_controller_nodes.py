"""The controller-manager's node lifecycle and taint eviction, end to end: a real
apiserver (an etcd prefix of its own, so that no other test's nodes are judged), API-only
nodes whose heartbeats the test sends or stops, and a real kubelet killed with -9."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.models import format_micro_time
from common.timestamps import rfc3339
from tests.cm_support import ControllerManagerProcess
from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.support import ApiServer, Etcd, SchedulerProcess, eventually, unique

FAST = ("--node-monitor-grace-period", "3s", "--node-monitor-period", "500ms")
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def own_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("cm-nodes")), name="apiserver-cm",
                       extra_args=["--etcd-prefix", f"/{unique('cm-nodes')}"]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def controller_manager(own_apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[ControllerManagerProcess]:
    cm = ControllerManagerProcess(own_apiserver, Path(tmp_path_factory.mktemp("cm")),
                                  extra_args=FAST).start()
    yield cm
    cm.stop()


@pytest.fixture
async def api(own_apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with own_apiserver.client() as client:
        yield client


def ready_condition(heartbeat: str) -> dict[str, Any]:
    return {"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": heartbeat}


async def create_node(api: httpx.AsyncClient, name: str) -> None:
    now = rfc3339()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [ready_condition(now)]}}
    answer = await api.post("/api/v1/nodes", json=node)
    assert answer.status_code == 201, answer.text
    await renew_lease(api, name)


async def renew_lease(api: httpx.AsyncClient, name: str) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    spec = {"holderIdentity": name, "leaseDurationSeconds": 40,
            "renewTime": format_micro_time(datetime.now(UTC))}
    answer = await api.get(f"{path}/{name}")
    if answer.status_code == 404:
        created = await api.post(path, json={"apiVersion": "coordination.k8s.io/v1",
                                             "kind": "Lease", "metadata": {"name": name},
                                             "spec": spec})
        assert created.status_code == 201, created.text
        return
    lease = answer.json()
    lease["spec"].update(spec)
    assert (await api.put(f"{path}/{name}", json=lease)).status_code == 200


async def create_pod(api: httpx.AsyncClient, name: str, node: str,
                     tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeName": node, "tolerations": tolerations or [],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "kubelite/busybox:1.35",
                                    "command": ["sleep", "3600"]}]}}
    answer = await api.post("/api/v1/namespaces/default/pods", json=pod)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def get(api: httpx.AsyncClient, path: str) -> dict[str, Any]:
    answer = await api.get(path)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def conditions_of(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def events_for(api: httpx.AsyncClient, name: str, namespace: str = "default"
                     ) -> list[dict[str, Any]]:
    listed = await get(api, f"/api/v1/namespaces/{namespace}/events"
                            f"?fieldSelector=involvedObject.name={name}")
    return list(listed["items"])


async def test_a_silent_node_goes_unknown_is_tainted_and_its_pods_evicted(
        api: httpx.AsyncClient, controller_manager: ControllerManagerProcess) -> None:
    node = unique("silent")
    await create_node(api, node)
    brief = await create_pod(api, unique("brief"), node, [
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 2}])
    patient = await create_pod(api, unique("patient"), node)  # the 300 s defaults
    await controller_manager.wait_synced()

    async def unknown() -> dict[str, Any]:
        found = await get(api, f"/api/v1/nodes/{node}")
        return found if conditions_of(found)["Ready"]["status"] == "Unknown" else {}
    silent = await eventually(unknown, timeout=30, what="Ready=Unknown")
    ready = conditions_of(silent)["Ready"]
    assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown",
                                                   "Kubelet stopped posting node status.")
    assert conditions_of(silent)["DiskPressure"]["reason"] == "NodeStatusNeverUpdated"

    async def tainted() -> list[dict[str, Any]]:
        found = await get(api, f"/api/v1/nodes/{node}")
        return [t for t in found["spec"].get("taints") or [] if t["key"] == UNREACHABLE]
    taints = await eventually(tainted, timeout=30, what="the unreachable taints")
    assert sorted(t["effect"] for t in taints) == ["NoExecute", "NoSchedule"]
    assert "timeAdded" in next(t for t in taints if t["effect"] == "NoExecute")

    async def evicted() -> dict[str, Any]:
        found = await get(api, f"/api/v1/namespaces/default/pods/{brief['metadata']['name']}")
        return found if found["metadata"].get("deletionTimestamp") else {}
    gone = await eventually(evicted, timeout=30, what="the 2 s pod to be evicted")
    target = conditions_of(gone)["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "DeletionByTaintManager")
    assert conditions_of(gone).get("Ready", {}).get("status") in (None, "False")
    reasons = {e["reason"]: e for e in await events_for(api, brief["metadata"]["name"])}
    assert reasons["TaintManagerEviction"]["message"] == (
        f"Marking for deletion Pod default/{brief['metadata']['name']}")
    node_events = {e["reason"]: e for e in await events_for(api, node)}
    assert node_events["NodeNotReady"]["message"] == f"Node {node} status is now: NodeNotReady"
    assert node_events["NodeNotReady"]["source"]["component"] == "node-controller"

    still = await get(api, f"/api/v1/namespaces/default/pods/{patient['metadata']['name']}")
    assert not still["metadata"].get("deletionTimestamp"), "it tolerates for 300 s"

    # The kubelet comes back: Ready again, the controller's taints go.
    found = await get(api, f"/api/v1/nodes/{node}")
    found["status"]["conditions"] = [ready_condition(rfc3339())]
    assert (await api.put(f"/api/v1/nodes/{node}/status", json=found)).status_code == 200
    await renew_lease(api, node)
    assert await eventually(lambda: untainted(api, node), timeout=30, what="taints removed")
    for pod in (brief, patient):
        await api.delete(f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}",
                         params={"gracePeriodSeconds": "0"})


async def untainted(api: httpx.AsyncClient, node: str) -> bool:
    found = await get(api, f"/api/v1/nodes/{node}")
    return not [t for t in found["spec"].get("taints") or []
                if t["key"].startswith("node.kubernetes.io/")]


async def test_a_noexecute_taint_added_by_hand_evicts_what_does_not_tolerate_it(
        api: httpx.AsyncClient, controller_manager: ControllerManagerProcess) -> None:
    node = unique("tainted")
    await create_node(api, node)
    heartbeat = asyncio.create_task(keep_renewing(api, node))
    try:
        plain = await create_pod(api, unique("plain"), node)
        tolerant = await create_pod(api, unique("tolerant"), node, [
            {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}])
        await controller_manager.wait_synced()
        found = await get(api, f"/api/v1/nodes/{node}")
        found.setdefault("spec", {})["taints"] = [{"key": "maintenance", "value": "now",
                                                  "effect": "NoExecute"}]
        assert (await api.put(f"/api/v1/nodes/{node}", json=found)).status_code == 200

        async def evicted() -> bool:
            pod = await get(api, f"/api/v1/namespaces/default/pods/{plain['metadata']['name']}")
            return bool(pod["metadata"].get("deletionTimestamp"))
        await eventually(evicted, timeout=30, what="the untolerating pod evicted")
        await asyncio.sleep(2)
        kept = await get(api, f"/api/v1/namespaces/default/pods/{tolerant['metadata']['name']}")
        assert not kept["metadata"].get("deletionTimestamp")
        node_now = await get(api, f"/api/v1/nodes/{node}")
        assert conditions_of(node_now)["Ready"]["status"] == "True", "heartbeats kept it Ready"
    finally:
        heartbeat.cancel()
        for name in ("plain", "tolerant"):
            pod = locals().get(name)
            if pod:
                await api.delete(f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}",
                                 params={"gracePeriodSeconds": "0"})


async def keep_renewing(api: httpx.AsyncClient, node: str) -> None:
    while True:
        await renew_lease(api, node)
        await asyncio.sleep(0.5)


async def test_endpoint_health_readiness_and_leader_metric(
        controller_manager: ControllerManagerProcess) -> None:
    await controller_manager.wait_synced()
    async with httpx.AsyncClient(base_url=controller_manager.url, timeout=10) as client:
        assert (await client.get("/healthz")).text == "ok"
        assert (await client.get("/readyz")).text == "ok"
        metrics = (await client.get("/metrics")).text
    assert 'leader_election_master_status{name="kube-controller-manager"} 1' in metrics
    assert 'workqueue_adds_total{name="taint-eviction-controller"}' in metrics
    # The endpoint's lines are the controller-manager's own (the shell is shared with the
    # scheduler, its logger is not).
    log = controller_manager.process.log()
    assert " controller_manager INFO serving /healthz" in log
    assert " scheduler " not in log


async def test_a_kubelet_killed_for_good_has_its_pod_evicted_and_back_it_cleans_up(
        api: httpx.AsyncClient, own_apiserver: ApiServer,
        controller_manager: ControllerManagerProcess, tmp_path: Path) -> None:
    ensure_docker()
    node = unique("doomed")
    kubelet = KubeletProcess(own_apiserver, tmp_path, node_name=node).start()
    try:
        pod = await create_pod(api, unique("web"), node, [
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 3}])
        name = pod["metadata"]["name"]

        async def running() -> bool:
            found = await get(api, f"/api/v1/namespaces/default/pods/{name}")
            return found["status"].get("phase") == "Running"
        await eventually(running, timeout=90, what="the pod Running")
        kubelet.kill()

        async def evicted() -> bool:
            found = await get(api, f"/api/v1/namespaces/default/pods/{name}")
            return bool(found["metadata"].get("deletionTimestamp"))
        await eventually(evicted, timeout=30, what="the pod evicted after 3 s unreachable")
        assert not await untainted(api, node)

        kubelet = KubeletProcess(own_apiserver, tmp_path, node_name=node).start()

        async def pod_gone() -> bool:
            answer = await api.get(f"/api/v1/namespaces/default/pods/{name}")
            return answer.status_code == 404
        await eventually(pod_gone, timeout=90, what="the back kubelet to finish the pod")
        assert await eventually(lambda: untainted(api, node), timeout=30,
                                what="the node Ready and untainted again")
        assert node_containers(node, **{"io.kubernetes.pod.name": name}) == []
    finally:
        kubelet.stop()
        remove_node_containers(node)


TOLERATION_SECONDS = 5


async def test_the_node_failure_story_replicaset_pods_come_back_on_a_healthy_node(
        api: httpx.AsyncClient, own_apiserver: ApiServer,
        controller_manager: ControllerManagerProcess, tmp_path: Path) -> None:
    """Two real kubelets, a ReplicaSet of 2 whose template tolerates an unreachable node
    for 5 s (as a kube user shortens the 300 s DefaultTolerationSeconds): one kubelet is
    killed with -9 for good; its pods are evicted and the ReplicaSet's pods run again,
    all on the healthy node, within the toleration + 30 s of the kill."""
    ensure_docker()
    doomed, healthy = unique("doomed"), unique("healthy")
    app = unique("story")
    kubelets = {name: KubeletProcess(own_apiserver, tmp_path, node_name=name).start()
                for name in (doomed, healthy)}
    scheduler = SchedulerProcess(own_apiserver, tmp_path, port=0, leader_elect=False).start()
    pods_path = "/api/v1/namespaces/default/pods"
    try:
        template = {"metadata": {"labels": {"app": app}}, "spec": {
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": TOLERATION_SECONDS}],
            # Only these two nodes (others in this apiserver are other tests' API-only ones).
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": "kubernetes.io/hostname", "operator": "In",
                    "values": [doomed, healthy]}]}]}}},
            "containers": [{"name": "c", "image": "kubelite/busybox:1.35",
                            "command": ["sleep", "3600"]}]}}
        created = await api.post("/apis/apps/v1/namespaces/default/replicasets", json={
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": app},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                     "template": template}})
        assert created.status_code == 201, created.text

        async def pods() -> list[dict[str, Any]]:
            listed = await get(api, f"{pods_path}?labelSelector=app={app}")
            return list(listed["items"])

        async def running_on(nodes: set[str]) -> list[dict[str, Any]] | None:
            live = [p for p in await pods() if not p["metadata"].get("deletionTimestamp")]
            ok = len(live) == 2 and all(p["status"].get("phase") == "Running"
                                        and p["spec"].get("nodeName") in nodes for p in live)
            return live if ok else None
        first = await eventually(lambda: running_on({doomed, healthy}), timeout=120,
                                 what="2 pods Running on the two nodes")
        assert first is not None
        victim = next(n for n in (doomed, healthy)
                       if any(p["spec"]["nodeName"] == n for p in first))
        survivor = healthy if victim == doomed else doomed
        lost = {p["metadata"]["name"] for p in first if p["spec"]["nodeName"] == victim}

        kubelets[victim].kill()
        # The requirement itself is the timeout: back within the toleration + 30 s.
        back = await eventually(lambda: running_on({survivor}), timeout=TOLERATION_SECONDS + 30,
                                what="the ReplicaSet's 2 pods Running on the healthy node")
        assert back is not None
        assert not lost & {p["metadata"]["name"] for p in back}
        for name in lost:  # evicted by the taint manager, in kube's words
            found = await get(api, f"{pods_path}/{name}")
            assert found["metadata"].get("deletionTimestamp"), found
            assert conditions_of(found)["DisruptionTarget"]["reason"] == "DeletionByTaintManager"
            reasons = {e["reason"] for e in await events_for(api, name)}
            assert "TaintManagerEviction" in reasons, reasons
        assert not await untainted(api, victim)
    finally:
        scheduler.stop()
        for kubelet in kubelets.values():
            kubelet.stop()
        await api.delete(f"/apis/apps/v1/namespaces/default/replicasets/{app}")
        # The dead node's pods never finish terminating: remove them as an admin would.
        for pod in (await get(api, f"{pods_path}?labelSelector=app={app}"))["items"]:
            await api.delete(f"{pods_path}/{pod['metadata']['name']}",
                             params={"gracePeriodSeconds": "0"})
        for name in (doomed, healthy):
            remove_node_containers(name)
