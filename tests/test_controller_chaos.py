"""Chaos: the controller-manager killed with SIGKILL during a rolling update of a
20-replica Deployment and during a cascading (foreground) delete; after a restart exactly
the desired pods exist, none is orphaned, the rollout completes and the cascade finishes.

API-only nodes and the real scheduler; a tiny fake kubelet in this module (a poll loop
with the admin client) marks bound pods Running and Ready through the status
sub-resource and completes graceful deletions of bound pods, as a kubelet would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.timestamps import rfc3339
from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd, SchedulerProcess, eventually, unique

REPLICAS = 20
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
RSS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"
# the node lifecycle controllers would taint the heartbeat-less fake nodes: not under test
CONTROLLERS = ("--controllers=*,-node-lifecycle-controller,-taint-eviction-controller",)


@dataclass
class Cluster:
    apiserver: ApiServer
    workdir: Path


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady"}],
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}


@pytest.fixture(scope="module")
def cluster(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = Path(tmp_path_factory.mktemp("cm-chaos"))
    apiserver = ApiServer(etcd, workdir, name="apiserver-cm-chaos",
                          extra_args=["--etcd-prefix", f"/{unique('cm-chaos')}"]).start()
    scheduler = SchedulerProcess(apiserver, workdir, port=0, leader_elect=False).start()
    try:
        yield Cluster(apiserver, workdir)
    finally:
        scheduler.stop()
        apiserver.stop()


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    async with cluster.apiserver.client() as client:
        for i in range(3):
            r = await client.post("/api/v1/nodes", json=node(f"chaos-node-{i}"))
            assert r.status_code in (201, 409), r.text
        yield client


def running_ready(pod: dict[str, Any]) -> dict[str, Any]:
    now = rfc3339()
    conditions = [{"type": kind, "status": "True", "lastTransitionTime": now}
                  for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    return {**pod, "status": {**(pod.get("status") or {}), "phase": "Running",
                              "startTime": now, "conditions": conditions}}


async def fake_kubelet(api: httpx.AsyncClient, app: str) -> None:
    """Bound pods become Running and Ready; bound pods being deleted are removed."""
    while True:
        listed = (await api.get(PODS, params={"labelSelector": f"app={app}"})).json()
        for pod in listed["items"]:
            meta, spec = pod["metadata"], pod["spec"]
            if not spec.get("nodeName"):
                continue
            if meta.get("deletionTimestamp"):
                await api.request("DELETE", f"{PODS}/{meta['name']}", json={
                    "kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                    "preconditions": {"uid": meta["uid"]}})
            elif (pod.get("status") or {}).get("phase") != "Running":
                await api.put(f"{PODS}/{meta['name']}/status", json=running_ready(pod))
        await asyncio.sleep(0.3)


@contextlib.asynccontextmanager
async def kubelet(api: httpx.AsyncClient, app: str) -> AsyncIterator[None]:
    task = asyncio.create_task(fake_kubelet(api, app))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "web", "image": "kubelite/busybox:1.35",
                                         "env": [{"name": "ROLL", "value": "0"}]}]}}}}


async def pods_of(api: httpx.AsyncClient, app: str) -> list[dict[str, Any]]:
    return list((await api.get(PODS, params={"labelSelector": f"app={app}"})).json()["items"])


async def rss_of(api: httpx.AsyncClient, app: str) -> list[dict[str, Any]]:
    return list((await api.get(RSS, params={"labelSelector": f"app={app}"})).json()["items"])


async def rolled_out(api: httpx.AsyncClient, name: str) -> bool:
    got = (await api.get(f"{DEPLOYMENTS}/{name}")).json()
    status = got.get("status") or {}
    progressing = {c["type"]: c for c in status.get("conditions") or []}.get("Progressing", {})
    return (status.get("observedGeneration") == got["metadata"]["generation"]
            and status.get("updatedReplicas") == REPLICAS == status.get("replicas")
            and status.get("availableReplicas") == REPLICAS
            and progressing.get("reason") == "NewReplicaSetAvailable")


def restart(cm: ControllerManagerProcess, cluster: Cluster, name: str,
            ) -> ControllerManagerProcess:
    cm.kill()
    return ControllerManagerProcess(cluster.apiserver, cluster.workdir, name=name,
                                    extra_args=CONTROLLERS).start()


async def test_kill_during_a_rolling_update(api: httpx.AsyncClient, cluster: Cluster) -> None:
    name = unique("chaos-roll")
    cm = ControllerManagerProcess(cluster.apiserver, cluster.workdir, name="cm-roll-a",
                                  extra_args=CONTROLLERS).start()
    try:
        async with kubelet(api, name):
            await cm.wait_synced()
            assert (await api.post(DEPLOYMENTS, json=deployment(name))).status_code == 201

            async def complete() -> bool:
                return await rolled_out(api, name)
            await eventually(complete, timeout=120, what="the first rollout")
            first = {p["metadata"]["labels"]["pod-template-hash"]
                     for p in await pods_of(api, name)}
            assert len(first) == 1

            r = await api.patch(f"{DEPLOYMENTS}/{name}", json={"spec": {"template": {"spec": {
                "containers": [{"name": "web", "env": [{"name": "ROLL", "value": "1"}]}]}}}},
                headers={"Content-Type": "application/strategic-merge-patch+json"})
            assert r.status_code == 200, r.text

            async def midway() -> bool:  # some new pods, old ones still there
                hashes = [p["metadata"]["labels"]["pod-template-hash"]
                          for p in await pods_of(api, name)]
                return len(set(hashes)) == 2 and sum(h in first for h in hashes) >= 5
            await eventually(midway, timeout=60, what="the rolling update under way")
            cm = restart(cm, cluster, "cm-roll-b")
            await cm.wait_synced()
            await eventually(complete, timeout=180, what="the rollout after the restart")

            async def exactly_the_desired_pods() -> bool:
                pods = await pods_of(api, name)
                return len(pods) == REPLICAS and not any(
                    p["metadata"].get("deletionTimestamp") for p in pods)
            await eventually(exactly_the_desired_pods, timeout=60, what="20 pods, no others")
            pods = await pods_of(api, name)
            rss = {rs["metadata"]["uid"]: rs for rs in await rss_of(api, name)}
            new = [rs for rs in rss.values() if rs["spec"]["replicas"] == REPLICAS]
            assert len(new) == 1 and len(rss) == 2, [
                (rs["metadata"]["name"], rs["spec"]["replicas"]) for rs in rss.values()]
            new_hash = new[0]["metadata"]["labels"]["pod-template-hash"]
            assert new_hash not in first
            for pod in pods:  # no orphans: each owned by the new ReplicaSet
                owners = [ref["uid"] for ref in pod["metadata"].get("ownerReferences") or []
                          if ref.get("controller")]
                assert owners == [new[0]["metadata"]["uid"]], pod["metadata"]
                assert pod["metadata"]["labels"]["pod-template-hash"] == new_hash
            assert (await api.delete(f"{DEPLOYMENTS}/{name}")).status_code == 200

            async def cleaned() -> bool:
                return not await pods_of(api, name) and not await rss_of(api, name)
            await eventually(cleaned, timeout=60, what="the deployment's cleanup")
    finally:
        cm.stop()


async def test_kill_during_a_cascading_delete(api: httpx.AsyncClient, cluster: Cluster) -> None:
    """The controller-manager dies right after the DELETE; the fake kubelet is away until
    after the restart, so the bound pods are all still there then."""
    name = unique("chaos-del")
    cm = ControllerManagerProcess(cluster.apiserver, cluster.workdir, name="cm-del-a",
                                  extra_args=CONTROLLERS).start()
    try:
        async with kubelet(api, name):
            await cm.wait_synced()
            assert (await api.post(DEPLOYMENTS, json=deployment(name))).status_code == 201

            async def complete() -> bool:
                return await rolled_out(api, name)
            await eventually(complete, timeout=120, what="the rollout")
        r = await api.request("DELETE", f"{DEPLOYMENTS}/{name}", json={
            "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
        assert r.status_code in (200, 202), r.text

        # killed at once: the collector has at most begun (bound pods cannot go without
        # their kubelet, so all 20 are still there whatever it did)
        cm = restart(cm, cluster, "cm-del-b")
        assert len(await pods_of(api, name)) == REPLICAS
        async with kubelet(api, name):
            async def all_gone() -> bool:
                gone = (await api.get(f"{DEPLOYMENTS}/{name}")).status_code == 404
                return gone and not await rss_of(api, name) and not await pods_of(api, name)
            await eventually(all_gone, timeout=120, what="the cascade after the restart")
    finally:
        cm.stop()
