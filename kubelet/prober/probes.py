"""Probes as data, and the threshold rule (after kubelet's `pkg/kubelet/prober/worker.go`).

A probe's outcome becomes its result only after `successThreshold` successes or
`failureThreshold` failures in a row. Before any result a readiness probe says "not
ready" and a startup probe "not started"; a liveness probe says "alive".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["liveness", "readiness", "startup"]
KINDS: tuple[Kind, ...] = ("startup", "liveness", "readiness")
SPEC_FIELDS: dict[Kind, str] = {"liveness": "livenessProbe", "readiness": "readinessProbe",
                                "startup": "startupProbe"}
# What a container's probe reports before it has a result (kube's initialValue).
INITIAL: dict[Kind, bool] = {"liveness": True, "readiness": False, "startup": False}


@dataclass(frozen=True)
class Probe:
    kind: Kind
    handler: Mapping[str, Any]  # {"exec": ...} | {"httpGet": ...} | {"tcpSocket": ...}
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3

    @property
    def title(self) -> str:
        """`Liveness`, as kube's events name it."""
        return self.kind.capitalize()


def probe_of(container: Mapping[str, Any], kind: Kind) -> Probe | None:
    """The container's probe of that kind, with kube's defaults (10 s period, 1 s
    timeout, thresholds 1 and 3); liveness and startup need one success in a row."""
    spec = container.get(SPEC_FIELDS[kind])
    if not spec:
        return None
    handler = {key: spec[key] for key in ("exec", "httpGet", "tcpSocket", "grpc") if key in spec}

    def positive(name: str, default: int) -> int:
        value = spec.get(name)
        return int(value) if isinstance(value, int) and value > 0 else default
    return Probe(kind=kind, handler=handler,
                 initial_delay_seconds=max(int(spec.get("initialDelaySeconds") or 0), 0),
                 period_seconds=positive("periodSeconds", 10),
                 timeout_seconds=positive("timeoutSeconds", 1),
                 success_threshold=1 if kind != "readiness" else positive("successThreshold", 1),
                 failure_threshold=positive("failureThreshold", 3))


@dataclass(frozen=True)
class Streak:
    """The last outcome and how many times in a row it came."""

    last: bool | None = None
    run: int = 0


def advance(streak: Streak, success: bool, probe: Probe) -> tuple[Streak, bool | None]:
    """The streak after one more outcome, and the result it settles (None: not yet)."""
    run = streak.run + 1 if streak.last == success else 1
    streak = Streak(success, run)
    threshold = probe.success_threshold if success else probe.failure_threshold
    return streak, (success if run >= threshold else None)


@dataclass(frozen=True)
class ProbeStatus:
    """What a running container's probes say, for its containerStatuses entry."""

    ready: bool
    started: bool
