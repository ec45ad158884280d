"""The watch cache: one etcd watch per resource, shared by every LIST and watch of it
(kube-apiserver's Cacher and watchCache).

A `ResourceCache` lists its resource once, then follows one etcd watch from that list's
revision. It keeps
- the current objects, sorted by key (`store`, `keys`), each with its labels and
  selectable fields computed once per change and its JSON encoded at most once, so
  that a LIST, a page of one, and every watcher share the same bytes;
- a window of recent events (a ring buffer), from which a watch that resumes at a
  revision still in the window is replayed before live events follow;
- `revision`: the revision up to which every change of the resource has been applied.

Freshness. A LIST that must be consistent (no resourceVersion) may be served from
memory only once `revision` reaches etcd's current revision (KEP-2340). Only events
raise it, never a progress notification: etcd 3.4 answers a progress request with the
store's revision even to a watcher that is still catching up on older events (etcd
issues 15220, 16394), which would let a LIST miss writes it must see. When a reader
waits for a revision the resource has not reached, the cache writes its marker key (just
before its prefix, inside the range its watch follows, outside every LIST's): etcd
delivers a watcher's events in order, so once the marker's event arrives every change
before it has been applied. One marker write serves every reader waiting meanwhile.

Slow watchers cannot hold the cache back: a watcher whose backlog overflows is closed,
and its client resumes from the last resourceVersion it saw, as with kube.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver import objects
from apiserver.selectors import FieldSelector, LabelSelector
from apiserver.storage import (
    KV,
    EtcdWatch,
    Progress,
    Storage,
    StorageError,
    WatchEvent,
    decode,
    encode,
    prefix_range_end,
)

log = logging.getLogger("apiserver.cacher")

WINDOW_EVENTS = 10_000
MAX_BACKLOG = 10_000
PROGRESS_INTERVAL = 1.0
# A watcher writes to its client at most this often (the socket writes, not the events,
# are what 100 watchers of a busy resource cost).
WRITE_INTERVAL = 0.01
# A marker write whose event has not come back by then is written again.
MARKER_WAIT = 1.0

Labels = Mapping[str, str]
Fields = Mapping[str, str]
# What the cache computes once per change: an object's labels and selectable fields.
Describe = Callable[[dict[str, Any]], tuple[Labels, Fields]]


# The selectable fields the cache keeps an index of, as kube's watch cache indexes pods by
# spec.nodeName: the Node authorizer asks for one node's pods on every kubelet read.
INDEXED_FIELDS = ("spec.nodeName",)


@dataclass(frozen=True, slots=True)
class CachedObject:
    """One object as stored at `revision` (its resourceVersion).

    It is kept as its JSON, encoded once and sent as is by every LIST and watcher, not as
    dicts: Python's collector walks every container object, and a full collection over
    the dicts of 10,000 pods stalls every request for a tenth of a second.
    """

    key: str
    json: bytes
    revision: int
    labels: Labels
    fields: Fields

    @property
    def obj(self) -> dict[str, Any]:
        """The object, decoded anew (a caller may change its copy)."""
        return decode(self.json)


def is_selected(item: CachedObject | None, labels: LabelSelector | None,
                fields: FieldSelector | None) -> bool:
    """Whether a list or watch with these selectors shows `item` (from what the cache
    computed once per change, not from the object)."""
    if item is None:
        return False
    if labels is not None and not labels.matches(item.labels):
        return False
    return fields is None or fields.matches(item.fields)


def cached_object(kv: KV, describe: Describe) -> CachedObject:
    obj = objects.with_resource_version(kv.value, kv.mod_revision)
    labels, fields = describe(obj)
    return CachedObject(kv.key, encode(obj), kv.mod_revision, dict(labels), dict(fields))


@dataclass(slots=True)
class CacheEvent:
    """One change: `current` is None for a delete, `previous` None for a create."""

    type: str  # "PUT" | "DELETE"
    key: str
    revision: int
    current: CachedObject | None
    previous: CachedObject | None
    _gone: CachedObject | None = field(default=None)
    _lines: dict[str, bytes] = field(default_factory=dict)

    def line(self, watch_type: str) -> bytes:
        """The watch line of this change as `ADDED`, `MODIFIED` or `DELETED`, built once
        for every watcher that sends it."""
        line = self._lines.get(watch_type)
        if line is None:
            item = self.gone if watch_type == "DELETED" else self.current
            assert item is not None
            line = self._lines[watch_type] = watch_line(watch_type, item)
        return line

    @property
    def gone(self) -> CachedObject:
        """What a watcher is sent when the object leaves its view (deleted, or no longer
        selected): the previous object at this event's resourceVersion, as kube does."""
        if self._gone is None:
            assert self.previous is not None
            prev = self.previous
            obj = objects.with_resource_version(prev.obj, self.revision)
            self._gone = CachedObject(prev.key, encode(obj), self.revision, prev.labels,
                                      prev.fields)
        return self._gone


def watch_line(watch_type: str, item: CachedObject) -> bytes:
    return b'{"type":"' + watch_type.encode() + b'","object":' + item.json + b"}\n"


def cache_event(event: WatchEvent, previous: CachedObject | None,
                describe: Describe) -> CacheEvent:
    current = None
    if event.type == "PUT":
        assert event.value is not None
        current = cached_object(KV(event.key, event.value, event.revision, 0), describe)
    return CacheEvent(event.type, event.key, event.revision, current, previous)


@dataclass(frozen=True, slots=True)
class Closed:
    """The cache stopped (etcd failed) or this watcher fell too far behind."""

    reason: str
    storage_failed: bool = False


@dataclass(frozen=True, slots=True)
class Flush:
    """Nothing more is ready: what a watcher has gathered may go out in one write."""


FLUSH = Flush()

Item = CacheEvent | Progress | Closed | Flush


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
        if isinstance(item, CacheEvent):
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
        """The watcher's items, with a Flush whenever its client may be written to: when
        nothing more is queued, and at most once per WRITE_INTERVAL, so that a busy watch
        writes many events at once instead of one socket write per event (the first event
        after a quiet spell still goes out at once)."""
        loop = asyncio.get_running_loop()
        flushed = -WRITE_INTERVAL
        try:
            while True:
                while self._queue:
                    item = self._queue.popleft()
                    yield item
                    if isinstance(item, Closed):
                        return
                if (wait := flushed + WRITE_INTERVAL - loop.time()) > 0:
                    await asyncio.sleep(wait)  # gather what arrives until the next write
                    continue
                yield FLUSH
                flushed = loop.time()
                self._wakeup.clear()
                if not self._queue:  # what came while the client was written to is queued
                    await self._wakeup.wait()
        finally:
            self.cache.unsubscribe(self)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[CachedObject]
    more: bool  # keys past the last item remain in the range
    remaining: int  # how many keys remain in the range after the last item


def marker_key(prefix: str) -> str:
    """`/registry/pods/` -> `/registry/pods\\x00kubelite-sync`: sorts just before the prefix,
    so a watch from it sees the marker and every key under the prefix, a LIST never."""
    return prefix.rstrip("/") + "\x00kubelite-sync"


class ResourceCache:
    def __init__(self, storage: Storage, prefix: str, describe: Describe, *,
                 window: int = WINDOW_EVENTS) -> None:
        self.storage = storage
        self.prefix = prefix
        self.describe = describe
        self.marker_key = marker_key(prefix)
        self.store: dict[str, CachedObject] = {}
        self.keys: list[str] = []  # the store's keys, sorted
        # field -> value -> the keys of the objects with that value (INDEXED_FIELDS)
        self.indexes: dict[str, dict[str, set[str]]] = {f: {} for f in INDEXED_FIELDS}
        self.window: deque[CacheEvent] = deque(maxlen=window)
        # Every event with a revision above the floor is in the window.
        self.floor = 0
        self.revision = 0  # every change up to here has been applied
        self.last_change = 0  # the revision of the newest change applied
        self._ready = asyncio.Event()
        self.watchers: set[CacheWatcher] = set()
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._stream: EtcdWatch | None = None
        self._pump: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._followed_for = 0.0

    @property
    def ready(self) -> bool:
        """Following etcd: the store and window are current."""
        return self._ready.is_set()

    @ready.setter
    def ready(self, value: bool) -> None:
        if value:
            self._ready.set()
        else:
            self._ready.clear()

    async def wait_ready(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until the cache follows etcd."""
        if self.ready:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            return False
        return True

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"cacher {self.prefix}")

    async def stop(self) -> None:
        for task in (self._task, self._pump):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._task = None

    # -- reads -------------------------------------------------------------------------

    def unchanged_between(self, revision: int) -> bool:
        """Whether the store is exactly the resource as of `revision` (no change since)."""
        return self.ready and self.last_change <= revision <= self.revision

    def get(self, key: str) -> CachedObject | None:
        return self.store.get(key)

    def with_field(self, field_name: str, value: str) -> Iterator[CachedObject]:
        """The objects whose selectable `field_name` (one of INDEXED_FIELDS) is `value`."""
        store = self.store
        for key in list(self.indexes[field_name].get(value, ())):
            item = store.get(key)
            if item is not None:
                yield item

    def scan(self, prefix: str, start: str | None = None) -> Iterator[CachedObject]:
        """The objects under `prefix` from key `start` on, in key order."""
        index = bisect.bisect_left(self.keys, start or prefix)
        keys, store = self.keys, self.store
        while index < len(keys) and keys[index].startswith(prefix):
            yield store[keys[index]]
            index += 1

    def page(self, prefix: str, *, start: str | None, limit: int,
             selected: Callable[[CachedObject], bool] | None) -> Page:
        """At most `limit` (0: all) selected objects under `prefix` from `start` on.

        Costs O(limit) without a selector (O(scanned) with one): the keys are sorted.
        """
        keys, store = self.keys, self.store
        index = bisect.bisect_left(keys, start or prefix)
        end = bisect.bisect_left(keys, prefix_range_end(prefix.encode()).decode())
        items: list[CachedObject] = []
        while index < end:
            item = store[keys[index]]
            index += 1
            if selected is None or selected(item):
                items.append(item)
                if limit and len(items) == limit:
                    break
        return Page(items, index < end, end - index)

    async def wait_fresh(self, revision: int, timeout: float) -> bool:
        """Wait until every change up to `revision` is applied; False when the cache is
        not following etcd or `timeout` passes first."""
        if not self.ready:
            return False
        if self.revision >= revision:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiter = (revision, future)
        self._waiters.append(waiter)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._write_markers())
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            return False
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    # -- watchers ----------------------------------------------------------------------

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

    # -- following etcd ----------------------------------------------------------------

    def _index(self, previous: CachedObject | None, current: CachedObject | None) -> None:
        for field_name, index in self.indexes.items():
            old = previous.fields.get(field_name) if previous is not None else None
            new = current.fields.get(field_name) if current is not None else None
            if old == new:
                continue
            if old is not None and previous is not None:
                keys = index.get(old)
                if keys is not None:
                    keys.discard(previous.key)
                    if not keys:
                        del index[old]
            if new is not None and current is not None:
                index.setdefault(new, set()).add(current.key)

    def _reset(self, kvs: list[KV], revision: int) -> None:
        self.store = {kv.key: cached_object(kv, self.describe) for kv in kvs}
        self.indexes = {f: {} for f in INDEXED_FIELDS}
        for item in self.store.values():
            self._index(None, item)
        self.keys = sorted(self.store)
        self.window.clear()
        self.floor = self.revision = revision
        self.last_change = max((kv.mod_revision for kv in kvs), default=0)

    def _apply(self, event: WatchEvent) -> None:
        previous = self.store.get(event.key)
        if event.type == "DELETE" and previous is None:
            return  # deleted before we listed it: nothing a watcher could have seen
        change = cache_event(event, previous, self.describe)
        self._index(previous, change.current)
        if change.current is not None:
            self.store[event.key] = change.current
            if previous is None:
                bisect.insort(self.keys, event.key)
        else:
            del self.store[event.key]
            index = bisect.bisect_left(self.keys, event.key)
            del self.keys[index]
        if len(self.window) == self.window.maxlen:
            self.floor = self.window[0].revision
        self.window.append(change)
        self.last_change = event.revision
        self._broadcast(change)

    def _synced(self, revision: int) -> None:
        if revision <= self.revision:
            return
        self.revision = revision
        for target, future in self._waiters:
            if target <= revision and not future.done():
                future.set_result(True)

    def _progress(self) -> None:
        """A progress notification proves nothing here (see above); watchers still get a
        bookmark at the revision the events have proven."""
        self._broadcast(Progress(self.revision))

    async def _write_markers(self) -> None:
        """Write the marker until every reader waiting for freshness is answered."""
        while any(not future.done() for _, future in self._waiters):
            try:
                written = await self.storage.bump_revision(self.marker_key)
            except StorageError as e:
                log.warning("watch cache for %s could not write its marker: %s", self.prefix, e)
                await asyncio.sleep(MARKER_WAIT)
                continue
            if self.revision >= written:
                continue
            arrived: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            waiter = (written, arrived)
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(MARKER_WAIT):
                    await asyncio.shield(arrived)
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _fail_waiters(self) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_result(False)

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
                self._stream = None
                self._fail_waiters()
                self._broadcast(Closed("watch cache restarting", storage_failed=True))
                self.watchers.clear()
            await asyncio.sleep(backoff)
            backoff = 0.5 if self._was_healthy() else min(backoff * 2, 5.0)

    def _was_healthy(self) -> bool:
        return self._followed_for > 5.0

    async def _follow(self) -> None:
        self._followed_for = 0.0
        listed = await self.storage.range(self.prefix)
        self._reset(listed.kvs, listed.revision)
        stream = self.storage.watch(self.prefix, listed.revision + 1, prev_kv=False,
                                    from_key=self.marker_key)
        self._stream = stream
        ticker = asyncio.create_task(self._request_progress(stream.request_progress))
        self.ready = True
        began = asyncio.get_running_loop().time()
        log.info("watch cache for %s holds %d objects, following etcd from revision %d",
                 self.prefix, len(self.store), listed.revision)
        try:
            async for batch in stream.batches():
                if isinstance(batch, Progress):
                    self._progress()
                    continue
                for event in batch:
                    if event.key.startswith(self.prefix):  # not the marker
                        self._apply(event)
                self._synced(batch[-1].revision)
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

    def cache(self, prefix: str, describe: Describe) -> ResourceCache:
        cache = self.caches.get(prefix)
        if cache is None:
            cache = self.caches[prefix] = ResourceCache(self.storage, prefix, describe)
            cache.start()
        return cache

    async def stop(self) -> None:
        for cache in self.caches.values():
            await cache.stop()

    def watcher_count(self) -> dict[str, int]:
        return {prefix: len(cache.watchers) for prefix, cache in self.caches.items()}
