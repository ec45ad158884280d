"""Pod validation, with kube-apiserver's exact wording (pkg/apis/core/validation:
ValidatePod, ValidatePodCreate, ValidatePodUpdate, ValidatePodStatusUpdate, ValidateBinding).

The ObjectMeta, name and quantity rules every kind shares are apiserver/validation.py's.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from apiserver.resources.container_handlers import validate_container_handlers
from apiserver.resources.tokens import MAX_EXPIRATION, MIN_EXPIRATION
from apiserver.validation import (
    TAINT_EFFECTS,
    Cause,
    choice,
    duplicate,
    forbidden,
    go_quote,
    inclusive_range_error,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_extended_resource,
    is_label_value,
    is_native_resource,
    is_qualified_name,
    is_relaxed_env_var_name,
    is_valid_port_name,
    is_valid_port_num,
    name_is_dns_subdomain,
    not_found,
    not_supported,
    required,
    validate_labels,
    validate_object_meta,
    validate_quantity,
)
from common.volume_paths import path_errors

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")  # sets.List: sorted
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List: sorted
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
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
# From the limits of Linux libc's resolver (MaxDNSNameservers and the expanded search limits).
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
# IsDNS1123SubdomainWithUnderscore (RelaxedDNSSearchValidation, on since 1.34): search
# domains such as _sip._tcp.example.com.
DNS1123_SUBDOMAIN_UNDERSCORE_FMT = ("_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
                                    "(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*")
DNS1123_SUBDOMAIN_UNDERSCORE_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                                    "alphanumeric characters, '_', '-' or '.', and must start "
                                    "and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_UNDERSCORE = re.compile(DNS1123_SUBDOMAIN_UNDERSCORE_FMT)
# The Container fields, in the Go struct's order, with whether an ephemeral container may
# set them (allowedEphemeralContainerFields): nothing the workload could come to rely on.
EPHEMERAL_CONTAINER_FIELDS = (
    ("name", True), ("image", True), ("command", True), ("args", True), ("workingDir", True),
    ("ports", False), ("envFrom", True), ("env", True), ("resources", False),
    ("resizePolicy", False), ("restartPolicy", False), ("volumeMounts", True),
    ("volumeDevices", True), ("livenessProbe", False), ("readinessProbe", False),
    ("startupProbe", False), ("lifecycle", False), ("terminationMessagePath", True),
    ("terminationMessagePolicy", True), ("imagePullPolicy", True), ("securityContext", True),
    ("stdin", True), ("stdinOnce", True), ("tty", True),
)
EPHEMERAL_FORBIDDEN = "cannot be set for an Ephemeral Container"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


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
    grace = spec.get("terminationGracePeriodSeconds")
    errs += validate_containers(containers, volumes, f"{path}.containers", grace)
    errs += validate_init_containers(init_containers, containers, volumes,
                                     f"{path}.initContainers", grace)
    errs += validate_ephemeral_containers(spec.get("ephemeralContainers") or [], containers,
                                          init_containers, volumes, f"{path}.ephemeralContainers")
    errs += unique_host_ports(containers, f"{path}.containers")
    errs += choice(spec.get("restartPolicy"), RESTART_POLICIES, f"{path}.restartPolicy")
    errs += choice(spec.get("dnsPolicy"), DNS_POLICIES, f"{path}.dnsPolicy")
    errs += validate_pod_dns_config(spec.get("dnsConfig"), spec.get("dnsPolicy"),
                                    f"{path}.dnsConfig")
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


def is_dns1123_subdomain_with_underscore(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_UNDERSCORE.fullmatch(value):
        errs.append(f"{DNS1123_SUBDOMAIN_UNDERSCORE_MSG} (e.g. 'example.com', regex used for "
                    f"validation is '{DNS1123_SUBDOMAIN_UNDERSCORE_FMT}')")
    return errs


def validate_pod_dns_config(config: dict[str, Any] | None, policy: str | None,
                            path: str) -> list[Cause]:
    """validatePodDNSConfig: `None` needs a dnsConfig with a nameserver; at most 3
    nameservers, all IPs; at most 32 search domains, 2048 characters with the spaces, each
    a subdomain (underscores allowed, a trailing dot too, or just "."); named options."""
    if policy == "None":
        if config is None:
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [required(f"{path}.nameservers",
                             "must provide at least one DNS nameserver when `dnsPolicy` is None")]
    if config is None:
        return []
    errs = []
    nameservers = config.get("nameservers") or []
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        errs.append(invalid(f"{path}.nameservers", nameservers,
                            f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, server in enumerate(nameservers):
        try:
            ipaddress.ip_address(server)
        except ValueError:
            errs.append(invalid(f"{path}.nameservers[{i}]", server,
                                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    searches = config.get("searches") or []
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errs.append(invalid(f"{path}.searches", searches,
                            f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches)) > MAX_DNS_SEARCH_LIST_CHARS:
        errs.append(invalid(f"{path}.searches", searches,
                            f"must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters "
                            f"(including spaces) in the search list"))
    for i, search in enumerate(searches):
        if search != ".":
            domain = search.removesuffix(".")
            errs += [invalid(f"{path}.searches[{i}]", domain, m)
                     for m in is_dns1123_subdomain_with_underscore(domain)]
    for i, option in enumerate(config.get("options") or []):
        if not option.get("name"):
            errs.append(required(f"{path}.options[{i}]", "must not be empty"))
    return errs


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
        errs += validate_volume_source(volume, here)
    return names, errs


MODE_RANGE = "must be a number between 0 and 0777 (octal), both inclusive"


def validate_local_path(value: Any, path: str, *, reserved: bool = True) -> list[Cause]:
    """validateLocalDescendingPath (+ validateLocalNonReservedPath when `reserved`)."""
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return [invalid(path, value, m) for m in path_errors(value, reserved=reserved)]


def validate_mode(value: Any, path: str) -> list[Cause]:
    if value is None:
        return []
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0o777:
        return [invalid(path, value, MODE_RANGE)]
    return []


def validate_items(items: Any, path: str, *, keyed: bool) -> list[Cause]:
    """KeyToPath items (configMap, secret) or DownwardAPIVolumeFile items."""
    errs: list[Cause] = []
    for j, item in enumerate(items or []):
        here = f"{path}[{j}]"
        if not isinstance(item, dict):
            errs.append(invalid(here, item, "must be an object"))
            continue
        if keyed and not item.get("key"):
            errs.append(required(f"{here}.key"))
        if not item.get("path"):
            errs.append(required(f"{here}.path"))
        else:
            errs += validate_local_path(item["path"], f"{here}.path")
        errs += validate_mode(item.get("mode"), f"{here}.mode")
        if not keyed and bool(item.get("fieldRef")) == bool(item.get("resourceFieldRef")):
            errs.append(invalid(here, "", "fieldRef and resourceFieldRef can not be "
                                          "specified simultaneously" if item.get("fieldRef")
                                else "must specify one of: `fieldRef` or `resourceFieldRef`"))
    return errs


def validate_volume_source(volume: dict[str, Any], path: str) -> list[Cause]:
    """The sources' names, item paths and modes, as kube's validateVolumeSource."""
    errs: list[Cause] = []
    for kind, name_key in (("configMap", "name"), ("secret", "secretName")):
        source = volume.get(kind)
        if isinstance(source, dict):
            if not source.get(name_key):
                errs.append(required(f"{path}.{kind}.{name_key}"))
            errs += validate_mode(source.get("defaultMode"), f"{path}.{kind}.defaultMode")
            errs += validate_items(source.get("items"), f"{path}.{kind}.items", keyed=True)
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict):
        if not host_path.get("path"):
            errs.append(required(f"{path}.hostPath.path"))
        errs += choice(host_path.get("type") or "", HOST_PATH_TYPES, f"{path}.hostPath.type")
    downward = volume.get("downwardAPI")
    if isinstance(downward, dict):
        errs += validate_mode(downward.get("defaultMode"), f"{path}.downwardAPI.defaultMode")
        errs += validate_items(downward.get("items"), f"{path}.downwardAPI.items", keyed=False)
    projected = volume.get("projected")
    if isinstance(projected, dict):
        errs += validate_mode(projected.get("defaultMode"), f"{path}.projected.defaultMode")
        for j, source in enumerate(projected.get("sources") or []):
            here = f"{path}.projected.sources[{j}]"
            if not isinstance(source, dict):
                continue
            for kind in ("configMap", "secret"):
                if isinstance(source.get(kind), dict):
                    errs += validate_items(source[kind].get("items"), f"{here}.{kind}.items",
                                           keyed=True)
            if isinstance(source.get("downwardAPI"), dict):
                errs += validate_items(source["downwardAPI"].get("items"),
                                       f"{here}.downwardAPI.items", keyed=False)
            if isinstance(source.get("serviceAccountToken"), dict):
                errs += validate_token_projection(source["serviceAccountToken"],
                                                  f"{here}.serviceAccountToken",
                                                  f"{path}.projected")
    return errs


def validate_token_projection(token: dict[str, Any], path: str, projected: str) -> list[Cause]:
    """validateProjectionSources' serviceAccountToken (whose path errors kube reports at
    the projected volume's `path`, as here)."""
    errs = []
    seconds = token.get("expirationSeconds")
    if isinstance(seconds, int) and seconds < MIN_EXPIRATION:
        errs.append(invalid(f"{path}.expirationSeconds", seconds,
                            "may not specify a duration less than 10 minutes"))
    if isinstance(seconds, int) and seconds > MAX_EXPIRATION:
        errs.append(invalid(f"{path}.expirationSeconds", seconds,
                            "may not specify a duration larger than 2^32 seconds"))
    if not token.get("path"):
        errs.append(required(f"{projected}.path"))
    else:
        errs += validate_local_path(token["path"], f"{projected}.path")
    return errs


HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                   "CharDevice", "BlockDevice")


def validate_containers(containers: list[dict[str, Any]], volumes: set[str],
                        path: str, grace_period: int | None = None) -> list[Cause]:
    if not containers:
        return [required(path)]
    errs = []
    names: set[str] = set()
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        errs += validate_container(container, volumes, here)
        errs += validate_container_handlers(container, here, grace_period=grace_period,
                                            init=False)
        if container.get("restartPolicy") is not None:
            errs.append(forbidden(f"{here}.restartPolicy",
                                  "may not be set for non-init containers"))
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        else:
            names.add(name)
    return errs


def validate_init_containers(containers: list[dict[str, Any]], others: list[dict[str, Any]],
                             volumes: set[str], path: str,
                             grace_period: int | None = None) -> list[Cause]:
    errs = []
    names = {c.get("name") or "" for c in others}
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        errs += validate_container(container, volumes, here)
        errs += validate_container_handlers(container, here, grace_period=grace_period,
                                            init=True)
        policy = container.get("restartPolicy")
        if policy is not None and policy != "Always":  # a sidecar, or a regular one
            errs.append(not_supported(f"{here}.restartPolicy", policy, ("Always",)))
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        elif name:
            names.add(name)
    return errs


def validate_ephemeral_containers(containers: list[dict[str, Any]],
                                  regular: list[dict[str, Any]], init: list[dict[str, Any]],
                                  volumes: set[str], path: str) -> list[Cause]:
    """validateEphemeralContainers: names unique across every kind of container, a target
    that is a regular or init container, and only the allowed fields."""
    others = {c.get("name") or "" for c in regular + init}
    names = set(others)
    errs = []
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        errs += validate_container(container, volumes, here)
        name = container.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{here}.name", name))
        else:
            names.add(name)
        target = container.get("targetContainerName") or ""
        if target and target not in others:
            errs.append(not_found(f"{here}.targetContainerName", target))
        errs += [forbidden(f"{here}.{key}", EPHEMERAL_FORBIDDEN)
                 for key, allowed in EPHEMERAL_CONTAINER_FIELDS
                 if not allowed and comparable(container.get(key)) not in (None, "", {}, [])]
        for j, mount in enumerate(container.get("volumeMounts") or []):
            for key in ("subPath", "subPathExpr"):
                if mount.get(key):
                    errs.append(forbidden(f"{here}.volumeMounts[{j}].{key}", EPHEMERAL_FORBIDDEN))
    return errs


def validate_ephemeral_containers_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidatePodEphemeralContainersUpdate: the new pod is valid, and the ephemeral
    containers it had are all still there, unchanged (they are append-only)."""
    errs = validate_pod(new)
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [forbidden("", "static pods do not support ephemeral containers")]
    path = "spec.ephemeralContainers"
    added = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers") or []}
    for before in (old.get("spec") or {}).get("ephemeralContainers") or []:
        name = before.get("name") or ""
        after = added.get(name)
        if after is None:
            errs.append(forbidden(path, f"existing ephemeral containers {go_quote(name)} may "
                                        "not be removed\n"))
        elif comparable(after) != comparable(before):
            errs.append(forbidden(path, f"existing ephemeral containers {go_quote(name)} may "
                                        "not be changed\n"
                                        + struct_diff("core.EphemeralContainer", before, after)))
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
        if mount.get("subPath"):
            errs += validate_local_path(mount["subPath"], f"{here}.subPath", reserved=False)
        if mount.get("subPathExpr"):
            if mount.get("subPath"):
                errs.append(invalid(f"{here}.subPathExpr", mount["subPathExpr"],
                                    "subPathExpr and subPath are mutually exclusive"))
            errs += validate_local_path(mount["subPathExpr"], f"{here}.subPathExpr",
                                        reserved=False)
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


def validate_container_resource_name(name: str, path: str) -> list[Cause]:
    errs = [invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


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
                              + struct_diff("core.PodSpec", old_spec, munged)))
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


def struct_diff(type_name: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short cmp.Diff-like listing of what differs between two structs (`core.PodSpec`)."""
    lines = [f"  {type_name}{{"]
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
    # The kubelet never restarts an ephemeral container: as if its policy were Never.
    errs += terminated_stays_terminated(status.get("ephemeralContainerStatuses") or [],
                                        old_status.get("ephemeralContainerStatuses") or [],
                                        "status.ephemeralContainerStatuses", "Never")
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


def validate_binding(binding: dict[str, Any]) -> list[Cause]:
    target = binding.get("target") or {}
    errs = []
    if target.get("kind") and target["kind"] != "Node":
        errs.append(not_supported("target.kind", target["kind"], ("Node", "<empty>")))
    if not target.get("name"):
        errs.append(required("target.name"))
    else:  # kube stops here; a pod bound to a bad name could then never be updated
        errs += [invalid("target.name", target["name"], msg)
                 for msg in is_dns1123_subdomain(target["name"])]
    return errs
