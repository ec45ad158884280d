"""Record generation of the cluster DNS (cluster_dns/records.py), as tables of Services
and EndpointSlices -> records, after the kubernetes/dns specification."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from cluster_dns import records
from cluster_dns.__main__ import listen_address
from cluster_dns.dnsmasq import DnsmasqConfig, dnsmasq_args
from cluster_dns.records import Options, ServiceRecords, Srv

OPTIONS = Options(domain="cluster.local")


def service(name: str, *, namespace: str = "team", cluster_ip: str | None = "10.96.0.20",
            ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": ports or [], **spec}
    if cluster_ip is not None:
        body["clusterIP"] = cluster_ip
        body.setdefault("clusterIPs", [cluster_ip] if cluster_ip != "None" else ["None"])
    return {"metadata": {"name": name, "namespace": namespace}, "spec": body}


def endpoint_slice(service_name: str, endpoints: list[dict[str, Any]], *,
                   ports: list[dict[str, Any]] | None = None, name: str = "s1",
                   address_type: str = "IPv4") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team",
                         "labels": {records.SERVICE_NAME_LABEL: service_name}},
            "addressType": address_type, "endpoints": endpoints, "ports": ports or []}


def test_cluster_ip_service_gets_an_a_record_and_srv_per_named_port():
    svc = service("web", ports=[{"name": "http", "port": 80, "protocol": "TCP"},
                                {"port": 8080, "protocol": "TCP"},  # unnamed: no SRV
                                {"name": "dns", "port": 53, "protocol": "UDP"}])
    assert records.service_records(svc, [], OPTIONS) == ServiceRecords(
        hosts=(("10.96.0.20", "web.team.svc.cluster.local"),),
        srvs=(Srv("_dns._udp.web.team.svc.cluster.local", "web.team.svc.cluster.local", 53),
              Srv("_http._tcp.web.team.svc.cluster.local", "web.team.svc.cluster.local", 80)))


def test_dual_stack_cluster_ips_give_a_and_aaaa():
    svc = service("web", clusterIPs=["10.96.0.20", "fd00::20"])
    assert records.service_records(svc, [], OPTIONS).hosts == (
        ("10.96.0.20", "web.team.svc.cluster.local"), ("fd00::20", "web.team.svc.cluster.local"))


def test_a_cluster_ip_service_ignores_its_endpoints():
    ready = endpoint_slice("web", [{"addresses": ["172.17.0.5"]}])
    assert records.service_records(service("web"), [ready], OPTIONS).hosts == (
        ("10.96.0.20", "web.team.svc.cluster.local"),)


def test_headless_service_resolves_to_ready_endpoints_with_their_hostnames():
    svc = service("db", cluster_ip="None",
                  ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}])
    slices = [endpoint_slice("db", [
        {"addresses": ["172.17.0.5"], "hostname": "db-0", "conditions": {"ready": True}},
        {"addresses": ["172.17.0.6"], "conditions": {}},  # ready unset counts as ready
        {"addresses": ["172.17.0.7"], "hostname": "db-2", "conditions": {"ready": False}},
    ], ports=[{"name": "pg", "port": 15432, "protocol": "TCP"}])]
    got = records.service_records(svc, slices, OPTIONS)
    assert got.hosts == (
        ("172.17.0.5", "db-0.db.team.svc.cluster.local"),
        ("172.17.0.6", "172-17-0-6.db.team.svc.cluster.local"),
        ("172.17.0.5", "db.team.svc.cluster.local"),
        ("172.17.0.6", "db.team.svc.cluster.local"),
    )
    # SRV targets are the endpoints' own names, with the endpoint's port.
    assert got.srvs == (
        Srv("_pg._tcp.db.team.svc.cluster.local", "172-17-0-6.db.team.svc.cluster.local", 15432),
        Srv("_pg._tcp.db.team.svc.cluster.local", "db-0.db.team.svc.cluster.local", 15432))


def test_headless_publish_not_ready_addresses_includes_every_endpoint():
    svc = service("db", cluster_ip="None", publishNotReadyAddresses=True)
    slices = [endpoint_slice("db", [{"addresses": ["172.17.0.7"], "hostname": "db-2",
                                     "conditions": {"ready": False}}])]
    assert ("172.17.0.7", "db.team.svc.cluster.local") in records.service_records(
        svc, slices, OPTIONS).hosts


def test_headless_with_endpoints_in_several_slices_and_no_endpoints():
    svc = service("db", cluster_ip="None")
    slices = [endpoint_slice("db", [{"addresses": ["172.17.0.5"]}], name="a"),
              endpoint_slice("db", [{"addresses": ["172.17.0.9"]}], name="b"),
              endpoint_slice("db", [{"addresses": ["db.example"]}], name="c",
                             address_type="FQDN")]
    hosts = records.service_records(svc, slices, OPTIONS).hosts
    assert [a for a, n in hosts if n == "db.team.svc.cluster.local"] == ["172.17.0.5",
                                                                         "172.17.0.9"]
    assert records.service_records(svc, [], OPTIONS) == ServiceRecords()


def test_external_name_is_a_cname():
    svc = service("ext", cluster_ip=None, type="ExternalName",
                  externalName="db.example.com.")
    assert records.service_records(svc, [], OPTIONS) == ServiceRecords(
        cnames=(("ext.team.svc.cluster.local", "db.example.com"),))


def test_a_service_without_a_cluster_ip_yet_has_no_records():
    assert records.service_records(service("web", cluster_ip=None), [], OPTIONS) == \
        ServiceRecords()


def test_the_cluster_domain_is_an_option():
    svc = service("web")
    got = records.service_records(svc, [], Options(domain="corp.internal"))
    assert got.hosts == (("10.96.0.20", "web.team.svc.corp.internal"),)


def test_hosts_and_config_texts():
    web = records.service_records(
        service("web", ports=[{"name": "http", "port": 80, "protocol": "TCP"}]), [], OPTIONS)
    ext = records.service_records(service("ext", cluster_ip=None, type="ExternalName",
                                          externalName="db.example.com"), [], OPTIONS)
    assert records.hosts_text(web) == "10.96.0.20 web.team.svc.cluster.local\n"
    assert records.config_text([web, ext]) == (
        "cname=ext.team.svc.cluster.local,db.example.com\n"
        "srv-host=_http._tcp.web.team.svc.cluster.local,web.team.svc.cluster.local,80,0,100\n")
    assert records.config_text([ext, web]) == records.config_text([web, ext])  # stable
    assert records.hosts_file_name("team/web") == "team_web"


def test_slice_service_key():
    assert records.slice_service_key(endpoint_slice("web", [])) == "team/web"
    assert records.slice_service_key({"metadata": {"name": "x", "namespace": "team"}}) is None


def test_kube_dns_service_and_endpoint_slice():
    svc = records.kube_dns_service("10.96.0.10")
    assert svc["metadata"]["labels"] == {"k8s-app": "kube-dns",
                                         "kubernetes.io/cluster-service": "true",
                                         "kubernetes.io/name": "KubeDNS"}
    assert "selector" not in svc["spec"]
    assert [(p["name"], p["port"], p["protocol"]) for p in svc["spec"]["ports"]] == [
        ("dns", 53, "UDP"), ("dns-tcp", 53, "TCP")]
    eps = records.kube_dns_endpoint_slice("172.17.0.1", 10053)
    assert eps["metadata"]["labels"][records.SERVICE_NAME_LABEL] == "kube-dns"
    assert eps["metadata"]["labels"][records.MANAGED_BY_LABEL] == "cluster-dns.kubelite.io"
    assert eps["addressType"] == "IPv4"
    assert eps["endpoints"][0]["addresses"] == ["172.17.0.1"]
    assert [(p["name"], p["port"], p["protocol"]) for p in eps["ports"]] == [
        ("dns", 10053, "UDP"), ("dns-tcp", 10053, "TCP")]


def test_differs_ignores_what_the_server_adds():
    desired = records.kube_dns_service("10.96.0.10")
    actual = {**desired, "metadata": {**desired["metadata"], "uid": "u", "resourceVersion": "7"},
              "spec": {**desired["spec"], "type": "ClusterIP", "clusterIPs": ["10.96.0.10"],
                       "ports": [{**p, "targetPort": 53} for p in desired["spec"]["ports"]]}}
    assert not records.differs(desired, actual)
    changed = {**actual, "spec": {**actual["spec"], "ports": actual["spec"]["ports"][:1]}}
    assert records.differs(desired, changed)


def test_a_name_that_is_no_dns_name_never_reaches_dnsmasqs_config():
    # e.g. an ExternalName smuggling in an upstream server
    svc = service("ext", cluster_ip=None, type="ExternalName",
                  externalName="db.example.com\nserver=192.0.2.1")
    assert records.service_records(svc, [], OPTIONS) == ServiceRecords()
    headless = service("db", cluster_ip="None")
    slices = [endpoint_slice("db", [{"addresses": ["172.17.0.5"], "hostname": "a,b"},
                                    {"addresses": ["172.17.0.6"], "hostname": "ok"}])]
    hosts = records.service_records(headless, slices, OPTIONS).hosts
    assert [n for _, n in hosts] == ["ok.db.team.svc.cluster.local",
                                     "db.team.svc.cluster.local", "db.team.svc.cluster.local"]


def test_listen_flag():
    assert listen_address("172.17.0.1:53") == ("172.17.0.1", 53)
    assert listen_address("172.17.0.1") == ("172.17.0.1", 53)
    assert listen_address("[fd00::1]:5353") == ("fd00::1", 5353)
    assert listen_address("fd00::1") == ("fd00::1", 53)
    assert listen_address(":10053") == ("", 10053)  # the bridge gateway, another port
    with pytest.raises(argparse.ArgumentTypeError, match="not an IP address"):
        listen_address("dns.example:53")
    with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
        listen_address("172.17.0.1:70000")


def test_dnsmasq_is_bound_to_its_address_with_no_upstream_and_the_zone_local():
    args = dnsmasq_args(DnsmasqConfig(listen_address="172.17.0.1", port=53,
                                      domain="cluster.local", hosts_dir="/s/hosts",
                                      conf_file="/s/records.conf"))
    assert args[0] == "/usr/sbin/dnsmasq"
    for flag in ("--keep-in-foreground", "--no-resolv", "--no-hosts", "--bind-interfaces",
                 "--listen-address=172.17.0.1", "--port=53", "--local=/cluster.local/",
                 "--hostsdir=/s/hosts", "--conf-file=/s/records.conf"):
        assert flag in args
    assert not any(a.startswith(("--server", "--resolv-file")) for a in args)
