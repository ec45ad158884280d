"""Pod status as the kubelet reports it: pure functions of (pod, what the runtime shows).

Follows kubelet's generateAPIPodStatus / convertToAPIContainerStatuses / getPhase and
the status generators for conditions: the newest runtime container of each spec
container gives `state`, the one before it `lastState`, its attempt number the
`restartCount`; the reasons the last sync could not start a container (image pull
errors, crash-loop back-off, ...) turn a container that should run into `waiting`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from common.timestamps import rfc3339
from kubelet.prober.probes import ProbeStatus
from kubelet.qos import pod_qos_class
from kubelet.runtime import ContainerInfo, PodObservation, is_sidecar
from kubelet.termination import with_message

# Waiting reasons, as the kubelet words them.
CONTAINER_CREATING = "ContainerCreating"
ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
INVALID_IMAGE_NAME = "InvalidImageName"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
CREATE_CONTAINER_ERROR = "CreateContainerError"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
RUN_CONTAINER_ERROR = "RunContainerError"
POD_INITIALIZING = "PodInitializing"
POST_START_HOOK_ERROR = "PostStartHookError"

# Condition types the kubelet owns (others, e.g. DisruptionTarget, are kept as they are).
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
READY = "Ready"
CONTAINERS_READY = "ContainersReady"
POD_SCHEDULED = "PodScheduled"
KUBELET_CONDITIONS = (POD_READY_TO_START_CONTAINERS, INITIALIZED, READY, CONTAINERS_READY,
                      POD_SCHEDULED)

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Waiting:
    """Why a container that should run is not running (kubelet's reason cache)."""

    reason: str
    message: str = ""


def pod_full_name(pod: Mapping[str, Any]) -> str:
    """kubelet's format.Pod: name_namespace(uid)."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name')}_{meta.get('namespace') or 'default'}({meta.get('uid')})"


def go_duration(seconds: float) -> str:
    """A duration as Go prints it: 10s, 1m20s, 5m0s, 1.5s, 250ms."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    minutes, rest = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m{rest}s" if hours else f"{minutes}m{rest}s"


def restart_policy(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("restartPolicy") or "Always")


def should_restart(pod: Mapping[str, Any], latest: ContainerInfo | None) -> bool:
    """kubelet's ShouldContainerBeRestarted, for a container whose newest instance is `latest`."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if latest is None or latest.state in ("created", "unknown"):
        return True
    if latest.state == "running":
        return False
    policy = restart_policy(pod)
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return latest.exit_code != 0
    return True


def terminated_state(container: ContainerInfo) -> dict[str, Any]:
    if container.oom_killed:
        reason = "OOMKilled"
    elif container.started_at is None and container.error:
        reason = "StartError"  # it never ran: the runtime could not start it
    elif container.exit_code == 0:
        reason = "Completed"
    else:
        reason = "Error"
    state: dict[str, Any] = {"exitCode": container.exit_code, "reason": reason,
                             "containerID": f"docker://{container.id}"}
    message = with_message(container.error, container.termination_message)
    if message:
        state["message"] = message
    if container.started_at:
        state["startedAt"] = rfc3339(container.started_at)
    if container.finished_at:
        state["finishedAt"] = rfc3339(container.finished_at)
    return {"terminated": state}


def runtime_state(container: ContainerInfo) -> dict[str, Any]:
    if container.state == "running":
        started = container.started_at or container.created_at
        return {"running": {"startedAt": rfc3339(started)} if started else {}}
    if container.state == "exited":
        return terminated_state(container)
    return {"waiting": {"reason": CONTAINER_CREATING}}


def init_container_status(pod: Mapping[str, Any], spec: Mapping[str, Any],
                          instances: list[ContainerInfo], old: Mapping[str, Any] | None,
                          waiting: Waiting | None,
                          probes: ProbeStatus | None = None) -> dict[str, Any]:
    """The initContainerStatuses[] entry of one init container. A regular one is, unless
    the pod is Never, restarted when it fails (Always acts as OnFailure); ready once it
    completed (exit 0), started only while it runs. A sidecar is always restarted and is
    ready and started as its probes say, like an app container."""
    if is_sidecar(spec):
        always = {**pod, "spec": {**(pod.get("spec") or {}), "restartPolicy": "Always"}}
        return container_status(always, spec, instances, old, waiting, probes)
    policy = "Never" if restart_policy(pod) == "Never" else "OnFailure"
    as_run = {**pod, "spec": {**(pod.get("spec") or {}), "restartPolicy": policy}}
    status = container_status(as_run, spec, instances, old, waiting)
    terminated = (status.get("state") or {}).get("terminated")
    status["ready"] = terminated is not None and int(terminated.get("exitCode") or 0) == 0
    status["started"] = "running" in (status.get("state") or {})
    return status


def has_init_containers(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("initContainers"))


def default_waiting_reason(pod: Mapping[str, Any]) -> str:
    """convertToAPIContainerStatuses' default waiting state: PodInitializing for every
    container of a pod with init containers, else ContainerCreating."""
    return POD_INITIALIZING if has_init_containers(pod) else CONTAINER_CREATING


def container_status(pod: Mapping[str, Any], spec: Mapping[str, Any],
                     instances: list[ContainerInfo], old: Mapping[str, Any] | None,
                     waiting: Waiting | None,
                     probes: ProbeStatus | None = None) -> dict[str, Any]:
    """The containerStatuses[] entry of one spec container; `instances` newest first;
    `probes`: what its readiness and startup probes say (None: it has none)."""
    status: dict[str, Any] = {
        "name": spec["name"], "image": spec.get("image", ""), "imageID": "",
        "ready": False, "started": False, "restartCount": 0,
        "state": {"waiting": {"reason": default_waiting_reason(pod)}}, "lastState": {},
    }
    if old:
        status["restartCount"] = int(old.get("restartCount") or 0)
        status["lastState"] = dict(old.get("lastState") or {})
        if "terminated" in (old.get("state") or {}) and not instances:
            status["state"] = dict(old["state"])
    if instances:
        latest = instances[0]
        status.update(
            containerID=f"docker://{latest.id}", imageID=f"docker://{latest.image_id}",
            restartCount=latest.attempt, state=runtime_state(latest),
            lastState=runtime_state(instances[1]) if len(instances) > 1 else {})
        if latest.state == "running":
            # Without probes, running is ready and started.
            status["ready"] = probes.ready if probes is not None else True
            status["started"] = probes.started if probes is not None else True
    elif old and "running" in (old.get("state") or {}):
        # It ran and its container is gone (removed behind our back): it did terminate.
        status["lastState"] = {"terminated": {
            "exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was deleted.  "
                       "The container used to be Running"}}
        if not (pod.get("metadata") or {}).get("deletionTimestamp"):
            status["restartCount"] += 1
    latest_instance = instances[0] if instances else None
    if waiting is not None and should_restart(pod, latest_instance):
        if "terminated" in status["state"]:
            status["lastState"] = status["state"]
        message = {"reason": waiting.reason}
        if waiting.message:
            message["message"] = waiting.message
        status["state"] = {"waiting": message}
        status["ready"] = False
        status["started"] = False
    return status


def ephemeral_container_status(pod: Mapping[str, Any], spec: Mapping[str, Any],
                               instances: list[ContainerInfo], old: Mapping[str, Any] | None,
                               waiting: Waiting | None) -> dict[str, Any]:
    """The ephemeralContainerStatuses[] entry of one ephemeral container: as a container of
    a pod that never restarts, never ready (no probe ever says so), no `started`."""
    never = {**pod, "spec": {**(pod.get("spec") or {}), "restartPolicy": "Never"}}
    status = container_status(never, spec, instances[:1], old, waiting)
    status.pop("started", None)
    status.update(ready=False, restartCount=0)
    return status


def _count_containers(specs: list[Mapping[str, Any]], by_name: Mapping[str, dict[str, Any]]
                      ) -> dict[str, int]:
    """getPhase's counters of the app containers: running, waiting, stopped, succeeded,
    unknown."""
    counts = dict.fromkeys(("running", "waiting", "stopped", "succeeded", "unknown"), 0)
    for spec in specs:
        status = by_name.get(spec["name"])
        state = (status or {}).get("state") or {}
        if status is None or not state:
            counts["unknown"] += 1
        elif "running" in state:
            counts["running"] += 1
        elif "terminated" in state:
            counts["stopped"] += 1
            if int(state["terminated"].get("exitCode") or 0) == 0:
                counts["succeeded"] += 1
        elif "terminated" in (status.get("lastState") or {}):
            counts["stopped"] += 1
        else:
            counts["waiting"] += 1
    return counts


def pod_phase(pod: Mapping[str, Any], statuses: list[dict[str, Any]],
              init_statuses: list[dict[str, Any]] | None = None) -> str:
    """kubelet's getPhase. A regular init container that runs, waits for its first run, or
    has no status yet keeps the pod Pending; one that failed fails a Never pod. A sidecar
    counts as a running container while it runs, keeps the pod Pending until it has started
    (unless an app container already started: a sidecar restarting later does not send the
    pod back to Pending), and once it has terminated it does not count at all."""
    spec = pod.get("spec") or {}
    init_by_name = {s["name"]: s for s in init_statuses or []}
    pending_init = failed_init = 0
    running = waiting = unknown = 0
    for init in spec.get("initContainers") or []:
        status = init_by_name.get(init["name"])
        state = (status or {}).get("state") or {}
        last = ((status or {}).get("lastState") or {}).get("terminated")
        if is_sidecar(init):
            if status is None or not state:
                pending_init += 1
                unknown += 1
            elif "running" in state:
                pending_init += not status.get("started")
                running += 1
            elif "waiting" in state and last is None:
                pending_init += 1
                waiting += 1
            continue
        if "terminated" in state:
            failed_init += int(state["terminated"].get("exitCode") or 0) != 0
        elif "waiting" in state and last is not None:
            failed_init += int(last.get("exitCode") or 0) != 0
        else:  # no status, running, or waiting to run for the first time
            pending_init += 1
    counts = _count_containers(list(spec.get("containers") or []),
                               {s["name"]: s for s in statuses})
    running += counts["running"]
    waiting += counts["waiting"]
    unknown += counts["unknown"]
    stopped, succeeded = counts["stopped"], counts["succeeded"]
    if failed_init > 0 and restart_policy(pod) == "Never":
        return "Failed"
    if (pending_init > 0 and not any_regular_container_started(statuses)) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        policy = restart_policy(pod)
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _go_list(names: list[str]) -> str:
    return "[" + " ".join(names) + "]"


def _condition(type_: str, status: bool, *, old: Mapping[str, dict[str, Any]], now: datetime,
               reason: str = "", message: str = "") -> dict[str, Any]:
    value = "True" if status else "False"
    previous = old.get(type_)
    transition = (previous.get("lastTransitionTime") if previous and previous.get("status") == value
                  else None) or rfc3339(now)
    condition: dict[str, Any] = {"type": type_, "status": value,
                                 "lastTransitionTime": transition}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def any_regular_container_started(statuses: list[dict[str, Any]]) -> bool:
    """HasAnyRegularContainerStarted: one is running, has terminated or ran before."""
    for status in statuses:
        state = status.get("state") or {}
        if "running" in state or "terminated" in state or \
                "terminated" in (status.get("lastState") or {}):
            return True
    return False


def initialized_condition(pod: Mapping[str, Any], statuses: list[dict[str, Any]],
                          init_statuses: list[dict[str, Any]], phase: str) -> dict[str, Any]:
    """GeneratePodInitializedCondition's status, reason and message."""
    inits = (pod.get("spec") or {}).get("initContainers") or []
    if not inits:
        return {"status": True}
    by_name = {s["name"]: s for s in init_statuses}
    unknown = [str(c["name"]) for c in inits if c["name"] not in by_name]
    # isInitContainerInitialized: a regular one completed, a sidecar started
    unready = [str(c["name"]) for c in inits if c["name"] in by_name
               and not by_name[c["name"]].get("started" if is_sidecar(c) else "ready")]
    if phase == "Succeeded" and not unknown:
        return {"status": True, "reason": "PodCompleted"}
    if any_regular_container_started(statuses):
        return {"status": True}
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        messages.append(f"containers with incomplete status: {_go_list(unready)}")
    if messages:
        return {"status": False, "reason": "ContainersNotInitialized",
                "message": ", ".join(messages)}
    return {"status": True}


def pod_conditions(pod: Mapping[str, Any], statuses: list[dict[str, Any]], phase: str, *,
                   sandbox_ready: bool, now: datetime,
                   init_statuses: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    old_conditions = list((pod.get("status") or {}).get("conditions") or [])
    old = {c.get("type", ""): c for c in old_conditions}
    kept = [c for c in old_conditions if c.get("type") not in KUBELET_CONDITIONS]
    # GenerateContainersReadyCondition: the sidecars, then the app containers
    sidecar_names = {c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []
                     if is_sidecar(c)}
    sidecars = [s for s in init_statuses or [] if s["name"] in sidecar_names]
    unready = [s["name"] for s in [*sidecars, *statuses] if not s.get("ready")]
    if phase == "Succeeded":
        ready_args: dict[str, Any] = {"status": False, "reason": "PodCompleted"}
    elif phase == "Failed":
        ready_args = {"status": False, "reason": "PodFailed"}
    elif unready:
        ready_args = {"status": False, "reason": "ContainersNotReady",
                      "message": f"containers with unready status: {_go_list(unready)}"}
    else:
        ready_args = {"status": True}
    return [
        *kept,
        _condition(POD_READY_TO_START_CONTAINERS, sandbox_ready, old=old, now=now),
        _condition(INITIALIZED, old=old, now=now,
                   **initialized_condition(pod, statuses, init_statuses or [], phase)),
        _condition(READY, old=old, now=now, **ready_args),
        _condition(CONTAINERS_READY, old=old, now=now, **ready_args),
        _condition(POD_SCHEDULED, True, old=old, now=now),
    ]


def generate_pod_status(pod: Mapping[str, Any], observation: PodObservation,
                        waiting: Mapping[str, Waiting], *, node_ip: str,
                        now: datetime,
                        probes: Mapping[str, ProbeStatus] | None = None) -> dict[str, Any]:
    """The full `status` the kubelet writes for `pod` given what the runtime shows (and,
    for containers with readiness or startup probes, what those say)."""
    old_status = dict(pod.get("status") or {})
    old_containers = {s.get("name"): s for s in old_status.get("containerStatuses") or []}
    statuses = []
    for spec in (pod.get("spec") or {}).get("containers") or []:
        instances = observation.containers_named(spec["name"])
        statuses.append(container_status(pod, spec, instances, old_containers.get(spec["name"]),
                                         waiting.get(spec["name"]),
                                         (probes or {}).get(spec["name"])))
    old_init = {s.get("name"): s for s in old_status.get("initContainerStatuses") or []}
    init_statuses = [
        init_container_status(pod, spec, observation.containers_named(spec["name"]),
                              old_init.get(spec["name"]), waiting.get(spec["name"]),
                              (probes or {}).get(spec["name"]))
        for spec in (pod.get("spec") or {}).get("initContainers") or []]
    phase = pod_phase(pod, statuses, init_statuses)
    if old_status.get("phase") in TERMINAL_PHASES:
        phase = old_status["phase"]  # pods never leave a terminal phase
    sandbox = observation.latest_sandbox()
    sandbox_ready = sandbox is not None and sandbox.ready
    status: dict[str, Any] = {
        key: old_status[key] for key in ("qosClass", "reason", "message", "nominatedNodeName")
        if key in old_status
    }
    # GetPodQOS: the class the apiserver set at creation (it is immutable), else computed.
    status.setdefault("qosClass", pod_qos_class(pod))
    status.update(
        phase=phase,
        conditions=pod_conditions(pod, statuses, phase, sandbox_ready=sandbox_ready, now=now,
                                  init_statuses=init_statuses),
        hostIP=node_ip, hostIPs=[{"ip": node_ip}],
        startTime=old_status.get("startTime") or rfc3339(now),
        containerStatuses=statuses,
    )
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    ephemeral = ephemeral_container_statuses(pod, observation, waiting)
    if ephemeral:
        status["ephemeralContainerStatuses"] = ephemeral
    pod_ip = ""
    if (pod.get("spec") or {}).get("hostNetwork"):
        pod_ip = node_ip
    elif sandbox is not None and sandbox.ready and sandbox.ip:
        pod_ip = sandbox.ip
    pod_ip = pod_ip or str(old_status.get("podIP") or "")
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status


def ephemeral_container_statuses(pod: Mapping[str, Any], observation: PodObservation,
                                 waiting: Mapping[str, Waiting]) -> list[dict[str, Any]]:
    old = {s.get("name"): s
           for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or []}
    return [ephemeral_container_status(pod, spec, observation.containers_named(spec["name"]),
                                       old.get(spec["name"]), waiting.get(spec["name"]))
            for spec in (pod.get("spec") or {}).get("ephemeralContainers") or []]


def without_nulls(value: Any) -> Any:
    """The value as the apiserver stores it: null fields dropped (for comparisons)."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning status `old` into `new` (null removes a field)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    patch.update(new)
    return patch
