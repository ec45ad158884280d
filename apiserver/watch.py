"""The watch stream: etcd watch events -> Kubernetes watch events, one JSON object per line.

- No resourceVersion (or "0"): a synthetic ADDED for every matching object at the
  list's revision, then every change after it.
- resourceVersion=N: every change with revision > N, in order, each once; an ERROR
  410 Expired event when etcd has compacted N away (even while the watch cache's window
  still holds it: compacted history is never replayed).
- With selectors, an object that starts matching arrives as ADDED and one that stops
  matching as DELETED (kube's cacher does the same).
- BOOKMARK events (when asked for) carry a revision up to which everything was sent:
  etcd's answer to a progress request on our watch stream.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from apiserver.cacher import (
    FLUSH,
    CachedObject,
    CacheEvent,
    Closed,
    Describe,
    Flush,
    cache_event,
    cached_object,
    is_selected,
    watch_line,
)
from apiserver.listing import NOT_OLDER_THAN, ListOptions, parse_revision
from apiserver.registry import Registry
from apiserver.resources import Resource, collection_prefix
from apiserver.selectors import FieldSelector, LabelSelector
from apiserver.storage import KV, Compacted, Progress, StorageError, WatchEvent, encode
from common import errors

log = logging.getLogger("apiserver.watch")

# How long a new watch waits for a (re)starting watch cache before a 429.
CACHE_READY_WAIT = 3.0


@dataclass(frozen=True, slots=True)
class Expired:
    """etcd compacted the revisions the watch asked for."""

    requested: int
    oldest: int


@dataclass(frozen=True, slots=True)
class WatchRequest:
    resource: Resource
    namespace: str | None
    resource_version: str | None
    labels: LabelSelector | None
    fields: FieldSelector | None
    timeout_seconds: float
    bookmarks: bool
    send_initial_events: bool = False


@dataclass(frozen=True, slots=True)
class Change:
    """A watch event about one cached object: every watcher sends the same JSON bytes of
    the object, encoded once per change (kube's cachingObject)."""

    type: str  # ADDED | MODIFIED | DELETED
    item: CachedObject
    event: CacheEvent | None = None  # the change it reports, which keeps its lines

    def line(self) -> bytes:
        if self.event is not None:
            return self.event.line(self.type)
        return watch_line(self.type, self.item)

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "object": self.item.obj}


def translate(request: WatchRequest, event: CacheEvent) -> Change | None:
    """One change as a watcher of `request` sees it, or None. An object that stops being
    selected is DELETED, one that starts being selected ADDED (kube's cacher does so)."""
    was = is_selected(event.previous, request.labels, request.fields)
    now = is_selected(event.current, request.labels, request.fields)
    if now and was:
        assert event.current is not None
        return Change("MODIFIED", event.current, event)
    if now:
        assert event.current is not None
        return Change("ADDED", event.current, event)
    if was:
        return Change("DELETED", event.gone, event)
    return None


def from_etcd(event: WatchEvent, describe: Describe) -> CacheEvent:
    """An event of an etcd watch of our own (older than the cache window) as the cache's."""
    previous = None
    if event.prev is not None:
        previous = cached_object(KV(event.key, event.prev, event.revision, 0), describe)
    return cache_event(event, previous, describe)


def bookmark(resource: Resource, revision: int) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {
        "kind": resource.kind, "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": str(revision)}}}


def error_event(err: errors.ApiError) -> dict[str, Any]:
    return {"type": "ERROR", "object": err.status()}


Event = Change | dict[str, Any] | Flush


async def open_watch(registry: Registry, request: WatchRequest) -> AsyncIterator[Event]:
    """Start a watch; errors that happen before the first event (a bad resourceVersion,
    etcd down) raise here, so the caller can still answer with a Status."""
    rv = request.resource_version or ""
    if not await registry.cache(request.resource).wait_ready(CACHE_READY_WAIT):
        # kube's cacher answers the same while it (re)initializes: clients back off
        raise errors.TooManyRequests("storage is (re)initializing",
                                     headers={"Retry-After": "1"})
    initial: list[CachedObject] = []
    if request.send_initial_events or rv in ("", "0"):
        # unset: the state now (consistent); "0": any state; N: not older than N
        match = NOT_OLDER_THAN if rv not in ("", "0") else ""
        page = await registry.list_page(request.resource, request.namespace,
                                        ListOptions(resource_version=rv, match=match),
                                        labels=request.labels, fields=request.fields)
        initial, start = page.items, page.revision + 1
    else:
        start = parse_revision(str(rv)) + 1
        if await registry.storage.is_compacted(start - 1):
            # The cache's window may still hold it, but what etcd has compacted is never
            # replayed: etcd's own watch answers (410, or from the oldest revision kept).
            return _events(registry, request, [], start, from_cache=False)
    return _events(registry, request, initial, start)


async def changes(registry: Registry, resource: Resource) -> AsyncIterator[Change]:
    """What an in-process controller watches: every object of `resource` now (ADDED),
    then each change, until the watch ends (a 410 included: the caller lists again)."""
    events = await open_watch(registry, WatchRequest(
        resource=resource, namespace=None, resource_version=None, labels=None,
        fields=None, timeout_seconds=math.inf, bookmarks=False))
    async for event in events:
        if isinstance(event, Change):
            yield event
        elif isinstance(event, dict) and event["type"] == "ERROR":
            return


async def _events(registry: Registry, request: WatchRequest, initial: list[CachedObject],
                  start: int, *, from_cache: bool = True) -> AsyncIterator[Event]:
    for cached in initial:
        yield Change("ADDED", cached)
    if request.send_initial_events:
        # kube's marker that the initial state is complete (watch-list, kubectl wait/delete)
        end = bookmark(request.resource, start - 1)
        end["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
        yield end
    last_reported = start - 1  # the newest revision the client has been told about
    async for item in _changes_after(registry, request, start - 1,
                                         from_cache=from_cache):
        if isinstance(item, Flush):
            yield item
            continue
        if isinstance(item, Closed):
            log.info("watch of %s closed: %s", request.resource.plural, item.reason)
            if item.storage_failed:
                # an ERROR event, so a client backs off instead of re-watching at once
                yield error_event(errors.InternalError(
                    f"etcd is unavailable: {item.reason}; retry after a pause"))
            return
        if isinstance(item, Expired):
            yield error_event(errors.too_old_resource_version(item.requested, item.oldest))
            return
        if isinstance(item, Progress):
            if request.bookmarks and item.revision > last_reported:
                last_reported = item.revision
                yield bookmark(request.resource, item.revision)
            continue
        change = translate(request, item)
        if change is not None:
            last_reported = item.revision
            yield change


async def _changes_after(registry: Registry, request: WatchRequest, after: int, *,
                         from_cache: bool = True,
                         ) -> AsyncIterator[CacheEvent | Progress | Closed | Expired | Flush]:
    """Every change after revision `after`: from the shared watch cache when it holds
    them (and `from_cache`), else from an etcd watch of our own."""
    key_prefix = collection_prefix(registry.prefix, request.resource, request.namespace)
    cache = registry.cache(request.resource)
    watcher = cache.subscribe(key_prefix, after) if from_cache else None
    if watcher is not None:
        async for item in watcher.items():
            yield item
        return
    # No bookmarks here: etcd 3.4's progress answers may run ahead of the events a
    # catching-up watch has yet to deliver (apiserver/cacher.py), and a bookmark must not.
    stream = registry.storage.watch(key_prefix, after + 1)
    try:
        async for batch in stream.batches():
            if isinstance(batch, Progress):
                yield batch
            else:
                for event in batch:
                    yield from_etcd(event, cache.describe)
            yield FLUSH
    except Compacted as e:
        yield Expired(e.requested, e.compact_revision)
    except StorageError as e:
        yield Closed(str(e), storage_failed=True)
    finally:
        stream.close()


def encode_line(event: dict[str, Any]) -> bytes:
    return encode(event) + b"\n"


# A watcher's lines are gathered until nothing more is ready (a Flush) or this many bytes,
# then written at once: one socket write per burst, not per event.
WRITE_BYTES = 64 * 1024


async def watch_lines(events: AsyncIterator[Event], *, timeout: float,
                      render: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                      ) -> AsyncIterator[bytes]:
    """The HTTP body: one JSON line per event, ending after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    iterator = aiter(events)
    pending: list[bytes] = []
    size = 0
    may_wait = True  # after a Flush, the next event may be a while coming
    try:
        while True:
            try:
                if may_wait:
                    if loop.time() >= deadline:
                        break
                    async with asyncio.timeout_at(deadline):
                        event = await anext(iterator)
                else:
                    event = await anext(iterator)
            except (StopAsyncIteration, TimeoutError):
                break
            if isinstance(event, Flush):
                may_wait = True
                if pending:
                    yield b"".join(pending)
                    pending.clear()
                    size = 0
                continue
            may_wait = False
            if render is not None:
                line = encode_line(render(event.as_dict() if isinstance(event, Change) else event))
            else:
                line = event.line() if isinstance(event, Change) else encode_line(event)
            pending.append(line)
            size += len(line)
            if size >= WRITE_BYTES:
                yield b"".join(pending)
                pending.clear()
                size = 0
                may_wait = True  # also where a busy watch notices its deadline
        if pending:
            yield b"".join(pending)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
