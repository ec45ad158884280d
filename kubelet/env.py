"""A container's environment as the kubelet makes it (after kubelet_pods.go's
makeEnvironmentVariables, `pkg/fieldpath`, `pkg/api/v1/resource`'s
ExtractContainerResourceValue and `third_party/forked/golang/expansion`): `env` in order,
each `value` expanded with `$(VAR)` from the variables before it (`$$` is a literal `$`, an
unknown `$(VAR)` stays as written); `valueFrom.fieldRef` from the pod (metadata.name,
.namespace, .uid, .labels['k'], .annotations['k'], spec.nodeName,
spec.serviceAccountName, status.podIP(s), status.hostIP(s)); `valueFrom.resourceFieldRef`
from the container's requests and limits (a limit it does not set is the node's
allocatable), divided by `divisor` and rounded up. Command and args are expanded with the
result, as kube does. `envFrom` comes first (each ConfigMap's `data` or Secret's decoded
`data`, keys with `prefix`, a key that is no valid variable name skipped and reported), then
`env` with `valueFrom.configMapKeyRef` / `secretKeyRef`; the objects are the kubelet's
configmap/secret manager's (`kubelet.objects`), given as `EnvSources`. A missing object or
key is kube's CreateContainerConfigError message unless the reference is `optional`. Pure
functions; the Docker conversion calls them.

Not here: the service-link variables (they need the Services).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import ChainMap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity


class EnvError(ValueError):
    """A variable the kubelet cannot make (CreateContainerConfigError)."""


@dataclass(frozen=True)
class EnvSources:
    """The ConfigMaps and Secrets the pod references, by name (None: it does not exist),
    as the configmap/secret manager has them now, and the pod's service-link variables."""

    configmaps: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    secrets: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    services: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PodContext:
    """What the pod's fieldRefs and resourceFieldRefs read besides the pod itself."""

    pod_ip: str = ""
    host_ip: str = ""
    allocatable: Mapping[str, Decimal] = field(default_factory=dict)
    sources: EnvSources = field(default_factory=EnvSources)


# what kube's configmap and secret managers answer for a missing object
CONFIGMAP, SECRET = "configmap", "secret"


def not_found(kind: str, name: str) -> str:
    return f'{kind} "{name}" not found'


def secret_values(secret: Mapping[str, Any]) -> dict[str, bytes]:
    """A Secret's `data`, decoded (the apiserver stores it as base64)."""
    values = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            values[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            continue  # not from a valid apiserver: nothing to decode
    return values


def configmap_values(configmap: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}


MASTER_SERVICES = frozenset({"kubernetes"})  # of `default`, linked into every pod


def env_variable_name(name: str) -> str:
    """makeEnvVariableName: a Service or port name as a variable name."""
    return name.upper().replace("-", "_")


def has_cluster_ip(service: Mapping[str, Any]) -> bool:
    """IsServiceIPSet: headless (`None`) and ExternalName services have no links."""
    cluster_ip = str((service.get("spec") or {}).get("clusterIP") or "")
    return cluster_ip not in ("", "None")


def link_variables(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """envvars.FromServices for one Service, in kube's order."""
    spec = service.get("spec") or {}
    cluster_ip = str(spec.get("clusterIP"))
    ports = list(spec.get("ports") or [])
    prefix = env_variable_name(str((service.get("metadata") or {}).get("name") or ""))
    if not ports:
        return [(f"{prefix}_SERVICE_HOST", cluster_ip)]
    variables = [(f"{prefix}_SERVICE_HOST", cluster_ip),
                 (f"{prefix}_SERVICE_PORT", str(ports[0].get("port")))]
    variables += [(f"{prefix}_SERVICE_PORT_{env_variable_name(str(p['name']))}",
                   str(p.get("port"))) for p in ports if p.get("name")]
    host = f"[{cluster_ip}]" if ":" in cluster_ip else cluster_ip
    for index, port in enumerate(ports):
        protocol = str(port.get("protocol") or "TCP")
        url = f"{protocol.lower()}://{host}:{port.get('port')}"
        if index == 0:  # Docker special-cases the first port
            variables.append((f"{prefix}_PORT", url))
        port_prefix = f"{prefix}_PORT_{port.get('port')}_{protocol.upper()}"
        variables += [(port_prefix, url), (f"{port_prefix}_PROTO", protocol.lower()),
                      (f"{port_prefix}_PORT", str(port.get("port"))),
                      (f"{port_prefix}_ADDR", cluster_ip)]
    return variables


def service_env(services: Iterable[Mapping[str, Any]], namespace: str, *,
                enable_service_links: bool) -> dict[str, str]:
    """getServiceEnvVarMap: the links of the namespace's Services (when enabled) and of
    `default`'s master services, one Service per name (the namespace's own wins a clash),
    in the order of the Services' names."""
    chosen: dict[str, Mapping[str, Any]] = {}
    for service in services:
        if not has_cluster_ip(service):
            continue
        meta = service.get("metadata") or {}
        name, ns = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        if ns == "default" and name in MASTER_SERVICES:
            chosen.setdefault(name, service)
        elif ns == namespace and enable_service_links:
            chosen[name] = service
    variables: dict[str, str] = {}
    for name in sorted(chosen):
        variables.update(link_variables(chosen[name]))
    return variables


def is_env_var_name(name: str) -> bool:
    """IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation, GA in 1.34)."""
    return bool(name) and all(32 <= ord(c) <= 126 and c != "=" for c in name)


def _lookup(kind: str, ref: Mapping[str, Any], context: PodContext,
            ) -> Mapping[str, Any] | None:
    """The referenced object; None when it is missing and the reference optional."""
    name = str(ref.get("name") or "")
    found = (context.sources.configmaps if kind == CONFIGMAP
             else context.sources.secrets).get(name)
    if found is None:
        if ref.get("optional"):
            return None
        raise EnvError(not_found(kind, name))
    return found


def _values(kind: str, obj: Mapping[str, Any]) -> Mapping[str, str]:
    if kind == CONFIGMAP:
        return configmap_values(obj)
    return {k: v.decode(errors="replace") for k, v in secret_values(obj).items()}


def env_from(container: Mapping[str, Any], context: PodContext,
             ) -> tuple[dict[str, str], list[str]]:
    """The variables of `envFrom`, and the kube event messages of the keys it skipped."""
    variables: dict[str, str] = {}
    skipped: list[str] = []
    for source in container.get("envFrom") or []:
        kind, ref = ((CONFIGMAP, source.get("configMapRef")) if source.get("configMapRef")
                     else (SECRET, source.get("secretRef")))
        if not ref:
            continue
        obj = _lookup(kind, ref, context)
        if obj is None:
            continue
        prefix = str(source.get("prefix") or "")
        invalid = []
        for key, value in _values(kind, obj).items():
            if not is_env_var_name(prefix + key):
                invalid.append(prefix + key)
                continue
            variables[prefix + key] = value
        if invalid:
            namespace = (obj.get("metadata") or {}).get("namespace", "")
            skipped.append(f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {kind} "
                           f"{namespace}/{ref.get('name')} were skipped since they are "
                           f"considered invalid environment variable names.")
    return variables, skipped


def key_ref_value(kind: str, ref: Mapping[str, Any], context: PodContext) -> str | None:
    """configMapKeyRef / secretKeyRef: the value, None when it may be left out."""
    obj = _lookup(kind, ref, context)
    if obj is None:
        return None
    key = str(ref.get("key") or "")
    values = _values(kind, obj)
    if key not in values:
        if ref.get("optional"):
            return None
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        title = "ConfigMap" if kind == CONFIGMAP else "Secret"
        raise EnvError(f"couldn't find key {key} in {title} {namespace}/{ref.get('name')}")
    return values[key]


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
    one of the same name, where it stood), then the service links the container does not
    set itself."""
    variables, _ = env_from(container, context)
    links = context.sources.services
    visible = ChainMap(variables, dict(links))  # what $(VAR) sees: the container's own first
    for var in container.get("env") or []:
        name = str(var["name"])
        source = var.get("valueFrom")
        if not source:
            variables[name] = expand(str(var.get("value") or ""), visible)
        elif source.get("fieldRef"):
            variables[name] = field_ref_value(pod, str(source["fieldRef"].get("fieldPath")),
                                              context)
        elif source.get("resourceFieldRef"):
            variables[name] = resource_field_value(pod, container, source["resourceFieldRef"],
                                                   context)
        else:
            kind, ref = ((CONFIGMAP, source["configMapKeyRef"])
                         if source.get("configMapKeyRef") else (SECRET, source.get("secretKeyRef")))
            if not ref:
                continue
            value = key_ref_value(kind, ref, context)
            if value is not None:
                variables[name] = value
    for name, value in links.items():
        variables.setdefault(name, value)
    return variables


def expand_command(words: list[Any], variables: Mapping[str, str]) -> list[str]:
    """ExpandContainerCommandAndArgs for one of command or args."""
    return [expand(str(word), variables) for word in words]
