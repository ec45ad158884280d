"""Init containers (issue 14, "Probes and lifecycle"): the decisions as tables (after
kuberuntime_manager_test.go's TestComputePodActionsWithInitContainers and
kubelet_pods_test.go's getPhase / Initialized tests, the STATUS column as kubectl's
printPod shows it), then a real kubelet on real Docker driven through the real kubectl:
the init containers run in order, each to completion, before the app; a failing one is
restarted with back-off (Init:CrashLoopBackOff) or fails the pod (Never: Init:Error); a
kubelet restarted mid-init does not run a completed init container again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.resources.pods import pod_status_reason
from kubelet.actions import compute_pod_actions, init_container_actions
from kubelet.runtime import LABEL_CONTAINER_NAME, ContainerInfo, PodObservation
from kubelet.status import Waiting, generate_pod_status
from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    node_containers,
    remove_node_containers,
    running_kubelet,
)
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import SERVE_FOREVER, create_pod, delete_pod, get_pod, pod_manifest, shell
from tests.test_kubelet_status import NOW, instance, make_pod, observed, sandbox


def init_pod(*inits: str, restart_policy: str = "Always") -> dict[str, Any]:
    return make_pod("app", restart_policy=restart_policy, initContainers=[
        {"name": n, "image": "kubelite/busybox:1.35"} for n in inits])


# --- computeInitContainerActions (regular init containers) -----------------------------------

@pytest.mark.parametrize(("name", "containers", "start", "initialized"), [
    ("none ran: the first", [], ["i1"], False),
    ("the first runs: wait", [instance("i1")], [], False),
    ("the first completed: the second", [instance("i1", state="exited")], ["i2"], False),
    ("both completed: done", [instance("i1", state="exited"), instance("i2", state="exited")],
     [], True),
    ("the second failed: it again",
     [instance("i1", state="exited"), instance("i2", state="exited", exit_code=1)],
     ["i2"], False),
    ("the first failed before: the newest instance counts",
     [instance("i1", state="exited"), instance("i1", attempt=1, state="running")],
     [], False),
    ("an app container runs: done whatever the init containers show",
     [instance("app")], [], True),
])
def test_init_container_actions(name: str, containers: list[ContainerInfo], start: list[str],
                                initialized: bool) -> None:
    actions = init_container_actions(init_pod("i1", "i2"), observed(*containers))
    assert [s["name"] for s in actions.start] == start, name
    assert actions.initialized is initialized, name
    assert not actions.failed and not actions.kill, name


def test_a_pod_without_init_containers_is_initialized() -> None:
    assert init_container_actions(make_pod("app"), PodObservation()).initialized


# --- computePodActions ---------------------------------------------------------------------

@pytest.mark.parametrize(("name", "policy", "containers", "sandboxes", "create", "start",
                          "kill_pod"), [
    ("new pod: a sandbox and the first init container", "Always", [], (), True, ["i1/0"],
     False),
    ("first completed: the second", "Always", [instance("i1", state="exited")],
     (sandbox(),), False, ["i2/0"], False),
    ("an init container runs: nothing to start", "Always", [instance("i1")], (sandbox(),),
     False, [], False),
    ("all completed: the app", "Always",
     [instance("i1", state="exited"), instance("i2", state="exited")], (sandbox(),), False,
     ["app/0"], False),
    ("a failed one restarts (Always acts as OnFailure)", "Always",
     [instance("i1", state="exited", exit_code=2)], (sandbox(),), False, ["i1/1"], False),
    ("OnFailure: restarts too", "OnFailure",
     [instance("i1", state="exited", exit_code=2)], (sandbox(),), False, ["i1/1"], False),
    ("Never: a failed one fails the pod", "Never",
     [instance("i1", state="exited", exit_code=2)], (sandbox(),), False, [], True),
    ("a new sandbox runs the init containers again", "Always",
     [instance("i1", state="exited"), instance("i2", state="exited"),
      instance("app", state="exited", exit_code=1)], (sandbox(ready=False),), True,
     ["i1/1"], True),
])
def test_compute_pod_actions_with_init_containers(
        name: str, policy: str, containers: list[ContainerInfo], sandboxes: tuple[Any, ...],
        create: bool, start: list[str], kill_pod: bool) -> None:
    actions = compute_pod_actions(init_pod("i1", "i2", restart_policy=policy),
                                  observed(*containers, sandboxes=sandboxes))
    assert actions.create_sandbox is create, name
    assert [f"{s.name}/{s.attempt}" for s in actions.start] == start, name
    assert actions.kill_pod is kill_pod, name


# --- status: initContainerStatuses, phase, Initialized, and kubectl's STATUS column ---------

def status_of(pod: dict[str, Any], *containers: ContainerInfo,
              waiting: dict[str, Waiting] | None = None) -> dict[str, Any]:
    status = generate_pod_status(pod, observed(*containers, sandboxes=(sandbox(),)),
                                 waiting or {}, node_ip="10.0.0.1", now=NOW)
    return {**pod, "status": status}


def initialized(pod: dict[str, Any]) -> tuple[str, str, str]:
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "Initialized")
    return condition["status"], condition.get("reason", ""), condition.get("message", "")


BACK_OFF = Waiting("CrashLoopBackOff", "back-off 10s restarting failed container=i1 ...")


@pytest.mark.parametrize(("name", "policy", "containers", "waiting", "phase", "column",
                          "condition"), [
    ("nothing ran yet", "Always", [], None, "Pending", "Init:0/2",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i1 i2]")),
    ("the first runs", "Always", [instance("i1")], None, "Pending", "Init:0/2",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i1 i2]")),
    ("the first completed", "Always", [instance("i1", state="exited")], None, "Pending",
     "Init:1/2",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i2]")),
    ("both completed, the app not created yet", "Always",
     [instance("i1", state="exited"), instance("i2", state="exited")], None, "Pending",
     "PodInitializing", ("True", "", "")),
    ("both completed, the app runs", "Always",
     [instance("i1", state="exited"), instance("i2", state="exited"), instance("app")], None,
     "Running", "Running", ("True", "", "")),
    ("the first failed", "Always", [instance("i1", state="exited", exit_code=1)], None,
     "Pending", "Init:Error",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i1 i2]")),
    ("the first in back-off", "Always", [instance("i1", state="exited", exit_code=1)],
     {"i1": BACK_OFF}, "Pending", "Init:CrashLoopBackOff",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i1 i2]")),
    ("Never: the first failed", "Never", [instance("i1", state="exited", exit_code=1)], None,
     "Failed", "Init:Error",
     ("False", "ContainersNotInitialized", "containers with incomplete status: [i1 i2]")),
])
def test_status_of_a_pod_with_init_containers(
        name: str, policy: str, containers: list[ContainerInfo],
        waiting: dict[str, Waiting] | None, phase: str, column: str,
        condition: tuple[str, str, str]) -> None:
    pod = status_of(init_pod("i1", "i2", restart_policy=policy), *containers, waiting=waiting)
    assert pod["status"]["phase"] == phase, name
    assert pod_status_reason(pod)[0] == column, name
    assert initialized(pod) == condition, name
    assert [s["name"] for s in pod["status"]["initContainerStatuses"]] == ["i1", "i2"]


def test_init_container_statuses_are_kubes() -> None:
    pod = status_of(init_pod("i1", "i2"), instance("i1", state="exited"), instance("i2"))
    i1, i2 = pod["status"]["initContainerStatuses"]
    assert i1["ready"] is True and i1["started"] is False
    assert i1["state"]["terminated"]["reason"] == "Completed"
    assert i2["ready"] is False and i2["started"] is True and "running" in i2["state"]
    app = pod["status"]["containerStatuses"][0]
    assert app["state"] == {"waiting": {"reason": "PodInitializing"}}
    # A failed one, restarted: its restartCount, the failure as lastState.
    pod = status_of(init_pod("i1"), instance("i1", state="exited", exit_code=3),
                    instance("i1", attempt=1))
    (i1,) = pod["status"]["initContainerStatuses"]
    assert i1["restartCount"] == 1 and i1["lastState"]["terminated"]["exitCode"] == 3


# --- a real kubelet on real Docker, through the real kubectl --------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-init"),
                         prefix="init") as process:
        yield process


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver, Path(tmp_path_factory.mktemp("kubectl-init")))


async def kubectl_status(kubectl: Kubectl, name: str) -> str:
    """The STATUS column of `kubectl get pod NAME`."""
    result = await asyncio.to_thread(kubectl.run, "get", "pod", name, "--no-headers")
    return result.stdout.split()[2]


def with_init(manifest: dict[str, Any], *inits: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["initContainers"] = list(inits)
    return manifest


def instances_of(node: str, pod: str, container: str) -> list[dict[str, Any]]:
    return node_containers(node, **{"io.kubernetes.pod.name": pod,
                                    LABEL_CONTAINER_NAME: container})


async def test_init_containers_run_in_order_before_the_app(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("inits")
    await create_pod(http, with_init(
        pod_manifest(name, kubelet.node_name, [shell("app", SERVE_FOREVER)], grace=1),
        shell("first", "sleep 3"), shell("second", "sleep 3")))
    seen: list[str] = []

    async def running() -> bool:
        column = await kubectl_status(kubectl, name)
        if not seen or seen[-1] != column:
            seen.append(column)
        return column == "Running"
    await eventually(running, timeout=90, interval=0.3, what=f"{name} Running")
    assert "Init:0/2" in seen and "Init:1/2" in seen, seen
    assert seen.index("Init:0/2") < seen.index("Init:1/2") < seen.index("Running"), seen
    assert not any(s.startswith("Init:") and s[5:] not in ("0/2", "1/2") for s in seen), seen

    pod = await get_pod(http, name)
    first, second = pod["status"]["initContainerStatuses"]
    (app,) = pod["status"]["containerStatuses"]
    assert first["state"]["terminated"]["reason"] == "Completed" and first["ready"] is True
    assert second["state"]["terminated"]["reason"] == "Completed" and second["ready"] is True
    assert first["restartCount"] == second["restartCount"] == 0
    # Each one after the one before it finished, the app after both.
    assert first["state"]["terminated"]["finishedAt"] <= \
        second["state"]["terminated"]["startedAt"]
    assert second["state"]["terminated"]["finishedAt"] <= app["state"]["running"]["startedAt"]
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Initialized"] == "True" and conditions["Ready"] == "True"
    await delete_pod(http, name)


async def test_a_failing_init_container_crash_loops_and_the_app_never_starts(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("initloop")
    await create_pod(http, with_init(
        pod_manifest(name, kubelet.node_name, [shell("app", SERVE_FOREVER)], grace=1),
        shell("setup", "echo no database; exit 1")))

    async def back_off() -> bool:
        return await kubectl_status(kubectl, name) == "Init:CrashLoopBackOff"
    await eventually(back_off, timeout=90, interval=0.3, what=f"{name} Init:CrashLoopBackOff")
    pod = await get_pod(http, name)
    (setup,) = pod["status"]["initContainerStatuses"]
    assert setup["restartCount"] >= 1
    assert setup["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert setup["lastState"]["terminated"]["exitCode"] == 1
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "PodInitializing"}}
    assert instances_of(kubelet.node_name, name, "app") == []
    logs = await asyncio.to_thread(kubectl.run, "logs", name, "-c", "setup")
    assert logs.stdout == "no database\n"
    await delete_pod(http, name)


async def test_a_failed_init_container_fails_a_never_pod(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("initnever")
    await create_pod(http, with_init(
        pod_manifest(name, kubelet.node_name, [shell("app", SERVE_FOREVER)],
                     restart_policy="Never", grace=1),
        shell("setup", "exit 4")))

    async def failed() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if pod["status"].get("phase") == "Failed" else None
    pod = await eventually(failed, timeout=60, what=f"{name} Failed")
    (setup,) = pod["status"]["initContainerStatuses"]
    assert setup["state"]["terminated"]["exitCode"] == 4 and setup["restartCount"] == 0
    assert await kubectl_status(kubectl, name) == "Init:Error"
    await asyncio.sleep(2)  # nothing else runs: no restart, no app
    assert len(instances_of(kubelet.node_name, name, "setup")) == 1
    assert instances_of(kubelet.node_name, name, "app") == []
    await delete_pod(http, name)


async def test_a_kubelet_restarted_mid_init_does_not_rerun_a_completed_init_container(
        http: httpx.AsyncClient, apiserver: ApiServer, tmp_path: Path) -> None:
    ensure_docker()
    node = unique("init-restart")
    first = KubeletProcess(apiserver, tmp_path / "first", node_name=node).start()
    second: KubeletProcess | None = None
    try:
        name = unique("midinit")
        await create_pod(http, with_init(
            pod_manifest(name, node, [shell("app", SERVE_FOREVER)], grace=1),
            shell("once", "echo ran"), shell("slow", "sleep 6")))

        async def slow_running() -> bool:
            return any(c["State"] == "running" for c in instances_of(node, name, "slow"))
        await eventually(slow_running, timeout=60, what="the second init container running")
        (once,) = instances_of(node, name, "once")
        first.kill()
        second = KubeletProcess(apiserver, tmp_path / "second", node_name=node).start()

        async def running() -> dict[str, Any] | None:
            pod = await get_pod(http, name)
            statuses = pod["status"].get("containerStatuses") or []
            return pod if statuses and "running" in statuses[0]["state"] else None
        pod = await eventually(running, timeout=60, what=f"{name} Running")
        assert [c["Id"] for c in instances_of(node, name, "once")] == [once["Id"]]
        assert len(instances_of(node, name, "slow")) == 1
        statuses = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
        assert statuses["once"]["restartCount"] == 0
        assert statuses["once"]["containerID"] == f"docker://{once['Id']}"
        await delete_pod(http, name)

        async def gone() -> bool:
            return node_containers(node) == []
        await eventually(gone, timeout=60, what="the pod's containers removed")
    finally:
        if second is not None:
            second.stop()
        first.stop()
        remove_node_containers(node)
