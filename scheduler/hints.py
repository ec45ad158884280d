"""Queueing hints for pod events (kube's `isSchedulableAfterPodChange` of each plugin):
whether a pod placed or deleted could let a waiting pod fit, cheaply, before the
scheduler checks that pod against the node's filters.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.framework import Pod
from scheduler.labels import pod_labels, pod_namespace, pod_terms
from scheduler.plugins import topology_spread
from scheduler.queue import POD_ADDED, POD_DELETED


def pod_event_could_help(waiting: Pod, rejected_by: frozenset[str], changed: Pod,
                         event: str, namespace_labels: Mapping[str, Mapping[str, str]]
                         ) -> bool:
    """Whether `changed` (placed: POD_ADDED, gone: POD_DELETED) may undo a rejection of
    `waiting` by the plugins in `rejected_by` (empty: unknown, so yes)."""
    if not rejected_by:
        return True
    if "NodeResourcesFit" in rejected_by and event == POD_DELETED:
        return True  # any pod gone frees a pod slot, and maybe requests
    if "InterPodAffinity" in rejected_by:
        own = pod_terms(waiting)
        if event == POD_ADDED and any(t.matches(changed, namespace_labels)
                                      for t in own.required_affinity):
            return True
        if event == POD_DELETED:
            if any(t.matches(changed, namespace_labels) for t in own.required_anti_affinity):
                return True
            if any(t.matches(waiting, namespace_labels)
                   for t in pod_terms(changed).required_anti_affinity):
                return True
    if "PodTopologySpread" in rejected_by:
        namespace, labels = pod_namespace(changed), pod_labels(changed)
        if namespace == pod_namespace(waiting) and any(
                c.selector.matches(labels)
                for c in topology_spread.constraints_of(waiting, "DoNotSchedule")):
            return True
    return False
