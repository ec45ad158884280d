"""The taint eviction controller (pkg/controller/tainteviction): pods on a node with
NoExecute taints they do not tolerate are deleted; those that tolerate them for
`tolerationSeconds` are deleted that long after the controller first saw them tainted.

Whatever put the taint there — the node lifecycle controller or `kubectl taint` — the
rule is the same (GetMatchingTolerations and getMinTolerationTime in kube):
- a taint no toleration matches: delete now;
- all matched: wait the smallest tolerationSeconds of the matching tolerations (<= 0 is
  now); none of them with tolerationSeconds: never.

A pod is deleted with its own grace period, after a `DisruptionTarget` condition
(`DeletionByTaintManager`) and a `TaintManagerEviction` event ("Marking for deletion Pod
ns/name"); a pending eviction whose taint went away is cancelled with one ("Cancelling
deletion of Pod ns/name"). The waits live in the work queue (`add_after`); a restart starts
them over, as kube's timed workers do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from common.client import ApiClient
from common.errors import ApiError, Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from common.timestamps import rfc3339
from controller_manager.controller import QueueController, key_of
from controller_manager.nodelifecycle import BY_NODE, pods_by_node

log = logging.getLogger("controller_manager.tainteviction")

NAME = "taint-eviction-controller"
NEVER = -1.0
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Toleration.ToleratesTaint: the effect matches (or is empty), and the key with the
    operator: Exists (an empty key tolerates every key) or Equal (the default) on value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def no_execute_taints(node: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    return [t for t in taints if isinstance(t, Mapping) and t.get("effect") == "NoExecute"]


def eviction_delay(tolerations: Sequence[Mapping[str, Any]],
                   taints: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds until the pod must go: 0 now, NEVER (-1) when tolerated for good, None when
    the node has no NoExecute taint at all."""
    if not taints:
        return None
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    seconds = [t.get("tolerationSeconds") for t in used]
    limits = [float(s) for s in seconds if isinstance(s, int | float)]
    if not limits:
        return NEVER
    return max(0.0, min(limits))


def disruption_conditions(pod: Mapping[str, Any], stamp: str) -> list[Object]:
    """The pod's conditions with DisruptionTarget=True, as the taint manager sets it."""
    conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []
                  if isinstance(c, Mapping) and c.get("type") != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True",
                       "reason": "DeletionByTaintManager",
                       "message": "Taint manager: deleting due to NoExecute taint",
                       "lastTransitionTime": stamp})
    return conditions


# -- the controller ---------------------------------------------------------------------------


class TaintEvictionController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 8, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.nodes = factory.informer("nodes")
        self.pods = pods_by_node(factory)
        # pod key -> (uid, monotonic time its eviction wait started)
        self.waiting: dict[str, tuple[str, float]] = {}
        # pod key -> uid we deleted: not again while our informer lags behind the delete
        self.evicted: dict[str, str] = {}
        self.nodes.add_event_handler(on_add=self._node_changed,
                                     on_update=lambda old, new: self._node_changed(new, old),
                                     name=f"{NAME} nodes")
        self.pods.add_event_handler(on_add=self._pod_changed,
                                    on_update=lambda _old, new: self._pod_changed(new),
                                    on_delete=self._pod_changed, name=f"{NAME} pods")

    def _node_changed(self, node: Object, old: Object | None = None) -> None:
        if old is not None and no_execute_taints(old) == no_execute_taints(node):
            return
        for pod in self.pods.by_index(BY_NODE, str(node["metadata"]["name"])):
            self.queue.add(key_of(pod))

    def _pod_changed(self, pod: Object) -> None:
        if (pod.get("spec") or {}).get("nodeName") or key_of(pod) in self.waiting:
            self.queue.add(key_of(pod))

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.nodes, self.pods]

    async def sync(self, key: str) -> None:
        pod = self.pods.get(key)
        meta = (pod or {}).get("metadata") or {}
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        if pod is None or meta.get("deletionTimestamp") or not node_name:
            self.waiting.pop(key, None)
            if pod is None:
                self.evicted.pop(key, None)
            return
        uid = str(meta.get("uid") or "")
        if self.evicted.get(key) == uid:
            return
        delay = eviction_delay((pod.get("spec") or {}).get("tolerations") or [],
                               no_execute_taints(self.nodes.get(str(node_name))))
        if delay is None or delay == NEVER:
            if self.waiting.pop(key, None) is not None:
                log.info("pod %s: NoExecute taints on node %s gone or tolerated: eviction "
                         "cancelled", key, node_name)
                await self.recorder.event(pod, "Normal", "TaintManagerEviction",
                                          f"Cancelling deletion of Pod {key}")
            return
        now = time.monotonic()
        seen_uid, since = self.waiting.get(key, ("", now))
        if seen_uid != uid:
            since = now
        self.waiting[key] = (uid, since)
        left = since + delay - now
        if left > 0:
            log.info("pod %s: tolerates node %s's NoExecute taints for %.0fs: evicting in "
                     "%.1fs", key, node_name, delay, left)
            self.queue.add_after(key, left)
            return
        await self._evict(pod, key, str(node_name))

    async def _evict(self, pod: Object, key: str, node_name: str) -> None:
        meta = pod["metadata"]
        log.info("pod %s: evicting from node %s (NoExecute taint)", key, node_name)
        await self.recorder.event(pod, "Normal", "TaintManagerEviction",
                                  f"Marking for deletion Pod {key}")
        try:
            await self.client.patch("pods", meta["name"],
                                    {"status": {"conditions": disruption_conditions(
                                        pod, rfc3339())}},
                                    namespace=meta["namespace"], subresource="status")
        except NotFound:
            self.waiting.pop(key, None)
            return
        except ApiError as e:
            log.warning("pod %s: could not set DisruptionTarget: %s", key, e)
        try:
            await self.client.delete("pods", meta["name"], namespace=meta["namespace"],
                                     preconditions={"uid": str(meta.get("uid") or "")})
        except (NotFound, Conflict):
            pass
        self.waiting.pop(key, None)
        self.evicted[key] = str(meta.get("uid") or "")
