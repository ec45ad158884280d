"""Events (core/v1): the strategy of pkg/registry/core/event (validation, field selectors,
the Table), as one `Resource`. Events expire: they are written with an etcd lease of the
apiserver's --event-ttl."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.selectors import SelectableFields, field_text, object_meta_fields
from apiserver.tables import NAME_DOC, column, format_age
from apiserver.validation import Cause, invalid, is_dns1123_subdomain, is_qualified_name, required
from common.models import Event

# --- validation (ValidateEventCreate/Update for core/v1) ----------------------------------

def validate_event(event: dict[str, Any]) -> list[Cause]:
    """Core/v1 events get only the legacy checks (ValidateEventCreate for v1)."""
    return validate_legacy_event(event)


def validate_legacy_event(event: dict[str, Any]) -> list[Cause]:
    errs = []
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved = event.get("involvedObject") or {}
    involved_namespace = involved.get("namespace") or ""
    mismatch = invalid("involvedObject.namespace", involved_namespace,
                       "does not match event.namespace")
    if not event.get("eventTime"):
        if not involved_namespace:
            if namespace not in ("", "default"):
                errs.append(mismatch)
        elif namespace != involved_namespace:
            errs.append(mismatch)
    else:
        if not involved_namespace and namespace not in ("default", "kube-system"):
            errs.append(mismatch)
        controller = event.get("reportingComponent") or ""
        if not controller:
            errs.append(required("reportingController"))
        errs += [invalid("reportingController", controller, m) for m in is_qualified_name(controller)]
        for key, field, limit in (("reportingInstance", "reportingInstance", 128),
                                  ("action", "action", 128), ("reason", "reason", 128)):
            text = event.get(key) or ""
            if not text:
                errs.append(required(field))
            if len(text) > limit:
                errs.append(invalid(field, "", f"can have at most {limit} characters"))
        if len(event.get("message") or "") > 1024:
            errs.append(invalid("message", "", "can have at most 1024 characters"))
    errs += [invalid("namespace", namespace, m) for m in is_dns1123_subdomain(namespace)]
    return errs


# --- field selectors -------------------------------------------------------------------------

def event_fields(event: Mapping[str, Any]) -> dict[str, str]:
    involved = event.get("involvedObject") or {}
    reporting = field_text(event.get("reportingComponent"))
    fields = object_meta_fields(event, namespaced=True)
    fields.update({
        f"involvedObject.{name}": field_text(involved.get(name))
        for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath")
    })
    fields.update({
        "reason": field_text(event.get("reason")),
        "reportingComponent": reporting,
        "source": field_text((event.get("source") or {}).get("component")) or reporting,
        "type": field_text(event.get("type")),
    })
    return fields


FIELDS = SelectableFields(labels=frozenset({
    "metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
    "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
    "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
    "reportingComponent", "source", "type",
}), get=event_fields)


# --- the Table -------------------------------------------------------------------------------

FIELD_PATH_DOC = (
    "If referring to a piece of an object instead of an entire object, this string should "
    "contain a valid JSON/Go field access statement, such as desiredState.manifest."
    "containers[2]. For example, if the object reference is to a container within a pod, this "
    'would take on a value like: "spec.containers{name}" (where "name" refers to the name of '
    "the container that triggered the event) or if no container name is specified "
    '"spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to '
    "have some well-defined way of referencing a part of an object."
)
COLUMNS = [
    column("Last Seen", "The time at which the most recent occurrence of this event was "
           "recorded."),
    column("Type", "Type of this event (Normal, Warning), new types could be added in the "
           "future"),
    column("Reason", "This should be a short, machine understandable string that gives the "
           "reason for the transition into the object's current status."),
    column("Object", "The object that this event is about."),
    column("Subobject", FIELD_PATH_DOC, priority=1),
    column("Source", "The component reporting this event. Should be a short machine "
           "understandable string.", priority=1),
    column("Message", "A human-readable description of the status of this operation."),
    column("First Seen", "The time at which the event was first recorded. (Time of server "
           "receipt is in TypeMeta.)", priority=1),
    column("Count", "The number of times this event has occurred.", priority=1),
    column("Name", NAME_DOC, format_="name", priority=1),
]


def event_source(event: dict[str, Any]) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


def event_object(involved: dict[str, Any]) -> str:
    kind = str(involved.get("kind", "")).lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    first_seen = (format_age(event["firstTimestamp"], now) if event.get("firstTimestamp")
                  else format_age(event.get("eventTime"), now))
    last_seen = (format_age(event["lastTimestamp"], now) if event.get("lastTimestamp")
                 else first_seen)
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last_seen = format_age(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events of the events.k8s.io API have no count
    involved = event.get("involvedObject") or {}
    return [
        last_seen, event.get("type", ""), event.get("reason", ""), event_object(involved),
        involved.get("fieldPath", ""), event_source(event),
        str(event.get("message", "")).strip(), first_seen, count,
        (event.get("metadata") or {}).get("name", ""),
    ]


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_legacy_event(new)


EVENTS = Resource(
    plural="events", singular="event", kind="Event", namespaced=True, model=Event,
    storage_name="events", short_names=("ev",),
    descriptions={"Event": "Event is a report of an event somewhere in the cluster.  Events "
                           "have a limited retention time and triggers and messages may "
                           "evolve with time."},
    validate=validate_event, validate_update=validate_update, keeps_status_on_create=True,
    expires=True, fields=FIELDS, columns=COLUMNS, cells=event_cells,
)
