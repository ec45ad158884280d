"""What kube-proxy reads from Services and EndpointSlices (pkg/proxy's serviceInfo,
endpointInfo and EndpointSliceCache), as frozen values: pure functions of API dicts.

A Service contributes one `ServicePort` per entry of `spec.ports`, keyed by its
`ServicePortName` ("ns/name:port-name", or "ns/name" for an unnamed port, plus the
protocol). EndpointSlices contribute `Endpoint`s to the service port whose name their
port carries (the EndpointSlice controller has already resolved named `targetPort`s per
pod): the first address of each endpoint, deduplicated by "ip:port" across the slices of
a service, and sorted by that string as kube's cache does, so that rules diff stably.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger("kube-proxy")

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
# kube-proxy's informers skip Services another proxy implements and headless ones
# (server/pkg/proxy config: `!service.kubernetes.io/service-proxy-name,!...headless`).
PROXYABLE_SELECTOR = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
PROTOCOLS = ("TCP", "UDP", "SCTP")
DEFAULT_STICKY_SECONDS = 10800  # spec.sessionAffinityConfig.clientIP.timeoutSeconds default


@dataclass(frozen=True, order=True)
class ServicePortName:
    namespace: str
    name: str
    port: str  # the port's name; "" when the Service has one unnamed port
    protocol: str  # TCP, UDP, SCTP

    def __str__(self) -> str:
        """kube's ServicePortName.String(): "ns/svc:port", "ns/svc" for an unnamed port."""
        return f"{self.namespace}/{self.name}" + (f":{self.port}" if self.port else "")


@dataclass(frozen=True)
class ServicePort:
    name: ServicePortName
    cluster_ip: str
    port: int
    node_port: int = 0  # 0: none
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()
    session_affinity_seconds: int = 0  # 0: no ClientIP affinity
    external_policy_local: bool = False  # externalTrafficPolicy: Local
    internal_policy_local: bool = False  # internalTrafficPolicy: Local

    @property
    def protocol(self) -> str:
        return self.name.protocol.lower()

    @property
    def externally_accessible(self) -> bool:
        return bool(self.node_port or self.external_ips or self.load_balancer_ips)


@dataclass(frozen=True, order=True)
class Endpoint:
    ip: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    node_name: str = ""

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}"


def _ipv4(value: Any) -> str | None:
    try:
        address = ipaddress.ip_address(str(value))
    except ValueError:
        return None
    return str(address) if address.version == 4 else None


def should_skip_service(service: Mapping[str, Any]) -> str | None:
    """Why kube-proxy has nothing to do for this Service (None: proxy it). As kube's
    ShouldSkipService: headless (clusterIP None or empty) and ExternalName services."""
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return "type ExternalName"
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip in ("", "None"):
        return "headless (clusterIP None)"
    if _ipv4(cluster_ip) is None:
        return f"clusterIP {cluster_ip} is not IPv4 (this proxier is IPv4 only)"
    return None


def service_ports(service: Mapping[str, Any]) -> list[ServicePort]:
    """The proxied ports of one Service; [] for a Service kube-proxy skips."""
    meta = service.get("metadata") or {}
    spec = service.get("spec") or {}
    reason = should_skip_service(service)
    if reason is not None:
        log.debug("skipping service %s/%s: %s", meta.get("namespace"), meta.get("name"), reason)
        return []
    affinity = 0
    if spec.get("sessionAffinity") == "ClientIP":
        config = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {})
        affinity = int(config.get("timeoutSeconds") or DEFAULT_STICKY_SECONDS)
    service_type = spec.get("type") or "ClusterIP"
    external_ips = tuple(ip for ip in (_ipv4(v) for v in spec.get("externalIPs") or []) if ip)
    lb_ips: tuple[str, ...] = ()
    if service_type == "LoadBalancer":
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        lb_ips = tuple(ip for ip in (_ipv4(i.get("ip")) for i in ingress) if ip)
        if lb_ips and spec.get("loadBalancerSourceRanges"):
            log.warning("service %s/%s: loadBalancerSourceRanges are not enforced by this "
                        "proxier (no KUBE-FW chains); its load-balancer IPs are open to all",
                        meta.get("namespace"), meta.get("name"))
    ports: list[ServicePort] = []
    for port in spec.get("ports") or []:
        protocol = str(port.get("protocol") or "TCP")
        if protocol not in PROTOCOLS:
            continue
        ports.append(ServicePort(
            name=ServicePortName(str(meta.get("namespace") or "default"), str(meta.get("name")),
                                 str(port.get("name") or ""), protocol),
            cluster_ip=str(_ipv4(spec.get("clusterIP"))), port=int(port.get("port") or 0),
            node_port=int(port.get("nodePort") or 0)
            if service_type in ("NodePort", "LoadBalancer") else 0,
            external_ips=external_ips, load_balancer_ips=lb_ips,
            session_affinity_seconds=affinity,
            external_policy_local=spec.get("externalTrafficPolicy") == "Local"
            and service_type in ("NodePort", "LoadBalancer"),
            internal_policy_local=spec.get("internalTrafficPolicy") == "Local"))
    return ports


def _condition(conditions: Mapping[str, Any], name: str, default: bool) -> bool:
    value = conditions.get(name)
    return default if value is None else bool(value)


def slice_endpoints(endpoint_slice: Mapping[str, Any]
                    ) -> dict[tuple[str, str], list[Endpoint]]:
    """(port name, protocol) -> the endpoints one IPv4 EndpointSlice gives that port."""
    if endpoint_slice.get("addressType", "IPv4") != "IPv4":
        return {}
    result: dict[tuple[str, str], list[Endpoint]] = {}
    for port in endpoint_slice.get("ports") or []:
        number = port.get("port")
        if not number:
            continue
        key = (str(port.get("name") or ""), str(port.get("protocol") or "TCP"))
        for endpoint in endpoint_slice.get("endpoints") or []:
            addresses = endpoint.get("addresses") or []
            ip = _ipv4(addresses[0]) if addresses else None
            if ip is None:
                continue
            conditions = endpoint.get("conditions") or {}
            # As the API documents: a nil ready means ready, a nil serving means ready's value.
            ready = _condition(conditions, "ready", True)
            result.setdefault(key, []).append(Endpoint(
                ip=ip, port=int(number), ready=ready,
                serving=_condition(conditions, "serving", ready),
                terminating=_condition(conditions, "terminating", False),
                node_name=str(endpoint.get("nodeName") or "")))
    return result


def trigger_time(endpoint_slice: Mapping[str, Any]) -> float | None:
    """The slice's `endpoints.kubernetes.io/last-change-trigger-time`, as a Unix time
    (None when absent or malformed, as kube ignores it then)."""
    text = ((endpoint_slice.get("metadata") or {}).get("annotations") or {}).get(
        LAST_CHANGE_TRIGGER_TIME)
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def service_key_of_slice(endpoint_slice: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = endpoint_slice.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return (str(meta.get("namespace") or "default"), str(service)) if service else None


def endpoints_map(slices: Iterable[Mapping[str, Any]]
                  ) -> dict[ServicePortName, tuple[Endpoint, ...]]:
    """Every service port's endpoints, merged across its slices, sorted as kube sorts them."""
    merged: dict[ServicePortName, dict[str, Endpoint]] = {}
    for endpoint_slice in slices:
        service = service_key_of_slice(endpoint_slice)
        if service is None:
            continue
        for (port_name, protocol), endpoints in slice_endpoints(endpoint_slice).items():
            by_address = merged.setdefault(
                ServicePortName(service[0], service[1], port_name, protocol), {})
            for endpoint in endpoints:
                # The same address in two slices (a pod moving between them): keep the
                # ready one, as kube's cache prefers the newest ready state.
                known = by_address.get(str(endpoint))
                if known is None or (endpoint.ready and not known.ready):
                    by_address[str(endpoint)] = endpoint
    return {name: tuple(sorted(by_address.values(), key=str))
            for name, by_address in merged.items()}


def cluster_endpoints(endpoints: Iterable[Endpoint]) -> list[Endpoint]:
    """The endpoints that take traffic: the ready ones; when none is ready, the serving
    terminating ones (kube's ProxyTerminatingEndpoints), so that a rolling update's last
    pods keep answering until they are gone."""
    endpoints = list(endpoints)
    ready = [e for e in endpoints if e.ready]
    if ready:
        return ready
    return [e for e in endpoints if e.serving and e.terminating]


def local_endpoints(endpoints: Iterable[Endpoint], hostname: str) -> list[Endpoint]:
    """The usable endpoints on this node (for the Local traffic policies)."""
    return cluster_endpoints(e for e in endpoints if e.node_name == hostname)
