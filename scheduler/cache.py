"""What the scheduler knows about the cluster: nodes, the pods on each, their requests.

Fed by the node informer and the assigned-pods informer. A pod we have just placed
is "assumed" on its node at once, so the next scheduling cycle counts it even though
the informer has not seen the binding yet (kube-scheduler's assume/forget). When the
informer reports the pod bound, the assumption is confirmed; when a bind fails it is
forgotten; an assumption the informer never confirms (the pod was deleted in between)
expires `assumed_ttl` seconds after its bind finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.framework import ClusterFacts, NodeInfo
from scheduler.pods import pod_key

ASSUMED_TTL_SECONDS = 30.0


@dataclass
class Assumed:
    node: str
    uid: str
    expires_at: float | None = None  # None while the bind is in flight


@dataclass
class ClusterCache:
    clock: Callable[[], float] = time.monotonic
    assumed_ttl: float = ASSUMED_TTL_SECONDS
    # Every node name with a Node object or pods on it (a pod's informer event may
    # come before its node's): what is placed there survives the node's re-creation.
    _infos: dict[str, NodeInfo] = field(default_factory=dict)
    _nodes: set[str] = field(default_factory=set)  # names with a Node object
    _ordered: list[NodeInfo] | None = None
    _bound: dict[str, str] = field(default_factory=dict)  # pod key -> node (informer)
    _assumed: dict[str, Assumed] = field(default_factory=dict)  # pod key -> assumption
    # Counted over the nodes with a Node object, as they change (Cluster.facts).
    facts: ClusterFacts = field(default_factory=ClusterFacts)

    # -- nodes ------------------------------------------------------------------------

    def set_node(self, node: dict[str, Any]) -> NodeInfo:
        name = str(node["metadata"]["name"])
        info = self._infos.get(name)
        if info is None:
            info = self._infos[name] = NodeInfo(node)
        else:
            if name in self._nodes:
                self.facts.count(info, -1)
            info.set_node(node)
        if name not in self._nodes:
            self._nodes.add(name)
            self._ordered = None
        self.facts.count(info, +1)
        return info

    def remove_node(self, node: Mapping[str, Any]) -> None:
        name = str(node["metadata"]["name"])
        if name in self._nodes:
            self._nodes.discard(name)
            self._ordered = None
            info = self._infos.get(name)
            if info is not None:
                self.facts.count(info, -1)
                if not info.pods:
                    del self._infos[name]

    def node_infos(self) -> list[NodeInfo]:
        """Every node, in a stable order (so a partial search can rotate over them)."""
        if self._ordered is None:
            self._ordered = sorted((self._infos[n] for n in self._nodes),
                                   key=lambda info: info.name)
        return self._ordered

    def get_node(self, name: str) -> NodeInfo | None:
        return self._infos.get(name) if name in self._nodes else None

    # -- pods -------------------------------------------------------------------------

    def set_pod(self, pod: Mapping[str, Any]) -> None:
        """An assigned pod, as the informer sees it now."""
        key = pod_key(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            self.remove_pod(pod)
            return
        assumed = self._assumed.pop(key, None)
        if assumed is not None:
            self._unplace(assumed.node, key)
        previous = self._bound.get(key)
        if previous is not None and previous != node:
            self._unplace(previous, key)
        self._bound[key] = node
        self._place(node, key, pod)  # again when it changed: its requests may have

    def remove_pod(self, pod: Mapping[str, Any]) -> str | None:
        """Forget an assigned pod; the node it was on, if known."""
        key = pod_key(pod)
        previous = self._bound.pop(key, None)
        if previous is not None:
            self._unplace(previous, key)
        return previous

    def assume(self, pod: Mapping[str, Any], node: str) -> None:
        """Count `pod` on `node` now, before the bind that makes it so."""
        key = pod_key(pod)
        self.forget(pod)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self._assumed[key] = Assumed(node, uid)
        self._place(node, key, pod)

    def finish_binding(self, pod: Mapping[str, Any]) -> None:
        """The bind succeeded: keep the assumption until the informer confirms it."""
        assumed = self._assumed.get(pod_key(pod))
        if assumed is not None:
            assumed.expires_at = self.clock() + self.assumed_ttl

    def forget(self, pod: Mapping[str, Any]) -> None:
        """The bind failed: the pod is not on that node after all."""
        key = pod_key(pod)
        assumed = self._assumed.pop(key, None)
        if assumed is not None:
            self._unplace(assumed.node, key)

    def is_assumed(self, pod: Mapping[str, Any]) -> bool:
        """Whether we placed this very pod (same uid) and the informer lags behind."""
        assumed = self._assumed.get(pod_key(pod))
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        return assumed is not None and assumed.uid == uid

    def cleanup_expired(self) -> int:
        now = self.clock()
        expired = [key for key, a in self._assumed.items()
                   if a.expires_at is not None and a.expires_at <= now]
        for key in expired:
            self._unplace(self._assumed.pop(key).node, key)
        return len(expired)

    def pod_count(self, node: str) -> int:
        info = self._infos.get(node)
        return info.pod_count if info is not None else 0

    def sizes(self) -> dict[str, int]:
        """Nodes, pods (bound or assumed) and assumed pods known (kube's cache_size)."""
        return {"nodes": len(self._nodes), "pods": len(self._bound.keys() | self._assumed.keys()),
                "assumed_pods": len(self._assumed)}

    # -- internals ----------------------------------------------------------------------

    def _place(self, node: str, key: str, pod: Mapping[str, Any]) -> None:
        info = self._infos.get(node)
        if info is None:
            info = self._infos[node] = NodeInfo({"metadata": {"name": node}})
        known = node in self._nodes
        if known:
            self.facts.count(info, -1)
        info.add_pod(key, pod)
        if known:
            self.facts.count(info, +1)

    def _unplace(self, node: str, key: str) -> None:
        info = self._infos.get(node)
        if info is None:
            return
        known = node in self._nodes
        if known:
            self.facts.count(info, -1)
        info.remove_pod(key)
        if known:
            self.facts.count(info, +1)
        if not info.pods and node not in self._nodes:
            del self._infos[node]
