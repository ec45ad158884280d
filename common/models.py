"""Pydantic models of the objects kubelite serves (core/v1, coordination.k8s.io/v1), with
Kubernetes' JSON field names.

Class names are the Go type names (`PodSpec`, `ContainerPort`, ...) so that decode errors
can name them the way kube-apiserver does. Every field is optional: a model describes the
shape and the types, validation (apiserver/resources/) decides what is required. Validation is strict
like Go's encoding/json: `"80"` is not an int32 and `1` is not a string. Structures
Kubernetes has but kubelite does not look into are `dict[str, Any]`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from common.quantity import quantity_string

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
# intstr.IntOrString: a JSON number or string (maxSurge: 1 or "25%", a probe's port).
IntOrString = Int32 | str
# resource.Quantity: a JSON string or number, kept as its string form.
Quantity = Annotated[str, BeforeValidator(quantity_string)]
ResourceList = dict[str, Quantity]
Opaque = dict[str, Any]

# --- metav1.MicroTime ----------------------------------------------------------------------

RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"

# How Go's time.Parse walks RFC3339_MICRO: (literal before the element, the layout element,
# what the element accepts, the name of its range, the range). Day is range-checked after
# parsing, against its month.
_MICRO_TIME_CHUNKS: tuple[tuple[str, str, str, str, tuple[int, int]], ...] = (
    ("", "2006", "[0-9]{4}", "", (0, 9999)),
    ("-", "01", "[0-9]{2}", "month", (1, 12)),
    ("-", "02", "[0-9]{2}", "", (0, 99)),
    ("T", "15", "[0-9][0-9]?", "hour", (0, 23)),
    (":", "04", "[0-9]{2}", "minute", (0, 59)),
    (":", "05", "[0-9]{2}", "second", (0, 59)),
    ("", ".000000", "[.,][0-9]{6}", "", (0, 999999)),
    ("", "Z07:00", "Z|[+-][0-9]{2}:[0-9]{2}", "", (0, 0)),
)
_TZ_RANGES = (("time zone offset hour", 24), ("time zone offset minute", 60))


class MicroTimeError(ValueError):
    """A value MicroTime.UnmarshalJSON refuses; str() is Go's wording."""


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _parse_error(value: str, *, value_elem: str = "", layout_elem: str = "",
                 message: str = "") -> MicroTimeError:
    """time.ParseError.Error()."""
    if message:
        return MicroTimeError(f"parsing time {_go_quote(value)}{message}")
    return MicroTimeError(f"parsing time {_go_quote(value)} as {_go_quote(RFC3339_MICRO)}: "
                          f"cannot parse {_go_quote(value_elem)} as {_go_quote(layout_elem)}")


def _time_zone_offset(text: str, value: str) -> int:
    """Seconds east of UTC of `Z` or `+hh:mm`/`-hh:mm`."""
    if text == "Z":
        return 0
    hours, minutes = int(text[1:3]), int(text[4:6])
    for (name, limit), number in zip(_TZ_RANGES, (hours, minutes), strict=True):
        if number > limit:
            raise _parse_error(value, message=f": {name} out of range")
    offset = hours * 3600 + minutes * 60
    return -offset if text[0] == "-" else offset


def parse_micro_time(value: str) -> datetime:
    """time.Parse(RFC3339Micro, value), with Go's error texts: exactly six fractional digits."""
    rest = value
    numbers: list[int] = []
    offset = 0
    for literal, element, pattern, range_name, (low, high) in _MICRO_TIME_CHUNKS:
        if not rest.startswith(literal):
            raise _parse_error(value, value_elem=rest, layout_elem=literal)
        rest = rest[len(literal):]
        match = re.match(pattern, rest)
        if match is None:
            raise _parse_error(value, value_elem=rest, layout_elem=element)
        text, rest = match.group(), rest[match.end():]
        if element == "Z07:00":
            offset = _time_zone_offset(text, value)
            continue
        number = int(text.lstrip(".,"))
        if range_name and not low <= number <= high:
            raise _parse_error(value, message=f": {range_name} out of range")
        numbers.append(number)
    if rest:
        raise _parse_error(value, message=f": extra text: {_go_quote(rest)}")
    year, month, day, hour, minute, second, micro = numbers
    try:
        return datetime(year, month, day, hour, minute, second, micro,
                        tzinfo=UTC) - timedelta(seconds=offset)
    except (ValueError, OverflowError):  # Go also has a year 0; Python's datetime does not
        raise _parse_error(value, message=": day out of range") from None


def format_micro_time(when: datetime) -> str:
    """MicroTime.MarshalJSON: RFC 3339 in UTC with exactly six fractional digits."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def micro_time_string(value: object) -> str:
    """A MicroTime as the apiserver writes it back (UTC), from what a client sent."""
    if not isinstance(value, str):
        kind = ("bool" if isinstance(value, bool) else "number" if isinstance(value, int | float)
                else "array" if isinstance(value, list) else "object")
        raise MicroTimeError(f"json: cannot unmarshal {kind} into Go value of type string")
    return format_micro_time(parse_micro_time(value))


# metav1.MicroTime: an RFC 3339 string with microseconds, kept in its UTC form.
MicroTime = Annotated[str, BeforeValidator(micro_time_string)]


class KubeModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", strict=True,
    )


# --- meta/v1 -------------------------------------------------------------------------------

class OwnerReference(KubeModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[Opaque] | None = None


class ObjectReference(KubeModel):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class Preconditions(KubeModel):
    uid: str | None = None
    resource_version: str | None = None


class DeleteOptions(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    grace_period_seconds: Int64 | None = None
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = None
    propagation_policy: str | None = None
    dry_run: list[str] | None = None


# --- Pod -----------------------------------------------------------------------------------

class ContainerPort(KubeModel):
    name: str | None = None
    host_port: Int32 | None = None
    container_port: Int32 | None = None
    protocol: str | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class EnvVar(KubeModel):
    name: str | None = None
    value: str | None = None
    value_from: Opaque | None = None


class ResourceRequirements(KubeModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None
    claims: list[Opaque] | None = None


class VolumeMount(KubeModel):
    name: str | None = None
    read_only: bool | None = None
    recursive_read_only: str | None = None
    mount_path: str | None = None
    sub_path: str | None = None
    mount_propagation: str | None = None
    sub_path_expr: str | None = None


class ExecAction(KubeModel):
    command: list[str] | None = None


class HTTPHeader(KubeModel):
    name: str | None = None
    value: str | None = None


class HTTPGetAction(KubeModel):
    path: str | None = None
    port: IntOrString | None = None
    host: str | None = None
    scheme: str | None = None
    http_headers: list[HTTPHeader] | None = None


class TCPSocketAction(KubeModel):
    port: IntOrString | None = None
    host: str | None = None


class GRPCAction(KubeModel):
    port: Int32 | None = None
    service: str | None = None


class SleepAction(KubeModel):
    seconds: Int64 | None = None


class Probe(KubeModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: Int32 | None = None
    timeout_seconds: Int32 | None = None
    period_seconds: Int32 | None = None
    success_threshold: Int32 | None = None
    failure_threshold: Int32 | None = None
    termination_grace_period_seconds: Int64 | None = None


class LifecycleHandler(KubeModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    sleep: SleepAction | None = None


class Lifecycle(KubeModel):
    post_start: LifecycleHandler | None = None
    pre_stop: LifecycleHandler | None = None
    stop_signal: str | None = None


class Container(KubeModel):
    name: str | None = None
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    ports: list[ContainerPort] | None = None
    env_from: list[Opaque] | None = None
    env: list[EnvVar] | None = None
    resources: ResourceRequirements | None = None
    resize_policy: list[Opaque] | None = None
    restart_policy: str | None = None
    volume_mounts: list[VolumeMount] | None = None
    volume_devices: list[Opaque] | None = None
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    lifecycle: Lifecycle | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None
    image_pull_policy: str | None = None
    security_context: Opaque | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


class EphemeralContainer(Container):
    """A container added to a running pod (pods/ephemeralcontainers): a Container's fields
    (validation allows only some of them) and the container whose namespaces it joins."""

    target_container_name: str | None = None


class Toleration(KubeModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: Int64 | None = None


class PodSpec(KubeModel):
    volumes: list[Opaque] | None = None
    init_containers: list[Container] | None = None
    containers: list[Container] | None = None
    ephemeral_containers: list[EphemeralContainer] | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: Int64 | None = None
    active_deadline_seconds: Int64 | None = None
    dns_policy: str | None = None
    node_selector: dict[str, str] | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    node_name: str | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    share_process_namespace: bool | None = None
    security_context: Opaque | None = None
    image_pull_secrets: list[Opaque] | None = None
    hostname: str | None = None
    subdomain: str | None = None
    affinity: Opaque | None = None
    scheduler_name: str | None = None
    tolerations: list[Toleration] | None = None
    host_aliases: list[Opaque] | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    dns_config: Opaque | None = None
    readiness_gates: list[Opaque] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None
    overhead: ResourceList | None = None
    topology_spread_constraints: list[Opaque] | None = None
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    os: Opaque | None = None
    host_users: bool | None = None
    scheduling_gates: list[Opaque] | None = None
    resource_claims: list[Opaque] | None = None
    resources: ResourceRequirements | None = None


class PodCondition(KubeModel):
    type: str | None = None
    observed_generation: Int64 | None = None
    status: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class ContainerState(KubeModel):
    waiting: Opaque | None = None
    running: Opaque | None = None
    terminated: Opaque | None = None


class ContainerStatus(KubeModel):
    name: str | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None
    ready: bool | None = None
    restart_count: Int32 | None = None
    image: str | None = None
    image_id: str | None = Field(default=None, alias="imageID")
    container_id: str | None = Field(default=None, alias="containerID")
    started: bool | None = None
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[Opaque] | None = None
    user: Opaque | None = None
    allocated_resources_status: list[Opaque] | None = None
    stop_signal: str | None = None


class PodIP(KubeModel):
    ip: str | None = None


class HostIP(KubeModel):
    ip: str | None = None


class PodStatus(KubeModel):
    observed_generation: Int64 | None = None
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    message: str | None = None
    reason: str | None = None
    nominated_node_name: str | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")
    host_ips: list[HostIP] | None = Field(default=None, alias="hostIPs")
    pod_ip: str | None = Field(default=None, alias="podIP")
    pod_ips: list[PodIP] | None = Field(default=None, alias="podIPs")
    start_time: str | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    container_statuses: list[ContainerStatus] | None = None
    qos_class: str | None = None
    ephemeral_container_statuses: list[ContainerStatus] | None = None
    resize: str | None = None
    resource_claim_statuses: list[Opaque] | None = None


class Pod(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


# --- Node ----------------------------------------------------------------------------------

class Taint(KubeModel):
    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class NodeSpec(KubeModel):
    pod_cidr: str | None = Field(default=None, alias="podCIDR")
    pod_cidrs: list[str] | None = Field(default=None, alias="podCIDRs")
    provider_id: str | None = Field(default=None, alias="providerID")
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    config_source: Opaque | None = None
    external_id: str | None = Field(default=None, alias="externalID")


class NodeCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    last_heartbeat_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NodeAddress(KubeModel):
    type: str | None = None
    address: str | None = None


class NodeSystemInfo(KubeModel):
    machine_id: str | None = Field(default=None, alias="machineID")
    system_uuid: str | None = Field(default=None, alias="systemUUID")
    boot_id: str | None = Field(default=None, alias="bootID")
    kernel_version: str | None = None
    os_image: str | None = None
    container_runtime_version: str | None = None
    kubelet_version: str | None = None
    kube_proxy_version: str | None = None
    operating_system: str | None = None
    architecture: str | None = None
    swap: Opaque | None = None


class NodeStatus(KubeModel):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    phase: str | None = None
    conditions: list[NodeCondition] | None = None
    addresses: list[NodeAddress] | None = None
    daemon_endpoints: Opaque | None = None
    node_info: NodeSystemInfo | None = None
    images: list[Opaque] | None = None
    volumes_in_use: list[str] | None = None
    volumes_attached: list[Opaque] | None = None
    config: Opaque | None = None
    runtime_handlers: list[Opaque] | None = None
    features: Opaque | None = None
    declared_features: list[str] | None = None


class Node(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# --- Event ---------------------------------------------------------------------------------

class EventSource(KubeModel):
    component: str | None = None
    host: str | None = None


class EventSeries(KubeModel):
    count: Int32 | None = None
    last_observed_time: str | None = None


class Event(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    involved_object: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: Int32 | None = None
    type: str | None = None
    event_time: str | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


# --- Namespace, Binding --------------------------------------------------------------------

class NamespaceSpec(KubeModel):
    finalizers: list[str] | None = None


class NamespaceCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NamespaceStatus(KubeModel):
    phase: str | None = None
    conditions: list[NamespaceCondition] | None = None


class Namespace(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


class Binding(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    target: ObjectReference | None = None


# --- coordination.k8s.io/v1 Lease -----------------------------------------------------------

class LeaseSpec(KubeModel):
    holder_identity: str | None = None
    lease_duration_seconds: Int32 | None = None
    acquire_time: MicroTime | None = None
    renew_time: MicroTime | None = None
    lease_transitions: Int32 | None = None
    strategy: str | None = None
    preferred_holder: str | None = None


class Lease(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: LeaseSpec | None = None


# --- rbac.authorization.k8s.io/v1 -----------------------------------------------------------

class LabelSelectorRequirement(KubeModel):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(KubeModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class PolicyRule(KubeModel):
    verbs: list[str] | None = None
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_ur_ls: list[str] | None = Field(default=None, alias="nonResourceURLs")


class AggregationRule(KubeModel):
    cluster_role_selectors: list[LabelSelector] | None = None


class Role(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    rules: list[PolicyRule] | None = None


class ClusterRole(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    rules: list[PolicyRule] | None = None
    aggregation_rule: AggregationRule | None = None


class Subject(KubeModel):
    kind: str | None = None
    api_group: str | None = None
    name: str | None = None
    namespace: str | None = None


class RoleRef(KubeModel):
    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


class RoleBinding(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None


class ClusterRoleBinding(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    subjects: list[Subject] | None = None
    role_ref: RoleRef | None = None


# --- authorization.k8s.io/v1 and authentication.k8s.io/v1 reviews -------------------------

class ResourceAttributes(KubeModel):
    namespace: str | None = None
    verb: str | None = None
    group: str | None = None
    version: str | None = None
    resource: str | None = None
    subresource: str | None = None
    name: str | None = None
    field_selector: Opaque | None = None
    label_selector: Opaque | None = None


class NonResourceAttributes(KubeModel):
    path: str | None = None
    verb: str | None = None


class SubjectAccessReviewSpec(KubeModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None
    user: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None
    uid: str | None = None


class SelfSubjectAccessReviewSpec(KubeModel):
    resource_attributes: ResourceAttributes | None = None
    non_resource_attributes: NonResourceAttributes | None = None


class SubjectAccessReviewStatus(KubeModel):
    allowed: bool | None = None
    denied: bool | None = None
    reason: str | None = None
    evaluation_error: str | None = None


class SubjectAccessReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class LocalSubjectAccessReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectAccessReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SelfSubjectAccessReviewSpec | None = None
    status: SubjectAccessReviewStatus | None = None


class SelfSubjectRulesReviewSpec(KubeModel):
    namespace: str | None = None


class SelfSubjectRulesReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: SelfSubjectRulesReviewSpec | None = None
    status: Opaque | None = None


class UserInfo(KubeModel):
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class SelfSubjectReviewStatus(KubeModel):
    user_info: UserInfo | None = None


class SelfSubjectReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    status: SelfSubjectReviewStatus | None = None


# --- ServiceAccounts and their tokens (core/v1, authentication.k8s.io/v1) ---------------------

class LocalObjectReference(KubeModel):
    name: str | None = None


class ServiceAccount(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    secrets: list[ObjectReference] | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    automount_service_account_token: bool | None = None


class BoundObjectReference(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    name: str | None = None
    uid: str | None = None


class TokenRequestSpec(KubeModel):
    audiences: list[str] | None = None
    expiration_seconds: int | None = None
    bound_object_ref: BoundObjectReference | None = None


class TokenRequestStatus(KubeModel):
    token: str | None = None
    expiration_timestamp: str | None = None


class TokenRequest(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: TokenRequestSpec | None = None
    status: TokenRequestStatus | None = None


class TokenReviewSpec(KubeModel):
    token: str | None = None
    audiences: list[str] | None = None


class TokenReview(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: TokenReviewSpec | None = None
    status: Opaque | None = None


# --- apps/v1, batch/v1, autoscaling/v1 (workloads) ---------------------------------------------

class PodTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class RollingUpdateDeployment(KubeModel):
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class DeploymentStrategy(KubeModel):
    type: str | None = None
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(KubeModel):
    replicas: Int32 | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    strategy: DeploymentStrategy | None = None
    min_ready_seconds: Int32 | None = None
    revision_history_limit: Int32 | None = None
    paused: bool | None = None
    progress_deadline_seconds: Int32 | None = None


class WorkloadCondition(KubeModel):
    """DeploymentCondition, ReplicaSetCondition and JobCondition share these fields."""

    type: str | None = None
    status: str | None = None
    last_update_time: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class DeploymentStatus(KubeModel):
    observed_generation: Int64 | None = None
    replicas: Int32 | None = None
    updated_replicas: Int32 | None = None
    ready_replicas: Int32 | None = None
    available_replicas: Int32 | None = None
    unavailable_replicas: Int32 | None = None
    terminating_replicas: Int32 | None = None
    conditions: list[WorkloadCondition] | None = None
    collision_count: Int32 | None = None


class Deployment(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: DeploymentSpec | None = None
    status: DeploymentStatus | None = None


class ReplicaSetSpec(KubeModel):
    replicas: Int32 | None = None
    min_ready_seconds: Int32 | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None


class ReplicaSetStatus(KubeModel):
    replicas: Int32 | None = None
    fully_labeled_replicas: Int32 | None = None
    ready_replicas: Int32 | None = None
    available_replicas: Int32 | None = None
    terminating_replicas: Int32 | None = None
    observed_generation: Int64 | None = None
    conditions: list[WorkloadCondition] | None = None


class ReplicaSet(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: ReplicaSetSpec | None = None
    status: ReplicaSetStatus | None = None


class JobSpec(KubeModel):
    parallelism: Int32 | None = None
    completions: Int32 | None = None
    active_deadline_seconds: Int64 | None = None
    pod_failure_policy: Opaque | None = None
    success_policy: Opaque | None = None
    backoff_limit: Int32 | None = None
    backoff_limit_per_index: Int32 | None = None
    max_failed_indexes: Int32 | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec | None = None
    ttl_seconds_after_finished: Int32 | None = None
    completion_mode: str | None = None
    suspend: bool | None = None
    pod_replacement_policy: str | None = None
    managed_by: str | None = None


class JobStatus(KubeModel):
    conditions: list[WorkloadCondition] | None = None
    start_time: str | None = None
    completion_time: str | None = None
    active: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    terminating: Int32 | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    uncounted_terminated_pods: Opaque | None = None
    ready: Int32 | None = None


class Job(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None
    status: JobStatus | None = None


class ScaleSpec(KubeModel):
    replicas: Int32 | None = None


class ScaleStatus(KubeModel):
    replicas: Int32 | None = None
    selector: str | None = None


class Scale(KubeModel):
    """autoscaling/v1 Scale: what the scale subresource of a workload reads and writes."""

    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: ScaleSpec | None = None
    status: ScaleStatus | None = None


# --- ConfigMaps and Secrets (core/v1) --------------------------------------------------------

_BASE64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def base64_error(text: str) -> int | None:
    """Where Go's base64.StdEncoding (what encoding/json decodes []byte with) fails on
    `text`: the offset of the first illegal byte, or of the incomplete last quantum; None
    when it is valid (newlines are skipped, as Go does)."""
    data = text.replace("\r", "").replace("\n", "")
    for i, char in enumerate(data):
        if char == "=":
            pad = len(data) - i
            if len(data) % 4 or pad > 2 or data[i:] != "=" * pad:
                return i
            return None
        if char not in _BASE64_ALPHABET:
            return i
    return None if len(data) % 4 == 0 else len(data) - len(data) % 4


def _base64(value: Any) -> Any:
    if isinstance(value, str):
        at = base64_error(value)
        if at is not None:
            raise ValueError(f"illegal base64 data at input byte {at}")
    return value


# []byte: a base64 string in JSON, checked on decode as encoding/json does.
Base64 = Annotated[str, BeforeValidator(_base64)]


class ConfigMap(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    immutable: bool | None = None
    data: dict[str, str] | None = None
    binary_data: dict[str, Base64] | None = None


class Secret(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    immutable: bool | None = None
    data: dict[str, Base64] | None = None
    string_data: dict[str, str] | None = None
    type: str | None = None


# --- Service (core/v1) -----------------------------------------------------------------------

class ServicePort(KubeModel):
    name: str | None = None
    protocol: str | None = None
    app_protocol: str | None = None
    port: Int32 | None = None
    target_port: IntOrString | None = None
    node_port: Int32 | None = None


class ClientIPConfig(KubeModel):
    timeout_seconds: Int32 | None = None


class SessionAffinityConfig(KubeModel):
    client_ip: ClientIPConfig | None = Field(default=None, alias="clientIP")


class ServiceSpec(KubeModel):
    ports: list[ServicePort] | None = None
    selector: dict[str, str] | None = None
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    cluster_ips: list[str] | None = Field(default=None, alias="clusterIPs")
    type: str | None = None
    external_ips: list[str] | None = Field(default=None, alias="externalIPs")
    session_affinity: str | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[str] | None = None
    external_name: str | None = None
    external_traffic_policy: str | None = None
    health_check_node_port: Int32 | None = None
    publish_not_ready_addresses: bool | None = None
    session_affinity_config: SessionAffinityConfig | None = None
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None
    allocate_load_balancer_node_ports: bool | None = None
    load_balancer_class: str | None = None
    internal_traffic_policy: str | None = None
    traffic_distribution: str | None = None


class ServiceStatus(KubeModel):
    load_balancer: Opaque | None = None
    conditions: list[Opaque] | None = None


class Service(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: ServiceSpec | None = None
    status: ServiceStatus | None = None


# --- EndpointSlice (discovery.k8s.io/v1) -----------------------------------------------------

class EndpointConditions(KubeModel):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class EndpointHints(KubeModel):
    for_zones: list[Opaque] | None = None
    for_nodes: list[Opaque] | None = None


class Endpoint(KubeModel):
    addresses: list[str] | None = None
    conditions: EndpointConditions | None = None
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    deprecated_topology: dict[str, str] | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: EndpointHints | None = None


class EndpointPort(KubeModel):
    name: str | None = None
    protocol: str | None = None
    port: Int32 | None = None
    app_protocol: str | None = None


class EndpointSlice(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    address_type: str | None = None
    endpoints: list[Endpoint] | None = None
    ports: list[EndpointPort] | None = None
