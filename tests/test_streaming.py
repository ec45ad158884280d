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
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    running_kubelet,
)
from tests.support import ApiServer, Kubectl, free_port, unique

pytestmark = pytest.mark.docker

NS = "default"
WEBSOCKET: dict[str, str] = {}
SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}
PROTOCOLS = [pytest.param(WEBSOCKET, id="websocket"), pytest.param(SPDY, id="spdy")]
SERVE_FOREVER = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
HTTPD = "mkdir -p /www && echo hello from httpd > /www/index.html && exec httpd -f -p 80 -h /www"


@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet"),
                         prefix="stream-node") as process:
        yield process


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
def test_exec_carries_megabytes_each_way(kubectl: Kubectl, shell_pod: str,
                                          env: dict[str, str]) -> None:
    done = kubectl.run("exec", shell_pod, "--", "sh", "-c",
                       "yes 0123456789abcdef | head -c 3000000", env=env)
    assert done.stdout == ("0123456789abcdef\n" * 176471)[:3000000]
    done = kubectl.run("exec", "-i", shell_pod, "--", "wc", "-c", stdin="x" * 2_000_000,
                       env=env)
    assert done.stdout.split() == ["2000000"]


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_pipes_stdin(kubectl: Kubectl, shell_pod: str, env: dict[str, str]) -> None:
    text = "".join(f"line {i}\n" for i in range(2000))
    done = kubectl.run("exec", "-i", shell_pod, "--", "sh", "-c", "cat; echo done",
                       stdin=text, env=env)
    assert done.stdout == text + "done\n"


@pytest.mark.parametrize("env", PROTOCOLS)
def test_a_command_reaches_docker_as_argv_whatever_it_holds(
        kubectl: Kubectl, shell_pod: str, env: dict[str, str]) -> None:
    hostile = ['"], "Privileged": true, "User": "root", "Cmd": ["id', "$(id)", "a\nb",
               "; rm -rf /", "\u00e9\u00e8 \\x00"]
    done = kubectl.run("exec", shell_pod, "--", "printf", "[%s]\n", *hostile, env=env)
    assert done.stdout == "".join(f"[{arg}]\n" for arg in hostile)


def kubectl_command(kubectl: Kubectl, *args: str) -> list[str]:
    """kubectl's command line as Kubectl.run builds it (for what it cannot run: a
    terminal, a process in the background)."""
    return [str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
            str(kubectl.cache_dir), *args]


def kubectl_env(kubectl: Kubectl, env: dict[str, str]) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(kubectl.kubeconfig.parent), **env}


def run_in_terminal(kubectl: Kubectl, *args: str, env: dict[str, str], typed: bytes,
                    rows: int = 40, columns: int = 100, timeout: float = 60,
                    after: bytes | None = None) -> tuple[int, str]:
    """kubectl on a pseudo-terminal of `rows` x `columns`: `typed` is written to it once it
    prints `after` (else once it shows a prompt, or after 3 s); (exit code, everything it
    printed)."""
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
            if after is not None:
                due = after in output
            else:
                due = (b"$ " in output or b"# " in output
                       or time.monotonic() > deadline - timeout + 3)
            if not sent and due:
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


@pytest.mark.parametrize("env", PROTOCOLS)
def test_ctrl_c_in_a_terminal_interrupts_the_command(kubectl: Kubectl, shell_pod: str,
                                                     env: dict[str, str]) -> None:
    code, output = run_in_terminal(
        kubectl, "exec", "-it", shell_pod, "--", "sh", "-c",
        "trap 'echo interrupted; exit 9' INT; echo ready; while true; do sleep 0.1; done",
        env=env, typed=b"\x03", after=b"ready")
    assert code == 9, output
    assert "interrupted\n" in output, output


@pytest.mark.parametrize("env", PROTOCOLS)
def test_stopping_kubectl_closes_the_commands_stdin(kubectl: Kubectl, shell_pod: str,
                                                    env: dict[str, str]) -> None:
    marker = f"/tmp/{unique('closed')}"
    process = subprocess.Popen(
        kubectl_command(kubectl, "exec", "-i", shell_pod, "--", "sh", "-c",
                        f"echo started; cat >/dev/null; touch {marker}"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=kubectl_env(kubectl, env))
    assert process.stdout is not None and process.stdin is not None
    assert process.stdout.readline() == b"started\n"
    process.send_signal(signal.SIGINT)  # Ctrl-C: stdin is still open
    process.wait(timeout=10)
    process.stdin.close()
    deadline = time.monotonic() + 30
    while kubectl.run("exec", shell_pod, "--", "test", "-f", marker, check=False).returncode:
        assert time.monotonic() < deadline, "the command never saw its stdin close"
        time.sleep(0.3)


@pytest.mark.parametrize("env", PROTOCOLS)
def test_the_kubelet_lets_go_of_a_session_whose_client_left(
        kubelet: KubeletProcess, kubectl: Kubectl, shell_pod: str, env: dict[str, str]) -> None:
    seconds = str(600 + len(env))  # a command line of its own in the kubelet's log
    process = subprocess.Popen(
        kubectl_command(kubectl, "exec", shell_pod, "--", "sh", "-c",
                        f"echo started; exec sleep {seconds}"),
        stdout=subprocess.PIPE, env=kubectl_env(kubectl, env))
    assert process.stdout is not None and process.stdout.readline() == b"started\n"
    process.send_signal(signal.SIGINT)
    process.wait(timeout=10)
    deadline = time.monotonic() + 30
    while f"exec sleep {seconds}']: the client went away" not in kubelet.log():
        assert time.monotonic() < deadline, kubelet.log()[-3000:]
        time.sleep(0.3)


# -- port-forward -------------------------------------------------------------------------

class PortForward:
    """`kubectl port-forward pod/NAME LOCAL:REMOTE` in the background."""

    def __init__(self, kubectl: Kubectl, target: str, remote: int, env: dict[str, str]) -> None:
        self.local = free_port()
        self.process = subprocess.Popen(
            kubectl_command(kubectl, "port-forward", target, f"{self.local}:{remote}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kubectl_env(kubectl, env))

    def __enter__(self) -> PortForward:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()  # once listening, it says so
        assert line.startswith(f"Forwarding from 127.0.0.1:{self.local}"), (
            line + (self.process.stderr.read().decode() if self.process.stderr else ""))
        return self

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.mark.parametrize("env", PROTOCOLS)
def test_port_forward_carries_http_to_the_pod(kubectl: Kubectl, httpd_pod: str,
                                              env: dict[str, str]) -> None:
    def get(_: int) -> tuple[int, str]:
        answer = httpx.get(f"http://127.0.0.1:{forward.local}/index.html", timeout=30)
        return answer.status_code, answer.text

    with PortForward(kubectl, f"pod/{httpd_pod}", 80, env) as forward:
        for _ in range(3):  # a connection each: one SPDY stream pair each
            assert get(0) == (200, "hello from httpd\n")
        with ThreadPoolExecutor(8) as pool:  # at once, on the one SPDY connection
            assert set(pool.map(get, range(16))) == {(200, "hello from httpd\n")}


@pytest.mark.parametrize("env", PROTOCOLS)
def test_port_forward_to_a_closed_port_says_why(kubectl: Kubectl, httpd_pod: str,
                                                env: dict[str, str]) -> None:
    with PortForward(kubectl, f"pod/{httpd_pod}", 81, env) as forward:
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{forward.local}/", timeout=30)
        forward.process.terminate()
        _, err = forward.process.communicate(timeout=10)
    assert b"error forwarding port 81 to po" in err, err
    assert b"connect: connection refused" in err, err


# -- attach, run -it ----------------------------------------------------------------------

@pytest.mark.parametrize("env", PROTOCOLS)
def test_attach_reaches_the_containers_own_stdin_and_stdout(
        kubelet: KubeletProcess, kubectl: Kubectl, env: dict[str, str]) -> None:
    manifest = pod_manifest(unique("attach"), kubelet.node_name,
                            "read line; echo got $line; exit 0", stdin=True)
    manifest["spec"]["restartPolicy"] = "Never"
    name = start_pod(kubectl, manifest)
    try:
        done = kubectl.run("attach", "-i", name, stdin="hello\n", env=env)
        assert "got hello\n" in done.stdout
    finally:
        kubectl.run("delete", "pod", name, "--wait=false", check=False)


@pytest.mark.parametrize("env", PROTOCOLS)
def test_run_it_rm_talks_to_the_new_pod_and_removes_it(
        kubelet: KubeletProcess, kubectl: Kubectl, env: dict[str, str]) -> None:
    name = unique("run")
    overrides = json.dumps({"apiVersion": "v1", "spec": {"nodeName": kubelet.node_name,
                                                         "terminationGracePeriodSeconds": 1}})
    code, output = run_in_terminal(
        kubectl, "run", name, "-it", "--rm", "--restart=Never", f"--image={BUSYBOX_IMAGE}",
        f"--overrides={overrides}", "--", "sh", "-c",
        # kubectl sends the terminal's size and the typed line on their own streams, in no
        # set order, and an attach first sends the size plus one (to make the remote
        # redraw): the shell waits, up to the test's timeout, for the terminal's own size
        "read line; echo got $line; until [ \"$(stty size 2>/dev/null)\" = '30 90' ]; do "
        "sleep 0.1; done; stty size", env=env, typed=b"hello\n", rows=30, columns=90,
        timeout=90,
        after=b"If you don't see a command prompt")
    assert code == 0, output
    assert "got hello\n" in output and "30 90\n" in output, output
    assert f'pod "{name}" deleted' in output, output
    assert kubectl.run("get", "pod", name, check=False).returncode == 1


def test_debug_it_attaches_to_the_new_ephemeral_container(kubectl: Kubectl,
                                                          shell_pod: str) -> None:
    debugger = unique("dbg")
    code, output = run_in_terminal(
        kubectl, "debug", "-it", shell_pod, f"--image={BUSYBOX_IMAGE}",
        "--image-pull-policy=IfNotPresent", "--profile=baseline", "-c", debugger, "--", "sh",
        env=WEBSOCKET, typed=b"echo in-$((40 + 2)); exit\n", timeout=90)
    assert code == 0, output
    assert "in-42\n" in output, output
    assert "falling back to streaming logs" not in output, output


# -- cp -----------------------------------------------------------------------------------

@pytest.mark.parametrize("env", PROTOCOLS)
def test_cp_copies_a_file_into_the_pod_and_back(kubectl: Kubectl, shell_pod: str,
                                                env: dict[str, str], tmp_path: Path) -> None:
    sent = tmp_path / "sent.txt"
    sent.write_bytes(os.urandom(3000).hex().encode() + b"\n")
    remote = f"/tmp/{unique('cp')}.txt"
    kubectl.run("cp", str(sent), f"{shell_pod}:{remote}", env=env)
    assert kubectl.run("exec", shell_pod, "--", "cat", remote, env=env).stdout == \
        sent.read_text()
    back = tmp_path / "back.txt"
    kubectl.run("cp", f"{shell_pod}:{remote}", str(back), env=env)
    assert back.read_bytes() == sent.read_bytes()


# -- the official Python client (WebSocket v4.channel.k8s.io) --------------------------

def core_api(apiserver: ApiServer) -> Any:
    """The `kubernetes` package's CoreV1Api on the session apiserver."""
    from kubernetes import client

    configuration = apiserver.configure(client.Configuration())
    return client.CoreV1Api(client.ApiClient(configuration))


def test_python_client_stream_runs_a_command(apiserver: ApiServer, shell_pod: str) -> None:
    from kubernetes.stream import stream

    api = core_api(apiserver)
    output = stream(api.connect_get_namespaced_pod_exec, shell_pod, NS,
                    command=["sh", "-c", "echo from python"], stderr=True, stdin=False,
                    stdout=True, tty=False)
    assert output == "from python\n"


def test_python_client_stream_gets_stdin_and_the_exit_code(apiserver: ApiServer,
                                                           shell_pod: str) -> None:
    from kubernetes.stream import stream

    api = core_api(apiserver)
    session = stream(api.connect_get_namespaced_pod_exec, shell_pod, NS,
                     command=["sh", "-c", "read line; echo got $line; echo oops >&2; exit 7"],
                     stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
    session.write_stdin("hello\n")
    session.run_forever(timeout=30)
    assert session.read_stdout() == "got hello\n"
    assert session.read_stderr() == "oops\n"
    assert session.returncode == 7


def test_python_client_portforward_reaches_the_pod(apiserver: ApiServer,
                                                   httpd_pod: str) -> None:
    from kubernetes.stream import portforward

    api = core_api(apiserver)
    forward = portforward(api.connect_get_namespaced_pod_portforward, httpd_pod, NS,
                          ports="80")
    sock = forward.socket(80)
    sock.setblocking(True)
    sock.settimeout(30)
    sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    answer = b""
    while chunk := sock.recv(4096):
        answer += chunk
    sock.close()
    assert answer.startswith(b"HTTP/1.") and answer.endswith(b"hello from httpd\n"), answer
