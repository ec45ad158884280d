"""What the scheduler's HTTP endpoint says: health reports and the /metrics page.

`common.endpoint` serves them. The names, labels, help and buckets are kube-scheduler's
(`scheduler_pending_pods`, `scheduler_schedule_attempts_total`,
`scheduler_scheduling_attempt_duration_seconds`, `scheduler_pod_scheduling_sli_duration_seconds`
(kube 1.29+'s end-to-end latency, from the first queueing to the bind),
`scheduler_pod_scheduling_attempts`, `scheduler_preemption_attempts_total`,
`scheduler_cache_size`, `leader_election_master_status`); the one without a kube
counterpart is prefixed `kubelite_`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.endpoint import health_report
from common.metrics import CONTENT_TYPE, Metrics, exponential_buckets

__all__ = ["CONTENT_TYPE", "MetricsSnapshot", "SchedulerMetrics", "health_report",
           "render_metrics"]

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


class SchedulerMetrics:
    """kube-scheduler's metrics: the gauges and counters read from a `MetricsSnapshot` at
    each scrape, the histograms observed by the scheduling loop as it goes."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self.snapshot = snapshot
        self.current = snapshot()
        self.metrics = m = Metrics()
        m.gauge("scheduler_pending_pods",
                "Number of pending pods, by the queue type. 'active' means number of pods in "
                "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means "
                "number of pods in unschedulablePods.", ("queue",),
                lambda: [((q,), self.current.pending.get(q, 0)) for q in PENDING_QUEUES])
        m.gauge("kubelite_scheduler_pods_in_flight",
                "Pods in a scheduling attempt or a bind right now.", (),
                lambda: [((), self.current.in_flight)])
        m.counter_func("scheduler_schedule_attempts_total",
                       "Number of attempts to schedule pods, by the result. 'unschedulable' "
                       "means a pod could not be scheduled, while 'error' means an internal "
                       "scheduler problem.", ("profile", "result"),
                       lambda: [((self.current.profile, r), self.current.attempts.get(r, 0))
                                for r in ATTEMPT_RESULTS])
        m.gauge("scheduler_cache_size",
                "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
                ("type",), lambda: [((t,), self.current.cache.get(t, 0)) for t in CACHE_TYPES])
        m.gauge("leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 "
                "indicates backup, 1 indicates master. 'name' is the string used to "
                "identify the lease.", ("name",),
                lambda: [] if self.current.leader is None else [
                    ((self.current.leader[0],), int(self.current.leader[1]))])
        self.attempt_duration = m.histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("profile", "result"), exponential_buckets(0.001, 2, 15))
        self.sli_duration = m.histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue and might involve multiple scheduling attempts.",
            ("attempts",), exponential_buckets(0.01, 2, 20))
        self.pod_attempts = m.histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.", (),
            exponential_buckets(1, 2, 5))
        self.preemption_attempts = m.counter(
            "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster "
            "till now")

    def render(self) -> bytes:
        self.current = self.snapshot()
        return self.metrics.render()


def render_metrics(snapshot: MetricsSnapshot) -> str:
    """The Prometheus text exposition of a snapshot alone (no histogram observed yet)."""
    return SchedulerMetrics(lambda: snapshot).render().decode()
