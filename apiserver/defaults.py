"""The defaults kube-apiserver fills in on create and update.

From pkg/apis/core/v1/defaults.go (SetDefaults_Pod, SetDefaults_PodSpec,
SetDefaults_Container, SetDefaults_NodeStatus, SetDefaults_Namespace), the `+default`
markers of k8s.io/api (ContainerPort.protocol), the pod strategy's PrepareForCreate
(`status.phase: Pending`, `status.qosClass`) and the Priority admission plugin
(`priority: 0`, `preemptionPolicy: PreemptLowerPriority` when no priority class applies).
Core/v1 Events and Nodes get no defaults beyond these.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER_NAME = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# The docker reference grammar (github.com/distribution/reference) that ParseImageName uses.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?")
QOS_COMPUTE_RESOURCES = ("cpu", "memory")


# The priority classes every cluster has (scheduling.SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000,
                           "system-cluster-critical": 2000000000}


def default_object(resource: str, obj: dict[str, Any], *,
                   old: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of obj with Kubernetes' defaults filled in (explicit values are kept).

    On create (`old` is None) this also does what kube-apiserver's create path adds
    (pod `status.phase`/`qosClass`, pod priority, the namespace's `kubernetes`
    finalizer). On update pass the stored object as `old`: only the decode-time
    defaults apply, and a pod keeps its priority and preemptionPolicy, as the Priority
    admission plugin does.
    """
    out = copy.deepcopy(obj)
    if resource == "pods":
        default_pod(out, old)
    elif resource == "nodes":
        default_node(out)
    elif resource == "namespaces":
        default_namespace(out, creating=old is None)
    return out


# --- pods ----------------------------------------------------------------------------------

def default_pod(pod: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = pod.setdefault("spec", {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            default_container(container, host_network=bool(spec.get("hostNetwork")))
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


def default_container(container: dict[str, Any], *, host_network: bool) -> None:
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = default_pull_policy(container.get("image") or "")
    container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
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
    """BestEffort, Burstable or Guaranteed, as qos.ComputePodQOS decides it.

    Requests and limits are summed over containers and init containers, counting only
    cpu and memory above zero. Guaranteed needs every container to set both limits and
    the requests to equal the limits.
    """
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        add_positive(requests, resources.get("requests") or {})
        found = add_positive(limits, resources.get("limits") or {})
        if not set(QOS_COMPUTE_RESOURCES) <= found:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def add_positive(totals: dict[str, Decimal], resources: dict[str, Any]) -> set[str]:
    """Add the positive cpu/memory quantities to totals; return the names that counted."""
    counted = set()
    for name, text in resources.items():
        if name not in QOS_COMPUTE_RESOURCES:
            continue
        try:
            value = parse_quantity(str(text))
        except QuantityError:
            continue  # validation reports it
        if value > 0:
            totals[name] = totals.get(name, Decimal(0)) + value
            counted.add(name)
    return counted


# --- nodes, namespaces ---------------------------------------------------------------------

def default_node(node: dict[str, Any]) -> None:
    status = node.get("status")
    if status and status.get("capacity") is not None and status.get("allocatable") is None:
        status["allocatable"] = dict(status["capacity"])


def default_namespace(namespace: dict[str, Any], *, creating: bool) -> None:
    metadata = namespace.setdefault("metadata", {})
    name = metadata.get("name")
    if name:
        labels = metadata.get("labels") or {}
        metadata["labels"] = {**labels, NAMESPACE_NAME_LABEL: name}
    if creating:  # PrepareForCreate: removable later, so not a decode-time default
        spec = namespace.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]
    namespace.setdefault("status", {}).setdefault("phase", "Active")
