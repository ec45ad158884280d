"""A pod's QoS class (after `pkg/apis/core/v1/helper/qos.ComputePodQOS`), which the
kubelet reports in `status.qosClass` and turns into the containers' OOM score
(`pkg/kubelet/qos/policy.go`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from common.quantity import QuantityError, parse_quantity

__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "oom_score_adj", "pod_qos_class"]

# qos/policy.go
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000


def pod_qos_class(pod: Mapping[str, Any]) -> str:
    """The QoS class of a whole pod object (common.qos.qos_class of its spec)."""
    return qos_class(pod.get("spec") or {})


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
