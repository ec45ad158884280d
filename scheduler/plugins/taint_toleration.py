"""TaintToleration: a node's NoSchedule/NoExecute taints must be tolerated by the pod.

Wording as kube-scheduler: `node(s) had untolerated taint {key: value}`.
PreferNoSchedule taints only matter for scoring, which kubelite does not do yet.
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

NAME = "TaintToleration"
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def untolerated_taint_reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    taints = (node_info.node.get("spec") or {}).get("taints") or ()
    tolerations = (pod.get("spec") or {}).get("tolerations")
    for taint in taints:
        effect = taint.get("effect") or ""
        if effect not in FILTERED_EFFECTS:
            continue
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        if not tolerates(tolerations, key=key, effect=effect, value=value):
            return unschedulable(untolerated_taint_reason(key, value), unresolvable=True)
    return SUCCESS


PLUGIN = FilterPlugin(NAME, filter=fits)
