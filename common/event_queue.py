"""Events off the hot path, as client-go's record.EventBroadcaster sends them.

kube-scheduler and kube-controller-manager never wait for an Event: the recorder puts it
on the broadcaster's queue (`maxQueuedEvents` 1000; when full, the event is dropped) and
one goroutine writes them to the apiserver one after the other. The EventCorrelator's
spam filter in front (EventSourceObjectSpamFilter: a token bucket per source and involved
object, burst 25, one more every 5 minutes) keeps a pod that fails again and again, or a
ReplicaSet creating 1,000 pods, from flooding it. `EventQueue` is that: `emit` returns at
once (starting the writer task when none runs), `close` flushes what is queued at
shutdown. `QueuedRecorder` is an `common.events.EventRecorder` whose `event` only queues,
for code written against the recorder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from common.client import ApiClient
from common.events import EventRecorder, involved_object_of

log = logging.getLogger(__name__)

MAX_QUEUED_EVENTS = 1000  # client-go's maxQueuedEvents
SPAM_BURST = 25  # client-go's defaultSpamBurst
SPAM_QPS = 1 / 300  # client-go's defaultSpamQPS: one event every 5 minutes
MAX_SPAM_ENTRIES = 4096  # client-go's maxLruCacheEntries


@dataclass
class Bucket:
    tokens: float
    at: float


@dataclass
class SpamFilter:
    """A token bucket per key (pure but for the `now` given)."""

    burst: int = SPAM_BURST
    qps: float = SPAM_QPS
    _buckets: OrderedDict[str, Bucket] = field(default_factory=OrderedDict)

    def allow(self, key: str, now: float) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(float(self.burst), now)
            while len(self._buckets) > MAX_SPAM_ENTRIES:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.qps)
            bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


def spam_key(source: dict[str, str], involved: dict[str, str]) -> str:
    """getSpamKey: the source and the involved object (not the reason or message)."""
    return "/".join([source.get("component", ""), source.get("host", ""),
                     involved.get("kind", ""), involved.get("namespace", ""),
                     involved.get("name", ""), involved.get("uid", ""),
                     involved.get("apiVersion", "")])


# object, type, reason, message, and the recorder's keywords (`at`: when it happened)
Emitted = tuple[dict[str, Any], str, str, str, dict[str, Any]]


@dataclass
class EventQueue:
    # what writes one Event (an EventRecorder's `event`), and the source it writes as
    write: Callable[..., Awaitable[None]]
    source: dict[str, str]
    maxsize: int = MAX_QUEUED_EVENTS
    spam: SpamFilter = field(default_factory=SpamFilter)
    clock: Callable[[], float] = time.monotonic  # the spam filter's
    dropped: int = 0  # queue full
    filtered: int = 0  # spam filter
    _queue: asyncio.Queue[Emitted] = field(init=False)
    _writer: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._queue = asyncio.Queue(self.maxsize)

    def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str, *,
             field_path: str | None = None, at: float | None = None,
             action: str | None = None, annotations: dict[str, str] | None = None) -> None:
        """Queue an Event about `obj`, stamped `at` or now (its eventTime is when it
        happened, not when the writer gets to it); never waits, never raises."""
        involved = involved_object_of(obj, field_path=field_path)
        if not self.spam.allow(spam_key(self.source, involved), self.clock()):
            self.filtered += 1
            log.debug("event dropped by the spam filter: %s %s/%s %s", reason,
                      involved.get("namespace", ""), involved.get("name", ""), message)
            return
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="event writer")
        try:
            self._queue.put_nowait((obj, type_, reason, message, {
                "at": time.time() if at is None else at, "field_path": field_path, "action": action,
                "annotations": annotations}))
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full (%d): dropped the %s event of %s/%s "
                            "(%d dropped so far)", self.maxsize, reason,
                            involved.get("namespace"), involved.get("name"), self.dropped)

    def __len__(self) -> int:
        return self._queue.qsize()

    async def _write(self) -> None:
        """Write the queued events, one at a time, forever."""
        while True:
            obj, type_, reason, message, keywords = await self._queue.get()
            try:
                await self.write(obj, type_, reason, message, **keywords)  # never raises
            finally:
                self._queue.task_done()

    async def close(self, *, seconds: float) -> None:
        """Let the queued events be written (up to `seconds`), then stop the writer."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._queue.join()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        if self._queue.qsize():
            log.warning("stopping with %d event(s) not written", self._queue.qsize())


class QueuedRecorder(EventRecorder):
    """An `EventRecorder` whose `event` only queues (fire and forget, spam-filtered)."""

    def __init__(self, client: ApiClient, *, component: str, host: str | None = None,
                 **queue: Any) -> None:
        super().__init__(client, component=component, host=host)
        self.queue = EventQueue(super().event, self.source, **queue)

    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None, at: float | None = None,
                    action: str | None = None,
                    annotations: dict[str, str] | None = None) -> None:
        self.queue.emit(obj, type_, reason, message, field_path=field_path, at=at,
                        action=action, annotations=annotations)

    async def close(self, *, seconds: float) -> None:
        await self.queue.close(seconds=seconds)
