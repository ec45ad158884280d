"""The watch stream: etcd watch events -> Kubernetes watch events, one JSON object per line.

- No resourceVersion (or "0"): a synthetic ADDED for every matching object at the
  list's revision, then every change after it.
- resourceVersion=N: every change with revision > N, in order, each once; an ERROR
  410 Expired event when etcd has compacted N away.
- With selectors, an object that starts matching arrives as ADDED and one that stops
  matching as DELETED (kube's cacher does the same).
- BOOKMARK events (when asked for) carry a revision up to which everything was sent:
  etcd's answer to a progress request on our watch stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from apiserver import objects
from apiserver.cacher import Closed
from apiserver.registry import Registry, matches
from apiserver.resources import Resource, collection_prefix
from apiserver.selectors import FieldSelector, LabelSelector
from apiserver.storage import Compacted, Progress, StorageError, WatchEvent
from common import errors

log = logging.getLogger("apiserver.watch")

BOOKMARK_INTERVAL = 5.0


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


def translate(request: WatchRequest, event: WatchEvent) -> tuple[str, dict[str, Any]] | None:
    """One etcd event as the (type, object) a watcher of `request` sees, or None."""
    def selected(obj: dict[str, Any] | None) -> bool:
        return obj is not None and matches(request.resource, obj, request.labels, request.fields)

    was = selected(event.prev)
    if event.type == "DELETE":
        if not was:
            return None
        assert event.prev is not None
        return "DELETED", objects.with_resource_version(event.prev, event.revision)
    assert event.value is not None
    now = selected(event.value)
    obj = objects.with_resource_version(event.value, event.revision)
    if now and was:
        return "MODIFIED", obj
    if now:
        return "ADDED", obj
    if was:
        return "DELETED", obj
    return None


def bookmark(resource: Resource, revision: int) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {
        "kind": resource.kind, "apiVersion": resource.api_version,
        "metadata": {"resourceVersion": str(revision)}}}


def error_event(err: errors.ApiError) -> dict[str, Any]:
    return {"type": "ERROR", "object": err.status()}


async def open_watch(registry: Registry, request: WatchRequest,
                     ) -> AsyncIterator[dict[str, Any]]:
    """Start a watch; errors that happen before the first event (a bad resourceVersion,
    etcd down) raise here, so the caller can still answer with a Status."""
    rv = request.resource_version
    initial: list[dict[str, Any]] = []
    if request.send_initial_events or rv in (None, "", "0"):
        initial, revision = await registry.list_objects(request.resource, request.namespace,
                                                        labels=request.labels,
                                                        fields=request.fields)
        start = revision + 1
    else:
        try:
            start = int(str(rv)) + 1
        except ValueError:
            raise errors.BadRequest(f'invalid resource version "{rv}"') from None
    return _events(registry, request, initial, start)


async def _events(registry: Registry, request: WatchRequest, initial: list[dict[str, Any]],
                  start: int) -> AsyncIterator[dict[str, Any]]:
    for obj in initial:
        yield {"type": "ADDED", "object": obj}
    if request.send_initial_events:
        # kube's marker that the initial state is complete (watch-list, kubectl wait/delete)
        end = bookmark(request.resource, start - 1)
        end["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
        yield end
    last_reported = start - 1  # the newest revision the client has been told about
    async for item in _changes_after(registry, request, start - 1):
        if isinstance(item, Closed):
            log.info("watch of %s closed: %s", request.resource.plural, item.reason)
            return
        if isinstance(item, Expired):
            yield error_event(errors.too_old_resource_version(item.requested, item.oldest))
            return
        if isinstance(item, Progress):
            if request.bookmarks and item.revision > last_reported:
                last_reported = item.revision
                yield bookmark(request.resource, item.revision)
            continue
        translated = translate(request, item)
        if translated is not None:
            last_reported = item.revision
            yield SharedEvent(translated[0], translated[1], memo=(item.key, item.revision))


async def _changes_after(registry: Registry, request: WatchRequest, after: int,
                         ) -> AsyncIterator[WatchEvent | Progress | Closed | Expired]:
    """Every change after revision `after`: from the shared watch cache when it holds
    them, else from an etcd watch of our own."""
    key_prefix = collection_prefix(registry.prefix, request.resource, request.namespace)
    cache = registry.cacher.cache(collection_prefix(registry.prefix, request.resource, None))
    watcher = cache.subscribe(key_prefix, after)
    if watcher is not None:
        async for item in watcher.items():
            yield item
        return
    stream = registry.storage.watch(key_prefix, after + 1)
    ticker: asyncio.Task[None] | None = None
    if request.bookmarks:
        ticker = asyncio.create_task(_request_progress_forever(stream.request_progress))
    try:
        async for batch in stream.batches():
            if isinstance(batch, Progress):
                yield batch
                continue
            for event in batch:
                yield event
    except Compacted as e:
        yield Expired(e.requested, e.compact_revision)
    except StorageError as e:
        yield Closed(str(e))
    finally:
        if ticker is not None:
            ticker.cancel()
        stream.close()


async def _request_progress_forever(request_progress: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(BOOKMARK_INTERVAL)
        request_progress()


class SharedEvent(dict[str, Any]):
    """A watch event that other watchers of the same change receive too: `memo` names the
    change, so its JSON line is encoded once for all of them (kube's cachingObject)."""

    __slots__ = ("memo",)

    def __init__(self, type_: str, obj: dict[str, Any], *, memo: tuple[str, int]) -> None:
        super().__init__(type=type_, object=obj)
        self.memo = memo


class EncodedLines:
    """The JSON lines of recent watch events, shared by every watcher that sends them."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._lines: OrderedDict[tuple[str, int, str], bytes] = OrderedDict()

    def line(self, event: dict[str, Any]) -> bytes:
        if not isinstance(event, SharedEvent):
            return encode_line(event)
        key = (*event.memo, event["type"])
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = encode_line(event)
            if len(self._lines) > self.capacity:
                self._lines.popitem(last=False)
        return line


def encode_line(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


ENCODED = EncodedLines()


async def watch_lines(events: AsyncIterator[dict[str, Any]], *, timeout: float,
                      render: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                      ) -> AsyncIterator[bytes]:
    """The HTTP body: one JSON line per event, ending after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    iterator = aiter(events)
    try:
        while (remaining := deadline - loop.time()) > 0:
            try:
                event = await asyncio.wait_for(anext(iterator), remaining)
            except (StopAsyncIteration, TimeoutError):
                return
            yield encode_line(render(event)) if render is not None else ENCODED.line(event)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
