"""Pods' resolv.conf on a real kubelet and real Docker: ClusterFirst with --cluster-dns
and --cluster-domain (every container of the pod reads the sandbox's file), None with a
dnsConfig, the fallback to Default with MissingClusterDNS without --cluster-dns; and a
pod on Docker's bridge querying the cluster DNS's dnsmasq on the bridge gateway."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dns_support import ClusterDnsProcess, service_manifest
from tests.docker_support import KubeletProcess, ensure_docker, remove_node_containers
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import create_pod, delete_pod, get_pod, pod_manifest, shell, wait_events

HOST_RESOLV_CONF = "nameserver 10.0.0.2\nsearch corp.example\noptions rotate\n"
CLUSTER_DNS = "10.96.0.10"


def resolver_lines(text: str) -> list[str]:
    """resolv.conf's lines without Docker's comments."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def host_resolv_conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("resolv")) / "resolv.conf"
    path.write_text(HOST_RESOLV_CONF)
    return path


@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, host_resolv_conf: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeletProcess]:
    ensure_docker()
    node = unique("dns")
    process = KubeletProcess(apiserver, Path(tmp_path_factory.mktemp("kubelet-dns")),
                             node_name=node, extra_args=[
                                 "--cluster-dns", CLUSTER_DNS, "--cluster-domain",
                                 "cluster.local", "--resolv-conf", str(host_resolv_conf)]
                             ).start()
    yield process
    process.stop()
    remove_node_containers(node)


async def logs_of_finished_pod(http: httpx.AsyncClient, kubectl: Kubectl,
                               manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Run a Never pod to completion; each container's log lines."""
    name = manifest["metadata"]["name"]
    await create_pod(http, manifest)

    async def succeeded() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        assert pod["status"].get("phase") != "Failed", pod["status"]
        return pod if pod["status"].get("phase") == "Succeeded" else None
    await eventually(succeeded, timeout=90, what=f"{name} Succeeded")
    logs = {}
    for container in manifest["spec"]["containers"]:
        result = await asyncio.to_thread(kubectl.run, "logs", name, "-c", container["name"])
        logs[container["name"]] = result.stdout.splitlines()
    return logs


async def test_cluster_first_pods_get_the_cluster_nameserver_search_path_and_ndots(
        http: httpx.AsyncClient, apiserver: ApiServer, kubelet: KubeletProcess,
        tmp_path: Path) -> None:
    name = unique("clusterfirst")
    manifest = pod_manifest(name, kubelet.node_name, [
        shell("app", "cat /etc/resolv.conf"), shell("sidecar", "cat /etc/resolv.conf")],
        restart_policy="Never", grace=1)
    logs = await logs_of_finished_pod(http, Kubectl(apiserver, tmp_path / "kubectl"), manifest)
    expected = sorted([f"nameserver {CLUSTER_DNS}",
                       "search default.svc.cluster.local svc.cluster.local cluster.local "
                       "corp.example",
                       "options ndots:5"])
    # both containers read the one file of the sandbox whose network they joined
    assert sorted(resolver_lines("\n".join(logs["app"]))) == expected
    assert sorted(resolver_lines("\n".join(logs["sidecar"]))) == expected
    await delete_pod(http, name)


async def test_dns_policy_none_is_exactly_the_pods_dns_config(
        http: httpx.AsyncClient, apiserver: ApiServer, kubelet: KubeletProcess,
        tmp_path: Path) -> None:
    name = unique("dnsnone")
    manifest = pod_manifest(name, kubelet.node_name, [shell("app", "cat /etc/resolv.conf")],
                            restart_policy="Never", grace=1)
    manifest["spec"]["dnsPolicy"] = "None"
    manifest["spec"]["dnsConfig"] = {
        "nameservers": ["192.0.2.53"], "searches": ["my.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    logs = await logs_of_finished_pod(http, Kubectl(apiserver, tmp_path / "kubectl"), manifest)
    assert sorted(resolver_lines("\n".join(logs["app"]))) == [
        "nameserver 192.0.2.53", "options ndots:2 edns0", "search my.example"]
    await delete_pod(http, name)
    # a nameserver alone: no search line (Docker would otherwise copy its host's)
    bare = unique("dnsnone")
    manifest = pod_manifest(bare, kubelet.node_name, [shell("app", "cat /etc/resolv.conf")],
                            restart_policy="Never", grace=1)
    manifest["spec"]["dnsPolicy"] = "None"
    manifest["spec"]["dnsConfig"] = {"nameservers": ["192.0.2.53"]}
    logs = await logs_of_finished_pod(http, Kubectl(apiserver, tmp_path / "kubectl"), manifest)
    assert resolver_lines("\n".join(logs["app"])) == ["nameserver 192.0.2.53"]
    await delete_pod(http, bare)


async def test_without_cluster_dns_cluster_first_falls_back_to_default_with_an_event(
        http: httpx.AsyncClient, apiserver: ApiServer, host_resolv_conf: Path,
        tmp_path: Path) -> None:
    node = unique("nodns")
    kubelet = KubeletProcess(apiserver, tmp_path, node_name=node, extra_args=[
        "--resolv-conf", str(host_resolv_conf)]).start()
    try:
        name = unique("fallback")
        manifest = pod_manifest(name, node, [shell("app", "cat /etc/resolv.conf")],
                                restart_policy="Never", grace=1)
        logs = await logs_of_finished_pod(http, Kubectl(apiserver, tmp_path / "kubectl"),
                                          manifest)
        assert sorted(resolver_lines("\n".join(logs["app"]))) == sorted(
            resolver_lines(HOST_RESOLV_CONF))
        pod = await get_pod(http, name)
        events = await wait_events(http, pod, "MissingClusterDNS")
        [event] = [e for e in events if e["reason"] == "MissingClusterDNS"]
        assert event["type"] == "Warning"
        assert event["message"] == (
            f'pod: "{name}_default({pod["metadata"]["uid"]})". kubelet does not have '
            'ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. '
            'Falling back to "Default" policy.')
        await delete_pod(http, name)
    finally:
        kubelet.stop()
        remove_node_containers(node)


async def test_a_pod_on_the_bridge_reaches_the_cluster_dns(
        http: httpx.AsyncClient, apiserver: ApiServer, kubelet: KubeletProcess,
        tmp_path: Path) -> None:
    """Reachability: dnsmasq listens on the bridge gateway, where pods reach the host (the
    test's port is not 53, so the pod names the server; by its resolv.conf it goes through
    the kube-dns ClusterIP, which kube-proxy DNATs to this address)."""
    dns = ClusterDnsProcess(apiserver, tmp_path, name="cluster-dns-pods").start()
    try:
        await dns.wait_ready()
        service = unique("web")
        created = await http.post("/api/v1/namespaces/default/services",
                                  json=service_manifest(service, clusterIP="10.100.255.7"))
        assert created.status_code == 201, created.text
        fqdn = f"{service}.default.svc.cluster.local"
        await dns.wait_answer(fqdn, ("NOERROR", ["10.100.255.7"]))
        name = unique("lookup")
        server = f"{dns.address}:{dns.port}"
        manifest = pod_manifest(name, kubelet.node_name, [shell(
            "app", f"nslookup {fqdn} {server}; nslookup -type=srv _http._tcp.{fqdn} {server}; "
                   f"nslookup absent.default.svc.cluster.local {server}; true")],
            restart_policy="Never", grace=1)
        logs = await logs_of_finished_pod(http, Kubectl(apiserver, tmp_path / "kubectl"),
                                          manifest)
        text = "\n".join(logs["app"])
        assert "Address: 10.100.255.7" in text, text
        assert f"service = 0 100 80 {fqdn}" in text, text
        assert "can't find absent.default.svc.cluster.local: NXDOMAIN" in text, text
        await delete_pod(http, name)
        await http.delete(f"/api/v1/namespaces/default/services/{service}")
    finally:
        dns.stop()
