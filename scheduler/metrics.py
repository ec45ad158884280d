"""What the scheduler's HTTP endpoint says: health reports and the /metrics page.

Pure functions of plain values; `common.endpoint` serves them. The names follow
kube-scheduler's where the meaning is the same (`scheduler_pending_pods`,
`scheduler_schedule_attempts_total`, `scheduler_cache_size`); the one without a kube
counterpart is prefixed `kubelite_`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.endpoint import CONTENT_TYPE, health_report, metric_family

__all__ = ["CONTENT_TYPE", "MetricsSnapshot", "health_report", "render_metrics"]

# The outcome of one scheduling attempt (kube's `result` label): bound, no node fits,
# or anything else that went wrong (a plugin error, a failed bind, a lost race to bind).
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
ATTEMPT_RESULTS = (SCHEDULED, UNSCHEDULABLE, ERROR)

# Where a pending pod waits (kube's `queue` label): `active` for the loop; `backoff`
# after an error; `unschedulable` after an attempt no node could take (a node change
# or the end of its back-off brings it back).
PENDING_QUEUES = ("active", "backoff", "unschedulable")
CACHE_TYPES = ("nodes", "pods", "assumed_pods")

@dataclass(frozen=True)
class MetricsSnapshot:
    profile: str  # the scheduler name, kube's `profile` label
    pending: Mapping[str, int]  # queue -> pods
    in_flight: int  # popped by the loop, not bound or failed yet
    attempts: Mapping[str, int]  # result -> attempts since start
    cache: Mapping[str, int]  # type -> objects
    # (lease name, whether this instance leads); None without leader election
    leader: tuple[str, bool] | None = None


def render_metrics(snapshot: MetricsSnapshot) -> str:
    """The Prometheus text exposition of a snapshot; every label value is always present."""
    lines = metric_family(
        "scheduler_pending_pods", "gauge",
        "Pods waiting to be scheduled, by queue (active, backoff, unschedulable).",
        [({"queue": q}, snapshot.pending.get(q, 0)) for q in PENDING_QUEUES])
    lines += metric_family(
        "kubelite_scheduler_pods_in_flight", "gauge",
        "Pods in a scheduling attempt or a bind right now.",
        [({}, snapshot.in_flight)])
    lines += metric_family(
        "scheduler_schedule_attempts_total", "counter",
        "Scheduling attempts by result: scheduled (bound), unschedulable (no node fits), "
        "error.",
        [({"profile": snapshot.profile, "result": r}, snapshot.attempts.get(r, 0))
         for r in ATTEMPT_RESULTS])
    lines += metric_family(
        "scheduler_cache_size", "gauge",
        "Nodes, pods (bound or assumed) and assumed pods in the scheduler's cache.",
        [({"type": t}, snapshot.cache.get(t, 0)) for t in CACHE_TYPES])
    if snapshot.leader is not None:
        name, leading = snapshot.leader
        lines += metric_family(
            "leader_election_master_status", "gauge",
            "1 while this instance holds the leader election lease, else 0.",
            [({"name": name}, int(leading))])
    return "\n".join(lines) + "\n"
