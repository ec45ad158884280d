"""NodeReady: only nodes whose `Ready` condition is `True`.

Modern kube-scheduler has no such filter: the node lifecycle controller taints a
NotReady node with `node.kubernetes.io/not-ready:NoSchedule` (`unreachable` when the
status is Unknown) and TaintToleration rejects it with "node(s) had untolerated taint
{node.kubernetes.io/not-ready: }". kubelite has no lifecycle controller, so no such
taint exists on the node; quoting one would send a user looking for a taint that is
not there. We use the wording of kube-scheduler's own former condition check
(CheckNodeCondition): "node(s) were not ready", and keep the taint semantics: a pod
that tolerates the taint kube would have put on the node may still go there.
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

NAME = "NodeReady"
ERR_REASON = "node(s) were not ready"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    ready = node_info.ready
    if ready == "True":
        return SUCCESS
    # A node that never reported is treated like one that stopped reporting.
    taint = NOT_READY_TAINT if ready == "False" else UNREACHABLE_TAINT
    if tolerates((pod.get("spec") or {}).get("tolerations"), key=taint, effect="NoSchedule"):
        return SUCCESS
    # kube's not-ready taint: preempting pods would not make the node ready
    return unschedulable(ERR_REASON, unresolvable=True)


PLUGIN = FilterPlugin(NAME, filter=fits, passes_clean_nodes=True)
