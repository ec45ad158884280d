"""What to do to a pod: a pure diff of the desired pod (API) against the runtime's view.

Modelled on kuberuntime_manager.go computePodActions: decide whether the sandbox must
be (re)created, which containers to start (with which attempt number) and which to
kill. Restarting the kubelet and recomputing gives the same answer, which is what makes
adoption of running containers free of duplicates.

Ephemeral containers (`kubectl debug`) are started once each, when the runtime has no
instance of them, and never again whatever the pod's restartPolicy; a running one is
neither a reason to keep the sandbox nor a container to kill.

Also the kubelet's back-off (client-go flowcontrol.Backoff): per-key delays doubling
from 10 s to 5 min, forgotten once the key has been quiet for twice the maximum
(so a container that ran 10 minutes starts again from 10 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.backoff import KeyedBackoff
from kubelet.runtime import ContainerInfo, PodObservation, SandboxInfo, container_spec_hash
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


@dataclass(frozen=True)
class InitProgress:
    """findNextInitContainerToRun: the failed instance to restart (if any), the init
    container to run next (None: wait for the running one, or all are done), and whether
    initialization is done."""

    failed: ContainerInfo | None
    next: Mapping[str, Any] | None
    done: bool


def next_init_container(pod: Mapping[str, Any], observation: PodObservation) -> InitProgress:
    inits = init_specs(pod)
    if not inits:
        return InitProgress(None, None, True)
    # An app container running means the init containers all ran at some point (their
    # instances may have been removed since): never run them again.
    for spec in (pod.get("spec") or {}).get("containers") or []:
        latest = observation.latest(str(spec["name"]))
        if latest is not None and latest.state == "running":
            return InitProgress(None, None, True)
    for spec in reversed(inits):
        latest = observation.latest(str(spec["name"]))
        if latest is not None and init_container_failed(latest):
            return InitProgress(latest, spec, False)
    for i in range(len(inits) - 1, -1, -1):
        latest = observation.latest(str(inits[i]["name"]))
        if latest is None:
            continue
        if latest.state != "exited":  # running (or being created): wait for it
            return InitProgress(None, None, False)
        if i == len(inits) - 1:
            return InitProgress(None, None, True)
        return InitProgress(None, inits[i + 1], False)
    return InitProgress(None, inits[0], False)


def compute_pod_actions(pod: Mapping[str, Any], observation: PodObservation) -> PodActions:
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
        if not actions.start and next_init_container(pod, observation).done:
            actions.create_sandbox = False  # nothing to run in a new sandbox: do not make one
            return actions
        if inits:  # a new sandbox runs the init containers again, from the first
            first = str(inits[0]["name"])
            latest = observation.latest(first)
            actions.start = [StartContainer(first, _next_attempt(latest), latest)]
        return actions

    progress = next_init_container(pod, observation)
    if not progress.done:
        if progress.next is not None:
            if progress.failed is not None and policy == "Never":
                actions.kill_pod = True  # initialization failed for good: the pod Failed
            else:
                if progress.failed is not None and progress.failed.state == "unknown":
                    actions.kill.append(KillContainer(
                        progress.failed, f"Init container {progress.failed.name} is in an "
                                         f"unknown state, will be restarted"))
                name = str(progress.next["name"])
                latest = observation.latest(name)
                actions.start.append(StartContainer(name, _next_attempt(latest), latest))
        # Still initializing (or failed): the app containers wait.
        return actions

    wanted = {spec["name"] for spec in specs + inits + ephemeral_specs(pod)}
    keep = 0
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
    if keep == 0 and not actions.start:
        actions.kill_pod = True  # nothing left to run: stop the sandbox too
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
