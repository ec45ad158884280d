"""The sync of one pod (after kuberuntime_manager.go's SyncPod and the pod workers'
SyncTerminatingPod): read the pod's containers once, compare them with the pod from the
API, act on the difference, and hand the status it all implies to the status manager.

`sync_pod`, top to bottom:
1. the pod's runtime view — the PLEG's when it was taken after this pod's last change,
   else one read of the runtime (`observe_pod`: one list and an inspect per container);
2. its status, written at once (a new pod shows `ContainerCreating` while its image is
   pulled);
3. the actions (`kubelet.actions.compute_pod_actions`): kill what must go, a new sandbox
   when it has none (or it changed), the containers to start, with crash back-off;
4. what the sync changed is inspected one container at a time and merged into the view
   (never a second read of the whole pod), exited containers beyond the newest are
   removed, and the status is handed over again.

`sync_terminating_pod` stops the containers with the grace period, removes them and the
sandbox, then deletes the API object (uid precondition). Everything that must survive a
kubelet restart lives in the runtime (labels, attempt numbers), so a new kubelet computes
the same actions and adopts what runs instead of duplicating it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from common import timeline
from common.errors import Conflict, NotFound
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
from kubelet.dns import DnsConfig, DnsSettings, pod_dns, read_resolv_conf
from kubelet.env import EnvError, EnvSources, PodContext, container_env, env_from
from kubelet.events import EventSink
from kubelet.images import ImageManager
from kubelet.lifecycle import POST_START_TIMEOUT_SECONDS, remaining_grace, run_handler
from kubelet.metrics import KubeletMetrics, container_type
from kubelet.objects import ObjectError, ObjectManager
from kubelet.pleg import CachedPod, PodCache
from kubelet.prober import ProbeManager
from kubelet.runtime import (
    ContainerExtras,
    ContainerInfo,
    ContainerSummary,
    CreateContainerConfigError,
    PodObservation,
    PodRef,
    Runtime,
    RuntimeFailure,
    SandboxInfo,
    build_observation,
    grace_period_of,
    is_sidecar,
)
from kubelet.status import Waiting, pod_full_name
from kubelet.status_manager import StatusManager
from kubelet.termination_order import TerminationOrdering
from kubelet.volumes import VolumeError, VolumeManager, container_mounts
from kubelet.volumes.paths import UnsafePath

log = logging.getLogger(__name__)

ERROR_RETRY_SECONDS = 2.0
SANDBOX_STOP_SECONDS = 2


class PodDeleter(Protocol):
    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None) -> dict: ...


@dataclass
class KubeletConfig:
    node_name: str
    node_ip: str = "127.0.0.1"
    resync_seconds: float = 10.0
    dns: DnsSettings = DnsSettings()  # its `host` is read again for every sandbox


@dataclass
class PodState:
    """What the kubelet keeps about one pod between syncs."""

    pod: dict
    ref: PodRef
    wake_at: float = 0.0  # when the next sync is due (a sync may bring it closer)
    removed: bool = False  # the API object is gone
    finished: bool = False  # terminated: containers stopped and removed
    waiting: dict[str, Waiting] = field(default_factory=dict)
    # When the kubelet last changed the pod's containers: a runtime view older than that
    # may miss what it made, so it is not used.
    acted_at: float = 0.0
    view: CachedPod | None = None  # the runtime view the current sync works from
    volume_paths: dict[str, str] = field(default_factory=dict)  # volume -> host path
    first_seen: float = 0.0  # when its worker started (kubelet_pod_start_duration_seconds)
    start_observed: bool = False  # its first Running status was observed


# --- pure helpers ------------------------------------------------------------------------

def summary_of(item: ContainerInfo | SandboxInfo) -> ContainerSummary:
    """The list entry of an inspected container (to inspect it again)."""
    return ContainerSummary(id=item.id, pod=item.pod,
                            name=item.name if isinstance(item, ContainerInfo) else "POD",
                            is_sandbox=isinstance(item, SandboxInfo), state=item.state,
                            grace_period=item.grace_period)


def with_changes(observation: PodObservation, found: Iterable[ContainerInfo | SandboxInfo],
                 gone: Iterable[str] = ()) -> PodObservation:
    """`observation` with the containers inspected again (`found`) in place of what it had
    for them, and without those that are `gone`; newest first as ever. A new value: the
    observation may be the pod cache's."""
    items: dict[str, ContainerInfo | SandboxInfo] = {s.id: s for s in observation.sandboxes}
    items.update((c.id, c) for c in observation.containers)
    for container_id in gone:
        items.pop(container_id, None)
    for item in found:
        items[item.id] = item
    return build_observation(items.values())


def anything_running(observation: PodObservation) -> bool:
    return any(c.state == "running" for c in observation.containers) or any(
        s.ready for s in observation.sandboxes)


class PodSyncer:
    """SyncPod and SyncTerminatingPod for the pods of one kubelet."""

    def __init__(self, *, runtime: Runtime, api: PodDeleter, status: StatusManager,
                 events: EventSink, images: ImageManager, cache: PodCache,
                 config: KubeletConfig, prober: ProbeManager | None = None,
                 objects: ObjectManager | None = None, volumes: VolumeManager | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 metrics: KubeletMetrics | None = None) -> None:
        self.runtime = runtime
        self.api = api
        self.metrics = metrics
        self.status = status
        self.events = events
        self.images = images
        self.cache = cache
        self.config = config
        self.prober = prober
        self.objects = objects
        self.volumes = volumes
        self.clock = clock
        self.crash_backoff = Backoff()

    def forget(self, uid: str) -> None:
        self.crash_backoff.forget_prefix(uid)
        self.images.forget(uid)
        if self.prober is not None:
            self.prober.forget(uid)
        if self.objects is not None:
            self.objects.unregister_pod(uid)

    async def sync(self, state: PodState) -> None:
        if state.removed or (state.pod.get("metadata") or {}).get("deletionTimestamp"):
            await self.sync_terminating_pod(state)
        elif not state.finished:
            await self.sync_pod(state)

    # --- SyncPod -------------------------------------------------------------------------
    async def sync_pod(self, state: PodState) -> None:
        pod = state.pod
        # 1. The pod's runtime view: the only read of the whole pod in this sync.
        view = await self._observe(state)
        observation = view.observation
        # 2. First of all, what the pod looks like now (ContainerCreating for a new one).
        status = self._set_status(state)
        if status.get("phase") in podstatus.TERMINAL_PHASES:
            # A finished pod keeps its exited containers (for logs) but runs nothing.
            if self.prober is not None:
                self.prober.forget(state.ref.uid)
            if anything_running(observation):
                await self._stop_running(pod, observation, grace=grace_period_of(pod))
                self._acted(state)
            return

        # Volumes (and the ConfigMaps and Secrets the pod references) before any
        # container starts, refreshed at every sync; nothing starts while one fails.
        if not await self._setup_volumes(state):
            return
        # 3. What to do about the difference: first the containers a liveness (or
        # startup) probe failed, which are restarted like any that exited.
        unhealthy = await self._kill_unhealthy(state, observation)
        if unhealthy:
            observation = await self._reinspect(observation, unhealthy)
            state.view = CachedPod(observation, view.at)
        actions = compute_pod_actions(pod, observation,
                                      sidecar_started=self._sidecar_started(state))
        changed: list[ContainerSummary] = []
        if actions.kill_pod:
            changed += await self._stop_running(pod, observation, grace=grace_period_of(pod))
            self._acted(state)
        for kill in actions.kill:
            self.events.emit(pod, "Normal", "Killing", kill.message, container=kill.container.name)
            await self._kill_container(pod, kill.container, grace=grace_period_of(pod),
                                       pod_ip=self._pod_ip(pod, observation))
            self._acted(state)
            changed.append(summary_of(kill.container))
        if actions.create_sandbox:
            sandbox_id = await self._create_sandbox(state, actions.sandbox_attempt)
            if sandbox_id is None:
                state.view = CachedPod(await self._reinspect(observation, changed), view.at)
                self._set_status(state)
                return
            changed.append(ContainerSummary(id=sandbox_id, pod=state.ref, name="POD",
                                            is_sandbox=True, state="unknown"))
        # The sandbox and anything stopped as they are now, for the containers to start.
        observation = await self._reinspect(observation, changed)
        state.view = CachedPod(observation, view.at)

        sandbox = observation.latest_sandbox()
        made: list[ContainerSummary] = []
        if sandbox is not None and sandbox.ready:
            spec = pod.get("spec") or {}
            specs = {c["name"]: c for key in ("initContainers", "containers")
                     for c in spec.get(key) or []}
            for start in actions.start:
                made += await self._start_container(state, specs[start.name], start,
                                                    sandbox=sandbox)
            ephemeral = {c["name"]: c for c in ephemeral_specs(pod)}
            for start in actions.start_ephemeral:
                made += await self._start_ephemeral(state, ephemeral[start.name], start,
                                                    sandbox=sandbox, observation=observation)
        # 4. What it made, then the exited containers no longer needed, then the status.
        observation = await self._reinspect(observation, made)
        doomed = containers_to_garbage_collect(observation)
        for container_id in doomed:
            await self.runtime.remove_container(container_id)
        if doomed:
            self._acted(state)
            observation = with_changes(observation, (), gone=doomed)
        state.view = CachedPod(observation, view.at)
        if self.prober is not None:
            self.prober.sync_pod(pod, observation, pod_ip=self._pod_ip(pod, observation))
        self._set_status(state)

    async def _setup_volumes(self, state: PodState) -> bool:
        """WaitForAttachAndMount: whether every volume is set up (else a FailedMount
        event and a retry)."""
        if self.objects is not None:
            self.objects.register_pod(state.ref.uid, state.pod)
        if self.volumes is None:
            return True
        try:
            state.volume_paths = await self.volumes.setup(state.pod, host_ip=self.config.node_ip)
        except VolumeError as e:
            log.info("%s: %s", state.ref.key, e)
            self.events.emit(state.pod, "Warning", "FailedMount", str(e))
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return False
        return True

    async def _extras(self, state: PodState, spec: Mapping[str, Any], *,
                      sandbox: SandboxInfo) -> ContainerExtras:
        """The container's ConfigMaps and Secrets (for its env) and its volume mounts;
        CreateContainerConfigError when one cannot be had."""
        pod = state.pod
        try:
            sources = (await self.objects.env_sources(pod, spec) if self.objects is not None
                       else EnvSources())
            context = PodContext(pod_ip=self._pod_ip(pod, state.view.observation)
                                 if state.view is not None else sandbox.ip,
                                 host_ip=self.config.node_ip, sources=sources)
            _, skipped = env_from(spec, context)
            for message in skipped:
                self.events.emit(pod, "Warning", "InvalidEnvironmentVariableNames", message)
            variables = (container_env(pod, spec, context)
                         if any(m.get("subPathExpr") for m in spec.get("volumeMounts") or [])
                         else {})
            mounts = await asyncio.to_thread(container_mounts, pod, spec, state.volume_paths,
                                             variables)
        except (ObjectError, EnvError, UnsafePath, VolumeError, OSError) as e:
            raise CreateContainerConfigError(str(e)) from e
        return ContainerExtras(sources=sources, mounts=tuple(mounts))

    def _pod_ip(self, pod: Mapping[str, Any], observation: PodObservation) -> str:
        if (pod.get("spec") or {}).get("hostNetwork"):
            return self.config.node_ip
        sandbox = observation.latest_sandbox()
        return sandbox.ip if sandbox is not None else ""

    def _sidecar_started(self, state: PodState) -> Callable[[ContainerInfo], bool]:
        prober = self.prober
        if prober is None:
            return lambda container: True
        return lambda container: prober.started(
            state.ref.uid, self._spec_of(state.pod, container.name) or {}, container)

    async def _kill_unhealthy(self, state: PodState,
                              observation: PodObservation) -> list[ContainerSummary]:
        """Stop the running containers whose liveness or startup probe failed."""
        if self.prober is None:
            return []
        killed = []
        for container in observation.containers:
            kind = (self.prober.should_restart(state.ref.uid, container)
                    if container.state == "running" else None)
            if kind is None:
                continue
            log.info("%s: container %s failed its %s probe: restarting it", state.ref.key,
                     container.name, kind)
            message = (f"Init container {container.name} failed {kind} probe"
                       if is_sidecar(self._spec_of(state.pod, container.name) or {})
                       else f"Container {container.name} failed {kind} probe, will be "
                            f"restarted")
            self.events.emit(state.pod, "Normal", "Killing", message, container=container.name)
            await self._kill_container(state.pod, container, grace=grace_period_of(state.pod),
                                       pod_ip=self._pod_ip(state.pod, observation))
            self._acted(state)
            killed.append(summary_of(container))
        return killed

    def _set_status(self, state: PodState) -> dict[str, Any]:
        """Hand the status the current view implies to the status manager (it writes it
        if it changed)."""
        assert state.view is not None
        observation = state.view.observation
        probes = (self.prober.status(state.ref.uid, observation)
                  if self.prober is not None else None)
        compute = functools.partial(podstatus.generate_pod_status,
                                    observation=observation,
                                    waiting=dict(state.waiting), node_ip=self.config.node_ip,
                                    now=datetime.now(UTC), probes=probes)
        status = self.status.set_status(state.pod, compute)
        if self.metrics is not None and not state.start_observed \
                and status.get("phase") == "Running":
            state.start_observed = True
            # running already as the API has it: a kubelet restarted, not a pod starting
            if (state.pod.get("status") or {}).get("phase") != "Running":
                self.metrics.pod_start.observe(self.clock() - state.first_seen)
        return status

    async def _observe(self, state: PodState) -> CachedPod:
        """The pod's runtime view: the PLEG's if taken since our last change, else fresh."""
        cached = self.cache.get_newer_than(state.ref.uid, state.acted_at)
        if cached is None:
            return await self._observe_now(state)
        state.view = cached
        return cached

    async def _observe_now(self, state: PodState) -> CachedPod:
        at = self.clock()
        observation = await self.runtime.observe_pod(state.ref.uid)
        self.cache.set(state.ref.uid, observation, at)
        state.view = CachedPod(observation, at)
        return state.view

    async def _reinspect(self, observation: PodObservation,
                         changed: list[ContainerSummary]) -> PodObservation:
        """`observation` with just the `changed` containers inspected again."""
        if not changed:
            return observation
        found = await asyncio.gather(*(self.runtime.inspect(c) for c in changed))
        return with_changes(observation, (item for item in found if item is not None),
                            gone=[c.id for c, item in zip(changed, found, strict=True)
                                  if item is None])

    def _retry_in(self, state: PodState, seconds: float) -> None:
        state.wake_at = min(state.wake_at, self.clock() + seconds)

    def _acted(self, state: PodState) -> None:
        state.acted_at = self.clock()

    # --- sandbox and containers ----------------------------------------------------------
    async def _pod_dns(self, pod: Mapping[str, Any]) -> DnsConfig:
        """The sandbox's resolver config (GetPodDNS), its warnings recorded; OSError
        when the node's resolv.conf cannot be read."""
        settings = self.config.dns
        host = await asyncio.to_thread(read_resolv_conf, settings.resolver_config)
        computed = pod_dns(pod, DnsSettings(cluster_dns=settings.cluster_dns,
                                            cluster_domain=settings.cluster_domain,
                                            resolver_config=settings.resolver_config,
                                            host=host))
        for warning in computed.warnings:
            if warning.node:
                log.warning("%s: %s", warning.reason, warning.message)
            else:
                self.events.emit(pod, "Warning", warning.reason, warning.message)
        return computed.config

    async def _create_sandbox(self, state: PodState, attempt: int) -> str | None:
        pod = state.pod
        try:
            dns = await self._pod_dns(pod)
        except OSError as e:
            self._acted(state)
            self.events.emit(pod, "Warning", "FailedCreatePodSandBox",
                             f"Failed to create pod sandbox config: {e}")
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return None
        try:
            sandbox_id = await self.runtime.run_sandbox(pod, attempt=attempt,
                                                        node_ip=self.config.node_ip, dns=dns)
        except RuntimeFailure as e:
            self._acted(state)
            self.events.emit(pod, "Warning", "FailedCreatePodSandBox",
                             f"Failed to create pod sandbox: {e.message}")
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return None
        self._acted(state)
        self.events.note(state.ref.uid, timeline.SANDBOX_READY)
        log.info("%s: started pod sandbox %s (attempt %d)", state.ref.key, sandbox_id[:12],
                 attempt)
        return sandbox_id

    async def _start_ephemeral(self, state: PodState, spec: Mapping[str, Any],
                               start: StartContainer, *, sandbox: SandboxInfo,
                               observation: PodObservation) -> list[ContainerSummary]:
        """An ephemeral container, once, in its target's PID namespace when it has one."""
        name = str(spec["name"])
        try:
            target = pid_target(spec, observation)
        except TargetNotRunning as e:
            # kubelet's startContainer: after the image, before creating (its next sync
            # tries again, as long as the container never ran).
            if not await self._ensure_image(state, spec):
                return []
            state.waiting[name] = Waiting(podstatus.CREATE_CONTAINER_CONFIG_ERROR, str(e))
            self.events.emit(state.pod, "Warning", "Failed", f"Error: {e}", container=name)
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return []
        log.info("%s: starting ephemeral container %s%s", state.ref.key, name,
                 f" in the PID namespace of {spec['targetContainerName']}" if target else "")
        return await self._start_container(state, spec, start, sandbox=sandbox,
                                           pid_target=target)

    def _in_crash_backoff(self, state: PodState, name: str, start: StartContainer) -> bool:
        """kubelet's doBackOff: a container that exited is restarted only once its back-off
        (10 s doubling to 5 min, from when it finished) has passed."""
        previous = start.previous
        if previous is None or previous.state != "exited" or not previous.finished_at:
            return False
        pod = state.pod
        key = f"{state.ref.uid}_{name}"
        finished = self._monotonic_of(previous.finished_at)
        now = self.clock()
        if self.crash_backoff.in_backoff_since(key, finished, now):
            delay = self.crash_backoff.delay(key)
            full_name = pod_full_name(pod)
            self.events.emit(pod, "Warning", "BackOff",
                             f"Back-off restarting failed container {name} in pod "
                             f"{full_name}", container=name)
            state.waiting[name] = Waiting(
                podstatus.CRASH_LOOP_BACK_OFF,
                f"back-off {podstatus.go_duration(delay)} restarting failed "
                f"container={name} pod={full_name}")
            self._retry_in(state, finished + delay - now + 0.05)
            return True
        self.crash_backoff.next(key, finished)
        return False

    async def _start_container(self, state: PodState, spec: Mapping[str, Any],
                               start: StartContainer, *, sandbox: SandboxInfo,
                               pid_target: str | None = None) -> list[ContainerSummary]:
        """Back-off, image, create, start; returns the container it made (if any)."""
        pod = state.pod
        name = str(spec["name"])
        if self._in_crash_backoff(state, name, start):
            return []
        if not await self._ensure_image(state, spec):
            return []
        try:
            extras = await self._extras(state, spec, sandbox=sandbox)
            container_id = await self.runtime.create_container(pod, spec, sandbox=sandbox,
                                                               attempt=start.attempt,
                                                               pid_target=pid_target,
                                                               extras=extras)
        except RuntimeFailure as e:
            self._acted(state)
            reason = (podstatus.CREATE_CONTAINER_CONFIG_ERROR
                      if isinstance(e, CreateContainerConfigError)
                      else podstatus.CREATE_CONTAINER_ERROR)
            self._start_failed(pod, name, reason)
            state.waiting[name] = Waiting(reason, e.message)
            self.events.emit(pod, "Warning", "Failed", f"Error: {e.message}", container=name)
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return []
        made = [ContainerSummary(id=container_id, pod=state.ref, name=name, is_sandbox=False,
                                 state="created")]
        self.events.emit(pod, "Normal", "Created", f"Created container: {name}", container=name)
        if self.metrics is not None:
            self.metrics.started_containers.inc((container_type(pod, name),))
        try:
            await self.runtime.start_container(container_id)
        except RuntimeFailure as e:
            self._acted(state)
            self._start_failed(pod, name, podstatus.RUN_CONTAINER_ERROR)
            state.waiting[name] = Waiting(podstatus.RUN_CONTAINER_ERROR, e.message)
            self.events.emit(pod, "Warning", "Failed",
                             f"Error: failed to start container \"{name}\": {e.message}",
                             container=name)
            self._retry_in(state, ERROR_RETRY_SECONDS)
            return made
        self._acted(state)
        self.events.emit(pod, "Normal", "Started", f"Started container {name}", container=name)
        state.waiting.pop(name, None)
        post_start = (spec.get("lifecycle") or {}).get("postStart")
        if post_start:
            await self._post_start(state, spec, post_start, container_id, sandbox=sandbox)
        return made

    def _start_failed(self, pod: Mapping[str, Any], name: str, code: str) -> None:
        if self.metrics is not None:
            self.metrics.started_container_errors.inc((container_type(pod, name), code))

    async def _post_start(self, state: PodState, spec: Mapping[str, Any],
                          handler: Mapping[str, Any], container_id: str, *,
                          sandbox: SandboxInfo) -> None:
        """startContainer's postStart: a failed hook kills the container it ran for."""
        pod = state.pod
        name = str(spec["name"])
        pod_ip = (self.config.node_ip if (pod.get("spec") or {}).get("hostNetwork")
                  else sandbox.ip)
        log.info("%s: running the postStart hook of %s", state.ref.key, name)
        failure = await run_handler(handler, container=spec, container_id=container_id,
                                    pod_name=pod_full_name(pod), pod_ip=pod_ip,
                                    runtime=self.runtime, timeout=POST_START_TIMEOUT_SECONDS)
        if failure is None:
            return
        log.info("%s: the postStart hook of %s failed: killing it", state.ref.key, name)
        self.events.emit(pod, "Warning", "FailedPostStartHook", failure, container=name)
        self.events.emit(pod, "Normal", "Killing", "FailedPostStartHook", container=name)
        await self._stop_with_pre_stop(pod, spec, container_id, grace=grace_period_of(pod),
                                       pod_ip=pod_ip)
        self._acted(state)
        state.waiting[name] = Waiting(podstatus.POST_START_HOOK_ERROR, failure)

    def _spec_of(self, pod: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
        spec = pod.get("spec") or {}
        return next((c for key in ("containers", "initContainers", "ephemeralContainers")
                     for c in spec.get(key) or [] if c.get("name") == name), None)

    async def _kill_container(self, pod: Mapping[str, Any], container: ContainerInfo, *,
                              grace: int, pod_ip: str,
                              ordering: TerminationOrdering | None = None) -> None:
        """killContainer: its preStop hook (if any) within the grace period, its turn (a
        sidecar outlives what it serves), then the stop signal with what is left."""
        try:
            await self._stop_with_pre_stop(pod, self._spec_of(pod, container.name) or {},
                                           container.id, grace=grace, pod_ip=pod_ip,
                                           ordering=ordering)
        finally:
            if ordering is not None:
                ordering.exited(container.name)

    async def _stop_with_pre_stop(self, pod: Mapping[str, Any], spec: Mapping[str, Any],
                                  container_id: str, *, grace: int, pod_ip: str,
                                  ordering: TerminationOrdering | None = None) -> None:
        handler = (spec.get("lifecycle") or {}).get("preStop")
        if handler and grace > 0:
            grace = remaining_grace(grace, await self._pre_stop(pod, spec, handler,
                                                                container_id, grace=grace,
                                                                pod_ip=pod_ip))
        if ordering is not None and grace > 0:
            started = self.clock()
            await ordering.wait_for_turn(str(spec.get("name") or ""), grace)
            grace = remaining_grace(grace, self.clock() - started)
        await self.runtime.stop_container(container_id, grace_seconds=grace)

    async def _pre_stop(self, pod: Mapping[str, Any], spec: Mapping[str, Any],
                        handler: Mapping[str, Any], container_id: str, *, grace: int,
                        pod_ip: str) -> float:
        """executePreStopHook: run it for at most `grace` seconds; the seconds it took."""
        name = str(spec.get("name") or "")
        key = f"{(pod.get('metadata') or {}).get('namespace')}/" \
              f"{(pod.get('metadata') or {}).get('name')}"
        log.info("%s: running the preStop hook of %s (grace %ds)", key, name, grace)
        started = self.clock()
        failure: str | None
        try:
            async with asyncio.timeout(grace):
                failure = await run_handler(handler, container=spec, container_id=container_id,
                                            pod_name=pod_full_name(pod), pod_ip=pod_ip,
                                            runtime=self.runtime, timeout=grace)
        except TimeoutError:  # as kube: no event, the stop signal follows
            log.info("%s: the preStop hook of %s did not complete in %ds", key, name, grace)
            failure = None
        if failure is not None:
            log.info("%s: the preStop hook of %s failed", key, name)
            self.events.emit(pod, "Warning", "FailedPreStopHook", failure, container=name)
        return self.clock() - started

    async def _ensure_image(self, state: PodState, spec: Mapping[str, Any]) -> bool:
        # A pull can take long: the status shows the sandbox and pod IP meanwhile.
        not_ready = await self.images.ensure_image(state.pod, state.ref, spec,
                                                   before_pull=lambda: self._set_status(state))
        if not_ready is None:
            return True
        state.waiting[str(spec["name"])] = not_ready.waiting
        if not_ready.retry_in is not None:
            self._retry_in(state, not_ready.retry_in)
        return False

    def _monotonic_of(self, moment: datetime) -> float:
        """A wall-clock time from Docker on the monotonic clock the back-offs use."""
        return self.clock() - (datetime.now(UTC) - moment).total_seconds()

    # --- SyncTerminatingPod --------------------------------------------------------------
    async def _stop_running(self, pod: Mapping[str, Any], observation: PodObservation, *,
                            grace: int) -> list[ContainerSummary]:
        """Stop running containers (SIGTERM, SIGKILL after `grace`), then the sandboxes;
        returns what it stopped."""
        running = [c for c in observation.containers if c.state == "running"]
        for container in running:
            self.events.emit(pod, "Normal", "Killing", f"Stopping container {container.name}",
                             container=container.name)
        pod_ip = self._pod_ip(pod, observation)
        ordering = TerminationOrdering(pod, {c.name for c in running})
        await asyncio.gather(*(self._kill_container(pod, c, grace=grace, pod_ip=pod_ip,
                                                    ordering=ordering)
                               for c in running))
        sandboxes = [s for s in observation.sandboxes if s.ready]
        await asyncio.gather(*(self.runtime.stop_container(s.id,
                                                           grace_seconds=SANDBOX_STOP_SECONDS)
                               for s in sandboxes))
        return [*map(summary_of, running), *map(summary_of, sandboxes)]

    async def sync_terminating_pod(self, state: PodState) -> None:
        """Deletion: stop with the grace period, remove everything, then the API object."""
        pod = state.pod
        if self.prober is not None:
            self.prober.forget(state.ref.uid)
        if not state.finished:
            grace = grace_period_of(pod)
            log.info("%s: terminating (grace %ds)", state.ref.key, grace)
            # Straight from the runtime: an interrupted sync may have just made something
            # (nothing makes more while this runs: the worker syncs one at a time).
            observation = (await self._observe_now(state)).observation
            await self._stop_running(pod, observation, grace=grace)
            self._acted(state)
            ids = [c.id for c in observation.containers] + [s.id for s in observation.sandboxes]
            for container_id in ids:
                await self.runtime.remove_container(container_id)
            self._acted(state)
            if self.volumes is not None:
                await self.volumes.teardown(state.ref.uid)
            if self.objects is not None:
                self.objects.unregister_pod(state.ref.uid)
            state.finished = True
            log.info("%s: containers, sandbox and volumes removed", state.ref.key)
        if state.removed:
            return
        try:
            # Only this pod: a pod recreated under the same name is another one (uid).
            await self.api.delete("pods", state.ref.name, namespace=state.ref.namespace,
                                  grace_period_seconds=0,
                                  preconditions={"uid": state.ref.uid})
            log.info("%s: pod object deleted", state.ref.key)
        except (NotFound, Conflict):
            pass
