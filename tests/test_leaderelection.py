"""Leader election's pure decisions: who may take the lease, and what a claim writes.

The processes racing for a real lease are in tests/test_scheduler.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from common.errors import Conflict
from common.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    claimed_lease,
    default_identity,
    expires_at,
    holder_of,
    may_acquire,
    released_lease,
    renew_deadline_passed,
    timing_errors,
)
from common.models import format_micro_time, parse_micro_time

NOW = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
ME, OTHER = "host-a_1111", "host-b_2222"


def lease(holder: str | None, *, renewed_ago: float = 1.0, duration: int = 15,
          transitions: int = 3) -> dict[str, Any]:
    spec: dict[str, Any] = {"leaseDurationSeconds": duration, "leaseTransitions": transitions,
                            "acquireTime": "2026-03-01T11:00:00.000000Z",
                            "renewTime": format_micro_time(NOW - timedelta(seconds=renewed_ago))}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kube-scheduler", "namespace": "kube-system",
                         "resourceVersion": "42"},
            "spec": spec}


@pytest.mark.parametrize(("case", "current", "may"), [
    ("absent", None, True),
    ("ours, fresh", lease(ME), True),
    ("ours, expired", lease(ME, renewed_ago=20), True),
    ("another's, fresh", lease(OTHER), False),
    ("another's, just before expiry", lease(OTHER, renewed_ago=14.9), False),
    ("another's, exactly at expiry", lease(OTHER, renewed_ago=15), False),
    ("another's, expired", lease(OTHER, renewed_ago=15.1), True),
    ("another's, short duration expired", lease(OTHER, renewed_ago=5, duration=4), True),
    ("released (empty holder)", lease(""), True),
    ("no holder at all", lease(None), True),
    ("another's without renewTime", {"spec": {"holderIdentity": OTHER,
                                              "leaseDurationSeconds": 15}}, True),
])
def test_may_acquire(case: str, current: dict[str, Any] | None, may: bool) -> None:
    assert may_acquire(current, ME, NOW) is may


def test_expiry_is_renew_time_plus_duration() -> None:
    assert expires_at(lease(OTHER, renewed_ago=1, duration=15)) == NOW + timedelta(seconds=14)
    assert expires_at({"spec": {"holderIdentity": OTHER}}) is None


def test_creating_the_lease_starts_at_zero_transitions() -> None:
    created = claimed_lease(None, namespace="kube-system", name="kube-scheduler",
                            identity=ME, duration_seconds=15, now=NOW)
    assert created == {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {"holderIdentity": ME, "leaseDurationSeconds": 15,
                 "acquireTime": "2026-03-01T12:00:00.250000Z",
                 "renewTime": "2026-03-01T12:00:00.250000Z", "leaseTransitions": 0}}


def test_renewing_our_lease_moves_renew_time_only() -> None:
    current = lease(ME)
    renewed = claimed_lease(current, namespace="kube-system", name="kube-scheduler",
                            identity=ME, duration_seconds=15, now=NOW)
    assert renewed["metadata"]["resourceVersion"] == "42"  # the update's precondition
    assert renewed["spec"] == {**current["spec"], "renewTime": "2026-03-01T12:00:00.250000Z"}
    assert current["spec"]["renewTime"] != renewed["spec"]["renewTime"]  # input untouched


@pytest.mark.parametrize(("case", "current"), [
    ("expired, another's", lease(OTHER, renewed_ago=30)),
    ("released", lease("")),
])
def test_taking_over_counts_a_transition(case: str, current: dict[str, Any]) -> None:
    taken = claimed_lease(current, namespace="kube-system", name="kube-scheduler",
                          identity=ME, duration_seconds=4, now=NOW)
    assert taken["metadata"]["resourceVersion"] == "42"
    assert taken["spec"] == {"holderIdentity": ME, "leaseDurationSeconds": 4,
                             "leaseTransitions": 4,
                             "acquireTime": "2026-03-01T12:00:00.250000Z",
                             "renewTime": "2026-03-01T12:00:00.250000Z"}


def test_release_clears_the_holder_and_keeps_the_transitions() -> None:
    released = released_lease(lease(ME), NOW)
    assert holder_of(released) == ""
    assert released["spec"]["leaseTransitions"] == 3
    assert released["spec"]["leaseDurationSeconds"] == 1
    assert released["spec"]["renewTime"] == released["spec"]["acquireTime"] == (
        "2026-03-01T12:00:00.250000Z")
    assert released["metadata"]["resourceVersion"] == "42"
    # Anyone may take it at once; then it counts as a transition.
    assert may_acquire(released, OTHER, NOW)
    taken = claimed_lease(released, namespace="kube-system", name="kube-scheduler",
                          identity=OTHER, duration_seconds=15, now=NOW)
    assert (taken["spec"]["holderIdentity"], taken["spec"]["leaseTransitions"]) == (OTHER, 4)


def test_micro_times_have_six_digits_in_utc() -> None:
    local = datetime(2026, 3, 1, 14, 0, 0, 7, tzinfo=timezone(timedelta(hours=1)))
    stamp = claimed_lease(None, namespace="n", name="l", identity=ME, duration_seconds=15,
                          now=local)["spec"]["renewTime"]
    assert stamp == "2026-03-01T13:00:00.000007Z"
    assert parse_micro_time(stamp) == datetime(2026, 3, 1, 13, 0, 0, 7, tzinfo=UTC)


@pytest.mark.parametrize(("last", "now", "passed"), [
    (100.0, 105.0, False), (100.0, 109.99, False), (100.0, 110.0, True), (100.0, 130.0, True),
])
def test_renew_deadline(last: float, now: float, passed: bool) -> None:
    assert renew_deadline_passed(last, now, 10.0) is passed


@pytest.mark.parametrize(("durations", "errors"), [
    ((15, 10, 2), []),
    ((4, 3, 1), []),
    ((10, 10, 2), ["leaseDuration must be greater than renewDeadline"]),
    ((15, 2, 2), ["renewDeadline must be greater than retryPeriod*JitterFactor"]),
    ((15, 10, 0), ["retryPeriod must be greater than zero"]),
])
def test_timing_errors(durations: tuple[float, float, float], errors: list[str]) -> None:
    assert timing_errors(*durations) == errors


def test_identity_is_hostname_and_a_uuid() -> None:
    first, second = default_identity(), default_identity()
    host, _, uid = first.rpartition("_")
    assert host and len(uid) == 36 and first != second


class LeaseStore:
    """A lease client that answers one stale update with 409, as the apiserver does when a
    renewal cancelled by the stop committed after the elector last read the lease."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.writes: list[dict[str, Any]] = []

    async def get(self, resource: str, name: str, *, namespace: str) -> dict[str, Any]:
        return self.stored

    async def update(self, resource: str, body: dict[str, Any]) -> dict[str, Any]:
        if body["metadata"]["resourceVersion"] != self.stored["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        self.writes.append(body)
        self.stored = body
        return body


@pytest.mark.parametrize("holder, released", [(ME, True), (OTHER, False)])
async def test_release_retries_a_conflict_while_we_still_hold_the_lease(
        holder: str, released: bool) -> None:
    newer = lease(holder)
    newer["metadata"]["resourceVersion"] = "43"
    store = LeaseStore(newer)
    elector = LeaderElector(store, LeaderElectionConfig(name="kube-scheduler", identity=ME),
                            clock=lambda: NOW)
    elector.latest = lease(ME)  # resourceVersion 42: stale
    await elector.release()
    assert [holder_of(w) for w in store.writes] == ([""] if released else [])
    assert elector.latest is None
