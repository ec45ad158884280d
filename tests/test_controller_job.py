"""Job controller decisions (pure), as job_controller_test.go's tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.job import (
    counts,
    deadline_left,
    failure_backoff,
    format_indexes,
    indexes_to_create,
    outcome,
    pod_for,
    restarts_on_failure,
    succeeded_indexes,
    wanted_active,
)
from controller_manager.ttlafterfinished import expires_at

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def job(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pi", "namespace": "default", "uid": "j-uid"},
            "spec": {"template": {"metadata": {"labels": {"batch.kubernetes.io/job-name": "pi"}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "i"}]}},
                     **spec},
            "status": {"startTime": "2026-01-01T00:00:00Z"}}


def pod(phase: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": phase}
    if deleting:
        meta["deletionTimestamp"] = "t"
    return {"metadata": meta, "status": {"phase": phase}}


def test_counts() -> None:
    active, succeeded, failed = counts([pod("Running"), pod("Pending"), pod("Succeeded"),
                                        pod("Failed"), pod("Failed"), pod("Running",
                                                                          deleting=True)])
    assert (len(active), succeeded, failed) == (2, 1, 2)


@pytest.mark.parametrize(("spec", "succeeded", "want"), [
    ({}, 0, 1),  # one pod, no completions
    ({}, 1, 0),
    ({"completions": 5, "parallelism": 2}, 0, 2),
    ({"completions": 5, "parallelism": 2}, 4, 1),
    ({"completions": 5, "parallelism": 2}, 5, 0),
    ({"parallelism": 3}, 0, 3),
])
def test_wanted_active(spec: dict[str, Any], succeeded: int, want: int) -> None:
    assert wanted_active(job(**spec), succeeded) == want


@pytest.mark.parametrize(("spec", "succeeded", "failed", "active", "want"), [
    ({"completions": 2}, 1, 0, 1, None),
    ({"completions": 2}, 2, 0, 0, "CompletionsReached"),
    ({}, 1, 0, 0, "CompletionsReached"),
    ({"backoffLimit": 1}, 0, 2, 0, "BackoffLimitExceeded"),
    ({"backoffLimit": 1}, 0, 1, 1, None),
    ({}, 0, 7, 0, "BackoffLimitExceeded"),  # the default limit is 6
    ({"activeDeadlineSeconds": 600}, 0, 0, 1, "DeadlineExceeded"),
    ({"activeDeadlineSeconds": 601}, 0, 0, 1, None),
])
def test_outcome(spec: dict[str, Any], succeeded: int, failed: int, active: int,
                 want: str | None) -> None:
    found = outcome(job(**spec), succeeded, failed, active, NOW)
    assert (found[1] if found else None) == want


def restarted(phase: str, *restarts: int, init: int = 0) -> dict[str, Any]:
    made = pod(phase)
    made["status"]["containerStatuses"] = [{"name": f"c{i}", "restartCount": n}
                                           for i, n in enumerate(restarts)]
    made["status"]["initContainerStatuses"] = [{"name": "init", "restartCount": init}]
    return made


def on_failure(**spec: Any) -> dict[str, Any]:
    made = job(**spec)
    made["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    return made


def test_restarts_under_on_failure_count_those_of_pending_and_running_pods() -> None:
    pods = [restarted("Running", 1, 2, init=1), restarted("Pending", 1),
            restarted("Failed", 5), restarted("Succeeded", 7)]
    assert restarts_on_failure(on_failure(), pods) == 5
    assert restarts_on_failure(job(), pods) == 0  # restartPolicy Never: new pods instead


@pytest.mark.parametrize(("limit", "restarts", "want"), [
    (2, 1, None),
    (2, 2, "BackoffLimitExceeded"),  # restarts fail the Job when they reach the limit
    (0, 1, "BackoffLimitExceeded"),  # a limit of 0: no restart at all
    (0, 0, None),
    (None, 5, None),  # the default limit is 6
    (None, 6, "BackoffLimitExceeded"),
])
def test_restarts_count_against_the_backoff_limit(limit: int | None, restarts: int,
                                                 want: str | None) -> None:
    spec = {} if limit is None else {"backoffLimit": limit}
    found = outcome(on_failure(**spec), 0, 0, 1, NOW, restarts)
    assert (found[1] if found else None) == want


def test_pods_are_controlled_by_the_job() -> None:
    made = pod_for(job())
    assert made["metadata"]["generateName"] == "pi-"
    assert made["metadata"]["ownerReferences"][0] == {
        "apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "j-uid",
        "controller": True, "blockOwnerDeletion": True}
    assert made["spec"]["restartPolicy"] == "Never"


# -- completionMode: Indexed ---------------------------------------------------------------------


def indexed_pod(index: int, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": f"pi-{index}",
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": phase}}


def test_an_indexed_pod_carries_its_index_as_kube_s_job_controller_sets_it() -> None:
    made = pod_for(job(completionMode="Indexed", completions=3), 2)
    meta, spec = made["metadata"], made["spec"]
    assert meta["generateName"] == "pi-2-"
    assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == "2"
    assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == "2"
    assert meta["labels"]["batch.kubernetes.io/job-name"] == "pi"
    assert spec["hostname"] == "pi-2"
    assert spec["containers"][0]["env"] == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {
        "fieldRef": {"apiVersion": "v1",
                     "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]
    # The Job's own template is left as it was.
    assert "env" not in job()["spec"]["template"]["spec"]["containers"][0]


def test_indexes_succeeded_to_create_and_as_kube_writes_them() -> None:
    pods = [indexed_pod(0, "Succeeded"), indexed_pod(0, "Succeeded"), indexed_pod(1, "Failed"),
            indexed_pod(2, "Running"), indexed_pod(9, "Succeeded"),
            {"metadata": {"annotations": {
                "batch.kubernetes.io/job-completion-index": "x"}}, "status": {"phase": "Succeeded"}}]
    done = succeeded_indexes(pods, 5)
    assert done == {0}  # 9 is past completions; "x" is no index
    assert indexes_to_create(5, done, [indexed_pod(2, "Running")], 2) == [1, 3]
    assert indexes_to_create(5, done, [indexed_pod(2, "Running")], 9) == [1, 3, 4]
    assert format_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"
    assert format_indexes(set()) == ""


# -- pod failure back-off and the deadline --------------------------------------------------------


def finished(phase: str, at: str) -> dict[str, Any]:
    return {"metadata": {"name": phase}, "status": {"phase": phase, "containerStatuses": [
        {"state": {"terminated": {"finishedAt": at}}}]}}


@pytest.mark.parametrize(("pods", "want"), [
    ([], 0.0),
    ([finished("Failed", "2026-01-01T00:09:55Z")], 5.0),  # 10 s from the failure
    ([finished("Failed", "2026-01-01T00:09:00Z")], 0.0),
    ([finished("Failed", "2026-01-01T00:09:50Z"), finished("Failed", "2026-01-01T00:09:59Z")],
     19.0),  # 20 s after a second failure
    ([finished("Failed", "2026-01-01T00:09:59Z")] * 10, 359.0),  # at most 6 minutes
    # Failures before the last success do not count.
    ([finished("Failed", "2026-01-01T00:09:58Z"), finished("Succeeded", "2026-01-01T00:09:59Z")],
     0.0),
])
def test_failure_backoff(pods: list[dict[str, Any]], want: float) -> None:
    assert failure_backoff(pods, NOW) == pytest.approx(want)


def test_deadline_left() -> None:
    assert deadline_left(job(activeDeadlineSeconds=900), NOW) == 300
    assert deadline_left(job(), NOW) is None


# -- ttlSecondsAfterFinished ---------------------------------------------------------------------


def test_a_finished_job_expires_its_ttl_after_it_finished() -> None:
    done = job(ttlSecondsAfterFinished=30)
    assert expires_at(done) is None  # not finished
    done["status"]["conditions"] = [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"},
        {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"}]
    assert expires_at(done) == datetime(2026, 1, 1, 0, 5, 30, tzinfo=UTC)
    assert expires_at({**done, "spec": {}}) is None  # no TTL: kept
    deleting = {**done, "metadata": {**done["metadata"], "deletionTimestamp": "t"}}
    assert expires_at(deleting) is None


STAMP = "2026-12-04T10:00:00Z"


def test_suspending_and_resuming_set_the_suspended_condition_once() -> None:
    from controller_manager.job import suspension
    # never suspended: no condition, nothing to say
    assert suspension([], False, STAMP) == ([], None)
    suspended, event = suspension([], True, STAMP)
    assert suspended == [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                          "message": "Job suspended", "lastProbeTime": STAMP,
                          "lastTransitionTime": STAMP}]
    assert event == ("Suspended", "Job suspended")
    assert suspension(suspended, True, "later") == (suspended, None)  # already so
    resumed, event = suspension(suspended, False, "later")
    assert [(c["status"], c["reason"], c["lastTransitionTime"]) for c in resumed] == [
        ("False", "JobResumed", "later")]
    assert event == ("Resumed", "Job resumed")
    again, event = suspension(resumed, True, "again")
    assert [(c["status"], c["reason"]) for c in again] == [("True", "JobSuspended")]
    assert event == ("Suspended", "Job suspended")


def test_a_suspended_job_wants_no_pod_and_has_no_deadline() -> None:
    from datetime import UTC, datetime

    from controller_manager.job import deadline_left, wanted_active
    job = {"spec": {"suspend": True, "parallelism": 3, "completions": 5,
                    "activeDeadlineSeconds": 10},
           "status": {"startTime": "2026-12-04T09:00:00Z"}}
    now = datetime(2026, 12, 4, 10, tzinfo=UTC)
    assert wanted_active(job, 0) == 0 and deadline_left(job, now) is None
    job["spec"]["suspend"] = False
    assert wanted_active(job, 0) == 3 and deadline_left(job, now) == 10 - 3600
