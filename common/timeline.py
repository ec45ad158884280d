"""A pod's measured flow, as the seeds draw it: client → apiserver → etcd → scheduler
(watch, bind) → apiserver → etcd → kubelet (watch) → docker → status back.

Pure: `build(pod, events)` turns what the API holds about one pod into a `Timeline` (one
`Hop` per arrow, each with its instant since the create and its duration); renderers
(common/timeline_render.py) draw it, `kubectl timeline` (common/timeline_cli.py) and the
dashboard alike.

Where the instants come from, most precise first:
- Events' `eventTime` (MicroTime): every component writes it, the instant the thing
  happened (Scheduled: the binding acknowledged; Pulled, Created, Started: done).
- Annotations on those Events (client-go's AnnotatedEventf), for instants a component
  knows but has no Event of its own: the scheduler's `queued`, `cycle-started` and
  `decided`, the kubelet's `kubelet-seen` and `sandbox-ready`.
- The pod's `timeline.kubelite.io/created` annotation, stamped by the apiserver when it
  accepted the create (creationTimestamp has whole seconds only).
- The etcd revisions: the `resourceVersion` of the pod each component saw, which its
  Events' involvedObject keeps (the scheduler sees the create's revision), and the
  kubelet's `kubelet-seen-revision` annotation (the binding's, or the create's).
- Conditions' `lastTransitionTime` (whole seconds) for the Ready status write: no Event
  marks it. Such hops are flagged `precise=False`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from common.timestamps import micro_time

PREFIX = "timeline.kubelite.io/"
CREATED = PREFIX + "created"  # on the pod, by the apiserver
QUEUED = PREFIX + "queued"  # on the scheduler's Events
CYCLE_STARTED = PREFIX + "cycle-started"
DECIDED = PREFIX + "decided"
KUBELET_SEEN = PREFIX + "kubelet-seen"  # on the kubelet's Events
KUBELET_SEEN_REVISION = PREFIX + "kubelet-seen-revision"  # the pod's resourceVersion then
SANDBOX_READY = PREFIX + "sandbox-ready"
UNSCHEDULABLE_NODES = "scheduler.kubelite.io/unschedulable-nodes"

# For bench/bench_pod_startup.py only (it measures what the recording costs): with
# KUBELITE_TIMELINE=off in its environment, a component stamps none of the annotations
# above and writes its Events without eventTime (as client-go's core/v1 recorder does).
RECORDING_ENV = "KUBELITE_TIMELINE"
RECORDING = os.environ.get(RECORDING_ENV, "on") != "off"

CLIENT, APISERVER, ETCD, SCHEDULER, KUBELET, DOCKER = (
    "client", "apiserver", "etcd", "scheduler", "kubelet", "docker")
LANES = (CLIENT, APISERVER, ETCD, SCHEDULER, KUBELET, DOCKER)

SCHEDULER_REASONS = frozenset({"Scheduled", "FailedScheduling"})
PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull",
                           "InvalidImageName"})


def scheduling_instants(waited_seconds: float, cycle_started: float, *,
                        now: float | None = None) -> dict[str, str]:
    """The scheduler's annotations: when the pod was queued (`waited_seconds` ago), when
    this cycle started and when it decided (now), as MicroTimes."""
    if not RECORDING:
        return {}
    decided = time.time() if now is None else now
    return {QUEUED: micro_time(decided - waited_seconds), CYCLE_STARTED: micro_time(cycle_started),
            DECIDED: micro_time(decided)}


@dataclass(frozen=True)
class Hop:
    """One arrow: `source` → `target` (the same lane for a step of its own)."""

    source: str
    target: str
    label: str
    at: float  # seconds since the create was accepted
    duration: float | None = None  # seconds this hop took, when measured
    detail: tuple[str, ...] = ()  # more lines: per-node reasons, messages
    failed: bool = False
    precise: bool = True  # False: from a whole-second timestamp


@dataclass(frozen=True)
class Timeline:
    namespace: str
    name: str
    created: str  # the create's instant, RFC 3339
    node: str | None
    hops: tuple[Hop, ...]
    outcome: str  # "Ready", "Unschedulable", "ErrImagePull", "CrashLoopBackOff", ...
    why: tuple[str, ...] = ()  # where it stopped and why, for an outcome that is not Ready
    skipped: Mapping[str, str] = field(default_factory=dict)  # lane -> why it was skipped
    lanes: tuple[str, ...] = LANES

    @property
    def ok(self) -> bool:
        return self.outcome in ("Ready", "Succeeded")

    @property
    def total(self) -> float:
        return max((h.at + (h.duration or 0.0) for h in self.hops), default=0.0)


# --- reading the API's objects ----------------------------------------------------------

def parse_time(value: object) -> datetime | None:
    """An RFC 3339 Time or MicroTime; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Seen:
    """One Event, reduced to what the timeline needs."""

    reason: str
    message: str
    component: str
    container: str | None
    at: datetime
    precise: bool
    count: int
    last: datetime | None
    revision: int | None
    annotations: Mapping[str, str]


def container_of(field_path: str) -> str | None:
    """`spec.containers{app}` → `app`."""
    if "{" in field_path and field_path.endswith("}"):
        return field_path[field_path.index("{") + 1:-1]
    return None


def seen_of(event: Mapping[str, Any]) -> Seen | None:
    micro = parse_time(event.get("eventTime"))
    at = micro or parse_time(event.get("firstTimestamp")) or parse_time(
        (event.get("metadata") or {}).get("creationTimestamp"))
    if at is None:
        return None
    involved = event.get("involvedObject") or event.get("regarding") or {}
    revision = str(involved.get("resourceVersion") or "")
    source = event.get("source") or {}
    series = event.get("series") or {}
    return Seen(
        reason=str(event.get("reason") or ""), message=str(event.get("message") or ""),
        component=str(source.get("component") or event.get("reportingComponent") or ""),
        container=container_of(str(involved.get("fieldPath") or "")),
        at=at, precise=micro is not None, count=int(event.get("count") or 1),
        last=parse_time(series.get("lastObservedTime")) or parse_time(
            event.get("lastTimestamp")),
        revision=int(revision) if revision.isdigit() else None,
        annotations=(event.get("metadata") or {}).get("annotations") or {})


def ordered_events(events: Iterable[Mapping[str, Any]]) -> list[Seen]:
    return sorted((s for s in map(seen_of, events) if s is not None), key=lambda s: s.at)


def seconds(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else (b - a).total_seconds()


def annotation_time(seen: Iterable[Seen], key: str) -> datetime | None:
    """The earliest instant `key` names on any of these Events."""
    times = [t for s in seen if (t := parse_time(s.annotations.get(key))) is not None]
    return min(times, default=None)


def fmt_duration(value: float) -> str:
    if value < 1.0:
        return f"{value * 1000:.0f}ms" if value >= 0.0095 else f"{value * 1000:.1f}ms"
    return f"{value:.2f}s"


# --- the story of one pod -----------------------------------------------------------------

@dataclass
class _Builder:
    origin: datetime
    hops: list[Hop] = field(default_factory=list)

    def add(self, source: str, target: str, label: str, at: datetime | None, *,
            until: datetime | None = None, detail: Sequence[str] = (), failed: bool = False,
            precise: bool = True) -> datetime | None:
        if at is None:
            return None
        since = (at - self.origin).total_seconds()
        if not precise and self.hops:
            # a whole-second stamp can read before what it followed
            since = max(since, max(h.at + (h.duration or 0.0) for h in self.hops))
        duration = seconds(at, until)
        self.hops.append(Hop(source, target, label, since,
                             None if duration is None else max(duration, 0.0),
                             tuple(detail), failed, precise))
        return until or at


def per_node_reasons(pod: Mapping[str, Any]) -> list[str]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(UNSCHEDULABLE_NODES)
    try:
        reasons = json.loads(text) if text else {}
    except ValueError:
        return []
    if not isinstance(reasons, dict):
        return []
    return [f"{node}: {why}" for node, why in sorted(reasons.items())]


def revision_label(what: str, revision: int | None) -> str:
    return f"{what}, rev {revision}" if revision is not None else what


def _schedule(b: _Builder, pod: Mapping[str, Any], events: list[Seen]) -> datetime | None:
    """The scheduler's arrows; the instant the binding was committed, if it was."""
    mine = [s for s in events if s.reason in SCHEDULER_REASONS]
    queued = annotation_time(mine, QUEUED)
    b.add(ETCD, SCHEDULER, "watch: new unbound pod", b.origin, until=queued)
    for s in mine:
        cycle = parse_time(s.annotations.get(CYCLE_STARTED))
        decided = parse_time(s.annotations.get(DECIDED))
        if s.reason == "FailedScheduling":
            attempts = f" (x{s.count}, last {fmt_since(b.origin, s.last)})" if s.count > 1 else ""
            b.add(SCHEDULER, SCHEDULER, f"filter: {first_sentence(s.message)}{attempts}",
                  cycle or decided or s.at, until=decided or s.at,
                  detail=per_node_reasons(pod) or [s.message], failed=True,
                  precise=s.precise)
            continue
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        b.add(SCHEDULER, SCHEDULER, f"filter, score: {node}", cycle or decided,
              until=decided, detail=score_detail(s.message))
        b.add(SCHEDULER, APISERVER, f"bind to {node}", decided or s.at, until=s.at,
              precise=s.precise)
        kubelet = [k for k in events if k.component == KUBELET]
        kubelet_rev = seen_revision(kubelet)
        # committed before the scheduler heard back, and before the kubelet saw it
        seen = annotation_time(kubelet, KUBELET_SEEN)
        committed = min(s.at, seen) if seen is not None and s.precise else s.at
        b.add(APISERVER, ETCD, revision_label("commit binding", kubelet_rev), committed,
              precise=s.precise)
        return committed
    return None


def seen_revision(kubelet: list[Seen]) -> int | None:
    """The revision of the pod when the kubelet first saw it (the binding's, or the
    create's for a nodeName pod); else the earliest its Events name."""
    for s in kubelet:
        text = s.annotations.get(KUBELET_SEEN_REVISION) or ""
        if text.isdigit():
            return int(text)
    return min((s.revision for s in kubelet if s.revision is not None), default=None)


def first_sentence(message: str) -> str:
    return message.split(". ")[0].rstrip(".")


def score_detail(message: str) -> list[str]:
    rest = message.split(". ", 1)
    return [rest[1].strip()] if len(rest) == 2 and rest[1].strip() else []


def fmt_since(origin: datetime, at: datetime | None) -> str:
    return "?" if at is None else f"+{fmt_duration((at - origin).total_seconds())}"


def _containers(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [str(c.get("name")) for key in ("initContainers", "containers")
            for c in spec.get(key) or []]


def _run(b: _Builder, pod: Mapping[str, Any], events: list[Seen],
         bound: datetime | None) -> datetime | None:
    """The kubelet's arrows; the instant its last one ended."""
    mine = [s for s in events if s.component == KUBELET]
    if not mine:
        return None
    seen = annotation_time(mine, KUBELET_SEEN)
    node = (pod.get("spec") or {}).get("nodeName") or "?"
    last = b.add(ETCD, KUBELET, f"watch: pod on {node}", bound or b.origin, until=seen)
    sandbox = annotation_time(mine, SANDBOX_READY)
    sandbox_failed = [s for s in mine if s.reason == "FailedCreatePodSandBox"]
    if sandbox is not None:
        last = b.add(KUBELET, DOCKER, "run pod sandbox", seen or sandbox, until=sandbox)
    for s in sandbox_failed:
        b.add(KUBELET, DOCKER, "run pod sandbox", s.at, detail=[s.message], failed=True,
              precise=s.precise)
    for name in _containers(pod):
        last = _container(b, name, [s for s in mine if s.container == name], last) or last
    return last


def _container(b: _Builder, name: str, events: list[Seen],
               previous: datetime | None) -> datetime | None:
    pulling: Seen | None = None
    created: Seen | None = None
    last = previous
    for s in events:
        times = f" (x{s.count})" if s.count > 1 else ""
        if s.reason == "Pulling":
            pulling = s
        elif s.reason == "Pulled":
            if pulling is not None:
                last = b.add(KUBELET, DOCKER, f"pull image ({name})", pulling.at, until=s.at,
                             detail=[s.message])
                pulling = None
            else:
                last = b.add(KUBELET, DOCKER, f"image present ({name})", s.at,
                             detail=[s.message])
        elif s.reason == "Created":
            created = s
            last = b.add(KUBELET, DOCKER, f"create container {name}{times}", last or s.at,
                         until=s.at, precise=s.precise)
        elif s.reason == "Started":  # the first start; `times` counts the restarts too
            last = b.add(KUBELET, DOCKER, f"start container {name}{times}",
                         created.at if created else s.at, until=s.at, precise=s.precise)
        elif s.reason == "Failed" and pulling is not None:
            b.add(KUBELET, DOCKER, f"pull image ({name}){times}", pulling.at, until=s.at,
                  detail=[s.message], failed=True, precise=s.precise)
            pulling = None
        elif s.reason in ("Failed", "BackOff"):
            b.add(KUBELET, DOCKER, f"{first_sentence(s.message)} ({name}){times}", s.at,
                  failed=True, precise=s.precise)
    return last


def _ready(b: _Builder, pod: Mapping[str, Any]) -> None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            at = parse_time(condition.get("lastTransitionTime"))
            b.add(KUBELET, APISERVER, "status: Ready", at, precise=False)
            b.add(APISERVER, ETCD, "commit status", at, precise=False)


def outcome_of(pod: Mapping[str, Any], events: list[Seen]) -> tuple[str, tuple[str, ...]]:
    """What became of the pod, and, when it is stuck, why."""
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or [])]
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason") or ""
        if reason in PULL_FAILURES or reason in ("CrashLoopBackOff", "CreateContainerError",
                                                 "CreateContainerConfigError"):
            why = [f"container {cs.get('name')}: {reason}"]
            if reason == "CrashLoopBackOff":
                why[0] += f", {cs.get('restartCount', 0)} restart(s)"
                terminated = (cs.get("lastState") or {}).get("terminated") or {}
                if terminated:
                    why.append(f"last exit: {terminated.get('reason', '')} (exit code "
                               f"{terminated.get('exitCode')})")
            if waiting.get("message"):
                why.append(str(waiting["message"]))
            return reason, tuple(why)
    phase = status.get("phase") or "Pending"
    if phase in ("Succeeded", "Failed"):
        return phase, tuple(filter(None, [status.get("reason"), status.get("message")]))
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "True":
            return "Ready", ()
    if not (pod.get("spec") or {}).get("nodeName"):
        failed = [s for s in events if s.reason == "FailedScheduling"]
        if failed:
            return "Unschedulable", (failed[-1].message, *per_node_reasons(pod))
        return "Pending", ("not scheduled yet",)
    return phase, ()


def build(pod: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> Timeline:
    """The timeline of `pod` from the Events about it (any order, any component)."""
    metadata = pod.get("metadata") or {}
    uid = metadata.get("uid")
    ordered = [s for s, e in ((seen_of(e), e) for e in events)
               if s is not None and (not uid or (e.get("involvedObject") or e.get(
                   "regarding") or {}).get("uid") in (None, uid))]
    ordered.sort(key=lambda s: s.at)
    created_text = (metadata.get("annotations") or {}).get(CREATED)
    origin = parse_time(created_text) or parse_time(metadata.get("creationTimestamp")) \
        or (ordered[0].at if ordered else datetime.now(UTC))
    b = _Builder(origin)
    b.add(CLIENT, APISERVER, "create pod", origin, precise=created_text is not None)
    scheduler = [s for s in ordered if s.reason in SCHEDULER_REASONS]
    first = (next((s.revision for s in scheduler if s.revision is not None), None)
             if scheduler else seen_revision([s for s in ordered if s.component == KUBELET]))
    b.add(APISERVER, ETCD, revision_label("commit pod", first), origin,
          precise=created_text is not None)
    skipped: dict[str, str] = {}
    bound = None
    if any(s.reason in SCHEDULER_REASONS for s in ordered):
        bound = _schedule(b, pod, ordered)
    elif (pod.get("spec") or {}).get("nodeName"):
        skipped[SCHEDULER] = "spec.nodeName was set at create"
    _run(b, pod, ordered, bound)
    _ready(b, pod)
    outcome, why = outcome_of(pod, ordered)
    return Timeline(namespace=str(metadata.get("namespace") or "default"),
                    name=str(metadata.get("name") or ""),
                    created=origin.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    node=(pod.get("spec") or {}).get("nodeName"), hops=tuple(b.hops),
                    outcome=outcome, why=why, skipped=skipped)
