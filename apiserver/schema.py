"""Decoding request bodies: types checked like Go's encoding/json, unknown fields pruned.

kube-apiserver decodes a body into its Go structs: a value of the wrong JSON type is a
400 (`Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into
Go struct field PodSpec.spec.containers of type []v1.Container`), and fields the struct
does not have are dropped (listed as `unknown field "spec.containers[0].foo"` for
`fieldValidation=Strict|Warn`). `decode` does the same with the pydantic models.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

from annotated_types import Le
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from common.errors import BadRequest
from common.models import KubeModel

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class FieldShape:
    """What decode needs to know about one JSON field of a model."""

    go_type: str
    model: type[KubeModel] | None = None  # the struct inside (directly, in a list or a map)
    container: str = ""  # "", "list" or "map"


def decode(model: type[KubeModel], obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the object without unknown fields, the unknown field paths); BadRequest on a type error."""
    kind = model.__name__
    if not isinstance(obj, dict):
        raise BadRequest(f'{kind} in version "v1" cannot be handled as a {kind}: '
                         f"json: cannot unmarshal {json_kind(obj)} into Go value of type v1.{kind}")
    try:
        parsed = model.model_validate(obj)
    except ValidationError as e:
        # transformDecodeError names the kind and version the body claims to be
        data_kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj["kind"] else kind
        api_version = obj.get("apiVersion")
        version = (api_version if isinstance(api_version, str) else "").rpartition("/")[2] or "v1"
        raise BadRequest(f'{data_kind} in version "{version}" cannot be handled as a {kind}: '
                         f"{go_decode_message(model, e.errors()[0])}") from None
    pruned = parsed.model_dump(by_alias=True, exclude_unset=True, exclude_none=True)
    drop_empty(model, pruned)
    unknown: list[str] = []
    collect_unknown(model, obj, "", unknown)
    return pruned, unknown


# Lists kube serializes even when empty (no `omitempty` in their Go tags).
_KEPT_WHEN_EMPTY = frozenset({"containers"})


def drop_empty(model: type[KubeModel], obj: dict[str, Any]) -> None:
    """Remove empty maps and lists in place, as Go's `omitempty` does when kube stores an
    object: `labels: {}` or `tolerations: []` is the same object as none at all (so
    writing it is no change). Empty structs (`resources: {}`) stay, as in kube."""
    shapes = field_shapes(model)
    for key in list(obj):
        value = obj[key]
        shape = shapes.get(key)
        if shape is None:
            continue
        if isinstance(value, dict):
            # dict[str, Any] stands for a struct kubelite does not model: kept when empty
            if shape.go_type.startswith("map[") and shape.go_type != "map[string]interface {}":
                if not value and key not in _KEPT_WHEN_EMPTY:
                    del obj[key]
                elif shape.container == "map" and shape.model is not None:
                    for item in value.values():
                        if isinstance(item, dict):
                            drop_empty(shape.model, item)
            elif shape.model is not None:
                drop_empty(shape.model, value)
        elif isinstance(value, list):
            if not value and key not in _KEPT_WHEN_EMPTY:
                del obj[key]
            elif shape.container == "list" and shape.model is not None:
                for item in value:
                    if isinstance(item, dict):
                        drop_empty(shape.model, item)


def strict_decoding_message(unknown: list[str]) -> str:
    """The 400 message of fieldValidation=Strict (and the text of each Warn warning)."""
    return "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown)


def collect_unknown(model: type[KubeModel], obj: dict[str, Any], path: str,
                    out: list[str]) -> None:
    shapes = field_shapes(model)
    for key, value in obj.items():
        here = f"{path}.{key}" if path else key
        shape = shapes.get(key)
        if shape is None:
            out.append(here)
        elif shape.model is None or value is None:
            continue
        elif shape.container == "list":
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    collect_unknown(shape.model, item, f"{here}[{i}]", out)
        elif shape.container == "map":
            for k, item in value.items():
                if isinstance(item, dict):
                    collect_unknown(shape.model, item, f"{here}[{k}]", out)
        elif isinstance(value, dict):
            collect_unknown(shape.model, value, here, out)


def go_decode_message(model: type[KubeModel], error: ErrorDetails) -> str:
    """encoding/json's UnmarshalTypeError text for the first pydantic error."""
    ctx_error = (error.get("ctx") or {}).get("error")
    if error["type"] == "value_error" and ctx_error is not None:
        return str(ctx_error)  # a quantity: resource.Quantity's own message
    struct, json_path, go_type = locate(model, error["loc"])
    value = error["input"]
    found = json_kind(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and (
            go_type.startswith(("int", "uint")) or go_type == "resource.Quantity"):
        found = f"number {value}"
    if not json_path:
        return f"json: cannot unmarshal {found} into Go value of type {go_type}"
    return f"json: cannot unmarshal {found} into Go struct field {struct}.{json_path} of type {go_type}"


def locate(model: type[KubeModel], loc: tuple[int | str, ...]) -> tuple[str, str, str]:
    """(Go struct name, dotted JSON path without indexes, Go type) of the field at loc."""
    current: type[KubeModel] | None = model
    struct, go_type, names = model.__name__, f"v1.{model.__name__}", []
    expect_index = False
    for part in loc:
        if expect_index:  # a list index or a map key: the element type comes next
            expect_index = False
            go_type = element_type(go_type)
            continue
        if current is None or not isinstance(part, str):
            break
        shape = field_shapes(current).get(part)
        if shape is None:
            break
        struct, go_type = current.__name__, shape.go_type
        names.append(part)
        current = shape.model
        expect_index = go_type.startswith(("[]", "map["))
    return struct, ".".join(names), go_type


def element_type(go_type: str) -> str:
    if go_type.startswith("[]"):
        return go_type[2:]
    return go_type.split("]", 1)[1]


def json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


@functools.cache
def field_shapes(model: type[KubeModel]) -> dict[str, FieldShape]:
    """JSON name -> FieldShape for every field of a model (computed once per model)."""
    hints = typing.get_type_hints(model, include_extras=True)
    shapes = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        shapes[alias] = shape_of(strip_optional(hints[name]))
    return shapes


def strip_optional(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def shape_of(annotation: Any) -> FieldShape:
    origin = typing.get_origin(annotation)
    if origin is list:
        inner = shape_of(typing.get_args(annotation)[0])
        return FieldShape("[]" + inner.go_type, inner.model, "list" if inner.model else "")
    if origin is dict:
        inner = shape_of(typing.get_args(annotation)[1])
        return FieldShape("map[string]" + inner.go_type, inner.model, "map" if inner.model else "")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return FieldShape(f"v1.{annotation.__name__}", annotation)  # type: ignore[arg-type]
    return FieldShape(scalar_go_type(annotation))


def scalar_go_type(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        if base is int:
            bounds = [m.le for e in extras for m in getattr(e, "metadata", []) if isinstance(m, Le)]
            return "int32" if bounds and bounds[0] == _INT32_MAX else "int64"
        if base is str:
            return "resource.Quantity"
        return scalar_go_type(base)
    return {str: "string", bool: "bool", int: "int64", float: "float64"}.get(
        annotation, "interface {}")
