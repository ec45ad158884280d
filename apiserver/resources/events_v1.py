"""Events of the events.k8s.io/v1 API: the same objects as core/v1 Events, other names.

kube-apiserver stores one Event (as core/v1, in the same etcd keys) and serves it in both
groups, converting on the way in and out (pkg/apis/events/v1/conversion.go):

    events.k8s.io/v1          core/v1
    regarding                 involvedObject
    note                      message
    reportingController       reportingComponent
    deprecatedSource          source
    deprecatedFirstTimestamp  firstTimestamp
    deprecatedLastTimestamp   lastTimestamp
    deprecatedCount           count

and eventTime, series, reportingInstance, action, reason, related and type under the same
names. The strategy is core events' (field selectors, TTL, the Table's columns), with the
stricter validation kube applies to requests of events.k8s.io/v1 and newer
(ValidateEventCreate/ValidateEventUpdate with that request version): eventTime required,
type Normal or Warning, the deprecated fields unset, series counted from 2, and nothing but
the series and metadata changed by an update.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.events import COLUMNS, FIELDS, event_cells, validate_legacy_event
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    invalid,
    name_is_dns_subdomain,
    required,
    validate_object_meta,
)
from common.models import EventSource, Int32, KubeModel, MicroTime, ObjectMeta, ObjectReference

GROUP, VERSION = "events.k8s.io", "v1"
API_VERSION = f"{GROUP}/{VERSION}"
STORED_VERSION = "v1"  # core/v1


# --- the kind (k8s.io/api/events/v1 types.go) -------------------------------------------------

class EventSeries(KubeModel):
    count: Int32 | None = None
    last_observed_time: MicroTime | None = None


class Event(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    event_time: MicroTime | None = None
    series: EventSeries | None = None
    reporting_controller: str | None = None
    reporting_instance: str | None = None
    action: str | None = None
    reason: str | None = None
    regarding: ObjectReference | None = None
    related: ObjectReference | None = None
    note: str | None = None
    type: str | None = None
    deprecated_source: EventSource | None = None
    deprecated_first_timestamp: str | None = None
    deprecated_last_timestamp: str | None = None
    deprecated_count: Int32 | None = None


DESCRIPTIONS = {
    "Event": "Event is a report of an event somewhere in the cluster. It generally denotes "
             "some state change in the system. Events have a limited retention time and "
             "triggers and messages may evolve with time.  Event consumers should not rely on "
             "the timing of an event with a given Reason reflecting a consistent underlying "
             "trigger, or the continued existence of events with that Reason.  Events should "
             "be treated as informative, best-effort, supplemental data.",
    "EventSeries": "EventSeries contain information on series of events, i.e. thing that "
                   "was/is happening continuously for some time. How often to update the "
                   "EventSeries is up to the event reporters. The default event reporter in "
                   "\"k8s.io/client-go/tools/events/event_broadcaster.go\" shows how this "
                   "struct is updated on heartbeats and can guide customized reporter "
                   "implementations.",
}


# --- conversion --------------------------------------------------------------------------------

# events.k8s.io/v1 name -> core/v1 name, for the fields that differ.
RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
TO_V1 = {core: v1 for v1, core in RENAMED.items()}
# The fields of events/v1's Event in their Go order, which is the JSON's order.
V1_FIELDS = ("metadata", "eventTime", "series", "reportingController", "reportingInstance",
             "action", "reason", "regarding", "related", "note", "type", "deprecatedSource",
             "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount")
# What Go always writes (no omitempty, or a struct omitempty does not drop): zero values.
V1_ALWAYS: dict[str, Any] = {"eventTime": None, "regarding": {}, "deprecatedSource": {},
                             "deprecatedFirstTimestamp": None,
                             "deprecatedLastTimestamp": None}


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": STORED_VERSION}
    for key, value in event.items():
        if key not in ("kind", "apiVersion") and value is not None:
            out[RENAMED.get(key, key)] = value
    return out


def from_core(event: dict[str, Any]) -> dict[str, Any]:
    """A stored core/v1 Event as events.k8s.io/v1 serves it."""
    renamed = {TO_V1.get(key, key): value for key, value in event.items()
               if key not in ("kind", "apiVersion")}
    out: dict[str, Any] = {"kind": "Event", "apiVersion": API_VERSION}
    for key in V1_FIELDS:
        if key in renamed:
            out[key] = renamed.pop(key)
        elif key in V1_ALWAYS:
            out[key] = V1_ALWAYS[key]
    out.update(renamed)  # nothing else is stored; kept rather than lost if it ever is
    return out


# --- validation (the events.k8s.io/v1 request version) ----------------------------------------

def validate_series(event: dict[str, Any]) -> list[Cause]:
    series = event.get("series")
    if series is None:
        return []
    errs = []
    if int(series.get("count") or 0) < 2:
        errs.append(invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(required("series.lastObservedTime"))
    return errs


def validate_create(event: dict[str, Any]) -> list[Cause]:
    """ValidateEventCreate for events.k8s.io/v1 (on the stored form, so with its names)."""
    errs = validate_legacy_event(event)
    errs += validate_object_meta(event.get("metadata") or {}, namespaced=True,
                                 name_check=name_is_dns_subdomain)
    errs += validate_series(event)
    if not event.get("eventTime"):
        errs.append(required("eventTime"))
    event_type = event.get("type") or ""
    if event_type not in ("Normal", "Warning"):
        errs.append(invalid("type", "", f"has invalid value: {event_type}"))
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(key):
            errs.append(invalid(key, "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        errs.append(invalid("source", "", "needs to be unset"))
    return errs


# (stored key, field path) of what an events.k8s.io/v1 update may not change.
IMMUTABLE = (("involvedObject", "involvedObject"), ("reason", "reason"),
             ("message", "message"), ("source", "source"),
             ("firstTimestamp", "firstTimestamp"), ("lastTimestamp", "lastTimestamp"),
             ("count", "count"), ("type", "type"), ("eventTime", "eventTime"),
             ("action", "action"), ("related", "related"),
             ("reportingComponent", "reportingController"),
             ("reportingInstance", "reportingInstance"))


def _empty_as_none(value: Any) -> Any:
    return value if value not in ("", 0, {}, None) else None


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidateEventUpdate for events.k8s.io/v1 (metadata rules come from the generic code)."""
    errs = validate_legacy_event(new)
    if new.get("series") != old.get("series"):
        errs += validate_series(new)
    for key, path in IMMUTABLE:
        value = new.get(key)
        if _empty_as_none(value) != _empty_as_none(old.get(key)):
            errs.append(invalid(path, value if value is not None else "", FIELD_IMMUTABLE_MSG))
    return errs


def cells(event: dict[str, Any], now: datetime) -> list[Any]:
    """The Table's cells, computed as for core events (kube prints the internal Event)."""
    return event_cells(to_core(event), now)


EVENTS_V1 = Resource(
    plural="events", singular="event", kind="Event", namespaced=True, model=Event,
    storage_name="events", group=GROUP, version=VERSION, short_names=("ev",),
    descriptions=DESCRIPTIONS,
    stored_version=STORED_VERSION, to_storage=to_core, from_storage=from_core,
    validate=validate_create, validate_update=validate_update, keeps_status_on_create=True,
    expires=True, fields=FIELDS, columns=COLUMNS, cells=cells,
)
