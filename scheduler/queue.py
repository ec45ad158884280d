"""The scheduling queue: which pod to try next, and when to try a failed one again.

Every pod the queue knows is in exactly one place:

- active: waiting for the scheduling loop, the highest spec.priority first and, among
  equals, first in first out (kube's PrioritySort queue-sort plugin);
- backing off: a failed attempt, retried when its back-off ends (1 s doubling to
  60 s per pod), or earlier when a node change makes it fit (`move_matching`);
- in flight: popped by the loop, until `done` (bound or dropped) or `failed`.

A node change that arrives while a pod is in flight is remembered, so the pod goes
straight back to active when its attempt fails (kube's moveRequestCycle). The loop
sleeps until a pod is added or the earliest back-off ends: no polling.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.backoff import exponential
from scheduler.framework import node_condition
from scheduler.pods import pod_key

INITIAL_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0


def backoff_seconds(attempts: int, *, initial: float = INITIAL_BACKOFF_SECONDS,
                    maximum: float = MAX_BACKOFF_SECONDS) -> float:
    """Back-off after `attempts` failed attempts: initial, doubled each time, capped."""
    return exponential(attempts, initial=initial, cap=maximum)


def pod_priority(pod: Mapping[str, Any]) -> int:
    """spec.priority, 0 when unset (corev1helpers.PodPriority)."""
    return int((pod.get("spec") or {}).get("priority") or 0)


def spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a pod update could change where it fits (not our own status writes)."""
    return bool(old.get("spec") != new.get("spec")
                or (old.get("metadata") or {}).get("labels")
                != (new.get("metadata") or {}).get("labels"))


def node_change_could_help(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a node add/update may let a waiting pod fit: a new node, new labels,
    a new Ready status, cordon/uncordon, new taints, or a new allocatable.
    Heartbeats are not."""
    if old is None:
        return True
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    return bool(
        (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels")
        or bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable"))
        or old_spec.get("taints") != new_spec.get("taints")
        or (old.get("status") or {}).get("allocatable")
        != (new.get("status") or {}).get("allocatable")
        or node_condition(old, "Ready") != node_condition(new, "Ready"))


# Cluster events, and which plugins' rejections each may undo (kube's EventsToRegister).
NODE_ADDED, NODE_CHANGED = "NodeAdd", "NodeUpdate"
POD_ADDED, POD_DELETED = "AssignedPodAdd", "AssignedPodDelete"
POD_EVENTS = frozenset({POD_ADDED, POD_DELETED})
PLUGIN_EVENTS: dict[str, frozenset[str]] = {
    "NodeUnschedulable": frozenset({NODE_ADDED, NODE_CHANGED}),
    "NodeName": frozenset({NODE_ADDED}),
    "NodeReady": frozenset({NODE_ADDED, NODE_CHANGED}),
    "TaintToleration": frozenset({NODE_ADDED, NODE_CHANGED}),
    "NodeAffinity": frozenset({NODE_ADDED, NODE_CHANGED}),
    "NodeResourcesFit": frozenset({NODE_ADDED, NODE_CHANGED, POD_DELETED}),
    "PodTopologySpread": frozenset({NODE_ADDED, NODE_CHANGED, POD_ADDED, POD_DELETED}),
    "InterPodAffinity": frozenset({NODE_ADDED, NODE_CHANGED, POD_ADDED, POD_DELETED}),
}


def interested(rejected_by: frozenset[str], event: str | None) -> bool:
    """Whether `event` may undo a rejection by these plugins (unknown plugins: yes)."""
    if event is None or not rejected_by:
        return True
    return any(event in PLUGIN_EVENTS.get(name, frozenset({event})) for name in rejected_by)


@dataclass(eq=False)
class QueuedPod:
    key: str
    pod: dict[str, Any]
    attempts: int = 0
    ready_at: float = 0.0
    # True when the last attempt found no fitting node (a node change may help);
    # False after an error (only the back-off helps).
    unschedulable: bool = False
    # The plugins that rejected it last time (kube's UnschedulablePlugins): only events
    # those plugins register for move it back early. Empty: any event may.
    rejected_by: frozenset[str] = frozenset()
    moved_while_in_flight: bool = False
    first_queued: float = 0.0
    active_seq: int = -1  # of its entry in the active heap, while it is active


@dataclass
class SchedulingQueue:
    clock: Callable[[], float] = time.monotonic
    initial_backoff: float = INITIAL_BACKOFF_SECONDS
    max_backoff: float = MAX_BACKOFF_SECONDS
    _pods: dict[str, QueuedPod] = field(default_factory=dict)
    # (-priority, seq, pod): a heap; entries of pods that left are skipped when popped
    _active: list[tuple[int, int, QueuedPod]] = field(default_factory=list)
    _active_keys: dict[str, QueuedPod] = field(default_factory=dict)
    _backoff: dict[str, QueuedPod] = field(default_factory=dict)
    _backoff_heap: list[tuple[float, int, QueuedPod]] = field(default_factory=list)
    _in_flight: dict[str, QueuedPod] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    # -- informer side ---------------------------------------------------------------

    def add(self, pod: dict[str, Any]) -> None:
        """A pod to schedule (new, or seen again after a relist)."""
        key = pod_key(pod)
        item = self._pods.get(key)
        if item is not None:
            self.update(item.pod, pod)
            return
        item = QueuedPod(key, pod, first_queued=self.clock())
        self._pods[key] = item
        self._push_active(item)

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = pod_key(new)
        item = self._pods.get(key)
        if item is None:
            self.add(new)
            return
        changed = spec_changed(item.pod, new)
        item.pod = new
        if not changed:
            return
        if key in self._backoff:
            self._move_to_active(item)
        elif key in self._in_flight:
            item.moved_while_in_flight = True

    def delete(self, pod: Mapping[str, Any]) -> None:
        """Forget a pod (deleted, bound, or no longer ours). Unknown pods are fine."""
        key = pod_key(pod)
        item = self._pods.pop(key, None)
        if item is None:
            return
        self._backoff.pop(key, None)
        self._in_flight.pop(key, None)
        self._active_keys.pop(key, None)

    def move_matching(self, could_fit: Callable[[dict[str, Any]], bool], *,
                      event: str | None = None,
                      could_help: Callable[[QueuedPod], bool] | None = None) -> int:
        """Retry now the unschedulable pods that `could_fit` says would fit now.

        With `event`, only pods rejected by a plugin that registers for it are asked
        (kube's QueueingHints: a pod rejected for its node selector does not wake up
        when some pod is deleted), and `could_help` (a cheap per-pod hint) before the
        costlier `could_fit`. Pods in flight are marked instead, to come straight
        back if their attempt fails. Returns how many waiting pods were moved.
        """
        moved = 0
        for item in list(self._backoff.values()):
            if (item.unschedulable and interested(item.rejected_by, event)
                    and (could_help is None or could_help(item)) and could_fit(item.pod)):
                self._move_to_active(item)
                moved += 1
        if event in POD_EVENTS:
            # A pod in flight is being bound: a pod event cannot spoil that, and checking
            # each one against every bind the informer reports would cost a cycle each.
            return moved
        for item in self._in_flight.values():
            if not item.moved_while_in_flight and could_fit(item.pod):
                item.moved_while_in_flight = True
        return moved

    def has_waiting(self) -> bool:
        """Whether any pod backs off or is in flight (what `move_matching` looks at)."""
        return bool(self._backoff or self._in_flight)

    def has_unschedulable(self) -> bool:
        """Whether any pod waits because no node fit it (so cluster events matter)."""
        return any(item.unschedulable for item in self._backoff.values())

    # -- scheduling loop side ---------------------------------------------------------

    def pop_ready(self) -> QueuedPod | None:
        """The next pod to try now, or None; it stays in flight until done/failed."""
        self._flush_backoff()
        while self._active:
            _, seq, item = heapq.heappop(self._active)
            if self._active_keys.get(item.key) is item and item.active_seq == seq:
                break
        else:
            return None
        del self._active_keys[item.key]
        item.moved_while_in_flight = False
        self._in_flight[item.key] = item
        return item

    async def pop(self) -> QueuedPod:
        """Wait for the next pod to try: sleeps until one is added or a back-off ends."""
        while True:
            self._wakeup.clear()
            item = self.pop_ready()
            if item is not None:
                return item
            timeout = self.seconds_until_next_backoff()
            try:
                async with asyncio.timeout(timeout):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def done(self, item: QueuedPod) -> None:
        """The pod was bound, or will never be ours: forget it."""
        if self._pods.get(item.key) is item:
            del self._pods[item.key]
            self._in_flight.pop(item.key, None)

    def failed(self, item: QueuedPod, *, unschedulable: bool,
               rejected_by: frozenset[str] = frozenset()) -> float:
        """Back off a failed attempt; returns the seconds until the retry (0 = now)."""
        if self._pods.get(item.key) is not item or item.key not in self._in_flight:
            return 0.0
        del self._in_flight[item.key]
        item.attempts += 1
        item.unschedulable = unschedulable
        item.rejected_by = rejected_by
        if item.moved_while_in_flight:
            item.moved_while_in_flight = False
            self._push_active(item)
            return 0.0
        delay = backoff_seconds(item.attempts, initial=self.initial_backoff,
                                maximum=self.max_backoff)
        item.ready_at = self.clock() + delay
        self._backoff[item.key] = item
        heapq.heappush(self._backoff_heap, (item.ready_at, next(self._seq), item))
        self._wakeup.set()  # the sleeping loop may need an earlier deadline
        return delay

    # -- introspection ------------------------------------------------------------------

    def seconds_until_next_backoff(self) -> float | None:
        self._drop_stale_heap_entries()
        if not self._backoff_heap:
            return None
        return max(self._backoff_heap[0][0] - self.clock(), 0.0)

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def counts(self) -> dict[str, int]:
        """Pods per place: `active`, then the waiting ones split by why their last attempt
        failed (`unschedulable`: no node fit; `backoff`: an error), then `in_flight`."""
        unschedulable = sum(1 for item in self._backoff.values() if item.unschedulable)
        return {"active": len(self._active_keys), "backoff": len(self._backoff) - unschedulable,
                "unschedulable": unschedulable, "in_flight": len(self._in_flight)}

    # -- internals ----------------------------------------------------------------------

    def _push_active(self, item: QueuedPod) -> None:
        item.active_seq = next(self._seq)
        self._active_keys[item.key] = item
        heapq.heappush(self._active, (-pod_priority(item.pod), item.active_seq, item))
        self._wakeup.set()

    def _move_to_active(self, item: QueuedPod) -> None:
        del self._backoff[item.key]  # its heap entry goes stale and is skipped
        self._push_active(item)

    def _drop_stale_heap_entries(self) -> None:
        """Pop heap entries of pods that left back-off (or re-entered it later)."""
        heap = self._backoff_heap
        while heap:
            ready_at, _, item = heap[0]
            if self._backoff.get(item.key) is item and ready_at == item.ready_at:
                return
            heapq.heappop(heap)

    def _flush_backoff(self) -> None:
        now = self.clock()
        while True:
            self._drop_stale_heap_entries()
            if not self._backoff_heap or self._backoff_heap[0][0] > now:
                return
            _, _, item = heapq.heappop(self._backoff_heap)
            self._move_to_active(item)
