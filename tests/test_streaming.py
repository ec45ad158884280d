"""exec, attach, port-forward and cp end to end: the real kubectl 1.37 (over WebSocket, its
default, and over SPDY with KUBECTL_*_WEBSOCKETS=false) and the official Python client,
through the apiserver to a real kubelet running the pods on Docker.

Pods name `nodeName` directly (no scheduler); the module's kubelet has a node name of its
own and teardown removes only its containers.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    ensure_docker,
    remove_node_containers,
)
from tests.support import ApiServer, Kubectl, unique

pytestmark = pytest.mark.docker

NS = "default"
WEBSOCKET: dict[str, str] = {}
SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}
PROTOCOLS = [pytest.param(WEBSOCKET, id="websocket"), pytest.param(SPDY, id="spdy")]
SERVE_FOREVER = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
HTTPD = "mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p 80 -h /www"


@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[KubeletProcess]:
    ensure_docker()
    node = unique("stream-node")
    process = KubeletProcess(apiserver, Path(tmp_path_factory.mktemp("kubelet")),
                             node_name=node).start()
    yield process
    process.stop()
    remove_node_containers(node)


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.url, Path(tmp_path_factory.mktemp("kubectl")))


def pod_manifest(name: str, node: str, script: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                     "command": ["sh", "-c", script], **container}]}}


def start_pod(kubectl: Kubectl, manifest: dict[str, Any]) -> str:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(manifest))
    name = str(manifest["metadata"]["name"])
    kubectl.run("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=60s")
    return name


@pytest.fixture(scope="module")
def shell_pod(kubelet: KubeletProcess, kubectl: Kubectl) -> Iterator[str]:
    name = start_pod(kubectl, pod_manifest(unique("sh"), kubelet.node_name, SERVE_FOREVER))
    yield name
    kubectl.run("delete", "pod", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def httpd_pod(kubelet: KubeletProcess, kubectl: Kubectl) -> Iterator[str]:
    name = start_pod(kubectl, pod_manifest(unique("web"), kubelet.node_name, HTTPD))
    yield name
    kubectl.run("delete", "pod", name, "--wait=false", check=False)


# -- exec ---------------------------------------------------------------------------------

@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_prints_the_output_of_the_command(kubectl: Kubectl, shell_pod: str,
                                               env: dict[str, str]) -> None:
    done = kubectl.run("exec", shell_pod, "--", "echo", "hi", env=env)
    assert done.stdout == "hi\n"


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_keeps_stdout_and_stderr_apart(kubectl: Kubectl, shell_pod: str,
                                            env: dict[str, str]) -> None:
    done = kubectl.run("exec", shell_pod, "--", "sh", "-c", "echo out; echo err >&2", env=env)
    assert (done.stdout, done.stderr) == ("out\n", "err\n")


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_exit_code_is_kubectls(kubectl: Kubectl, shell_pod: str,
                                    env: dict[str, str]) -> None:
    done = kubectl.run("exec", shell_pod, "--", "sh", "-c", "exit 3", check=False, env=env)
    assert done.returncode == 3
    assert "command terminated with exit code 3" in done.stderr


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_pipes_stdin(kubectl: Kubectl, shell_pod: str, env: dict[str, str]) -> None:
    text = "".join(f"line {i}\n" for i in range(2000))
    done = kubectl.run("exec", "-i", shell_pod, "--", "sh", "-c", "cat; echo done",
                       stdin=text, env=env)
    assert done.stdout == text + "done\n"


def kubectl_command(kubectl: Kubectl, *args: str) -> list[str]:
    """kubectl's command line as Kubectl.run builds it (for what it cannot run: a
    terminal, a process in the background)."""
    return [str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
            str(kubectl.cache_dir), *args]


def kubectl_env(kubectl: Kubectl, env: dict[str, str]) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(kubectl.kubeconfig.parent), **env}


def run_in_terminal(kubectl: Kubectl, *args: str, env: dict[str, str], typed: bytes,
                    rows: int = 40, columns: int = 100, timeout: float = 60) -> tuple[int, str]:
    """kubectl on a pseudo-terminal of `rows` x `columns`: `typed` is written to it once it
    runs; (exit code, everything it printed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(kubectl_command(kubectl, *args), stdin=slave, stdout=slave,
                               stderr=slave, env=kubectl_env(kubectl, env),
                               start_new_session=True)
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        sent = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: every holder of the terminal is gone
                    break
                if not chunk:
                    break
                output += chunk
            if not sent and (b"$ " in output or b"# " in output or time.monotonic() >
                             deadline - timeout + 3):
                os.write(master, typed)
                sent = True
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, output.decode(errors="replace").replace("\r", "")


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_in_a_terminal_sizes_it_and_reads_what_is_typed(
        kubectl: Kubectl, shell_pod: str, env: dict[str, str]) -> None:
    code, output = run_in_terminal(
        kubectl, "exec", "-it", shell_pod, "--", "sh", env=env,
        typed=b"test -t 0 && test -t 1 && echo is-a-tty; stty size; echo $((6 * 7)); exit 4\n")
    assert code == 4, output
    assert "is-a-tty\n" in output and "40 100\n" in output and "42\n" in output, output
