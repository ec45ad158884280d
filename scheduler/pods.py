"""Small pure helpers about pods: keys, and what the scheduler writes back to them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Beyond kube-scheduler: which node failed why, as JSON {"node1": "reason", ...}.
UNSCHEDULABLE_NODES_ANNOTATION = "scheduler.kubelite.io/unschedulable-nodes"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def is_bound(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def scheduler_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")


def unschedulable_condition_patch(pod: Mapping[str, Any], message: str, now: str, *,
                                  reason: str = "Unschedulable") -> dict[str, Any] | None:
    """A merge patch for pods/status setting PodScheduled=False with `reason`
    (Unschedulable, or SchedulerError as kube says when scheduling itself failed), or
    None when the pod already says exactly that.

    A merge patch replaces lists wholesale, so it carries every condition, with ours
    replaced or appended. Only the scheduler writes conditions of an unbound pod.
    """
    conditions = [dict(c) for c in ((pod.get("status") or {}).get("conditions") or ())]
    current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if (current is not None and current.get("status") == "False"
            and current.get("reason") == reason and current.get("message") == message):
        return None
    transition = now
    if current is not None and current.get("status") == "False" and current.get(
            "lastTransitionTime"):
        transition = str(current["lastTransitionTime"])
    condition = {"type": "PodScheduled", "status": "False", "reason": reason,
                 "message": message, "lastTransitionTime": transition}
    if current is not None:
        conditions[conditions.index(current)] = condition
    else:
        conditions.append(condition)
    return {"status": {"conditions": conditions}}


def annotation_patch(pod: Mapping[str, Any], reasons: Mapping[str, str] | None
                     ) -> dict[str, Any] | None:
    """A merge patch setting (or, with None, removing) the per-node reasons annotation;
    None when the pod already carries exactly that."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    current = annotations.get(UNSCHEDULABLE_NODES_ANNOTATION)
    wanted = json.dumps(dict(reasons), sort_keys=True) if reasons is not None else None
    if current == wanted:
        return None
    return {"metadata": {"annotations": {UNSCHEDULABLE_NODES_ANNOTATION: wanted}}}
