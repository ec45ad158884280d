"""Deployment controller decisions (rolling.go / sync.go arithmetic) with fake listers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.deployment import (
    DESIRED_REPLICAS,
    HASH_LABEL,
    MAX_REPLICAS,
    REVISION,
    deployment_status,
    equal_ignore_hash,
    history_to_delete,
    is_scaling_event,
    new_replica_set,
    new_rs_condition,
    new_rs_replicas,
    old_rs_scale_downs,
    paused_conditions,
    pod_template_hash,
    scale_plan,
    stuck_requeue_after,
    surge_and_unavailable,
)

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "busybox:1"}]}}


def deployment(replicas: int = 3, surge: Any = "25%", unavailable: Any = "25%"
               ) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default", "uid": "d-uid",
                         "generation": 2},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": TEMPLATE, "progressDeadlineSeconds": 600,
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                         "maxSurge": surge, "maxUnavailable": unavailable}}}}


def rs(name: str, replicas: int, available: int = 0, *, created: str = "2026-01-01T00:00:00Z",
       revision: int = 1, status_replicas: int | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created,
                         "annotations": {REVISION: str(revision)}},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas if status_replicas is None else status_replicas,
                       "availableReplicas": available, "readyReplicas": available}}


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "want"), [
    (3, "25%", "25%", (1, 0)),  # surge rounds up, unavailable down
    (4, "25%", "25%", (1, 1)),
    (10, 3, 2, (3, 2)),
    (3, 0, 0, (0, 1)),  # both zero: one may be unavailable
    (10, "50%", "0%", (5, 0)),
])
def test_fenceposts(replicas: int, surge: Any, unavailable: Any, want: tuple[int, int]) -> None:
    assert surge_and_unavailable(deployment(replicas, surge, unavailable)) == want


def test_the_hash_is_stable_safe_and_moves_with_the_template_or_collisions() -> None:
    first = pod_template_hash(TEMPLATE)
    assert first == pod_template_hash({**TEMPLATE})
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert pod_template_hash(TEMPLATE, 1) != first
    changed = {**TEMPLATE, "spec": {"containers": [{"name": "web", "image": "busybox:2"}]}}
    assert pod_template_hash(changed) != first


def test_the_new_replica_set_carries_the_hash_the_revision_and_the_owner() -> None:
    made = new_replica_set(deployment(), revision=3)
    hash_ = made["spec"]["template"]["metadata"]["labels"][HASH_LABEL]
    assert made["metadata"]["name"] == f"web-{hash_}"
    assert made["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: hash_}
    assert made["metadata"]["annotations"][REVISION] == "3"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert equal_ignore_hash(made["spec"]["template"], TEMPLATE)


@pytest.mark.parametrize(("name", "old", "new", "want"), [
    ("fresh: all at once", None, 0, 3),
    ("surge 1 above 3 old", 3, 0, 1),
    ("at the surge limit: wait", 3, 1, 1),
    ("old scaled down: more room", 2, 1, 2),
    ("never beyond replicas", 0, 2, 3),
])
def test_new_rs_replicas(name: str, old: int | None, new: int, want: int) -> None:
    d = deployment(3, 1, 0)
    new_rs = rs("new", new)
    all_rss = [new_rs] + ([rs("old", old)] if old is not None else [])
    assert new_rs_replicas(d, all_rss, new_rs) == want, name


def test_old_replica_sets_go_down_only_while_enough_stay_available() -> None:
    d = deployment(3, 1, 0)  # maxUnavailable 0: 3 must stay available
    old = rs("old", 3, available=3)
    new = rs("new", 1, available=0, created="2026-01-01T00:01:00Z")
    assert old_rs_scale_downs(d, [old, new], [old], new) == {}, "the new pod is not ready"
    new_ready = rs("new", 1, available=1, created="2026-01-01T00:01:00Z")
    assert old_rs_scale_downs(d, [old, new_ready], [old], new_ready) == {"old": 2}


def test_unhealthy_old_pods_go_first() -> None:
    d = deployment(4, 1, 1)
    old_a = rs("old-a", 2, available=0, created="2026-01-01T00:00:00Z")
    old_b = rs("old-b", 2, available=2, created="2026-01-01T00:00:30Z")
    new = rs("new", 1, available=1, created="2026-01-01T00:01:00Z")
    assert old_rs_scale_downs(d, [old_a, old_b, new], [old_a, old_b], new) == {"old-a": 0}


def test_history_keeps_the_newest_empty_replica_sets() -> None:
    old = [rs("r1", 0, revision=1), rs("r2", 0, revision=2), rs("r3", 0, revision=3),
           rs("busy", 2, revision=4)]
    assert history_to_delete(old, 2) == ["r1", "r2"]
    assert history_to_delete(old, 10) == []


def test_status_and_conditions() -> None:
    d = deployment(3, 1, 0)
    new = rs("web-abc", 3, available=3)
    status = deployment_status(d, [new], new, "T")
    assert {k: status[k] for k in ("observedGeneration", "replicas", "updatedReplicas",
                                   "availableReplicas", "unavailableReplicas")} == {
        "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
        "availableReplicas": 3, "unavailableReplicas": 0}
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["reason"] == "MinimumReplicasAvailable"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert conditions["Progressing"]["message"] == (
        'ReplicaSet "web-abc" has successfully progressed.')
    rolling = deployment_status(d, [rs("old", 2, 2), rs("web-abc", 1, 0)],
                                rs("web-abc", 1, 0), "T")
    by_type = {c["type"]: c for c in rolling["conditions"]}
    assert by_type["Available"]["status"] == "False"
    assert by_type["Progressing"]["reason"] == "ReplicaSetUpdated"


NOW = datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC)


def progressing(reason: str, status: str = "True", updated: str = "2026-01-01T00:00:00Z",
                ) -> dict[str, Any]:
    return {"type": "Progressing", "status": status, "reason": reason, "message": "m",
            "lastUpdateTime": updated, "lastTransitionTime": "2026-01-01T00:00:00Z"}


def with_status(d: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**d, "status": status}


@pytest.mark.parametrize(("before", "deadline", "rss", "expected"), [
    # pods moved since the last status: progressing, its lastUpdateTime restarts the clock
    ({"replicas": 2, "updatedReplicas": 1, "conditions": [progressing("NewReplicaSetCreated")]},
     600, [("old", 1, 1), ("web-abc", 2, 1)],
     ("True", "ReplicaSetUpdated", 'ReplicaSet "web-abc" is progressing.',
      "2026-01-01T00:10:00Z")),
    # complete: the new replica set is available
    ({"replicas": 3, "updatedReplicas": 2, "conditions": [progressing("ReplicaSetUpdated")]},
     600, [("web-abc", 3, 3)],
     ("True", "NewReplicaSetAvailable", 'ReplicaSet "web-abc" has successfully progressed.',
      "2026-01-01T00:10:00Z")),
    # no progress for longer than the deadline (600s since 00:00:00 < 00:10:00 + ...)
    ({"replicas": 3, "updatedReplicas": 3, "readyReplicas": 0, "availableReplicas": 0,
      "conditions": [progressing("ReplicaSetUpdated")]},
     300, [("web-abc", 3, 0)],
     ("False", "ProgressDeadlineExceeded", 'ReplicaSet "web-abc" has timed out progressing.',
      "2026-01-01T00:10:00Z")),
    # no progress, but within the deadline: unchanged
    ({"replicas": 3, "updatedReplicas": 3, "readyReplicas": 0, "availableReplicas": 0,
      "conditions": [progressing("ReplicaSetUpdated")]},
     900, [("web-abc", 3, 0)],
     ("True", "ReplicaSetUpdated", "m", "2026-01-01T00:00:00Z")),
    # timed out stays timed out
    ({"replicas": 3, "updatedReplicas": 3, "conditions": [
        progressing("ProgressDeadlineExceeded", "False")]},
     900, [("web-abc", 3, 0)],
     ("False", "ProgressDeadlineExceeded", "m", "2026-01-01T00:00:00Z")),
])
def test_rollout_progress(before: dict[str, Any], deadline: int,
                          rss: list[tuple[str, int, int]],
                          expected: tuple[str, str, str, str]) -> None:
    d = with_status(deployment(3, 1, 0), **before)
    d["spec"]["progressDeadlineSeconds"] = deadline
    sets = [rs(name, replicas, available) for name, replicas, available in rss]
    status = deployment_status(d, sets, sets[-1], "2026-01-01T00:10:00Z", now=NOW)
    got = {c["type"]: c for c in status["conditions"]}["Progressing"]
    assert (got["status"], got["reason"], got["message"], got["lastUpdateTime"]) == expected


def test_no_progress_deadline_no_progressing_condition() -> None:
    d = with_status(deployment(), conditions=[progressing("ReplicaSetUpdated")])
    d["spec"]["progressDeadlineSeconds"] = 2**31 - 1
    status = deployment_status(d, [rs("web-abc", 3, 3)], rs("web-abc", 3, 3), "T", now=NOW)
    assert [c["type"] for c in status["conditions"]] == ["Available"]


def test_new_replica_set_conditions_and_pause() -> None:
    d = deployment()
    created = new_rs_condition(d, "web-abc", created=True, stamp="S")
    assert created is not None and (created[0]["reason"], created[0]["message"]) == (
        "NewReplicaSetCreated", 'Created new replica set "web-abc"')
    found = new_rs_condition(d, "web-abc", created=False, stamp="S")
    assert found is not None and (found[0]["reason"], found[0]["message"]) == (
        "FoundNewReplicaSet", 'Found new replica set "web-abc"')
    assert new_rs_condition(with_status(d, conditions=found), "web-abc", created=False,
                            stamp="S") is None
    paused = {**d, "spec": {**d["spec"], "paused": True}}
    conditions = paused_conditions(paused, "S")
    assert conditions is not None and (conditions[0]["status"], conditions[0]["reason"]) == (
        "Unknown", "DeploymentPaused")
    resumed = paused_conditions(with_status(d, conditions=conditions), "S")
    assert resumed is not None and resumed[0]["reason"] == "DeploymentResumed"


def test_stuck_requeue_after_is_the_time_left_until_the_deadline() -> None:
    d = deployment()
    d["spec"]["progressDeadlineSeconds"] = 900
    status = {"conditions": [progressing("ReplicaSetUpdated")], "replicas": 3,
              "updatedReplicas": 3, "availableReplicas": 0}
    assert stuck_requeue_after(d, status, NOW) == 301.0
    done = {**status, "conditions": [progressing("NewReplicaSetAvailable")]}
    assert stuck_requeue_after(d, done, NOW) is None


# -- proportional scaling (sync.go's scale) --------------------------------------------------


def sized(name: str, replicas: int, *, desired: int, max_replicas: int,
          created: str, available: int = 0) -> dict[str, Any]:
    made = rs(name, replicas, available, created=created)
    made["metadata"]["annotations"].update({DESIRED_REPLICAS: str(desired),
                                            MAX_REPLICAS: str(max_replicas)})
    return made


OLD = "2026-01-01T00:00:00Z"
NEW = "2026-01-01T00:05:00Z"


def test_scaling_mid_rollout_shares_the_change_in_proportion() -> None:
    """10 replicas (maxSurge 3) mid-rollout, old 8 + new 5 = 13; scaled to 20: 23 allowed,
    10 more shared as 8*23/13 -> 14 and 5*23/13 -> 9; then back to 10: 13 allowed, as
    14*13/23 -> 8 and 9*13/23 -> 5."""
    old = sized("web-old", 8, desired=10, max_replicas=13, created=OLD)
    new = sized("web-new", 5, desired=10, max_replicas=13, created=NEW)
    up = deployment(20, surge=3, unavailable=2)
    assert is_scaling_event(up, [old, new])
    assert scale_plan(up, new, [old]) == {"web-old": 14, "web-new": 9}
    old = sized("web-old", 14, desired=20, max_replicas=23, created=OLD)
    new = sized("web-new", 9, desired=20, max_replicas=23, created=NEW)
    down = deployment(10, surge=3, unavailable=2)
    assert scale_plan(down, new, [old]) == {"web-old": 8, "web-new": 5}


def test_the_leftover_goes_to_the_largest_replica_set() -> None:
    """3 ReplicaSets of 2 (max-replicas 7, replicas 6 + surge 1) scaled to 7 (+1 surge):
    each fraction rounds 2*8/7 = 2.29 to 2, adding 0: the 2 left over go to the first of
    the largest, the newest when growing."""
    sets = [sized(f"web-{i}", 2, desired=6, max_replicas=7, created=f"2026-01-01T00:0{i}:00Z")
            for i in range(3)]
    grown = deployment(7, surge=1, unavailable=0)
    assert scale_plan(grown, sets[2], sets[:2]) == {"web-2": 4, "web-1": 2, "web-0": 2}


def test_a_lone_active_replica_set_takes_all_and_a_saturated_new_one_ends_the_old() -> None:
    empty_old = sized("web-old", 0, desired=3, max_replicas=4, created=OLD)
    lone = sized("web-new", 3, desired=3, max_replicas=4, created=NEW, available=3)
    scaled = deployment(6)
    assert is_scaling_event(scaled, [empty_old, lone])
    assert not is_scaling_event(deployment(3), [empty_old, lone])
    assert scale_plan(scaled, lone, [empty_old]) == {"web-new": 6}
    # Nothing active: the new one (or else the newest old one) gets the replicas.
    assert scale_plan(scaled, None, [empty_old]) == {"web-old": 6}
    old = sized("web-old", 2, desired=3, max_replicas=4, created=OLD)
    assert scale_plan(deployment(3), lone, [old]) == {"web-old": 0}
    # To zero: every active ReplicaSet goes to 0.
    new = sized("web-new", 2, desired=3, max_replicas=4, created=NEW)
    assert scale_plan(deployment(0), new, [old]) == {"web-old": 0, "web-new": 0}
