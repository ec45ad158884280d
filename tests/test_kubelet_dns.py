"""The kubelet's pod DNS computation (kubelet/dns.py), as pkg/kubelet/network/dns's
tests: policies, dnsConfig merging, the resolver limits and their events, and the Docker
fields the sandbox gets."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet.dns import (
    DnsConfig,
    DnsSettings,
    docker_dns,
    fit_searches,
    merge_options,
    parse_resolv_conf,
    pod_dns,
    pod_dns_type,
)
from kubelet.docker.convert import sandbox_create_body

HOST = DnsConfig(servers=("10.0.0.2",), searches=("corp.example", "example"),
                 options=("rotate",))
CLUSTER = DnsSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local", host=HOST)


def pod(policy: str | None = None, *, host_network: bool = False,
        dns_config: dict[str, Any] | None = None, namespace: str = "team") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if policy is not None:
        spec["dnsPolicy"] = policy
    if host_network:
        spec["hostNetwork"] = True
    if dns_config is not None:
        spec["dnsConfig"] = dns_config
    return {"metadata": {"name": "web", "namespace": namespace, "uid": "u-1"}, "spec": spec}


def test_parse_resolv_conf_accumulates_nameservers_and_keeps_the_last_search_and_options():
    text = ("# a comment\nnameserver 10.0.0.2\nsearch old.example\noptions ndots:2\n"
            "nameserver  10.0.0.3 \nsearch a.example. b.example\noptions rotate timeout:1\n"
            "nameserver\n")
    assert parse_resolv_conf(text) == DnsConfig(servers=("10.0.0.2", "10.0.0.3"),
                                                searches=("a.example", "b.example"),
                                                options=("rotate", "timeout:1"))


@pytest.mark.parametrize(("policy", "host_network", "expected"), [
    (None, False, "cluster"),
    ("ClusterFirst", False, "cluster"),
    ("ClusterFirst", True, "host"),  # a hostNetwork pod falls back to Default
    ("ClusterFirstWithHostNet", True, "cluster"),
    ("ClusterFirstWithHostNet", False, "cluster"),
    ("Default", False, "host"),
    ("None", False, "none"),
])
def test_pod_dns_type(policy: str | None, host_network: bool, expected: str):
    assert pod_dns_type(pod(policy, host_network=host_network)) == expected


def test_cluster_first_uses_only_the_cluster_servers_the_cluster_search_path_and_ndots_5():
    result = pod_dns(pod("ClusterFirst"), CLUSTER)
    assert result.config == DnsConfig(
        servers=("10.96.0.10",),
        searches=("team.svc.cluster.local", "svc.cluster.local", "cluster.local",
                  "corp.example", "example"),
        options=("ndots:5",))
    assert result.warnings == ()


def test_cluster_first_without_a_cluster_domain_keeps_the_host_search_path():
    settings = DnsSettings(cluster_dns=("10.96.0.10",), host=HOST)
    assert pod_dns(pod(), settings).config.searches == HOST.searches


def test_cluster_first_search_path_omits_a_host_domain_it_already_has():
    host = DnsConfig(servers=("10.0.0.2",), searches=("cluster.local", "example"))
    settings = DnsSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local",
                           host=host)
    assert pod_dns(pod(), settings).config.searches == (
        "team.svc.cluster.local", "svc.cluster.local", "cluster.local", "example")


def test_cluster_first_without_cluster_dns_falls_back_to_default_with_kubes_events():
    settings = DnsSettings(cluster_domain="cluster.local", host=HOST)
    result = pod_dns(pod("ClusterFirst"), settings)
    assert result.config == HOST
    message = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
               '"ClusterFirst" policy. Falling back to "Default" policy.')
    assert [(w.reason, w.message, w.node) for w in result.warnings] == [
        ("MissingClusterDNS", message, True),
        ("MissingClusterDNS", f'pod: "web_team(u-1)". {message}', False),
    ]


def test_default_uses_the_hosts_resolv_conf():
    assert pod_dns(pod("Default"), CLUSTER).config == HOST


def test_default_without_a_resolv_conf_turns_lookups_off_as_kube_does():
    settings = DnsSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local",
                           resolver_config="")
    assert pod_dns(pod("Default"), settings).config == DnsConfig(servers=("127.0.0.1",),
                                                                  searches=(".",))


def test_host_network_cluster_first_with_host_net_gets_the_cluster_dns():
    result = pod_dns(pod("ClusterFirstWithHostNet", host_network=True), CLUSTER)
    assert result.config.servers == ("10.96.0.10",)
    assert result.config.searches[0] == "team.svc.cluster.local"


def test_none_is_exactly_the_pods_dns_config():
    config = {"nameservers": ["1.2.3.4"], "searches": ["my.example"],
              "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    assert pod_dns(pod("None", dns_config=config), CLUSTER).config == DnsConfig(
        servers=("1.2.3.4",), searches=("my.example",), options=("ndots:2", "edns0"))


def test_dns_config_is_appended_without_duplicates_and_its_options_override():
    config = {"nameservers": ["10.96.0.10", "1.2.3.4"],
              "searches": ["svc.cluster.local", "extra.example"],
              "options": [{"name": "ndots", "value": "2"}, {"name": "single-request"}]}
    result = pod_dns(pod("ClusterFirst", dns_config=config), CLUSTER)
    assert result.config == DnsConfig(
        servers=("10.96.0.10", "1.2.3.4"),
        searches=("team.svc.cluster.local", "svc.cluster.local", "cluster.local",
                  "corp.example", "example", "extra.example"),
        options=("ndots:2", "single-request"))


def test_merge_options_keeps_valueless_options_and_lets_the_pod_win():
    assert merge_options(["ndots:5", "rotate"], [{"name": "ndots", "value": "1"},
                                                 {"name": "attempts", "value": "3"}]) == (
        "ndots:1", "rotate", "attempts:3")


def test_more_than_three_nameservers_are_cut_with_a_dns_config_forming_event():
    config = {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3"]}
    result = pod_dns(pod("ClusterFirst", dns_config=config), CLUSTER)
    assert result.config.servers == ("10.96.0.10", "1.1.1.1", "2.2.2.2")
    assert [(w.reason, w.message) for w in result.warnings] == [
        ("DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been "
                             "omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 "
                             "2.2.2.2")]


def test_search_paths_beyond_32_are_cut_with_a_dns_config_forming_event():
    config = {"searches": [f"d{i}.example" for i in range(40)]}
    result = pod_dns(pod("ClusterFirst", dns_config=config), CLUSTER)
    assert len(result.config.searches) == 32
    assert result.config.searches[-1] == "d26.example"  # 5 cluster+host paths, then 27
    assert [w.reason for w in result.warnings] == ["DNSConfigForming"]
    assert result.warnings[0].message == (
        "Search Line limits were exceeded, some search paths have been omitted, the "
        f"applied search line is: {' '.join(result.config.searches)}")


def test_fit_searches_drops_overlong_paths_and_cuts_the_line_from_its_end():
    long_path = "a" * 254
    assert fit_searches(["ok.example", long_path, "b.example"]) == (
        ("ok.example", "b.example"), True)
    many = [f"{i:02d}" + "x" * 198 for i in range(11)]  # 11 x 200 chars: 2210 with spaces
    kept, exceeded = fit_searches(many)
    assert exceeded and kept == tuple(many[:10])  # 10 x 200 + 9 spaces = 2009 <= 2048
    assert fit_searches(["a.example"]) == (("a.example",), False)


def test_the_sandbox_gets_the_config_as_dockers_dns_fields():
    config = DnsConfig(servers=("10.96.0.10",), searches=("team.svc.cluster.local",),
                       options=("ndots:5",))
    assert docker_dns(config) == {"Dns": ["10.96.0.10"],
                                  "DnsSearch": ["team.svc.cluster.local"],
                                  "DnsOptions": ["ndots:5"]}
    body = sandbox_create_body(pod(), node_name="n1", image="pause", attempt=0,
                               node_ip="127.0.0.1", dns=config)
    assert body["HostConfig"]["Dns"] == ["10.96.0.10"]
    assert body["HostConfig"]["DnsOptions"] == ["ndots:5"]
    # no search path at all: Docker's "." (else it would copy its own host's)
    assert docker_dns(DnsConfig(servers=("192.0.2.53",)))["DnsSearch"] == ["."]
    plain = sandbox_create_body(pod(), node_name="n1", image="pause", attempt=0,
                                node_ip="127.0.0.1")
    assert "Dns" not in plain["HostConfig"]
