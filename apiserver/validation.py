"""Kubernetes' validation rules, with kube-apiserver's exact wording.

Each problem is a cause `{"reason", "message", "field"}` as kube's field.Error renders it
(reason = the error type, message = ErrorBody()). Rules and texts follow
apimachinery/pkg/util/validation, apimachinery/pkg/api/validation (ObjectMeta) and
pkg/apis/core/validation (pods, nodes, events, namespaces, bindings) and
pkg/apis/coordination/validation (leases); the generic
registry's BeforeCreate/BeforeUpdate checks (names as path segments, immutable
metadata) are included. Objects are validated after defaulting.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from common.errors import BadRequest
from common.quantity import QuantityError, parse_quantity

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


# --- entry points --------------------------------------------------------------------------

NAMESPACED = ("pods", "events", "bindings", "leases")


def validate(resource: str, obj: dict[str, Any]) -> list[Cause]:
    """The causes kube-apiserver reports when creating obj (already defaulted)."""
    if resource == "pods":
        errs = validate_pod(obj) + validate_pod_create_only(obj.get("spec") or {})
    elif resource == "nodes":
        errs = validate_node(obj)
    elif resource == "events":
        errs = validate_event(obj)
    elif resource == "namespaces":
        errs = validate_namespace(obj)
    elif resource == "bindings":
        return validate_binding(obj)
    elif resource == "leases":
        errs = validate_lease(obj)
    else:
        raise ValueError(f"no validation for {resource!r}")
    if not errs:  # rest.BeforeCreate checks the generic metadata rules after the kind's own
        errs = validate_object_meta(obj.get("metadata") or {}, namespaced=resource in NAMESPACED,
                                    name_check=path_segment_name)
    return unique(errs)


def validate_update(resource: str, new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """The causes kube-apiserver reports when replacing old with new (both defaulted)."""
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    errs = validate_object_meta(new_meta, namespaced=resource in NAMESPACED,
                                name_check=path_segment_name)
    errs += validate_object_meta_update(new_meta, old_meta)
    if resource == "pods":
        errs += validate_pod(new) + validate_pod_update(new, old)
    elif resource == "nodes":
        errs += validate_node_update(new, old)
    elif resource == "events":
        errs += validate_legacy_event(new)
    elif resource == "namespaces":
        errs += validate_namespace(new)
    elif resource == "leases":
        errs += validate_lease_spec(new.get("spec") or {}, "spec")
    else:
        raise ValueError(f"no update validation for {resource!r}")
    return unique(errs)


def validate_status_update(resource: str, new: dict[str, Any],
                           old: dict[str, Any]) -> list[Cause]:
    """The causes of a PUT/PATCH to the status subresource (ValidatePodStatusUpdate & co.)."""
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    errs = validate_object_meta(new_meta, namespaced=resource in NAMESPACED,
                                name_check=path_segment_name)
    errs += validate_object_meta_update(new_meta, old_meta)
    if resource == "pods":
        errs += validate_pod_status_update(new, old)
    elif resource == "nodes":
        errs += validate_node_update(new, old)
    return unique(errs)


def warnings(resource: str, obj: dict[str, Any]) -> list[str]:
    """The `Warning:` texts kube-apiserver returns for an accepted object (pod warnings)."""
    if resource != "pods":
        return []
    grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        return ["spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid "
                "and will be treated as 1"]
    return []


def check_namespace(resource: str, obj: dict[str, Any], namespace: str | None) -> None:
    """rest.BeforeCreate's check: a namespaced object's namespace must match the URL's."""
    if resource not in NAMESPACED:
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


# --- pods ----------------------------------------------------------------------------------

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")  # sets.List: sorted
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List: sorted
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
MAX_INT32 = 2**31 - 1


def validate_pod(pod: dict[str, Any]) -> list[Cause]:
    """ValidatePod minus the create-only checks: metadata and the whole spec."""
    errs = validate_object_meta(pod.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    return errs + validate_pod_spec(pod.get("spec") or {}, "spec")


def validate_pod_create_only(spec: dict[str, Any]) -> list[Cause]:
    errs = []
    if spec.get("ephemeralContainers"):
        errs.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errs.append(forbidden("spec.nodeName",
                              "cannot be set until all schedulingGates have been cleared"))
    return errs


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[Cause]:
    volumes, errs = validate_volumes(spec.get("volumes") or [], f"{path}.volumes")
    containers = spec.get("containers") or []
    init_containers = spec.get("initContainers") or []
    errs += validate_containers(containers, volumes, f"{path}.containers")
    errs += validate_init_containers(init_containers, containers, volumes,
                                     f"{path}.initContainers")
    errs += unique_host_ports(containers, f"{path}.containers")
    errs += choice(spec.get("restartPolicy"), RESTART_POLICIES, f"{path}.restartPolicy")
    errs += choice(spec.get("dnsPolicy"), DNS_POLICIES, f"{path}.dnsPolicy")
    errs += validate_labels(spec.get("nodeSelector") or {}, f"{path}.nodeSelector")
    if spec.get("hostNetwork"):
        errs += host_network_ports(containers, f"{path}.containers")
    for key, check in (("serviceAccountName", name_is_dns_subdomain),
                       ("nodeName", name_is_dns_subdomain)):
        if spec.get(key):
            errs += [invalid(f"{path}.{key}", spec[key], m) for m in check(spec[key], False)]
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= MAX_INT32:
        errs.append(invalid(f"{path}.activeDeadlineSeconds", deadline,
                            inclusive_range_error(1, MAX_INT32)))
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            errs += [invalid(f"{path}.{key}", spec[key], m) for m in is_dns1123_label(spec[key])]
    errs += validate_tolerations(spec.get("tolerations") or [], f"{path}.tolerations")
    if spec.get("priorityClassName"):
        errs += [invalid(f"{path}.priorityClassName", spec["priorityClassName"], m)
                 for m in name_is_dns_subdomain(spec["priorityClassName"], False)]
    if spec.get("preemptionPolicy") is not None:
        errs += choice(spec["preemptionPolicy"], PREEMPTION_POLICIES, f"{path}.preemptionPolicy")
    return errs


def choice(value: str | None, allowed: tuple[str, ...], path: str) -> list[Cause]:
    """The usual switch: empty is Required, anything else unknown is NotSupported."""
    if value in allowed:
        return []
    if not value:
        return [required(path)]
    return [not_supported(path, value, allowed)]


def validate_volumes(volumes: list[dict[str, Any]], path: str) -> tuple[set[str], list[Cause]]:
    names: set[str] = set()
    errs = []
    for i, volume in enumerate(volumes):
        here = f"{path}[{i}]"
        name = volume.get("name") or ""
        sources = [k for k in volume if k != "name"]
        if not sources:
            errs.append(required(here, "must specify a volume type"))
        for extra in sources[1:]:
            errs.append(forbidden(f"{here}.{extra}", "may not specify more than 1 volume type"))
        if not name:
            errs.append(required(f"{here}.name"))
        else:
            errs += [invalid(f"{here}.name", name, m) for m in is_dns1123_label(name)]
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        elif name:
            names.add(name)
    return names, errs


def validate_containers(containers: list[dict[str, Any]], volumes: set[str],
                        path: str) -> list[Cause]:
    if not containers:
        return [required(path)]
    errs = []
    names: set[str] = set()
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        errs += validate_container(container, volumes, here)
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        else:
            names.add(name)
    return errs


def validate_init_containers(containers: list[dict[str, Any]], others: list[dict[str, Any]],
                             volumes: set[str], path: str) -> list[Cause]:
    errs = []
    names = {c.get("name") or "" for c in others}
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        errs += validate_container(container, volumes, here)
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        elif name:
            names.add(name)
    return errs


def validate_container(container: dict[str, Any], volumes: set[str], path: str) -> list[Cause]:
    """validateContainerCommon."""
    errs = []
    name = container.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs += [invalid(f"{path}.name", name, m) for m in is_dns1123_label(name)]
    image = container.get("image") or ""
    if not image:
        errs.append(required(f"{path}.image"))
    elif image != image.strip():
        errs.append(invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
    policy = container.get("terminationMessagePolicy")
    if not policy:
        errs.append(required(f"{path}.terminationMessagePolicy",
                             "must be 'File' or 'FallbackToLogsOnError'"))
    elif policy not in TERMINATION_MESSAGE_POLICIES:
        errs.append(not_supported(f"{path}.terminationMessagePolicy", policy,
                                  TERMINATION_MESSAGE_POLICIES))
    errs += validate_ports(container.get("ports") or [], f"{path}.ports")
    errs += validate_env(container.get("env") or [], f"{path}.env")
    errs += validate_volume_mounts(container.get("volumeMounts") or [], volumes,
                                   f"{path}.volumeMounts")
    errs += choice(container.get("imagePullPolicy"), PULL_POLICIES, f"{path}.imagePullPolicy")
    errs += validate_resources(container.get("resources") or {}, f"{path}.resources")
    return errs


def validate_ports(ports: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        here = f"{path}[{i}]"
        name = port.get("name") or ""
        if name:
            messages = is_valid_port_name(name)
            if messages:
                errs += [invalid(f"{here}.name", name, m) for m in messages]
            elif name in names:
                errs.append(duplicate(f"{here}.name", name))
            else:
                names.add(name)
        container_port = port.get("containerPort") or 0
        if container_port == 0:
            errs.append(required(f"{here}.containerPort"))
        else:
            errs += [invalid(f"{here}.containerPort", container_port, m)
                     for m in is_valid_port_num(container_port)]
        host_port = port.get("hostPort") or 0
        if host_port != 0:
            errs += [invalid(f"{here}.hostPort", host_port, m) for m in is_valid_port_num(host_port)]
        protocol = port.get("protocol") or ""
        if not protocol:
            errs.append(required(f"{here}.protocol"))
        elif protocol not in PORT_PROTOCOLS:
            errs.append(not_supported(f"{here}.protocol", protocol, PORT_PROTOCOLS))
    return errs


def unique_host_ports(containers: list[dict[str, Any]], path: str) -> list[Cause]:
    """AccumulateUniqueHostPorts: one hostIP/protocol/hostPort per pod."""
    seen: set[str] = set()
    errs = []
    for ci, container in enumerate(containers):
        for pi, port in enumerate(container.get("ports") or []):
            host_port = port.get("hostPort") or 0
            if not host_port:
                continue
            key = f"{port.get('hostIP') or ''}/{port.get('protocol') or ''}/{host_port}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return errs


def host_network_ports(containers: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    for ci, container in enumerate(containers):
        for pi, port in enumerate(container.get("ports") or []):
            if (port.get("hostPort") or 0) != (port.get("containerPort") or 0):
                errs.append(invalid(f"{path}[{ci}].ports[{pi}].containerPort",
                                    port.get("containerPort") or 0,
                                    "must match `hostPort` when `hostNetwork` is true"))
    return errs


def validate_env(env: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    for i, var in enumerate(env):
        name = var.get("name") or ""
        if not name:
            errs.append(required(f"{path}[{i}].name"))
        errs += [invalid(f"{path}[{i}].name", name, m) for m in is_relaxed_env_var_name(name)]
    return errs


def validate_volume_mounts(mounts: list[dict[str, Any]], volumes: set[str],
                           path: str) -> list[Cause]:
    errs = []
    mount_points: set[str] = set()
    for i, mount in enumerate(mounts):
        here = f"{path}[{i}]"
        name = mount.get("name") or ""
        if not name:
            errs.append(required(f"{here}.name"))
        if name not in volumes:
            errs.append(not_found(f"{here}.name", name))
        mount_path = mount.get("mountPath") or ""
        if not mount_path:
            errs.append(required(f"{here}.mountPath"))
        if mount_path in mount_points:
            errs.append(invalid(f"{here}.mountPath", mount_path, "must be unique"))
        mount_points.add(mount_path)
    return errs


def validate_resources(resources: dict[str, Any], path: str) -> list[Cause]:
    """ValidateResourceRequirements: names, non-negative quantities, requests <= limits."""
    errs = []
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    parsed_limits: dict[str, Any] = {}
    for name, text in limits.items():
        here = f"{path}.limits[{name}]"
        errs += validate_container_resource_name(name, here)
        value, quantity_errs = validate_quantity(name, text, here)
        errs += quantity_errs
        parsed_limits[name] = value
    for name, text in requests.items():
        here = f"{path}.requests[{name}]"
        errs += validate_container_resource_name(name, here)
        value, quantity_errs = validate_quantity(name, text, here)
        errs += quantity_errs
        if value is None:
            continue
        if name in limits:
            limit = parsed_limits.get(name)
            if limit is None:
                continue
            if value != limit and not overcommit_allowed(name):
                errs.append(invalid(f"{path}.requests", text,
                                    f"must be equal to {name} limit of {limits[name]}"))
            elif value > limit:
                errs.append(invalid(f"{path}.requests", text,
                                    f"must be less than or equal to {name} limit of {limits[name]}"))
        elif not overcommit_allowed(name):
            errs.append(required(f"{path}.limits",
                                 "Limit must be set for non overcommitable resources"))
    return errs


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


def validate_container_resource_name(name: str, path: str) -> list[Cause]:
    errs = [invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    return not is_native_resource(name) and not name.startswith("requests.")


def overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not name.startswith("hugepages-")


def validate_tolerations(tolerations: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    for i, toleration in enumerate(tolerations):
        here = f"{path}[{i}]"
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or ""
        value = toleration.get("value") or ""
        effect = toleration.get("effect") or ""
        if key:
            errs += [invalid(f"{here}.key", key, m) for m in is_qualified_name(key)]
        if not key and operator != "Exists":
            errs.append(invalid(f"{here}.operator", operator, "operator must be Exists when "
                                "`key` is empty, which means \"match all values and all keys\""))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{here}.effect", effect,
                                "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            messages = is_label_value(value)
            if messages:
                errs.append(invalid(f"{here}.operator", value, ";".join(messages)))
        elif operator == "Exists":
            if value:
                errs.append(invalid(f"{here}.operator", toleration,
                                    "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(f"{here}.operator", operator, TOLERATION_OPERATORS))
        if effect:
            errs += choice(effect, TAINT_EFFECTS, f"{here}.effect")
    return errs


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidatePodUpdate: only images, activeDeadlineSeconds and added tolerations may change."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs = []
    for key in ("containers", "initContainers"):
        new_list, old_list = new_spec.get(key) or [], old_spec.get(key) or []
        if len(new_list) != len(old_list):
            errs.append(forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
            return errs
        for i, container in enumerate(new_list):
            image = container.get("image") or ""
            if not image:
                errs.append(required(f"spec.{key}[{i}].image"))
            elif image != image.strip():
                errs.append(invalid(f"spec.{key}[{i}].image", image,
                                    "must not have leading or trailing whitespace"))
    new_deadline = new_spec.get("activeDeadlineSeconds")
    old_deadline = old_spec.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if not 0 <= new_deadline <= MAX_INT32:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                                inclusive_range_error(0, MAX_INT32)))
            return errs
        if old_deadline is not None and old_deadline < new_deadline:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                                "must be less than or equal to previous value"))
            return errs
    elif old_deadline is not None:
        errs.append(invalid("spec.activeDeadlineSeconds", None,
                            "must not update from a positive integer to nil value"))
    errs += only_added_tolerations(new_spec.get("tolerations") or [],
                                   old_spec.get("tolerations") or [], "spec.tolerations")
    munged = munge_updatable_fields(new_spec, old_spec)
    if comparable(munged) != comparable(old_spec):
        errs.append(forbidden("spec", "pod updates may not change fields other than "
                              + ",".join(UPDATABLE_POD_SPEC_FIELDS) + "\n"
                              + spec_diff(old_spec, munged)))
    return errs


def munge_updatable_fields(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> dict[str, Any]:
    """new_spec with the fields an update may change set back to their old values."""
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):
        olds = old_spec.get(key) or []
        if key in munged:
            munged[key] = [{**c, "image": olds[i].get("image")} if i < len(olds) else c
                           for i, c in enumerate(munged[key] or [])]
    for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        munged.pop(key, None)
        if key in old_spec:
            munged[key] = old_spec[key]
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    return munged


def only_added_tolerations(new: list[dict[str, Any]], old: list[dict[str, Any]],
                           path: str) -> list[Cause]:
    def same_but_seconds(a: dict[str, Any], b: dict[str, Any]) -> bool:
        strip = ("tolerationSeconds",)
        return comparable({k: v for k, v in a.items() if k not in strip}) == \
            comparable({k: v for k, v in b.items() if k not in strip})

    for toleration in old:
        if not any(same_but_seconds(toleration, candidate) for candidate in new):
            return [forbidden(path, "existing toleration can not be modified except its "
                                    "tolerationSeconds")]
    return []


def comparable(value: Any) -> Any:
    """value with Go's zero values dropped, so that absent, null, "", 0, false, {} and [] agree
    (apiequality.Semantic.DeepEqual on the decoded structs; 0 == False in Python)."""
    if isinstance(value, dict):
        out = {k: comparable(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", False, {}, [])}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def spec_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short cmp.Diff-like listing of what differs between two pod specs."""
    lines = ["  core.PodSpec{"]
    for path, before, after in differences(comparable(old), comparable(new), ""):
        if before is not _MISSING:
            lines.append(f"- \t{path}: {json.dumps(before, sort_keys=True)},")
        if after is not _MISSING:
            lines.append(f"+ \t{path}: {json.dumps(after, sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines)


_MISSING: Any = object()


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in list(old) + [k for k in new if k not in old]:
            name = key[:1].upper() + key[1:]
            child = f"{path}.{name}" if path else name
            out += differences(old.get(key, _MISSING), new.get(key, _MISSING), child)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    return [] if old == new else [(path, old, new)]


SYSTEM_POD_CONDITIONS = ("PodScheduled", "Ready", "Initialized")


def validate_pod_status_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    status, old_status = new.get("status") or {}, old.get("status") or {}
    errs = []
    for i, condition in enumerate(status.get("conditions") or []):
        kind = condition.get("type") or ""
        if kind not in SYSTEM_POD_CONDITIONS:
            # kube builds this path from "metadata" too
            errs += [invalid(f"metadata.conditions[{i}].Type", kind, m)
                     for m in is_qualified_name(kind)]
    if ((new.get("spec") or {}).get("nodeName") or "") != ((old.get("spec") or {}).get("nodeName")
                                                           or ""):
        errs.append(forbidden("status.nodeName", "may not be changed directly"))
    nominated = status.get("nominatedNodeName") or ""
    if nominated and nominated != (old_status.get("nominatedNodeName") or ""):
        errs += [invalid("status.nominatedNodeName", nominated, m)
                 for m in name_is_dns_subdomain(nominated, False)]
    restart_policy = (old.get("spec") or {}).get("restartPolicy") or ""
    for key in ("containerStatuses", "initContainerStatuses"):
        errs += terminated_stays_terminated(status.get(key) or [], old_status.get(key) or [],
                                            f"status.{key}", restart_policy)
    for key in ("podIPs", "hostIPs"):
        errs += validate_ip_list(status.get(key) or [], f"status.{key}")
    return errs


def terminated_stays_terminated(new: list[dict[str, Any]], old: list[dict[str, Any]], path: str,
                                restart_policy: str) -> list[Cause]:
    """ValidateContainerStateTransition: without restarts, terminated is final."""
    if restart_policy == "Always":
        return []
    errs = []
    for i, before in enumerate(old):
        terminated = (before.get("state") or {}).get("terminated")
        if terminated is None:
            continue
        if terminated.get("exitCode", 0) != 0 and restart_policy == "OnFailure":
            continue
        for after in new:
            if after.get("name") == before.get("name") and \
                    (after.get("state") or {}).get("terminated") is None:
                errs.append(forbidden(f"{path}[{i}].state",
                                      "may not be transitioned to non-terminated state"))
    return errs


def validate_ip_list(entries: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        ip = entry.get("ip") or ""
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            errs.append(invalid(f"{path}[{i}]", ip,
                                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
        if ip in seen:
            errs.append(duplicate(f"{path}[{i}]", entry))
        seen.add(ip)
    return errs


# --- nodes ---------------------------------------------------------------------------------

def validate_node(node: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(node.get("metadata") or {}, namespaced=False,
                                name_check=name_is_dns_subdomain)
    spec = node.get("spec") or {}
    # kube builds this path from "metadata", so taint errors read metadata.taints[i]
    errs += validate_taints(spec.get("taints") or [], "metadata.taints")
    return errs + validate_node_resources(node.get("status") or {})


def validate_node_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    errs = validate_node_resources(new.get("status") or {})
    seen: list[Any] = []
    for i, address in enumerate((new.get("status") or {}).get("addresses") or []):
        if address in seen:
            errs.append(duplicate(f"status.addresses[{i}]", address))
        seen.append(address)
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if old_spec.get("podCIDRs") and old_spec.get("podCIDRs") != new_spec.get("podCIDRs"):
        errs.append(forbidden("spec.podCIDRs",
                              'node updates may not change podCIDR except from "" to valid'))
    if old_spec.get("providerID") and old_spec.get("providerID") != new_spec.get("providerID"):
        errs.append(forbidden("spec.providerID",
                              'node updates may not change providerID except from "" to valid'))
    errs += validate_taints(new_spec.get("taints") or [], "metadata.taints")
    if (new_spec.get("externalID") or "") != (old_spec.get("externalID") or ""):
        errs.append(forbidden("spec.externalID", "may not be updated"))
    return errs


def validate_taints(taints: list[dict[str, Any]], path: str) -> list[Cause]:
    errs = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        here = f"{path}[{i}]"
        key, value, effect = taint.get("key") or "", taint.get("value") or "", taint.get("effect") or ""
        errs += [invalid(f"{here}.key", key, m) for m in is_qualified_name(key)]
        messages = is_label_value(value)
        if messages:
            errs.append(invalid(f"{here}.value", value, ";".join(messages)))
        errs += choice(effect, TAINT_EFFECTS, f"{here}.effect")
        if (key, effect) in seen:
            err = duplicate(here, taint)
            err["message"] += ": taints must be unique by key and effect pair"
            errs.append(err)
        seen.add((key, effect))
    return errs


def validate_node_resources(status: dict[str, Any]) -> list[Cause]:
    errs = []
    for section in ("capacity", "allocatable"):
        for name, text in (status.get(section) or {}).items():
            errs += validate_quantity(name, text, f"status.{section}.{name}")[1]
    return errs


# --- events, namespaces, bindings ----------------------------------------------------------

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


def validate_namespace(namespace: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(namespace.get("metadata") or {}, namespaced=False,
                                name_check=name_is_dns_label)
    for finalizer in (namespace.get("spec") or {}).get("finalizers") or []:
        errs += [invalid("spec.finalizers", finalizer, m) for m in is_qualified_name(finalizer)]
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            errs.append(invalid("spec.finalizers", finalizer,
                                "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def validate_binding(binding: dict[str, Any]) -> list[Cause]:
    target = binding.get("target") or {}
    errs = []
    if target.get("kind") and target["kind"] != "Node":
        errs.append(not_supported("target.kind", target["kind"], ("Node", "<empty>")))
    if not target.get("name"):
        errs.append(required("target.name"))
    return errs


# --- coordination.k8s.io leases ------------------------------------------------------------

LEASE_STRATEGIES = ("OldestEmulationVersion",)


def validate_lease(lease: dict[str, Any]) -> list[Cause]:
    """ValidateLease: a DNS-subdomain name in a namespace, and the spec."""
    errs = validate_object_meta(lease.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    return errs + validate_lease_spec(lease.get("spec") or {}, "spec")


def validate_lease_spec(spec: dict[str, Any], path: str) -> list[Cause]:
    """ValidateLeaseSpec; holderIdentity is free-form and the times were checked on decode."""
    errs = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.append(invalid(f"{path}.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errs.append(invalid(f"{path}.leaseTransitions", transitions, IS_NEGATIVE_MSG))
    strategy = spec.get("strategy")
    if strategy is not None:
        # kube appends "strategy" to a path that already ends in it
        errs += validate_lease_strategy(strategy, f"{path}.strategy.strategy")
    if spec.get("preferredHolder") and not strategy:
        errs.append(forbidden(f"{path}.preferredHolder",
                              "may only be specified if `strategy` is defined"))
    return errs


def validate_lease_strategy(strategy: str, path: str) -> list[Cause]:
    """ValidateCoordinatedLeaseStrategy: a Kubernetes-defined name, or a qualified name."""
    if "/" not in strategy:
        return [] if strategy in LEASE_STRATEGIES else [
            not_supported(path, strategy, LEASE_STRATEGIES)]
    return [invalid(path, strategy, m) for m in is_qualified_name(strategy)]
