"""NodeSelector: every `spec.nodeSelector` pair must be a label of the node.

This is the nodeSelector half of kube-scheduler's NodeAffinity plugin, with its reason
wording, so the message matches what `kubectl describe pod` shows on a real cluster.
"""

from __future__ import annotations

from scheduler.framework import SUCCESS, FilterPlugin, NodeInfo, Pod, Status, unschedulable

NAME = "NodeSelector"
ERR_REASON = "node(s) didn't match Pod's node affinity/selector"


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if not selector:
        return SUCCESS
    labels = (node_info.node.get("metadata") or {}).get("labels") or {}
    if all(labels.get(key) == value for key, value in selector.items()):
        return SUCCESS
    return unschedulable(ERR_REASON, unresolvable=True)


PLUGIN = FilterPlugin(NAME, filter=fits)
