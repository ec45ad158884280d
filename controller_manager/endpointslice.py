"""The EndpointSlice controller (pkg/controller/endpointslice and the reconciler of
staging/src/k8s.io/endpointslice): for every Service with a selector, EndpointSlices
(`discovery.k8s.io/v1`) listing the pods the selector matches, so that kube-proxy and the
cluster DNS know where a Service's traffic goes.

One sync of a Service (`sync`): the pods its selector matches in its namespace and the
slices this controller manages for it (label `kubernetes.io/service-name`, and
`endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`); `reconcile`,
pure, turns them into the slices to create, update and delete, as kube's Reconciler:

- an endpoint per pod that has an IP and is not terminal: its addresses (the pod's IPs of
  the slice's address type), `conditions` (`ready`: the pod is Ready and not terminating,
  or the Service publishes not-ready addresses; `serving`: Ready; `terminating`: a
  deletionTimestamp), `nodeName`, `zone` (the node's `topology.kubernetes.io/zone`),
  `hostname` (a pod whose `subdomain` is the Service), `targetRef`;
- pods grouped by their resolved ports (a named `targetPort` is looked up in each pod's
  container ports, so pods that name it differently, or lack it, get slices of their own);
- at most `--max-endpoints-per-slice` (100) endpoints a slice; changes touch as few
  slices as they can (an endpoint stays in its slice; a slice that changes is filled up
  before a new one is made); nothing is written when nothing changed; a Service without
  endpoints keeps one empty placeholder slice.

Every slice a sync writes carries `endpoints.kubernetes.io/last-change-trigger-time`: when
the change that caused the write happened (the earliest pod Ready transition, or Service
creation, new since the last sync, as kube's TriggerTimeTracker computes it), which
kube-proxy turns into `kubeproxy_network_programming_duration_seconds`.

The `SliceTracker` remembers the generation of every slice this controller wrote, so a
sync never acts on an informer cache that has not caught up with its own writes (which
would make it write duplicate slices), and the slice events that are only the echo of its
own writes queue nothing.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from common.backoff import ItemBackoff
from common.client import ApiClient
from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import (
    BY_NAMESPACE,
    SharedInformer,
    SharedInformerFactory,
    indexed_by_namespace,
    with_index,
)
from common.workqueue import WorkQueue
from controller_manager.controller import QueueController, key_of, uid_of
from controller_manager.pods import (
    is_ready,
    labels_of,
    parse_time,
    ready_condition,
    selector_matches,
)

log = logging.getLogger("controller_manager.endpointslice")

NAME = "endpointslice-controller"
EVENT_COMPONENT = "endpoint-slice-controller"  # the recorder's source in kube
MANAGED_BY = "endpointslice-controller.k8s.io"  # the value of LABEL_MANAGED_BY
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"
LABEL_ZONE = "topology.kubernetes.io/zone"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
RESERVED_LABELS = frozenset({LABEL_SERVICE_NAME, LABEL_MANAGED_BY, LABEL_HEADLESS})
MAX_ENDPOINTS_PER_SLICE = 100  # kube-controller-manager's --max-endpoints-per-slice
# A slice change queues its Service after this long (endpointSliceChangeMinSyncDelay), so a
# burst of slice events costs one sync.
SLICE_CHANGE_MIN_SYNC_DELAY = 1.0
# A failed sync is retried after 1 s, doubling up to 1000 s (defaultSyncBackOff and
# maxSyncBackOff: slower than client-go's 5 ms, so a failing Service does not flood the
# apiserver with slice writes).
SYNC_BACKOFF_SECONDS, MAX_SYNC_BACKOFF_SECONDS = 1.0, 1000.0
API_VERSION = "discovery.k8s.io/v1"
IPV4, IPV6 = "IPv4", "IPv6"
BY_SERVICE = "service"  # the slices' index: "<namespace>/<service>" for the managed ones
Object = dict[str, Any]


# -- what a Service selects ------------------------------------------------------------------


def service_selector(service: Mapping[str, Any]) -> dict[str, str] | None:
    """A Service's selector (a plain map, all pairs must match); None when it has none:
    such a Service gets its EndpointSlices from someone else, and an ExternalName one
    has no endpoints at all."""
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return None
    selector = spec.get("selector")
    return dict(selector) if selector else None


def selects(selector: Mapping[str, str] | None, pod: Mapping[str, Any]) -> bool:
    return selector is not None and selector_matches({"matchLabels": selector},
                                                     labels_of(pod))


def pod_ips(pod: Mapping[str, Any]) -> list[str]:
    status = pod.get("status") or {}
    ips = [str(entry.get("ip")) for entry in status.get("podIPs") or []
           if isinstance(entry, Mapping) and entry.get("ip")]
    if not ips and status.get("podIP"):
        ips = [str(status["podIP"])]
    return ips


def should_pod_be_in_endpoints(pod: Mapping[str, Any]) -> bool:
    """ShouldPodBeInEndpoints (terminating pods included): not Succeeded or Failed, and
    with an IP."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and bool(pod_ips(pod))


def address_family(ip: str) -> str | None:
    try:
        return IPV6 if ipaddress.ip_address(ip).version == 6 else IPV4
    except ValueError:
        return None


def is_headless(service: Mapping[str, Any]) -> bool:
    """Not isServiceIPSet: no cluster IP, or `None`."""
    cluster_ip = (service.get("spec") or {}).get("clusterIP")
    return not cluster_ip or cluster_ip == "None"


def address_types(service: Mapping[str, Any]) -> list[str]:
    """getAddressTypesForService: the Service's ipFamilies; without them the family of its
    cluster IP; a headless Service without them gets both."""
    spec = service.get("spec") or {}
    families = [f for f in (IPV4, IPV6) if f in (spec.get("ipFamilies") or [])]
    if families:
        return families
    family = None if is_headless(service) else address_family(str(spec.get("clusterIP")))
    return [family] if family else [IPV4, IPV6]


# -- ports ---------------------------------------------------------------------------------


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """findPort: a numeric targetPort as is; a named one looked up (by name and protocol)
    in the pod's containers' ports and its sidecars' (restartPolicy Always init
    containers); None when the pod has no such port."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if not isinstance(target, str) or not target:
        return None
    protocol = service_port.get("protocol") or "TCP"
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []),
                  *(c for c in spec.get("initContainers") or []
                    if c.get("restartPolicy") == "Always")]
    for container in containers:
        for port in container.get("ports") or []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[Object]:
    """getEndpointPorts: one EndpointPort per Service port this pod resolves, in the
    Service's order (a headless Service may have none)."""
    ports: list[Object] = []
    for service_port in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, service_port)
        if number is None:
            continue
        port: Object = {"name": service_port.get("name") or "", "port": number,
                        "protocol": service_port.get("protocol") or "TCP"}
        if service_port.get("appProtocol"):
            port["appProtocol"] = service_port["appProtocol"]
        ports.append(port)
    return ports


PortKey = tuple[tuple[str, int, str, str], ...]


def port_key(ports: Sequence[Mapping[str, Any]] | None) -> PortKey:
    """What groups endpoints into slices (NewPortMapKey): the set of ports, in any order."""
    return tuple(sorted((str(p.get("name") or ""), int(p.get("port") or 0),
                         str(p.get("protocol") or "TCP"), str(p.get("appProtocol") or ""))
                        for p in ports or []))


# -- endpoints -----------------------------------------------------------------------------


def pod_to_endpoint(pod: Mapping[str, Any], node: Mapping[str, Any] | None,
                    service: Mapping[str, Any], address_type: str) -> Object:
    """podToEndpoint. `ready` is never true for a terminating pod, unless the Service
    publishes not-ready addresses."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    serving = is_ready(pod)
    terminating = bool(meta.get("deletionTimestamp"))
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    endpoint: Object = {
        "addresses": [ip for ip in pod_ips(pod) if address_family(ip) == address_type],
        "conditions": {"ready": publish or (serving and not terminating),
                       "serving": serving, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": meta.get("namespace"),
                      "name": meta.get("name"), "uid": meta.get("uid")},
    }
    if spec.get("nodeName"):
        endpoint["nodeName"] = spec["nodeName"]
    zone = labels_of(node).get(LABEL_ZONE) if node is not None else None
    if zone:
        endpoint["zone"] = zone
    service_meta = service.get("metadata") or {}
    if (spec.get("hostname") and spec.get("subdomain") == service_meta.get("name")
            and meta.get("namespace") == service_meta.get("namespace")):
        endpoint["hostname"] = spec["hostname"]
    return endpoint


EndpointKey = tuple[tuple[str, ...], str, str, str]


def endpoint_key(endpoint: Mapping[str, Any]) -> EndpointKey:
    """An endpoint's identity (hashEndpoint): its addresses, hostname and pod. What else
    changes (conditions, node, zone) is an update in place."""
    ref = endpoint.get("targetRef") or {}
    return (tuple(sorted(endpoint.get("addresses") or [])), str(endpoint.get("hostname") or ""),
            str(ref.get("namespace") or ""), str(ref.get("name") or ""))


def endpoint_attributes(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """What EndpointsEqualBeyondHash compares: node, zone, the three conditions, and the
    targetRef but for its resourceVersion."""
    conditions = endpoint.get("conditions") or {}
    ref = {k: v for k, v in (endpoint.get("targetRef") or {}).items()
           if k != "resourceVersion" and v}
    return (endpoint.get("nodeName"), endpoint.get("zone"), conditions.get("ready"),
            conditions.get("serving"), conditions.get("terminating"), sorted(ref.items()))


def pod_sort_key(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


# -- slices --------------------------------------------------------------------------------


def slice_labels(service: Mapping[str, Any]) -> dict[str, str]:
    """setEndpointSliceLabels: the Service's labels (but the reserved ones), the headless
    mark, the service name and managed-by."""
    labels = {k: v for k, v in labels_of(service).items() if k not in RESERVED_LABELS}
    if is_headless(service):
        labels[LABEL_HEADLESS] = ""
    labels[LABEL_SERVICE_NAME] = str((service.get("metadata") or {}).get("name"))
    labels[LABEL_MANAGED_BY] = MANAGED_BY
    return labels


def owner_reference(service: Mapping[str, Any]) -> Object:
    meta = service.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Service", "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


def owned_by(endpoint_slice: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    uid = uid_of(service)
    return any(ref.get("uid") == uid and ref.get("kind") == "Service"
               and ref.get("apiVersion") == "v1"
               for ref in (endpoint_slice.get("metadata") or {}).get("ownerReferences") or [])


def new_slice(service: Mapping[str, Any], ports: Sequence[Object], address_type: str,
              ) -> Object:
    """newEndpointSlice: named `<service>-<random>` by the apiserver, controlled by the
    Service."""
    meta = service.get("metadata") or {}
    return {"apiVersion": API_VERSION, "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta.get('name')}-",
                         "namespace": meta.get("namespace"), "labels": slice_labels(service),
                         "ownerReferences": [owner_reference(service)]},
            "addressType": address_type, "ports": [dict(p) for p in ports], "endpoints": []}


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def endpoints_of(endpoint_slice: Mapping[str, Any]) -> list[Object]:
    return list(endpoint_slice.get("endpoints") or [])


def is_placeholder_of(endpoint_slice: Mapping[str, Any], placeholder: Mapping[str, Any],
                      ) -> bool:
    """placeholderSliceCompare: the same namespace, labels, owner, address type, and no
    ports or endpoints."""
    meta, want = endpoint_slice.get("metadata") or {}, placeholder["metadata"]
    return (meta.get("namespace") == want["namespace"]
            and (meta.get("labels") or {}) == want["labels"]
            and [dict(r) for r in meta.get("ownerReferences") or []] == want["ownerReferences"]
            and endpoint_slice.get("addressType") == placeholder["addressType"]
            and not endpoint_slice.get("ports") and not endpoint_slice.get("endpoints"))


@dataclass
class Plan:
    """The writes one sync makes: full slices to create (generateName) and to update
    (with the resourceVersion they replace), slices to delete; and the pods it had to
    leave out (their node is unknown), which make the sync fail after its writes, to be
    retried."""

    create: list[Object] = field(default_factory=list)
    update: list[Object] = field(default_factory=list)
    delete: list[Object] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def slice_to_fill(candidates: Sequence[Object], count: int, max_endpoints: int,
                  ) -> Object | None:
    """getSliceToFill: the slice that `count` more endpoints bring closest to full, if
    any has room for them all."""
    best, best_room = None, max_endpoints
    for candidate in candidates:
        room = max_endpoints - (count + len(endpoints_of(candidate)))
        if 0 <= room < best_room:
            best, best_room = candidate, room
            if room == 0:
                break
    return best


def reconcile_port_mapping(service: Mapping[str, Any], existing: Sequence[Object],
                           desired: dict[EndpointKey, Object], ports: Sequence[Object],
                           address_type: str, max_endpoints: int) -> Plan:
    """reconcileByPortMapping, for the slices of one set of ports: 1. keep the endpoints
    still desired where they are (updated in place when changed), dropping the others;
    2. fill the slices that change anyway with new endpoints, fullest first; 3. put what is
    left in the one unchanged slice it fits best, else in new slices."""
    desired = dict(desired)
    labels = slice_labels(service)
    by_name: dict[str, Object] = {}
    unchanged: dict[str, Object] = {}
    to_update: dict[str, Object] = {}
    to_delete: list[Object] = []
    for current in existing:
        name = name_of(current)
        kept: list[Object] = []
        changed = False
        for endpoint in endpoints_of(current):
            wanted = desired.pop(endpoint_key(endpoint), None)
            if wanted is not None:
                kept.append(wanted)
                changed = changed or endpoint_attributes(wanted) != endpoint_attributes(
                    endpoint)
        labels_changed = ((current.get("metadata") or {}).get("labels") or {}) != labels
        if changed or len(kept) != len(endpoints_of(current)):
            if not kept:
                to_delete.append(current)
                continue
            to_update[name] = with_contents(current, kept, labels)
        elif labels_changed:
            to_update[name] = with_contents(current, kept, labels)
        else:
            unchanged[name] = current
        by_name[name] = current
    left = list(desired.values())
    if left and to_update:
        for updated in sorted(to_update.values(), key=lambda s: -len(endpoints_of(s))):
            room = max_endpoints - len(updated["endpoints"])
            if room > 0:
                updated["endpoints"].extend(left[:room])
                left = left[room:]
    create: list[Object] = []
    while left:
        fill = None
        if len(left) < max_endpoints and unchanged:
            fill = slice_to_fill(list(unchanged.values()), len(left), max_endpoints)
        if fill is None:
            target = new_slice(service, ports, address_type)
            create.append(target)
        else:
            target = with_contents(fill, endpoints_of(fill), labels)
            del unchanged[name_of(fill)]
            to_update[name_of(fill)] = target
        room = max_endpoints - len(target["endpoints"])
        target["endpoints"].extend(left[:room])
        left = left[room:]
    return Plan(create=create, update=list(to_update.values()), delete=to_delete)


def with_contents(endpoint_slice: Mapping[str, Any], endpoints: Sequence[Object],
                  labels: Mapping[str, str]) -> Object:
    updated = copy.deepcopy(dict(endpoint_slice))
    updated["metadata"]["labels"] = dict(labels)
    updated["endpoints"] = [copy.deepcopy(e) for e in endpoints]
    return updated


def reconcile_address_type(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                           existing: Sequence[Object],
                           node_of: Callable[[str], Mapping[str, Any] | None],
                           address_type: str, max_endpoints: int) -> Plan:
    """reconcileByAddressType: the slices of one address type."""
    plan = Plan()
    existing_by_ports: dict[PortKey, list[Object]] = {}
    for current in existing:
        if owned_by(current, service):
            existing_by_ports.setdefault(port_key(current.get("ports")), []).append(current)
        else:
            plan.delete.append(current)  # an older Service's of the same name
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    desired: dict[PortKey, dict[EndpointKey, Object]] = {}
    desired_ports: dict[PortKey, list[Object]] = {}
    for pod in sorted(pods, key=pod_sort_key):
        if not should_pod_be_in_endpoints(pod):
            continue
        ports = endpoint_ports(service, pod)
        key = port_key(ports)
        endpoints = desired.setdefault(key, {})
        desired_ports.setdefault(key, ports)
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node = node_of(node_name) if node_name else None
        if node is None and not publish:
            meta = service.get("metadata") or {}
            plan.errors.append(f"skipping Pod {name_of(pod)} for Service "
                               f"{meta.get('namespace')}/{meta.get('name')}: "
                               f"Node {node_name} Not Found")
            continue
        endpoint = pod_to_endpoint(pod, node, service, address_type)
        if endpoint["addresses"]:
            endpoints[endpoint_key(endpoint)] = endpoint
    for key, endpoints in desired.items():
        part = reconcile_port_mapping(service, existing_by_ports.get(key, []), endpoints,
                                      desired_ports[key], address_type, max_endpoints)
        plan.create += part.create
        plan.update += part.update
        plan.delete += part.delete
    for key, slices in existing_by_ports.items():
        if key not in desired:
            plan.delete += slices
    if len(existing) == len(plan.delete) and not plan.create:
        placeholder = new_slice(service, [], address_type)
        if len(plan.delete) == 1 and is_placeholder_of(plan.delete[0], placeholder):
            plan.delete = []  # it is there already
        else:
            plan.create.append(placeholder)
    return plan


def reconcile(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
              existing: Sequence[Object],
              node_of: Callable[[str], Mapping[str, Any] | None], *,
              max_endpoints: int = MAX_ENDPOINTS_PER_SLICE) -> Plan:
    """Reconcile (and finalize's rewriting): the writes that make the Service's slices
    list `pods`, given the slices it has now. A slice that would be deleted while another
    is created is updated into it instead; a Service being deleted gets no new slices."""
    plan = Plan()
    supported = address_types(service)
    for address_type in supported:
        part = reconcile_address_type(
            service, pods, [s for s in existing if s.get("addressType") == address_type],
            node_of, address_type, max_endpoints)
        plan.create += part.create
        plan.update += part.update
        plan.delete += part.delete
        plan.errors += part.errors
    plan.delete += [s for s in existing if s.get("addressType") not in supported]
    index = 0
    while index < len(plan.delete) and plan.create:
        doomed, wanted = plan.delete[index], plan.create[-1]
        if doomed.get("addressType") == wanted["addressType"] and owned_by(doomed, service):
            plan.create.pop()
            replacement = copy.deepcopy(wanted)
            meta = replacement["metadata"]
            meta.pop("generateName", None)
            doomed_meta = doomed.get("metadata") or {}
            meta["name"] = doomed_meta.get("name")
            meta["resourceVersion"] = doomed_meta.get("resourceVersion")
            plan.update.append(replacement)
            plan.delete.pop(index)
        else:
            index += 1
    if (service.get("metadata") or {}).get("deletionTimestamp"):
        plan.create = []
    return plan


# -- when the change that a sync writes happened (pkg/controller/util/endpoint) -------------


@dataclass
class _TriggerState:
    pod_times: dict[str, tuple[datetime, str]] = field(default_factory=dict)  # time, status
    service_time: datetime | None = None


class TriggerTimeTracker:
    """TriggerTimeTracker: per Service, the trigger times its last sync saw (each pod's
    Ready transition, the Service's creation), so a sync can say when the oldest change it
    is the first to see happened. A pod changed twice between two syncs counts once, with
    its newer time, as in kube."""

    def __init__(self) -> None:
        self._states: dict[str, _TriggerState] = {}

    def compute(self, key: str, service: Mapping[str, Any],
                pods: Sequence[Mapping[str, Any]], *, record: bool = True) -> datetime | None:
        """The oldest trigger this sync is the first to see (None: none); `record=False`
        leaves them unseen until `record` is called (once the slices were written: a
        failed write retried still stamps its slices with the trigger)."""
        state = self._states.get(key) or _TriggerState()
        earliest: datetime | None = None
        pod_times: dict[str, tuple[datetime, str]] = {}
        for pod in pods:
            condition = ready_condition(pod) or {}
            at = parse_time(condition.get("lastTransitionTime"))
            if at is None:
                continue
            name = name_of(pod)
            # Transition times have whole seconds: a pod Ready in the second it was
            # created shows the same time with another status, which is a change too.
            seen = (at, str(condition.get("status") or ""))
            pod_times[name] = seen
            last = state.pod_times.get(name)
            if last is None or at > last[0] or (at == last[0] and seen[1] != last[1]):
                earliest = at if earliest is None else min(earliest, at)
        service_time = parse_time((service.get("metadata") or {}).get("creationTimestamp"))
        if service_time is not None and (state.service_time is None
                                         or service_time > state.service_time):
            earliest = service_time if earliest is None else min(earliest, service_time)
        if record:
            self._states[key] = _TriggerState(pod_times, service_time)
        return earliest

    def record(self, key: str, service: Mapping[str, Any],
               pods: Sequence[Mapping[str, Any]]) -> None:
        self.compute(key, service, pods, record=True)

    def delete_service(self, key: str) -> None:
        self._states.pop(key, None)


def format_trigger_time(at: datetime) -> str:
    """Go's time.RFC3339Nano in UTC: trailing zeros of the fraction dropped."""
    text = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return f"{text}Z"


def with_trigger_time(plan: Plan, at: datetime | None) -> None:
    """addTriggerTimeAnnotation on every slice the plan writes: set, or cleared when the
    sync saw no new trigger."""
    for written in [*plan.create, *plan.update]:
        metadata = written.setdefault("metadata", {})
        annotations = dict(metadata.get("annotations") or {})
        if at is None:
            annotations.pop(LAST_CHANGE_TRIGGER_TIME, None)
        else:
            annotations[LAST_CHANGE_TRIGGER_TIME] = format_trigger_time(at)
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)


# -- which Services a pod change concerns (GetServicesToUpdateOnPodChange) -------------------


def endpoint_view(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod its endpoints show (podEndpointsChanged): its deletion, readiness
    and IPs (name, uid and node do not change once it has an IP)."""
    return (bool((pod.get("metadata") or {}).get("deletionTimestamp")), is_ready(pod),
            tuple(pod_ips(pod)), (pod.get("status") or {}).get("phase"))


def membership_view(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod decides which Services select it and its hostname there."""
    spec = pod.get("spec") or {}
    return (labels_of(pod), spec.get("hostname"), spec.get("subdomain"))


def services_to_update(old_services: set[str], new_services: set[str], *,
                       pod_changed: bool) -> set[str]:
    """determineNeededServiceUpdates: every Service of either set when the pod's endpoint
    changed; else only those it joined or left."""
    if pod_changed:
        return old_services | new_services
    return old_services ^ new_services


# -- the slices this controller wrote (EndpointSliceTracker) ---------------------------------

DELETION_EXPECTED = -1


def generation_of(endpoint_slice: Mapping[str, Any]) -> int:
    """Its generation; on an apiserver that keeps none for slices, its resourceVersion
    (kubelite's are etcd revisions, so they order the writes the same way)."""
    meta = endpoint_slice.get("metadata") or {}
    if meta.get("generation") is not None:
        return int(meta["generation"])
    version = str(meta.get("resourceVersion") or "0")
    return int(version) if version.isdigit() else 0


def service_key_of(endpoint_slice: Mapping[str, Any]) -> str | None:
    """ServiceControllerKey: `<namespace>/<service-name label>`."""
    meta = endpoint_slice.get("metadata") or {}
    service = (meta.get("labels") or {}).get(LABEL_SERVICE_NAME)
    return f"{meta.get('namespace')}/{service}" if service else None


def managed_by_us(endpoint_slice: Mapping[str, Any]) -> bool:
    return ((endpoint_slice.get("metadata") or {}).get("labels") or {}).get(
        LABEL_MANAGED_BY) == MANAGED_BY


@dataclass
class SliceTracker:
    """The generation of each slice (by uid) this controller last wrote, per Service, or
    DELETION_EXPECTED for those it deleted."""

    generations: dict[str, dict[str, int]] = field(default_factory=dict)
    service_uids: dict[str, str] = field(default_factory=dict)

    def has(self, endpoint_slice: Mapping[str, Any]) -> bool:
        return uid_of(endpoint_slice) in self.generations.get(
            service_key_of(endpoint_slice) or "", {})

    def should_sync(self, endpoint_slice: Mapping[str, Any]) -> bool:
        """A slice event that is not the echo of our own write."""
        tracked = self.generations.get(service_key_of(endpoint_slice) or "")
        if tracked is None or uid_of(endpoint_slice) not in tracked:
            return True
        return generation_of(endpoint_slice) > tracked[uid_of(endpoint_slice)]

    def stale(self, service: Mapping[str, Any], slices: Sequence[Mapping[str, Any]]) -> bool:
        """StaleSlices: the cache shows a slice older than we wrote it, one we deleted, or
        misses one we wrote. A recreated Service starts afresh."""
        key, uid = key_of(service), uid_of(service)
        if self.service_uids.get(key) not in (None, "", uid) and uid:
            self.generations.pop(key, None)
        self.service_uids[key] = uid
        tracked = self.generations.get(key)
        if not tracked:
            return False
        seen = set()
        for endpoint_slice in slices:
            slice_uid = uid_of(endpoint_slice)
            seen.add(slice_uid)
            want = tracked.get(slice_uid)
            if want is not None and (want == DELETION_EXPECTED
                                     or want > generation_of(endpoint_slice)):
                return True
        return any(want != DELETION_EXPECTED and slice_uid not in seen
                   for slice_uid, want in tracked.items())

    def update(self, endpoint_slice: Mapping[str, Any]) -> None:
        self.generations.setdefault(service_key_of(endpoint_slice) or "", {})[
            uid_of(endpoint_slice)] = generation_of(endpoint_slice)

    def expect_deletion(self, endpoint_slice: Mapping[str, Any]) -> None:
        self.generations.setdefault(service_key_of(endpoint_slice) or "", {})[
            uid_of(endpoint_slice)] = DELETION_EXPECTED

    def handle_deletion(self, endpoint_slice: Mapping[str, Any]) -> bool:
        """Forget a deleted slice; False when we did not delete it ourselves."""
        tracked = self.generations.get(service_key_of(endpoint_slice) or "")
        if tracked is None:
            return True
        want = tracked.pop(uid_of(endpoint_slice), None)
        return want is None or want == DELETION_EXPECTED

    def delete_service(self, key: str) -> None:
        self.generations.pop(key, None)
        self.service_uids.pop(key, None)


class StaleInformerCache(Exception):
    """The slice informer has not shown our last writes yet: retried after a back-off."""


# -- the controller ---------------------------------------------------------------------------


def _managed_service_index(endpoint_slice: Mapping[str, Any]) -> list[str]:
    key = service_key_of(endpoint_slice)
    return [key] if key is not None and managed_by_us(endpoint_slice) else []


class EndpointSliceController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None,
                 max_endpoints_per_slice: int = MAX_ENDPOINTS_PER_SLICE) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.queue = WorkQueue(self.name, rate_limiter=ItemBackoff(
            base=SYNC_BACKOFF_SECONDS, cap=MAX_SYNC_BACKOFF_SECONDS))
        self.max_endpoints = max_endpoints_per_slice
        self.tracker = SliceTracker()
        self.trigger_times = TriggerTimeTracker()
        self.services = indexed_by_namespace(factory.informer("services"))
        self.pods = indexed_by_namespace(factory.informer("pods"))
        self.nodes = factory.informer("nodes")
        self.slices = with_index(factory.informer("endpointslices"), BY_SERVICE,
                                 _managed_service_index)
        self.services.add_event_handler(
            on_add=self._service_changed, on_update=lambda _o, new: self._service_changed(new),
            on_delete=self._service_changed, name=f"{NAME} services")
        self.pods.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_added, name=f"{NAME} pods")
        self.slices.add_event_handler(on_add=self._slice_added, on_update=self._slice_updated,
                                      on_delete=self._slice_deleted,
                                      name=f"{NAME} endpointslices")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.services, self.pods, self.nodes, self.slices]

    # -- event handlers: quick, they only enqueue ----------------------------------------

    def _service_changed(self, service: Object) -> None:
        self.queue.add(key_of(service))

    def _services_of(self, pod: Mapping[str, Any]) -> set[str]:
        """GetPodServiceMemberships: the Services in the pod's namespace selecting it."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        return {key_of(s) for s in self.services.by_index(BY_NAMESPACE, namespace)
                if selects(service_selector(s), pod)}

    def _pod_added(self, pod: Object) -> None:
        for key in self._services_of(pod):
            self.queue.add(key)

    def _pod_updated(self, old: Object, new: Object) -> None:
        pod_changed = endpoint_view(old) != endpoint_view(new)
        labels_changed = membership_view(old) != membership_view(new)
        if not pod_changed and not labels_changed:
            return
        services = self._services_of(new)
        if labels_changed:
            services = services_to_update(self._services_of(old), services,
                                          pod_changed=pod_changed)
        for key in services:
            self.queue.add(key)

    def _queue_for_slice(self, endpoint_slice: Mapping[str, Any]) -> None:
        key = service_key_of(endpoint_slice)
        if key is not None:
            self.queue.add_after(key, SLICE_CHANGE_MIN_SYNC_DELAY)

    def _slice_added(self, endpoint_slice: Object) -> None:
        if managed_by_us(endpoint_slice) and self.tracker.should_sync(endpoint_slice):
            self._queue_for_slice(endpoint_slice)

    def _slice_updated(self, old: Object, new: Object) -> None:
        if service_key_of(old) != service_key_of(new):
            self._queue_for_slice(new)
            self._queue_for_slice(old)
            return
        if managed_by_us(old) != managed_by_us(new) or (
                managed_by_us(new) and self.tracker.should_sync(new)):
            self._queue_for_slice(new)

    def _slice_deleted(self, endpoint_slice: Object) -> None:
        if (managed_by_us(endpoint_slice) and self.tracker.has(endpoint_slice)
                and not self.tracker.handle_deletion(endpoint_slice)):
            self._queue_for_slice(endpoint_slice)

    # -- sync -------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        service = self.services.get(key)
        if service is None:
            self.tracker.delete_service(key)
            self.trigger_times.delete_service(key)
            return
        selector = service_selector(service)
        if selector is None:
            return
        namespace = str(service["metadata"]["namespace"])
        pods = [p for p in self.pods.by_index(BY_NAMESPACE, namespace) if selects(selector, p)]
        slices = [s for s in self.slices.by_index(BY_SERVICE, key)
                  if not (s.get("metadata") or {}).get("deletionTimestamp")]
        if self.tracker.stale(service, slices):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")
        plan = reconcile(service, pods, slices, self.nodes.get,
                         max_endpoints=self.max_endpoints)
        with_trigger_time(plan, self.trigger_times.compute(key, service, pods, record=False))
        try:
            await self._apply(service, key, plan)
            if plan.errors:
                raise RuntimeError("; ".join(plan.errors))
            self.trigger_times.record(key, service, pods)
        except StaleInformerCache:
            raise
        except Exception as e:
            await self.recorder.event(
                service, "Warning", "FailedToUpdateEndpointSlices",
                f"Error updating Endpoint Slices for Service {key}: {e}")
            raise

    async def _apply(self, service: Object, key: str, plan: Plan) -> None:
        if plan.empty:
            return
        namespace = str(service["metadata"]["namespace"])
        for wanted in plan.create:
            created = await self.writer.create("endpointslices", wanted, namespace=namespace)
            self.tracker.update(created)
        for wanted in plan.update:
            updated = await self.writer.update("endpointslices", wanted, namespace=namespace)
            self.tracker.update(updated)
        for doomed in plan.delete:
            try:
                await self.writer.delete("endpointslices", name_of(doomed), namespace=namespace,
                                         preconditions={"uid": uid_of(doomed)})
            except (NotFound, Conflict):
                pass  # gone already, or no longer the slice we mean
            self.tracker.expect_deletion(doomed)
        endpoints = sum(len(endpoints_of(s)) for s in [*plan.create, *plan.update])
        log.info("service %s: endpointslices created=%d updated=%d deleted=%d "
                 "(%d endpoint(s) in the slices written)", key, len(plan.create),
                 len(plan.update), len(plan.delete), endpoints)
