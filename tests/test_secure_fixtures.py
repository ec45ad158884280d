"""The shared fixtures are a secure cluster's: the session apiserver serves only HTTPS and
authenticates and authorizes every request (Node,RBAC), the `http` fixture and Kubectl are
the cluster admin, and each helper identity is who it says it is."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from common import kubeconfig
from tests.support import ApiServer, Kubectl, SchedulerProcess, table_lines, unique

PODS = "/api/v1/namespaces/default/pods"


async def test_only_https_and_no_anonymous_writes(apiserver: ApiServer,
                                                  http: httpx.AsyncClient) -> None:
    assert apiserver.url.startswith("https://127.0.0.1:")
    plain = apiserver.url.replace("https://", "http://")
    async with httpx.AsyncClient(timeout=10) as raw:  # TLS only: plain HTTP gets nothing
        try:
            answer = await raw.get(f"{plain}/api/v1/pods")
        except httpx.TransportError:
            pass
        else:
            raise AssertionError(f"plain HTTP answered {answer.status_code}: {answer.text}")
    async with apiserver.client(cert=None) as anonymous:  # the CA, no certificate
        refused = await anonymous.post(PODS, json={"metadata": {"name": unique("anon")}})
        assert refused.status_code == 403, refused.text
        assert refused.json()["message"] == (
            'pods is forbidden: User "system:anonymous" cannot create resource "pods" in '
            'API group "" in the namespace "default"')
    admin = kubeconfig.load(apiserver.admin_kubeconfig)
    assert (admin.server, admin.user) == (apiserver.url, "kubernetes-admin")
    review = await http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                             json={"apiVersion": "authentication.k8s.io/v1",
                                   "kind": "SelfSubjectReview"})
    assert review.json()["status"]["userInfo"]["username"] == "kubernetes-admin"
    assert "system:masters" in review.json()["status"]["userInfo"]["groups"]


def whoami(kubectl: Kubectl) -> dict[str, str]:
    return {row[0]: row[1] for row in table_lines(kubectl("auth", "whoami"))[1:]}


def test_kubectl_is_the_admin_and_kubeconfig_for_mints_a_user(apiserver: ApiServer,
                                                               tmp_path: Path) -> None:
    admin = Kubectl(apiserver, tmp_path / "admin")
    assert whoami(admin)["Username"] == "kubernetes-admin"
    # the URL of a started ApiServer is as good (tests written before the fixtures were
    # secure keep working)
    assert whoami(Kubectl(apiserver.url, tmp_path / "by-url"))["Username"] == "kubernetes-admin"
    alice = Kubectl(apiserver, tmp_path / "alice")
    apiserver.kubeconfig_for(alice.kubeconfig, "alice", ("devs",))
    assert whoami(alice) == {"Username": "alice", "Groups": "[devs system:authenticated]"}
    denied = alice.run("get", "pods", check=False)
    assert denied.returncode == 1
    assert 'User "alice" cannot list resource "pods"' in denied.stderr


def test_the_scheduler_runs_as_itself(apiserver: ApiServer, tmp_path: Path) -> None:
    scheduler = SchedulerProcess(apiserver, tmp_path, port=0, leader_elect=False)
    kubeconfig = scheduler.process.args[scheduler.process.args.index("--kubeconfig") + 1]
    as_scheduler = Kubectl(apiserver, tmp_path / "kubectl")
    as_scheduler.kubeconfig.write_text(Path(kubeconfig).read_text())
    assert whoami(as_scheduler)["Username"] == "system:kube-scheduler"
    assert as_scheduler.run("auth", "can-i", "create", "pods", "--subresource=binding",
                            check=False).stdout.strip() == "yes"
    assert as_scheduler.run("auth", "can-i", "delete", "nodes",
                            check=False).stdout.strip() == "no"
    assert json.loads(as_scheduler("get", "nodes", "-o", "json"))["kind"] == "List"
