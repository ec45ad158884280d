"""The node lifecycle controller (pkg/controller/nodelifecycle): a node whose kubelet stops
heartbeating goes Ready=Unknown and is tainted, so that its pods are evicted.

Every `--node-monitor-period` it looks at each node. A heartbeat is a change of the Ready
condition's lastHeartbeatTime or of the node's Lease (`kube-node-lease/<node>`) renewTime,
timed on this controller's own clock when it sees the change (never the kubelet's clock,
as kube's probeTimestamp). A node not heard from for `--node-monitor-grace-period`
(`--node-startup-grace-period` while it never posted a Ready condition) has its Ready,
MemoryPressure, DiskPressure and PIDPressure conditions set to Unknown with kube's reasons
and messages, its pods marked not Ready, and a `NodeNotReady` event.

The taints follow the Ready condition (doNoExecuteTaintingPass and the taint-by-condition
pass): Ready=False → `node.kubernetes.io/not-ready`, Ready=Unknown →
`node.kubernetes.io/unreachable`, each with a NoExecute (timeAdded set) and a NoSchedule
taint; Ready=True removes them. Evicting the pods is the taint eviction controller's job
(controller_manager/tainteviction.py).

Not done: zone disruption states (kube stops evicting when a whole zone goes dark) and
the eviction rate limits that go with them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.errors import ApiError, Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformerFactory, with_index
from common.timestamps import rfc3339

log = logging.getLogger("controller_manager.nodelifecycle")

NAME = "node-lifecycle-controller"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
CONTROLLED_TAINT_KEYS = (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY)
# The conditions the controller sets to Unknown (nodeConditionType in kube's controller).
MONITORED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
REASON_UNKNOWN = "NodeStatusUnknown"
MESSAGE_UNKNOWN = "Kubelet stopped posting node status."
REASON_NEVER = "NodeStatusNeverUpdated"
MESSAGE_NEVER = "Kubelet never posted node status."

Object = dict[str, Any]


@dataclass(frozen=True)
class Config:
    monitor_period: float = 5.0  # --node-monitor-period
    grace_period: float = 40.0  # --node-monitor-grace-period
    startup_grace_period: float = 60.0  # --node-startup-grace-period


# -- pure decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    """What the controller last saw of a node's heartbeats, and when (its monotonic clock)."""

    heartbeat: str | None  # the Ready condition's lastHeartbeatTime
    lease_renewed: str | None  # the node Lease's renewTime
    probed_at: float


def condition(node: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def ready_status(node: Mapping[str, Any]) -> str | None:
    """"True", "False", "Unknown", or None when the node never posted a Ready condition."""
    ready = condition(node, "Ready")
    return str(ready.get("status")) if ready is not None else None


def observe(previous: Health | None, node: Mapping[str, Any], lease: Mapping[str, Any] | None,
            now: float) -> Health:
    """The node's health after this look: probed now when a heartbeat moved (or first seen)."""
    ready = condition(node, "Ready")
    heartbeat = str(ready.get("lastHeartbeatTime") or "") or None if ready else None
    renewed = str(((lease or {}).get("spec") or {}).get("renewTime") or "") or None
    if (previous is None or previous.heartbeat != heartbeat
            or previous.lease_renewed != renewed):
        return Health(heartbeat, renewed, now)
    return previous


def grace_exceeded(health: Health, node: Mapping[str, Any], now: float,
                   config: Config) -> bool:
    grace = (config.startup_grace_period if condition(node, "Ready") is None
             else config.grace_period)
    return now > health.probed_at + grace


def unknown_conditions(node: Mapping[str, Any], stamp: str) -> list[Object] | None:
    """The node's conditions with the monitored ones Unknown, as kube words them; None when
    they already are (nothing to write)."""
    conditions = [dict(c) for c in (node.get("status") or {}).get("conditions") or []
                  if isinstance(c, Mapping)]
    by_type = {c.get("type"): c for c in conditions}
    changed = False
    for kind in MONITORED_CONDITIONS:
        current = by_type.get(kind)
        if current is None:
            created = str((node.get("metadata") or {}).get("creationTimestamp") or stamp)
            conditions.append({"type": kind, "status": "Unknown", "reason": REASON_NEVER,
                               "message": MESSAGE_NEVER, "lastHeartbeatTime": created,
                               "lastTransitionTime": stamp})
            changed = True
        elif current.get("status") != "Unknown":
            current.update(status="Unknown", reason=REASON_UNKNOWN, message=MESSAGE_UNKNOWN,
                           lastTransitionTime=stamp)
            changed = True
    return conditions if changed else None


def taint_key_for(ready: str | None) -> str | None:
    """The taint a node's Ready status calls for; None for a Ready (or unreported) node."""
    if ready == "False":
        return NOT_READY_TAINT_KEY
    if ready == "Unknown":
        return UNREACHABLE_TAINT_KEY
    return None


def desired_taints(taints: Sequence[Mapping[str, Any]], ready: str | None,
                   stamp: str) -> list[Object] | None:
    """The node's taints with ours matching its Ready status (NoExecute with timeAdded, and
    NoSchedule); None when they already match. Others' taints are kept as they are."""
    wanted_key = taint_key_for(ready)
    kept = [dict(t) for t in taints
            if t.get("key") not in CONTROLLED_TAINT_KEYS
            or (t.get("key") == wanted_key and t.get("effect") in ("NoExecute", "NoSchedule"))]
    have = {(t.get("key"), t.get("effect")) for t in kept}
    if wanted_key is not None:
        if (wanted_key, "NoSchedule") not in have:
            kept.append({"key": wanted_key, "effect": "NoSchedule"})
        if (wanted_key, "NoExecute") not in have:
            kept.append({"key": wanted_key, "effect": "NoExecute", "timeAdded": stamp})
    current = [dict(t) for t in taints]
    return None if kept == current else kept


def not_ready_pod_conditions(pod: Mapping[str, Any], stamp: str) -> list[Object] | None:
    """MarkPodsNotReady: the pod's conditions with Ready=False; None when it is not Ready."""
    conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []
                  if isinstance(c, Mapping)]
    for cond in conditions:
        if cond.get("type") == "Ready" and cond.get("status") != "False":
            cond.update(status="False", lastTransitionTime=stamp)
            return conditions
    return None


# -- the controller ---------------------------------------------------------------------------


def _node_name_index(pod: Object) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if node else []


class NodeLifecycleController:
    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder,
                 config: Config) -> None:
        self.client = factory.client
        self.recorder = recorder
        self.config = config
        self.nodes = factory.informer("nodes")
        self.leases = factory.informer("leases", namespace=NODE_LEASE_NAMESPACE)
        self.pods = pods_by_node(factory)
        self.health: dict[str, Health] = {}

    async def run(self) -> None:
        await asyncio.gather(self.nodes.wait_synced(), self.leases.wait_synced(),
                             self.pods.wait_synced())
        log.info("%s: caches synced; grace period %gs, monitoring every %gs", NAME,
                 self.config.grace_period, self.config.monitor_period)
        while True:
            await self.monitor_once()
            await asyncio.sleep(self.config.monitor_period)

    async def monitor_once(self) -> None:
        now = time.monotonic()
        names = set()
        for node in self.nodes.list():
            name = str(node["metadata"]["name"])
            names.add(name)
            try:
                await self._monitor(name, node, now)
            except (ApiError, OSError) as e:
                log.warning("node %s: %s: %s", name, type(e).__name__, e)
        for gone in set(self.health) - names:
            del self.health[gone]

    async def _monitor(self, name: str, node: Object, now: float) -> None:
        lease = self.leases.get(f"{NODE_LEASE_NAMESPACE}/{name}")
        health = self.health[name] = observe(self.health.get(name), node, lease, now)
        if grace_exceeded(health, node, now, self.config):
            node = await self._mark_unknown(name, node, now - health.probed_at)
        await self._taint(name, node)

    async def _mark_unknown(self, name: str, node: Object, silent: float) -> Object:
        was_ready = ready_status(node)
        conditions = unknown_conditions(node, rfc3339())
        if conditions is None:
            return node
        updated = {**node, "status": {**(node.get("status") or {}), "conditions": conditions}}
        try:
            written = await self.client.update_status("nodes", updated)
        except (Conflict, NotFound):
            return node  # changed under us (the kubelet is back?): next pass sees it
        reason = next(c.get("reason") for c in conditions if c.get("type") == "Ready")
        log.info("node %s: no heartbeat for %.0fs: Ready was %s, now Unknown (%s)", name,
                 silent, was_ready, reason)
        if was_ready == "True":
            await self.recorder.event(node_reference(node), "Normal", "NodeNotReady",
                                      f"Node {name} status is now: NodeNotReady")
            await self._mark_pods_not_ready(name)
        return written

    async def _mark_pods_not_ready(self, name: str) -> None:
        for pod in self.pods.by_index(BY_NODE, name):
            conditions = not_ready_pod_conditions(pod, rfc3339())
            if conditions is None:
                continue
            meta = pod["metadata"]
            try:
                await self.client.patch("pods", meta["name"], {
                    "metadata": {"resourceVersion": meta.get("resourceVersion")},
                    "status": {"conditions": conditions}}, namespace=meta.get("namespace"),
                    subresource="status")
            except (Conflict, NotFound):
                continue
            log.info("pod %s/%s: marked not Ready (node %s not ready)", meta.get("namespace"),
                     meta["name"], name)
            await self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")

    async def _taint(self, name: str, node: Object) -> None:
        spec = node.get("spec") or {}
        taints = desired_taints(spec.get("taints") or [], ready_status(node), rfc3339())
        if taints is None:
            return
        updated = {**node, "spec": {**spec, "taints": taints}}
        try:
            await self.client.update("nodes", updated)
        except (Conflict, NotFound):
            return
        ours = [f"{t['key']}:{t['effect']}" for t in taints
                if t.get("key") in CONTROLLED_TAINT_KEYS]
        log.info("node %s: Ready=%s: taints now %s", name, ready_status(node),
                 ", ".join(ours) or f"without {' or '.join(CONTROLLED_TAINT_KEYS)}")


BY_NODE = "spec.nodeName"


def pods_by_node(factory: SharedInformerFactory) -> Any:
    """The factory's pod informer, indexed by node (shared by the node controllers)."""
    return with_index(factory.informer("pods"), BY_NODE, _node_name_index)


def node_reference(node: Mapping[str, Any]) -> Object:
    """The object an event about a node names: kube's recorder gives a node's name as UID."""
    name = (node.get("metadata") or {}).get("name")
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": name}}
