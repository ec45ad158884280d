"""TaintToleration: a node's NoSchedule/NoExecute taints must be tolerated by the pod.

Filter wording as kube-scheduler: `node(s) had untolerated taint {key: value}` (the
first untolerated one). PreferNoSchedule taints only score: a node loses for each one
the pod does not tolerate (counting only tolerations with no effect or
PreferNoSchedule, as kube), normalized in reverse so the cleanest node gets 100;
weight 3 in the profile, as kube's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from scheduler.framework import (
    SUCCESS,
    Cluster,
    FilterPlugin,
    NodeInfo,
    Pod,
    ScoreFunc,
    ScorePlugin,
    Status,
    default_normalize,
    tolerates,
    unschedulable,
)

NAME = "TaintToleration"
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def untolerated_taint_reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    if not node_info.hard_taints:
        return SUCCESS
    tolerations = (pod.get("spec") or {}).get("tolerations")
    for taint in node_info.hard_taints:  # the NoSchedule and NoExecute ones
        effect = str(taint.get("effect"))
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        if not tolerates(tolerations, key=key, effect=effect, value=value):
            return unschedulable(untolerated_taint_reason(key, value), unresolvable=True)
    return SUCCESS


def intolerable_prefer_no_schedule(tolerations: Sequence[Mapping[str, Any]],
                                   node_info: NodeInfo) -> int:
    count = 0
    if not node_info.prefers_no_schedule:
        return 0
    for taint in (node_info.node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") != "PreferNoSchedule":
            continue
        if not tolerates(tolerations, key=str(taint.get("key") or ""),
                         value=str(taint.get("value") or ""), effect="PreferNoSchedule"):
            count += 1
    return count


def pre_score(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster) -> ScoreFunc | None:
    if not cluster.fact("prefer_no_schedule_nodes") or not any(
            info.prefers_no_schedule for info in feasible):
        return None  # every node would score the same
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or ()
                   if (t.get("effect") or "") in ("", "PreferNoSchedule")]
    return lambda _pod, node_info: intolerable_prefer_no_schedule(tolerations, node_info)


PLUGIN = FilterPlugin(NAME, filter=fits, passes_clean_nodes=True)
SCORE = ScorePlugin(NAME, pre_score=pre_score,
                    normalize=partial(default_normalize, reverse=True), weight=3)
