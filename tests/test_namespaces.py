"""Namespace deletion: Terminating, emptied (pods gracefully) by the controller-manager's
namespace controller, finalized, then gone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apiserver.resources.namespaces import mark_terminating, should_delete_during_update
from controller_manager import namespace
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


# -- the namespace controller's decisions (controller_manager/namespace.py) -------------------

def test_deletable_resources_are_namespaced_listable_deletable_and_not_subresources() -> None:
    resource_list = {"groupVersion": "apps/v1", "resources": [
        {"name": "deployments", "namespaced": True, "verbs": ["list", "delete", "get"]},
        {"name": "deployments/scale", "namespaced": True, "verbs": ["get", "update"]},
        {"name": "controllerrevisions", "namespaced": True, "verbs": ["get", "list"]},
        {"name": "nodes", "namespaced": False, "verbs": ["list", "delete"]},
    ]}
    found = namespace.deletable_resources("/apis/apps/v1", resource_list)
    assert [(r.plural, r.group, r.group_resource) for r in found] == [
        ("deployments", "apps", "deployments.apps")]
    core = namespace.deletable_resources("/api/v1", {"groupVersion": "v1", "resources": [
        {"name": "pods", "namespaced": True, "verbs": ["list", "delete"]}]})
    assert [r.group_resource for r in core] == ["pods"]


@pytest.mark.parametrize(("content", "expected"), [
    (namespace.Content(), [
        ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
         "All resources successfully discovered"),
        ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
         "All legacy kube types successfully parsed"),
        ("NamespaceDeletionContentFailure", "False", "ContentDeleted",
         "All content successfully deleted, may be waiting on finalization"),
        ("NamespaceContentRemaining", "False", "ContentRemoved",
         "All content successfully removed"),
        ("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
         "All content-preserving finalizers finished")]),
    (namespace.Content(remaining={"pods": 2, "deployments.apps": 1},
                       finalizers={"example.com/hold": 1},
                       deletion_errors=["pods: boom"]), [
        ("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered",
         "All resources successfully discovered"),
        ("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions",
         "All legacy kube types successfully parsed"),
        ("NamespaceDeletionContentFailure", "True", "ContentDeletionFailed",
         "Failed to delete all resource types, 1 remaining: pods: boom"),
        ("NamespaceContentRemaining", "True", "SomeResourcesRemain",
         "Some resources are remaining: deployments.apps has 1 resource instances, "
         "pods has 2 resource instances"),
        ("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
         "Some content in the namespace has finalizers remaining: example.com/hold in 1 "
         "resource instances")]),
])
def test_deletion_conditions(content: namespace.Content,
                             expected: list[tuple[str, str, str, str]]) -> None:
    got = namespace.deletion_conditions(content)
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in got] == expected


def test_merged_conditions_keep_the_transition_time_of_unchanged_ones() -> None:
    old = [{"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
            "message": "m", "lastTransitionTime": "T0"},
           {"type": "Other", "status": "True", "lastTransitionTime": "T0"}]
    new = [namespace.condition("NamespaceContentRemaining", True, "SomeResourcesRemain", "m"),
           namespace.condition("NamespaceFinalizersRemaining", False, "r", "x")]
    merged = namespace.merged_conditions(old, new, "T1")
    assert [(c["type"], c["lastTransitionTime"]) for c in merged] == [
        ("NamespaceContentRemaining", "T0"), ("NamespaceFinalizersRemaining", "T1"),
        ("Other", "T0")]
    changed = namespace.merged_conditions(
        old, [namespace.condition("NamespaceContentRemaining", False, "ContentRemoved", "m")],
        "T1")
    assert changed[0]["lastTransitionTime"] == "T1"


@pytest.mark.parametrize(("ns", "expected"), [
    ({"metadata": {}, "spec": {"finalizers": ["kubernetes"]}}, False),
    ({"metadata": {"deletionTimestamp": "t"}, "spec": {"finalizers": ["kubernetes"]}}, True),
    ({"metadata": {"deletionTimestamp": "t"}, "spec": {"finalizers": ["example.com/x"]}}, False),
    ({"metadata": {"deletionTimestamp": "t"}, "spec": {}}, False),
])
def test_needs_emptying(ns: dict[str, Any], expected: bool) -> None:
    assert namespace.needs_emptying(ns) is expected


@pytest.mark.parametrize(("new", "old", "expected"), [
    ({"metadata": {}, "spec": {"finalizers": []}},
     {"metadata": {"deletionTimestamp": "t"}}, True),
    ({"metadata": {"finalizers": ["example.com/x"]}, "spec": {"finalizers": []}},
     {"metadata": {"deletionTimestamp": "t"}}, False),
    ({"metadata": {}, "spec": {"finalizers": ["kubernetes"]}},
     {"metadata": {"deletionTimestamp": "t"}}, False),
    ({"metadata": {}, "spec": {"finalizers": []}}, {"metadata": {}}, False),
])
def test_should_delete_namespace_during_update(new: dict[str, Any], old: dict[str, Any],
                                               expected: bool) -> None:
    assert should_delete_during_update(new, old) is expected


# -- the apiserver's side: finalize, conditions, immediate removal ----------------------------

async def test_finalize_removes_a_terminating_namespace_once_no_finalizer_is_left(
        http: httpx.AsyncClient) -> None:
    ns = unique("finalize")
    body = {"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes", "example.com/hold"]}}
    assert (await http.post("/api/v1/namespaces", json=body)).status_code == 201
    assert (await http.get(f"/api/v1/namespaces/{ns}/finalize")).status_code == 405
    r = await http.delete(f"/api/v1/namespaces/{ns}")
    assert r.status_code == 200 and r.json()["status"]["phase"] == "Terminating", r.text

    async def only_ours_removed() -> bool:  # the controller finalizes; the hold stays
        got = (await http.get(f"/api/v1/namespaces/{ns}")).json()
        return got["spec"]["finalizers"] == ["example.com/hold"]

    await eventually(only_ours_removed, what="the namespace controller's finalize")
    got = (await http.get(f"/api/v1/namespaces/{ns}")).json()
    conditions = {c["type"]: c for c in got["status"]["conditions"]}
    assert conditions["NamespaceContentRemaining"]["reason"] == "ContentRemoved"
    assert got["status"]["phase"] == "Terminating"
    # a finalize changes only spec.finalizers: the label sent is not stored
    sent = {**got, "metadata": {**got["metadata"], "labels": {"x": "y"}}, "spec": {"finalizers": []}}
    r = await http.put(f"/api/v1/namespaces/{ns}/finalize", json=sent)
    assert r.status_code == 200, r.text
    assert "x" not in r.json()["metadata"]["labels"]
    assert (await http.get(f"/api/v1/namespaces/{ns}")).status_code == 404


async def test_a_namespace_without_finalizers_is_removed_at_once(http: httpx.AsyncClient) -> None:
    ns = unique("bare")
    assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
    got = (await http.get(f"/api/v1/namespaces/{ns}")).json()
    r = await http.put(f"/api/v1/namespaces/{ns}/finalize",
                       json={**got, "spec": {"finalizers": []}})
    assert r.status_code == 200 and r.json()["spec"]["finalizers"] == [], r.text
    assert (await http.get(f"/api/v1/namespaces/{ns}")).status_code == 200  # not terminating
    r = await http.delete(f"/api/v1/namespaces/{ns}")
    assert r.status_code == 200, r.text
    assert (await http.get(f"/api/v1/namespaces/{ns}")).status_code == 404


async def test_terminating_namespace_reports_the_content_remaining(
        http: httpx.AsyncClient) -> None:
    ns = unique("remaining")
    assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "data": {"a": "b"}}
    assert (await http.post(f"/api/v1/namespaces/{ns}/configmaps", json=held)).status_code == 201
    assert (await http.delete(f"/api/v1/namespaces/{ns}")).status_code == 200

    async def remaining_reported() -> bool:
        got = (await http.get(f"/api/v1/namespaces/{ns}")).json()
        conditions = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or []}
        return conditions.get("NamespaceContentRemaining", {}).get("message") == (
            "Some resources are remaining: configmaps has 1 resource instances") and \
            conditions["NamespaceFinalizersRemaining"]["message"] == (
                "Some content in the namespace has finalizers remaining: example.com/hold in "
                "1 resource instances")

    await eventually(remaining_reported, what="the namespace's remaining-content conditions")
    r = await http.patch(f"/api/v1/namespaces/{ns}/configmaps/held",
                         json={"metadata": {"finalizers": None}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text

    async def gone() -> bool:
        return (await http.get(f"/api/v1/namespaces/{ns}")).status_code == 404

    await eventually(gone, what=f"namespace {ns} to be removed")
