"""A projected serviceAccountToken volume end to end (issue 14): an HTTPS apiserver with
the Node and RBAC authorizers, a kubelet with its node certificate, and a pod on real
Docker whose volume holds a token the kubelet requested for it: the token authenticates as
the pod's ServiceAccount, bound to the pod, and stops working when the pod is gone. A node
asking for a token of a pod that is not its own is refused (NodeRestriction)."""

from __future__ import annotations

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
    Etcd,
    Process,
    SecureApiServer,
    client_context,
    eventually,
    free_port,
    unique,
)

NODE = unique("token-node")
PODS = "/api/v1/namespaces/default/pods"
TOKEN_DIR = "/var/run/secrets/tokens"


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    pki.init(directory, [NODE])
    return directory


@pytest.fixture(scope="module")
def server(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    server = SecureApiServer(etcd, tmp_path_factory.mktemp("tokens"), pki_dir,
                             name="apiserver-tokens", plain=False,
                             extra_args=("--authorization-mode=Node,RBAC",
                                         "--etcd-prefix", f"/{unique('tokens')}")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubelet(server: SecureApiServer, pki_dir: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Path]]:
    ensure_docker()
    directory = tmp_path_factory.mktemp("token-kubelet")
    pki.write_kubeconfigs(pki_dir, directory, [NODE], server=server.url)
    root = directory / "root"
    process = Process(f"kubelet-{NODE}", [
        PYTHON, "-m", "kubelet", "--kubeconfig", str(directory / f"kubelet-{NODE}.conf"),
        "--node-name", NODE, "--node-ip", "127.0.0.1", "--address", "127.0.0.1",
        "--port", str(free_port()), "--docker-socket", DOCKER_SOCKET,
        "--pod-infra-container-image", PAUSE_IMAGE, "--root-dir", str(root),
        "--resync-seconds", "2",
    ], directory / "kubelet.log").start()
    yield process, root
    process.stop()
    remove_node_containers(NODE)


def token_pod(name: str) -> dict[str, Any]:
    check = (f"trap 'exit 0' TERM; while true; do test -s {TOKEN_DIR}/token || exit 3; "
             "sleep 0.2; done")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                                     "command": ["sh", "-c", check],
                                     "volumeMounts": [{"name": "api",
                                                       "mountPath": TOKEN_DIR}]}],
                     "volumes": [{"name": "api", "projected": {"sources": [
                         {"serviceAccountToken": {"path": "token", "audience": "vault",
                                                  "expirationSeconds": 600}}]}}]}}


async def review(http: httpx.AsyncClient, token: str, audience: str) -> dict[str, Any]:
    response = await http.post("/apis/authentication.k8s.io/v1/tokenreviews", json={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]}})
    assert response.status_code == 201, response.text
    return dict(response.json()["status"])


@pytest.mark.docker
async def test_a_projected_token_is_the_pods_and_dies_with_it(
        server: SecureApiServer, kubelet: tuple[Process, Path], pki_dir: Path) -> None:
    process, root = kubelet
    name = unique("token-pod")
    async with httpx.AsyncClient(base_url=server.url, verify=server.admin, timeout=30) as http:
        created = await http.post(PODS, json=token_pod(name))
        assert created.status_code == 201, created.text
        uid = created.json()["metadata"]["uid"]

        async def running() -> dict[str, Any] | None:
            assert process.alive(), process.log()[-3000:]
            pod = (await http.get(f"{PODS}/{name}")).json()
            statuses = pod["status"].get("containerStatuses") or []
            return pod if statuses and "running" in statuses[0]["state"] else None
        pod = await eventually(running, timeout=90, what=f"{name} running")
        assert pod is not None and pod["status"]["containerStatuses"][0]["restartCount"] == 0

        path = root / "pods" / uid / "volumes" / "kubernetes.io~projected" / "api" / "token"
        token = path.read_text()
        status = await review(http, token, "vault")
        assert status["authenticated"] is True, status
        assert status["audiences"] == ["vault"]
        user = status["user"]
        assert user["username"] == "system:serviceaccount:default:default"
        assert user["extra"]["authentication.kubernetes.io/pod-name"] == [name]
        assert user["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]
        assert (await review(http, token, "another")).get("authenticated") is not True

        # the node's own requests: only for its own pods, bound to them
        node = httpx.AsyncClient(base_url=server.url, timeout=10,
                                 verify=client_context(pki_dir, f"kubelet-client-{NODE}"))
        async with node:
            unbound = await node.post("/api/v1/namespaces/default/serviceaccounts/default/token",
                                json={"apiVersion": "authentication.k8s.io/v1",
                                      "kind": "TokenRequest", "spec": {}})
            assert unbound.status_code == 403, unbound.text
            assert unbound.json()["message"] == (
                'serviceaccounts "default" is forbidden: node requested token not bound to '
                "a pod")

        await http.delete(f"{PODS}/{name}")

        async def revoked() -> bool:
            gone = (await http.get(f"{PODS}/{name}")).status_code == 404
            return gone and (await review(http, token, "vault")).get("authenticated") is not True
        await eventually(revoked, timeout=60, what="the token to die with its pod")
    assert "Forbidden" not in process.log()
