"""One worker per pod, serialising its syncs (after kubelet's pod_workers.go).

This is the per-pod lifecycle only; what one sync does is `kubelet.sync`'s. A pod's
journey through the kubelet, file by file:

- `kubelet.main` wires it all: the pod informer feeds `PodWorkers.update`/`forget`, the
  PLEG (`kubelet.pleg`) pokes the worker of a pod whose containers changed;
- here, each pod gets a worker task that waits to be woken — by a change to the pod in
  the API, by the PLEG, by a back-off that ends, or every `resync_seconds` — and then
  runs one sync in a task of its own, so that a deletion can interrupt it (a pull that
  hangs, say): terminating the pod does not wait for it;
- `kubelet.sync.PodSyncer` syncs it (SyncPod / SyncTerminatingPod), with the image
  manager (`kubelet.images`), the runtime (`kubelet.docker`), the events
  (`kubelet.events`), the prober (`kubelet.prober`: its results decide readiness and
  restarts) and the status manager (`kubelet.status_manager`, created in main and
  passed in);
- once the pod is gone from the API and its containers are removed, the worker ends.

Containers of pods this kubelet no longer has are removed by `cleanup_orphans`, after
each PLEG relist (kubelet's HandlePodCleanups).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from common import timeline
from common.errors import ApiError
from kubelet.actions import Backoff
from kubelet.events import EventSink, Recorder
from kubelet.images import ImageManager
from kubelet.metrics import KubeletMetrics
from kubelet.objects import ObjectManager
from kubelet.pleg import PodCache
from kubelet.prober import ProbeManager
from kubelet.runtime import ContainerSummary, Runtime, RuntimeFailure, pod_ref
from kubelet.status_manager import StatusManager, resource_version
from kubelet.sync import ERROR_RETRY_SECONDS, KubeletConfig, PodState, PodSyncer
from kubelet.volumes import VolumeManager

__all__ = ["KubeletConfig", "PodApi", "PodWorker", "PodWorkers", "differs_semantically"]

log = logging.getLogger(__name__)


class PodApi(Protocol):
    async def get(self, resource: str, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> dict: ...

    async def patch(self, resource: str, name: str, patch: dict, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict: ...

    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None) -> dict: ...


def differs_semantically(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the pod changed in a way the kubelet acts on (not just its status)."""
    def essence(pod: Mapping[str, Any]) -> tuple[Any, ...]:
        meta = pod.get("metadata") or {}
        return (meta.get("uid"), pod.get("spec"), meta.get("labels"), meta.get("annotations"),
                meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds"))
    return essence(old) != essence(new)


@dataclass
class PodWorker(PodState):
    """A pod's state plus its worker: the task, what wakes it, the sync in progress."""

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    terminating: bool = False  # the current sync stops the pod: not to be interrupted
    syncs: int = 0
    task: asyncio.Task[None] | None = None
    sync_task: asyncio.Task[None] | None = None


class PodWorkers:
    """The pod workers of one kubelet, plus orphan cleanup of its containers."""

    def __init__(self, *, runtime: Runtime, api: PodApi, recorder: Recorder | None,
                 config: KubeletConfig, clock: Callable[[], float] = time.monotonic,
                 status: StatusManager | None = None,
                 status_retry_seconds: float = 1.0,
                 objects: ObjectManager | None = None,
                 volumes: VolumeManager | None = None,
                 metrics: KubeletMetrics | None = None) -> None:
        self.runtime = runtime
        self.metrics = metrics
        self.config = config
        self.clock = clock
        self.events = EventSink(recorder)
        self.cache = PodCache()
        self.status = status if status is not None else StatusManager(
            api, retry_seconds=status_retry_seconds)
        self.images = ImageManager(runtime, self.events, clock=clock, objects=objects)
        self.prober = ProbeManager(runtime, self.events, on_change=self.poke, clock=clock)
        self.volumes = volumes
        self.syncer = PodSyncer(runtime=runtime, api=api, status=self.status,
                                events=self.events, images=self.images, cache=self.cache,
                                config=config, prober=self.prober, objects=objects,
                                volumes=volumes, clock=clock, metrics=metrics)
        self.workers: dict[str, PodWorker] = {}
        self._orphans_in_progress: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def crash_backoff(self) -> Backoff:
        return self.syncer.crash_backoff

    @property
    def pull_backoff(self) -> Backoff:
        return self.images.backoff

    # --- inputs: the informer and the PLEG ---------------------------------------------
    def update(self, pod: dict) -> None:
        ref = pod_ref(pod)
        worker = self.workers.get(ref.uid)
        if worker is None:
            # Whatever the cache holds was read before this worker existed: its first
            # view comes from the runtime, or from a relist that started after now.
            worker = PodWorker(pod=pod, ref=ref, acted_at=self.clock(), first_seen=self.clock())
            self.workers[ref.uid] = worker
            self.events.note(ref.uid, timeline.KUBELET_SEEN)
            self.events.note(ref.uid, timeline.KUBELET_SEEN_REVISION,
                             str(resource_version(pod)))
            worker.task = asyncio.create_task(self._run(worker), name=f"pod-worker {ref.key}")
            log.info("%s: new pod worker (uid %s)", ref.key, ref.uid)
            worker.wake.set()
            return
        if resource_version(pod) < resource_version(worker.pod):
            return  # older than what we already have
        previous, worker.pod = worker.pod, pod
        self.status.pod_updated(pod)
        if (pod.get("metadata") or {}).get("deletionTimestamp") and \
                not (previous.get("metadata") or {}).get("deletionTimestamp"):
            self._interrupt(worker, "the pod is being deleted")
        # Like the kubelet's config source: a status-only change (most often our own
        # write coming back) is no reason to sync again.
        if differs_semantically(previous, pod):
            worker.wake.set()

    def forget(self, pod: dict) -> None:
        """The pod object is gone from the API: stop and remove whatever it still runs."""
        worker = self.workers.get(pod_ref(pod).uid)
        if worker is not None:
            worker.removed = True
            self._interrupt(worker, "the pod was removed")
            worker.wake.set()

    def poke(self, uid: str) -> None:
        worker = self.workers.get(uid)
        if worker is not None:
            worker.wake.set()

    def poke_all(self, uids: set[str]) -> None:
        for uid in uids:
            self.poke(uid)

    def known_uids(self) -> set[str]:
        return set(self.workers)

    def get_pod(self, namespace: str, name: str) -> dict | None:
        for worker in self.workers.values():
            if worker.ref.namespace == namespace and worker.ref.name == name \
                    and not worker.removed:
                return worker.pod
        return None

    async def stop(self) -> None:
        """Stop working (kubelet shutdown): containers are left running, like the kubelet."""
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        tasks += list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.prober.stop()
        await self.status.stop()
        await self.events.flush()

    def _interrupt(self, worker: PodWorker, why: str) -> None:
        """Cancel a sync in progress (unless it already stops the pod): kube cancels the
        sync's context when a pod is deleted, so a slow pull does not delay the kill."""
        task = worker.sync_task
        if task is not None and not task.done() and not worker.terminating:
            log.info("%s: interrupting the sync in progress: %s", worker.ref.key, why)
            task.cancel()

    # --- the worker loop ---------------------------------------------------------------
    async def _run(self, worker: PodWorker) -> None:
        while True:
            timeout = max(worker.wake_at - self.clock(), 0.0)
            if not worker.wake.is_set() and timeout > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    async with asyncio.timeout(timeout):
                        await worker.wake.wait()
            worker.wake.clear()
            worker.wake_at = self.clock() + self.config.resync_seconds
            await self._sync_once(worker)
            if worker.finished and worker.removed:
                self._done(worker)
                return

    async def _sync_once(self, worker: PodWorker) -> None:
        """One sync in its own task, so that a deletion can interrupt it."""
        worker.syncs += 1
        worker.terminating = worker.removed or bool(
            (worker.pod.get("metadata") or {}).get("deletionTimestamp"))
        worker.sync_task = asyncio.create_task(self.syncer.sync(worker),
                                               name=f"pod-sync {worker.ref.key}")
        started = time.perf_counter()
        failed = True
        try:
            await worker.sync_task
            failed = False
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the kubelet is stopping (awaiting the sync cancelled it too)
            log.info("%s: sync interrupted", worker.ref.key)
        except (httpx.HTTPError, ApiError, RuntimeFailure) as e:
            log.warning("%s: sync failed: %s: %s", worker.ref.key, type(e).__name__, e)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
        except Exception:
            log.exception("%s: sync failed", worker.ref.key)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
        finally:
            worker.sync_task = None
            worker.terminating = False
            if self.metrics is not None:
                self.metrics.pod_worker.observe(time.perf_counter() - started,
                                                ("create" if worker.syncs == 1 else "sync",))
        if failed:
            # It may have changed containers without getting to record it.
            worker.acted_at = self.clock()

    def _done(self, worker: PodWorker) -> None:
        uid = worker.ref.uid
        self.workers.pop(uid, None)
        self.syncer.forget(uid)
        self.status.forget(uid)
        self.cache.forget(uid)
        log.info("%s: pod worker done", worker.ref.key)

    def _retry_in(self, worker: PodWorker, seconds: float) -> None:
        worker.wake_at = min(worker.wake_at, self.clock() + seconds)

    # --- containers of pods this kubelet no longer has ---------------------------------
    async def cleanup_orphans(self, summaries: list[ContainerSummary]) -> None:
        """Remove our containers whose pod this kubelet no longer has (only ours: by label)."""
        known = self.known_uids()
        orphans: dict[str, list[ContainerSummary]] = {}
        for summary in summaries:
            if summary.pod.uid and summary.pod.uid not in known:
                orphans.setdefault(summary.pod.uid, []).append(summary)
        if self.volumes is not None and not orphans:
            # kube's cleanupOrphanedPodDirs: directories of pods with neither a worker
            # nor containers (after a kubelet restart, a pod deleted meanwhile)
            with_containers = {s.pod.uid for s in summaries}
            await self.volumes.cleanup_orphans(known | with_containers
                                               | self._orphans_in_progress)
        for uid, containers in orphans.items():
            if uid in self._orphans_in_progress:
                continue
            self._orphans_in_progress.add(uid)
            task = asyncio.create_task(self._remove_orphan(uid, containers),
                                       name=f"orphan {uid}")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _remove_orphan(self, uid: str, containers: list[ContainerSummary]) -> None:
        ref = containers[0].pod
        try:
            log.info("%s: removing %d containers of a pod that no longer exists (uid %s)",
                     ref.key, len(containers), uid)
            apps = [c for c in containers if not c.is_sandbox and c.state == "running"]
            await asyncio.gather(*(self.runtime.stop_container(
                c.id, grace_seconds=c.grace_period if c.grace_period is not None else 30)
                for c in apps))
            for container in sorted(containers, key=lambda c: c.is_sandbox):
                await self.runtime.remove_container(container.id)
        except Exception as e:
            log.warning("%s: orphan cleanup failed: %s", ref.key, e)
        finally:
            self._orphans_in_progress.discard(uid)
