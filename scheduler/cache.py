"""What the scheduler knows about the cluster: nodes and how many pods each one has.

Fed by the node informer and the assigned-pods informer. A pod we have just placed
is "assumed" on its node at once, so the next scheduling cycle counts it even though
the informer has not seen the binding yet (kube-scheduler's assume/forget). When the
informer reports the pod bound, the assumption is confirmed; when a bind fails it is
forgotten; an assumption the informer never confirms (the pod was deleted in between)
expires `assumed_ttl` seconds after its bind finished.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.framework import NodeInfo
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
    _nodes: dict[str, NodeInfo] = field(default_factory=dict)
    _ordered: list[NodeInfo] | None = None
    _bound: dict[str, str] = field(default_factory=dict)  # pod key -> node (informer)
    _assumed: dict[str, Assumed] = field(default_factory=dict)  # pod key -> assumption
    _counts: Counter[str] = field(default_factory=Counter)  # node -> pods on it

    # -- nodes ------------------------------------------------------------------------

    def set_node(self, node: dict[str, Any]) -> NodeInfo:
        name = str(node["metadata"]["name"])
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo(node, self._counts[name])
            self._ordered = None
        else:
            info.node = node
        return info

    def remove_node(self, node: Mapping[str, Any]) -> None:
        if self._nodes.pop(str(node["metadata"]["name"]), None) is not None:
            self._ordered = None

    def node_infos(self) -> list[NodeInfo]:
        """Every node, in a stable order (so a partial search can rotate over them)."""
        if self._ordered is None:
            self._ordered = sorted(self._nodes.values(), key=lambda info: info.name)
        return self._ordered

    def get_node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

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
            self._count(assumed.node, -1)
        previous = self._bound.get(key)
        if previous != node:
            if previous is not None:
                self._count(previous, -1)
            self._bound[key] = node
            self._count(node, +1)

    def remove_pod(self, pod: Mapping[str, Any]) -> None:
        key = pod_key(pod)
        previous = self._bound.pop(key, None)
        if previous is not None:
            self._count(previous, -1)

    def assume(self, pod: Mapping[str, Any], node: str) -> None:
        """Count `pod` on `node` now, before the bind that makes it so."""
        key = pod_key(pod)
        self.forget(pod)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self._assumed[key] = Assumed(node, uid)
        self._count(node, +1)

    def finish_binding(self, pod: Mapping[str, Any]) -> None:
        """The bind succeeded: keep the assumption until the informer confirms it."""
        assumed = self._assumed.get(pod_key(pod))
        if assumed is not None:
            assumed.expires_at = self.clock() + self.assumed_ttl

    def forget(self, pod: Mapping[str, Any]) -> None:
        """The bind failed: the pod is not on that node after all."""
        assumed = self._assumed.pop(pod_key(pod), None)
        if assumed is not None:
            self._count(assumed.node, -1)

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
            self._count(self._assumed.pop(key).node, -1)
        return len(expired)

    def pod_count(self, node: str) -> int:
        return self._counts[node]

    def sizes(self) -> dict[str, int]:
        """Nodes, pods (bound or assumed) and assumed pods known (kube's cache_size)."""
        return {"nodes": len(self._nodes), "pods": len(self._bound.keys() | self._assumed.keys()),
                "assumed_pods": len(self._assumed)}

    # -- internals ----------------------------------------------------------------------

    def _count(self, node: str, delta: int) -> None:
        self._counts[node] += delta
        if self._counts[node] <= 0:
            del self._counts[node]
        info = self._nodes.get(node)
        if info is not None:
            info.pod_count = self._counts[node]
