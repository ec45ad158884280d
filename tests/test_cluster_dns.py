"""Cluster DNS end to end: a real apiserver, `python -m cluster_dns` and its real dnsmasq,
queried straight on its port from the host. Services created, changed and deleted are
answered within a generous timeout (the watcher's budget is about a second)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.dns_support import ClusterDnsProcess, service_manifest
from tests.support import ApiServer, Kubectl, eventually, unique

DOMAIN = "cluster.local"


@pytest.fixture(scope="module")
def cluster_dns(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ClusterDnsProcess]:
    process = ClusterDnsProcess(apiserver, Path(tmp_path_factory.mktemp("cluster-dns"))).start()
    yield process
    process.stop()


@pytest.fixture
async def namespace(http: httpx.AsyncClient) -> AsyncIterator[str]:
    name = unique("dns")
    created = await http.post("/api/v1/namespaces", json={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert created.status_code == 201, created.text
    yield name
    await http.delete(f"/api/v1/namespaces/{name}")


async def create(http: httpx.AsyncClient, path: str, body: dict) -> dict:
    response = await http.post(path, json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_cluster_ip_service_resolves_and_goes_away_when_deleted(
        http: httpx.AsyncClient, cluster_dns: ClusterDnsProcess, namespace: str) -> None:
    await cluster_dns.wait_ready()
    fqdn = f"web.{namespace}.svc.{DOMAIN}"
    assert await cluster_dns.answer(fqdn) == ("NXDOMAIN", [])
    started = time.monotonic()
    service = await create(http, f"/api/v1/namespaces/{namespace}/services", service_manifest(
        "web", ports=[{"name": "http", "port": 80, "protocol": "TCP"},
                      {"name": "metrics", "port": 9100, "protocol": "TCP"}]))
    cluster_ip = service["spec"]["clusterIP"]  # allocated by the apiserver
    await cluster_dns.wait_answer(fqdn, ("NOERROR", [cluster_ip]))
    appeared = time.monotonic() - started
    # SRV per named port, pointing at the Service's name
    await cluster_dns.wait_answer(f"_http._tcp.{fqdn}", ("NOERROR", [f"0 100 80 {fqdn}."]),
                                  rdtype="SRV")
    assert await cluster_dns.answer(f"_metrics._tcp.{fqdn}", "SRV") == (
        "NOERROR", [f"0 100 9100 {fqdn}."])
    # the same answer over TCP; no AAAA for an IPv4 Service; the PTR of its ClusterIP
    reply = await cluster_dns.query(fqdn, tcp=True)
    assert [r.to_text() for rrset in reply.answer for r in rrset] == [cluster_ip]
    assert await cluster_dns.answer(fqdn, "AAAA") == ("NOERROR", [])
    reverse = ".".join(reversed(cluster_ip.split("."))) + ".in-addr.arpa"
    assert await cluster_dns.answer(reverse, "PTR") == ("NOERROR", [f"{fqdn}."])

    started = time.monotonic()
    deleted = await http.delete(f"/api/v1/namespaces/{namespace}/services/web")
    assert deleted.status_code == 200, deleted.text
    await cluster_dns.wait_answer(fqdn, ("NXDOMAIN", []))
    await cluster_dns.wait_answer(f"_http._tcp.{fqdn}", ("NXDOMAIN", []), rdtype="SRV")
    gone = time.monotonic() - started
    print(f"record appeared {appeared * 1000:.0f} ms after the create, "
          f"gone {gone * 1000:.0f} ms after the delete")


async def test_unknown_names_are_nxdomain_and_outside_names_refused(
        cluster_dns: ClusterDnsProcess) -> None:
    await cluster_dns.wait_ready()
    assert await cluster_dns.answer(f"nope.default.svc.{DOMAIN}") == ("NXDOMAIN", [])
    assert await cluster_dns.answer(f"nope.{DOMAIN}", "AAAA") == ("NXDOMAIN", [])
    # nothing outside the cluster domain is forwarded anywhere: REFUSED
    assert await cluster_dns.answer("example.com") == ("REFUSED", [])
    assert await cluster_dns.answer("kubernetes.io", "AAAA") == ("REFUSED", [])


async def test_its_health_and_metrics_endpoint(cluster_dns: ClusterDnsProcess) -> None:
    await cluster_dns.wait_ready()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{cluster_dns.health_port}") as web:
        ready = await web.get("/readyz", params={"verbose": "1"})
        assert ready.status_code == 200, ready.text
        assert "[+]informer-sync ok" in ready.text and "[+]dnsmasq ok" in ready.text
        assert (await web.get("/healthz")).text == "ok"
        metrics = (await web.get("/metrics")).text
        assert "# TYPE cluster_dns_services gauge" in metrics
        assert "cluster_dns_dnsmasq_crashes_total 0" in metrics


async def test_a_headless_service_resolves_to_its_ready_endpoints(
        http: httpx.AsyncClient, cluster_dns: ClusterDnsProcess, namespace: str) -> None:
    await cluster_dns.wait_ready()
    await create(http, f"/api/v1/namespaces/{namespace}/services", service_manifest(
        "db", clusterIP="None", ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}]))
    fqdn = f"db.{namespace}.svc.{DOMAIN}"
    slice_path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    endpoint_slice = await create(http, slice_path, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "db-1", "labels": {"kubernetes.io/service-name": "db",
                                                "endpointslice.kubernetes.io/managed-by":
                                                    "tests.kubelite.io"}},
        "addressType": "IPv4",
        "ports": [{"name": "pg", "port": 15432, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["172.31.0.5"], "hostname": "db-0", "conditions": {"ready": True}},
            {"addresses": ["172.31.0.6"], "conditions": {"ready": True}},
            {"addresses": ["172.31.0.7"], "hostname": "db-2", "conditions": {"ready": False}},
        ]})
    await cluster_dns.wait_answer(fqdn, ("NOERROR", ["172.31.0.5", "172.31.0.6"]))
    assert await cluster_dns.answer(f"db-0.{fqdn}") == ("NOERROR", ["172.31.0.5"])
    assert await cluster_dns.answer(f"172-31-0-6.{fqdn}") == ("NOERROR", ["172.31.0.6"])
    assert await cluster_dns.answer(f"db-2.{fqdn}") == ("NXDOMAIN", [])  # not ready
    assert await cluster_dns.answer(f"_pg._tcp.{fqdn}", "SRV") == (
        "NOERROR", [f"0 100 15432 172-31-0-6.{fqdn}.", f"0 100 15432 db-0.{fqdn}."])

    # db-0 turns unready, db-2 ready: the answers follow
    endpoint_slice["endpoints"][0]["conditions"]["ready"] = False
    endpoint_slice["endpoints"][2]["conditions"]["ready"] = True
    updated = await http.put(f"{slice_path}/db-1", json=endpoint_slice)
    assert updated.status_code == 200, updated.text
    await cluster_dns.wait_answer(fqdn, ("NOERROR", ["172.31.0.6", "172.31.0.7"]))
    assert await cluster_dns.answer(f"db-0.{fqdn}") == ("NXDOMAIN", [])
    assert await cluster_dns.answer(f"db-2.{fqdn}") == ("NOERROR", ["172.31.0.7"])

    # the slice gone: no addresses left, the name with them
    deleted = await http.delete(f"{slice_path}/db-1")
    assert deleted.status_code == 200, deleted.text
    await cluster_dns.wait_answer(fqdn, ("NXDOMAIN", []))


async def test_an_external_name_service_is_a_cname(
        http: httpx.AsyncClient, cluster_dns: ClusterDnsProcess, namespace: str) -> None:
    await cluster_dns.wait_ready()
    await create(http, f"/api/v1/namespaces/{namespace}/services", service_manifest(
        "ext", ports=[], type="ExternalName", externalName="db.example.com"))
    fqdn = f"ext.{namespace}.svc.{DOMAIN}"
    await cluster_dns.wait_answer(fqdn, ("NOERROR", ["db.example.com."]), rdtype="CNAME")
    # an A query gets the CNAME; its target is outside the cluster and not chased
    assert await cluster_dns.answer(fqdn) == ("NOERROR", ["db.example.com."])


async def test_it_keeps_the_kube_dns_service_and_its_endpoints_at_dnsmasq(
        apiserver: ApiServer, http: httpx.AsyncClient, tmp_path: Path) -> None:
    # as make up runs it: its own identity, system:kube-dns
    process = ClusterDnsProcess(apiserver, tmp_path, name="cluster-dns-kube-dns",
                                cluster_ip="10.96.0.10", as_kube_dns=True).start()
    service_path = "/api/v1/namespaces/kube-system/services/kube-dns"
    slice_path = "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-dnsmasq"
    try:
        await process.wait_ready()

        async def present(path: str) -> bool:
            assert process.process.alive(), process.process.log()[-3000:]
            return (await http.get(path)).status_code == 200
        await eventually(lambda: present(service_path))
        await eventually(lambda: present(slice_path))
        service = (await http.get(service_path)).json()
        assert service["metadata"]["labels"] == {
            "k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
            "kubernetes.io/name": "KubeDNS"}
        assert service["spec"]["clusterIP"] == "10.96.0.10"
        assert "selector" not in service["spec"]
        assert [(p["name"], p["port"], p["protocol"]) for p in service["spec"]["ports"]] == [
            ("dns", 53, "UDP"), ("dns-tcp", 53, "TCP")]
        endpoint_slice = (await http.get(slice_path)).json()
        assert endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"] == "kube-dns"
        assert endpoint_slice["metadata"]["labels"][
            "endpointslice.kubernetes.io/managed-by"] == "cluster-dns.kubelite.io"
        assert endpoint_slice["endpoints"][0]["addresses"] == [process.address]
        assert {(p["name"], p["port"]) for p in endpoint_slice["ports"]} == {
            ("dns", process.port), ("dns-tcp", process.port)}
        # its own name resolves, through itself
        await process.wait_answer(f"kube-dns.kube-system.svc.{DOMAIN}", ("NOERROR", ["10.96.0.10"]))

        # `kubectl cluster-info` lists it, as with kube-dns
        info = Kubectl(apiserver, tmp_path / "kubectl")("cluster-info")
        assert "KubeDNS is running at" in info
        assert "/api/v1/namespaces/kube-system/services/kube-dns:dns/proxy" in info

        # the slice deleted by someone: put back
        deleted = await http.delete(slice_path)
        assert deleted.status_code == 200, deleted.text
        await eventually(lambda: present(slice_path))
    finally:
        process.stop()
        await http.delete(slice_path)
        await http.delete(service_path)
