"""What the timeline recording itself costs per pod, measured directly: its own calls and
the bytes it adds to objects the components encode and decode anyway, timed here in CPU
time, each counted as often as this run's apiserver metrics say it happened, against the
CPU time the apiserver and the kubelet spent per pod in the same bursts.

The throughput crossover of bench_pod_startup.py measures the same thing from outside,
but one burst's throughput swings by more than the 5% bound from the next on a shared
2-core machine; this measures from inside, with an upper bound at every step:

- the calls: the apiserver's create stamp (`admit_create` with and without), the
  kubelet's three `EventSink.note`s, and per Event its annotations and eventTime
  (`make_event` with and without);
- the bytes: orjson encode and decode of the real pod and Events of the burst, as recorded
  and with the recording stripped (`strip_recording`); each pod request counts as two
  encodes and two decodes in the apiserver (request, etcd, watch cache, response), each
  list as `pods` pods, each watch event as one encode, and the kubelet as decoding every
  pod the apiserver sent and encoding and decoding every Event;
- a difference that comes out negative (noise) counts as zero.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from apiserver.resources.pods import admit_create
from common import timeline
from common.events import make_event
from kubelet.events import EventSink

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

READS = frozenset({"GET", "LIST"})
NOTES_PER_POD = 3  # the kubelet's KUBELET_SEEN, KUBELET_SEEN_REVISION, SANDBOX_READY


def parse_samples(text: str) -> Samples:
    """Every sample of a /metrics page, keyed by (sample name, its labels)."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@dataclass(frozen=True)
class Traffic:
    """What the apiserver served per pod during a burst (from /metrics deltas)."""

    pod_writes: float  # creates, updates, patches, deletes of pods, subresources included
    pod_reads: float  # gets; a list counts as `pods` gets
    pod_watch_events: float
    event_writes: float
    event_watch_events: float


def _delta(before: Samples, after: Samples, name: str,
           keep: Callable[[dict[str, str]], bool]) -> float:
    return sum(value - before.get(key, 0.0) for key, value in after.items()
               if key[0] == name and keep(dict(key[1])))


def traffic(before: Samples, after: Samples, pods: int) -> Traffic:
    """Per pod of a `pods` burst, from the apiserver's metrics before and after it."""
    def requests(resource: str, verbs: Callable[[str], bool]) -> float:
        return _delta(before, after, "apiserver_request_total",
                      lambda labels: labels.get("resource") == resource
                      and verbs(labels.get("verb", "")))

    def watch_events(kind: str) -> float:
        return _delta(before, after, "apiserver_watch_events_total",
                      lambda labels: labels.get("kind") == kind)

    writes = requests("pods", lambda verb: verb not in READS and verb != "WATCH")
    reads = requests("pods", lambda verb: verb == "GET") + pods * requests(
        "pods", lambda verb: verb == "LIST")
    return Traffic(pod_writes=writes / pods, pod_reads=reads / pods,
                   pod_watch_events=watch_events("Pod") / pods,
                   event_writes=requests("events", lambda v: v not in READS and v != "WATCH")
                   / pods,
                   event_watch_events=watch_events("Event") / pods)


def strip_recording(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` as a component would have written it with KUBELITE_TIMELINE=off: no
    `timeline.kubelite.io/*` annotations, no Event eventTime."""
    stripped = copy.deepcopy(dict(obj))
    metadata = stripped.get("metadata") or {}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items()
                   if not k.startswith(timeline.PREFIX)}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    if stripped.get("kind") == "Event" and "eventTime" in stripped:
        stripped["eventTime"] = None
    return stripped


@contextmanager
def recording(on: bool) -> Iterator[None]:
    saved = timeline.RECORDING
    timeline.RECORDING = on
    try:
        yield
    finally:
        timeline.RECORDING = saved


def cpu_us(call: Callable[[], object], calls: int) -> float:
    """This thread's CPU time per call of `call`, in microseconds."""
    start = time.thread_time_ns()
    for _ in range(calls):
        call()
    return (time.thread_time_ns() - start) / calls / 1000


def extra_us(on: Callable[[], object], off: Callable[[], object], *, calls: int = 20_000,
             blocks: int = 7) -> float:
    """The CPU `on` takes beyond `off` per call (the median of alternated blocks, each
    side timed with the recording as its name says), never below zero."""
    differences = []
    for block in range(blocks):
        sides = ((True, on), (False, off)) if block % 2 == 0 else ((False, off), (True, on))
        timed: dict[bool, float] = {}
        for flag, call in sides:
            with recording(flag):
                timed[flag] = cpu_us(call, calls)
        differences.append(timed[True] - timed[False])
    return max(0.0, statistics.median(differences))


@dataclass(frozen=True)
class Codec:
    """The extra CPU, per encode and per decode, of one object's recorded bytes."""

    encode_us: float
    decode_us: float
    extra_bytes: int


def codec_cost(recorded: Mapping[str, Any], **timing: int) -> Codec:
    plain = strip_recording(recorded)
    recorded_json, plain_json = orjson.dumps(recorded), orjson.dumps(plain)
    return Codec(encode_us=extra_us(lambda: orjson.dumps(recorded),
                                    lambda: orjson.dumps(plain), **timing),
                 decode_us=extra_us(lambda: orjson.loads(recorded_json),
                                    lambda: orjson.loads(plain_json), **timing),
                 extra_bytes=len(recorded_json) - len(plain_json))


@dataclass(frozen=True)
class Calls:
    """The recording's own calls, extra CPU per call."""

    admit_us: float  # the apiserver's create stamp
    note_us: float  # one kubelet EventSink.note
    event_us: float  # one Event's annotations and eventTime


def calls_cost(pod: Mapping[str, Any], event: Mapping[str, Any], **timing: int) -> Calls:
    spec = {"containers": [{"name": "app", "image": "x"}]}
    sink = EventSink(None)
    noted = {k: v for k, v in ((event.get("metadata") or {}).get("annotations") or {}).items()
             if k.startswith(timeline.PREFIX)}
    arguments: dict[str, Any] = {
        "name": "p.1", "namespace": "default", "involved": dict(event.get("involvedObject") or {}),
        "type_": "Normal", "reason": "Started", "message": "Started container app",
        "source": {"component": "kubelet", "host": "node"}, "count": 1,
        "first_timestamp": "2026-12-04T00:00:00Z", "last_timestamp": "2026-12-04T00:00:00Z",
        "event_time": "2026-12-04T00:00:00.000000Z"}
    uid = str((pod.get("metadata") or {}).get("uid", "uid"))
    return Calls(
        admit_us=extra_us(lambda: admit_create({"metadata": {"name": "p"}, "spec": dict(spec)}),
                          lambda: admit_create({"metadata": {"name": "p"}, "spec": dict(spec)}),
                          **timing),
        note_us=extra_us(lambda: sink.note(uid, timeline.KUBELET_SEEN),
                         lambda: sink.note(uid, timeline.KUBELET_SEEN), **timing),
        event_us=extra_us(lambda: make_event(**arguments, annotations=dict(noted)),
                          lambda: make_event(**arguments, annotations={}), **timing))


@dataclass(frozen=True)
class Work:
    """The recording's extra CPU per pod, in microseconds, in each component."""

    apiserver_us: float
    kubelet_us: float


def recording_work(traffic: Traffic, calls: Calls, pod: Codec, event: Codec) -> Work:
    """The upper bounds of the module docstring, per pod."""
    pod_both = pod.encode_us + pod.decode_us
    event_both = event.encode_us + event.decode_us
    apiserver = (calls.admit_us
                 + (traffic.pod_writes + traffic.pod_reads) * 2 * pod_both
                 + traffic.pod_watch_events * pod.encode_us
                 + traffic.event_writes * 2 * event_both
                 + traffic.event_watch_events * event.encode_us)
    kubelet = (NOTES_PER_POD * calls.note_us
               + traffic.event_writes * (calls.event_us + event_both)
               + (traffic.pod_writes + traffic.pod_reads + traffic.pod_watch_events)
               * pod.decode_us)
    return Work(apiserver_us=apiserver, kubelet_us=kubelet)


def report(work: Work, traffic: Traffic, calls: Calls, pod: Codec, event: Codec, *,
           apiserver_cpu_ms: float, kubelet_cpu_ms: float) -> list[str]:
    """Report lines: what was timed and counted, and each component's share."""
    shares = {"apiserver": work.apiserver_us / 1000 / apiserver_cpu_ms,
              "kubelet": work.kubelet_us / 1000 / kubelet_cpu_ms}
    worst = max(shares, key=lambda k: shares[k])
    return [
        "  the recording's own work per pod (timed here in CPU time, counted from this run's "
        "apiserver metrics):",
        f"    calls: create stamp {calls.admit_us:.2f} us, kubelet note {calls.note_us:.2f} us "
        f"x {NOTES_PER_POD}, Event annotations+eventTime {calls.event_us:.2f} us",
        f"    bytes: pod +{pod.extra_bytes} B (encode +{pod.encode_us:.3f} us, decode "
        f"+{pod.decode_us:.3f} us), Event +{event.extra_bytes} B (encode "
        f"+{event.encode_us:.3f} us, decode +{event.decode_us:.3f} us)",
        f"    per pod: {traffic.pod_writes:.1f} pod writes, {traffic.pod_reads:.1f} pod reads, "
        f"{traffic.pod_watch_events:.1f} pod watch events, {traffic.event_writes:.1f} Event "
        f"writes, {traffic.event_watch_events:.1f} Event watch events",
        f"    apiserver: {work.apiserver_us:.1f} us of {apiserver_cpu_ms:.1f} CPU ms per pod = "
        f"{shares['apiserver'] * 100:.3f}%",
        f"    kubelet:   {work.kubelet_us:.1f} us of {kubelet_cpu_ms:.1f} CPU ms per pod = "
        f"{shares['kubelet'] * 100:.3f}%",
        f"    recording costs at most {shares[worst] * 100:.3f}% of pod-startup throughput "
        f"(the {worst}'s share; target <= 5%)",
    ]
