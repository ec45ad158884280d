"""A pod's resolver configuration, as the kubelet's pkg/kubelet/network/dns (GetPodDNS)
computes it from `dnsPolicy`, `dnsConfig`, `--cluster-dns`, `--cluster-domain` and the
node's `--resolv-conf`.

- `ClusterFirst` (the default): the cluster DNS servers only, the search path
  `<ns>.svc.<domain> svc.<domain> <domain>` then the host's, and `ndots:5`. A
  hostNetwork pod gets `Default` instead unless it asks for `ClusterFirstWithHostNet`.
  Without `--cluster-dns` it falls back to `Default`, with kube's MissingClusterDNS event.
- `Default`: the node's resolv.conf (`--resolv-conf ""`: 127.0.0.1 and search ".", which
  turns lookups off, as kube does).
- `None`: nothing but the pod's `dnsConfig`.

`dnsConfig` is then appended (nameservers and searches without duplicates, options merged
by name, the pod's winning), and the result cut to the resolver's limits (3 nameservers,
32 search paths of at most 253 characters, 2048 characters in all) with kube's
DNSConfigForming warning. The sandbox gets it as Docker's HostConfig.Dns/DnsSearch/
DnsOptions; the pod's other containers join the sandbox's network and so read its
/etc/resolv.conf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_DNS_OPTIONS = ("ndots:5",)
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
DNS1123_SUBDOMAIN_MAX_LENGTH = 253


@dataclass(frozen=True)
class DnsConfig:
    """A resolv.conf: runtimeapi.DNSConfig."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class DnsSettings:
    """The kubelet's DNS flags, and the node's resolv.conf as read."""

    cluster_dns: tuple[str, ...] = ()  # --cluster-dns
    cluster_domain: str = ""  # --cluster-domain
    resolver_config: str = "/etc/resolv.conf"  # --resolv-conf ("" = none)
    host: DnsConfig = DnsConfig()  # resolver_config's contents


@dataclass(frozen=True)
class DnsWarning:
    """A Warning event to record, on the pod (or on the node, `node`)."""

    reason: str
    message: str
    node: bool = False


@dataclass(frozen=True)
class PodDns:
    config: DnsConfig
    warnings: tuple[DnsWarning, ...] = ()


def parse_resolv_conf(text: str) -> DnsConfig:
    """nameserver lines accumulate; the last search and options lines win; search
    domains lose a trailing dot (as parseResolvConf)."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        fields = line.strip().split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "nameserver" and len(fields) >= 2:
            servers.append(fields[1])
        elif fields[0] == "search":
            searches = [domain.removesuffix(".") for domain in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    return DnsConfig(tuple(servers), tuple(searches), tuple(options))


def read_resolv_conf(path: str) -> DnsConfig:
    """The host's resolver config (blocking: call it in a thread); "" reads nothing."""
    if not path:
        return DnsConfig()
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_resolv_conf(f.read(10 << 20))


def without_duplicates(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def pod_dns_type(pod: Mapping[str, Any]) -> str:
    """"cluster", "host" or "none" (getPodDNSType); an unknown policy is "cluster"."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "None":
        return "none"
    if policy == "ClusterFirstWithHostNet":
        return "cluster"
    if policy == "ClusterFirst" and not spec.get("hostNetwork"):
        return "cluster"
    if policy in ("ClusterFirst", "Default"):
        return "host"
    return "cluster"


def cluster_searches(namespace: str, cluster_domain: str,
                     host_searches: Sequence[str]) -> tuple[str, ...]:
    if not cluster_domain:
        return tuple(host_searches)
    return without_duplicates([f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}",
                               cluster_domain, *host_searches])


def merge_options(existing: Sequence[str], pod_options: Sequence[Mapping[str, Any]]
                  ) -> tuple[str, ...]:
    """Options by name, the pod's overriding the base's (mergeDNSOptions). Kube builds
    them in a Go map (so in no order); here in first-seen order."""
    merged: dict[str, str] = {}
    for option in existing:
        name, _, value = option.partition(":")
        merged[name] = value
    for pod_option in pod_options:
        merged[str(pod_option.get("name") or "")] = str(pod_option.get("value") or "")
    return tuple(f"{name}:{value}" if value else name for name, value in merged.items())


def fit_searches(searches: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """(the search line within the limits, whether anything was cut): at most 32
    paths, none longer than 253 characters, 2048 characters in all (cut from the end)."""
    exceeded = len(searches) > MAX_DNS_SEARCH_PATHS
    kept = [s for s in searches[:MAX_DNS_SEARCH_PATHS] if len(s) <= DNS1123_SUBDOMAIN_MAX_LENGTH]
    exceeded = exceeded or len(kept) < len(searches[:MAX_DNS_SEARCH_PATHS])
    while kept and len(" ".join(kept)) > MAX_DNS_SEARCH_LIST_CHARS:
        kept.pop()
        exceeded = True
    return tuple(kept), exceeded


def fit_limits(config: DnsConfig) -> PodDns:
    """formDNSConfigFitsLimits, with its DNSConfigForming warnings."""
    warnings: list[DnsWarning] = []
    servers = config.servers
    if len(servers) > MAX_DNS_NAMESERVERS:
        servers = servers[:MAX_DNS_NAMESERVERS]
        warnings.append(DnsWarning(
            "DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been "
            f"omitted, the applied nameserver line is: {' '.join(servers)}"))
    searches, exceeded = fit_searches(config.searches)
    if exceeded:
        warnings.append(DnsWarning(
            "DNSConfigForming", "Search Line limits were exceeded, some search paths have "
            f"been omitted, the applied search line is: {' '.join(searches)}"))
    return PodDns(DnsConfig(servers, searches, config.options), tuple(warnings))


def pod_dns(pod: Mapping[str, Any], settings: DnsSettings) -> PodDns:
    """GetPodDNS: the pod's resolver config and the events to record about it."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    base = settings.host
    warnings: list[DnsWarning] = []
    dns_type = pod_dns_type(pod)
    if dns_type == "cluster" and not settings.cluster_dns:
        message = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
                   '"ClusterFirst" policy. Falling back to "Default" policy.')
        pod_name = (f'"{metadata.get("name")}_{metadata.get("namespace")}'
                    f'({metadata.get("uid")})"')  # format.Pod
        warnings += [DnsWarning("MissingClusterDNS", message, node=True),
                     DnsWarning("MissingClusterDNS", f"pod: {pod_name}. {message}")]
        dns_type = "host"
    if dns_type == "none":
        base = DnsConfig()
    elif dns_type == "cluster":
        base = DnsConfig(servers=settings.cluster_dns,
                         searches=cluster_searches(str(metadata.get("namespace") or "default"),
                                                   settings.cluster_domain, base.searches),
                         options=DEFAULT_DNS_OPTIONS)
    elif not settings.resolver_config:
        # No resolv.conf: the resolver's documented default (the local machine), and no
        # search: lookups are effectively off.
        base = DnsConfig(servers=("127.0.0.1",), searches=(".",), options=base.options)
    pod_config = spec.get("dnsConfig")
    if pod_config:
        base = DnsConfig(
            servers=without_duplicates([*base.servers, *(pod_config.get("nameservers") or [])]),
            searches=without_duplicates([*base.searches, *(pod_config.get("searches") or [])]),
            options=merge_options(base.options, pod_config.get("options") or []))
    fitted = fit_limits(base)
    return PodDns(fitted.config, (*warnings, *fitted.warnings))


def docker_dns(config: DnsConfig) -> dict[str, list[str]]:
    """The sandbox's HostConfig fields, which Docker writes into its resolv.conf. Docker
    fills an empty list from its own host's file, so no search path is Docker's "."
    (no search line); empty options still come from the Docker host's file (where,
    unlike the pod's, they are usually none)."""
    return {"Dns": list(config.servers), "DnsSearch": list(config.searches) or ["."],
            "DnsOptions": list(config.options)}
