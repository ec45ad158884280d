"""Job controller decisions (pure), as job_controller_test.go's tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.job import counts, outcome, pod_for, wanted_active

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


def test_pods_are_controlled_by_the_job() -> None:
    made = pod_for(job())
    assert made["metadata"]["generateName"] == "pi-"
    assert made["metadata"]["ownerReferences"][0] == {
        "apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "j-uid",
        "controller": True, "blockOwnerDeletion": True}
    assert made["spec"]["restartPolicy"] == "Never"
