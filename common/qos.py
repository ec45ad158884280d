"""A pod's QoS class, after `pkg/apis/core/v1/helper/qos.ComputePodQOS`: the apiserver
defaults `status.qosClass` with it and the kubelet reports it and turns it into the
containers' OOM score (kubelet/qos.py)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

QOS_RESOURCES = ("cpu", "memory")  # isSupportedQoSComputeResource

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


def qos_class(spec: Mapping[str, Any]) -> str:
    """Guaranteed when every container (init containers too) limits both cpu and memory
    and the summed requests equal the summed limits; BestEffort when none requests or
    limits cpu or memory; else Burstable. Ephemeral containers do not count."""
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
