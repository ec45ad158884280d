"""The kubelet's /metrics, with the kubelet's names, labels and buckets.

    kubelet_pod_start_duration_seconds        first seen -> first status with phase Running
    kubelet_pod_worker_duration_seconds{operation_type}   one sync: create (the first), sync
    kubelet_running_pods, kubelet_running_containers{container_state}   from the last relist
    kubelet_runtime_operations_total / _duration_seconds / _errors_total{operation_type}
                                              every Docker Engine API call, named as the CRI
                                              call kube's instrumented runtime would make
    kubelet_pleg_relist_duration_seconds
    kubelet_started_containers_total{container_type}
    kubelet_started_containers_errors_total{container_type,code}
    rest_client_requests_total, rest_client_request_duration_seconds (its API client)

`KubeletMetrics` holds what the pod workers, the PLEG and the Docker client observe;
`register` adds the gauges read from the kubelet's state at scrape time.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from common.metrics import DEFAULT_BUCKETS, Metrics, exponential_buckets
from kubelet.runtime import ContainerSummary

__all__ = ["KubeletMetrics", "container_type", "timed"]

# kubelet_pod_start_duration_seconds' buckets (pkg/kubelet/metrics)
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360,
                     480, 600, 900, 1200, 1800, 2700, 3600)
RUNTIME_BUCKETS = exponential_buckets(0.005, 2.5, 14)
CONTAINER_STATES = ("created", "running", "exited", "unknown")


class KubeletMetrics:
    def __init__(self) -> None:
        self.metrics = m = Metrics()
        self.pod_start = m.histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod "
            "starting to run", (), POD_START_BUCKETS)
        self.pod_worker = m.histogram(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: "
            "create, update, or sync", ("operation_type",), DEFAULT_BUCKETS)
        self.runtime_operations = m.counter(
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.", ("operation_type",))
        self.runtime_durations = m.histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ("operation_type",), RUNTIME_BUCKETS)
        self.runtime_errors = m.counter(
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
            ("operation_type",))
        self.pleg_relist = m.histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.", (), DEFAULT_BUCKETS)
        self.started_containers = m.counter(
            "kubelet_started_containers_total",
            "Cumulative number of containers started", ("container_type",))
        self.started_container_errors = m.counter(
            "kubelet_started_containers_errors_total",
            "Cumulative number of errors when starting containers",
            ("container_type", "code"))

    def register(self, relisted: Callable[[], Iterable[ContainerSummary]]) -> None:
        """The gauges of what the last relist saw (`relisted`: its containers)."""
        def running_pods() -> list[tuple[tuple[str, ...], float]]:
            pods = {s.pod.uid for s in relisted() if s.is_sandbox and s.state == "running"}
            return [((), len(pods))]

        def running_containers() -> list[tuple[tuple[str, ...], float]]:
            counts = dict.fromkeys(CONTAINER_STATES, 0)
            for summary in relisted():
                if not summary.is_sandbox:
                    counts[summary.state] = counts.get(summary.state, 0) + 1
            return [((state,), count) for state, count in counts.items()]

        self.metrics.gauge("kubelet_running_pods",
                           "Number of pods that have a running pod sandbox", (), running_pods)
        self.metrics.gauge("kubelet_running_containers",
                           "Number of containers currently running", ("container_state",),
                           running_containers)

    def render(self) -> bytes:
        return self.metrics.render()


def container_type(pod: Mapping[str, Any], name: str) -> str:
    """kube's `container_type` label: container, init_container or ephemeral_container."""
    spec = pod.get("spec") or {}
    for key, kind in (("initContainers", "init_container"),
                      ("ephemeralContainers", "ephemeral_container")):
        if any(c.get("name") == name for c in spec.get(key) or []):
            return kind
    return "container"


class Instrumented(Protocol):
    runtime_metrics: KubeletMetrics | None


S = TypeVar("S", bound=Instrumented)
P = ParamSpec("P")
T = TypeVar("T")


def timed(operation: str) -> Callable[[Callable[Concatenate[S, P], Awaitable[T]]],
                                      Callable[Concatenate[S, P], Awaitable[T]]]:
    """Count and time a Docker client call as the runtime operation `operation` (kube's
    instrumentedRuntimeService does so around each CRI call)."""
    def decorate(call: Callable[Concatenate[S, P], Awaitable[T]],
                 ) -> Callable[Concatenate[S, P], Awaitable[T]]:
        labels = (operation,)

        @functools.wraps(call)
        async def measured(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
            metrics = self.runtime_metrics
            if metrics is None:
                return await call(self, *args, **kwargs)
            started = time.perf_counter()
            metrics.runtime_operations.inc(labels)
            try:
                return await call(self, *args, **kwargs)
            except Exception:
                metrics.runtime_errors.inc(labels)
                raise
            finally:
                metrics.runtime_durations.observe(time.perf_counter() - started, labels)
        return measured
    return decorate
