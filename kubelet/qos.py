"""A pod's QoS class (after `pkg/apis/core/v1/helper/qos.ComputePodQOS`), which the
kubelet reports in `status.qosClass` and turns into the containers' OOM score
(`pkg/kubelet/qos/policy.go`)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

QOS_RESOURCES = ("cpu", "memory")  # isSupportedQoSComputeResource

# qos/policy.go
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000


def _add_positive(totals: dict[str, Decimal], resources: Mapping[str, Any]) -> set[str]:
    counted = set()
    for name, text in resources.items():
        if name not in QOS_RESOURCES:
            continue
        try:
            value = parse_quantity(str(text))
        except QuantityError:
            continue
        if value > 0:
            totals[name] = totals.get(name, Decimal(0)) + value
            counted.add(name)
    return counted


def pod_qos_class(pod: Mapping[str, Any]) -> str:
    """Guaranteed when every container (init containers too) limits both cpu and memory
    and the summed requests equal the summed limits; BestEffort when none requests or
    limits cpu or memory; else Burstable. Ephemeral containers do not count."""
    spec = pod.get("spec") or {}
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        _add_positive(requests, resources.get("requests") or {})
        if not set(QOS_RESOURCES) <= _add_positive(limits, resources.get("limits") or {}):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and len(requests) == len(limits) and all(
            limits.get(name) == value for name, value in requests.items()):
        return GUARANTEED
    return BURSTABLE


def oom_score_adj(pod: Mapping[str, Any], container: Mapping[str, Any], *,
                  memory_capacity: int) -> int:
    """GetContainerOOMScoreAdjust: -997 Guaranteed, 1000 BestEffort, and for Burstable
    1000 - 1000*request/capacity kept within [3, 999] (above a Guaranteed pod's, below a
    BestEffort one's: the more it asks, the safer)."""
    qos = pod_qos_class(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT or memory_capacity <= 0:
        return BEST_EFFORT_OOM_SCORE_ADJ
    request = ((container.get("resources") or {}).get("requests") or {}).get("memory")
    try:
        request_bytes = int(parse_quantity(str(request))) if request is not None else 0
    except QuantityError:
        request_bytes = 0
    adjust = 1000 - (1000 * request_bytes) // memory_capacity
    return min(max(adjust, 1000 + GUARANTEED_OOM_SCORE_ADJ), BEST_EFFORT_OOM_SCORE_ADJ - 1)
