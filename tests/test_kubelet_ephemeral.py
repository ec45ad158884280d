"""The kubelet's ephemeral containers: pure decisions as tables (what to start, which PID
namespace, which status, which event field path), then against real Docker, and with the
real kubectl 1.37's `kubectl debug --target` (and `-it`, which falls back to the log until
the kubelet serves attach)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.logs import choose_container
from kubelet.actions import (
    TargetNotRunning,
    compute_pod_actions,
    ephemeral_containers_to_start,
    pid_target,
)
from kubelet.docker import container_create_body
from kubelet.events import container_field_path
from kubelet.runtime import PodObservation
from kubelet.status import Waiting, generate_pod_status
from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    ensure_docker,
    inspect_container,
    node_containers,
    remove_node_containers,
)
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import (
    NS,
    SERVE_FOREVER,
    create_pod,
    get_pod,
    pod_manifest,
    shell,
    wait_events,
    wait_running,
)
from tests.test_kubelet_status import NOW, instance, make_pod, observed, sandbox

DEBUGGER = {"name": "debugger", "image": "kubelite/busybox:1.35", "command": ["sleep", "3600"],
            "targetContainerName": "app"}


def with_debugger(restart_policy: str = "Always", *extra: dict[str, Any]) -> dict[str, Any]:
    return make_pod("app", restart_policy=restart_policy,
                    ephemeralContainers=[DEBUGGER, *extra])


# --- what to start -------------------------------------------------------------------------

@pytest.mark.parametrize("restart_policy", ["Always", "OnFailure", "Never"])
@pytest.mark.parametrize(("debugger_state", "starts"), [
    (None, ["debugger"]),  # never ran here: start it
    ("running", []),  # runs (also: found again after a kubelet restart): never a duplicate
    ("exited", []),  # ran and ended: ephemeral containers are never restarted
    ("created", []),  # created by an interrupted sync: it exists, so it is not made again
])
def test_an_ephemeral_container_runs_once(restart_policy: str, debugger_state: str | None,
                                          starts: list[str]) -> None:
    containers = [instance("app")]
    if debugger_state is not None:
        containers.append(instance("debugger", state=debugger_state, exit_code=1))
    actions = compute_pod_actions(with_debugger(restart_policy),
                                  observed(*containers, sandboxes=(sandbox(),)))
    assert [s.name for s in actions.start_ephemeral] == starts
    assert [s.attempt for s in actions.start_ephemeral] == [0] * len(starts)
    assert actions.start == [] and actions.kill == [] and not actions.kill_pod


def test_a_running_ephemeral_container_is_not_killed_as_unknown() -> None:
    actions = compute_pod_actions(with_debugger(), observed(
        instance("app"), instance("debugger"), instance("gone"), sandboxes=(sandbox(),)))
    assert [k.container.name for k in actions.kill] == ["gone"]


@pytest.mark.parametrize(("pod_containers", "sandboxes", "expect"), [
    # a new sandbox (the old one died): the pod's containers start again, not the debugger
    ([instance("app", state="exited")], (sandbox(ready=False),), "new sandbox"),
    # nothing else to run: the pod stops, the ephemeral container does not keep it alive
    ([instance("app", state="exited", exit_code=0)], (sandbox(),), "kill pod"),
])
def test_ephemeral_containers_never_start_with_a_new_or_dying_sandbox(
        pod_containers: list[Any], sandboxes: tuple[Any, ...], expect: str) -> None:
    actions = compute_pod_actions(with_debugger("Never"),
                                  observed(*pod_containers, sandboxes=sandboxes))
    assert actions.start_ephemeral == []
    assert (actions.create_sandbox or actions.kill_pod)


def test_only_the_ones_that_never_ran_start() -> None:
    pod = with_debugger("Always", {"name": "second", "image": "kubelite/busybox:1.35"})
    view = observed(instance("app"), instance("debugger", state="exited"))
    assert [s.name for s in ephemeral_containers_to_start(pod, view)] == ["second"]


@pytest.mark.parametrize(("container", "view", "expected"), [
    (DEBUGGER, observed(instance("app")), "app-0"),
    ({**DEBUGGER, "targetContainerName": ""}, observed(instance("app")), None),
    ({"name": "debugger", "image": "x"}, observed(), None),
    (DEBUGGER, observed(instance("app", attempt=1), instance("app", attempt=0, state="exited")),
     "app-1"),  # the newest instance of the target
    (DEBUGGER, observed(instance("app", state="exited")), TargetNotRunning),
    (DEBUGGER, PodObservation(), TargetNotRunning),
])
def test_pid_target(container: dict[str, Any], view: PodObservation, expected: Any) -> None:
    if expected is TargetNotRunning:
        with pytest.raises(TargetNotRunning, match="^unable to find target container app$"):
            pid_target(container, view)
    else:
        assert pid_target(container, view) == expected


@pytest.mark.parametrize(("pid_target_id", "share", "pid_mode"), [
    ("abc", False, "container:abc"),
    ("abc", True, "container:abc"),  # the target's namespace, even when the pod shares one
    (None, True, "container:sb"),
    (None, False, None),
])
def test_create_body_joins_the_sandbox_and_the_target(pid_target_id: str | None, share: bool,
                                                      pid_mode: str | None) -> None:
    pod = with_debugger()
    pod["spec"]["shareProcessNamespace"] = share
    body = container_create_body(pod, DEBUGGER, node_name="n", sandbox_id="sb", attempt=0,
                                 pid_target=pid_target_id)
    host = body["HostConfig"]
    assert (host["NetworkMode"], host["IpcMode"]) == ("container:sb", "container:sb")
    assert host.get("PidMode") == pid_mode
    assert body["Labels"]["io.kubernetes.container.name"] == "debugger"
    assert body["Labels"]["io.kubernetes.pod.uid"] == "u-1"
    assert body["Entrypoint"] == ["sleep", "3600"]


# --- status and events ---------------------------------------------------------------------

def ephemeral_status(pod: dict[str, Any], view: PodObservation,
                     waiting: dict[str, Waiting] | None = None) -> dict[str, Any]:
    status = generate_pod_status(pod, view, waiting or {}, node_ip="127.0.0.1", now=NOW)
    [found] = status["ephemeralContainerStatuses"]
    assert [c["name"] for c in status["containerStatuses"]] == ["app"]
    return dict(found)


@pytest.mark.parametrize(("view", "waiting", "state"), [
    (observed(instance("app")), None, {"waiting": {"reason": "ContainerCreating"}}),
    (observed(instance("app")), Waiting("ErrImagePull", "no such image"),
     {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}),
    (observed(instance("app")), Waiting("CreateContainerConfigError",
                                        "unable to find target container app"),
     {"waiting": {"reason": "CreateContainerConfigError",
                  "message": "unable to find target container app"}}),
    (observed(instance("app"), instance("debugger")), None,
     {"running": {"startedAt": "2026-01-02T03:03:35Z"}}),
    # ended: terminated for good, whatever reason a sync had to wait before
    (observed(instance("app"), instance("debugger", state="exited", exit_code=3)),
     Waiting("ErrImagePull"),
     {"terminated": {"exitCode": 3, "reason": "Error", "containerID": "docker://debugger-0",
                     "startedAt": "2026-01-02T03:03:35Z",
                     "finishedAt": "2026-01-02T03:03:36Z"}}),
])
def test_ephemeral_container_statuses(view: PodObservation, waiting: Waiting | None,
                                      state: dict[str, Any]) -> None:
    found = ephemeral_status(with_debugger(), view, {"debugger": waiting} if waiting else {})
    assert found["state"] == state
    assert (found["name"], found["image"], found["ready"], found["restartCount"]) == (
        "debugger", "kubelite/busybox:1.35", False, 0)
    assert "started" not in found


def test_ephemeral_containers_leave_phase_and_readiness_alone() -> None:
    status = generate_pod_status(with_debugger(), observed(instance("app"), sandboxes=(
        sandbox(),)), {"debugger": Waiting("ErrImagePull")}, node_ip="127.0.0.1", now=NOW)
    assert status["phase"] == "Running"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


def test_a_pod_without_ephemeral_containers_has_no_statuses_for_them() -> None:
    status = generate_pod_status(make_pod("app"), observed(instance("app")), {},
                                 node_ip="127.0.0.1", now=NOW)
    assert "ephemeralContainerStatuses" not in status


@pytest.mark.parametrize(("name", "path"), [
    ("app", "spec.containers{app}"),
    ("debugger", "spec.ephemeralContainers{debugger}"),
    ("setup", "spec.initContainers{setup}"),
])
def test_event_field_paths(name: str, path: str) -> None:
    pod = with_debugger()
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "x"}]
    assert container_field_path(pod, name) == path


def test_logs_of_an_ephemeral_container_are_served() -> None:
    assert choose_container(with_debugger(), "debugger") == "debugger"


# --- against real Docker -------------------------------------------------------------------

EPHEMERAL_PATCH = {"Content-Type": "application/strategic-merge-patch+json"}


async def add_ephemeral(http: httpx.AsyncClient, name: str, *containers: dict[str, Any]) -> None:
    response = await http.patch(f"/api/v1/namespaces/{NS}/pods/{name}/ephemeralcontainers",
                                json={"spec": {"ephemeralContainers": list(containers)}},
                                headers=EPHEMERAL_PATCH)
    assert response.status_code == 200, response.text


def ephemeral_state(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("ephemeralContainerStatuses") or []:
        if status["name"] == name:
            return dict(status["state"])
    return {}


def docker_exec(container_id: str, *command: str) -> str:
    done = subprocess.run(["docker", "exec", container_id, *command], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.docker
async def test_ephemeral_containers_on_a_real_node(http: httpx.AsyncClient, apiserver: ApiServer,
                                                   tmp_path: Path) -> None:
    ensure_docker()
    node = unique("ephemeral-node")
    kubelet = KubeletProcess(apiserver, tmp_path / "first", node_name=node).start()
    try:
        name = unique("debugged")
        # restartPolicy Always: still, an ephemeral container that ended never runs again
        await create_pod(http, pod_manifest(name, node, [shell("app", SERVE_FOREVER)]))
        await wait_running(http, name)
        await add_ephemeral(
            http, name,
            {"name": "debugger", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
             "imagePullPolicy": "IfNotPresent", "targetContainerName": "app"},
            {"name": "oneshot", "image": BUSYBOX_IMAGE, "command": ["sh", "-c", "exit 3"]})

        async def both_ran() -> dict[str, Any] | None:
            pod = await get_pod(http, name)
            ready = "running" in ephemeral_state(pod, "debugger") and \
                "terminated" in ephemeral_state(pod, "oneshot")
            return pod if ready else None
        pod = await eventually(both_ran, timeout=60, what="the ephemeral containers to run")
        assert ephemeral_state(pod, "oneshot")["terminated"]["exitCode"] == 3
        [app] = node_containers(node, **{"io.kubernetes.container.name": "app"})
        [debugger] = node_containers(node, **{"io.kubernetes.container.name": "debugger"})
        [pause] = node_containers(node, **{"io.kubernetes.container.name": "POD"})
        host = (inspect_container(debugger["Id"]) or {})["HostConfig"]
        assert host["PidMode"] == f"container:{app['Id']}"
        assert host["NetworkMode"] == f"container:{pause['Id']}"
        # the target's processes are visible from the debugger
        assert "while true; do sleep 0.2; done" in docker_exec(debugger["Id"], "ps")
        events = await wait_events(http, pod, "Started")
        debugger_events = [e["reason"] for e in events if e["involvedObject"].get("fieldPath")
                           == "spec.ephemeralContainers{debugger}"]
        assert debugger_events[:3] == ["Pulled", "Created", "Started"]

        await asyncio.sleep(3)  # a few syncs later: never restarted, never duplicated
        assert len(node_containers(node, **{"io.kubernetes.container.name": "oneshot"})) == 1

        kubelet.kill()
        kubelet = KubeletProcess(apiserver, tmp_path / "second", node_name=node).start()
        await eventually(lambda: _logged(kubelet, f"{NS}/{name}: new pod worker"),
                         what="the new kubelet to pick the pod up")
        await asyncio.sleep(3)
        for container in ("debugger", "oneshot"):
            assert len(node_containers(node, **{"io.kubernetes.container.name": container})) == 1
        assert "running" in ephemeral_state(await get_pod(http, name), "debugger")

        await http.delete(f"/api/v1/namespaces/{NS}/pods/{name}")

        async def gone() -> bool:
            return node_containers(node) == []
        await eventually(gone, timeout=60, what="the pod's containers removed")
    finally:
        kubelet.stop()
        remove_node_containers(node)


async def _logged(kubelet: KubeletProcess, text: str) -> bool:
    return text in kubelet.log()


# --- kubectl debug -------------------------------------------------------------------------

@pytest.mark.docker
async def test_kubectl_debug_target(http: httpx.AsyncClient, apiserver: ApiServer,
                                    tmp_path: Path) -> None:
    ensure_docker()
    node = unique("debug-node")
    kubelet = KubeletProcess(apiserver, tmp_path, node_name=node).start()
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    try:
        name = unique("web")
        await create_pod(http, pod_manifest(name, node, [shell("app", SERVE_FOREVER)]))
        await wait_running(http, name)
        debug = kubectl.run("debug", name, f"--image={BUSYBOX_IMAGE}",
                            "--image-pull-policy=IfNotPresent", "--profile=baseline",
                            "--target=app", "-c", "debugger", "--", "sleep", "3600")
        assert (debug.stdout, debug.stderr) == ('Targeting container "app". If you don\'t see processes from '
                                "this container it may be because the container runtime "
                                "doesn't support this feature.\n", "")

        def state() -> str | None:
            out = kubectl("get", "pod", name, "-o",
                          "jsonpath={.status.ephemeralContainerStatuses[0].state}")
            return out if "running" in out else None
        running = await asyncio.to_thread(wait_until, state)
        assert re.fullmatch(r'\{"running":\{"startedAt":"[0-9T:Z-]+"\}\}', running), running
        [debugger] = node_containers(node, **{"io.kubernetes.container.name": "debugger"})
        [app] = node_containers(node, **{"io.kubernetes.container.name": "app"})
        ps = docker_exec(debugger["Id"], "ps")
        assert "while true; do sleep 0.2; done" in ps and "sleep 3600" in ps
        described = kubectl("describe", "pod", name)
        section = described.split("Ephemeral Containers:\n")[1]
        assert section.startswith("  debugger:\n")
        assert f"Image:         {BUSYBOX_IMAGE}" in section.split("Conditions:")[0]
        assert "State:          Running" in section.split("Conditions:")[0]

        interactive = kubectl.run("debug", "-it", name, f"--image={BUSYBOX_IMAGE}",
                                  "--image-pull-policy=IfNotPresent", "--profile=baseline",
                                  "--target=app", "-c", "shell", "--", "sh", "-c", "ps; sleep 2", check=False,
                                  stdin="")
        # kubectl attaches to the new container (pods/attach), no fallback to its log.
        assert interactive.returncode == 0, interactive.stderr
        assert "panic" not in interactive.stderr
        assert "couldn't attach" not in interactive.stderr, interactive.stderr
        # stdin is no terminal and empty, so the attach may end before ps prints: its log has it
        assert "while true; do sleep 0.2; done" in kubectl("logs", name, "-c", "shell")
    finally:
        kubelet.stop()
        remove_node_containers(node)


def wait_until(check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError("timed out")
