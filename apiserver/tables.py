"""Server-side printing: the meta.k8s.io Table answers `kubectl get` asks for.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints
whatever columns the server returns, so the columns, their descriptions and every cell
follow kube-apiserver's printers (pkg/printers/internalversion/printers.go) exactly.
As kube-apiserver does, the wide (priority 1) cells are always computed; kubectl hides
them unless `-o wide`. Each resource's columns, cells and row conditions are its own
(apiserver/resources/*.py); this module negotiates the Table, builds it, and holds what
the printers share (ages, column definitions, the common descriptions).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from common.errors import BadRequest

if TYPE_CHECKING:
    from apiserver.resources import Resource

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("None", "Metadata", "Object")

NONE = "<none>"
UNKNOWN = "<unknown>"

# Swagger descriptions of the fields each column shows, as kube-apiserver sends them.
NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATION_TIMESTAMP_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def column(name: str, description: str, *, type_: str = "string", format_: str = "",
            priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": format_, "description": description,
            "priority": priority}


# --- content negotiation ---------------------------------------------------------------------

def _media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    ranges = []
    for clause in accept.split(","):
        media_type, *params = (part.strip() for part in clause.split(";"))
        parsed = {}
        for param in params:
            key, _, value = param.partition("=")
            parsed[key.strip().lower()] = value.strip().strip('"')
        ranges.append((media_type.lower(), parsed))
    return ranges


def table_version(accept: str | None) -> str | None:
    """The meta.k8s.io version of the Table the client asked for, or None for plain JSON.

    Like kube-apiserver, the first media range the server can serve wins: a client that
    lists plain `application/json` before the Table gets plain JSON.
    """
    for media_type, params in _media_ranges(accept or ""):
        if media_type not in ("application/json", "application/*", "*/*"):
            continue
        wanted = params.get("as")
        if wanted is None:
            return None
        if (wanted == "Table" and params.get("g") == TABLE_GROUP
                and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


def wants_table(accept: str | None) -> bool:
    return table_version(accept) is not None


# --- ages ------------------------------------------------------------------------------------

def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: ~2-3 significant figures."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = divmod(hours // 24, 365)
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_time(timestamp: str | None) -> datetime | None:
    if not timestamp:
        return None
    parsed = datetime.fromisoformat(timestamp)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_age(created: str | None, now: datetime) -> str:
    """printers.go translateTimestampSince: `<unknown>` for a missing timestamp."""
    since = parse_time(created)
    if since is None:
        return UNKNOWN
    return human_duration((now - since).total_seconds())


# --- the Table -------------------------------------------------------------------------------

def partial_object_metadata(obj: dict[str, Any], table_api_version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": table_api_version,
            "metadata": obj.get("metadata") or {}}  # obj is the caller's own copy


def row_object(obj: dict[str, Any], include_object: str,
               table_api_version: str) -> dict[str, Any] | None:
    if include_object == "Object":
        return obj
    if include_object == "None":
        return None
    return partial_object_metadata(obj, table_api_version)


def to_table(resource: Resource, objects: list[dict[str, Any]], *, resource_version: str,
             include_object: str = "Metadata", include_column_definitions: bool = True,
             now: datetime | None = None, version: str = "v1",
             continue_token: str | None = None) -> dict[str, Any]:
    """A meta.k8s.io Table of `objects`, as kube-apiserver answers `as=Table`.

    `include_object` is the `includeObject` query parameter (`""` means Metadata);
    `include_column_definitions=False` is what a watch sends after its first event.
    """
    if include_object == "":
        include_object = "Metadata"
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise BadRequest(f'unrecognized includeObject value: "{include_object}"')
    now = now or datetime.now(UTC)
    api_version = f"{TABLE_GROUP}/{version}"
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": resource.cells(obj, now)}
        if conditions := resource.row_conditions(obj):
            row["conditions"] = copy.deepcopy(conditions)
        embedded = row_object(obj, include_object, api_version)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    table: dict[str, Any] = {"kind": "Table", "apiVersion": api_version, "metadata": metadata}
    # Like Go's Table (no omitempty): null when the headers were already sent.
    table["columnDefinitions"] = (copy.deepcopy(list(resource.columns))
                                  if include_column_definitions else None)
    table["rows"] = rows
    return table
