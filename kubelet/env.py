"""A container's environment as the kubelet makes it (after kubelet_pods.go's
makeEnvironmentVariables, `pkg/fieldpath`, `pkg/api/v1/resource`'s
ExtractContainerResourceValue and `third_party/forked/golang/expansion`): `env` in order,
each `value` expanded with `$(VAR)` from the variables before it (`$$` is a literal `$`, an
unknown `$(VAR)` stays as written); `valueFrom.fieldRef` from the pod (metadata.name,
.namespace, .uid, .labels['k'], .annotations['k'], spec.nodeName,
spec.serviceAccountName, status.podIP(s), status.hostIP(s)); `valueFrom.resourceFieldRef`
from the container's requests and limits (a limit it does not set is the node's
allocatable), divided by `divisor` and rounded up. Command and args are expanded with the
result, as kube does. Pure functions; the Docker conversion calls them.

Not here: configMapKeyRef / secretKeyRef / envFrom (they need the API objects) and the
service-link variables (they need the Services).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity


class EnvError(ValueError):
    """A variable the kubelet cannot make (CreateContainerConfigError)."""


@dataclass(frozen=True)
class PodContext:
    """What the pod's fieldRefs and resourceFieldRefs read besides the pod itself."""

    pod_ip: str = ""
    host_ip: str = ""
    allocatable: Mapping[str, Decimal] = field(default_factory=dict)


def expand(text: str, variables: Mapping[str, str]) -> str:
    """expansion.Expand with MappingFuncFor(variables)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            close = text.find(")", i + 2)
            if close == -1:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2:close]
                out.append(variables.get(name, f"$({name})"))
                i = close + 1
        else:
            out.append("$" + following)
            i += 2
    return "".join(out)


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def field_ref_value(pod: Mapping[str, Any], path: str, context: PodContext) -> str:
    """podFieldSelectorRuntimeValue / fieldpath.ExtractFieldPathAsString."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": context.pod_ip, "status.podIPs": context.pod_ip,
        "status.hostIP": context.host_ip, "status.hostIPs": context.host_ip,
    }
    if path in simple:
        return str(simple[path] or "")
    raise EnvError(f"unsupported fieldPath: {path}")


def _container_named(pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    spec = pod.get("spec") or {}
    return next((c for key in ("containers", "initContainers") for c in spec.get(key) or []
                 if c.get("name") == name), None)


def resource_field_value(pod: Mapping[str, Any], container: Mapping[str, Any],
                         ref: Mapping[str, Any], context: PodContext) -> str:
    """ExtractContainerResourceValue on the container with its limits merged with the
    node's allocatable (MergeContainerResourceLimits)."""
    target = container
    if ref.get("containerName"):
        found = _container_named(pod, str(ref["containerName"]))
        if found is None:
            raise EnvError(f"container {ref['containerName']} not found")
        target = found
    resource = str(ref.get("resource") or "")
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or name not in ("cpu", "memory",
                                                          "ephemeral-storage"):
        raise EnvError(f"unsupported container resource : {resource}")
    declared = ((target.get("resources") or {}).get(kind) or {}).get(name)
    try:
        if declared is not None:
            value = parse_quantity(str(declared))
        elif kind == "limits":
            value = Decimal(context.allocatable.get(name, 0))
        else:
            value = Decimal(0)
        divisor = parse_quantity(str(ref.get("divisor") or "1"))
    except QuantityError as e:
        raise EnvError(str(e)) from e
    if name == "cpu":
        milli = math.ceil(value * 1000)
        divisor_milli = math.ceil(divisor * 1000) or 1
        return str(math.ceil(milli / divisor_milli))
    whole = math.ceil(value)
    divisor_whole = math.ceil(divisor) or 1
    return str(math.ceil(whole / divisor_whole))


def container_env(pod: Mapping[str, Any], container: Mapping[str, Any],
                  context: PodContext) -> dict[str, str]:
    """makeEnvironmentVariables: the variables in order (a later one replaces an earlier
    one of the same name, where it stood)."""
    variables: dict[str, str] = {}
    for var in container.get("env") or []:
        name = str(var["name"])
        source = var.get("valueFrom")
        if not source:
            variables[name] = expand(str(var.get("value") or ""), variables)
        elif source.get("fieldRef"):
            variables[name] = field_ref_value(pod, str(source["fieldRef"].get("fieldPath")),
                                              context)
        elif source.get("resourceFieldRef"):
            variables[name] = resource_field_value(pod, container, source["resourceFieldRef"],
                                                   context)
        else:  # configMapKeyRef / secretKeyRef: refused at admission (pod_admission.py)
            variables[name] = ""
    return variables


def expand_command(words: list[Any], variables: Mapping[str, str]) -> list[str]:
    """ExpandContainerCommandAndArgs for one of command or args."""
    return [expand(str(word), variables) for word in words]
