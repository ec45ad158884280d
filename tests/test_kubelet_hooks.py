"""Lifecycle hooks (issue 14, "Probes and lifecycle"): the handlers and the grace-period
arithmetic as tables (after `pkg/kubelet/lifecycle/handlers_test.go` and
kuberuntime_container_test.go), then a real kubelet on real Docker: postStart runs before
the app goes on, a failed one kills the container with `FailedPostStartHook`; preStop runs
before the stop signal (the container is still running when its httpGet arrives), a failed
one records `FailedPreStopHook`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelet.lifecycle import remaining_grace, run_handler
from kubelet.runtime import LABEL_CONTAINER_NAME
from tests.docker_support import (
    KubeletProcess,
    inspect_container,
    node_containers,
    running_kubelet,
)
from tests.support import ApiServer, Kubectl, eventually, free_port, unique
from tests.test_kubelet import (
    SERVE_FOREVER,
    create_pod,
    delete_pod,
    get_pod,
    pod_manifest,
    shell,
    wait_events,
    wait_running,
)


class FakeExec:
    def __init__(self, code: int, output: str) -> None:
        self.code, self.output = code, output
        self.ran: list[list[str]] = []

    async def exec_sync(self, container_id: str, cmd: list[str], *,
                        timeout_seconds: float) -> tuple[int, str]:
        self.ran.append(cmd)
        return self.code, self.output


POD = "web_default(u-1)"


@pytest.mark.parametrize(("code", "output", "expected"), [
    (0, "fine\n", None),
    (3, "boom\n", 'Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod '
                  '"web_default(u-1)" failed - error: command \'sh -c exit 3\' exited with 3: , '
                  'message: "boom\\n"'),
])
async def test_exec_handler(code: int, output: str, expected: str | None) -> None:
    runtime = FakeExec(code, output)
    handler = {"exec": {"command": ["sh", "-c", "exit 3"]}}
    assert await run_handler(handler, container={"name": "app"}, container_id="c1",
                             pod_name=POD, pod_ip="10.0.0.1", runtime=runtime,
                             timeout=5) == expected
    assert runtime.ran == [["sh", "-c", "exit 3"]]


async def test_sleep_and_unsupported_handlers() -> None:
    started = time.monotonic()
    assert await run_handler({"sleep": {"seconds": 1}}, container={"name": "app"},
                             container_id="c1", pod_name=POD, pod_ip="", runtime=FakeExec(0, ""),
                             timeout=5) is None
    assert time.monotonic() - started >= 1
    assert await run_handler({"tcpSocket": {"port": 80}}, container={"name": "app"},
                             container_id="c1", pod_name=POD, pod_ip="", runtime=FakeExec(0, ""),
                             timeout=5) == \
        "Cannot run handler: unsupported lifecycle handler tcpSocket"


async def test_http_handler_failure_wording() -> None:
    port = free_port()  # nothing listens there
    message = await run_handler({"httpGet": {"path": "/bye", "port": port}},
                                container={"name": "app"}, container_id="c1", pod_name=POD,
                                pod_ip="127.0.0.1", runtime=FakeExec(0, ""), timeout=2)
    assert message is not None and message.startswith(
        f'HTTP lifecycle hook (/bye) for Container "app" in Pod "{POD}" failed - error: '
        f'Get "http://127.0.0.1:{port}/bye": ')


@pytest.mark.parametrize(("grace", "took", "left"), [
    (30, 0.2, 30), (30, 10.7, 20), (5, 4.9, 2), (5, 9, 2), (1, 0, 2),
])
def test_the_pre_stop_hook_takes_its_time_off_the_grace_period(grace: int, took: float,
                                                                left: int) -> None:
    assert remaining_grace(grace, took) == left


# --- a real kubelet on real Docker ----------------------------------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-hooks"),
                         prefix="hooks") as process:
        yield process


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver, Path(tmp_path_factory.mktemp("kubectl-hooks")))


def app_container(node: str, pod: str) -> dict[str, Any]:
    (found,) = node_containers(node, **{"io.kubernetes.pod.name": pod,
                                        LABEL_CONTAINER_NAME: "app"})
    return found


async def test_post_start_runs_as_the_container_starts(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl) -> None:
    name = unique("poststart")
    app = shell("app", "while [ ! -f /tmp/hook ]; do sleep 0.1; done; echo saw $(cat /tmp/hook);"
                       + SERVE_FOREVER,
                lifecycle={"postStart": {"exec": {"command": [
                    "sh", "-c", "echo postStart > /tmp/hook"]}}})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app], grace=1))
    pod = await wait_running(http, name)
    logs = await asyncio.to_thread(kubectl.run, "logs", name)
    assert logs.stdout == "saw postStart\n"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    await delete_pod(http, name)


async def test_a_failed_post_start_hook_kills_the_container(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("badstart")
    app = shell("app", SERVE_FOREVER, lifecycle={"postStart": {"exec": {"command": [
        "sh", "-c", "echo no config; exit 3"]}}})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app], grace=1))

    async def restarted() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and statuses[0]["restartCount"] >= 1 else None
    pod = await eventually(restarted, timeout=60, what=f"{name} killed and restarted")
    events = await wait_events(http, pod, "FailedPostStartHook", "Killing")
    failed = [e for e in events if e["reason"] == "FailedPostStartHook"]
    uid = pod["metadata"]["uid"]
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == (
        'Exec lifecycle hook ([sh -c echo no config; exit 3]) for Container "app" in Pod '
        f'"{name}_default({uid})" failed - error: command \'sh -c echo no config; exit 3\' '
        'exited with 3: , message: "no config\\n"')
    assert failed[0]["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert any(e["reason"] == "Killing" and e["message"] == "FailedPostStartHook"
               for e in events)
    await delete_pod(http, name)


class HookServer:
    """An HTTP server on the host for preStop httpGet hooks: each request's path, and
    whether the pod's app container was still running when it arrived."""

    def __init__(self) -> None:
        self.port = free_port()
        self.hits: list[tuple[str, bool]] = []
        self.node = ""
        self.pod = ""
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = request.split()[1]
        container = await asyncio.to_thread(app_container, self.node, self.pod)
        state = await asyncio.to_thread(inspect_container, container["Id"])
        self.hits.append((path, bool(state and state["State"]["Running"])))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def hook_server() -> AsyncIterator[HookServer]:
    hooks = HookServer()
    hooks.server = await asyncio.start_server(hooks.handle, "127.0.0.1", hooks.port)
    yield hooks
    hooks.server.close()
    await hooks.server.wait_closed()


async def test_pre_stop_runs_before_the_stop_signal(
        http: httpx.AsyncClient, kubelet: KubeletProcess, hook_server: HookServer) -> None:
    name = unique("prestop")
    hook_server.node, hook_server.pod = kubelet.node_name, name
    app = shell("app", SERVE_FOREVER, lifecycle={"preStop": {"httpGet": {
        "host": "127.0.0.1", "port": hook_server.port, "path": "/drain"}}})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app], grace=5))
    await wait_running(http, name)
    await delete_pod(http, name)

    async def gone() -> bool:
        return (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404
    await eventually(gone, timeout=60, what=f"{name} deleted")
    assert hook_server.hits == [("/drain", True)]


async def test_a_failed_pre_stop_hook_is_reported_and_the_container_stops(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("badstop")
    app = shell("app", SERVE_FOREVER, lifecycle={"preStop": {"exec": {"command": [
        "sh", "-c", "exit 7"]}}})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app], grace=5))
    pod = await wait_running(http, name)
    await delete_pod(http, name)
    events = await wait_events(http, pod, "FailedPreStopHook")
    failed = next(e for e in events if e["reason"] == "FailedPreStopHook")
    assert failed["type"] == "Warning"
    assert failed["message"].startswith(
        'Exec lifecycle hook ([sh -c exit 7]) for Container "app" in Pod ')

    async def gone() -> bool:
        return (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404
    await eventually(gone, timeout=60, what=f"{name} deleted")


async def test_a_stop_signal_is_refused(http: httpx.AsyncClient,
                                        kubelet: KubeletProcess) -> None:
    name = unique("stopsig")
    app = shell("app", SERVE_FOREVER, lifecycle={"stopSignal": "SIGUSR1"})
    response = await http.post("/api/v1/namespaces/default/pods",
                               json=pod_manifest(name, kubelet.node_name, [app]))
    assert response.status_code == 422, response.text
    assert response.json()["details"]["causes"][0]["field"] == \
        "spec.containers[0].lifecycle.stopSignal"
