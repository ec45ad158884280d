"""Cluster DNS the way pods use it: a kubelet with --cluster-dns at the kube-dns Service's
ClusterIP, kube-proxy DNATing that ClusterIP's port 53 to dnsmasq on the bridge gateway
(the EndpointSlice the watcher keeps), and a pod resolving a Service by its short name
through its resolv.conf's search path."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dns_support import ClusterDnsProcess, service_manifest
from tests.docker_support import KubeletProcess, ensure_docker, remove_node_containers
from tests.proxy_support import KubeProxyProcess, unique_prefix
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import create_pod, delete_pod, get_pod, pod_manifest, shell


def unique_cluster_ip() -> str:
    """In the apiserver's 10.96.0.0/12, and not 10.96.0.10: kube-proxies of other clusters
    on this host (make up's, other test sessions') DNAT that one to their own DNS."""
    return f"10.{random.randrange(100, 112)}.{random.randrange(0, 256)}.{random.randrange(1, 255)}"


@pytest.fixture(scope="module")
def dns_ip() -> str:
    return unique_cluster_ip()


@pytest.fixture(scope="module")
def cluster(apiserver: ApiServer, dns_ip: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ClusterDnsProcess, KubeletProcess]]:
    ensure_docker()
    workdir = Path(tmp_path_factory.mktemp("dns-e2e"))
    node = unique("dnse2e")
    started: list[ClusterDnsProcess | KubeletProcess | KubeProxyProcess] = []
    proxy: KubeProxyProcess | None = None
    try:
        dns = ClusterDnsProcess(apiserver, workdir, name="cluster-dns-e2e",
                                cluster_ip=dns_ip).start()
        started.append(dns)
        proxy = KubeProxyProcess(apiserver, workdir, node_name=node,
                                 prefix=unique_prefix()).start()
        started.append(proxy)
        kubelet = KubeletProcess(apiserver, workdir, node_name=node, extra_args=[
            "--cluster-dns", dns_ip, "--cluster-domain", "cluster.local"]).start()
        started.append(kubelet)
        yield dns, kubelet
    finally:
        for process in reversed(started):
            process.stop()
        if proxy is not None:
            proxy.cleanup()
        remove_node_containers(node)
        with httpx.Client(base_url=apiserver.url, verify=apiserver.ssl_context()) as http:
            http.delete("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/"
                        "kube-dns-dnsmasq")
            http.delete("/api/v1/namespaces/kube-system/services/kube-dns")


async def test_a_pod_resolves_a_service_by_its_short_name_through_the_kube_dns_cluster_ip(
        http: httpx.AsyncClient, apiserver: ApiServer, dns_ip: str,
        cluster: tuple[ClusterDnsProcess, KubeletProcess], tmp_path: Path) -> None:
    dns, kubelet = cluster
    await dns.wait_ready()
    service = unique("web")
    service_ip = unique_cluster_ip()
    created = await http.post("/api/v1/namespaces/default/services",
                              json=service_manifest(service, clusterIP=service_ip))
    assert created.status_code == 201, created.text
    await dns.wait_answer(f"{service}.default.svc.cluster.local", ("NOERROR", [service_ip]))

    name = unique("resolver")
    # Retried: kube-proxy writes the kube-dns rules within its sync period of the Service.
    script = (f"for i in $(seq 1 60); do "
              f"nslookup {service}.default.svc.cluster.local > /tmp/out 2>&1 && break; "
              f"sleep 0.5; done; cat /etc/resolv.conf; cat /tmp/out; ping -c 1 -W 1 {service}; "
              f"true")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [shell("app", script)],
                                        restart_policy="Never", grace=1))

    async def succeeded() -> bool:
        pod = await get_pod(http, name)
        return pod["status"].get("phase") == "Succeeded"
    await eventually(succeeded, timeout=90, what=f"{name} Succeeded")
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    text = (await asyncio.to_thread(kubectl.run, "logs", name)).stdout
    print(text)
    assert f"nameserver {dns_ip}" in text, text
    assert f"Server:\t\t{dns_ip}" in text, text  # the answer came through the ClusterIP
    assert f"Address: {service_ip}" in text, text
    # the short name, through the search path (ping prints what it resolved)
    assert f"PING {service} ({service_ip})" in text, text
    await delete_pod(http, name)
    await http.delete(f"/api/v1/namespaces/default/services/{service}")
