"""ReplicaSet controller decisions with fake listers (plain lists of pods), as kube's
replica_set_test.go and controller_utils_test.go tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.pods import (
    Expectations,
    claim,
    is_available,
    pods_to_delete,
    selector_matches,
    slow_start_batches,
)
from controller_manager.replicaset import (
    BURST_REPLICAS,
    counted_view,
    pod_from_template,
    replica_diff,
    replica_set_status,
)

RS_UID = "rs-uid"
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def rs(replicas: int | None = 3, *, deleting: bool = False, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": RS_UID,
                            "generation": 4}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {**({"replicas": replicas} if replicas is not None else {}),
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}},
                     **spec}}


def pod(name: str, *, labels: dict[str, str] | None = None, owner: str | None = RS_UID,
        node: str = "", phase: str = "Running", ready_since: str | None = None,
        created: str = "2026-01-01T00:00:00Z", restarts: int = 0,
        deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "labels": {"app": "web"} if labels is None else labels,
                            "creationTimestamp": created}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": "web", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    conditions = ([{"type": "Ready", "status": "True", "lastTransitionTime": ready_since}]
                  if ready_since else [{"type": "Ready", "status": "False"}])
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"restartCount": restarts}]}}


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
    ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]},
     {"tier": "be"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["fe"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "x"},
     False),
    ({}, {"anything": "at all"}, True),
    (None, {"app": "web"}, False),
])
def test_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str],
                          want: bool) -> None:
    assert selector_matches(selector, labels) is want


def test_claim_adopts_matching_orphans_releases_strays_and_ignores_others() -> None:
    owner = rs()
    pods = [pod("mine"), pod("orphan", owner=None), pod("stray", labels={"app": "db"}),
            pod("theirs", owner="other-uid"), pod("orphan-db", owner=None,
                                                  labels={"app": "db"}),
            pod("orphan-going", owner=None, deleting=True)]
    got = claim(owner, owner["spec"]["selector"], pods)
    assert [p["metadata"]["name"] for p in got.owned] == ["mine"]
    assert [p["metadata"]["name"] for p in got.adopt] == ["orphan"]
    assert [p["metadata"]["name"] for p in got.release] == ["stray"]
    deleting = claim(rs(deleting=True), owner["spec"]["selector"], pods)
    assert (deleting.adopt, deleting.release) == ([], []), "nothing changes hands then"


@pytest.mark.parametrize(("replicas", "active", "want"), [
    (3, 0, 3), (3, 3, 0), (1, 4, -3), (None, 0, 1), (0, 2, -2),
    (BURST_REPLICAS + 100, 0, BURST_REPLICAS), (0, BURST_REPLICAS + 1, -BURST_REPLICAS),
])
def test_replica_diff(replicas: int | None, active: int, want: int) -> None:
    assert replica_diff(rs(replicas), [pod(f"p{i}") for i in range(active)]) == want


def test_a_pod_from_the_template_is_controlled_by_the_replicaset() -> None:
    made = pod_from_template(rs())
    assert made["metadata"]["generateName"] == "web-"
    assert made["metadata"]["labels"] == {"app": "web", "tier": "fe"}
    assert made["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": RS_UID,
        "controller": True, "blockOwnerDeletion": True}]
    assert made["spec"] == {"containers": [{"name": "c", "image": "i"}]}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


@pytest.mark.parametrize(("name", "pods", "count", "want"), [
    ("unscheduled before scheduled",
     [pod("on-node", node="n1"), pod("unscheduled")], 1, ["unscheduled"]),
    ("pending before running",
     [pod("running", node="n1"), pod("pending", node="n2", phase="Pending")], 1, ["pending"]),
    ("not ready before ready",
     [pod("ready", node="n1", ready_since="2026-01-01T00:01:00Z"),
      pod("unready", node="n2")], 1, ["unready"]),
    ("doubled up on a node before alone",
     [pod("alone", node="n1"), pod("pair-a", node="n2", created="2026-01-01T00:00:01Z"),
      pod("pair-b", node="n2")], 1, ["pair-a"]),
    ("ready for a shorter time first",
     [pod("long", node="n1", ready_since="2026-01-01T00:01:00Z"),
      pod("short", node="n2", ready_since="2026-01-01T00:09:00Z")], 1, ["short"]),
    ("more restarts first",
     [pod("calm", node="n1"), pod("crashy", node="n2", restarts=5)], 1, ["crashy"]),
    ("newer before older",
     [pod("old", node="n1", created="2026-01-01T00:00:00Z"),
      pod("new", node="n2", created="2026-01-01T00:05:00Z")], 1, ["new"]),
    ("a count over the pods is all of them", [pod("a"), pod("b")], 5, ["a", "b"]),
    ("zero is none", [pod("a")], 0, []),
])
def test_which_pods_go_first(name: str, pods: list[dict[str, Any]], count: int,
                             want: list[str]) -> None:
    assert names(pods_to_delete(pods, count)) == want, name


def test_status_counts() -> None:
    owner = rs(minReadySeconds=60)
    active = [pod("a", labels={"app": "web", "tier": "fe"}, ready_since="2026-01-01T00:00:00Z"),
              pod("b", ready_since="2026-01-01T00:09:30Z"), pod("c")]
    assert replica_set_status(owner, active, NOW) == {
        "replicas": 3, "fullyLabeledReplicas": 1, "readyReplicas": 2,
        "availableReplicas": 1, "observedGeneration": 4}
    assert is_available(active[1], 0, NOW)


def test_slow_start_batches() -> None:
    assert slow_start_batches(0) == []
    assert slow_start_batches(1) == [1]
    assert slow_start_batches(10) == [1, 2, 4, 3]


def test_expectations_hold_until_observed_or_expired() -> None:
    now = [0.0]
    expectations = Expectations(clock=lambda: now[0])
    assert expectations.satisfied("rs")
    expectations.expect("rs", add=2)
    expectations.creation_observed("rs")
    assert not expectations.satisfied("rs")
    expectations.creation_observed("rs")
    assert expectations.satisfied("rs")
    expectations.expect("rs", deletes=["u1", "u2"])
    expectations.deletion_observed("rs", "u1")
    expectations.deletion_observed("rs", "u1")  # the graceful start, then the removal
    assert expectations.pending("rs") == (0, 1)
    assert not expectations.satisfied("rs")
    now[0] = 301.0
    assert expectations.satisfied("rs"), "expectations expire after 5 minutes"


def test_only_updates_the_sync_reads_queue_one() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "web-1", "labels": {"app": "web"},
                     "ownerReferences": [{"uid": "rs-uid", "controller": True}]},
        "spec": {}, "status": {"phase": "Pending"}}
    bound = {**pod, "spec": {"nodeName": "node-1"},
             "status": {"phase": "Pending", "podIP": "10.0.0.5"}}
    assert counted_view(bound) == counted_view(pod)  # a binding, an IP: nothing to count
    running = {**bound, "status": {"phase": "Running"}}
    ready = {**running, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    relabelled = {**pod, "metadata": {**pod["metadata"], "labels": {"app": "other"}}}
    deleting = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "t"}}
    released = {**pod, "metadata": {**pod["metadata"], "ownerReferences": []}}
    views = [counted_view(p) for p in (pod, running, ready, relabelled, deleting, released)]
    assert len(set(map(repr, views))) == len(views)
