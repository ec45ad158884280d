"""Recording core/v1 Events, after client-go's tools/record.

A repeat of an event (same involved object, type, reason, message and source) bumps
`count` and `lastTimestamp` on the Event already written, as client-go's
EventCorrelator does, instead of adding an object per occurrence. The correlation
cache is a bounded LRU. Every Event also carries what events.k8s.io/v1 adds and the
new client-go recorder (tools/events) fills in: `eventTime`, a MicroTime of the instant
the thing happened (the caller may give it: a queued event is written later), `action`
and `reportingController`/`reportingInstance`; and, as record's AnnotatedEventf allows,
annotations: `kubectl timeline` reads the instants a component knew but no Event of its
own carries from there (see common/timeline.py). Recording never raises: an Event is a hint, not state, and
a component must not fail its real work because the Event could not be written.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from common import timeline
from common.client import ApiClient
from common.errors import AlreadyExists, NotFound
from common.timestamps import micro_time, rfc3339

log = logging.getLogger(__name__)

# client-go's maxLruCacheEntries.
MAX_CACHE_ENTRIES = 4096
DEFAULT_NAMESPACE = "default"

EventKey = tuple[str, ...]


def event_name(object_name: str, unix_nanos: int) -> str:
    """`<object>.<unix nanoseconds in hex>`, as client-go names Events."""
    return f"{object_name}.{unix_nanos:016x}"


def involved_object_of(obj: dict, *, field_path: str | None = None) -> dict[str, str]:
    """The ObjectReference of `obj` (v1.ObjectReference, empty fields left out)."""
    metadata = obj.get("metadata") or {}
    reference = {
        "kind": obj.get("kind"),
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "apiVersion": obj.get("apiVersion"),
        "resourceVersion": metadata.get("resourceVersion"),
        "fieldPath": field_path,
    }
    return {k: str(v) for k, v in reference.items() if v}


def event_key(involved: dict[str, str], type_: str, reason: str, message: str,
              source: dict[str, str]) -> EventKey:
    """What makes two events "the same" (client-go getEventKey: no resourceVersion)."""
    return (source.get("component", ""), source.get("host", ""),
            *(involved.get(k, "") for k in ("kind", "namespace", "name", "fieldPath", "uid",
                                             "apiVersion")),
            type_, reason, message)


def reporting_instance(source: dict[str, str]) -> str:
    """The node for a kubelet; `<controller>-<hostname>` otherwise, as tools/events has it."""
    return source.get("host") or f"{source.get('component', '')}-{socket.gethostname()}"


def make_event(*, name: str, namespace: str, involved: dict[str, str], type_: str,
               reason: str, message: str, source: dict[str, str], count: int,
               first_timestamp: str, last_timestamp: str, event_time: str,
               action: str | None = None,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": type_,
        "source": source,
        "count": count,
        "firstTimestamp": first_timestamp,
        "lastTimestamp": last_timestamp,
        "eventTime": event_time if timeline.RECORDING else None,
        "action": action or reason,
        "reportingComponent": source.get("component", ""),
        "reportingInstance": reporting_instance(source),
    }


@dataclass
class _Seen:
    """What the cache remembers of one recorded event."""

    name: str
    namespace: str
    first_timestamp: str
    event_time: str
    count: int = 0
    written: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EventRecorder:
    """Writes core/v1 Events about objects, folding repeats into a count."""

    def __init__(self, client: ApiClient, *, component: str, host: str | None = None) -> None:
        self._client = client
        self.source = {"component": component, **({"host": host} if host else {})}
        self._seen: OrderedDict[EventKey, _Seen] = OrderedDict()

    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None, at: float | None = None,
                    action: str | None = None,
                    annotations: dict[str, str] | None = None) -> None:
        """Record that `reason` happened to `obj` (at `at`, Unix seconds, default now),
        with `annotations` on the Event if given; never raises."""
        involved = involved_object_of(obj, field_path=field_path)
        described = (f"Event({involved.get('kind', '?')} {involved.get('namespace', '')}/"
                     f"{involved.get('name', '?')}): type: '{type_}' reason: '{reason}' {message}")
        try:
            await self._record(involved, type_, reason, message,
                               at=time.time() if at is None else at, action=action,
                               annotations=annotations)
            log.debug("%s", described)
        except Exception as e:
            log.warning("could not record %s: %s: %s", described, type(e).__name__, e)

    async def _record(self, involved: dict[str, str], type_: str, reason: str,
                      message: str, *, at: float, action: str | None,
                      annotations: dict[str, str] | None) -> None:
        seen = self._remember(event_key(involved, type_, reason, message, self.source),
                              involved, at)
        async with seen.lock:
            seen.count += 1
            now = rfc3339()
            event = make_event(name=seen.name, namespace=seen.namespace, involved=involved,
                               type_=type_, reason=reason, message=message, source=self.source,
                               count=seen.count, first_timestamp=seen.first_timestamp,
                               last_timestamp=now, event_time=seen.event_time,
                               action=action, annotations=annotations)
            bump = {"count": seen.count, "lastTimestamp": now, "message": message}
            if seen.written:
                try:
                    await self._client.patch("events", seen.name, bump, namespace=seen.namespace)
                    return
                except NotFound:
                    # Expired (event TTL): write it again, as client-go does, keeping
                    # the count and firstTimestamp this recorder knows.
                    seen.written = False
            try:
                await self._client.create("events", event, namespace=seen.namespace)
            except AlreadyExists:
                # An earlier create went through but its answer was lost: bump that one.
                await self._client.patch("events", seen.name, bump, namespace=seen.namespace)
            seen.written = True

    def _remember(self, key: EventKey, involved: dict[str, str], at: float) -> _Seen:
        seen = self._seen.get(key)
        if seen is not None:
            self._seen.move_to_end(key)
            return seen
        seen = _Seen(name=event_name(involved.get("name", "unknown"), time.time_ns()),
                     namespace=involved.get("namespace") or DEFAULT_NAMESPACE,
                     first_timestamp=rfc3339(), event_time=micro_time(at))
        self._seen[key] = seen
        while len(self._seen) > MAX_CACHE_ENTRIES:
            self._seen.popitem(last=False)
        return seen
