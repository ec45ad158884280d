"""Kubernetes' validation rules that every kind shares, with kube-apiserver's exact wording.

Each problem is a cause `{"reason", "message", "field"}` as kube's field.Error renders it
(reason = the error type, message = ErrorBody()). Rules and texts follow
apimachinery/pkg/util/validation and apimachinery/pkg/api/validation (ObjectMeta); the
generic registry's BeforeCreate/BeforeUpdate checks (names as path segments, immutable
metadata) are the entry points at the end, which run each resource's own rules
(apiserver/resources/*.py, after pkg/apis/core/validation and
pkg/apis/coordination/validation). Objects are validated after defaulting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.errors import BadRequest
from common.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from apiserver.resources import Resource

Cause = dict[str, str]
NameCheck = Callable[[str, bool], list[str]]

# --- field.Error ---------------------------------------------------------------------------

_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTypeInvalid": "Invalid value",
}
_NO_VALUE_SHOWN = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"}


def cause(reason: str, field: str, value: Any = None, detail: str = "") -> Cause:
    """One field.Error as a StatusCause: message is ErrorBody()."""
    text = _TYPE_TEXT[reason]
    if reason not in _NO_VALUE_SHOWN:
        text = f"{text}: {go_value(value)}"
    if detail:
        text = f"{text}: {detail}"
    return {"reason": reason, "message": text, "field": field}


def go_value(value: Any) -> str:
    """How ErrorBody prints a bad value: %q for strings, %v for numbers and bools."""
    if value is None:
        return "null"
    if isinstance(value, GoPrinted):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return cause("FieldValueInvalid", field, value, detail)


def required(field: str, detail: str = "") -> Cause:
    return cause("FieldValueRequired", field, detail=detail)


def forbidden(field: str, detail: str) -> Cause:
    return cause("FieldValueForbidden", field, detail=detail)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(s) for s in supported)
    return cause("FieldValueNotSupported", field, value, detail)


def duplicate(field: str, value: Any) -> Cause:
    return cause("FieldValueDuplicate", field, value)


def not_found(field: str, value: Any) -> Cause:
    return cause("FieldValueNotFound", field, value)


def too_long(field: str, max_bytes: int) -> Cause:
    return cause("FieldValueTooLong", field, detail=f"may not be more than {max_bytes} bytes")


# --- apimachinery/pkg/util/validation ------------------------------------------------------

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                     "characters or '-', and must start and end with an alphanumeric character")
DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                         "characters, '-' or '.', and must start and end with an alphanumeric "
                         "character")
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                 "end with an alphanumeric character")
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character")
RELAXED_ENV_NAME_MSG = ("a valid environment variable name must consist only of printable ASCII "
                        "characters other than '='")
IS_NEGATIVE_MSG = "must be greater than or equal to 0"
FIELD_IMMUTABLE_MSG = "field is immutable"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY = re.compile(LABEL_KEY_FMT)
_LABEL_VALUE = re.compile(LABEL_VALUE_FMT)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including its doubled space between examples."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """content.IsLabelKey: an optional DNS-subdomain prefix and '/', then a 63-char name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key " + regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName",
                                                    "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _LABEL_KEY.fullmatch(name):
        errs.append("name part " + regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name",
                                               "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    errs = []
    if len(port) > 15:
        errs.append(max_len_error(15))
    if not re.fullmatch(r"[-a-z0-9]+", port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def validate_port_num_or_name(value: Any, path: str) -> list[Cause]:
    """ValidatePortNumOrName: a number 1-65535 or an IANA_SVC_NAME."""
    if isinstance(value, int):
        return [invalid(path, value, m) for m in is_valid_port_num(value)]
    return [invalid(path, value, m) for m in is_valid_port_name(str(value))]


def is_relaxed_env_var_name(value: str) -> list[str]:
    """The env var name rule since RelaxedEnvironmentVariableValidation (GA in 1.34)."""
    errs = []
    if not value:
        errs.append("environment variable name must be non-empty")
    if any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in value):
        errs.append(RELAXED_ENV_NAME_MSG)
    return errs


# --- names ---------------------------------------------------------------------------------

def mask_trailing_dash(name: str) -> str:
    return name[:-1] + "a" if name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(mask_trailing_dash(name) if prefix else name)


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """path.ValidatePathSegmentName: what every name must be to sit in a URL."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


# --- ObjectMeta ----------------------------------------------------------------------------

STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def validate_object_meta(meta: dict[str, Any], *, namespaced: bool, name_check: NameCheck,
                         path: str = "metadata") -> list[Cause]:
    errs = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        errs += [invalid(f"{path}.generateName", generate_name, m)
                 for m in name_check(generate_name, True)]
    name = meta.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    else:
        errs += [invalid(f"{path}.name", name, m) for m in name_check(name, False)]
    return errs + validate_meta_common(meta, namespaced=namespaced, path=path)


def validate_meta_common(meta: dict[str, Any], *, namespaced: bool, path: str) -> list[Cause]:
    errs = []
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(required(f"{path}.namespace"))
        else:
            errs += [invalid(f"{path}.namespace", namespace, m)
                     for m in name_is_dns_label(namespace, False)]
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(invalid(f"{path}.generation", generation, IS_NEGATIVE_MSG))
    errs += validate_labels(meta.get("labels") or {}, f"{path}.labels")
    errs += validate_annotations(meta.get("annotations") or {}, f"{path}.annotations")
    errs += validate_owner_references(meta.get("ownerReferences") or [],
                                      f"{path}.ownerReferences")
    errs += validate_finalizers(meta.get("finalizers") or [], f"{path}.finalizers")
    return errs


def validate_labels(labels: dict[str, str], path: str) -> list[Cause]:
    errs = []
    for key, value in labels.items():
        errs += [invalid(path, key, m) for m in is_qualified_name(key)]
        errs += [invalid(path, value, m) for m in is_label_value(value)]
    return errs


def validate_annotations(annotations: dict[str, str], path: str) -> list[Cause]:
    errs = [invalid(path, key, m) for key in annotations for m in is_qualified_name(key.lower())]
    if sum(len(k) + len(v) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def validate_owner_references(refs: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    controllers = []
    for ref in refs:
        api_version = ref.get("apiVersion") or ""
        if not api_version.rpartition("/")[2]:
            errs.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(invalid(f"{path}.{key}", ref.get(key) or "", "must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            errs.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller"):
            controllers.append(f"{ref.get('kind', '')}/{ref.get('name', '')}")
    if len(controllers) > 1:
        errs.append(invalid(path, refs, "Only one reference can have Controller set to true. "
                            f'Found "true" in references for {controllers[0]} and {controllers[1]}'))
    return errs


def validate_finalizers(finalizers: list[str], path: str) -> list[Cause]:
    errs = []
    for i, finalizer in enumerate(finalizers):
        errs += [invalid(path, finalizer, m) for m in is_qualified_name(finalizer)]
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            errs.append(invalid(f"{path}[{i}]", finalizer,
                                "name is neither a standard finalizer name nor is it fully qualified"))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, finalizers,
                            "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_object_meta_update(new: dict[str, Any], old: dict[str, Any],
                                path: str = "metadata") -> list[Cause]:
    errs = []
    if old.get("deletionTimestamp"):
        added = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if added:
            errs.append(forbidden(f"{path}.finalizers",
                                  "no new finalizers can be added if the object is being deleted, "
                                  f"found new finalizers {go_value(added)}"))
    new_generation, old_generation = new.get("generation") or 0, old.get("generation") or 0
    if new_generation < old_generation:
        errs.append(invalid(f"{path}.generation", new_generation, "must not be decremented"))
    for key in ("name", "namespace", "uid"):
        if (new.get(key) or "") != (old.get(key) or ""):
            errs.append(invalid(f"{path}.{key}", new.get(key) or "", FIELD_IMMUTABLE_MSG))
    for key in ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if new.get(key) != old.get(key):
            value = new.get(key)
            shown = go_time(value) if key.endswith("Timestamp") and value else value
            errs.append(invalid(f"{path}.{key}", shown, FIELD_IMMUTABLE_MSG))
    return errs


@dataclass(frozen=True, slots=True)
class GoPrinted:
    """A bad value that ErrorBody prints with its String() method, not quoted."""

    text: str


def go_time(rfc3339: str) -> GoPrinted:
    """A metav1.Time as Go prints it: `2024-01-02 03:04:05 +0000 UTC`."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d(?:\.\d+)?)Z", rfc3339)
    return GoPrinted(f"{match[1]} {match[2]} +0000 UTC" if match else rfc3339)


# --- what several kinds share ------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def choice(value: str | None, allowed: tuple[str, ...], path: str) -> list[Cause]:
    """The usual switch: empty is Required, anything else unknown is NotSupported."""
    if value in allowed:
        return []
    if not value:
        return [required(path)]
    return [not_supported(path, value, allowed)]


def validate_quantity(name: str, text: Any, path: str) -> tuple[Any, list[Cause]]:
    """(the value or None, causes): parseable, not negative, whole for extended resources."""
    try:
        value = parse_quantity(str(text))
    except QuantityError as e:
        return None, [invalid(path, text, str(e))]
    if value < 0:
        return value, [invalid(path, text, IS_NEGATIVE_MSG)]
    if is_extended_resource(name) and value != value.to_integral_value():
        return value, [invalid(path, text, "must be an integer")]
    return value, []


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    return not is_native_resource(name) and not name.startswith("requests.")


# --- entry points --------------------------------------------------------------------------

def validate(resource: Resource, obj: dict[str, Any]) -> list[Cause]:
    """The causes kube-apiserver reports when creating obj (already defaulted)."""
    errs = resource.validate(obj)
    if not errs:  # rest.BeforeCreate checks the generic metadata rules after the kind's own
        errs = validate_object_meta(obj.get("metadata") or {}, namespaced=resource.namespaced,
                                    name_check=path_segment_name)
    return unique(errs)


def validate_update(resource: Resource, new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """The causes kube-apiserver reports when replacing old with new (both defaulted)."""
    return unique(_validate_meta_update(resource, new, old) + resource.validate_update(new, old))


def validate_status_update(resource: Resource, new: dict[str, Any],
                           old: dict[str, Any]) -> list[Cause]:
    """The causes of a PUT/PATCH to the status subresource (ValidatePodStatusUpdate & co.)."""
    return unique(_validate_meta_update(resource, new, old)
                  + resource.validate_status_update(new, old))


def validate_subresource_update(resource: Resource, subresource: str | None,
                                new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """The causes of an update through `subresource` (None: the resource itself)."""
    if subresource == "status":
        return validate_status_update(resource, new, old)
    custom = resource.subresource_updates.get(subresource or "")
    if custom is not None:
        return unique(_validate_meta_update(resource, new, old) + custom.validate(new, old))
    return validate_update(resource, new, old)


def _validate_meta_update(resource: Resource, new: dict[str, Any],
                          old: dict[str, Any]) -> list[Cause]:
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    errs = validate_object_meta(new_meta, namespaced=resource.namespaced,
                                name_check=path_segment_name)
    return errs + validate_object_meta_update(new_meta, old_meta)


def warnings(resource: Resource, obj: dict[str, Any]) -> list[str]:
    """The `Warning:` texts kube-apiserver returns for an accepted object."""
    return resource.warnings(obj)


def check_namespace(resource: Resource, obj: dict[str, Any], namespace: str | None) -> None:
    """rest.BeforeCreate's check: a namespaced object's namespace must match the URL's."""
    if not resource.namespaced:
        return
    in_body = (obj.get("metadata") or {}).get("namespace")
    if in_body and namespace and in_body != namespace:
        raise BadRequest("the namespace of the provided object does not match the namespace "
                         "sent on the request")


def unique(errs: list[Cause]) -> list[Cause]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for err in errs:
        key = (err["reason"], err["field"], err["message"])
        if key not in seen:
            seen.add(key)
            out.append(err)
    return out
