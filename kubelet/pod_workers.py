"""One worker per pod, serialising its syncs (after kubelet's pod_workers.go).

A sync observes the pod's containers in the runtime, diffs them against the pod from
the API (`kubelet.actions.compute_pod_actions`), acts on the difference, and writes
the status `kubelet.status.generate_pod_status` computes. Everything that must survive
a kubelet restart lives in the runtime (labels, attempt numbers), so a new kubelet
computes the same actions and adopts what runs instead of duplicating it.

A worker wakes up when the pod changes in the API, when the PLEG relist notices its
containers changed, when a back-off it waits for ends, and every `resync_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from common.errors import ApiError, NotFound
from kubelet import status as podstatus
from kubelet.actions import (
    Backoff,
    StartContainer,
    compute_pod_actions,
    containers_to_garbage_collect,
)
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

log = logging.getLogger(__name__)

ERROR_RETRY_SECONDS = 2.0
SANDBOX_STOP_SECONDS = 2


class StatusWriter(Protocol):
    async def patch(self, resource: str, name: str, patch: dict, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict: ...

    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None) -> dict: ...


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


def container_field_path(name: str) -> str:
    """The involvedObject.fieldPath of an event about one container."""
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
        field_path = container_field_path(container) if container else None
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
                await asyncio.wait_for(asyncio.shield(self.task), wait_seconds)


@dataclass
class PodWorker:
    pod: dict
    ref: PodRef
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    wake_at: float = 0.0
    removed: bool = False  # the API object is gone
    finished: bool = False  # terminated: containers stopped and removed
    waiting: dict[str, Waiting] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class PodWorkers:
    """The pod workers of one kubelet, plus orphan cleanup of its containers."""

    def __init__(self, *, runtime: Runtime, api: StatusWriter, recorder: Recorder | None,
                 config: KubeletConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.runtime = runtime
        self.api = api
        self.events = EventSink(recorder)
        self.config = config
        self.clock = clock
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
            worker = PodWorker(pod=pod, ref=ref)
            self.workers[ref.uid] = worker
            worker.task = asyncio.create_task(self._run(worker), name=f"pod-worker {ref.key}")
            log.info("%s: new pod worker (uid %s)", ref.key, ref.uid)
            worker.wake.set()
            return
        if _resource_version(pod) < _resource_version(worker.pod):
            return  # older than what our own status write returned
        previous, worker.pod = worker.pod, pod
        # Like the kubelet's config source: a status-only change (most often our own
        # write coming back) is no reason to sync again.
        if differs_semantically(previous, pod):
            worker.wake.set()

    def forget(self, pod: dict) -> None:
        """The pod object is gone from the API: stop and remove whatever it still runs."""
        worker = self.workers.get(pod_ref(pod).uid)
        if worker is not None:
            worker.removed = True
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
        await self.events.flush()

    # --- the worker loop ---------------------------------------------------------------
    async def _run(self, worker: PodWorker) -> None:
        while True:
            timeout = max(worker.wake_at - self.clock(), 0.0)
            if not worker.wake.is_set() and timeout > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(worker.wake.wait(), timeout)
            worker.wake.clear()
            worker.wake_at = self.clock() + self.config.resync_seconds
            try:
                await self.sync(worker)
            except asyncio.CancelledError:
                raise
            except (httpx.HTTPError, ApiError, RuntimeFailure) as e:
                log.warning("%s: sync failed: %s: %s", worker.ref.key, type(e).__name__, e)
                self._retry_in(worker, ERROR_RETRY_SECONDS)
            except Exception:
                log.exception("%s: sync failed", worker.ref.key)
                self._retry_in(worker, ERROR_RETRY_SECONDS)
            if worker.finished and worker.removed:
                self.workers.pop(worker.ref.uid, None)
                self.crash_backoff.forget_prefix(worker.ref.uid)
                self.pull_backoff.forget_prefix(worker.ref.uid)
                log.info("%s: pod worker done", worker.ref.key)
                return

    def _retry_in(self, worker: PodWorker, seconds: float) -> None:
        worker.wake_at = min(worker.wake_at, self.clock() + seconds)

    async def sync(self, worker: PodWorker) -> None:
        pod = worker.pod
        meta = pod.get("metadata") or {}
        observation = await self.runtime.observe_pod(worker.ref.uid)
        if worker.removed or meta.get("deletionTimestamp"):
            await self._terminate(worker, observation)
            return
        if worker.finished:
            return
        if (pod.get("status") or {}).get("phase") in podstatus.TERMINAL_PHASES:
            # A finished pod keeps its exited containers (for logs) but runs nothing.
            await self._stop_running(pod, observation, grace=grace_period_of(pod), events=True)
            return

        actions = compute_pod_actions(pod, observation)
        if actions.kill_pod:
            await self._stop_running(pod, observation, grace=grace_period_of(pod), events=True)
        for kill in actions.kill:
            self.events.emit(pod, "Normal", "Killing", kill.message, container=kill.container.name)
            await self.runtime.stop_container(kill.container.id,
                                              grace_seconds=grace_period_of(pod))
        if actions.kill_pod or actions.kill or actions.create_sandbox:
            observation = await self.runtime.observe_pod(worker.ref.uid)
        if actions.create_sandbox:
            if not await self._create_sandbox(worker, actions.sandbox_attempt):
                await self._write_status(worker, observation)
                return
            observation = await self.runtime.observe_pod(worker.ref.uid)

        sandbox = observation.latest_sandbox()
        started_any = False
        if sandbox is not None and sandbox.ready:
            specs = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
            for start in actions.start:
                started_any |= await self._start_container(worker, specs[start.name], start,
                                                           sandbox=sandbox)
        if started_any or actions.start:
            observation = await self.runtime.observe_pod(worker.ref.uid)
        for container_id in containers_to_garbage_collect(observation):
            await self.runtime.remove_container(container_id)
        await self._write_status(worker, observation)

    # --- sandbox and containers --------------------------------------------------------
    async def _create_sandbox(self, worker: PodWorker, attempt: int) -> bool:
        pod = worker.pod
        try:
            sandbox_id = await self.runtime.run_sandbox(pod, attempt=attempt,
                                                        node_ip=self.config.node_ip)
        except RuntimeFailure as e:
            self.events.emit(pod, "Warning", "FailedCreatePodSandBox",
                             f"Failed to create pod sandbox: {e.message}")
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        log.info("%s: started pod sandbox %s (attempt %d)", worker.ref.key, sandbox_id[:12],
                 attempt)
        return True

    async def _start_container(self, worker: PodWorker, spec: Mapping[str, Any],
                               start: StartContainer, *, sandbox: SandboxInfo) -> bool:
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
                                                               attempt=start.attempt)
        except RuntimeFailure as e:
            worker.waiting[name] = Waiting(podstatus.CREATE_CONTAINER_ERROR, e.message)
            self.events.emit(pod, "Warning", "Failed", f"Error: {e.message}", container=name)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
        self.events.emit(pod, "Normal", "Created", f"Created container: {name}", container=name)
        try:
            await self.runtime.start_container(container_id)
        except RuntimeFailure as e:
            worker.waiting[name] = Waiting(podstatus.RUN_CONTAINER_ERROR, e.message)
            self.events.emit(pod, "Warning", "Failed",
                             f"Error: failed to start container \"{name}\": {e.message}",
                             container=name)
            self._retry_in(worker, ERROR_RETRY_SECONDS)
            return False
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

    async def _terminate(self, worker: PodWorker, observation: PodObservation) -> None:
        """Deletion: stop with the grace period, remove everything, then the API object."""
        pod = worker.pod
        if not worker.finished:
            grace = grace_period_of(pod)
            log.info("%s: terminating (grace %ds)", worker.ref.key, grace)
            await self._stop_running(pod, observation, grace=grace, events=True)
            observation = await self.runtime.observe_pod(worker.ref.uid)
            ids = [c.id for c in observation.containers] + [s.id for s in observation.sandboxes]
            for container_id in ids:
                await self.runtime.remove_container(container_id)
            worker.finished = True
            log.info("%s: containers and sandbox removed", worker.ref.key)
        if worker.removed:
            return
        try:
            await self.api.delete("pods", worker.ref.name, namespace=worker.ref.namespace,
                                  grace_period_seconds=0)
            log.info("%s: pod object deleted", worker.ref.key)
        except NotFound:
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

    # --- status ------------------------------------------------------------------------
    async def _write_status(self, worker: PodWorker, observation: PodObservation) -> None:
        pod = worker.pod
        new = podstatus.generate_pod_status(pod, observation, worker.waiting,
                                            node_ip=self.config.node_ip, now=datetime.now(UTC))
        old = dict(pod.get("status") or {})
        if podstatus.without_nulls(new) == podstatus.without_nulls(old):
            return
        patch = podstatus.status_patch(old, new)
        try:
            updated = await self.api.patch("pods", worker.ref.name, {"status": patch},
                                           namespace=worker.ref.namespace, subresource="status")
        except NotFound:
            return
        if (updated.get("metadata") or {}).get("uid") == worker.ref.uid:
            worker.pod = updated if worker.pod is pod else worker.pod
        states = ", ".join(
            f"{s['name']}={next(iter(s['state']), '?')}"
            + (f"({_reason(s)})" if _reason(s) else "")
            for s in new.get("containerStatuses", []))
        log.info("%s: status %s [%s]", worker.ref.key, new.get("phase"), states)


def _resource_version(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _reason(container_status: Mapping[str, Any]) -> str:
    state = container_status.get("state") or {}
    for detail in state.values():
        if isinstance(detail, dict) and detail.get("reason"):
            return str(detail["reason"])
    return ""
