"""bench/recording_work.py's pure parts: what the recording adds to an object is exactly
what `strip_recording` takes away, the metrics deltas it counts, and its arithmetic."""

from __future__ import annotations

import copy
import time
from typing import Any

import orjson
import pytest

from apiserver.resources.pods import admit_create
from bench import recording_work
from common import timeline
from common.events import make_event

EVENT_ARGUMENTS: dict[str, Any] = {
    "name": "p.1", "namespace": "d", "involved": {"kind": "Pod", "name": "p"},
    "type_": "Normal", "reason": "Started", "message": "m",
    "source": {"component": "kubelet", "host": "n"}, "count": 1,
    "first_timestamp": "2026-12-04T00:00:00Z", "last_timestamp": "2026-12-04T00:00:00Z",
    "event_time": "2026-12-04T00:00:00.123456Z"}


def admitted(annotations: dict[str, str] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "app", "image": "x"}]}}
    if annotations is not None:
        pod["metadata"]["annotations"] = dict(annotations)
    admit_create(pod)
    return pod


@pytest.mark.parametrize("annotations", [None, {"team": "a"}])
def test_stripping_a_recorded_pod_gives_what_recording_off_writes(
        annotations: dict[str, str] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = admitted(annotations)
    assert timeline.CREATED in recorded["metadata"]["annotations"]
    monkeypatch.setattr(timeline, "RECORDING", False)
    assert recording_work.strip_recording(recorded) == admitted(annotations)
    assert timeline.CREATED in recorded["metadata"]["annotations"]  # the original is kept


def test_stripping_a_recorded_event_gives_what_recording_off_writes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    noted = {timeline.KUBELET_SEEN: "2026-12-04T00:00:00.000001Z",
             timeline.SANDBOX_READY: "2026-12-04T00:00:00.000002Z"}
    recorded = make_event(**EVENT_ARGUMENTS, annotations=noted)
    assert recorded["eventTime"] and recorded["metadata"]["annotations"] == noted
    monkeypatch.setattr(timeline, "RECORDING", False)
    off = make_event(**EVENT_ARGUMENTS, annotations={})
    assert recording_work.strip_recording(recorded) == off
    assert off["eventTime"] is None and "annotations" not in off["metadata"]


METRICS_BEFORE = """\
# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="pods",subresource="",code="201"} 10
apiserver_request_total{verb="LIST",resource="pods",subresource="",code="200"} 1
apiserver_request_total{verb="POST",resource="events",subresource="",code="201"} 4
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",version="v1",kind="Pod"} 7
"""
METRICS_AFTER = """\
# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="pods",subresource="",code="201"} 14
apiserver_request_total{verb="PATCH",resource="pods",subresource="status",code="200"} 8
apiserver_request_total{verb="DELETE",resource="pods",subresource="",code="200"} 4
apiserver_request_total{verb="GET",resource="pods",subresource="",code="200"} 2
apiserver_request_total{verb="LIST",resource="pods",subresource="",code="200"} 3
apiserver_request_total{verb="WATCH",resource="pods",subresource="",code="200"} 1
apiserver_request_total{verb="POST",resource="events",subresource="",code="201"} 16
apiserver_request_total{verb="PATCH",resource="events",subresource="",code="200"} 4
apiserver_request_total{verb="POST",resource="configmaps",subresource="",code="201"} 9
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",version="v1",kind="Pod"} 31
apiserver_watch_events_total{group="",version="v1",kind="Event"} 2
"""


def test_traffic_per_pod_from_the_metrics_deltas() -> None:
    served = recording_work.traffic(recording_work.parse_samples(METRICS_BEFORE),
                                    recording_work.parse_samples(METRICS_AFTER), pods=4)
    assert served == recording_work.Traffic(
        pod_writes=(4 + 8 + 4) / 4,  # the creates, status patches and deletes; no watch
        pod_reads=(2 + 4 * 2) / 4,  # gets, and each of the 2 new lists as 4 pods
        pod_watch_events=24 / 4, event_writes=(12 + 4) / 4, event_watch_events=2 / 4)


def test_the_work_counts_each_object_as_often_as_the_upper_bound_says() -> None:
    served = recording_work.Traffic(pod_writes=4, pod_reads=1, pod_watch_events=6,
                                    event_writes=5, event_watch_events=0)
    calls = recording_work.Calls(admit_us=1.0, note_us=0.5, event_us=0.25)
    pod = recording_work.Codec(encode_us=0.1, decode_us=0.2, extra_bytes=80)
    event = recording_work.Codec(encode_us=0.01, decode_us=0.02, extra_bytes=200)
    work = recording_work.recording_work(served, calls, pod, event)
    assert work.apiserver_us == pytest.approx(1.0 + 5 * 2 * 0.3 + 6 * 0.1 + 5 * 2 * 0.03)
    assert work.kubelet_us == pytest.approx(3 * 0.5 + 5 * (0.25 + 0.03) + (4 + 1 + 6) * 0.2)
    lines = recording_work.report(work, served, calls, pod, event,
                                  apiserver_cpu_ms=10.0, kubelet_cpu_ms=100.0)
    # the apiserver's 4.9 us of 10 ms (0.049%) outweighs the kubelet's 5.1 us of 100 ms
    assert lines[-1].startswith("    recording costs at most 0.049% of pod-startup throughput "
                                "(the apiserver's share")


def test_the_extra_cpu_of_a_heavier_call_is_measured_and_noise_is_never_negative() -> None:
    small, large = orjson.dumps({"a": 1}), orjson.dumps({f"k{i}": "v" * 50 for i in range(200)})
    heavier = recording_work.extra_us(lambda: orjson.loads(large), lambda: orjson.loads(small),
                                      calls=2000, blocks=3)
    assert heavier > 1.0  # 200 keys of 50 bytes cost microseconds more than one key
    assert recording_work.extra_us(lambda: orjson.loads(small), lambda: orjson.loads(large),
                                   calls=2000, blocks=3) == 0.0


def test_each_side_is_timed_with_the_recording_as_its_name_says() -> None:
    seen: list[bool] = []
    recording_work.extra_us(lambda: seen.append(timeline.RECORDING),
                            lambda: seen.append(not timeline.RECORDING), calls=3, blocks=2)
    assert seen == [True] * 12
    assert timeline.RECORDING  # restored


def test_the_codec_cost_is_that_of_the_recorded_bytes() -> None:
    recorded = admitted(None)
    recorded["metadata"]["annotations"][timeline.CREATED] = "2026-12-04T00:00:00.000000Z"
    codec = recording_work.codec_cost(copy.deepcopy(recorded), calls=200, blocks=3)
    assert codec.extra_bytes == len(orjson.dumps(recorded)) - len(
        orjson.dumps(recording_work.strip_recording(recorded)))
    assert codec.extra_bytes > len(timeline.CREATED)
    assert codec.encode_us >= 0 and codec.decode_us >= 0
    assert recording_work.cpu_us(lambda: time.sleep(0.002), 5) < 1000  # CPU, not wall time
