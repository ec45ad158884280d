"""One worker per pod, serialising its syncs (after kubelet's pod_workers.go).

A sync takes the pod's runtime view (from the PLEG's pod cache when it is recent enough,
else from the runtime), hands the status it implies to the status manager at once (so a
new pod shows `ContainerCreating` while its image is pulled), diffs the view against the
pod from the API (`kubelet.actions.compute_pod_actions`), acts on the difference, and
hands over the status again after each change. Everything that must survive a kubelet
restart lives in the runtime (labels, attempt numbers), so a new kubelet computes the
same actions and adopts what runs instead of duplicating it.

A worker wakes up when the pod changes in the API, when the PLEG relist notices its
containers changed, when a back-off it waits for ends, and every `resync_seconds`. A
deletion interrupts a sync in progress (a pull that hangs, say): terminating the pod
does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from common.errors import ApiError, Conflict, NotFound
from kubelet import status as podstatus
from kubelet.actions import (
    Backoff,
    StartContainer,
    TargetNotRunning,
    compute_pod_actions,
    containers_to_garbage_collect,
    ephemeral_specs,
    pid_target,
)
from kubelet.pleg import CachedPod, PodCache
from kubelet.runtime import (
    ContainerSummary,
    InvalidImageName,
    PodObservation,
    PodRef,
    Runtime,
    RuntimeFailure,
    SandboxInfo,
    grace_period_of,
    parse_image,
    pod_ref,
)
from kubelet.status import Waiting, pod_full_name
from kubelet.status_manager import StatusManager, resource_version

log = logging.getLogger(__name__)

ERROR_RETRY_SECONDS = 2.0
SANDBOX_STOP_SECONDS = 2


class PodApi(Protocol):
    async def get(self, resource: str, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> dict: ...

    async def patch(self, resource: str, name: str, patch: dict, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict: ...

    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None) -> dict: ...


class Recorder(Protocol):
    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None) -> None: ...


@dataclass
class KubeletConfig:
    node_name: str
    node_ip: str = "127.0.0.1"
    resync_seconds: float = 10.0


def default_pull_policy(image: str) -> str:
    """Always for `:latest` or no tag, else IfNotPresent (the apiserver's defaulting)."""
    try:
        ref = parse_image(image)
    except InvalidImageName:
        return "IfNotPresent"
    return "Always" if ref.tag == "latest" and not ref.digest else "IfNotPresent"


def should_pull(policy: str, present: bool) -> bool:
    if policy == "Never":
        return False
    return policy == "Always" or not present


def container_field_path(pod: Mapping[str, Any], name: str) -> str:
    """The involvedObject.fieldPath of an event about one container of `pod`."""
    spec = pod.get("spec") or {}
    for key in ("initContainers", "ephemeralContainers"):
        if any(c.get("name") == name for c in spec.get(key) or []):
            return f"spec.{key}{{{name}}}"
    return f"spec.containers{{{name}}}"


def differs_semantically(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the pod changed in a way the kubelet acts on (not just its status)."""
    def essence(pod: Mapping[str, Any]) -> tuple[Any, ...]:
        meta = pod.get("metadata") or {}
        return (meta.get("uid"), pod.get("spec"), meta.get("labels"), meta.get("annotations"),
                meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds"))
    return essence(old) != essence(new)


class EventSink:
    """Writes events in the order they happen, off the sync path (an event is a hint)."""

    def __init__(self, recorder: Recorder | None) -> None:
        self.recorder = recorder
        self.queue: asyncio.Queue[tuple[dict, str, str, str, str | None]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def emit(self, pod: Mapping[str, Any], type_: str, reason: str, message: str, *,
             container: str | None = None) -> None:
        ref = pod_ref(pod)
        log.debug("%s: %s %s: %s", ref.key, type_, reason, message)
        if self.recorder is None:
            return
        involved = {"kind": "Pod", "apiVersion": "v1",
                    "metadata": {k: v for k, v in (pod.get("metadata") or {}).items()
                                 if k in ("name", "namespace", "uid", "resourceVersion")}}
        field_path = container_field_path(pod, container) if container else None
        self.queue.put_nowait((involved, type_, reason, message, field_path))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain(), name="kubelet-events")

    async def _drain(self) -> None:
        assert self.recorder is not None
        while not self.queue.empty():
            involved, type_, reason, message, field_path = self.queue.get_nowait()
            await self.recorder.event(involved, type_, reason, message, field_path=field_path)

    async def flush(self, wait_seconds: float = 5.0) -> None:
        if self.task is not None:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                async with asyncio.timeout(wait_seconds):
                    await asyncio.shield(self.task)


@dataclass
class PodWorker:
    pod: dict
    ref: PodRef
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    wake_at: float = 0.0
    removed: bool = False  # the API object is gone
    finished: bool = False  # terminated: containers stopped and removed
    terminating: bool = False  # the current sync stops the pod: not to be interrupted
    waiting: dict[str, Waiting] = field(default_factory=dict)
    # When this worker last changed the pod's containers: a runtime view older than
    # that may miss what it made, so it is not used.
    acted_at: float = 0.0
    view: CachedPod | None = None  # the runtime view the current sync works from
    syncs: int = 0
    task: asyncio.Task[None] | None = None
    sync_task: asyncio.Task[None] | None = None


class PodWorkers:
    """The pod workers of one kubelet, plus orphan cleanup of its containers."""

    def __init__(self, *, runtime: Runtime, api: PodApi, recorder: Recorder | None,
                 config: KubeletConfig, clock: Callable[[], float] = time.monotonic,
                 status_retry_seconds: float = 1.0) -> None:
        self.runtime = runtime
        self.api = api
        self.events = EventSink(recorder)
        self.config = config
        self.clock = clock
        self.cache = PodCache()
        self.status = StatusManager(api, retry_seconds=status_retry_seconds)
        self.workers: dict[str, PodWorker] = {}
        self.crash_backoff = Backoff()
        self.pull_backoff = Backoff()
        self._orphans_in_progress: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()

    # --- inputs: the informer and the PLEG ---------------------------------------------
    def update(self, pod: dict) -> None:
        ref = pod_ref(pod)
        worker = self.workers.get(ref.uid)
        if worker is None:
            # Whatever the cache holds was read before this worker existed: its first
            # view comes from the runtime, or from a relist that started after now.
            worker = PodWorker(pod=pod, ref=ref, acted_at=self.clock())
            self.workers[ref.uid] = worker
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
        worker.sync_task = asyncio.create_task(self.sync(worker),
                                               name=f"pod-sync {worker.ref.key}")
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
        if failed:
            # It may have changed containers without getting to record it.
            self._acted(worker)

    def _done(self, worker: PodWorker) -> None:
        uid = worker.ref.uid
        self.workers.pop(uid, None)
        self.crash_backoff.forget_prefix(uid)
        self.pull_backoff.forget_prefix(uid)
        self.status.forget(uid)
        self.cache.forget(uid)
        log.info("%s: pod worker done", worker.ref.key)

    def _retry_in(self, worker: PodWorker, seconds: float) -> None:
        worker.wake_at = min(worker.wake_at, self.clock() + seconds)

    def _acted(self, worker: PodWorker) -> None:
        worker.acted_at = self.clock()

    async def _observe(self, worker: PodWorker) -> CachedPod:
        """The pod's runtime view: the PLEG's if taken since our last change, else fresh."""
        cached = self.cache.get_newer_than(worker.ref.uid, worker.acted_at)
        if cached is None:
            return await self._observe_now(worker)
        worker.view = cached
        return cached

    async def _observe_now(self, worker: PodWorker) -> CachedPod:
        at = self.clock()
        observation = await self.runtime.observe_pod(worker.ref.uid)
        self.cache.set(worker.ref.uid, observation, at)
        worker.view = CachedPod(observation, at)
        return worker.view

    async def sync(self, worker: PodWorker) -> None:
        pod = worker.pod
        meta = pod.get("metadata") or {}
        if worker.removed or meta.get("deletionTimestamp"):
            await self._terminate(worker)
            return
        if worker.finished:
            return
        view = await self._observe(worker)
        observation = view.observation
        # First of all, what the pod looks like now (ContainerCreating for a new one).
        status = self._set_status(worker)
        if status.get("phase") in podstatus.TERMINAL_PHASES:
            # A finished pod keeps its exited containers (for logs) but runs nothing.
            if _anything_running(observation):
                await self._stop_running(pod, observation, grace=grace_period_of(pod),
                                         events=True)
                self._acted(worker)
            return

        actions = compute_pod_actions(pod, observation)
        if actions.kill_pod:
            await self._stop_running(pod, observation, grace=grace_period_of(pod), events=True)
            self._acted(worker)
        for kill in actions.kill:
            self.events.emit(pod, "Normal", "Killing", kill.message, container=kill.container.name)
            await self.runtime.stop_container(kill.container.id,
                                              grace_seconds=grace_period_of(pod))
            self._acted(worker)
        if actions.create_sandbox:
            created = await self._create_sandbox(worker, actions.sandbox_attempt)
            view = await self._observe_now(worker)
            observation = view.observation
            if not created:
                self._set_status(worker)
                return
        elif worker.acted_at >= view.at:
            view = await self._observe_now(worker)
            observation = view.observation

        sandbox = observation.latest_sandbox()
        if sandbox is not None and sandbox.ready:
            specs = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
            for start in actions.start:
                await self._start_container(worker, specs[start.name], start, sandbox=sandbox)
            ephemeral = {c["name"]: c for c in ephemeral_specs(pod)}
            for start in actions.start_ephemeral:
                await self._start_ephemeral(worker, ephemeral[start.name], start,
                                            sandbox=sandbox, observation=observation)
        if worker.acted_at >= view.at:
            view = await self._observe_now(worker)
            observation = view.observation
        doomed = containers_to_garbage_collect(observation)
        for container_id in doomed:
            await self.runtime.remove_container(container_id)
        if doomed:
            self._acted(worker)
        self._set_status(worker)

    def _set_status(self, worker: PodWorker) -> dict[str, Any]:
        """Hand the status the current view implies to the status manager (it writes it
        if it changed)."""
        assert worker.view is not None
        compute = functools.partial(podstatus.generate_pod_status,
                                    observation=worker.view.observation,
                                    waiting=dict(worker.waiting), node_ip=self.config.node_ip,
                                    now=datetime.now(UTC))
        return self.status.set_status(worker.pod, compute)

    # --- sandbox and containers --------------------------------------------------------
    async def _create_sandbox(self, worker: PodWorker, attempt: int) -> bool:
        pod = worker.pod
        try:
            sandbox_id = await self.runtime.run_sandbox(pod, attempt=attempt,
                                                        node_ip=self.config.node_ip)
        except RuntimeFailure as e:
            self._acted(worker)
            self.events.emit(pod, "Warning", "FailedCreatePodSandBox",
                             f"Failed to create pod sandbox: {e.message}")
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        self._acted(worker)
        log.info("%s: started pod sandbox %s (attempt %d)", worker.ref.key, sandbox_id[:12],
                 attempt)
        return True

    async def _start_ephemeral(self, worker: PodWorker, spec: Mapping[str, Any],
                               start: StartContainer, *, sandbox: SandboxInfo,
                               observation: PodObservation) -> bool:
        """An ephemeral container, once, in its target's PID namespace when it has one."""
        name = str(spec["name"])
        try:
            target = pid_target(spec, observation)
        except TargetNotRunning as e:
            # kubelet's startContainer: after the image, before creating (its next sync
            # tries again, as long as the container never ran).
            if not await self._ensure_image(worker, spec):
                return False
            worker.waiting[name] = Waiting(podstatus.CREATE_CONTAINER_CONFIG_ERROR, str(e))
            self.events.emit(worker.pod, "Warning", "Failed", f"Error: {e}", container=name)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        log.info("%s: starting ephemeral container %s%s", worker.ref.key, name,
                 f" in the PID namespace of {spec['targetContainerName']}" if target else "")
        return await self._start_container(worker, spec, start, sandbox=sandbox,
                                           pid_target=target)

    async def _start_container(self, worker: PodWorker, spec: Mapping[str, Any],
                               start: StartContainer, *, sandbox: SandboxInfo,
                               pid_target: str | None = None) -> bool:
        pod = worker.pod
        name = str(spec["name"])
        previous = start.previous
        if previous is not None and previous.state == "exited" and previous.finished_at:
            key = f"{worker.ref.uid}_{name}"
            finished = self._monotonic_of(previous.finished_at)
            now = self.clock()
            if self.crash_backoff.in_backoff_since(key, finished, now):
                delay = self.crash_backoff.delay(key)
                full_name = pod_full_name(pod)
                self.events.emit(pod, "Warning", "BackOff",
                                 f"Back-off restarting failed container {name} in pod "
                                 f"{full_name}", container=name)
                worker.waiting[name] = Waiting(
                    podstatus.CRASH_LOOP_BACK_OFF,
                    f"back-off {podstatus.go_duration(delay)} restarting failed "
                    f"container={name} pod={full_name}")
                self._retry_in(worker, finished + delay - now + 0.05)
                return False
            self.crash_backoff.next(key, finished)

        if not await self._ensure_image(worker, spec):
            return False
        try:
            container_id = await self.runtime.create_container(pod, spec, sandbox=sandbox,
                                                               attempt=start.attempt,
                                                               pid_target=pid_target)
        except RuntimeFailure as e:
            self._acted(worker)
            worker.waiting[name] = Waiting(podstatus.CREATE_CONTAINER_ERROR, e.message)
            self.events.emit(pod, "Warning", "Failed", f"Error: {e.message}", container=name)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        self.events.emit(pod, "Normal", "Created", f"Created container: {name}", container=name)
        try:
            await self.runtime.start_container(container_id)
        except RuntimeFailure as e:
            self._acted(worker)
            worker.waiting[name] = Waiting(podstatus.RUN_CONTAINER_ERROR, e.message)
            self.events.emit(pod, "Warning", "Failed",
                             f"Error: failed to start container \"{name}\": {e.message}",
                             container=name)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        self._acted(worker)
        self.events.emit(pod, "Normal", "Started", f"Started container {name}", container=name)
        worker.waiting.pop(name, None)
        return True

    async def _ensure_image(self, worker: PodWorker, spec: Mapping[str, Any]) -> bool:
        """kubelet's EnsureImageExists: honour the pull policy, back off failed pulls."""
        pod = worker.pod
        name, image = str(spec["name"]), str(spec.get("image") or "")
        try:
            parse_image(image)
        except InvalidImageName as e:
            self.events.emit(pod, "Warning", "InspectFailed", str(e), container=name)
            self.events.emit(pod, "Warning", "Failed", "Error: InvalidImageName", container=name)
            worker.waiting[name] = Waiting(podstatus.INVALID_IMAGE_NAME, str(e))
            return False
        policy = str(spec.get("imagePullPolicy") or default_pull_policy(image))
        present = await self.runtime.inspect_image(image) is not None
        if not should_pull(policy, present):
            if present:
                self.events.emit(pod, "Normal", "Pulled",
                                 f'Container image "{image}" already present on machine',
                                 container=name)
                return True
            message = f'Container image "{image}" is not present with pull policy of Never'
            self.events.emit(pod, "Warning", "ErrImageNeverPull", message, container=name)
            self.events.emit(pod, "Warning", "Failed", "Error: ErrImageNeverPull",
                             container=name)
            worker.waiting[name] = Waiting(podstatus.ERR_IMAGE_NEVER_PULL, message)
            return False
        key = f"{worker.ref.uid}_{image}"
        now = self.clock()
        if self.pull_backoff.in_backoff_since_update(key, now):
            message = f'Back-off pulling image "{image}"'
            self.events.emit(pod, "Normal", "BackOff", message, container=name)
            self.events.emit(pod, "Warning", "Failed", "Error: ImagePullBackOff", container=name)
            worker.waiting[name] = Waiting(podstatus.IMAGE_PULL_BACK_OFF, message)
            entry = self.pull_backoff.entries[key]
            self._retry_in(worker, entry.last_update + entry.delay - now + 0.05)
            return False
        self.events.emit(pod, "Normal", "Pulling", f'Pulling image "{image}"', container=name)
        self._set_status(worker)  # a pull can take long: show the sandbox and pod IP now
        started = time.monotonic()
        try:
            await self.runtime.pull_image(image)
        except RuntimeFailure as e:
            self.pull_backoff.next(key, self.clock())
            self.events.emit(pod, "Warning", "Failed",
                             f'Failed to pull image "{image}": {e.message}', container=name)
            self.events.emit(pod, "Warning", "Failed", "Error: ErrImagePull", container=name)
            worker.waiting[name] = Waiting(podstatus.ERR_IMAGE_PULL, e.message)
            # Look again soon, to show ImagePullBackOff while the back-off runs.
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        took = podstatus.go_duration(time.monotonic() - started)
        self.events.emit(pod, "Normal", "Pulled",
                         f'Successfully pulled image "{image}" in {took} ({took} including '
                         f'waiting)', container=name)
        return True

    def _monotonic_of(self, moment: datetime) -> float:
        """A wall-clock time from Docker on the monotonic clock the back-offs use."""
        return self.clock() - (datetime.now(UTC) - moment).total_seconds()

    # --- stopping ----------------------------------------------------------------------
    async def _stop_running(self, pod: Mapping[str, Any] | None, observation: PodObservation,
                            *, grace: int, events: bool) -> None:
        """Stop running containers (SIGTERM, SIGKILL after `grace`), then the sandboxes."""
        running = [c for c in observation.containers if c.state == "running"]
        if pod is not None and events:
            for container in running:
                self.events.emit(pod, "Normal", "Killing", f"Stopping container {container.name}",
                                 container=container.name)
        await asyncio.gather(*(self.runtime.stop_container(c.id, grace_seconds=grace)
                               for c in running))
        await asyncio.gather(*(self.runtime.stop_container(s.id,
                                                           grace_seconds=SANDBOX_STOP_SECONDS)
                               for s in observation.sandboxes if s.ready))

    async def _terminate(self, worker: PodWorker) -> None:
        """Deletion: stop with the grace period, remove everything, then the API object."""
        pod = worker.pod
        if not worker.finished:
            grace = grace_period_of(pod)
            log.info("%s: terminating (grace %ds)", worker.ref.key, grace)
            # Straight from the runtime: an interrupted sync may have just made something.
            observation = (await self._observe_now(worker)).observation
            await self._stop_running(pod, observation, grace=grace, events=True)
            self._acted(worker)
            observation = (await self._observe_now(worker)).observation
            ids = [c.id for c in observation.containers] + [s.id for s in observation.sandboxes]
            for container_id in ids:
                await self.runtime.remove_container(container_id)
            self._acted(worker)
            worker.finished = True
            log.info("%s: containers and sandbox removed", worker.ref.key)
        if worker.removed:
            return
        try:
            # Only this pod: a pod recreated under the same name is another one (uid).
            await self.api.delete("pods", worker.ref.name, namespace=worker.ref.namespace,
                                  grace_period_seconds=0,
                                  preconditions={"uid": worker.ref.uid})
            log.info("%s: pod object deleted", worker.ref.key)
        except (NotFound, Conflict):
            pass

    async def cleanup_orphans(self, summaries: list[ContainerSummary]) -> None:
        """Remove our containers whose pod this kubelet no longer has (only ours: by label)."""
        known = self.known_uids()
        orphans: dict[str, list[ContainerSummary]] = {}
        for summary in summaries:
            if summary.pod.uid and summary.pod.uid not in known:
                orphans.setdefault(summary.pod.uid, []).append(summary)
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


def _anything_running(observation: PodObservation) -> bool:
    return any(c.state == "running" for c in observation.containers) or any(
        s.ready for s in observation.sandboxes)
