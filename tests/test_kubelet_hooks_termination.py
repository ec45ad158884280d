"""Termination messages (issue 14, "Probes and lifecycle"): `terminationMessagePath` and
`terminationMessagePolicy: FallbackToLogsOnError` into `state.terminated.message`. The
decisions as tables (after kuberuntime_container_test.go's TestGetTerminationMessage*),
then a real kubelet on real Docker: the default /dev/termination-log, a path of the pod's
choosing, the log tail (80 lines) for a failed container, nothing for one that succeeded,
and the kubelet's files gone with the pod."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelet.docker import DockerRuntime, container_create_body
from kubelet.docker.client import DockerError
from kubelet.termination import (
    LABEL_MESSAGE_PATH,
    LABEL_MESSAGE_POLICY,
    MAX_MESSAGE_BYTES,
    falls_back_to_logs,
    message_file,
    read_message_file,
    with_message,
)
from tests.docker_support import KubeletProcess, running_kubelet
from tests.support import ApiServer, eventually, unique
from tests.test_kubelet import create_pod, delete_pod, get_pod, pod_manifest, shell
from tests.test_kubelet_status import make_pod, sandbox


def inspect_of(policy: str = "File", *, source: str = "/k/pods/u/containers/app/ab",
               target: str = "/dev/termination-log") -> dict[str, Any]:
    return {"Config": {"Labels": {LABEL_MESSAGE_PATH: target, LABEL_MESSAGE_POLICY: policy}},
            "Mounts": [{"Type": "bind", "Source": source, "Destination": target}]}


def test_the_message_file_is_the_mount_at_the_message_path() -> None:
    assert message_file(inspect_of()) == "/k/pods/u/containers/app/ab"
    assert message_file({**inspect_of(), "Mounts": []}) == ""
    assert message_file({"Config": {"Labels": {}}}) == ""


@pytest.mark.parametrize(("policy", "exit_code", "error", "expected"), [
    ("FallbackToLogsOnError", 1, "", True),
    ("FallbackToLogsOnError", 0, "", False),  # it succeeded: its logs are no message
    ("FallbackToLogsOnError", 127, "exec: not found", False),  # it never ran: no logs
    ("File", 1, "", False),
])
def test_falls_back_to_logs(policy: str, exit_code: int, error: str, expected: bool) -> None:
    assert falls_back_to_logs(inspect_of(policy), exit_code=exit_code, error=error) is expected


def test_read_message_file_keeps_the_last_4096_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log"
    assert read_message_file(str(path)) is None
    path.write_bytes(b"x" * 10 + b"y" * MAX_MESSAGE_BYTES)
    assert read_message_file(str(path)) == "y" * MAX_MESSAGE_BYTES
    path.write_text("bye\n")
    assert read_message_file(str(path)) == "bye\n"


@pytest.mark.parametrize(("error", "message", "expected"), [
    ("", "", ""), ("", "bye", "bye"), ("OCI runtime error", "", "OCI runtime error"),
    ("OCI runtime error", "bye", "OCI runtime error: bye"),
])
def test_with_message(error: str, message: str, expected: str) -> None:
    assert with_message(error, message) == expected


def test_the_create_body_mounts_the_file() -> None:
    spec = {"name": "app", "image": "i", "terminationMessagePath": "/tmp/msg",
            "terminationMessagePolicy": "FallbackToLogsOnError"}
    body = container_create_body(make_pod(), spec, node_name="n", sandbox_id="sb", attempt=0,
                                 termination_log="/k/pods/u-1/containers/app/ab")
    assert body["HostConfig"]["Mounts"] == [
        {"Type": "bind", "Source": "/k/pods/u-1/containers/app/ab", "Target": "/tmp/msg"}]
    assert body["Labels"][LABEL_MESSAGE_PATH] == "/tmp/msg"
    assert body["Labels"][LABEL_MESSAGE_POLICY] == "FallbackToLogsOnError"
    plain = container_create_body(make_pod(), spec, node_name="n", sandbox_id="sb", attempt=0)
    assert "Mounts" not in plain["HostConfig"] and LABEL_MESSAGE_PATH not in plain["Labels"]


# --- a real kubelet on real Docker ----------------------------------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-termmsg"),
                         prefix="termmsg") as process:
        yield process


async def terminated(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        state = statuses[0]["state"] if statuses else {}
        return dict(state["terminated"]) if "terminated" in state else None
    found = await eventually(done, timeout=60, what=f"{name} terminated")
    return found


async def test_the_default_path_becomes_the_message(http: httpx.AsyncClient,
                                                    kubelet: KubeletProcess) -> None:
    name = unique("msgfile")
    app = shell("app", "echo 'lost the database' > /dev/termination-log; echo noise; exit 2")
    pod = await create_pod(http, pod_manifest(name, kubelet.node_name, [app],
                                              restart_policy="Never", grace=1))
    state = await terminated(http, name)
    assert state["exitCode"] == 2 and state["message"] == "lost the database\n"
    pods_dir = f"/var/lib/kubelet/pods/{pod['metadata']['uid']}"
    assert await asyncio.to_thread(os.path.isdir, pods_dir)
    await delete_pod(http, name)

    async def cleaned() -> bool:
        return (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404 \
            and not await asyncio.to_thread(os.path.exists, pods_dir)
    await eventually(cleaned, timeout=60, what="the pod and its termination-log files gone")


async def test_a_path_of_the_pods_choosing(http: httpx.AsyncClient,
                                          kubelet: KubeletProcess) -> None:
    name = unique("msgpath")
    app = shell("app", "printf done > /tmp/result", terminationMessagePath="/tmp/result")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app],
                                        restart_policy="Never", grace=1))
    state = await terminated(http, name)
    assert state["reason"] == "Completed" and state["message"] == "done"
    await delete_pod(http, name)


async def test_fallback_to_logs_on_error_takes_the_last_80_lines(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("msglogs")
    app = shell("app", "i=1; while [ $i -le 100 ]; do echo line $i; i=$((i+1)); done; exit 1",
                terminationMessagePolicy="FallbackToLogsOnError")
    ok = shell("ok", "echo all good", terminationMessagePolicy="FallbackToLogsOnError")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app, ok],
                                        restart_policy="Never", grace=1))
    await terminated(http, name)

    async def both() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        states = {s["name"]: s["state"] for s in pod["status"]["containerStatuses"]}
        return states if all("terminated" in s for s in states.values()) else None
    states = await eventually(both, timeout=60, what="both containers terminated")
    state = states["app"]["terminated"]
    assert state["exitCode"] == 1
    assert state["message"] == "".join(f"line {i}\n" for i in range(21, 101))
    assert "message" not in states["ok"]["terminated"]  # it succeeded: no message
    await delete_pod(http, name)


class EngineWithoutOurFiles:
    """A Docker client whose engine cannot see the kubelet's files (a kubelet in a
    container on the host's Docker socket): bind mounts of them fail."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def create_container(self, name: str, body: dict[str, Any]) -> str:
        self.bodies.append(body)
        if body["HostConfig"].get("Mounts"):
            raise DockerError(400, "invalid mount config for type \"bind\": bind source path "
                                   "does not exist: /var/lib/kubelet/pods/x")
        return "c1"


async def test_an_engine_that_cannot_see_the_files_gets_no_mounts(tmp_path: Path) -> None:
    client = EngineWithoutOurFiles()
    runtime = DockerRuntime(client, node_name="n", sandbox_image="pause",  # type: ignore[arg-type]
                            pods_dir=str(tmp_path / "pods"))
    spec = {"name": "app", "image": "i", "terminationMessagePath": "/dev/termination-log"}
    for _ in range(2):
        assert await runtime.create_container(make_pod(), spec, sandbox=sandbox(),
                                              attempt=0) == "c1"
    assert ["Mounts" in b["HostConfig"] for b in client.bodies] == [True, False, False]
    assert runtime.pods_dir == ""
