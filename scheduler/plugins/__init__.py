"""The plugins the scheduler runs, in order. A new plugin: one file here, one line below."""

from __future__ import annotations

from scheduler.framework import FilterPlugin, ScorePlugin
from scheduler.plugins import (
    interpod_affinity,
    least_pods,
    node_affinity,
    node_name,
    node_ready,
    node_resources,
    node_unschedulable,
    taint_toleration,
    topology_spread,
)

# kube-scheduler's default order (NodeReady stands where kube's not-ready taint is
# checked). The first rejecting filter gives the node's reason.
FILTERS: list[FilterPlugin] = [
    node_unschedulable.PLUGIN,
    node_name.PLUGIN,
    node_ready.PLUGIN,
    taint_toleration.PLUGIN,
    node_affinity.FILTER,
    node_resources.FIT_PLUGIN,
    topology_spread.FILTER,
    interpod_affinity.FILTER,
]

# kube's default score plugins and weights; LeastPods is kubelite's own tie-breaker
# (it spreads pods over nodes that report no allocatable, which kube's scores cannot).
SCORERS: list[ScorePlugin] = [
    taint_toleration.SCORE,
    node_resources.LEAST_ALLOCATED_PLUGIN,
    node_resources.BALANCED_PLUGIN,
    node_affinity.SCORE,
    topology_spread.SCORE,
    interpod_affinity.SCORE,
    least_pods.PLUGIN,
]

__all__ = ["FILTERS", "SCORERS"]
