"""What to do to a pod: a pure diff of the desired pod (API) against the runtime's view.

Modelled on kuberuntime_manager.go computePodActions: decide whether the sandbox must
be (re)created, which containers to start (with which attempt number) and which to
kill. Restarting the kubelet and recomputing gives the same answer, which is what makes
adoption of running containers free of duplicates.

Init containers follow computeInitContainerActions (`init_container_actions`): in order,
each regular one to completion; a sidecar (`restartPolicy: Always`) only has to have
started before the next, keeps running beside the app containers and is restarted alone
when it exits, but never keeps a pod whose app containers are done alive.

Ephemeral containers (`kubectl debug`) are started once each, when the runtime has no
instance of them, and never again whatever the pod's restartPolicy; a running one is
neither a reason to keep the sandbox nor a container to kill.

Also the kubelet's back-off (client-go flowcontrol.Backoff): per-key delays doubling
from 10 s to 5 min, forgotten once the key has been quiet for twice the maximum
(so a container that ran 10 minutes starts again from 10 s).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.backoff import KeyedBackoff
from kubelet.runtime import (
    ContainerInfo,
    PodObservation,
    SandboxInfo,
    container_spec_hash,
    is_sidecar,
)
from kubelet.status import restart_policy, should_restart

INITIAL_BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 300.0


@dataclass
class Backoff(KeyedBackoff):
    """The kubelet's crash and pull back-off (common.backoff), 10 s doubling to 5 min."""

    initial: float = INITIAL_BACKOFF_SECONDS
    maximum: float = MAX_BACKOFF_SECONDS


@dataclass(frozen=True)
class StartContainer:
    name: str
    attempt: int
    previous: ContainerInfo | None  # the newest earlier instance, for the crash back-off


@dataclass(frozen=True)
class KillContainer:
    container: ContainerInfo
    message: str


@dataclass
class PodActions:
    kill_pod: bool = False  # stop every container and the sandbox
    create_sandbox: bool = False
    sandbox_attempt: int = 0
    start: list[StartContainer] = field(default_factory=list)
    kill: list[KillContainer] = field(default_factory=list)
    start_ephemeral: list[StartContainer] = field(default_factory=list)


class TargetNotRunning(Exception):
    """The container an ephemeral container targets has no running instance."""


def ephemeral_specs(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("ephemeralContainers") or [])


def ephemeral_containers_to_start(pod: Mapping[str, Any],
                                  observation: PodObservation) -> list[StartContainer]:
    """The ephemeral containers that never ran here: one with any instance in the runtime,
    running or exited, is never started again (so no restart, and no duplicate after a
    kubelet restart)."""
    return [StartContainer(str(spec["name"]), 0, None) for spec in ephemeral_specs(pod)
            if observation.latest(str(spec["name"])) is None]


def pid_target(container: Mapping[str, Any], observation: PodObservation) -> str | None:
    """The runtime id of the container whose PID namespace an ephemeral container joins
    (`targetContainerName`), None when it has no target; TargetNotRunning, with the
    kubelet's wording, when the target is not running."""
    target = container.get("targetContainerName")
    if not target:
        return None
    latest = observation.latest(str(target))
    if latest is None or latest.state != "running":
        raise TargetNotRunning(f"unable to find target container {target}")
    return latest.id


def sandbox_changed(pod: Mapping[str, Any], observation: PodObservation) -> tuple[bool, int]:
    """(needs a new sandbox, its attempt number) like podSandboxChanged."""
    latest: SandboxInfo | None = observation.latest_sandbox()
    if latest is None:
        return True, 0
    ready = [s for s in observation.sandboxes if s.ready]
    host_network = bool((pod.get("spec") or {}).get("hostNetwork"))
    if len(ready) > 1 or not latest.ready or latest.host_network != host_network:
        return True, latest.attempt + 1
    return False, latest.attempt


def _next_attempt(latest: ContainerInfo | None) -> int:
    return latest.attempt + 1 if latest is not None else 0


def init_specs(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("initContainers") or [])


def init_container_failed(container: ContainerInfo) -> bool:
    """isInitContainerFailed: it exited non-zero, or the runtime lost track of it."""
    return (container.state == "exited" and container.exit_code != 0) \
        or container.state == "unknown"


def _always_started(container: ContainerInfo) -> bool:
    return True


@dataclass
class InitActions:
    """computeInitContainerActions' answer: the init containers to start (spec order), the
    instances to kill first, whether the pod is initialized, and whether initialization
    failed for good (a Never pod whose init container failed)."""

    start: list[Mapping[str, Any]] = field(default_factory=list)
    kill: list[KillContainer] = field(default_factory=list)
    initialized: bool = False
    failed: bool = False


def _regular_container_created(pod: Mapping[str, Any], observation: PodObservation) -> bool:
    """An app container created or running means the init containers all ran at some point
    (their instances may have been removed since): the regular ones never run again. An
    exited one does not count: after a reboot every container has exited, and a new sandbox
    must be initialized again."""
    for spec in (pod.get("spec") or {}).get("containers") or []:
        latest = observation.latest(str(spec["name"]))
        if latest is not None and latest.state in ("created", "running"):
            return True
    return False


def init_container_actions(pod: Mapping[str, Any], observation: PodObservation, *,
                           sidecar_started: Callable[[ContainerInfo], bool] = _always_started
                           ) -> InitActions:
    """What the init containers need (kuberuntime's computeInitContainerActions): the first
    that has not run is started; a regular one must complete (exit 0) before the next, a
    sidecar only has to be started (running, and its startup probe passed:
    `sidecar_started`); a sidecar that exited is started again whatever the pod's
    restartPolicy, even once the pod is initialized.

    The init containers are read from the last one back: a completed one may have been
    removed from the runtime, the newest that left a trace says how far the pod got."""
    inits = init_specs(pod)
    if not inits:
        return InitActions(initialized=True)
    actions = InitActions(initialized=_regular_container_created(pod, observation))
    previously_initialized = actions.initialized
    restart_on_failure = restart_policy(pod) != "Never"
    to_start: list[int] = []
    last = len(inits) - 1
    for i in range(last, -1, -1):
        spec = inits[i]
        name = str(spec["name"])
        sidecar = is_sidecar(spec)
        latest = observation.latest(name)
        if latest is None:
            if previously_initialized and sidecar:
                to_start.append(i)  # a sidecar of an initialized pod went missing
            continue
        if previously_initialized and not sidecar:
            continue  # after initialization only the sidecars are kept running
        if latest.state == "created":  # made but never started: start it (again)
            to_start.append(i)
        elif latest.state == "running":
            if sidecar and sidecar_started(latest):
                if i == last:
                    actions.initialized = True
                elif not previously_initialized:
                    to_start.append(i + 1)  # started for the first time: the next one
                if latest.spec_hash and latest.spec_hash != container_spec_hash(spec):
                    actions.kill.append(KillContainer(
                        latest, f"Init container {name} definition changed"))
                    to_start.append(i)
            # a regular one (or a sidecar not started yet): wait for it
        elif latest.state == "exited":
            if sidecar:
                to_start.append(i)
            elif init_container_failed(latest):
                if not restart_on_failure:
                    return InitActions(failed=True)
                to_start.append(i)
            elif i == last:
                actions.initialized = True
            else:
                to_start.append(i + 1)
        else:  # the runtime lost track of it: kill what is left, then start it again
            if not sidecar and not restart_on_failure:
                return InitActions(failed=True)
            actions.kill.append(KillContainer(
                latest, f"Init container {name} is in an unknown state, will be restarted"))
            to_start.append(i)
        previously_initialized = True
    if not previously_initialized:
        to_start.append(0)  # nothing has run yet: the first one
    actions.start = [inits[i] for i in reversed(to_start)]
    return actions


def compute_pod_actions(pod: Mapping[str, Any], observation: PodObservation, *,
                        sidecar_started: Callable[[ContainerInfo], bool] = _always_started
                        ) -> PodActions:
    """`sidecar_started`: whether a running sidecar counts as started (its startup probe,
    if it has one, passed)."""
    specs = list((pod.get("spec") or {}).get("containers") or [])
    policy = restart_policy(pod)
    create, attempt = sandbox_changed(pod, observation)
    actions = PodActions(create_sandbox=create, sandbox_attempt=attempt)
    inits = init_specs(pod)

    if create:
        actions.kill_pod = observation.latest_sandbox() is not None
        # A Never pod whose containers have already run is done: no new sandbox for it.
        if policy == "Never" and attempt != 0 and observation.containers:
            actions.create_sandbox = False
            return actions
        for spec in specs:
            latest = observation.latest(spec["name"])
            if policy == "OnFailure" and latest is not None and latest.state == "exited" \
                    and latest.exit_code == 0:
                continue
            if policy == "Never" and latest is not None and latest.state == "exited":
                continue
            actions.start.append(StartContainer(spec["name"], _next_attempt(latest), latest))
        if not actions.start and init_container_actions(pod, observation).initialized:
            actions.create_sandbox = False  # nothing to run in a new sandbox: do not make one
            return actions
        if inits:  # a new sandbox runs the init containers again, from the first
            first = str(inits[0]["name"])
            latest = observation.latest(first)
            actions.start = [StartContainer(first, _next_attempt(latest), latest)]
        return actions

    init = init_container_actions(pod, observation, sidecar_started=sidecar_started)
    if init.failed:
        actions.kill_pod = True  # initialization failed for good: the pod Failed
        return actions
    actions.kill += init.kill
    for spec in init.start:
        latest = observation.latest(str(spec["name"]))
        actions.start.append(StartContainer(str(spec["name"]), _next_attempt(latest), latest))
    if not init.initialized:
        return actions  # still initializing: the app containers wait

    wanted = {spec["name"] for spec in specs + inits + ephemeral_specs(pod)}
    keep = 0
    sidecar_starts = len(actions.start)
    for spec in specs:
        latest = observation.latest(spec["name"])
        if latest is not None and latest.state == "running":
            if latest.spec_hash and latest.spec_hash != container_spec_hash(spec):
                actions.kill.append(KillContainer(
                    latest, f"Container {spec['name']} definition changed, will be restarted"))
                actions.start.append(StartContainer(spec["name"], latest.attempt + 1, latest))
            else:
                keep += 1
            continue
        if should_restart(pod, latest):
            actions.start.append(StartContainer(spec["name"], _next_attempt(latest), latest))
    for container in observation.containers:
        if container.state == "running" and container.name not in wanted:
            actions.kill.append(KillContainer(
                container, f"Container {container.name} is not in the pod's spec"))
    if keep == 0 and len(actions.start) == sidecar_starts:
        # Nothing left to run (sidecars do not keep a pod alive): stop the sandbox too.
        actions.kill_pod = True
        actions.start = []
    else:
        actions.start_ephemeral = ephemeral_containers_to_start(pod, observation)
    return actions


def containers_to_garbage_collect(observation: PodObservation, *,
                                  keep_per_container: int = 2) -> list[str]:
    """Ids of exited instances beyond the newest `keep_per_container` of each container
    (current + previous, which `logs --previous` reads), and of sandboxes that are neither
    the newest one nor running."""
    doomed: list[str] = []
    seen: dict[str, int] = {}
    for container in observation.containers:  # newest first
        seen[container.name] = seen.get(container.name, 0) + 1
        if seen[container.name] > keep_per_container and container.state != "running":
            doomed.append(container.id)
    for sandbox in observation.sandboxes[1:]:
        if not sandbox.ready:
            doomed.append(sandbox.id)
    return doomed
