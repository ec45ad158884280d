"""The proxier against this host's real iptables (root) and real traffic: apply,
re-apply (idempotent, one jump each, also from a fresh process after kill -9), partial
updates, cleanup leaving exactly what was there; connections from the host to cluster
IPs and node ports reaching busybox httpd containers on docker0. Every test owns a
unique chain prefix and service range, and removes its chains even when it fails."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import AsyncIterator

import pytest

from kube_proxy import iptables
from kube_proxy.model import endpoints_map, service_ports
from kube_proxy.rules import Config, Names
from kube_proxy.syncer import Syncer, cleanup
from tests.proxy_support import (
    answers,
    endpoint_slice,
    http_get,
    httpd_containers,
    iptables_save,
    own_lines,
    service,
    stable_lines,
    unique_node_port,
    unique_prefix,
    unique_service_net,
)
from tests.support import eventually, unique

HTTP = {"name": "http", "port": 80, "protocol": "TCP"}


@pytest.fixture
async def config() -> AsyncIterator[Config]:
    config = Config(names=Names(unique_prefix()), hostname="node1")
    try:
        yield config
    finally:
        await cleanup(config)


def jump_lines(lines: list[str], prefix: str) -> list[str]:
    builtins = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")
    return [line for line in lines
            if line.startswith("-A ") and line.split()[1] in builtins and f"{prefix}-" in line]


def snapshot() -> dict[str, list[str]]:
    return {table: iptables_save(table) for table in ("filter", "nat")}


async def test_apply_reapply_restart_partial_update_and_cleanup(config: Config) -> None:
    prefix = config.names.prefix
    net = unique_service_net()
    before = snapshot()
    node_port = unique_node_port()
    services = [service("ns1", "web", f"{net}.10", [{**HTTP, "nodePort": node_port}],
                        type="NodePort"),
                service("ns1", "api", f"{net}.11", [HTTP]),
                service("ns1", "empty", f"{net}.12", [HTTP])]
    slices = [endpoint_slice("ns1", "web", [HTTP], ["10.199.0.1", "10.199.0.2"]),
              endpoint_slice("ns1", "api", [HTTP], ["10.199.0.3"])]
    ports = [p for s in services for p in service_ports(s)]
    syncer = Syncer(config)
    first = await syncer.sync(ports, endpoints_map(slices))
    assert first.full
    applied = snapshot()
    nat = own_lines(applied["nat"], prefix)
    assert f":{prefix}-SERVICES -" in nat
    assert any(f"-d {net}.10/32" in line and "--dport 80" in line for line in nat)
    assert any(f"--dport {node_port}" in line for line in nat)
    assert sum("DNAT" in line for line in nat) == 3
    assert any(f"-d {net}.12/32" in line and "REJECT" in line
               for line in own_lines(applied["filter"], prefix))
    jumps = {t: jump_lines(applied[t], prefix) for t in applied}
    assert len(jumps["nat"]) == 3 and len(jumps["filter"]) == 7
    assert all(f"({prefix})" in line for t in jumps for line in jumps[t])

    # Again, and from a fresh syncer as after kill -9: the same rules, no duplicate jump.
    assert (await syncer.sync(ports, endpoints_map(slices), full=True)).full
    restarted = Syncer(config)
    await restarted.sync(ports, endpoints_map(slices))
    again = snapshot()
    for table in ("filter", "nat"):
        assert own_lines(again[table], prefix) == own_lines(applied[table], prefix)

    # A partial sync: one endpoint replaced; only its chains are written.
    slices[0] = endpoint_slice("ns1", "web", [HTTP], ["10.199.0.1", "10.199.0.9"])
    partial = await restarted.sync(ports, endpoints_map(slices))
    assert not partial.full and partial.restore_bytes < first.restore_bytes / 2
    updated = own_lines(iptables_save("nat"), prefix)
    assert any("--to-destination 10.199.0.9:80" in line for line in updated)
    assert not any("10.199.0.2" in line for line in updated)
    assert len([line for line in updated if line.startswith(f":{prefix}-SEP-")]) == 3
    # Nothing changed: nothing written at all.
    assert (await restarted.sync(ports, endpoints_map(slices))).restore_bytes == 0

    # A deleted service: its chains go.
    await restarted.sync(ports[1:], endpoints_map(slices[1:]))
    assert not any(f"{net}.10" in line for line in own_lines(iptables_save("nat"), prefix))

    await cleanup(config)
    after = snapshot()
    for table in ("filter", "nat"):
        assert own_lines(after[table], prefix) == []
        kept_before, kept_after = stable_lines(before[table], after[table])
        assert kept_after == kept_before


async def test_full_sync_repairs_a_flushed_chain_and_duplicated_jumps(config: Config) -> None:
    prefix = config.names.prefix
    net = unique_service_net()
    ports = service_ports(service("ns1", "web", f"{net}.10", [HTTP]))
    slices = [endpoint_slice("ns1", "web", [HTTP], ["10.199.0.1"])]
    await Syncer(config).sync(ports, endpoints_map(slices))
    good = own_lines(iptables_save("nat"), prefix)
    # Someone flushes our KUBE-SERVICES and a crashed older run left a second jump.
    spec = f'-m comment --comment "kubernetes service portals ({prefix})" -j {prefix}-SERVICES'
    await iptables.restore(f"*nat\n:{prefix}-SERVICES - [0:0]\n-I OUTPUT {spec}\nCOMMIT\n")
    assert len(jump_lines(iptables_save("nat"), prefix)) == 4
    await Syncer(config).sync(ports, endpoints_map(slices))
    assert own_lines(iptables_save("nat"), prefix) == good


async def test_traffic_from_the_host_reaches_every_endpoint(config: Config) -> None:
    net = unique_service_net()
    node_port = unique_node_port()
    iptables.enable_route_localnet()
    names = [unique("kp-a"), unique("kp-b")]
    with httpd_containers(names) as pods:
        web = service("default", "web", f"{net}.20",
                      [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web",
                        "nodePort": node_port}], type="NodePort")
        empty = service("default", "empty", f"{net}.21", [HTTP])
        ports = service_ports(web) + service_ports(empty)
        slices = [endpoint_slice("default", "web",
                                 [{"name": "http", "port": 8080, "protocol": "TCP"}],
                                 [p.ip for p in pods])]
        syncer = Syncer(config)
        await syncer.sync(ports, endpoints_map(slices))

        assert set(await answers(f"{net}.20", 80)) == set(names)
        assert set(await answers("127.0.0.1", node_port)) == set(names)
        # No endpoints: REJECT, so the client is refused at once (no timeout).
        with pytest.raises(ConnectionRefusedError):
            await http_get(f"{net}.21", 80)

        # One endpoint leaves: after the (partial) sync only the other answers.
        slices = [endpoint_slice("default", "web",
                                 [{"name": "http", "port": 8080, "protocol": "TCP"}],
                                 [pods[1].ip])]
        assert not (await syncer.sync(ports, endpoints_map(slices))).full
        assert set(await answers(f"{net}.20", 80, requests=20)) == {names[1]}
        assert set(await answers("127.0.0.1", node_port, requests=20)) == {names[1]}

        # ClientIP affinity: one client sticks to one endpoint.
        sticky = service("default", "sticky", f"{net}.22",
                         [{"name": "http", "port": 80, "protocol": "TCP"}],
                         sessionAffinity="ClientIP")
        slices.append(endpoint_slice("default", "sticky",
                                     [{"name": "http", "port": 8080, "protocol": "TCP"}],
                                     [p.ip for p in pods]))
        await syncer.sync(ports + service_ports(sticky), endpoints_map(slices))
        assert len(await answers(f"{net}.22", 80, requests=20)) == 1

    # (No request after the cleanup: without our rules a service IP routes off the host.)
    await cleanup(config)
    for table in ("filter", "nat"):
        assert own_lines(iptables_save(table), config.names.prefix) == []


def test_unique_prefixes_fit_iptables() -> None:
    assert len({unique_prefix() for _ in range(50)}) == 50
    assert socket.gethostname()  # the default --hostname-override


def conntrack_entries(cluster_ip: str, endpoint_ip: str) -> list[str]:
    result = subprocess.run(["conntrack", "-L", "-p", "udp", "--orig-dst", cluster_ip,
                             "--dst-nat", endpoint_ip], capture_output=True, text=True,
                            timeout=30)
    return [line for line in result.stdout.splitlines() if line.strip()]


async def test_stale_udp_conntrack_entries_are_cleared(config: Config) -> None:
    net = unique_service_net()
    dns = {"name": "dns", "port": 53, "protocol": "UDP"}
    with httpd_containers([unique("kp-udp-a"), unique("kp-udp-b")]) as pods:
        ports = service_ports(service("default", "dns", f"{net}.40", [dns]))
        slices = [endpoint_slice("default", "dns", [dns], [pods[0].ip])]
        syncer = Syncer(config)
        await syncer.sync(ports, endpoints_map(slices))
        # A UDP "flow" to the cluster IP: conntrack remembers its DNAT to pods[0].
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.sendto(b"hello", (f"{net}.40", 53))
        assert await eventually(lambda: _async(conntrack_entries(f"{net}.40", pods[0].ip)),
                                timeout=10, what="a conntrack entry to the first endpoint")
        slices = [endpoint_slice("default", "dns", [dns], [pods[1].ip])]
        result = await syncer.sync(ports, endpoints_map(slices))
        assert result.stale_conntrack == 1
        assert conntrack_entries(f"{net}.40", pods[0].ip) == []


async def _async(value: list[str]) -> list[str]:
    return value
