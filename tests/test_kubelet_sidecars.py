"""Sidecar containers (issue 14, "Probes and lifecycle"): init containers with
`restartPolicy: Always`. The decisions as tables (after kuberuntime_manager_test.go's
TestComputePodActionsWithRestartableInitContainers, kubelet_pods_test.go's getPhase cases
with sidecars, status/generate_test.go, kuberuntime_termination_order_test.go), then a
real kubelet on real Docker through the real kubectl: a sidecar starts (its startup probe
passed) before the next init container, runs beside the app, is restarted alone when it
dies, stops after the app when the pod is deleted, and does not keep a finished Job-like
pod alive."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.resources.pods import pod_status_reason
from kubelet.actions import compute_pod_actions, init_container_actions
from kubelet.prober.probes import ProbeStatus
from kubelet.runtime import LABEL_CONTAINER_NAME, ContainerInfo
from kubelet.status import Waiting, generate_pod_status
from kubelet.termination_order import TerminationOrdering, prerequisites
from tests.docker_support import (
    KubeletProcess,
    docker_api,
    node_containers,
    running_kubelet,
)
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import SERVE_FOREVER, create_pod, delete_pod, get_pod, pod_manifest, shell
from tests.test_kubelet_status import NOW, instance, make_pod, observed, sandbox

PROXY = {"name": "proxy", "image": "kubelite/busybox:1.35", "restartPolicy": "Always"}
SETUP = {"name": "setup", "image": "kubelite/busybox:1.35"}


def sidecar_pod(restart_policy: str = "Always", *inits: dict[str, Any]) -> dict[str, Any]:
    """A pod whose init containers are the sidecar `proxy` then the regular `setup`."""
    return make_pod("app", restart_policy=restart_policy,
                    initContainers=list(inits or (PROXY, SETUP)))


# --- computeInitContainerActions and computePodActions with sidecars -----------------------

def _started(*names: str) -> Any:
    return lambda container: container.name in names


@pytest.mark.parametrize(("name", "policy", "containers", "started", "start", "kill",
                          "kill_pod"), [
    ("nothing ran: the sidecar first", "Always", [], (), ["proxy/0"], [], False),
    ("the sidecar started: the next init container, while it runs", "Always",
     [instance("proxy")], ("proxy",), ["setup/0"], [], False),
    ("the sidecar runs, its startup probe has not passed: wait", "Always",
     [instance("proxy")], (), [], [], False),
    ("the sidecar and the init container run: wait", "Always",
     [instance("proxy"), instance("setup")], ("proxy",), [], [], False),
    ("initialized: the app, the sidecar kept", "Always",
     [instance("proxy"), instance("setup", state="exited")], ("proxy",), ["app/0"], [],
     False),
    ("the sidecar died during init: it again", "Always",
     [instance("proxy", state="exited", exit_code=1), instance("setup")], (),
     ["proxy/1"], [], False),
    ("the sidecar died beside the app: it alone", "Always",
     [instance("proxy", state="exited", exit_code=137), instance("setup", state="exited"),
      instance("app")], (), ["proxy/1"], [], False),
    ("a Never pod's sidecar is restarted too", "Never",
     [instance("proxy", state="exited", exit_code=1), instance("setup", state="exited"),
      instance("app")], (), ["proxy/1"], [], False),
    ("an initialized pod's missing sidecar is started, its init containers are not",
     "Always", [instance("app")], (), ["proxy/0"], [], False),
    ("a Never pod's failed init container fails it, sidecar or not", "Never",
     [instance("proxy"), instance("setup", state="exited", exit_code=2)], ("proxy",), [], [],
     True),
    ("the app completed (OnFailure): the pod stops, sidecar included", "OnFailure",
     [instance("proxy"), instance("setup", state="exited"), instance("app", state="exited")],
     ("proxy",), [], [], True),
    ("the sidecar exited after the app completed (Never): not restarted", "Never",
     [instance("proxy", state="exited"), instance("setup", state="exited"),
      instance("app", state="exited")], (), [], [], True),
    ("a sidecar whose definition changed is restarted", "Always",
     [instance("proxy", spec_hash="old"), instance("setup", state="exited"), instance("app")],
     ("proxy",), ["proxy/1"], ["proxy-0"], False),
])
def test_compute_pod_actions_with_sidecars(
        name: str, policy: str, containers: list[ContainerInfo], started: tuple[str, ...],
        start: list[str], kill: list[str], kill_pod: bool) -> None:
    actions = compute_pod_actions(sidecar_pod(policy),
                                  observed(*containers, sandboxes=(sandbox(),)),
                                  sidecar_started=_started(*started))
    assert not actions.create_sandbox, name
    assert [f"{s.name}/{s.attempt}" for s in actions.start] == start, name
    assert [k.container.id for k in actions.kill] == kill, name
    assert actions.kill_pod is kill_pod, name


def test_a_sidecar_last_initializes_the_pod_once_started() -> None:
    pod = sidecar_pod("Always", SETUP, PROXY)
    done = observed(instance("setup", state="exited"), instance("proxy"))
    assert not init_container_actions(pod, done, sidecar_started=_started()).initialized
    assert init_container_actions(pod, done, sidecar_started=_started("proxy")).initialized
    # and a new sandbox starts from the first init container again
    actions = compute_pod_actions(pod, observed(instance("setup", state="exited"),
                                                sandboxes=(sandbox(ready=False),)))
    assert actions.create_sandbox and [s.name for s in actions.start] == ["setup"]


# --- status: phase, conditions, kubectl's STATUS and READY ---------------------------------

def status_of(pod: dict[str, Any], *containers: ContainerInfo,
              probes: dict[str, ProbeStatus] | None = None,
              waiting: dict[str, Waiting] | None = None) -> dict[str, Any]:
    status = generate_pod_status(pod, observed(*containers, sandboxes=(sandbox(),)),
                                 waiting or {}, node_ip="10.0.0.1", now=NOW, probes=probes)
    return {**pod, "status": status}


def condition(pod: dict[str, Any], kind: str) -> tuple[str, str]:
    found = next(c for c in pod["status"]["conditions"] if c["type"] == kind)
    return found["status"], found.get("message", "")


NOT_STARTED = {"proxy": ProbeStatus(ready=False, started=False)}
UNREADY = {"proxy": ProbeStatus(ready=False, started=True)}
BACK_OFF = {"proxy": Waiting("CrashLoopBackOff", "back-off 10s restarting failed ...")}


@pytest.mark.parametrize(("name", "policy", "containers", "probes", "waiting", "phase",
                          "column", "ready", "initialized", "ready_condition"), [
    ("the sidecar is starting", "Always", [instance("proxy")], NOT_STARTED, None, "Pending",
     "Init:0/2", "0/2", ("False", "containers with incomplete status: [proxy setup]"),
     ("False", "containers with unready status: [proxy app]")),
    ("the sidecar started, the init container runs", "Always",
     [instance("proxy"), instance("setup")], None, None, "Pending", "Init:1/2", "1/2",
     ("False", "containers with incomplete status: [setup]"),
     ("False", "containers with unready status: [app]")),
    ("both run", "Always",
     [instance("proxy"), instance("setup", state="exited"), instance("app")], None, None,
     "Running", "Running", "2/2", ("True", ""), ("True", "")),
    ("the sidecar is not ready: neither is the pod", "Always",
     [instance("proxy"), instance("setup", state="exited"), instance("app")], UNREADY, None,
     "Running", "Running", "1/2", ("True", ""),
     ("False", "containers with unready status: [proxy]")),
    # (kubectl's printPod names the sidecar's back-off even though the pod is Running)
    ("the sidecar crash-loops beside the app: still Running and Initialized", "Always",
     [instance("proxy", state="exited", exit_code=1), instance("setup", state="exited"),
      instance("app")], None, BACK_OFF, "Running", "Init:CrashLoopBackOff", "1/2",
     ("True", ""),
     ("False", "containers with unready status: [proxy]")),
    ("the app completed, the sidecar stopped (Never): Succeeded", "Never",
     [instance("proxy", state="exited", exit_code=137), instance("setup", state="exited"),
      instance("app", state="exited")], None, None, "Succeeded", "Completed", "0/2",
     ("True", ""), ("False", "")),
    ("the app failed, the sidecar stopped (Never): Failed", "Never",
     [instance("proxy", state="exited"), instance("setup", state="exited"),
      instance("app", state="exited", exit_code=3)], None, None, "Failed", "Error", "0/2",
     ("True", ""), ("False", "")),
])
def test_status_of_a_pod_with_a_sidecar(
        name: str, policy: str, containers: list[ContainerInfo],
        probes: dict[str, ProbeStatus] | None, waiting: dict[str, Waiting] | None,
        phase: str, column: str, ready: str, initialized: tuple[str, str],
        ready_condition: tuple[str, str]) -> None:
    pod = status_of(sidecar_pod(policy), *containers, probes=probes, waiting=waiting)
    assert pod["status"]["phase"] == phase, name
    reason, ready_count, total, _, _ = pod_status_reason(pod)
    assert (reason, f"{ready_count}/{total}") == (column, ready), name
    assert condition(pod, "Initialized") == initialized, name
    assert condition(pod, "Ready") == ready_condition, name
    assert condition(pod, "ContainersReady") == ready_condition, name


def test_a_sidecars_status_is_an_app_containers() -> None:
    pod = status_of(sidecar_pod(), instance("proxy", state="exited", exit_code=1),
                    instance("proxy", attempt=1), instance("setup", state="exited"),
                    instance("app"))
    proxy, setup = pod["status"]["initContainerStatuses"]
    assert proxy["ready"] is True and proxy["started"] is True
    assert proxy["restartCount"] == 1 and proxy["lastState"]["terminated"]["exitCode"] == 1
    assert "running" in proxy["state"]
    assert setup["ready"] is True and setup["started"] is False


# --- termination order ---------------------------------------------------------------------

def test_sidecars_stop_after_the_app_in_reverse_order() -> None:
    pod = sidecar_pod("Always", {**PROXY, "name": "log"}, SETUP, PROXY)
    assert prerequisites(pod, {"log", "proxy", "app"}) == {
        "log": {"app", "proxy"}, "proxy": {"app"}}
    assert prerequisites(pod, {"log"}) == {}  # alone: it waits for nothing
    assert prerequisites(make_pod("a", "b"), {"a", "b"}) == {}


async def test_the_ordering_lets_a_sidecar_go_once_the_app_exited() -> None:
    pod = sidecar_pod()
    ordering = TerminationOrdering(pod, {"proxy", "app"})
    waiting = asyncio.create_task(ordering.wait_for_turn("proxy", 30))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    ordering.exited("app")
    await asyncio.wait_for(waiting, 5)
    # Its wait never outlasts the grace period.
    await asyncio.wait_for(TerminationOrdering(pod, {"proxy", "app"})
                           .wait_for_turn("proxy", 0.1), 5)


# --- a real kubelet on real Docker, through the real kubectl --------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-sidecar"),
                         prefix="sidecar") as process:
        yield process


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver, Path(tmp_path_factory.mktemp("kubectl-sidecar")))


# The sidecar: an HTTP server on the pod's localhost, started 2 s after it runs (its
# startup probe says when); it stops at once on SIGTERM.
PROXY_SCRIPT = ("sleep 2; mkdir -p /www; echo proxied > /www/index.html; "
                "httpd -p 8080 -h /www; touch /tmp/started; " + SERVE_FOREVER)
# The init container after it needs it: it fails unless the sidecar answers.
SETUP_SCRIPT = 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 5 127.0.0.1 8080 | grep proxied'
# The app takes 2 s to stop: a sidecar stopped beside it would die first.
SLOW_STOP = "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.2; done"


def proxy_sidecar() -> dict[str, Any]:
    return shell("proxy", PROXY_SCRIPT, restartPolicy="Always", startupProbe={
        "exec": {"command": ["test", "-f", "/tmp/started"]}, "periodSeconds": 1,
        "failureThreshold": 30})


def die_events(pod: str, since: float, until: float) -> list[str]:
    """The names of the pod's containers that died between the two instants, in order."""
    filters = json.dumps({"event": ["die"], "label": [f"io.kubernetes.pod.name={pod}"]})
    with docker_api() as docker:
        response = docker.get("/events", params={"since": f"{since:.3f}",
                                                 "until": f"{until:.3f}", "filters": filters},
                              timeout=30)
    assert response.status_code == 200, response.text
    events = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [e["Actor"]["Attributes"][LABEL_CONTAINER_NAME] for e in events
            if LABEL_CONTAINER_NAME in e["Actor"]["Attributes"]]


async def test_a_sidecar_starts_first_runs_beside_the_app_and_stops_after_it(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("sidecar")
    manifest = pod_manifest(name, kubelet.node_name, [shell("app", SLOW_STOP)], grace=10)
    manifest["spec"]["initContainers"] = [proxy_sidecar(), shell("setup", SETUP_SCRIPT)]
    await create_pod(http, manifest)

    async def running() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in pod["status"].get("conditions") or [])
        return pod if pod["status"].get("phase") == "Running" and ready else None
    pod = await eventually(running, timeout=90, what=f"{name} Running and Ready")
    proxy, setup = pod["status"]["initContainerStatuses"]
    (app,) = pod["status"]["containerStatuses"]
    # The init container ran once the sidecar had started (its probe passed, 2 s in) and
    # reached it; the app after it; the sidecar still runs.
    assert setup["state"]["terminated"]["exitCode"] == 0 and setup["restartCount"] == 0
    assert proxy["started"] is True and proxy["ready"] is True and "running" in proxy["state"]
    assert proxy["restartCount"] == 0
    assert setup["state"]["terminated"]["startedAt"] >= proxy["state"]["running"]["startedAt"]
    assert setup["state"]["terminated"]["finishedAt"] <= app["state"]["running"]["startedAt"]
    listed = (await asyncio.to_thread(kubectl.run, "get", "pod", name, "--no-headers")).stdout
    assert listed.split()[1:4] == ["2/2", "Running", "0"], listed

    # The sidecar dies: it alone is restarted; the pod stays Running and Initialized.
    (proxy_container,) = node_containers(kubelet.node_name, **{
        "io.kubernetes.pod.name": name, LABEL_CONTAINER_NAME: "proxy"})
    with docker_api() as docker:
        assert docker.post(f"/containers/{proxy_container['Id']}/kill").status_code == 204

    async def restarted() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        proxy = pod["status"]["initContainerStatuses"][0]
        return pod if proxy["restartCount"] == 1 and proxy.get("started") else None
    pod = await eventually(restarted, timeout=60, what=f"{name}'s sidecar restarted")
    (app_now,) = pod["status"]["containerStatuses"]
    assert app_now["restartCount"] == 0 and app_now["containerID"] == app["containerID"]
    assert pod["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Initialized"] == "True"
    assert len(node_containers(kubelet.node_name, **{"io.kubernetes.pod.name": name,
                                                      LABEL_CONTAINER_NAME: "setup"})) == 1

    # Deleted: the app (2 s to stop) exits before the sidecar does.
    since = time.time()
    await delete_pod(http, name)

    async def gone() -> bool:
        return (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404
    await eventually(gone, timeout=60, what=f"{name} deleted")
    died = die_events(name, since, time.time())
    assert [n for n in died if n in ("app", "proxy")] == ["app", "proxy"], died


async def test_a_sidecar_does_not_keep_a_finished_pod_alive(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("sidecarjob")
    manifest = pod_manifest(name, kubelet.node_name, [shell("work", "sleep 2; echo done")],
                            restart_policy="Never", grace=5)
    manifest["spec"]["initContainers"] = [shell("logger", SERVE_FOREVER,
                                                restartPolicy="Always")]
    await create_pod(http, manifest)

    async def succeeded() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if pod["status"].get("phase") == "Succeeded" else None
    pod = await eventually(succeeded, timeout=90, what=f"{name} Succeeded")
    (logger,) = pod["status"]["initContainerStatuses"]
    assert "terminated" in logger["state"] and logger["restartCount"] == 0
    listed = (await asyncio.to_thread(kubectl.run, "get", "pod", name, "--no-headers")).stdout
    assert listed.split()[1:3] == ["0/2", "Completed"], listed
    await asyncio.sleep(2)  # and it is not started again
    assert [c["State"] for c in node_containers(kubelet.node_name, **{
        "io.kubernetes.pod.name": name, LABEL_CONTAINER_NAME: "logger"})] == ["exited"]
    await delete_pod(http, name)


async def test_restart_policy_on_a_container_is_validated(http: httpx.AsyncClient) -> None:
    name = unique("badpolicy")
    manifest = pod_manifest(name, "nowhere", [shell("app", "true", restartPolicy="Always")])
    manifest["spec"]["initContainers"] = [shell("setup", "true", restartPolicy="OnFailure")]
    response = await http.post("/api/v1/namespaces/default/pods", json=manifest)
    assert response.status_code == 422, response.text
    assert response.json()["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "field": "spec.containers[0].restartPolicy",
         "message": "Forbidden: may not be set for non-init containers"},
        {"reason": "FieldValueNotSupported", "field": "spec.initContainers[0].restartPolicy",
         "message": 'Unsupported value: "OnFailure": supported values: "Always"'}]
    assert (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404
