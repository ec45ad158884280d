"""Which UDP conntrack entries a sync leaves stale (kube's conntrack cleanup after
syncProxyRules): pure, from the service ports and endpoints before and after.

UDP has no connection to end: a client that keeps sending to a cluster IP keeps its
conntrack entry, so it keeps reaching the endpoint the entry was NATed to even after
that endpoint left, or keeps being rejected after the service got its first endpoint.
kube deletes those entries: for each endpoint no longer used, the entries NATed to it
(through the cluster IP, external IPs and node port); for each service port that just
got endpoints, every entry of its cluster IP, external IPs and node port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kube_proxy.model import Endpoint, ServicePort, ServicePortName, cluster_endpoints


def _used(endpoints: Iterable[Endpoint]) -> set[str]:
    return {e.ip for e in cluster_endpoints(endpoints)}


def stale_entries(old_ports: Iterable[ServicePort],
                  old_endpoints: Mapping[ServicePortName, tuple[Endpoint, ...]],
                  new_ports: Iterable[ServicePort],
                  new_endpoints: Mapping[ServicePortName, tuple[Endpoint, ...]]
                  ) -> list[list[str]]:
    """The `conntrack -D` arguments to run after the rules for `new_*` are in place."""
    old = {p.name: p for p in old_ports if p.name.protocol == "UDP"}
    commands: list[list[str]] = []
    for port in sorted((p for p in new_ports if p.name.protocol == "UDP"), key=lambda p: p.name):
        before = _used(old_endpoints.get(port.name, ()))
        after = _used(new_endpoints.get(port.name, ()))
        ips = [port.cluster_ip, *port.external_ips, *port.load_balancer_ips]
        previous = old.get(port.name, port)
        for gone in sorted(before - after):
            for ip in [previous.cluster_ip, *previous.external_ips,
                       *previous.load_balancer_ips]:
                commands.append(["--orig-dst", ip, "--dst-nat", gone, "-p", "udp"])
            if previous.node_port:
                commands.append(["-p", "udp", "--dport", str(previous.node_port),
                                 "--dst-nat", gone])
        if after and not before:
            for ip in ips:
                commands.append(["--orig-dst", ip, "-p", "udp"])
            if port.node_port:
                commands.append(["-p", "udp", "--dport", str(port.node_port)])
    # A UDP service deleted outright: its endpoints are gone too.
    new_names = {p.name for p in new_ports}
    for name, port in sorted(old.items()):
        if name in new_names:
            continue
        for gone in sorted(_used(old_endpoints.get(name, ()))):
            for ip in [port.cluster_ip, *port.external_ips, *port.load_balancer_ips]:
                commands.append(["--orig-dst", ip, "--dst-nat", gone, "-p", "udp"])
            if port.node_port:
                commands.append(["-p", "udp", "--dport", str(port.node_port), "--dst-nat", gone])
    return commands
