"""A whole cluster with Services for the end-to-end tests: etcd, the secure apiserver (a
service range of its own), the scheduler, the controller-manager, the cluster DNS, a
kubelet per node pointing pods at it, and a kube-proxy per node with chains of its own.

This machine's iptables and Docker bridge are shared with every other test and cluster:
each cluster gets a unique chain prefix per kube-proxy, a unique /24 for its cluster IPs
(the kube-dns Service's among them) and a DNS port that is not 53."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.cm_support import ControllerManagerProcess
from tests.dns_support import ClusterDnsProcess
from tests.docker_support import KubeletProcess, ensure_docker, remove_node_containers
from tests.proxy_support import KubeProxyProcess, unique_prefix, unique_service_net
from tests.support import ApiServer, Etcd, Kubectl, SchedulerProcess

CONTROLLERS = "endpointslice,replicaset,deployment,garbagecollector"
@dataclass
class ServicesCluster:
    apiserver: ApiServer
    kubectl: Kubectl
    nodes: list[str]
    proxies: list[KubeProxyProcess]
    dns: ClusterDnsProcess
    service_net: str  # "10.x.y": the cluster's cluster IPs are 10.x.y.0/24
    workdir: Path

    @property
    def dns_ip(self) -> str:
        return f"{self.service_net}.10"

    def client(self) -> httpx.AsyncClient:
        return self.apiserver.client()


def wait_nodes_ready(kubectl: Kubectl, nodes: list[str], timeout: float = 90) -> None:
    wanted = sorted(f"{node}=True" for node in nodes)
    deadline = time.monotonic() + timeout
    ready: list[str] = []
    while ready != wanted:  # a kubelet answers /healthz before it registers
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes not Ready after {timeout}s: {ready} (want {wanted})")
        time.sleep(0.5)
        ready = sorted(kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}"
                               "{.metadata.name}={.status.conditions[?(@.type=="
                               "\"Ready\")].status} {end}").split())


@contextmanager
def services_cluster(workdir: Path, nodes: list[str]) -> Iterator[ServicesCluster]:
    ensure_docker()
    net = unique_service_net()
    etcd = Etcd(workdir).start()
    started: list[Any] = []
    found: ServicesCluster | None = None
    try:
        apiserver = ApiServer(etcd, workdir, extra_args=[
            "--service-cluster-ip-range", f"{net}.0/24"]).start()
        started.append(apiserver)
        started.append(SchedulerProcess(apiserver, workdir, port=0).start())
        started.append(ControllerManagerProcess(apiserver, workdir, extra_args=(
            "--leader-elect=false", f"--controllers={CONTROLLERS}")).start())
        dns = ClusterDnsProcess(apiserver, workdir, cluster_ip=f"{net}.10").start()
        started.append(dns)
        proxies = [KubeProxyProcess(apiserver, workdir, node_name=node,
                                    prefix=unique_prefix()).start() for node in nodes]
        started += proxies
        for node in nodes:
            started.append(KubeletProcess(apiserver, workdir, node_name=node, extra_args=[
                "--cluster-dns", f"{net}.10", "--cluster-domain", "cluster.local"]).start())
        kubectl = Kubectl(apiserver, workdir / "kubectl")
        wait_nodes_ready(kubectl, nodes)
        found = ServicesCluster(apiserver, kubectl, nodes, proxies, dns, net, workdir)
        yield found
    finally:
        if found is not None:  # a test may have restarted a kube-proxy in its place
            started += [p for p in found.proxies if p not in started]
        for process in reversed(started):
            process.stop()
        for proxy in started:
            if isinstance(proxy, KubeProxyProcess):
                proxy.cleanup()
        etcd.stop()
        for node in nodes:
            remove_node_containers(node)


def nat_rules(prefix: str) -> list[str]:
    """`iptables -t nat -S`'s lines that name this kube-proxy's chains."""
    out = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [line for line in out.splitlines() if f"{prefix}-" in line]


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))
