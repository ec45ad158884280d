"""Pods: the strategy of pkg/registry/core/pod (defaults, validation, graceful deletion,
binding, field selectors, the Table and merge keys), as one `Resource`.

Defaults follow pkg/apis/core/v1/defaults.go (SetDefaults_Pod, SetDefaults_PodSpec,
SetDefaults_Container), the `+default` markers of k8s.io/api (ContainerPort.protocol),
the pod strategy's PrepareForCreate (`status.phase: Pending`, `status.qosClass`) and the
Priority admission plugin (`priority: 0`, `preemptionPolicy: PreemptLowerPriority` when no
priority class applies). The validation rules are pod_validation.py's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.objects import mark_for_deletion
from apiserver.resources.base import Mutation, Resource, SubresourceUpdate
from apiserver.resources.container_handlers import default_handlers
from apiserver.resources.pod_admission import default_toleration_seconds, unimplemented_causes
from apiserver.resources.pod_serviceaccount import (
    admit_service_account,
    is_mirror_pod,
    service_account_name,
)
from apiserver.resources.pod_validation import (
    validate_binding,
    validate_ephemeral_containers_update,
    validate_pod,
    validate_pod_create_only,
    validate_pod_status_update,
    validate_pod_update,
)
from apiserver.resources.priorityclasses import admit_pod
from apiserver.resources.tokens import DEFAULT_EXPIRATION
from apiserver.selectors import SelectableFields, field_bool, field_text, object_meta_fields
from apiserver.tables import (
    CREATION_TIMESTAMP_DOC,
    NAME_DOC,
    NONE,
    column,
    format_age,
    parse_time,
)
from apiserver.validation import Cause
from common import errors, timeline
from common.models import Pod
from common.qos import qos_class
from common.timestamps import micro_time, rfc3339

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER_NAME = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"

# The docker reference grammar (github.com/distribution/reference) that ParseImageName uses.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?")


# The priority classes every cluster has (scheduling.SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000,
                           "system-cluster-critical": 2000000000}


# --- defaults ------------------------------------------------------------------------------

def admit_create(pod: dict[str, Any]) -> None:
    """The create's mutating admission, after its managedFields were recorded (what it
    sets belongs to no manager): DefaultTolerationSeconds, and the instant the create
    was accepted, to the microsecond (creationTimestamp has whole seconds), where
    `kubectl timeline` starts the pod's diagram."""
    default_toleration_seconds(pod)
    default_service_account(pod)
    metadata = pod.setdefault("metadata", {})
    if timeline.RECORDING:
        metadata["annotations"] = {**(metadata.get("annotations") or {}),
                                   timeline.CREATED: micro_time()}


def default_service_account(pod: dict[str, Any]) -> None:
    """The ServiceAccount admission plugin's default: a pod runs as `default` (the
    deprecated `serviceAccount` field names it too, as v1 objects show it); mirror pods
    are left alone."""
    if is_mirror_pod(pod):
        return
    spec = pod.setdefault("spec", {})
    spec["serviceAccountName"] = spec["serviceAccount"] = service_account_name(pod)


def default_pod(pod: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = pod.setdefault("spec", {})
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            default_container(container, host_network=bool(spec.get("hostNetwork")))
    default_volumes(spec.get("volumes") or [])
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER_NAME)
    spec.setdefault("enableServiceLinks", True)
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("priority", "preemptionPolicy"):
            if key not in spec and key in old_spec:
                spec[key] = old_spec[key]
        return
    if "priority" not in spec:
        class_name = spec.get("priorityClassName")
        if not class_name:
            spec["priority"] = 0
        elif class_name in SYSTEM_PRIORITY_CLASSES:
            spec["priority"] = SYSTEM_PRIORITY_CLASSES[class_name]
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", pod_qos_class(spec))


def default_volumes(volumes: list[dict[str, Any]]) -> None:
    """SetDefaults_ServiceAccountTokenProjection: a projected token lives an hour."""
    for volume in volumes:
        projected = volume.get("projected") if isinstance(volume, dict) else None
        sources = projected.get("sources") if isinstance(projected, dict) else None
        for source in sources if isinstance(sources, list) else []:
            token = source.get("serviceAccountToken") if isinstance(source, dict) else None
            if isinstance(token, dict) and token.get("expirationSeconds") is None:
                token["expirationSeconds"] = DEFAULT_EXPIRATION


def default_container(container: dict[str, Any], *, host_network: bool) -> None:
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = default_pull_policy(container.get("image") or "")
    container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
    default_handlers(container)
    resources = container.setdefault("resources", {})
    limits = resources.get("limits")
    if limits:  # requests default to limits (SetDefaults_Pod)
        resources["requests"] = {**limits, **(resources.get("requests") or {})}
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if host_network and not port.get("hostPort") and port.get("containerPort"):
            port["hostPort"] = port["containerPort"]


def default_pull_policy(image: str) -> str:
    """Always for `:latest` or no tag at all (and no digest), else IfNotPresent."""
    return "Always" if image_tag(image) == "latest" else "IfNotPresent"


def image_tag(image: str) -> str:
    """The tag parsers.ParseImageName finds: "latest" when there is neither tag nor digest.

    The tag follows the last ':' of the last path component, so a registry port
    (`127.0.0.1:5999/missing`) is not a tag; an image with only a digest has no tag; an
    image that is not a valid reference (`NGINX`, "") has none either.
    """
    match = _REFERENCE.fullmatch(image)
    if match is None or len(match["name"]) > 255:
        return ""
    if not match["tag"] and not match["digest"]:
        return "latest"
    return match["tag"] or ""


def pod_qos_class(spec: dict[str, Any]) -> str:
    """status.qosClass's default (common.qos, shared with the kubelet)."""
    return qos_class(spec)


# --- validation ----------------------------------------------------------------------------

def validate_create(pod: dict[str, Any]) -> list[Cause]:
    causes = validate_pod(pod) + validate_pod_create_only(pod.get("spec") or {})
    return causes or unimplemented_causes(pod)


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_pod(new) + validate_pod_update(new, old)


# --- pods/ephemeralcontainers ----------------------------------------------------------------

def prepare_ephemeral_containers_update(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """dropNonEphemeralContainerUpdates: the stored pod with the ephemeral containers sent;
    anything else in the body is ignored (metadata too, but a uid must still match)."""
    spec = {k: v for k, v in (old.get("spec") or {}).items() if k != "ephemeralContainers"}
    sent = (new.get("spec") or {}).get("ephemeralContainers")
    if sent:
        spec["ephemeralContainers"] = sent
    meta = dict(old.get("metadata") or {})
    sent_uid = (new.get("metadata") or {}).get("uid")
    if sent_uid:
        meta["uid"] = sent_uid
    if spec != (old.get("spec") or {}) and "generation" in meta:
        meta["generation"] = int(meta["generation"]) + 1  # updatePodGeneration
    return {**old, "metadata": meta, "spec": spec}


def validate_ephemeral_containers(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidatePodEphemeralContainersUpdate, then what the kubelet must be able to run as
    asked (PodSecurity admission sees this subresource too, after validation)."""
    return validate_ephemeral_containers_update(new, old) or unimplemented_causes(new)


EPHEMERAL_CONTAINERS = SubresourceUpdate(prepare=prepare_ephemeral_containers_update,
                                         validate=validate_ephemeral_containers)


def warnings(pod: dict[str, Any]) -> list[str]:
    """The `Warning:` texts kube-apiserver returns for an accepted pod."""
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        return ["spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid "
                "and will be treated as 1"]
    return []


# --- deletion --------------------------------------------------------------------------------

def pod_delete_grace(pod: dict[str, Any], requested: int | None) -> int:
    """kube's CheckGracefulDelete for pods: how long the kubelet gets to stop it."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName"):
        return 0  # never ran anywhere: nothing to stop
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(0, requested)
    grace = spec.get("terminationGracePeriodSeconds")
    return 30 if grace is None else max(0, int(grace))


def prepare_for_delete(pod: dict[str, Any], requested_grace: int | None) -> dict[str, Any] | None:
    """Finalizers wait; a pod that may still run gets its grace period to stop."""
    if (pod.get("metadata") or {}).get("finalizers"):
        return mark_for_deletion(pod, 0) or pod
    grace = pod_delete_grace(pod, requested_grace)
    if grace > 0:
        return mark_for_deletion(pod, grace) or pod
    return None


# --- binding ---------------------------------------------------------------------------------

def bind(name: str, binding: dict[str, Any]) -> Mutation:
    """BindingREST: check the Binding, then the change it makes to the pod."""
    causes = validate_binding(binding)
    if causes:
        raise errors.invalid("Binding", name, causes)
    node_name = binding["target"]["name"]

    def assign(pod: dict[str, Any]) -> dict[str, Any]:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name,
                                  f"pod {name} is being deleted, cannot be assigned to a host")
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise errors.conflict("pods/binding", name,
                                  f'pod {name} is already assigned to node "{assigned}"')
        return bind_pod(pod, node_name)

    return assign


def bind_pod(pod: dict[str, Any], node_name: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The pod after a Binding: `spec.nodeName` set and PodScheduled=True."""
    out = dict(pod)
    out["spec"] = {**(pod.get("spec") or {}), "nodeName": node_name}
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                       "lastTransitionTime": rfc3339(now)})
    status["conditions"] = conditions
    status.pop("nominatedNodeName", None)  # kube clears it on binding (KEP-5278)
    out["status"] = status
    return out


# --- field selectors -------------------------------------------------------------------------

def pod_fields(pod: Mapping[str, Any]) -> dict[str, str]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    pod_ip = field_text(status.get("podIP"))
    if not pod_ip and status.get("podIPs"):
        pod_ip = field_text((status["podIPs"][0] or {}).get("ip"))
    fields = object_meta_fields(pod, namespaced=True)
    fields.update({
        "spec.nodeName": field_text(spec.get("nodeName")),
        "spec.restartPolicy": field_text(spec.get("restartPolicy")),
        "spec.schedulerName": field_text(spec.get("schedulerName")),
        "spec.serviceAccountName": field_text(spec.get("serviceAccountName")),
        "spec.hostNetwork": field_bool(spec.get("hostNetwork")),
        "status.phase": field_text(status.get("phase")),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": field_text(status.get("nominatedNodeName")),
    })
    return fields


FIELDS = SelectableFields(
    labels=frozenset({
        "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
        "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
        "status.podIP",
        # Accepted by kube's conversion but absent from PodToSelectableFields: selects as "".
        "status.podIPs",
        "status.nominatedNodeName",
    }),
    get=pod_fields,
    aliases={"spec.host": "spec.nodeName"},  # an old name kube still accepts and rewrites
)


# --- the Table -------------------------------------------------------------------------------

NODE_UNREACHABLE_POD_REASON = "NodeLost"
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

COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "The aggregate status of the containers in this pod."),
    column("Restarts", "The number of times the containers in this pod have been restarted "
           "and when the last container in this pod has restarted."),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("IP", POD_IP_DOC, priority=1),
    column("Node", NODE_NAME_DOC, priority=1),
    column("Nominated Node", NOMINATED_NODE_NAME_DOC, priority=1),
    column("Readiness Gates", READINESS_GATES_DOC, priority=1),
]


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


ROW_CONDITIONS = {
    "Succeeded": [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}],
    "Failed": [{"type": "Completed", "status": "True", "reason": "Failed",
                "message": "The pod failed."}],
}


def row_conditions(pod: dict[str, Any]) -> list[dict[str, str]]:
    return ROW_CONDITIONS.get((pod.get("status") or {}).get("phase", ""), [])


# --- strategic merge patch -------------------------------------------------------------------

# core/v1's patch strategies for pods (see base.Resource.merge_keys).
_CONTAINER_LISTS = ("spec.containers", "spec.initContainers", "spec.ephemeralContainers")
_CONTAINER_MERGE_KEYS = {
    "ports": "containerPort", "env": "name", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
MERGE_KEYS: dict[str, str | None] = {
    **{f"{containers}.{name}": key
       for containers in _CONTAINER_LISTS for name, key in _CONTAINER_MERGE_KEYS.items()},
    **{containers: "name" for containers in _CONTAINER_LISTS},
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.resourceClaimStatuses": "name",
}


PODS = Resource(
    plural="pods", singular="pod", kind="Pod", namespaced=True, model=Pod, storage_name="pods",
    subresources=frozenset({"status", "binding", "log", "eviction", "ephemeralcontainers",
                            "exec", "attach", "portforward"}),
    subresource_updates={"ephemeralcontainers": EPHEMERAL_CONTAINERS}, short_names=("po",),
    categories=("all",),
    descriptions={"Pod": "Pod is a collection of containers that can run on a host. This "
                         "resource is created by clients and scheduled onto hosts."},
    default=default_pod, validate=validate_create, validate_update=validate_update,
    validate_status_update=validate_pod_status_update, warnings=warnings,
    prepare_for_delete=prepare_for_delete, returns_deleted_object=True, bind=bind,
    fields=FIELDS, columns=COLUMNS, cells=pod_cells, row_conditions=row_conditions,
    merge_keys=MERGE_KEYS,
    admission_defaults=(("spec", "priority"), ("spec", "preemptionPolicy"),
                        ("spec", "priorityClassName")),
    admit=admit_create, admit_lookup=admit_pod, mutating_admission=admit_service_account,
)

__all__ = ["PODS", "validate_binding"]
