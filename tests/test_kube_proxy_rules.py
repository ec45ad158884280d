"""Pure table tests of kube-proxy's rule generation (kube's proxier_test.go, in Python):
Services + EndpointSlices -> the rules, compared line by line. Expected hashed names are
kube's own test vectors (ns1/svc1:p80 -> KUBE-SVC-XPGD46QRK7WJZT7O, ...)."""

from __future__ import annotations

from textwrap import dedent
from typing import Any

import pytest

from kube_proxy.conntrack import stale_entries
from kube_proxy.model import (
    Endpoint,
    ServicePortName,
    endpoints_map,
    service_ports,
)
from kube_proxy.rules import (
    Config,
    Existing,
    Names,
    build_tables,
    cleanup_text,
    endpoint_hash,
    parse_save,
    port_proto_hash,
    prefix_errors,
    probability,
    restore_text,
)

FIXED = {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
         "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-FIREWALL"}
NODEPORTS_LAST = ('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: '
                  'this must be the last rule in this chain" -m addrtype --dst-type LOCAL '
                  '-j KUBE-NODEPORTS')


def service(ns: str, name: str, cluster_ip: str, ports: list[dict[str, Any]],
            **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": cluster_ip, "ports": ports, **spec}}


def endpoint_slice(ns: str, service_name: str, ports: list[dict[str, Any]],
                   endpoints: list[dict[str, Any]], suffix: str = "abc") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": f"{service_name}-{suffix}",
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "ports": ports, "endpoints": endpoints}


def p80(**extra: Any) -> dict[str, Any]:
    return {"name": "p80", "port": 80, "protocol": "TCP", **extra}


def ep(ip: str, **conditions: Any) -> dict[str, Any]:
    return {"addresses": [ip], "conditions": conditions}


def rules_of(services: list[dict[str, Any]], slices: list[dict[str, Any]],
             config: Config | None = None) -> list[str]:
    """Every rule, as `-A CHAIN ...` lines, in the order written (kube's tests sort;
    our order is deterministic, so compare it as it is)."""
    config = config or Config()
    tables = build_tables([p for s in services for p in service_ports(s)],
                          endpoints_map(slices), config)
    lines = []
    for table in ("filter", "nat"):
        lines.append(f"*{table}")
        for chain, rules in tables[table].items():
            lines += [f"-A {chain} {rule}" for rule in rules]
    return lines


def service_lines(lines: list[str]) -> list[str]:
    """The lines a test is about: without the fixed chains' constant rules."""
    constant = ("-A KUBE-POSTROUTING", "-A KUBE-MARK-MASQ", "-A KUBE-FORWARD",
                "-A KUBE-FIREWALL")
    return [line for line in lines if not line.startswith(constant) and line != NODEPORTS_LAST]


def expected(text: str) -> list[str]:
    return [line for line in dedent(text).strip().splitlines() if line]


def test_hashes_are_kubes():
    name = ServicePortName("ns1", "svc1", "p80", "TCP")
    assert port_proto_hash(name) == "XPGD46QRK7WJZT7O"
    assert endpoint_hash(name, "10.180.0.1:80") == "SXIVWICOYRO3J4NJ"
    assert endpoint_hash(name, "10.180.0.2:80") == "LXVODXWDISEETFEF"
    assert port_proto_hash(ServicePortName("ns2", "svc2", "p80", "TCP")) == "GNZBNJ2PO5MGZ6GT"


def test_probabilities_follow_kubes_formula():
    assert [probability(n) for n in (4, 3, 2)] == ["0.2500000000", "0.3333333333",
                                                   "0.5000000000"]


CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], Config, str]] = [
    ("cluster IP, two endpoints, masquerade outside the cluster CIDR",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.2"), ep("10.180.0.1")])],
     Config(cluster_cidr="10.0.0.0/8"), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
     """),
    ("no cluster CIDR: no masquerade rule for cluster IPs (kube's no-op local detector)",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.1")])],
     Config(), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
     """),
    ("masquerade-all",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.1")])],
     Config(masquerade_all=True), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
     """),
    ("no endpoints: the filter table rejects, the nat table has nothing",
     [service("ns6", "svc6", "172.30.0.46", [p80()])], [], Config(), """
     *filter
     -A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT
     *nat
     """),
    ("NodePort: KUBE-NODEPORTS -> KUBE-EXT (masquerade) -> KUBE-SVC",
     [service("ns3", "svc3", "172.30.0.43", [p80(nodePort=3003)], type="NodePort")],
     [endpoint_slice("ns3", "svc3", [p80()], [ep("10.180.0.3")])], Config(), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
     -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp --dport 3003 -j KUBE-EXT-X27LE4BHSL4DOUIK
     -A KUBE-EXT-X27LE4BHSL4DOUIK -m comment --comment "masquerade traffic for ns3/svc3:p80 external destinations" -j KUBE-MARK-MASQ
     -A KUBE-EXT-X27LE4BHSL4DOUIK -j KUBE-SVC-X27LE4BHSL4DOUIK
     -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.180.0.3:80" -j KUBE-SEP-OYPFS5VJICHGATKP
     -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
     -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
     """),
    ("NodePort without endpoints: rejected on the cluster IP and on the node port",
     [service("ns3", "svc3", "172.30.0.43", [p80(nodePort=3003)], type="NodePort")], [],
     Config(), """
     *filter
     -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j REJECT
     -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns3/svc3:p80 has no endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3003 -j REJECT
     *nat
     """),
    ("a nodePort on a ClusterIP service is not a node port",
     [service("ns3", "svc3", "172.30.0.43", [p80(nodePort=3003)])], [], Config(), """
     *filter
     -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j REJECT
     *nat
     """),
    ("ClientIP affinity: -m recent lookups first, --set in the endpoint chain",
     [service("ns1", "svc1", "172.30.0.41", [p80()], sessionAffinity="ClientIP",
              sessionAffinityConfig={"clientIP": {"timeoutSeconds": 300}})],
     [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.1"), ep("10.180.0.2")])],
     Config(), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m recent --name KUBE-SEP-SXIVWICOYRO3J4NJ --rcheck --seconds 300 --reap -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -m recent --name KUBE-SEP-LXVODXWDISEETFEF --rcheck --seconds 300 --reap -j KUBE-SEP-LXVODXWDISEETFEF
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m recent --name KUBE-SEP-SXIVWICOYRO3J4NJ --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m recent --name KUBE-SEP-LXVODXWDISEETFEF --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
     """),
    ("headless and ExternalName services are skipped",
     [service("ns1", "headless", "None", [p80()]),
      service("ns1", "ext", "", [p80()], type="ExternalName", externalName="example.com")],
     [endpoint_slice("ns1", "headless", [p80()], [ep("10.180.0.1")])], Config(), """
     *filter
     *nat
     """),
    ("terminating endpoints: unused while one is ready",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [
         ep("10.180.0.1"),
         ep("10.180.0.2", ready=False, serving=True, terminating=True)])], Config(), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
     -A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
     """),
    ("terminating endpoints: serving ones take the traffic when none is ready",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [
         ep("10.180.0.1", ready=False, serving=False, terminating=True),
         ep("10.180.0.2", ready=False, serving=True, terminating=True),
         ep("10.180.0.3", ready=False)])], Config(), """
     *filter
     *nat
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
     -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j KUBE-SEP-LXVODXWDISEETFEF
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
     -A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
     """),
    ("only not-ready endpoints: rejected as without endpoints",
     [service("ns1", "svc1", "172.30.0.41", [p80()])],
     [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.1", ready=False)])], Config(), """
     *filter
     -A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j REJECT
     *nat
     """),
]


@pytest.mark.parametrize(("services", "slices", "config", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rules(services: list[dict[str, Any]], slices: list[dict[str, Any]], config: Config,
               want: str) -> None:
    assert service_lines(rules_of(services, slices, config)) == expected(want)


def test_multi_port_and_named_ports_map_each_port_to_its_slice_port():
    svc = service("ns1", "web", "172.30.0.50", [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"},
        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}])
    # The controller resolved targetPort "web" to 8080 for this pod.
    slices = [endpoint_slice("ns1", "web", [{"name": "http", "port": 8080, "protocol": "TCP"},
                                            {"name": "dns", "port": 5353, "protocol": "UDP"}],
                             [ep("10.180.0.9")])]
    lines = service_lines(rules_of([svc], slices))
    http = ServicePortName("ns1", "web", "http", "TCP")
    dns = ServicePortName("ns1", "web", "dns", "UDP")
    names = Names()
    assert (f'-A KUBE-SERVICES -m comment --comment "ns1/web:http cluster IP" -m tcp -p tcp '
            f'-d 172.30.0.50 --dport 80 -j {names.service(http)}') in lines
    assert (f'-A KUBE-SERVICES -m comment --comment "ns1/web:dns cluster IP" -m udp -p udp '
            f'-d 172.30.0.50 --dport 53 -j {names.service(dns)}') in lines
    http_ep, dns_ep = Endpoint("10.180.0.9", 8080), Endpoint("10.180.0.9", 5353)
    assert (f"-A {names.endpoint(http, http_ep)} -m comment --comment ns1/web:http -m tcp "
            f"-p tcp -j DNAT --to-destination 10.180.0.9:8080") in lines
    assert (f"-A {names.endpoint(dns, dns_ep)} -m comment --comment ns1/web:dns -m udp "
            f"-p udp -j DNAT --to-destination 10.180.0.9:5353") in lines
    assert names.service(http) != names.service(dns)


def test_unnamed_port_comment_is_the_service_name():
    svc = service("default", "one", "172.30.0.60", [{"port": 8080, "protocol": "TCP"}])
    slices = [endpoint_slice("default", "one", [{"port": 80, "protocol": "TCP"}],
                             [ep("10.180.0.1")])]
    lines = rules_of([svc], slices)
    assert any('--comment "default/one cluster IP"' in line for line in lines)
    assert any("--comment default/one -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80"
               in line for line in lines)


def test_endpoints_merge_across_slices_and_sort_as_kube():
    slices = [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.10")], suffix="a"),
              endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.9"), ep("10.180.0.10")],
                             suffix="b")]
    got = endpoints_map(slices)[ServicePortName("ns1", "svc1", "p80", "TCP")]
    # Sorted by the "ip:port" string, as kube's byEndpoint: "10.180.0.10" < "10.180.0.9".
    assert [str(e) for e in got] == ["10.180.0.10:80", "10.180.0.9:80"]


def test_external_traffic_policy_local_keeps_only_this_nodes_endpoints_for_node_ports():
    svc = service("ns2", "svc2", "172.30.0.42", [p80(nodePort=3001)], type="NodePort",
                  externalTrafficPolicy="Local")
    slices = [endpoint_slice("ns2", "svc2", [p80()], [
        {"addresses": ["10.180.0.1"], "nodeName": "other"},
        {"addresses": ["10.180.0.2"], "nodeName": "node1"}])]
    lines = service_lines(rules_of([svc], slices, Config(hostname="node1")))
    name = ServicePortName("ns2", "svc2", "p80", "TCP")
    svl = Names().service_local(name)
    ext = Names().external(name)
    assert f"-A {ext} -j {svl}" in lines
    svl_rules = [line for line in lines if line.startswith(f"-A {svl} ")]
    assert svl_rules == [f'-A {svl} -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" '
                         f"-j {Names().endpoint(name, Endpoint('10.180.0.2', 80))}"]
    # No local endpoint: external traffic is dropped, cluster traffic still served.
    lines = service_lines(rules_of([svc], slices, Config(hostname="node9")))
    assert ('-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns2/svc2:p80 has no local '
            'endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j DROP') in lines
    assert not any(line.startswith(f"-A {svl} ") for line in lines)


def test_large_clusters_drop_per_endpoint_comments():
    svc = service("ns1", "big", "172.30.0.70", [p80()])
    slices = [endpoint_slice("ns1", "big", [p80()],
                             [ep(f"10.181.{i // 250}.{i % 250 + 1}") for i in range(1001)])]
    lines = [line for line in rules_of([svc], slices) if line.startswith("-A ")]
    sep_lines = [line for line in lines if "-SEP-" in line.split()[1]]
    assert sep_lines and not any("--comment" in line for line in sep_lines)
    svc_lines = [line for line in lines if "-SVC-" in line.split()[1]]
    assert len(svc_lines) == 1001 and not any("--comment" in line for line in svc_lines)


def test_unique_prefix_names_every_chain_and_jump():
    config = Config(names=Names("KT1"))
    svc = service("ns1", "svc1", "172.30.0.41", [p80(nodePort=3001)], type="NodePort")
    slices = [endpoint_slice("ns1", "svc1", [p80()], [ep("10.180.0.1")])]
    tables = build_tables(service_ports(svc), endpoints_map(slices), config)
    chains = [c for t in tables.values() for c in t]
    assert chains and all(c.startswith("KT1-") for c in chains)
    assert "KT1-SVC-XPGD46QRK7WJZT7O" in tables["nat"]
    text = restore_text(tables, config, existing=Existing())
    for line in text.splitlines():
        if line.startswith(("-A ", "-I ")):
            assert "KUBE-" not in line
        if line.startswith("-I "):
            assert "(KT1)" in line and line.split()[-1].startswith("KT1-")
    assert all(len(c) <= 28 for c in chains)


def test_prefix_validation():
    assert prefix_errors("KUBE") == [] and prefix_errors("K3F9A2Z") == []
    assert prefix_errors("TOOLONG1")  # "TOOLONG1-SVC-" + 16 > 28
    assert prefix_errors("kube") and prefix_errors("A--B") and prefix_errors("")


def test_ownership_does_not_extend_to_longer_prefixes():
    kube = Names("KUBE")
    assert kube.owns("KUBE-SVC-XPGD46QRK7WJZT7O") and kube.owns("KUBE-SERVICES")
    assert not kube.owns("KUBE-T1-SVC-XPGD46QRK7WJZT7O")
    assert not kube.owns("KUBE-T1-SERVICES")
    assert not kube.owns("KUBE-PROXY-CANARY") and not kube.owns("DOCKER")


SAVED_NAT = """\
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
:KT1-SERVICES - [0:0]
:KT1-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KT2-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals (KT1)" -j KT1-SERVICES
-A PREROUTING -m comment --comment "kubernetes service portals (KT1)" -j KT1-SERVICES
-A PREROUTING -m comment --comment "kubernetes service portals (KT2)" -j KT2-SERVICES
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT -m comment --comment "kubernetes service portals (KT1)" -j KT1-SERVICES
COMMIT
"""


def test_full_sync_deduplicates_jumps_deletes_stale_chains_and_leaves_others():
    config = Config(names=Names("KT1"), localhost_nodeports=False)
    chains, jumps = parse_save(SAVED_NAT, config.names, "nat")
    assert chains == {"KT1-SERVICES", "KT1-SVC-AAAAAAAAAAAAAAAA"}
    assert len(jumps) == 3
    tables = build_tables([], {}, config)
    text = restore_text(tables, config, existing=Existing(chains={"nat": chains},
                                                          jumps={"nat": jumps}))
    nat = text[text.index("*nat"):].splitlines()
    assert nat.count('-D PREROUTING -m comment --comment "kubernetes service portals (KT1)" '
                     '-j KT1-SERVICES') == 1
    assert "-X KT1-SVC-AAAAAAAAAAAAAAAA" in nat
    assert ":KT1-SVC-AAAAAAAAAAAAAAAA - [0:0]" in nat  # flushed before deletion
    assert not any("KT2" in line or "DOCKER" in line for line in nat)
    # OUTPUT and PREROUTING keep one jump each; POSTROUTING's is added.
    inserts = [line for line in nat if line.startswith("-I ")]
    assert inserts == ['-I POSTROUTING -m comment --comment "kubernetes postrouting rules '
                       '(KT1)" -j KT1-POSTROUTING']


def test_partial_sync_rewrites_only_changed_chains():
    config = Config()
    svcs = [service("ns1", f"svc{i}", f"172.30.0.{i}", [p80()]) for i in range(1, 4)]
    ports = [p for s in svcs for p in service_ports(s)]
    slices = [endpoint_slice("ns1", f"svc{i}", [p80()], [ep(f"10.180.0.{i}")])
              for i in range(1, 4)]
    before = build_tables(ports, endpoints_map(slices), config)
    assert restore_text(before, config, applied=before) == ""
    slices[1] = endpoint_slice("ns1", "svc2", [p80()], [ep("10.180.1.2")])
    after = build_tables(ports, endpoints_map(slices), config)
    text = restore_text(after, config, applied=before)
    svc2 = ServicePortName("ns1", "svc2", "p80", "TCP")
    names = Names()
    old_sep = names.endpoint(svc2, Endpoint("10.180.0.2", 80))
    new_sep = names.endpoint(svc2, Endpoint("10.180.1.2", 80))
    declared = [line[1:].split()[0] for line in text.splitlines() if line.startswith(":")]
    assert declared == [names.service(svc2), new_sep, old_sep]
    assert f"-X {old_sep}" in text
    assert "*filter" not in text and "KUBE-SERVICES" not in text
    assert "-I " not in text and "-D " not in text


def test_cleanup_removes_jumps_then_chains():
    names = Names("KT1")
    chains, jumps = parse_save(SAVED_NAT, names, "nat")
    text = cleanup_text(Existing(chains={"nat": chains}, jumps={"nat": jumps}))
    lines = text.splitlines()
    assert lines[0] == "*nat" and lines[-1] == "COMMIT"
    assert sum(line.startswith("-D ") for line in lines) == 3
    assert {line for line in lines if line.startswith("-X ")} == {
        "-X KT1-SERVICES", "-X KT1-SVC-AAAAAAAAAAAAAAAA"}
    assert "KT2" not in text and "DOCKER" not in text


def test_stale_udp_conntrack_entries():
    svc = service("ns1", "dns", "172.30.0.10", [{"name": "dns", "port": 53,
                                                 "protocol": "UDP", "nodePort": 30053}],
                  type="NodePort")
    ports = service_ports(svc)
    name = ServicePortName("ns1", "dns", "dns", "UDP")
    two = {name: (Endpoint("10.180.0.1", 53), Endpoint("10.180.0.2", 53))}
    one = {name: (Endpoint("10.180.0.1", 53),)}
    assert stale_entries(ports, two, ports, one) == [
        ["--orig-dst", "172.30.0.10", "--dst-nat", "10.180.0.2", "-p", "udp"],
        ["-p", "udp", "--dport", "30053", "--dst-nat", "10.180.0.2"]]
    # A service that just got endpoints: its cluster IP and node port entries go.
    assert stale_entries(ports, {}, ports, one) == [
        ["--orig-dst", "172.30.0.10", "-p", "udp"], ["-p", "udp", "--dport", "30053"]]
    assert stale_entries(ports, one, ports, one) == []
    # TCP services have no stale entries to clear: connections end on their own.
    tcp = service_ports(service("ns1", "web", "172.30.0.11", [p80()]))
    tcp_name = ServicePortName("ns1", "web", "p80", "TCP")
    assert stale_entries(tcp, {tcp_name: (Endpoint("10.180.0.1", 80),)}, tcp, {}) == []
    # A deleted UDP service: the entries to its endpoints go.
    assert stale_entries(ports, one, [], {}) == [
        ["--orig-dst", "172.30.0.10", "--dst-nat", "10.180.0.1", "-p", "udp"],
        ["-p", "udp", "--dport", "30053", "--dst-nat", "10.180.0.1"]]
