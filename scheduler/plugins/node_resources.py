"""NodeResourcesFit and NodeResourcesBalancedAllocation (kube's `noderesources`).

Fit: the pod's requests (computed once per cycle, `scheduler.resources.pod_requests`)
must fit in the node's allocatable minus what its pods request already, and one more
pod must fit in `allocatable.pods`. Reasons in kube's words: "Insufficient cpu",
"Insufficient memory", "Insufficient ephemeral-storage", "Insufficient <extended
resource>", "Too many pods"; a node may fail for several at once (each is counted).

Scores, on cpu and memory with weight 1 each (kube's defaults):
- LeastAllocated (NodeResourcesFit's default strategy): the free share of each
  resource after placing the pod, with kube's non-zero defaults for pods that request
  nothing, averaged;
- BalancedAllocation: 100 × (1 − the standard deviation of the requested shares), so
  nodes whose cpu and memory fill up evenly win; skipped for pods that request nothing.

A node that reports no `status.allocatable` at all (an API-only Node) is not
resource-checked and scores 0 on both: nothing is known about it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    Cluster,
    Code,
    FilterFunc,
    FilterPlugin,
    NodeInfo,
    Pod,
    ScoreFunc,
    ScorePlugin,
    Status,
)
from scheduler.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    Resources,
    pod_requests,
)

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
TOO_MANY_PODS = "Too many pods"
SCORED_RESOURCES = (CPU, MEMORY)


def insufficient(name: str) -> str:
    return f"Insufficient {name}"


def insufficient_resources(request: Resources, node_info: NodeInfo) -> list[str]:
    """Every reason the pod does not fit, in kube's order (pods, cpu, memory,
    ephemeral-storage, then extended resources by name)."""
    alloc = node_info.allocatable
    if not alloc.limited:
        return []
    reasons = []
    if node_info.pod_count + 1 > alloc.pods:
        reasons.append(TOO_MANY_PODS)
    if request.is_zero:
        return reasons
    have, used = alloc.resources, node_info.requested
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        wanted = request.get(name)
        if wanted > 0 and wanted > have.get(name) - used.get(name):
            reasons.append(insufficient(name))
    for name in sorted(request.scalar):
        wanted = request.scalar[name]
        if wanted > 0 and wanted > have.get(name) - used.get(name):
            reasons.append(insufficient(name))
    return reasons


def fit_filter(request: Resources) -> FilterFunc:
    def fits(pod: Pod, node_info: NodeInfo) -> Status:
        if not node_info.allocatable.limited:
            return SUCCESS
        reasons = insufficient_resources(request, node_info)
        if not reasons:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, tuple(reasons))
    return fits


def pre_filter(pod: Pod, cluster: Cluster) -> FilterFunc | None:
    if not cluster.fact("limited_nodes"):
        return None  # no node reports allocatable: nothing to check
    return fit_filter(pod_requests(pod))


# -- scoring ----------------------------------------------------------------------------


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_allocated(request: Resources, node_info: NodeInfo) -> int:
    """kube's leastResourceScorer over cpu and memory, weight 1 each."""
    alloc = node_info.allocatable
    if not alloc.limited:
        return 0
    total = weights = 0
    for name in SCORED_RESOURCES:
        capacity = alloc.resources.get(name)
        if capacity == 0:
            continue
        requested = node_info.non_zero_requested.get(name) + request.get(name)
        total += least_requested_score(requested, capacity)
        weights += 1
    return total // weights if weights else 0


def balanced_allocation(request: Resources, node_info: NodeInfo) -> int:
    """kube's balancedResourceScorer: (1 - std of the requested fractions) x 100."""
    alloc = node_info.allocatable
    if not alloc.limited:
        return 0
    fractions = []
    for name in SCORED_RESOURCES:
        capacity = alloc.resources.get(name)
        if capacity == 0:
            continue
        requested = node_info.requested.get(name) + request.get(name)
        fractions.append(min(requested / capacity, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def any_limited(feasible: Sequence[NodeInfo], cluster: Cluster) -> bool:
    return bool(cluster.fact("limited_nodes")) and any(
        info.allocatable.limited for info in feasible)


def pre_score_least(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster
                    ) -> ScoreFunc | None:
    if not any_limited(feasible, cluster):
        return None  # nothing known about any node's size: every one would score 0
    request = pod_requests(pod, non_zero=True)
    return lambda _pod, node_info: least_allocated(request, node_info)


def pre_score_balanced(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster
                       ) -> ScoreFunc | None:
    request = pod_requests(pod)
    if not any(request.get(name) for name in SCORED_RESOURCES) or not any_limited(
            feasible, cluster):
        return None  # kube skips pods that request none of the scored resources
    return lambda _pod, node_info: balanced_allocation(request, node_info)


FIT_PLUGIN = FilterPlugin(FIT, pre_filter=pre_filter)
LEAST_ALLOCATED_PLUGIN = ScorePlugin(FIT, pre_score=pre_score_least, weight=1)
BALANCED_PLUGIN = ScorePlugin(BALANCED, pre_score=pre_score_balanced, weight=1)
