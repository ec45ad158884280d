"""NodeUnschedulable: skip cordoned nodes (`spec.unschedulable`, i.e. `kubectl cordon`).

A pod that tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint (as
DaemonSet pods do) may still go there, as in kube-scheduler.
"""

from __future__ import annotations

from scheduler.framework import (
    SUCCESS,
    FilterPlugin,
    NodeInfo,
    Pod,
    Status,
    tolerates,
    unschedulable,
)

NAME = "NodeUnschedulable"
ERR_REASON = "node(s) were unschedulable"
TAINT_KEY = "node.kubernetes.io/unschedulable"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    if not node_info.unschedulable:
        return SUCCESS
    if tolerates((pod.get("spec") or {}).get("tolerations"), key=TAINT_KEY, effect="NoSchedule"):
        return SUCCESS
    return unschedulable(ERR_REASON, unresolvable=True)


PLUGIN = FilterPlugin(NAME, filter=fits, passes_clean_nodes=True)
