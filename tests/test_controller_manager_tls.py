"""The controller-manager over TLS with its own certificate (CN system:kube-controller-
manager) against `--authorization-mode=Node,RBAC`: kube's bootstrap roles are enough for
leader election, node lifecycle, taint eviction, Deployments, ReplicaSets and the
garbage collector."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common import pki
from tests.cm_support import ControllerManagerProcess
from tests.support import Etcd, SecureApiServer, eventually, unique

UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = Path(tmp_path_factory.mktemp("cm-pki"))
    pki.init(directory, [])
    return directory


@pytest.fixture(scope="module")
def secure(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    server = SecureApiServer(etcd, tmp_path_factory.mktemp("cm-rbac"), pki_dir,
                             name="apiserver-cm-rbac", plain=False,
                             extra_args=("--authorization-mode=Node,RBAC",
                                         "--etcd-prefix", f"/{unique('cm-rbac')}")).start()
    yield server
    server.stop()


async def test_it_runs_on_its_own_certificate_and_kubes_roles(
        secure: SecureApiServer, pki_dir: Path, tmp_path: Path) -> None:
    pki.write_kubeconfigs(pki_dir, tmp_path, [], server=secure.url)
    node, pod_name = unique("tls-node"), unique("tls-pod")
    async with httpx.AsyncClient(base_url=secure.url, verify=secure.admin, timeout=30) as api:
        created = await api.post("/api/v1/nodes", json={
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        assert created.status_code == 201, created.text
        created = await api.post("/api/v1/namespaces/default/pods", json={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
            "spec": {"nodeName": node, "tolerations": [
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 1}],
                "containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}})
        assert created.status_code == 201, created.text
        cm = ControllerManagerProcess(None, tmp_path, kubeconfig=tmp_path /
                                      "controller-manager.conf", extra_args=(
            "--node-startup-grace-period", "2s", "--node-monitor-period", "500ms")).start()
        try:
            await cm.wait_synced()

            async def evicted() -> dict[str, Any]:
                found = (await api.get(f"/api/v1/namespaces/default/pods/{pod_name}")).json()
                return found if found["metadata"].get("deletionTimestamp") else {}
            await eventually(evicted, timeout=40, what="the pod evicted")
            found = (await api.get(f"/api/v1/nodes/{node}")).json()
            ready = next(c for c in found["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusNeverUpdated")
            lease = (await api.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/"
                                   "leases/kube-controller-manager")).json()
            assert lease["spec"]["holderIdentity"] == cm.identity()
            deployment = {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tls-web"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "tls-web"}},
                         "template": {"metadata": {"labels": {"app": "tls-web"}}, "spec": {
                             "containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}}}}
            created = await api.post("/apis/apps/v1/namespaces/default/deployments",
                                     json=deployment)
            assert created.status_code == 201, created.text

            async def one_pod() -> bool:
                pods = (await api.get("/api/v1/namespaces/default/pods",
                                      params={"labelSelector": "app=tls-web"})).json()
                return len(pods["items"]) == 1
            await eventually(one_pod, timeout=40, what="the deployment's pod")
            deleted = await api.delete("/apis/apps/v1/namespaces/default/deployments/tls-web")
            assert deleted.status_code == 200, deleted.text

            async def collected() -> bool:
                pods = (await api.get("/api/v1/namespaces/default/pods",
                                      params={"labelSelector": "app=tls-web"})).json()
                return not pods["items"]
            await eventually(collected, timeout=40, what="the cascade")
            # a 403 as a status, not the digits inside a lease holder's uuid, a revision or
            # a log line's milliseconds ("02:06:44,403": CI matched that)
            refused = re.search(r"Forbidden|(?<![\w,-])403(?![\w-])", cm.log())
            assert refused is None, cm.log()[-3000:]
        finally:
            cm.stop()
            await api.delete(f"/api/v1/namespaces/default/pods/{pod_name}",
                             params={"gracePeriodSeconds": "0"})
