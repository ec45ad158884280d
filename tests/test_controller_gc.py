"""Garbage collector decisions (pure) and a cascade through the real apiserver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller_manager.garbagecollector import dependent_verdict, owner_action
from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd, eventually, unique


@pytest.mark.parametrize(("refs", "absent", "want"), [
    ([], set(), "keep"),
    ([{"uid": "a"}], {"a"}, "delete"),
    ([{"uid": "a"}, {"uid": "b"}], {"a"}, "strip"),
    ([{"uid": "a"}, {"uid": "b"}], {"a", "b"}, "delete"),
    ([{"uid": "a"}], set(), "keep"),
])
def test_dependent_verdict(refs: list[dict[str, Any]], absent: set[str], want: str) -> None:
    assert dependent_verdict(refs, absent) == want


@pytest.mark.parametrize(("meta", "want"), [
    ({}, None),
    ({"finalizers": ["orphan"]}, None),  # not being deleted
    ({"deletionTimestamp": "t", "finalizers": ["orphan"]}, "orphan"),
    ({"deletionTimestamp": "t", "finalizers": ["foregroundDeletion"]}, "foreground"),
    ({"deletionTimestamp": "t", "finalizers": ["example.com/x"]}, None),
])
def test_owner_action(meta: dict[str, Any], want: str | None) -> None:
    assert owner_action({"metadata": meta}) == want


@pytest.fixture(scope="module")
def own_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("cm-gc")), name="apiserver-cm-gc",
                       extra_args=["--etcd-prefix", f"/{unique('cm-gc')}"]).start()
    yield server
    server.stop()


@pytest.fixture
async def api(own_apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with own_apiserver.client() as client:
        yield client


RS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"


def replica_set(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}}}}


async def pod_count(api: httpx.AsyncClient, app: str) -> int:
    answer = await api.get(PODS, params={"labelSelector": f"app={app}"})
    return len(answer.json()["items"])


async def test_background_orphan_and_foreground_deletes(api: httpx.AsyncClient,
                                                        own_apiserver: ApiServer,
                                                        tmp_path: Path) -> None:
    cm = ControllerManagerProcess(own_apiserver, tmp_path).start()
    try:
        await cm.wait_synced()
        for policy in ("Background", "Orphan", "Foreground"):
            name = unique(policy.lower())
            assert (await api.post(RS, json=replica_set(name))).status_code == 201

            async def two(app: str = name) -> bool:
                return await pod_count(api, app) == 2
            await eventually(two, timeout=30, what=f"{policy}: 2 pods")
            deleted = await api.request("DELETE", f"{RS}/{name}", json={
                "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
            assert deleted.status_code in (200, 202), deleted.text

            async def rs_gone(rs_name: str = name) -> bool:
                return (await api.get(f"{RS}/{rs_name}")).status_code == 404
            await eventually(rs_gone, timeout=30, what=f"{policy}: the ReplicaSet gone")
            if policy == "Orphan":
                pods = (await api.get(PODS, params={"labelSelector": f"app={name}"})).json()
                assert len(pods["items"]) == 2
                assert all(not p["metadata"].get("ownerReferences") for p in pods["items"])
            else:
                async def none(app: str = name) -> bool:
                    return await pod_count(api, app) == 0
                await eventually(none, timeout=30, what=f"{policy}: the pods collected")
    finally:
        cm.stop()
