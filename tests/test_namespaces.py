"""Namespace deletion: Terminating, emptied (pods gracefully), then gone."""

from __future__ import annotations

from typing import Any

import httpx

from apiserver.resources.namespaces import mark_terminating
from tests.support import eventually, unique


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}], **spec}}


def test_mark_terminating_is_idempotent() -> None:
    namespace = {"metadata": {"name": "x"}, "status": {"phase": "Active"}}
    marked = mark_terminating(namespace)
    assert marked is not None
    assert marked["status"]["phase"] == "Terminating" and marked["metadata"]["deletionTimestamp"]
    assert mark_terminating(marked) is None


async def test_built_in_namespaces_cannot_be_deleted(http: httpx.AsyncClient) -> None:
    for name in ("default", "kube-system", "kube-public"):
        r = await http.delete(f"/api/v1/namespaces/{name}")
        assert r.status_code == 403, r.text
        assert r.json()["reason"] == "Forbidden"
        assert r.json()["message"] == (
            f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        assert (await http.get(f"/api/v1/namespaces/{name}")).status_code == 200


async def test_deleting_a_namespace_empties_it_then_removes_it(http: httpx.AsyncClient) -> None:
    ns = unique("doomed")
    assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
    pods = f"/api/v1/namespaces/{ns}/pods"
    assert (await http.post(pods, json=pod("unbound"))).status_code == 201
    # bound to a node no kubelet serves: it waits for its (absent) kubelet, like on kube
    assert (await http.post(pods, json=pod("bound", nodeName="no-such-node"))).status_code == 201

    r = await http.delete(f"/api/v1/namespaces/{ns}")
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Terminating"

    async def unbound_gone_bound_stopping() -> bool:
        unbound = await http.get(f"{pods}/unbound")
        bound = (await http.get(f"{pods}/bound")).json()
        return unbound.status_code == 404 and bool(bound["metadata"].get("deletionTimestamp"))

    await eventually(unbound_gone_bound_stopping, what="the namespace's pods being deleted")
    namespace = (await http.get(f"/api/v1/namespaces/{ns}")).json()
    assert namespace["status"]["phase"] == "Terminating"

    r = await http.post(pods, json=pod("late"))
    assert r.status_code == 403, r.text
    assert r.json()["message"] == (f'pods "late" is forbidden: unable to create new content in '
                                   f'namespace {ns} because it is being terminated')

    # the kubelet's last word on a stopped pod: delete it with grace 0
    assert (await http.delete(f"{pods}/bound", params={"gracePeriodSeconds": "0"})).status_code == 200

    async def namespace_gone() -> bool:
        return (await http.get(f"/api/v1/namespaces/{ns}")).status_code == 404

    await eventually(namespace_gone, what=f"namespace {ns} to be removed")
