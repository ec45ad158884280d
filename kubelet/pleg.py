"""PLEG and the pod cache: one relist of the node's containers feeds every pod worker.

After kubelet's GenericPLEG (`pkg/kubelet/pleg/generic.go`) and pod cache
(`pkg/kubelet/container/cache.go`). Every `RELIST_SECONDS` the PLEG lists this node's
containers once (one Docker call, whatever the number of pods), diffs the list with the
previous one (`kubelet.runtime.changed_pods`), inspects only what changed, stores each
changed pod's `PodObservation` in the `PodCache` and then wakes those pods' workers.

A worker reads its pod from the cache instead of asking Docker, provided the cached
view was taken after the worker last changed the pod's containers
(`PodCache.get_newer_than`); otherwise it observes the runtime itself and stores what it
saw. That rule is what keeps a cached view from ever hiding a container the worker just
made, which would make it create a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.metrics import Histogram
from kubelet.runtime import (
    SETTLED_STATES,
    ContainerInfo,
    ContainerState,
    ContainerSummary,
    PodObservation,
    Runtime,
    SandboxInfo,
    build_observation,
    changed_pods,
)

log = logging.getLogger(__name__)

RELIST_SECONDS = 1.0
INSPECT_CONCURRENCY = 8



@dataclass(frozen=True)
class CachedPod:
    observation: PodObservation
    at: float  # when the runtime was read (the start of the read), on the cache's clock


class PodCache:
    """The newest runtime view of each pod, with the time it was taken.

    `relisted_at` is the start of the last complete relist: every pod the relist saw
    change was stored before it moved, so each entry (and the absence of one: a pod
    without containers) is valid at least as of that time.
    """

    def __init__(self) -> None:
        self._pods: dict[str, CachedPod] = {}
        self.relisted_at: float | None = None

    def set(self, uid: str, observation: PodObservation, at: float) -> None:
        """Store a view taken at `at`, unless a newer one is already there."""
        current = self._pods.get(uid)
        if current is None or current.at < at:
            self._pods[uid] = CachedPod(observation, at)

    def get_newer_than(self, uid: str, since: float) -> CachedPod | None:
        """The pod's view if it was taken at or after `since`, else None (observe afresh)."""
        entry = self._pods.get(uid)
        if entry is not None and entry.at >= since:
            return entry
        if self.relisted_at is not None and self.relisted_at >= since:
            return CachedPod(entry.observation if entry is not None else PodObservation(),
                             self.relisted_at)
        return None

    def relisted(self, at: float, *, present: Iterable[str]) -> None:
        """A relist that started at `at` is complete and saw containers of `present` pods:
        the others have none (entries older than the relist are dropped)."""
        keep = set(present)
        for uid in [uid for uid, entry in self._pods.items()
                    if uid not in keep and entry.at < at]:
            del self._pods[uid]
        if self.relisted_at is None or at > self.relisted_at:
            self.relisted_at = at

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __len__(self) -> int:
        return len(self._pods)


def group_by_pod(summaries: Iterable[ContainerSummary]) -> dict[str, list[ContainerSummary]]:
    pods: dict[str, list[ContainerSummary]] = {}
    for summary in summaries:
        if summary.pod.uid:
            pods.setdefault(summary.pod.uid, []).append(summary)
    return pods


class Pleg:
    """Relists the runtime, keeps the pod cache current and tells workers what changed."""

    def __init__(self, runtime: Runtime, cache: PodCache, *, on_change: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic,
                 inspect_concurrency: int = INSPECT_CONCURRENCY) -> None:
        self.runtime = runtime
        self.cache = cache
        self.on_change = on_change
        self.clock = clock
        self._previous: dict[str, ContainerSummary] = {}
        # container id -> (its listed state when inspected, what the inspect said)
        self._inspected: dict[str, tuple[ContainerState, ContainerInfo | SandboxInfo]] = {}
        self._limit = asyncio.Semaphore(inspect_concurrency)
        self.relist_duration: Histogram | None = None  # kubelet_pleg_relist_duration_seconds

    async def relist(self) -> list[ContainerSummary]:
        """One relist; raises (and changes nothing) when the runtime does not answer."""
        at = self.clock()
        started = time.perf_counter()
        summaries = await self.runtime.list_summaries()
        current = {s.id: s for s in summaries}
        changed = changed_pods(self._previous, current)
        by_pod = group_by_pod(summaries)
        uids = sorted(uid for uid in changed if uid)
        # Pods left without containers need no inspecting: `relisted` drops their entry.
        present = [uid for uid in uids if uid in by_pod]
        observations = await asyncio.gather(*(self._observe(by_pod[uid]) for uid in present))
        for uid, observation in zip(present, observations, strict=True):
            self.cache.set(uid, observation, at)
        self.cache.relisted(at, present=by_pod)
        self._previous = current
        self._inspected = {cid: seen for cid, seen in self._inspected.items()
                           if cid in current}
        for uid in uids:
            self.on_change(uid)
        if self.relist_duration is not None:
            self.relist_duration.observe(time.perf_counter() - started)
        return summaries

    def relisted(self) -> Iterable[ContainerSummary]:
        """The containers and sandboxes the last relist saw."""
        return self._previous.values()

    async def _observe(self, summaries: list[ContainerSummary]) -> PodObservation:
        found = [await self._inspect(summary) for summary in summaries]
        return build_observation(item for item in found if item is not None)

    async def _inspect(self, summary: ContainerSummary) -> ContainerInfo | SandboxInfo | None:
        seen = self._inspected.get(summary.id)
        if seen is not None and seen[0] == summary.state and summary.state in SETTLED_STATES:
            return seen[1]
        async with self._limit:
            info = await self.runtime.inspect(summary)
        if info is not None:
            self._inspected[summary.id] = (summary.state, info)
        return info

    async def run(self, *, interval: float = RELIST_SECONDS,
                  after_relist: Callable[[list[ContainerSummary]], object] | None = None
                  ) -> None:
        """Relist forever; `after_relist` gets each successful relist's summaries."""
        while True:
            try:
                summaries = await self.relist()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("relist failed: %s: %s", type(e).__name__, e)
            else:
                if after_relist is not None:
                    result = after_relist(summaries)
                    if asyncio.iscoroutine(result):
                        await result
            await asyncio.sleep(interval)
