"""The ReplicaSet controller end to end: a real apiserver (an etcd prefix of its own), the
real kubectl, and the controller-manager killed with -9 in the middle of a scale-up. Pods
stay unscheduled (no scheduler here): what is counted is what the controller made."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd, Kubectl, eventually, unique

RS_PATH = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def own_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("cm-rs")), name="apiserver-cm-rs",
                       extra_args=["--etcd-prefix", f"/{unique('cm-rs')}"]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubectl(own_apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(own_apiserver.url, Path(tmp_path_factory.mktemp("cm-rs-kubectl")))


@pytest.fixture
async def api(own_apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with own_apiserver.client() as client:
        yield client


def replica_set(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web",
                                                           "image": "kubelite/busybox:1.35",
                                                           "command": ["httpd", "-f"]}]}}}}


async def pods_of(api: httpx.AsyncClient, app: str) -> list[dict[str, Any]]:
    answer = await api.get(PODS, params={"labelSelector": f"app={app}"})
    assert answer.status_code == 200, answer.text
    return [p for p in answer.json()["items"] if not p["metadata"].get("deletionTimestamp")]


async def count_is(api: httpx.AsyncClient, app: str, want: int) -> list[dict[str, Any]]:
    pods = await pods_of(api, app)
    assert len(pods) == want, f"{len(pods)} pods"
    return pods


async def reasons(api: httpx.AsyncClient, name: str) -> list[str]:
    answer = await api.get("/api/v1/namespaces/default/events",
                           params={"fieldSelector": f"involvedObject.name={name}"})
    return [e["reason"] for e in answer.json()["items"] for _ in range(e.get("count") or 1)]


async def test_create_scale_adopt_release(api: httpx.AsyncClient, kubectl: Kubectl,
                                          own_apiserver: ApiServer, tmp_path: Path) -> None:
    name = unique("web")
    cm = ControllerManagerProcess(own_apiserver, tmp_path).start()
    try:
        await cm.wait_synced()
        kubectl.run("apply", "-f", "-", stdin=json.dumps(replica_set(name, 3)))
        pods = await eventually(lambda: count_is(api, name, 3), timeout=30,
                                what="3 pods")
        rs = (await api.get(f"{RS_PATH}/{name}")).json()
        for pod in pods:
            assert pod["metadata"]["generateName"] == f"{name}-"
            assert pod["metadata"]["ownerReferences"] == [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                "uid": rs["metadata"]["uid"], "controller": True,
                "blockOwnerDeletion": True}]

        async def status_counts() -> dict[str, Any]:
            status = (await api.get(f"{RS_PATH}/{name}")).json().get("status") or {}
            return status if status.get("replicas") == 3 else {}
        status = await eventually(status_counts, timeout=30, what="status.replicas 3")
        assert (status["fullyLabeledReplicas"], status["readyReplicas"],
                status["availableReplicas"], status["observedGeneration"]) == (3, 0, 0, 1)
        assert (await reasons(api, name)).count("SuccessfulCreate") == 3
        table = kubectl("get", "rs", name)
        assert table.split("\n")[1].split()[:4] == [name, "3", "3", "0"], table

        kubectl("scale", "rs", name, "--replicas=1")
        await eventually(lambda: count_is(api, name, 1), timeout=30, what="1 pod")
        await eventually(lambda: has_reasons(api, name, "SuccessfulDelete", 2), timeout=30,
                         what="2 SuccessfulDelete events")

        # An orphan that matches is adopted, and then is one too many.
        orphan = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": unique("orphan"), "labels": {"app": name}},
                  "spec": {"containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}}
        assert (await api.post(PODS, json=orphan)).status_code == 201
        await asyncio.sleep(2)
        await eventually(lambda: count_is(api, name, 1), timeout=30, what="still 1 pod")

        # A pod relabelled away is released, and replaced.
        kept = (await pods_of(api, name))[0]
        patched = await api.patch(f"{PODS}/{kept['metadata']['name']}",
                                  json={"metadata": {"labels": {"app": "elsewhere"}}},
                                  headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text

        async def released() -> bool:
            pod = (await api.get(f"{PODS}/{kept['metadata']['name']}")).json()
            return not pod["metadata"].get("ownerReferences")
        await eventually(released, timeout=30, what="the relabelled pod released")
        await eventually(lambda: count_is(api, name, 1), timeout=30, what="a replacement")
        await api.delete(f"{PODS}/{kept['metadata']['name']}")
    finally:
        cm.stop()


async def has_reasons(api: httpx.AsyncClient, name: str, reason: str, count: int) -> bool:
    return (await reasons(api, name)).count(reason) >= count


async def test_kill_9_mid_scale_up_ends_with_exactly_the_desired_pods(
        api: httpx.AsyncClient, own_apiserver: ApiServer, tmp_path: Path) -> None:
    name = unique("chaos")
    cm = ControllerManagerProcess(own_apiserver, tmp_path, name="cm-a").start()
    try:
        await cm.wait_synced()
        created = await api.post(RS_PATH, json=replica_set(name, 20))
        assert created.status_code == 201, created.text

        async def some() -> bool:
            return len(await pods_of(api, name)) >= 3
        await eventually(some, timeout=30, interval=0.05, what="the scale-up under way")
        cm.kill()
        seen = len(await pods_of(api, name))
        cm = ControllerManagerProcess(own_apiserver, tmp_path, name="cm-b").start()
        await eventually(lambda: count_is(api, name, 20), timeout=60, what="20 pods")
        await asyncio.sleep(3)  # nothing more comes
        await count_is(api, name, 20)
        assert seen <= 20

        # the status is cm-b's to write once it holds the lease (cm-a may have created
        # every pod and died before writing it)
        async def status_counts_them() -> bool:
            status = (await api.get(f"{RS_PATH}/{name}")).json()["status"]
            return status.get("replicas") == 20
        await eventually(status_counts_them, timeout=60, what="status.replicas 20")
        await count_is(api, name, 20)
    finally:
        cm.stop()
