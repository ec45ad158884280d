"""The apiserver's secure port with real processes: the cluster PKI, x509 and token
authentication, anonymous requests, kubectl and the official Python client from the
generated kubeconfig, and a scheduler and kubelet running a pod over TLS."""

from __future__ import annotations

import datetime
import json
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

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
    KUBECTL,
    PYTHON,
    Etcd,
    Process,
    SecureApiServer,
    client_context,
    eventually,
    free_port,
    unique,
)

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    pki.init(directory, [NODE])
    return directory


NODE = unique("tls-node")


@pytest.fixture(scope="module")
def secure(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    server = SecureApiServer(etcd, tmp_path_factory.mktemp("secure"), pki_dir,
                             name="apiserver-secure").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def strict(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    """Secure port only (its own lifespan), no anonymous requests."""
    server = SecureApiServer(etcd, tmp_path_factory.mktemp("strict"), pki_dir,
                             name="apiserver-strict", plain=False,
                             extra_args=("--anonymous-auth=false",)).start()
    yield server
    server.stop()


def get(server: SecureApiServer, path: str, verify: ssl.SSLContext,
        headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", verify=verify, headers=headers, timeout=10)


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_the_admin_certificate_is_let_in(secure: SecureApiServer) -> None:
    response = get(secure, PODS, secure.admin)
    assert response.status_code == 200, response.text
    assert response.json()["kind"] == "PodList"


def test_a_certificate_of_another_ca_is_401(secure: SecureApiServer,
                                           tmp_path: Path, pki_dir: Path) -> None:
    pki.init(tmp_path, [])
    response = get(secure, PODS, client_context(tmp_path, "admin", ca_dir=pki_dir))
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED


def test_an_expired_certificate_is_401(secure: SecureApiServer, pki_dir: Path,
                                       tmp_path: Path) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=3)
    key = pki.new_key()
    cert = pki.issue(pki.CertSpec("old", "kubernetes-admin", ("system:masters",), client=True),
                     key, pki.load_cert(pki_dir / "ca.crt"), pki.load_key(pki_dir / "ca.key"),
                     not_before=past, not_after=past + datetime.timedelta(days=1))
    (tmp_path / "old.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "old.key").write_bytes(pki.key_pem(key))
    (tmp_path / "ca.crt").write_bytes((pki_dir / "ca.crt").read_bytes())
    response = get(secure, PODS, client_context(tmp_path, "old"))
    assert response.status_code == 401 and response.json() == UNAUTHORIZED


def test_tokens_from_the_token_file(secure: SecureApiServer, pki_dir: Path) -> None:
    no_cert = client_context(pki_dir, None)
    good = get(secure, PODS, no_cert, {"Authorization": "Bearer good-token"})
    assert good.status_code == 200, good.text
    bogus = get(secure, PODS, no_cert, {"Authorization": "Bearer bogus"})
    assert bogus.status_code == 401 and bogus.json() == UNAUTHORIZED  # anonymous is on


def test_no_credentials_is_anonymous_when_allowed(secure: SecureApiServer,
                                                  strict: SecureApiServer,
                                                  pki_dir: Path) -> None:
    no_cert = client_context(pki_dir, None)
    assert get(secure, PODS, no_cert).status_code == 200  # AlwaysAllow
    assert get(secure, "/healthz", no_cert).status_code == 200
    for path in (PODS, "/healthz", "/api", "/openapi/v2"):  # FastAPI's routes too
        response = get(strict, path, no_cert)
        assert response.status_code == 401, path
        assert response.json() == UNAUTHORIZED
    assert get(strict, PODS, strict.admin).status_code == 200


def test_the_plain_port_still_serves_and_warns(secure: SecureApiServer) -> None:
    assert httpx.get(f"http://127.0.0.1:{secure.port}{PODS}").status_code == 200
    assert "WITHOUT authentication or authorization" in secure.process.log()


def test_the_server_certificate_names_its_addresses(secure: SecureApiServer,
                                                    pki_dir: Path) -> None:
    context = client_context(pki_dir, None)
    response = httpx.get(f"https://localhost:{secure.secure_port}/healthz", verify=context)
    assert response.status_code == 200
    untrusted = ssl.create_default_context()  # the system's CAs do not know ours
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{secure.url}/healthz", verify=untrusted)


def write_admin_kubeconfig(secure: SecureApiServer, pki_dir: Path, path: Path) -> Path:
    pki.write_kubeconfig(path, pki.kubeconfig_for(pki_dir, "admin", server=secure.url,
                                                  user="kubernetes-admin",
                                                  namespace="default"))
    return path


def test_kubectl_with_the_admin_kubeconfig(secure: SecureApiServer, pki_dir: Path,
                                           tmp_path: Path) -> None:
    config = write_admin_kubeconfig(secure, pki_dir, tmp_path / "admin.conf")
    name = unique("tls-pod")

    def kubectl(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "cache"),
             *args], capture_output=True, text=True, input=stdin, timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    kubectl("get", "pods")
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    assert f"pod/{name} created" in kubectl("create", "-f", "-", stdin=json.dumps(manifest))
    assert name in kubectl("get", "pods", name)
    assert f'pod "{name}" force deleted' in kubectl("delete", "pod", name,
                                                     "--grace-period=0", "--force")


def test_the_official_python_client(secure: SecureApiServer, pki_dir: Path,
                                    tmp_path: Path) -> None:
    from kubernetes import client, config

    path = write_admin_kubeconfig(secure, pki_dir, tmp_path / "admin.conf")
    api_client = config.new_client_from_config(str(path))
    try:
        pods = client.CoreV1Api(api_client).list_namespaced_pod("default")
        assert pods.kind == "PodList"
    finally:
        api_client.close()
    config.load_kube_config(str(path))  # the module-level way works as well
    try:
        assert client.CoreV1Api().list_namespaced_pod("default").kind == "PodList"
        assert client.CoreV1Api().list_namespace().items
    finally:
        client.Configuration.set_default(None)  # other tests' clients start from scratch


# --- components over TLS ----------------------------------------------------------------


@pytest.fixture(scope="module")
def rbac_secure(etcd: Etcd, pki_dir: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    """HTTPS only, every request put to the Node and RBAC authorizers, as `make up` runs."""
    server = SecureApiServer(etcd, tmp_path_factory.mktemp("rbac"), pki_dir,
                             name="apiserver-rbac", plain=False,
                             extra_args=("--authorization-mode=Node,RBAC",
                                         "--etcd-prefix", f"/{unique('rbac')}")).start()
    yield server
    server.stop()


@pytest.mark.docker
async def test_a_scheduler_and_a_kubelet_run_a_pod_over_tls(rbac_secure: SecureApiServer,
                                                            pki_dir: Path,
                                                            tmp_path: Path) -> None:
    """Each with its own certificate, and only the permissions kube's default policy
    gives it (system:kube-scheduler; system:node:NAME through the Node authorizer)."""
    secure = rbac_secure
    ensure_docker()
    pki.write_kubeconfigs(pki_dir, tmp_path, [NODE], server=secure.url)
    kubelet_port = free_port()
    kubelet = Process(f"kubelet-{NODE}", [
        PYTHON, "-m", "kubelet", "--kubeconfig", str(tmp_path / f"kubelet-{NODE}.conf"),
        "--node-name", NODE, "--node-ip", "127.0.0.1", "--address", "127.0.0.1",
        "--port", str(kubelet_port), "--docker-socket", DOCKER_SOCKET,
        "--pod-infra-container-image", PAUSE_IMAGE,
        "--node-labels", f"kubelite.io/tls-node={NODE}",
    ], tmp_path / "kubelet.log").start()
    scheduler = Process("scheduler", [
        PYTHON, "-m", "scheduler", "--kubeconfig", str(tmp_path / "scheduler.conf"),
        "--leader-elect=false", "--port", "0", "--log-level", "info",
    ], tmp_path / "scheduler.log").start()
    name = unique("tls-run")
    try:
        async with httpx.AsyncClient(base_url=secure.url, verify=secure.admin,
                                     timeout=30) as http:
            async def node_ready() -> bool:
                assert kubelet.alive(), kubelet.log()[-3000:]
                r = await http.get(f"/api/v1/nodes/{NODE}")
                return r.status_code == 200 and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in r.json().get("status", {}).get("conditions", []))
            await eventually(node_ready, timeout=60, what="the node to be Ready")
            created = await http.post(PODS, json={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeSelector": {"kubelite.io/tls-node": NODE},
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": BUSYBOX_IMAGE,
                                         "command": ["sh", "-c", "trap 'exit 0' TERM; "
                                                     "while true; do sleep 0.2; done"]}]}})
            assert created.status_code == 201, created.text

            async def running() -> bool:
                assert scheduler.alive(), scheduler.log()[-3000:]
                pod = (await http.get(f"{PODS}/{name}")).json()
                return pod["spec"].get("nodeName") == NODE and \
                    pod["status"].get("phase") == "Running"
            await eventually(running, timeout=90, what="the pod to run on the TLS node")
            await http.delete(f"{PODS}/{name}")

            async def gone() -> bool:  # the kubelet's final delete passes NodeRestriction
                return (await http.get(f"{PODS}/{name}")).status_code == 404
            await eventually(gone, timeout=60, what="the kubelet to finish the deletion")
            events = (await http.get("/api/v1/namespaces/default/events", params={
                "fieldSelector": f"involvedObject.name={name}"})).json()["items"]
            assert {"Scheduled", "Started"} <= {e["reason"] for e in events}
            lease = await http.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/"
                                   f"leases/{NODE}")
            assert lease.status_code == 200
    finally:
        scheduler.stop()
        kubelet.stop()
        remove_node_containers(NODE)
    assert "Unauthorized" not in scheduler.log() + kubelet.log()
    assert "Forbidden" not in scheduler.log() + kubelet.log()
