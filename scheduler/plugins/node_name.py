"""NodeName: a pod that names its node fits only that node.

A pod created with `spec.nodeName` never reaches the scheduler (it is already bound),
but kube-scheduler keeps this filter for pods that carry a name some other way, and so
do we: it is the cheapest filter and documents the rule.
"""

from __future__ import annotations

from scheduler.framework import (
    SUCCESS,
    Cluster,
    FilterFunc,
    FilterPlugin,
    NodeInfo,
    Pod,
    Status,
    unschedulable,
)

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    wanted = (pod.get("spec") or {}).get("nodeName")
    if not wanted or wanted == node_info.name:
        return SUCCESS
    return unschedulable(ERR_REASON, unresolvable=True)


def pre_filter(pod: Pod, cluster: Cluster) -> FilterFunc | None:
    return fits if (pod.get("spec") or {}).get("nodeName") else None


PLUGIN = FilterPlugin(NAME, filter=fits, pre_filter=pre_filter)
