"""Services and EndpointSlices turned into dnsmasq's records, after Kubernetes'
DNS-based service discovery specification (kubernetes/dns docs/specification.md, schema
1.1.0). Pure functions; `cluster_dns.main` writes what they return.

- A ClusterIP Service: `<svc>.<ns>.svc.<zone>` A/AAAA -> its ClusterIPs (and their PTRs),
  SRV `_<port>._<proto>.<svc>.<ns>.svc.<zone>` -> `<svc>.<ns>.svc.<zone>` for each named
  port.
- A headless Service (`clusterIP: None`): `<svc>.<ns>.svc.<zone>` -> each ready endpoint's
  address; `<hostname>.<svc>.<ns>.svc.<zone>` -> the endpoint's address, `hostname` being
  the endpoint's own or, without one, its address with dashes (CoreDNS's identifier);
  SRV per named port and ready endpoint -> that name, with the endpoint's port. Ready:
  `conditions.ready` not false, or any endpoint when `publishNotReadyAddresses`.
- An ExternalName Service: `<svc>.<ns>.svc.<zone>` CNAME -> `spec.externalName`.

dnsmasq takes the addresses from hosts files in a `--hostsdir`, which it watches with
inotify (a new, replaced or removed file is re-read at once, no signal needed): one file
per Service. SRV and CNAME records (`--srv-host`, `--cname`) live in its configuration,
which it reads only at start (SIGHUP re-reads hosts files, not options): a change of those
restarts it.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# What a name in dnsmasq's files may be: DNS labels (underscores for SRV owners) and dots.
# Anything else (a newline, a comma) could add options of its own to dnsmasq's config,
# e.g. an upstream server; the apiserver validates these fields, this is a second wall.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9])?(\.[A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9])?)*")
SRV_PRIORITY = 0
SRV_WEIGHT = 100


@dataclass(frozen=True, order=True)
class Srv:
    name: str  # _<port>._<proto>.<svc>.<ns>.svc.<zone>
    target: str
    port: int


@dataclass(frozen=True)
class ServiceRecords:
    """One Service's records: addresses (A/AAAA and PTR), SRVs and CNAMEs."""

    hosts: tuple[tuple[str, str], ...] = ()  # (address, name), in file order
    srvs: tuple[Srv, ...] = ()
    cnames: tuple[tuple[str, str], ...] = ()  # (name, target)


@dataclass(frozen=True)
class Options:
    """What every Service's records depend on."""

    domain: str = "cluster.local"


def service_fqdn(name: str, namespace: str, domain: str) -> str:
    return f"{name}.{namespace}.svc.{domain}"


def service_key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def slice_service_key(endpoint_slice: Mapping[str, Any]) -> str | None:
    """The "ns/name" of the Service a slice belongs to (its kubernetes.io/service-name)."""
    metadata = endpoint_slice.get("metadata") or {}
    service = (metadata.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return f"{metadata.get('namespace')}/{service}" if service else None


def is_headless(service: Mapping[str, Any]) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def cluster_ips(spec: Mapping[str, Any]) -> list[str]:
    listed = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return [ip for ip in listed if is_ip(ip)]


def srv_name(port: Mapping[str, Any], fqdn: str) -> str:
    protocol = str(port.get("protocol") or "TCP").lower()
    return f"_{port['name']}._{protocol}.{fqdn}"


def endpoint_is_ready(endpoint: Mapping[str, Any], publish_not_ready: bool) -> bool:
    if publish_not_ready:
        return True
    return (endpoint.get("conditions") or {}).get("ready") is not False


def endpoint_hostname(endpoint: Mapping[str, Any], address: str) -> str:
    """The endpoint's hostname, or an identifier made of its address (10-1-2-3)."""
    hostname = endpoint.get("hostname")
    if hostname:
        return str(hostname)
    return address.replace(".", "-").replace(":", "-")


def is_safe_name(name: str) -> bool:
    return len(name) <= 253 and _SAFE_NAME.fullmatch(name) is not None


def only_safe(service_records: ServiceRecords, key: str) -> ServiceRecords:
    """The records whose every name is a DNS name; the others logged and left out."""
    hosts = tuple((a, n) for a, n in service_records.hosts if is_safe_name(n))
    srvs = tuple(s for s in service_records.srvs
                 if is_safe_name(s.name) and is_safe_name(s.target))
    cnames = tuple((n, t) for n, t in service_records.cnames
                   if is_safe_name(n) and is_safe_name(t))
    if (hosts, srvs, cnames) != (service_records.hosts, service_records.srvs,
                                 service_records.cnames):
        log.warning("Service %s: records with names that are not DNS names left out", key)
    return ServiceRecords(hosts=hosts, srvs=srvs, cnames=cnames)


def service_records(service: Mapping[str, Any], slices: Iterable[Mapping[str, Any]],
                    options: Options) -> ServiceRecords:
    """The Service's records (those with a name that is not a DNS name left out)."""
    return only_safe(unchecked_records(service, slices, options), service_key(service))


def unchecked_records(service: Mapping[str, Any], slices: Iterable[Mapping[str, Any]],
                      options: Options) -> ServiceRecords:
    metadata = service.get("metadata") or {}
    spec = service.get("spec") or {}
    fqdn = service_fqdn(str(metadata.get("name")), str(metadata.get("namespace")),
                        options.domain)
    if spec.get("type") == "ExternalName":
        target = str(spec.get("externalName") or "").removesuffix(".")
        return ServiceRecords(cnames=((fqdn, target),)) if target else ServiceRecords()
    named_ports = [p for p in spec.get("ports") or [] if p.get("name")]
    if not is_headless(service):
        addresses = cluster_ips(spec)
        if not addresses:
            return ServiceRecords()
        return ServiceRecords(
            hosts=tuple((ip, fqdn) for ip in addresses),
            srvs=tuple(sorted(Srv(srv_name(p, fqdn), fqdn, int(p["port"])) for p in named_ports)))
    return headless_records(fqdn, spec, slices)


def headless_records(fqdn: str, spec: Mapping[str, Any],
                     slices: Iterable[Mapping[str, Any]]) -> ServiceRecords:
    publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
    named = {str(p["name"]): p for p in spec.get("ports") or [] if p.get("name")}
    endpoint_hosts: dict[tuple[str, str], None] = {}  # (address, hostname fqdn), ordered
    service_hosts: dict[tuple[str, str], None] = {}
    srvs: set[Srv] = set()
    for endpoint_slice in slices:
        if endpoint_slice.get("addressType") not in ("IPv4", "IPv6"):
            continue  # FQDN slices have no addresses to give
        slice_ports = [p for p in endpoint_slice.get("ports") or []
                       if p.get("name") in named and p.get("port")]
        for endpoint in endpoint_slice.get("endpoints") or []:
            if not endpoint_is_ready(endpoint, publish_not_ready):
                continue
            for address in endpoint.get("addresses") or []:
                if not is_ip(address):
                    continue
                host_fqdn = f"{endpoint_hostname(endpoint, address)}.{fqdn}"
                endpoint_hosts[(address, host_fqdn)] = None
                service_hosts[(address, fqdn)] = None
                for port in slice_ports:
                    protocol = port.get("protocol") or named[port["name"]].get("protocol")
                    srvs.add(Srv(srv_name({"name": port["name"], "protocol": protocol}, fqdn),
                                 host_fqdn, int(port["port"])))
    # An endpoint's own name first: dnsmasq answers a PTR with the first name of an address.
    return ServiceRecords(hosts=(*endpoint_hosts, *service_hosts), srvs=tuple(sorted(srvs)))


def hosts_file_name(key: str) -> str:
    """The hosts file of Service "ns/name" (names are DNS labels: "_" cannot clash)."""
    return key.replace("/", "_")


def hosts_text(records: ServiceRecords) -> str:
    return "".join(f"{address} {name}\n" for address, name in records.hosts)


def config_text(records: Iterable[ServiceRecords]) -> str:
    """The --conf-file of SRV and CNAME records, in a stable order (a changed text is
    what restarts dnsmasq)."""
    lines: list[str] = []
    for service in records:
        lines += [f"srv-host={srv.name},{srv.target},{srv.port},{SRV_PRIORITY},{SRV_WEIGHT}"
                  for srv in service.srvs]
        lines += [f"cname={name},{target}" for name, target in service.cnames]
    return "".join(f"{line}\n" for line in sorted(lines))


# -- the kube-dns Service and its endpoints -----------------------------------------------

KUBE_DNS_NAMESPACE = "kube-system"
KUBE_DNS_NAME = "kube-dns"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "cluster-dns.kubelite.io"
KUBE_DNS_LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                   "kubernetes.io/name": "KubeDNS"}
DNS_PORT = 53


def kube_dns_service(cluster_ip: str) -> dict[str, Any]:
    """kube-dns's Service, as its manifest has it, without a selector: the endpoints are
    this process's dnsmasq, which runs on the host, not in a pod."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": KUBE_DNS_NAME, "namespace": KUBE_DNS_NAMESPACE,
                     "labels": dict(KUBE_DNS_LABELS)},
        "spec": {"clusterIP": cluster_ip,
                 "ports": [{"name": "dns", "port": DNS_PORT, "protocol": "UDP",
                            "targetPort": DNS_PORT},
                           {"name": "dns-tcp", "port": DNS_PORT, "protocol": "TCP",
                            "targetPort": DNS_PORT}]},
    }


def kube_dns_endpoint_slice(address: str, port: int) -> dict[str, Any]:
    """The kube-dns Service's one EndpointSlice: dnsmasq's listen address and port."""
    address_type = "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{KUBE_DNS_NAME}-dnsmasq", "namespace": KUBE_DNS_NAMESPACE,
                     "labels": {**KUBE_DNS_LABELS, SERVICE_NAME_LABEL: KUBE_DNS_NAME,
                                MANAGED_BY_LABEL: MANAGED_BY}},
        "addressType": address_type,
        "endpoints": [{"addresses": [address],
                       "conditions": {"ready": True, "serving": True, "terminating": False}}],
        "ports": [{"name": "dns", "port": port, "protocol": "UDP"},
                  {"name": "dns-tcp", "port": port, "protocol": "TCP"}],
    }


def differs(desired: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
    """Whether `actual` lacks any field of `desired` (fields the server adds are fine)."""
    for key, value in desired.items():
        if isinstance(value, Mapping):
            if not isinstance(actual.get(key), Mapping) or differs(value, actual[key]):
                return True
        elif isinstance(value, list):
            other = actual.get(key)
            if not isinstance(other, list) or len(other) != len(value):
                return True
            for mine, theirs in zip(value, other, strict=True):
                if isinstance(mine, Mapping):
                    if not isinstance(theirs, Mapping) or differs(mine, theirs):
                        return True
                elif mine != theirs:
                    return True
        elif actual.get(key) != value:
            return True
    return False
