"""A rate-limited work queue of keys, after client-go's `util/workqueue`.

Controllers put object keys ("namespace/name") in, and workers take them out one at a
time. As client-go's queue:

- a key is in the queue at most once (`dirty`), however often it is added before a
  worker takes it;
- a key being processed (`processing`) is never handed to a second worker: added
  meanwhile, it is queued again when the first worker calls `done(key)`;
- `add_after(key, seconds)` adds it later (the earliest of several pending times wins);
- `add_rate_limited(key)` adds it after its per-key exponential back-off
  (`common.backoff.ItemBackoff`, 5 ms doubling to 1000 s by default), and `forget(key)`
  after a successful sync starts that back-off over.

`get()` waits for a key; after `shut_down()` it returns None once the queue is empty.
Everything runs on the event loop: no locks, nothing blocks.

client-go's queue metrics are kept per queue (`name` label): `adds`, `retries`, `len()`,
and `queue_duration` (added -> handed to a worker) and `work_duration` (handed -> done)
with client-go's buckets; the controller-manager serves them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from common.backoff import ItemBackoff
from common.metrics import Histogram, exponential_buckets

# client-go's workqueue_queue_duration_seconds and workqueue_work_duration_seconds buckets
DURATION_BUCKETS = exponential_buckets(10e-9, 10, 10)
QUEUE_DURATION = ("workqueue_queue_duration_seconds",
                  "How long in seconds an item stays in workqueue before being requested.")
WORK_DURATION = ("workqueue_work_duration_seconds",
                 "How long in seconds processing an item from workqueue takes.")


class WorkQueue:
    def __init__(self, name: str = "", *, rate_limiter: ItemBackoff | None = None) -> None:
        self.name = name
        self.rate_limiter = rate_limiter if rate_limiter is not None else ItemBackoff()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self.adds = 0  # workqueue_adds_total
        self.retries = 0  # workqueue_retries_total
        self.queue_duration = Histogram(*QUEUE_DURATION, ("name",), DURATION_BUCKETS)
        self.work_duration = Histogram(*WORK_DURATION, ("name",), DURATION_BUCKETS)
        self._labels = (name,)
        self._added_at: dict[str, float] = {}  # queued key -> when
        self._started_at: dict[str, float] = {}  # key being processed -> since when

    def __len__(self) -> int:
        return len(self._queue)

    def longest_running(self) -> float:
        """workqueue_longest_running_processor_seconds: how long the oldest key being
        processed has been."""
        return time.monotonic() - min(self._started_at.values()) if self._started_at else 0.0

    def unfinished_work(self) -> float:
        """workqueue_unfinished_work_seconds: the time spent on keys not done yet."""
        now = time.monotonic()
        return sum(now - started for started in self._started_at.values())

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self.adds += 1
        if key in self._processing:
            return  # `done` queues it again
        self._added_at[key] = time.monotonic()
        self._queue.append(key)
        self._wake_one()

    async def get(self) -> str | None:
        """The next key (now being processed: call `done(key)`), or None after shut_down."""
        while not self._queue:
            if self._shutting_down:
                return None
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._getters:
                    self._getters.remove(waiter)
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = time.monotonic()
        added = self._added_at.pop(key, None)
        if added is not None:
            self.queue_duration.observe(now - added, self._labels)
        self._started_at[key] = now
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        now = time.monotonic()
        started = self._started_at.pop(key, None)
        if started is not None:
            self.work_duration.observe(now - started, self._labels)
        if key in self._dirty:
            self._added_at[key] = now
            self._queue.append(key)
            self._wake_one()

    def add_after(self, key: str, seconds: float) -> None:
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + seconds
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return  # already due sooner
            pending[1].cancel()
        self._waiting[key] = (ready_at, loop.call_at(ready_at, self._ready, key))

    def _ready(self, key: str) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> None:
        self.retries += 1
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    def shut_down(self) -> None:
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
