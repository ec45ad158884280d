"""Nodes: the strategy of pkg/registry/core/node (defaults, validation, field selectors, the
Table and merge keys), as one `Resource`. Nodes register with their status, and keep it."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.selectors import SelectableFields, field_bool, object_meta_fields
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, NONE, UNKNOWN, column, format_age
from apiserver.validation import (
    TAINT_EFFECTS,
    Cause,
    choice,
    duplicate,
    forbidden,
    inclusive_range_error,
    invalid,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    name_is_dns_subdomain,
    validate_object_meta,
    validate_quantity,
)
from common.models import Node

NODE_ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"


# --- defaults (SetDefaults_NodeStatus) ----------------------------------------------------

def default_node(node: dict[str, Any], old: dict[str, Any] | None) -> None:
    # NodeSpec is a struct in kube's types, so every Node it serves has a "spec", if empty.
    if node.get("spec") is None:
        node["spec"] = {}
    status = node.get("status")
    if status and status.get("capacity") is not None and status.get("allocatable") is None:
        status["allocatable"] = dict(status["capacity"])


# --- validation (ValidateNode, ValidateNodeUpdate) ----------------------------------------

def validate_node(node: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(node.get("metadata") or {}, namespaced=False,
                                name_check=name_is_dns_subdomain)
    spec = node.get("spec") or {}
    # kube builds this path from "metadata", so taint errors read metadata.taints[i]
    errs += validate_taints(spec.get("taints") or [], "metadata.taints")
    status = node.get("status") or {}
    return errs + validate_node_resources(status) + validate_node_endpoints(status)


def validate_node_endpoints(status: dict[str, Any]) -> list[Cause]:
    """What the apiserver will dial (pods/log goes to the node's kubelet): IP addresses that
    are IP addresses, names that are DNS names, a port that is a port. kube is laxer here;
    a Node must not be able to make the apiserver fetch an arbitrary URL."""
    errs: list[Cause] = []
    for i, address in enumerate(status.get("addresses") or []):
        kind, value = address.get("type"), address.get("address") or ""
        path = f"status.addresses[{i}].address"
        if kind in ("InternalIP", "ExternalIP"):
            try:
                ipaddress.ip_address(value)
            except ValueError:
                errs.append(invalid(path, value, "must be a valid IP address"))
        elif kind in ("Hostname", "InternalDNS", "ExternalDNS"):
            errs += [invalid(path, value, msg) for msg in is_dns1123_subdomain(value)]
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool)
                             or not 0 <= port <= 65535):
        errs.append(invalid("status.daemonEndpoints.kubeletEndpoint.Port", port,
                            inclusive_range_error(0, 65535)))
    return errs


def validate_node_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    errs = validate_node_resources(new.get("status") or {})
    errs += validate_node_endpoints(new.get("status") or {})
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


# --- field selectors -------------------------------------------------------------------------

def node_fields(node: Mapping[str, Any]) -> dict[str, str]:
    fields = object_meta_fields(node, namespaced=False)
    fields["spec.unschedulable"] = field_bool((node.get("spec") or {}).get("unschedulable"))
    return fields


FIELDS = SelectableFields(labels=frozenset({"metadata.name", "spec.unschedulable"}),
                          get=node_fields)


# --- the Table -------------------------------------------------------------------------------

NODE_ADDRESSES_DOC = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. "
    "More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This "
    "field is declared as mergeable, but the merge key is not sufficiently unique, which can "
    "cause data corruption when it is merged. Callers should instead use a full-replacement "
    "patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that "
    "addresses can change during the lifetime of a Node. However, there are some exceptions "
    "where this may not be possible, such as Pods that inherit a Node's address in its own "
    "status or consumers of the downward API (status.hostIP)."
)
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Status", "The status of the node"),
    column("Roles", "The roles of the node"),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("Version", "Kubelet Version reported by the node."),
    column("Internal-IP", NODE_ADDRESSES_DOC, priority=1),
    column("External-IP", NODE_ADDRESSES_DOC, priority=1),
    column("OS-Image", "OS Image reported by the node from /etc/os-release "
           "(e.g. Debian GNU/Linux 7 (wheezy)).", priority=1),
    column("Kernel-Version", "Kernel Version reported by the node from 'uname -r' "
           "(e.g. 3.16.0-0.bpo.4-amd64).", priority=1),
    column("Container-Runtime", "ContainerRuntime Version reported by the node through "
           "runtime remote API (e.g. containerd://1.4.2).", priority=1),
]


def node_status(node: dict[str, Any]) -> str:
    parts = []
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            parts = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not parts:
        parts = ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def node_roles(labels: dict[str, str]) -> str:
    roles = set()
    for key, value in labels.items():
        if key.startswith(NODE_ROLE_LABEL_PREFIX) and key[len(NODE_ROLE_LABEL_PREFIX):]:
            roles.add(key[len(NODE_ROLE_LABEL_PREFIX):])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(value)
    return ",".join(sorted(roles)) or NONE


def _node_address(status: dict[str, Any], kind: str) -> str:
    for address in status.get("addresses") or []:
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return NONE


def node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    info = status.get("nodeInfo") or {}
    return [
        metadata.get("name", ""), node_status(node), node_roles(metadata.get("labels") or {}),
        format_age(metadata.get("creationTimestamp"), now), info.get("kubeletVersion", ""),
        _node_address(status, "InternalIP"), _node_address(status, "ExternalIP"),
        info.get("osImage") or UNKNOWN, info.get("kernelVersion") or UNKNOWN,
        info.get("containerRuntimeVersion") or UNKNOWN,
    ]


NODES = Resource(
    plural="nodes", singular="node", kind="Node", namespaced=False, model=Node,
    storage_name="minions", subresources=frozenset({"status"}), short_names=("no",),
    descriptions={"Node": "Node is a worker node in Kubernetes. Each node will have a unique "
                          "identifier in the cache (i.e. in etcd)."},
    default=default_node, validate=validate_node, validate_update=validate_node_update,
    validate_status_update=validate_node_update, keeps_status_on_create=True,
    fields=FIELDS, columns=COLUMNS, cells=node_cells,
    merge_keys={"spec.podCIDRs": None, "status.conditions": "type", "status.addresses": "type"},
)
