"""`python -m cluster_dns` as a test fixture, and DNS queries straight to its dnsmasq."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import dns.asyncquery
import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype

from cluster_dns.__main__ import docker_bridge_gateway
from tests.support import PYTHON, ApiServer, Process, eventually, free_port


def bridge_gateway() -> str:
    return docker_bridge_gateway("/var/run/docker.sock")


# What the watcher does as system:kube-dns: kube's system:kube-dns ClusterRole (list and
# watch Services and Endpoints) plus EndpointSlices, and in kube-system the writes that keep
# the kube-dns Service and its EndpointSlice. Granted here until the bootstrap policy has it.
KUBE_DNS_RBAC: list[tuple[str, dict[str, Any]]] = [
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "kubelite:cluster-dns"},
        "rules": [{"apiGroups": [""], "resources": ["services", "endpoints"],
                   "verbs": ["list", "watch"]},
                  {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                   "verbs": ["list", "watch"]}]}),
    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubelite:cluster-dns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kubelite:cluster-dns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "system:kube-dns"}]}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "kubelite:cluster-dns", "namespace": "kube-system"},
        "rules": [{"apiGroups": [""], "resources": ["services"],
                   "verbs": ["get", "create", "update"]},
                  {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                   "verbs": ["get", "create", "update"]}]}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "kubelite:cluster-dns", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "kubelite:cluster-dns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "system:kube-dns"}]}),
]


def grant_kube_dns(apiserver: ApiServer) -> None:
    with apiserver.sync_client() as client:
        for path, obj in KUBE_DNS_RBAC:
            answer = client.post(path, json=obj)
            assert answer.status_code in (201, 409), answer.text


class ClusterDnsProcess:
    """The watcher and its dnsmasq on Docker's bridge gateway, a free port (tests share
    the machine: never 53), a state dir dnsmasq's unprivileged user can read. As the
    cluster admin, or (`as_kube_dns`) as make up runs it: kube-dns.conf's system:kube-dns."""

    def __init__(self, apiserver: ApiServer, workdir: Path, *, name: str = "cluster-dns",
                 cluster_ip: str = "", domain: str = "cluster.local",
                 extra_args: tuple[str, ...] = (), as_kube_dns: bool = False) -> None:
        self.address = bridge_gateway()
        self.port = free_port()
        self.health_port = free_port()
        self.domain = domain
        # pytest's tmp dirs are root-only; dnsmasq reads its files as nobody
        self.state_dir = tempfile.mkdtemp(prefix="kubelite-dns-")
        kubeconfig = apiserver.admin_kubeconfig
        if as_kube_dns:
            grant_kube_dns(apiserver)
            kubeconfig = apiserver.kubeconfig(workdir / f"{name}.kubeconfig", cert="kube-dns",
                                              user="system:kube-dns", namespace=None)
        self.process = Process(name, [
            PYTHON, "-m", "cluster_dns", "--kubeconfig", str(kubeconfig),
            "--cluster-domain", domain, "--listen", f"{self.address}:{self.port}",
            "--cluster-ip", cluster_ip, "--state-dir", self.state_dir,
            "--port", str(self.health_port), "--log-level", "info", *extra_args,
        ], workdir / f"{name}.log")

    def start(self) -> ClusterDnsProcess:
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    async def query(self, name: str, rdtype: str = "A", *, tcp: bool = False) -> dns.message.Message:
        request = dns.message.make_query(name, rdtype)
        if tcp:
            return await dns.asyncquery.tcp(request, self.address, port=self.port, timeout=3)
        return await dns.asyncquery.udp(request, self.address, port=self.port, timeout=3)

    async def answer(self, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
        """(rcode, the answer's records as text, sorted)."""
        reply = await self.query(name, rdtype)
        found = [rdata.to_text() for rrset in reply.answer for rdata in rrset]
        return dns.rcode.to_text(reply.rcode()), sorted(found)

    async def wait_answer(self, name: str, expected: tuple[str, list[str]], *,
                          rdtype: str = "A", timeout: float = 15) -> None:
        async def matches() -> bool:
            assert self.process.alive(), self.process.log()[-3000:]
            try:
                return await self.answer(name, rdtype) == expected
            except (dns.exception.Timeout, OSError):
                return False
        await eventually(matches, timeout=timeout)

    async def wait_ready(self, timeout: float = 30) -> None:
        await self.wait_answer(f"absent.{self.domain}", ("NXDOMAIN", []), timeout=timeout)


def service_manifest(name: str, *, ports: list[dict[str, Any]] | None = None,
                     **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": ports if ports is not None
                     else [{"name": "http", "port": 80, "protocol": "TCP"}], **spec}}
