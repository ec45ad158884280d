"""One etcd watch per resource, shared by every watcher of it (kube-apiserver's Cacher).

The cache keeps a window of the resource's recent events (a ring buffer) and the revision
it has seen everything up to. A watch from revision N is served from the cache when the
window still holds every event after N: the events after N are replayed, then live ones
follow, in order, each once. Anything older, or a cache that is (re)starting, falls back
to a watch of its own on etcd, which also answers compaction with 410.

Slow watchers cannot hold the cache back: a watcher whose backlog overflows is closed,
and its client resumes from the last resourceVersion it saw, as with kube.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from apiserver.storage import Progress, Storage, StorageError, WatchEvent

log = logging.getLogger("apiserver.cacher")

WINDOW_EVENTS = 10_000
MAX_BACKLOG = 10_000
PROGRESS_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class Closed:
    """The cache stopped (etcd failed) or this watcher fell too far behind."""

    reason: str


Item = WatchEvent | Progress | Closed


class CacheWatcher:
    def __init__(self, cache: ResourceCache, key_prefix: str, after: int) -> None:
        self.cache = cache
        self.key_prefix = key_prefix
        self.after = after
        self._queue: deque[Item] = deque()
        self._wakeup = asyncio.Event()
        self.closed = False

    def offer(self, item: Item) -> None:
        if self.closed:
            return
        if isinstance(item, WatchEvent):
            if item.revision <= self.after or not item.key.startswith(self.key_prefix):
                return
        if len(self._queue) >= MAX_BACKLOG:
            self._queue.clear()
            item = Closed("watcher fell too far behind")
        self._queue.append(item)
        if isinstance(item, Closed):
            self.closed = True
        self._wakeup.set()

    async def items(self) -> AsyncIterator[Item]:
        try:
            while True:
                while self._queue:
                    item = self._queue.popleft()
                    yield item
                    if isinstance(item, Closed):
                        return
                self._wakeup.clear()
                await self._wakeup.wait()
        finally:
            self.cache.unsubscribe(self)


class ResourceCache:
    def __init__(self, storage: Storage, prefix: str, *, window: int = WINDOW_EVENTS) -> None:
        self.storage = storage
        self.prefix = prefix
        self.window: deque[WatchEvent] = deque(maxlen=window)
        # Every event with a revision above the floor is in the window.
        self.floor = 0
        self.revision = 0
        self.ready = False
        self.watchers: set[CacheWatcher] = set()
        self._task: asyncio.Task[None] | None = None
        self._followed_for = 0.0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"cacher {self.prefix}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def subscribe(self, key_prefix: str, after: int) -> CacheWatcher | None:
        """A watcher of events after revision `after`, or None if the cache cannot serve it."""
        if not self.ready or after < self.floor:
            return None
        watcher = CacheWatcher(self, key_prefix, after)
        for event in self.window:
            if event.revision > after:
                watcher.offer(event)
        self.watchers.add(watcher)
        return watcher

    def unsubscribe(self, watcher: CacheWatcher) -> None:
        self.watchers.discard(watcher)

    def _broadcast(self, item: Item) -> None:
        for watcher in list(self.watchers):
            watcher.offer(item)
            if watcher.closed:
                self.watchers.discard(watcher)

    async def _run(self) -> None:
        backoff = 0.5
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except StorageError as e:
                log.warning("watch cache for %s stopped: %s; restarting in %.1fs",
                            self.prefix, e, backoff)
            except Exception:  # a bug must not leave watchers hanging
                log.exception("watch cache for %s failed; restarting", self.prefix)
            finally:
                self.ready = False
                self._broadcast(Closed("watch cache restarting"))
                self.watchers.clear()
            await asyncio.sleep(backoff)
            backoff = 0.5 if self._was_healthy() else min(backoff * 2, 5.0)

    def _was_healthy(self) -> bool:
        return self._followed_for > 5.0

    async def _follow(self) -> None:
        self._followed_for = 0.0
        start = await self.storage.revision()
        self.window.clear()
        self.floor = self.revision = start
        stream = self.storage.watch(self.prefix, start + 1)
        ticker = asyncio.create_task(self._request_progress(stream.request_progress))
        self.ready = True
        began = asyncio.get_running_loop().time()
        log.info("watch cache for %s following etcd from revision %d", self.prefix, start)
        try:
            async for batch in stream.batches():
                if isinstance(batch, Progress):
                    self.revision = max(self.revision, batch.revision)
                    self._broadcast(Progress(self.revision))
                    continue
                for event in batch:
                    if len(self.window) == self.window.maxlen:
                        self.floor = self.window[0].revision
                    self.window.append(event)
                    self.revision = event.revision
                    self._broadcast(event)
            raise StorageError("etcd ended the watch stream")
        finally:
            self._followed_for = asyncio.get_running_loop().time() - began
            ticker.cancel()
            stream.close()

    @staticmethod
    async def _request_progress(request: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL)
            request()


class Cacher:
    """The watch caches of every resource, created on first use."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.caches: dict[str, ResourceCache] = {}

    def cache(self, prefix: str) -> ResourceCache:
        cache = self.caches.get(prefix)
        if cache is None:
            cache = self.caches[prefix] = ResourceCache(self.storage, prefix)
            cache.start()
        return cache

    async def stop(self) -> None:
        for cache in self.caches.values():
            await cache.stop()

    def watcher_count(self) -> dict[str, int]:
        return {prefix: len(cache.watchers) for prefix, cache in self.caches.items()}
