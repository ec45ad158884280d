"""Events off the hot path (common.event_queue), as client-go's broadcaster sends them:
the spam filter (EventSourceObjectSpamFilter), the bounded queue that never waits, and the
queued recorder the controllers use."""

from __future__ import annotations

import asyncio
import time

from common.event_queue import SPAM_BURST, EventQueue, QueuedRecorder, SpamFilter, spam_key


def test_a_burst_of_25_then_one_per_five_minutes() -> None:
    spam = SpamFilter()
    allowed = [spam.allow("rs-a", 0.0) for _ in range(SPAM_BURST + 5)]
    assert allowed == [True] * SPAM_BURST + [False] * 5
    assert not spam.allow("rs-a", 299.0)
    assert spam.allow("rs-a", 301.0)
    assert not spam.allow("rs-a", 302.0)
    assert spam.allow("rs-b", 302.0)  # each object has its own bucket


def test_the_key_is_the_source_and_the_object_not_the_reason() -> None:
    source = {"component": "replicaset-controller"}
    rs = {"kind": "ReplicaSet", "namespace": "default", "name": "web", "uid": "u",
          "apiVersion": "apps/v1"}
    assert spam_key(source, rs) == spam_key(source, dict(rs))
    assert spam_key(source, rs) != spam_key(source, {**rs, "name": "other"})
    assert spam_key(source, rs) != spam_key({"component": "deployment-controller"}, rs)


class SlowWriter:
    def __init__(self) -> None:
        self.written: list[str] = []
        self.stamped: list[float] = []
        self.gate = asyncio.Event()

    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    at: float, field_path: str | None = None, action: str | None = None,
                    annotations: dict[str, str] | None = None) -> None:
        await self.gate.wait()
        self.written.append(message)
        self.stamped.append(at)


SOURCE = {"component": "default-scheduler"}


async def test_the_queue_never_waits_drops_when_full_and_writes_the_rest_on_close() -> None:
    writer = SlowWriter()
    events = EventQueue(writer.event, SOURCE, maxsize=3)
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "uid": str(i)}} for i in range(6)]
    emitted = time.time()
    for i, pod in enumerate(pods):
        events.emit(pod, "Normal", "Scheduled", f"m{i}")  # returns at once
    assert events.dropped == 3 and len(events) == 3  # the writer has not run yet
    await asyncio.sleep(0)  # it takes m0 and waits on the gate: nothing else waits
    assert writer.written == []
    writer.gate.set()
    await events.close(seconds=5)
    assert writer.written == ["m0", "m1", "m2"]
    # each Event's time is when it was emitted, not when the writer got to it
    assert all(emitted <= at <= emitted + 1 for at in writer.stamped)


async def test_the_queue_filters_spam_per_object_by_its_clock() -> None:
    writer = SlowWriter()
    writer.gate.set()
    now = [0.0]
    events = EventQueue(writer.event, SOURCE, clock=lambda: now[0])
    pod = {"kind": "Pod", "metadata": {"namespace": "default", "name": "web", "uid": "1"}}
    other = {"kind": "Pod", "metadata": {"namespace": "default", "name": "db", "uid": "2"}}
    for i in range(SPAM_BURST + 3):
        events.emit(pod, "Warning", "FailedScheduling", f"w{i}")
    events.emit(other, "Warning", "FailedScheduling", "db")
    now[0] = 301.0
    events.emit(pod, "Warning", "FailedScheduling", "later")
    await events.close(seconds=5)
    assert events.filtered == 3
    assert writer.written == [f"w{i}" for i in range(SPAM_BURST)] + ["db", "later"]


async def test_a_queued_recorder_returns_before_the_write_and_flushes_on_close() -> None:
    written: list[tuple[str, float | None]] = []
    gate = asyncio.Event()

    class Client:  # what EventRecorder._record needs is never reached: `_record` is replaced
        pass

    recorder = QueuedRecorder(Client(), component="replicaset-controller")  # type: ignore[arg-type]

    async def record(involved: dict[str, str], type_: str, reason: str, message: str, *,
                     at: float, action: str | None, annotations: dict[str, str] | None) -> None:
        await gate.wait()
        written.append((message, at))

    recorder._record = record  # type: ignore[method-assign]
    rs = {"kind": "ReplicaSet", "apiVersion": "apps/v1",
          "metadata": {"namespace": "default", "name": "web", "uid": "u"}}
    async with asyncio.timeout(1):
        await recorder.event(rs, "Normal", "SuccessfulCreate", "Created pod: web-1")
        await recorder.event(rs, "Normal", "SuccessfulCreate", "Created pod: web-2", at=5.0)
    assert written == []  # queued, not written: the recorder did not wait
    gate.set()
    await recorder.close(seconds=5)
    assert [m for m, _ in written] == ["Created pod: web-1", "Created pod: web-2"]
    assert written[1][1] == 5.0  # an instant given is kept
