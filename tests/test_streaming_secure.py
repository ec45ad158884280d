"""exec and port-forward on the secure path, as kubeadm sets it up: kubectl to the HTTPS
apiserver (RBAC), which calls the kubelet's HTTPS port with its kubelet-client certificate;
the kubelet authenticates that and asks the apiserver (SubjectAccessReview) whether it may.
A WebSocket client's GET is authorized as `create` on the sub-resource, as kube does."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common import pki
from tests.docker_support import (
    BUSYBOX_IMAGE,
    DOCKER_SOCKET,
    PAUSE_IMAGE,
    ensure_docker,
    remove_node_containers,
)
from tests.support import (
    PYTHON,
    Kubectl,
    Process,
    SecureApiServer,
    client_context,
    free_port,
    unique,
)
from tests.test_streaming import PROTOCOLS, SPDY, WEBSOCKET, PortForward

pytestmark = pytest.mark.docker

NODE = "stream-secure-node"


def secure_kubelet(pki_dir: Path, work: Path, port: int) -> Process:
    """The kubelet as kubeadm runs it (hack/up.py --secure): HTTPS, no anonymous requests,
    tokens and authorization through the apiserver."""
    return Process(f"kubelet-{NODE}", [
        PYTHON, "-m", "kubelet", "--kubeconfig", str(pki_dir / f"kubelet-{NODE}.conf"),
        "--node-name", NODE, "--node-ip", "127.0.0.1", "--address", "127.0.0.1",
        "--port", str(port), "--docker-socket", DOCKER_SOCKET,
        "--pod-infra-container-image", PAUSE_IMAGE,
        "--tls-cert-file", str(pki_dir / f"kubelet-{NODE}.crt"),
        "--tls-private-key-file", str(pki_dir / f"kubelet-{NODE}.key"),
        "--client-ca-file", str(pki_dir / "ca.crt"), "--anonymous-auth=false",
        "--authentication-token-webhook", "--authorization-mode", "Webhook"],
        work / "kubelet.log")


@pytest.fixture(scope="module")
def cluster(etcd: Any, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[SecureApiServer, Kubectl, str]]:
    """(the apiserver, kubectl as the cluster admin, a running pod's name)."""
    ensure_docker()
    pki_dir = tmp_path_factory.mktemp("stream-pki")
    pki.init(pki_dir, [NODE])
    work = tmp_path_factory.mktemp("stream-secure")
    api = SecureApiServer(etcd, work, pki_dir, name="apiserver-stream", plain=False, extra_args=(
        "--authorization-mode=Node,RBAC", "--etcd-prefix", f"/{unique('stream')}",
        "--kubelet-client-certificate", str(pki_dir / "apiserver-kubelet-client.crt"),
        "--kubelet-client-key", str(pki_dir / "apiserver-kubelet-client.key"),
        "--kubelet-certificate-authority", str(pki_dir / "ca.crt"))).start()
    pki.write_kubeconfigs(pki_dir, pki_dir, [NODE], server=api.url)
    port = free_port()
    kubelet = secure_kubelet(pki_dir, work, port).start()
    admin = Kubectl(api.url, work / "kubectl")
    pki.write_kubeconfig(admin.kubeconfig, pki.kubeconfig_for(
        pki_dir, "admin", server=api.url, user="kubernetes-admin", namespace="default"))
    try:
        deadline = time.monotonic() + 30
        while True:
            assert kubelet.alive(), kubelet.log()[-3000:]
            try:
                if httpx.get(f"https://127.0.0.1:{port}/healthz", timeout=2,
                             verify=client_context(pki_dir, "admin")).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, kubelet.log()[-3000:]
            time.sleep(0.2)
        pod = unique("secure-sh")
        script = ("mkdir -p /www && echo secure hello > /www/index.html && "
                  "exec httpd -f -p 80 -h /www")
        admin.run("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                                     "command": ["sh", "-c", script]}]}}))
        admin.run("wait", "--for=condition=Ready", f"pod/{pod}", "--timeout=60s")
        yield api, admin, pod
    finally:
        kubelet.stop()
        remove_node_containers(NODE)
        api.stop()


def alice(api: SecureApiServer, admin: Kubectl, home: Path) -> Kubectl:
    """kubectl as the token user alice (tests/support.py's token file)."""
    user = Kubectl(api.url, home)
    cluster = {"server": api.url,
               "certificate-authority-data": base64.b64encode(api.ca).decode()}
    user.kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "alice",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "alice", "user": {"token": "good-token"}}],
        "contexts": [{"name": "alice", "context": {"cluster": "c", "user": "alice",
                                                   "namespace": "default"}}]}))
    return user


@pytest.mark.parametrize("env", PROTOCOLS)
def test_exec_through_both_https_hops(cluster: tuple[SecureApiServer, Kubectl, str],
                                      env: dict[str, str]) -> None:
    _, admin, pod = cluster
    done = admin.run("exec", pod, "--", "sh", "-c", "echo secure; exit 3", check=False, env=env)
    assert (done.returncode, done.stdout) == (3, "secure\n"), done.stderr
    assert "command terminated with exit code 3" in done.stderr


@pytest.mark.parametrize("env", PROTOCOLS)
def test_port_forward_through_both_https_hops(cluster: tuple[SecureApiServer, Kubectl, str],
                                              env: dict[str, str]) -> None:
    _, admin, pod = cluster
    with PortForward(admin, f"pod/{pod}", 80, env) as forward:
        answer = httpx.get(f"http://127.0.0.1:{forward.local}/index.html", timeout=30)
    assert answer.text == "secure hello\n"


def test_reading_a_pod_is_not_enough_to_exec_in_it(
        cluster: tuple[SecureApiServer, Kubectl, str], tmp_path: Path) -> None:
    api, admin, pod = cluster
    role, binding = unique("exec-get"), unique("exec-get")
    admin("create", "role", role, "--verb=get", "--resource=pods,pods/exec")
    admin("create", "rolebinding", binding, f"--role={role}", "--user=alice")
    user = alice(api, admin, tmp_path / "alice")
    # WebSocket: a GET, authorized as create too
    denied = user.run("exec", pod, "--", "echo", "hi", check=False, env=WEBSOCKET)
    assert denied.returncode == 1
    assert (f'pods "{pod}" is forbidden: User "alice" cannot create resource "pods/exec" in '
            f'API group "" in the namespace "default"') in denied.stderr, denied.stderr
    # SPDY: a POST, a create in itself
    denied = user.run("exec", pod, "--", "echo", "hi", check=False, env=SPDY)
    assert 'cannot create resource "pods/exec"' in denied.stderr, denied.stderr
    admin("create", "role", f"{role}-create", "--verb=create", "--resource=pods/exec")
    admin("create", "rolebinding", f"{binding}-create", f"--role={role}-create",
          "--user=alice")
    deadline = time.monotonic() + 30
    while (done := user.run("exec", pod, "--", "echo", "hi", check=False)).stdout != "hi\n":
        assert time.monotonic() < deadline, done.stderr  # RBAC's cache catches up
        time.sleep(0.5)
