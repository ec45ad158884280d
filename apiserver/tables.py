"""Server-side printing: the meta.k8s.io Table answers `kubectl get` asks for.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints
whatever columns the server returns, so the columns, their descriptions and every cell
follow kube-apiserver's printers (pkg/printers/internalversion/printers.go) exactly.
As kube-apiserver does, the wide (priority 1) cells are always computed; kubectl hides
them unless `-o wide`.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from common.errors import BadRequest

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("None", "Metadata", "Object")

NONE = "<none>"
UNKNOWN = "<unknown>"
NODE_UNREACHABLE_POD_REASON = "NodeLost"
NODE_ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"

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
POD_IP_DOC = (
    "podIP address allocated to the pod. Routable at least within the cluster. "
    "Empty if not yet allocated."
)
NODE_NAME_DOC = (
    "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, "
    "the scheduler simply schedules this pod onto that node, assuming that it fits resource "
    "requirements."
)
NOMINATED_NODE_NAME_DOC = (
    "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
    "cannot be scheduled right away as preemption victims receive their graceful termination "
    "periods. This field does not guarantee that the pod will be scheduled on this node. "
    "Scheduler may decide to place the pod elsewhere if other nodes become available sooner. "
    "Scheduler may also decide to give the resources on this node to a higher priority pod "
    "that is created after preemption. As a result, this field may be different than "
    "PodSpec.nodeName when the pod is scheduled."
)
READINESS_GATES_DOC = (
    "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready "
    "when all its containers are ready AND all conditions specified in the readiness gates "
    'have status equal to "True" More info: '
    "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
)
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
FIELD_PATH_DOC = (
    "If referring to a piece of an object instead of an entire object, this string should "
    "contain a valid JSON/Go field access statement, such as desiredState.manifest."
    "containers[2]. For example, if the object reference is to a container within a pod, this "
    'would take on a value like: "spec.containers{name}" (where "name" refers to the name of '
    "the container that triggered the event) or if no container name is specified "
    '"spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to '
    "have some well-defined way of referencing a part of an object."
)


def _column(name: str, description: str, *, type_: str = "string", format_: str = "",
            priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": format_, "description": description,
            "priority": priority}


POD_COLUMNS = [
    _column("Name", NAME_DOC, format_="name"),
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column("Restarts", "The number of times the containers in this pod have been restarted "
            "and when the last container in this pod has restarted."),
    _column("Age", CREATION_TIMESTAMP_DOC),
    _column("IP", POD_IP_DOC, priority=1),
    _column("Node", NODE_NAME_DOC, priority=1),
    _column("Nominated Node", NOMINATED_NODE_NAME_DOC, priority=1),
    _column("Readiness Gates", READINESS_GATES_DOC, priority=1),
]

NODE_COLUMNS = [
    _column("Name", NAME_DOC, format_="name"),
    _column("Status", "The status of the node"),
    _column("Roles", "The roles of the node"),
    _column("Age", CREATION_TIMESTAMP_DOC),
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", NODE_ADDRESSES_DOC, priority=1),
    _column("External-IP", NODE_ADDRESSES_DOC, priority=1),
    _column("OS-Image", "OS Image reported by the node from /etc/os-release "
            "(e.g. Debian GNU/Linux 7 (wheezy)).", priority=1),
    _column("Kernel-Version", "Kernel Version reported by the node from 'uname -r' "
            "(e.g. 3.16.0-0.bpo.4-amd64).", priority=1),
    _column("Container-Runtime", "ContainerRuntime Version reported by the node through "
            "runtime remote API (e.g. containerd://1.4.2).", priority=1),
]

EVENT_COLUMNS = [
    _column("Last Seen", "The time at which the most recent occurrence of this event was "
            "recorded."),
    _column("Type", "Type of this event (Normal, Warning), new types could be added in the "
            "future"),
    _column("Reason", "This should be a short, machine understandable string that gives the "
            "reason for the transition into the object's current status."),
    _column("Object", "The object that this event is about."),
    _column("Subobject", FIELD_PATH_DOC, priority=1),
    _column("Source", "The component reporting this event. Should be a short machine "
            "understandable string.", priority=1),
    _column("Message", "A human-readable description of the status of this operation."),
    _column("First Seen", "The time at which the event was first recorded. (Time of server "
            "receipt is in TypeMeta.)", priority=1),
    _column("Count", "The number of times this event has occurred.", priority=1),
    _column("Name", NAME_DOC, format_="name", priority=1),
]

NAMESPACE_COLUMNS = [
    _column("Name", NAME_DOC, format_="name"),
    _column("Status", "The status of the namespace"),
    _column("Age", CREATION_TIMESTAMP_DOC),
]

HOLDER_IDENTITY_DOC = (
    "holderIdentity contains the identity of the holder of a current lease. If Coordinated "
    "Leader Election is used, the holder identity must be equal to the elected "
    "LeaseCandidate.metadata.name field."
)
LEASE_COLUMNS = [
    _column("Name", NAME_DOC, format_="name"),
    _column("Holder", HOLDER_IDENTITY_DOC),
    _column("Age", CREATION_TIMESTAMP_DOC),
]


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


# --- pods ------------------------------------------------------------------------------------

def _condition_true(conditions: list[dict[str, Any]], kind: str) -> bool:
    for condition in conditions:
        if condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False


def _is_restartable_init(container: dict[str, Any] | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _later(current: str | None, candidate: str | None) -> str | None:
    """The later of two timestamps; None (Go's zero time) loses."""
    candidate_time = parse_time(candidate)
    if candidate_time is None:
        return current
    current_time = parse_time(current)
    return candidate if current_time is None or candidate_time > current_time else current


def _last_finished(status: dict[str, Any]) -> str | None:
    terminated = (status.get("lastState") or {}).get("terminated")
    return terminated.get("finishedAt") if terminated else None


def _terminated_reason(terminated: dict[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def pod_status_reason(pod: dict[str, Any]) -> tuple[str, int, int, int, str | None]:
    """printPod's STATUS logic: (reason, ready, total, restarts, last restart time)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    phase = status.get("phase") or ""

    total = len(spec.get("containers") or []) + sum(
        1 for c in init_specs.values() if _is_restartable_init(c))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: str | None = None
    last_sidecar_restart: str | None = None
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in conditions):
        reason = "SchedulingGated"

    init_statuses = status.get("initContainerStatuses") or []
    initializing = False
    for index, container in enumerate(init_statuses):
        state = container.get("state") or {}
        restarts += int(container.get("restartCount") or 0)
        last_restart = _later(last_restart, _last_finished(container))
        sidecar = _is_restartable_init(init_specs.get(container.get("name")))
        if sidecar:
            sidecar_restarts += int(container.get("restartCount") or 0)
            last_sidecar_restart = _later(last_sidecar_restart, _last_finished(container))
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            state = container.get("state") or {}
            restarts += int(container.get("restartCount") or 0)
            last_restart = _later(last_restart, _last_finished(container))
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting and status.get("reason") == NODE_UNREACHABLE_POD_REASON:
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def _readiness_gates(pod: dict[str, Any]) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return NONE
    conditions = (pod.get("status") or {}).get("conditions") or []
    passed = sum(1 for gate in gates
                 if _condition_true(conditions, gate.get("conditionType", "")))
    return f"{passed}/{len(gates)}"


def _pod_ip(status: dict[str, Any]) -> str:
    ips = status.get("podIPs") or []
    ip = (ips[0].get("ip") if ips else None) or status.get("podIP")
    return ip or NONE


def pod_cells(pod: dict[str, Any], now: datetime) -> list[Any]:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    reason, ready, total, restarts, last_restart = pod_status_reason(pod)
    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({format_age(last_restart, now)} ago)"
    return [
        metadata.get("name", ""), f"{ready}/{total}", reason, restarts_cell,
        format_age(metadata.get("creationTimestamp"), now),
        _pod_ip(status), spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE, _readiness_gates(pod),
    ]


# --- nodes -----------------------------------------------------------------------------------

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


# --- events ----------------------------------------------------------------------------------

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


# --- namespaces ------------------------------------------------------------------------------

def namespace_cells(namespace: dict[str, Any], now: datetime) -> list[Any]:
    metadata = namespace.get("metadata") or {}
    return [metadata.get("name", ""), (namespace.get("status") or {}).get("phase", ""),
            format_age(metadata.get("creationTimestamp"), now)]


# --- leases ----------------------------------------------------------------------------------

def lease_cells(lease: dict[str, Any], now: datetime) -> list[Any]:
    """printLease: an unset holder is an empty cell, not <none>."""
    metadata = lease.get("metadata") or {}
    return [metadata.get("name", ""), (lease.get("spec") or {}).get("holderIdentity") or "",
            format_age(metadata.get("creationTimestamp"), now)]


POD_ROW_CONDITIONS = {
    "Succeeded": [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}],
    "Failed": [{"type": "Completed", "status": "True", "reason": "Failed",
                "message": "The pod failed."}],
}


def row_conditions(resource: str, obj: dict[str, Any]) -> list[dict[str, str]]:
    if resource != "pods":
        return []
    return POD_ROW_CONDITIONS.get((obj.get("status") or {}).get("phase", ""), [])


PRINTERS = {
    "pods": (POD_COLUMNS, pod_cells),
    "nodes": (NODE_COLUMNS, node_cells),
    "events": (EVENT_COLUMNS, event_cells),
    "namespaces": (NAMESPACE_COLUMNS, namespace_cells),
    "leases": (LEASE_COLUMNS, lease_cells),
}


# --- the Table -------------------------------------------------------------------------------

def partial_object_metadata(obj: dict[str, Any], table_api_version: str) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": table_api_version,
            "metadata": copy.deepcopy(obj.get("metadata") or {})}


def row_object(obj: dict[str, Any], include_object: str,
               table_api_version: str) -> dict[str, Any] | None:
    if include_object == "Object":
        return obj
    if include_object == "None":
        return None
    return partial_object_metadata(obj, table_api_version)


def to_table(resource: str, objects: list[dict[str, Any]], *, resource_version: str,
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
    if resource not in PRINTERS:
        raise BadRequest(f"no table printer for {resource}")
    columns, cells = PRINTERS[resource]
    now = now or datetime.now(UTC)
    api_version = f"{TABLE_GROUP}/{version}"
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        if conditions := row_conditions(resource, obj):
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
    table["columnDefinitions"] = copy.deepcopy(columns) if include_column_definitions else None
    table["rows"] = rows
    return table
