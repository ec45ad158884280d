"""A shared informer, after client-go's Reflector + SharedInformer (tools/cache).

`run()` lists, then watches from the list's resourceVersion and applies every event
to a local store keyed "namespace/name" (or "name" for cluster-scoped objects),
calling `on_add(obj)`, `on_update(old, new)` and `on_delete(obj)` after the store has
changed. When a stream drops or ends it watches again from the last resourceVersion
seen (BOOKMARKs included), with a capped exponential back-off (common.backoff); on 410 Gone it lists
again and delivers the difference between the store and the new list.

Handlers may be plain functions or coroutine functions. They run inline, one event
at a time, so they should be quick (enqueue work, don't do it). `SharedInformer` (and
`SharedInformerFactory`, one per resource and selectors) is client-go's
SharedIndexInformer on top: indexes over the store, and any number of handlers, each
with its own buffer and task (processorListener), so a slow one delays only itself. They must not mutate
the objects they receive: those are the store's own objects. A handler that raises
is logged and the informer carries on.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from common.backoff import Backoff
from common.client import ApiClient
from common.errors import ApiError, Gone

log = logging.getLogger(__name__)

INITIAL_BACKOFF_SECONDS = 0.2
MAX_BACKOFF_SECONDS = 30.0
# A watch that lasted this long, or delivered any event, counts as a success and
# resets the back-off.
HEALTHY_WATCH_SECONDS = 5.0
# Like client-go's reflector: each watch asks the server to end it after 5 to 10
# minutes, so a silently dead connection cannot stall the informer for good.
MIN_WATCH_TIMEOUT_SECONDS = 300

Action = Literal["add", "update", "delete"]


def object_key(obj: dict) -> str:
    """The store key: "namespace/name", or "name" for a cluster-scoped object."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = str(metadata.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def resource_version_of(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion") or None


@dataclass(frozen=True)
class Change:
    """One handler call to make: add(new), update(old, new) or delete(old)."""

    action: Action
    key: str
    new: dict | None = None
    old: dict | None = None


def change_for_event(event_type: str, obj: dict, old: dict | None) -> Change | None:
    """What a watch event means for a store that holds `old` under the object's key."""
    key = object_key(obj)
    if event_type in ("ADDED", "MODIFIED"):
        if old is None:
            return Change("add", key, new=obj)
        return Change("update", key, new=obj, old=old)
    if event_type == "DELETED":
        # Deleting what we never saw is a no-op; hand over the final state we were sent.
        return Change("delete", key, old=obj) if old is not None else None
    return None  # BOOKMARK: only moves the resourceVersion


def changes_for_relist(store: dict[str, dict], items: Iterable[dict]) -> list[Change]:
    """Turn a fresh list into the changes that make `store` equal to it.

    New keys are adds, keys whose resourceVersion moved are updates (in list order),
    then keys that vanished are deletes carrying the last state we knew.
    """
    changes: list[Change] = []
    listed: set[str] = set()
    for obj in items:
        key = object_key(obj)
        listed.add(key)
        old = store.get(key)
        if old is None:
            changes.append(Change("add", key, new=obj))
        elif resource_version_of(old) != resource_version_of(obj):
            changes.append(Change("update", key, new=obj, old=old))
    changes.extend(Change("delete", key, old=old)
                   for key, old in store.items() if key not in listed)
    return changes


def with_type_meta(item: dict, list_obj: dict) -> dict:
    """List items may come without kind/apiVersion; give them the list's (PodList -> Pod)."""
    if item.get("kind") and item.get("apiVersion"):
        return item
    list_kind = str(list_obj.get("kind") or "")
    kind = item.get("kind") or (list_kind[:-4] if list_kind.endswith("List") else list_kind)
    return {"apiVersion": item.get("apiVersion") or list_obj.get("apiVersion") or "v1",
            "kind": kind, **{k: v for k, v in item.items() if k not in ("apiVersion", "kind")}}


def watch_was_healthy(*, events: int, seconds: float) -> bool:
    return events > 0 or seconds >= HEALTHY_WATCH_SECONDS


@dataclass(frozen=True)
class Handlers:
    """One consumer's callbacks; each may be a plain or a coroutine function."""

    on_add: Callable[[dict], Any] | None = None
    on_update: Callable[[dict, dict], Any] | None = None
    on_delete: Callable[[dict], Any] | None = None

async def deliver(name: str, handlers: Handlers, change: Change) -> None:
    """Call the handler for the change (a plain or a coroutine function); a failing
    handler is logged, never stops the informer."""
    handler: Callable[..., Any] | None
    args: tuple[dict | None, ...]
    if change.action == "add":
        handler, args = handlers.on_add, (change.new,)
    elif change.action == "update":
        handler, args = handlers.on_update, (change.old, change.new)
    else:
        handler, args = handlers.on_delete, (change.old,)
    if handler is None:
        return
    try:
        result = handler(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("%s: on_%s handler failed for %s", name, change.action, change.key)


class Informer:
    """A local, event-driven copy of one resource collection."""

    def __init__(self, client: ApiClient, resource: str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 on_add: Callable[[dict], Any] | None = None,
                 on_update: Callable[[dict, dict], Any] | None = None,
                 on_delete: Callable[[dict], Any] | None = None,
                 on_synced: Callable[[], Any] | None = None,
                 name: str = "") -> None:
        self._client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._handlers = Handlers(on_add=on_add, on_update=on_update, on_delete=on_delete)
        self._on_synced = on_synced
        self.name = name or _describe(resource, namespace=namespace,
                                      label_selector=label_selector,
                                      field_selector=field_selector)
        self._store: dict[str, dict] = {}
        self._resource_version: str | None = None
        self._watch_events = 0
        self._synced = asyncio.Event()

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def last_sync_resource_version(self) -> str | None:
        """The resourceVersion the next watch starts from."""
        return self._resource_version

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, key: str) -> dict | None:
        return self._store.get(key)

    def list(self) -> builtins.list[dict]:
        return builtins.list(self._store.values())

    async def run(self) -> None:
        """List, then watch; rewatch or relist forever, until cancelled."""
        backoff = Backoff(initial=INITIAL_BACKOFF_SECONDS, cap=MAX_BACKOFF_SECONDS)
        must_list = True
        while True:
            if must_list:
                try:
                    await self._list_and_replace()
                    must_list = False
                except Exception as e:
                    delay = backoff.next()
                    log.warning("%s: list failed (%s); retrying in %.1fs",
                                self.name, _explain(e), delay, exc_info=_unexpected(e))
                    await asyncio.sleep(delay)
                    continue

            started = time.monotonic()
            clean_end = False
            try:
                await self._watch()
                clean_end = True
            except Gone as e:
                must_list = True
                backoff.reset()  # the server is there and answering: relist promptly
                log.info("%s: watch from resourceVersion %s expired (%s); listing again",
                         self.name, self._resource_version, e.message)
            except Exception as e:
                log.warning("%s: watch dropped (%s)", self.name, _explain(e),
                            exc_info=_unexpected(e))

            events = self._watch_events
            if watch_was_healthy(events=events, seconds=time.monotonic() - started):
                backoff.reset()
                if clean_end:
                    log.info("%s: watch ended after %d events; watching again from "
                             "resourceVersion %s", self.name, events, self._resource_version)
                    continue
            delay = backoff.next()
            if must_list:
                log.info("%s: listing again in %.1fs", self.name, delay)
            else:
                log.info("%s: watching again in %.1fs from resourceVersion %s", self.name,
                         delay, self._resource_version)
            await asyncio.sleep(delay)

    async def _list_and_replace(self) -> None:
        listed = await self._client.list(self.resource, namespace=self.namespace,
                                         label_selector=self.label_selector,
                                         field_selector=self.field_selector)
        items = [with_type_meta(item, listed) for item in listed.get("items") or []]
        changes = changes_for_relist(self._store, items)
        self._resource_version = (listed.get("metadata") or {}).get("resourceVersion") or None
        log.info("%s: listed %d objects at resourceVersion %s (%d changes)", self.name,
                 len(items), self._resource_version, len(changes))
        for change in changes:
            await self._apply(change)
        if not self._synced.is_set() and self._on_synced is not None:
            self._on_synced()
        self._synced.set()

    async def _watch(self) -> None:
        """Apply one watch stream's events until it ends; counts them in _watch_events."""
        self._watch_events = 0
        timeout = random.randint(MIN_WATCH_TIMEOUT_SECONDS, 2 * MIN_WATCH_TIMEOUT_SECONDS)
        log.debug("%s: watching from resourceVersion %s", self.name, self._resource_version)
        stream = self._client.watch(self.resource, namespace=self.namespace,
                                    resource_version=self._resource_version,
                                    label_selector=self.label_selector,
                                    field_selector=self.field_selector,
                                    timeout_seconds=timeout, allow_bookmarks=True)
        async with aclosing(stream):
            async for event in stream:
                self._watch_events += 1
                obj = event.get("object") or {}
                old = self._store.get(object_key(obj))
                change = change_for_event(str(event.get("type")), obj, old)
                if change is not None:
                    await self._apply(change)
                self._resource_version = resource_version_of(obj) or self._resource_version

    async def _apply(self, change: Change) -> None:
        """Update the store, then tell the handler (it sees the store already changed)."""
        if change.action == "delete":
            self._store.pop(change.key, None)
        else:
            assert change.new is not None
            self._store[change.key] = change.new
        await deliver(self.name, self._handlers, change)


# -- the shared informer (client-go shared_informer.go) ---------------------------------

IndexFunc = Callable[[dict], Iterable[str]]


_SYNCED = Change("add", "")  # the marker after a listener's initial adds


class Listener:
    """client-go's processorListener: one handler's own buffer and task, so that a slow
    handler delays only itself. The buffer is unbounded, as client-go's ring buffer."""

    def __init__(self, informer_name: str, handlers: Handlers, name: str) -> None:
        self.name = name or f"{informer_name} handler"
        self.handlers = handlers
        self._buffer: asyncio.Queue[Change] = asyncio.Queue()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def has_synced(self) -> bool:
        """Whether every object of the informer's first list has reached the handler."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def pending(self) -> int:
        return self._buffer.qsize()

    def enqueue(self, change: Change) -> None:
        self._buffer.put_nowait(change)

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            change = await self._buffer.get()
            if change is _SYNCED:
                self._synced.set()
                continue
            await deliver(self.name, self.handlers, change)


class SharedInformer:
    """One list+watch of a resource, an indexed store, and any number of handlers, each
    fed through its own `Listener`. A handler added after the first list first gets an
    add for every object in the store, as in client-go."""

    def __init__(self, client: ApiClient, resource: str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 name: str = "") -> None:
        self._informer = Informer(client, resource, namespace=namespace,
                                  label_selector=label_selector,
                                  field_selector=field_selector,
                                  on_add=self._added, on_update=self._updated,
                                  on_delete=self._deleted, on_synced=self._list_synced,
                                  name=name)
        self.name = self._informer.name
        self.resource = resource
        self._listeners: builtins.list[Listener] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._running = False

    # -- the store -----------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced

    async def wait_synced(self) -> None:
        await self._informer.wait_synced()

    def get(self, key: str) -> dict | None:
        return self._informer.get(key)

    def list(self) -> builtins.list[dict]:
        return self._informer.list()

    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        """Name -> function of an object giving its index values (cache.Indexers)."""
        for index_name, func in indexers.items():
            if index_name in self._indexers:
                raise ValueError(f"indexer conflict: {index_name}")
            self._indexers[index_name] = func
            index: dict[str, set[str]] = {}
            for obj in self._informer.list():
                for value in func(obj):
                    index.setdefault(value, set()).add(object_key(obj))
            self._indices[index_name] = index

    def by_index(self, index_name: str, value: str) -> builtins.list[dict]:
        keys = self._indices[index_name].get(value, set())
        found = (self._informer.get(key) for key in sorted(keys))
        return [obj for obj in found if obj is not None]

    def _reindex(self, key: str, old: dict | None, new: dict | None) -> None:
        for index_name, func in self._indexers.items():
            index = self._indices[index_name]
            for value in func(old) if old is not None else ():
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in func(new) if new is not None else ():
                index.setdefault(value, set()).add(key)

    # -- handlers ------------------------------------------------------------------------

    def add_event_handler(self, *, on_add: Callable[[dict], Any] | None = None,
                          on_update: Callable[[dict, dict], Any] | None = None,
                          on_delete: Callable[[dict], Any] | None = None,
                          name: str = "") -> Listener:
        listener = Listener(self.name, Handlers(on_add, on_update, on_delete), name)
        self._listeners.append(listener)
        if self._informer.has_synced:
            for obj in self._informer.list():
                listener.enqueue(Change("add", object_key(obj), new=obj))
            listener.enqueue(_SYNCED)
        if self._running:
            listener.start()
        return listener

    def _distribute(self, change: Change) -> None:
        self._reindex(change.key, change.old, change.new)
        for listener in self._listeners:
            listener.enqueue(change)

    def _added(self, obj: dict) -> None:
        self._distribute(Change("add", object_key(obj), new=obj))

    def _updated(self, old: dict, new: dict) -> None:
        self._distribute(Change("update", object_key(new), new=new, old=old))

    def _deleted(self, obj: dict) -> None:
        self._distribute(Change("delete", object_key(obj), old=obj))

    def _list_synced(self) -> None:
        for listener in self._listeners:
            listener.enqueue(_SYNCED)

    async def run(self) -> None:
        """Feed the listeners from one list+watch until cancelled."""
        self._running = True
        for listener in self._listeners:
            listener.start()
        try:
            await self._informer.run()
        finally:
            self._running = False
            for listener in self._listeners:
                await listener.stop()


class SharedInformerFactory:
    """One SharedInformer per (resource, namespace, selectors), whoever asks for it
    (client-go's SharedInformerFactory). `start()` runs those not running yet."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self._informers: dict[tuple[str, str | None, str | None, str | None],
                              SharedInformer] = {}
        self._tasks: dict[SharedInformer, asyncio.Task[None]] = {}

    def informer(self, resource: str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 name: str = "") -> SharedInformer:
        """The one informer for these; `name` (for logs) counts only on the first ask."""
        key = (resource, namespace, label_selector, field_selector)
        found = self._informers.get(key)
        if found is None:
            found = SharedInformer(self.client, resource, namespace=namespace,
                                   label_selector=label_selector,
                                   field_selector=field_selector, name=name)
            self._informers[key] = found
        return found

    @property
    def informers(self) -> builtins.list[SharedInformer]:
        return builtins.list(self._informers.values())

    def start(self) -> None:
        for informer in self._informers.values():
            task = self._tasks.get(informer)
            if task is None or task.done():
                self._tasks[informer] = asyncio.create_task(informer.run(),
                                                            name=informer.name)

    async def wait_for_cache_sync(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))

    def unsynced(self) -> builtins.list[str]:
        return [i.name for i in self._informers.values() if not i.has_synced]

    async def shutdown(self) -> None:
        tasks = builtins.list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()


def _describe(resource: str, *, namespace: str | None, label_selector: str | None,
              field_selector: str | None) -> str:
    parts = [f"{namespace}/{resource}" if namespace else resource]
    if label_selector:
        parts.append(f"labels {label_selector}")
    if field_selector:
        parts.append(f"fields {field_selector}")
    return "informer " + " ".join(parts)


def _unexpected(e: Exception) -> bool:
    """Not a network, API or decoding failure: worth a traceback in the log."""
    return not isinstance(e, httpx.HTTPError | ApiError | ValueError)


def _explain(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


BY_NAMESPACE = "namespace"  # client-go's cache.NamespaceIndex


def _namespace_index(obj: Mapping[str, Any]) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def with_index(informer: SharedInformer, name: str,
               func: Callable[[dict], Iterable[str]]) -> SharedInformer:
    """The (shared) informer with the index `name`, added by whichever controller asks
    first."""
    try:
        informer.add_indexers({name: func})
    except ValueError:
        pass  # another controller added it already
    return informer


def indexed_by_namespace(informer: SharedInformer) -> SharedInformer:
    """The informer with a namespace index (listers' `Pods(namespace).List()`): a sync
    reads its namespace's objects, not the cluster's."""
    return with_index(informer, BY_NAMESPACE, _namespace_index)
