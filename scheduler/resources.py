"""Resource arithmetic for scheduling: what a pod requests, what a node can hold.

As kube-scheduler computes them (`pkg/api/v1/resource` PodRequests, used by
`noderesources`): a pod requests the larger of its app containers' sum (plus its
sidecars, the init containers with `restartPolicy: Always`) and each init container
(plus the sidecars started before it), and then its `overhead` on top.

Scoring counts a container that requests no cpu or memory as requesting 100m and
200Mi (kube's non-zero defaults), so that pods without requests still spread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_UP
from typing import Any

from common.quantity import QuantityError, parse_quantity

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
DEFAULT_MILLI_CPU_REQUEST = 100  # kube's DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # kube's DefaultMemoryRequest


@dataclass(frozen=True)
class Resources:
    """Amounts in kube's units: milli-cpu, bytes, and counts for extended resources."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalar: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.milli_cpu + other.milli_cpu, self.memory + other.memory,
                         self.ephemeral_storage + other.ephemeral_storage,
                         _merge(self.scalar, other.scalar, 1))

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.milli_cpu - other.milli_cpu, self.memory - other.memory,
                         self.ephemeral_storage - other.ephemeral_storage,
                         _merge(self.scalar, other.scalar, -1))

    def max(self, other: Resources) -> Resources:
        names = self.scalar.keys() | other.scalar.keys()
        return Resources(max(self.milli_cpu, other.milli_cpu), max(self.memory, other.memory),
                         max(self.ephemeral_storage, other.ephemeral_storage),
                         {n: max(self.scalar.get(n, 0), other.scalar.get(n, 0))
                          for n in names})

    @property
    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage
                    or any(self.scalar.values()))

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        return self.scalar.get(name, 0)


ZERO = Resources()


def _merge(a: Mapping[str, int], b: Mapping[str, int], sign: int) -> dict[str, int]:
    if not b:
        return dict(a)
    merged = dict(a)
    for name, value in b.items():
        merged[name] = merged.get(name, 0) + sign * value
    return merged


def amount(name: str, value: object) -> int:
    """A quantity in the unit the scheduler counts `name` in (milli-cpu; else whole
    units, rounded up as Quantity.Value() does). Unparseable values count as 0: the
    apiserver validated them already."""
    try:
        quantity = parse_quantity(str(value).strip())
    except QuantityError:
        return 0
    if name == CPU:
        quantity *= 1000
    return int(quantity.to_integral_value(rounding=ROUND_UP))


def is_scalar(name: str) -> bool:
    """Extended resources (`example.com/gpu`) and hugepages, as kube tracks them."""
    return "/" in name or name.startswith("hugepages-")


def resources_of(values: Mapping[str, Any] | None) -> Resources:
    """A ResourceList (`{"cpu": "500m", "memory": "1Gi"}`) as Resources."""
    if not values:
        return ZERO
    scalar = {name: amount(name, v) for name, v in values.items() if is_scalar(name)}
    return Resources(amount(CPU, values[CPU]) if CPU in values else 0,
                     amount(MEMORY, values[MEMORY]) if MEMORY in values else 0,
                     amount(EPHEMERAL_STORAGE, values[EPHEMERAL_STORAGE])
                     if EPHEMERAL_STORAGE in values else 0, scalar)


def _container_requests(container: Mapping[str, Any], *, non_zero: bool) -> Resources:
    requests = (container.get("resources") or {}).get("requests") or {}
    found = resources_of(requests)
    if not non_zero:
        return found
    return Resources(found.milli_cpu if CPU in requests else DEFAULT_MILLI_CPU_REQUEST,
                     found.memory if MEMORY in requests else DEFAULT_MEMORY_REQUEST,
                     found.ephemeral_storage, found.scalar)


def _sum(items: Iterable[Resources]) -> Resources:
    total = ZERO
    for item in items:
        total = total + item
    return total


def pod_requests(pod: Mapping[str, Any], *, non_zero: bool = False) -> Resources:
    """max(sum(containers) + sidecars, each init container + the sidecars before it),
    plus `spec.overhead` (kube's PodRequests)."""
    spec = pod.get("spec") or {}
    total = _sum(_container_requests(c, non_zero=non_zero)
                 for c in spec.get("containers") or ())
    sidecars = ZERO
    init_peak = ZERO
    for init in spec.get("initContainers") or ():
        requests = _container_requests(init, non_zero=non_zero)
        if init.get("restartPolicy") == "Always":
            sidecars = sidecars + requests
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(sidecars + requests)
    total = (total + sidecars).max(init_peak)
    overhead = spec.get("overhead")
    return total + resources_of(overhead) if overhead else total


@dataclass(frozen=True)
class Allocatable:
    """What a node offers, from `status.allocatable`. `limited` is False for a node
    that reports no allocatable at all (an API-only Node, kubelite's tests and demos):
    it is not resource-checked. A node that reports some resources has 0 of the rest,
    as in kube."""

    resources: Resources = ZERO
    pods: int = 0
    limited: bool = False


UNLIMITED = Allocatable()


def node_allocatable(node: Mapping[str, Any]) -> Allocatable:
    values = (node.get("status") or {}).get("allocatable")
    if not values:
        return UNLIMITED
    return Allocatable(resources_of(values),
                       amount(PODS, values[PODS]) if PODS in values else 0, True)
