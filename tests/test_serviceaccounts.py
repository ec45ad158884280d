"""ServiceAccounts on an HTTPS apiserver with --authorization-mode=RBAC: the `default`
ServiceAccount of every namespace (recreated when deleted), validation and the Table, and
the real kubectl's `create serviceaccount` (protobuf) and `get sa`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common import pki
from tests.support import Etcd, Kubectl, SecureApiServer, unique


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sa-pki")
    pki.init(directory, ["sa-node"])
    return directory


@pytest.fixture(scope="module")
def server(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    api = SecureApiServer(etcd, tmp_path_factory.mktemp("sa"), pki_dir, name="apiserver-sa",
                          plain=False, extra_args=(
                              "--authorization-mode=RBAC",
                              "--etcd-prefix", f"/{unique('sa')}")).start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def admin(server: SecureApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, verify=server.admin, timeout=10) as client:
        yield client


def until(check: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def new_namespace(admin: httpx.Client) -> str:
    name = unique("sa-ns")
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    return name


def default_sa(admin: httpx.Client, namespace: str) -> dict[str, Any] | None:
    answer = admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
    return answer.json() if answer.status_code == 200 else None


def test_default_service_account_in_every_namespace(admin: httpx.Client) -> None:
    assert until(lambda: default_sa(admin, "default"))
    assert until(lambda: default_sa(admin, "kube-system"))
    namespace = new_namespace(admin)
    first = until(lambda: default_sa(admin, namespace))
    assert admin.delete(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
                        ).status_code == 200
    again = until(lambda: default_sa(admin, namespace))
    assert again["metadata"]["uid"] != first["metadata"]["uid"]


def test_service_account_validation_and_table(admin: httpx.Client) -> None:
    namespace = new_namespace(admin)
    bad = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     json={"metadata": {"name": "Not_Valid"}})
    assert bad.status_code == 422
    assert bad.json()["details"]["causes"][0]["field"] == "metadata.name"
    assert admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                      json={"metadata": {"name": "robot"},
                            "secrets": [{"name": "s1"}]}).status_code == 201
    table = admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/robot", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Secrets", "Age"]
    assert table["rows"][0]["cells"][:2] == ["robot", 1]


def test_kubectl_create_and_get_sa(server: SecureApiServer, pki_dir: Path, tmp_path: Path,
                                   admin: httpx.Client) -> None:
    kubectl = Kubectl(server.url, tmp_path / "kubectl")
    pki.write_kubeconfig(kubectl.kubeconfig, pki.kubeconfig_for(
        pki_dir, "admin", server=server.url, user="kubernetes-admin", namespace="default"))
    until(lambda: default_sa(admin, "default"))
    assert "sa" in kubectl("api-resources", "--api-group=", "--no-headers").split()
    assert "default" in kubectl("get", "sa")
    # kubectl sends it as protobuf
    assert kubectl("create", "serviceaccount", "robot").strip() == "serviceaccount/robot created"
