"""Services (core/v1): the strategy of pkg/registry/core/service (SetDefaults_Service, the
strategy's PrepareForCreate/PrepareForUpdate, the REST layer's IP-family defaults,
ValidateService/ValidateServiceUpdate, the Table of printService), as one `Resource`, with
the status subresource.

A Service holds things outside its own etcd key: its ClusterIP and its NodePorts, taken
from the cluster's ranges (apiserver/allocator.py). `SERVICE_HOLDINGS` says which, so the
registry can reserve them before the write and give them back when the write fails or the
Service goes away, without knowing what a Service is.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.allocator import (
    AllocationError,
    Full,
    RangeAllocator,
    Reservation,
    ServiceRanges,
)
from apiserver.resources.base import Resource
from apiserver.selectors import SelectableFields, field_text, object_meta_fields
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, NONE, column, format_age
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    GoPrinted,
    duplicate,
    forbidden,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_port_num,
    max_len_error,
    not_supported,
    regex_error,
    required,
    validate_labels,
    validate_object_meta,
    validate_port_num_or_name,
)
from common import errors
from common.models import Service

Object = dict[str, Any]

CLUSTER_IP = "ClusterIP"
NODE_PORT = "NodePort"
LOAD_BALANCER = "LoadBalancer"
EXTERNAL_NAME = "ExternalName"
SERVICE_TYPES = (CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT)  # sets.List: sorted
CLUSTER_IP_NONE = "None"
AFFINITY_NONE = "None"
AFFINITY_CLIENT_IP = "ClientIP"
SESSION_AFFINITIES = (AFFINITY_CLIENT_IP, AFFINITY_NONE)
DEFAULT_CLIENT_IP_AFFINITY_SECONDS = 10800  # 3 hours
MAX_CLIENT_IP_AFFINITY_SECONDS = 86400  # 1 day
PROTOCOLS = ("SCTP", "TCP", "UDP")
TRAFFIC_POLICIES = ("Cluster", "Local")
IPV4, IPV6 = "IPv4", "IPv6"
IP_FAMILIES = (IPV4, IPV6)
SINGLE_STACK, PREFER_DUAL_STACK, REQUIRE_DUAL_STACK = (
    "SingleStack", "PreferDualStack", "RequireDualStack")
IP_FAMILY_POLICIES = (PREFER_DUAL_STACK, REQUIRE_DUAL_STACK, SINGLE_STACK)
PREFER_CLOSE = "PreferClose"
TRAFFIC_DISTRIBUTIONS = (PREFER_CLOSE, "PreferSameNode", "PreferSameZone")
KUBELET_PORT = 10250
NOT_DUAL_STACK_MSG = "this cluster is not configured for dual-stack services"
INVALID_IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"

DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or "
                     "'-', start with an alphabetic character, and end with an alphanumeric "
                     "character")
_DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL.fullmatch(value):
        errs.append(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    """ValidateServiceName (apimachinery's NameIsDNS1035Label)."""
    if prefix and name.endswith("-"):
        name = name[:-1] + "a"
    return is_dns1035_label(name)


# --- what a Service is --------------------------------------------------------------------------

def spec_of(service: Mapping[str, Any]) -> dict[str, Any]:
    return service.get("spec") or {}


def service_type(service: Mapping[str, Any]) -> str:
    return str(spec_of(service).get("type") or "")


def cluster_ips(service: Mapping[str, Any]) -> list[str]:
    return list(spec_of(service).get("clusterIPs") or [])


def is_headless(service: Mapping[str, Any]) -> bool:
    """isHeadlessService: clusterIPs[0] is "None" (clusterIP and clusterIPs are in sync)."""
    ips = cluster_ips(service)
    return bool(ips) and ips[0] == CLUSTER_IP_NONE


def externally_accessible(service: Mapping[str, Any]) -> bool:
    """apiservice.ExternallyAccessible: reachable from outside the cluster's pods."""
    kind = service_type(service)
    return kind in (LOAD_BALANCER, NODE_PORT) or (
        kind == CLUSTER_IP and bool(spec_of(service).get("externalIPs")))


def needs_health_check(service: Mapping[str, Any]) -> bool:
    spec = spec_of(service)
    return service_type(service) == LOAD_BALANCER and \
        spec.get("externalTrafficPolicy") == "Local"


def needs_cluster_ip(service: Mapping[str, Any]) -> bool:
    """Every type but ExternalName gets a ClusterIP (unless headless)."""
    return service_type(service) != EXTERNAL_NAME


def needs_node_ports(service: Mapping[str, Any]) -> bool:
    """NodePort Services, and LoadBalancer ones unless allocateLoadBalancerNodePorts: false."""
    kind = service_type(service)
    if kind == NODE_PORT:
        return True
    return kind == LOAD_BALANCER and spec_of(service).get(
        "allocateLoadBalancerNodePorts", True) is not False


def allocated_cluster_ip(service: Mapping[str, Any]) -> str | None:
    """The ClusterIP the Service holds from the range: None for headless and ExternalName."""
    ips = cluster_ips(service)
    if not needs_cluster_ip(service) or not ips or ips[0] == CLUSTER_IP_NONE:
        return None
    return ips[0]


def allocated_node_ports(service: Mapping[str, Any]) -> list[int]:
    """The node ports the Service holds: each port's nodePort, and healthCheckNodePort."""
    spec = spec_of(service)
    held = [int(port["nodePort"]) for port in spec.get("ports") or []
            if port.get("nodePort")]
    if spec.get("healthCheckNodePort"):
        held.append(int(spec["healthCheckNodePort"]))
    return sorted(set(held))


# --- defaults -----------------------------------------------------------------------------------

def default_service(service: Object, old: Object | None) -> None:
    """SetDefaults_Service, then what the strategy and the REST layer add: clusterIPs in sync
    with clusterIP, the fields the stored Service already had allocated (an update that
    leaves them out keeps them, kube's patchAllocatedValues), the fields a type change
    drops, and the IP families."""
    spec = service.setdefault("spec", {})
    spec.setdefault("sessionAffinity", AFFINITY_NONE)
    if spec["sessionAffinity"] == AFFINITY_NONE:
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == AFFINITY_CLIENT_IP:
        config = spec.get("sessionAffinityConfig") or {}
        if ((config.get("clientIP") or {}).get("timeoutSeconds")) is None:
            spec["sessionAffinityConfig"] = {
                "clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_AFFINITY_SECONDS}}
    spec.setdefault("type", CLUSTER_IP)
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    if externally_accessible(service) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and \
            spec["type"] in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == LOAD_BALANCER:
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if old is None:
        normalize_cluster_ips(service, None)
        service.setdefault("status", {}).setdefault("loadBalancer", {})
    else:
        normalize_cluster_ips(service, old)
        keep_allocated(service, old)
        drop_type_dependent_fields(service, old)
    init_ip_families(service)


def normalize_cluster_ips(service: Object, old: Object | None) -> None:
    """normalizeClusterIPs: the user may manage clusterIP or clusterIPs; keep them in sync."""
    spec = spec_of(service)
    if old is None:
        if spec.get("clusterIP") and not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        return
    old_spec = spec_of(old)
    if not spec.get("clusterIP") and spec.get("clusterIPs") == old_spec.get("clusterIPs"):
        spec.pop("clusterIPs", None)  # clusterIP cleared: so are clusterIPs (ExternalName)
    elif spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP") and \
            spec.get("clusterIPs") == old_spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]


def keep_allocated(service: Object, old: Object) -> None:
    """patchAllocatedValues: what the old Service was given and the new one leaves out."""
    spec, old_spec = spec_of(service), spec_of(old)
    if needs_cluster_ip(old) and needs_cluster_ip(service) and not spec.get("clusterIP") \
            and old_spec.get("clusterIP"):
        spec["clusterIP"] = old_spec["clusterIP"]
        spec["clusterIPs"] = list(old_spec.get("clusterIPs") or [old_spec["clusterIP"]])
    if needs_node_ports(old) and needs_node_ports(service):
        old_by_port = {(p.get("port"), p.get("protocol")): p.get("nodePort")
                       for p in old_spec.get("ports") or [] if p.get("nodePort")}
        old_by_name = {p.get("name"): p.get("nodePort")
                       for p in old_spec.get("ports") or [] if p.get("nodePort")}
        for port in spec.get("ports") or []:
            if not port.get("nodePort"):
                found = old_by_port.get((port.get("port"), port.get("protocol"))) or \
                    old_by_name.get(port.get("name"))
                if found:
                    port["nodePort"] = found
    if needs_health_check(old) and needs_health_check(service) and \
            not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def drop_type_dependent_fields(service: Object, old: Object) -> None:
    """dropTypeDependentFields: a type change drops what the new type cannot have, when the
    user left it as it was."""
    spec, old_spec = spec_of(service), spec_of(old)
    if not needs_cluster_ip(service) and needs_cluster_ip(old):
        if spec.get("clusterIP") == old_spec.get("clusterIP"):
            spec.pop("clusterIP", None)
        if spec.get("clusterIPs") == old_spec.get("clusterIPs"):
            spec.pop("clusterIPs", None)
        if spec.get("ipFamilies") == old_spec.get("ipFamilies"):
            spec.pop("ipFamilies", None)
        if spec.get("ipFamilyPolicy") == old_spec.get("ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    if not needs_node_ports(service) and needs_node_ports(old):
        old_ports = {(p.get("port"), p.get("protocol")): p.get("nodePort")
                     for p in old_spec.get("ports") or []}
        for port in spec.get("ports") or []:
            if port.get("nodePort") and \
                    old_ports.get((port.get("port"), port.get("protocol"))) == port["nodePort"]:
                port.pop("nodePort")
    if not needs_health_check(service) and needs_health_check(old) and \
            spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if service_type(service) != LOAD_BALANCER and service_type(old) == LOAD_BALANCER:
        for key in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
            if spec.get(key) == old_spec.get(key):
                spec.pop(key, None)
    if not externally_accessible(service) and \
            spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


def init_ip_families(service: Object) -> None:
    """initIPFamilyFields for a single-stack IPv4 cluster: SingleStack and [IPv4], except a
    headless Service without a selector, which kube makes RequireDualStack with both
    families (its endpoints are whatever the user puts there)."""
    if not needs_cluster_ip(service):
        return
    spec = spec_of(service)
    families = spec.get("ipFamilies") or []
    if spec.get("ipFamilyPolicy") is None and len(families) == 2:
        spec["ipFamilyPolicy"] = REQUIRE_DUAL_STACK
    if is_headless(service) and not spec.get("selector"):
        policy = spec.setdefault("ipFamilyPolicy", REQUIRE_DUAL_STACK)
        if not families:
            families = [IPV4]
        if len(families) < 2 and policy != SINGLE_STACK:
            families = [*families, IPV6 if families[0] == IPV4 else IPV4]
        spec["ipFamilies"] = families
        return
    spec.setdefault("ipFamilyPolicy", SINGLE_STACK)
    if not families:
        ip = cluster_ips(service)[0] if cluster_ips(service) else ""
        families = [IPV6 if ":" in ip else IPV4]
    spec["ipFamilies"] = families


# --- validation ---------------------------------------------------------------------------------

def go_service_port_key(protocol: str, port: int) -> GoPrinted:
    """How %#v prints the core.ServicePort{Protocol, Port} key of a duplicate port."""
    return GoPrinted(f'core.ServicePort{{Name:"", Protocol:"{protocol}", AppProtocol:(*string)'
                     f'(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, '
                     f'StrVal:""}}, NodePort:0}}')


def is_valid_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


# ValidateNonSpecialIP's ranges (Go's ParseCIDR masks the host bits of "ff02::/10").
LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
LINK_LOCAL_MULTICAST = (ipaddress.ip_network("224.0.0.0/24"),
                        ipaddress.ip_network("ff02::/10", strict=False))


def validate_non_special_ip(ip: str, path: str) -> list[Cause]:
    """ValidateNonSpecialIP: what may not be an external IP or an endpoint's address."""
    address = ipaddress.ip_address(ip)
    if address.is_unspecified:
        return [invalid(path, ip, "may not be unspecified (0.0.0.0)"
                        if address.version == 4 else "may not be unspecified (::)")]
    if address.is_loopback:
        return [invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)")]
    if any(address in network for network in LINK_LOCAL if network.version == address.version):
        return [invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, "
                                  "fe80::/10)")]
    if any(address in network for network in LINK_LOCAL_MULTICAST
           if network.version == address.version):
        return [invalid(path, ip, "may not be in the link-local multicast range "
                                  "(224.0.0.0/24, ff02::/10)")]
    return []


def validate_service_port(port: Mapping[str, Any], *, require_name: bool, names: set[str],
                          path: str) -> list[Cause]:
    errs: list[Cause] = []
    name = port.get("name") or ""
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += [invalid(f"{path}.name", name, m) for m in is_dns1123_label(name)]
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    number = port.get("port") or 0
    errs += [invalid(f"{path}.port", number, m) for m in is_valid_port_num(number)]
    protocol = port.get("protocol") or ""
    if not protocol:
        errs.append(required(f"{path}.protocol"))
    elif protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    errs += validate_port_num_or_name(port.get("targetPort", 0), f"{path}.targetPort")
    if port.get("appProtocol") is not None:
        errs += [invalid(f"{path}.appProtocol", port["appProtocol"], m)
                 for m in is_qualified_name(port["appProtocol"])]
    return errs


def validate_client_ip_affinity(config: Mapping[str, Any] | None, path: str) -> list[Cause]:
    when = f"when session affinity type is {AFFINITY_CLIENT_IP}"
    if config is None:
        return [required(path, when)]
    if config.get("clientIP") is None:
        return [required(f"{path}.clientIP", when)]
    timeout = config["clientIP"].get("timeoutSeconds")
    if timeout is None:
        return [required(f"{path}.clientIP.timeoutSeconds", when)]
    if not 0 < timeout <= MAX_CLIENT_IP_AFFINITY_SECONDS:
        return [invalid(f"{path}.clientIP.timeoutSeconds", timeout,
                        f"must be greater than 0 and less than {MAX_CLIENT_IP_AFFINITY_SECONDS}")]
    return []


def validate_cluster_ips_related(service: Mapping[str, Any]) -> list[Cause]:
    """ValidateServiceClusterIPsRelatedFields."""
    if service_type(service) == EXTERNAL_NAME:
        return []
    spec = spec_of(service)
    errs: list[Cause] = []
    ips = cluster_ips(service)
    if spec.get("clusterIP"):
        if not ips:
            errs.append(required("spec.clusterIPs"))
        elif ips[0] != spec["clusterIP"]:
            errs.append(invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
    elif ips:
        errs.append(invalid("spec.clusterIPs", ips,
                            "must be empty when `clusterIP` is not specified"))
    seen: set[str] = set()
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family not in IP_FAMILIES:
            errs.append(not_supported(f"spec.ipFamilies[{i}]", family, IP_FAMILIES))
        if family in seen:
            errs.append(duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        errs.append(not_supported("spec.ipFamilyPolicy", policy, IP_FAMILY_POLICIES))
    bad_ips = False
    for i, ip in enumerate(ips):
        if i == 0 and ip == CLUSTER_IP_NONE:
            if len(ips) > 1:
                bad_ips = True
                errs.append(invalid("spec.clusterIPs", ips,
                                    "'None' must be the first and only value"))
            continue
        if not is_valid_ip(ip):
            bad_ips = True
            errs.append(invalid(f"spec.clusterIPs[{i}]", ip, INVALID_IP_MSG))
    if len(ips) > 2:
        errs.append(invalid("spec.clusterIPs", ips, "may only hold up to 2 values"))
    if bad_ips:
        return errs
    if len(ips) > 1 and len({ipaddress.ip_address(ip).version for ip in ips}) != len(ips):
        errs.append(invalid("spec.clusterIPs", ips,
                            "may specify no more than one IP for each IP family"))
    families = spec.get("ipFamilies") or []
    if not is_headless(service):
        for i, (ip, family) in enumerate(zip(ips, families, strict=False)):
            v6 = ipaddress.ip_address(ip).version == 6
            if family == IPV4 and v6:
                errs.append(invalid(f"spec.clusterIPs[{i}]", ip, f"expected an IPv4 value as "
                                                                 f"indicated by `ipFamilies[{i}]`"))
            if family == IPV6 and not v6:
                errs.append(invalid(f"spec.clusterIPs[{i}]", ip, f"expected an IPv6 value as "
                                                                 f"indicated by `ipFamilies[{i}]`"))
    return errs


def validate_single_stack(service: Mapping[str, Any]) -> list[Cause]:
    """What the REST layer's initIPFamilyFields refuses on a single-stack IPv4 cluster."""
    if not needs_cluster_ip(service) or (is_headless(service)
                                         and not spec_of(service).get("selector")):
        return []
    spec = spec_of(service)
    errs = []
    if spec.get("ipFamilyPolicy") == REQUIRE_DUAL_STACK:
        errs.append(invalid("spec.ipFamilyPolicy", REQUIRE_DUAL_STACK, NOT_DUAL_STACK_MSG))
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family == IPV6:
            errs.append(invalid(f"spec.ipFamilies[{i}]", family, "not configured on this "
                                                                 "cluster"))
    return errs


def validate_service(service: Object) -> list[Cause]:
    """ValidateService."""
    errs = validate_object_meta(service.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns1035_label)
    spec = spec_of(service)
    kind = service_type(service)
    ports = spec.get("ports") or []
    headless = is_headless(service)
    if not ports and not headless and kind != EXTERNAL_NAME:
        errs.append(required("spec.ports"))
    if kind == LOAD_BALANCER:
        if headless:
            errs.append(invalid("spec.clusterIPs[0]", CLUSTER_IP_NONE,
                                "may not be set to 'None' for LoadBalancer services"))
        errs += [invalid(f"spec.ports[{i}]", KUBELET_PORT, f"may not expose port "
                                                           f"{KUBELET_PORT} externally since "
                                                           f"it is used by kubelet")
                 for i, port in enumerate(ports) if port.get("port") == KUBELET_PORT]
    elif kind == NODE_PORT and headless:
        errs.append(invalid("spec.clusterIPs[0]", CLUSTER_IP_NONE,
                            "may not be set to 'None' for NodePort services"))
    elif kind == EXTERNAL_NAME:
        for key in ("clusterIPs", "ipFamilies"):
            if spec.get(key):
                errs.append(forbidden(f"spec.{key}", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            errs.append(forbidden("spec.ipFamilyPolicy",
                                  "may not be set for ExternalName services"))
        cname = str(spec.get("externalName") or "").removesuffix(".")
        if cname:
            errs += [invalid("spec.externalName", cname, m) for m in is_dns1123_subdomain(cname)]
        else:
            errs.append(required("spec.externalName"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        errs += validate_service_port(port, require_name=len(ports) > 1, names=names,
                                      path=f"spec.ports[{i}]")
    if spec.get("selector") is not None:
        errs += validate_labels(spec["selector"], "spec.selector")
    affinity = spec.get("sessionAffinity") or ""
    if not affinity:
        errs.append(required("spec.sessionAffinity"))
    elif affinity not in SESSION_AFFINITIES:
        errs.append(not_supported("spec.sessionAffinity", affinity, SESSION_AFFINITIES))
    if affinity == AFFINITY_CLIENT_IP:
        errs += validate_client_ip_affinity(spec.get("sessionAffinityConfig"),
                                            "spec.sessionAffinityConfig")
    elif affinity == AFFINITY_NONE and spec.get("sessionAffinityConfig") is not None:
        errs.append(forbidden("spec.sessionAffinityConfig",
                              f"must not be set when session affinity is {AFFINITY_NONE}"))
    errs += validate_cluster_ips_related(service)
    for i, ip in enumerate(spec.get("externalIPs") or []):
        path = f"spec.externalIPs[{i}]"
        errs += [invalid(path, ip, INVALID_IP_MSG)] if not is_valid_ip(ip) else \
            validate_non_special_ip(ip, path)
    if not kind:
        errs.append(required("spec.type"))
    elif kind not in SERVICE_TYPES:
        errs.append(not_supported("spec.type", kind, SERVICE_TYPES))
    if kind == CLUSTER_IP:
        errs += [forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is "
                                                        "'ClusterIP'")
                 for i, port in enumerate(ports) if port.get("nodePort")]
    node_ports: set[tuple[str, int]] = set()
    port_keys: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        protocol = str(port.get("protocol") or "")
        if port.get("nodePort"):
            node_key = (protocol, int(port["nodePort"]))
            if node_key in node_ports:
                errs.append(duplicate(f"spec.ports[{i}].nodePort", port["nodePort"]))
            node_ports.add(node_key)
        port_key = (protocol, int(port.get("port") or 0))
        if port_key in port_keys:
            errs.append(duplicate(f"spec.ports[{i}]", go_service_port_key(*port_key)))
        port_keys.add(port_key)
    if spec.get("loadBalancerSourceRanges"):
        if kind != LOAD_BALANCER:
            errs.append(forbidden("spec.LoadBalancerSourceRanges",
                                  "may only be used when `type` is 'LoadBalancer'"))
        for i, cidr in enumerate(spec["loadBalancerSourceRanges"]):
            try:
                ipaddress.ip_network(cidr.strip(), strict=False)
            except ValueError:
                errs.append(invalid(f"spec.LoadBalancerSourceRanges[{i}]", cidr.strip(),
                                    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                    "2001:db8::/64)"))
    if spec.get("allocateLoadBalancerNodePorts") is not None and kind != LOAD_BALANCER:
        errs.append(forbidden("spec.allocateLoadBalancerNodePorts",
                              "may only be used when `type` is 'LoadBalancer'"))
    if kind == LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts") is None:
        errs.append(required("allocateLoadBalancerNodePorts"))
    if spec.get("loadBalancerClass") is not None:
        if kind != LOAD_BALANCER:
            errs.append(forbidden("spec.loadBalancerClass",
                                  "may only be used when `type` is 'LoadBalancer'"))
        else:
            errs += [invalid("spec.loadBalancerClass", spec["loadBalancerClass"], m)
                     for m in is_qualified_name(spec["loadBalancerClass"])]
    errs += validate_traffic_policies(service)
    return errs


def validate_traffic_policies(service: Mapping[str, Any]) -> list[Cause]:
    """validateServiceExternalTrafficPolicy, validateServiceInternalTrafficFieldsValue and
    validateServiceTrafficDistribution."""
    spec = spec_of(service)
    errs: list[Cause] = []
    external = spec.get("externalTrafficPolicy") or ""
    if not externally_accessible(service):
        if external:
            errs.append(invalid("spec.externalTrafficPolicy", external,
                                "may only be set for externally-accessible services"))
    elif not external:
        errs.append(required("spec.externalTrafficPolicy"))
    elif external not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.externalTrafficPolicy", external, TRAFFIC_POLICIES))
    health = spec.get("healthCheckNodePort") or 0
    if not needs_health_check(service):
        if health:
            errs.append(invalid("spec.healthCheckNodePort", health, "may only be set when "
                                "`type` is 'LoadBalancer' and `externalTrafficPolicy` is "
                                "'Local'"))
    elif health:
        errs += [invalid("spec.healthCheckNodePort", health, m) for m in is_valid_port_num(health)]
    internal = spec.get("internalTrafficPolicy")
    if internal is None and service_type(service) in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
        errs.append(required("spec.internalTrafficPolicy"))
    if internal is not None and internal not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.internalTrafficPolicy", internal, TRAFFIC_POLICIES))
    distribution = spec.get("trafficDistribution")
    if distribution is not None and distribution not in TRAFFIC_DISTRIBUTIONS:
        errs.append(not_supported("spec.trafficDistribution", distribution,
                                  TRAFFIC_DISTRIBUTIONS))
    return errs


def validate_create(service: Object) -> list[Cause]:
    return validate_service(service) + validate_single_stack(service)


def validate_cluster_ips_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """validateUpgradeDowngradeClusterIPs and validateUpgradeDowngradeIPFamilies, for the
    single-stack cluster kubelite is: a ClusterIP never changes, except to or from
    ExternalName (or between headless ones)."""
    if EXTERNAL_NAME in (service_type(new), service_type(old)):
        return []
    if is_headless(new) and is_headless(old):
        return []
    errs: list[Cause] = []
    new_ips, old_ips = cluster_ips(new), cluster_ips(old)
    if len(old_ips) == len(new_ips):
        errs += [invalid(f"spec.clusterIPs[{i}]", new_ips, "may not change once set")
                 for i, ip in enumerate(old_ips) if ip != new_ips[i]]
    elif len(old_ips) > len(new_ips):
        if not new_ips:
            errs.append(invalid("spec.clusterIPs[0]", new_ips, "primary clusterIP can not be "
                                                              "unset"))
        elif new_ips[0] != old_ips[0]:
            errs.append(invalid("spec.clusterIPs[0]", new_ips, "may not change once set"))
    elif old_ips and new_ips[0] != old_ips[0]:
        errs.append(invalid("spec.clusterIPs[0]", new_ips, "may not change once set"))
    if is_headless(new) == is_headless(old) and not is_headless(new):
        new_families = spec_of(new).get("ipFamilies") or []
        old_families = spec_of(old).get("ipFamilies") or []
        if len(new_families) == len(old_families) and new_families != old_families:
            errs.append(invalid("spec.ipFamilies[0]", new_families, "may not change once set"))
    return errs


def validate_update(new: Object, old: Object) -> list[Cause]:
    """ValidateServiceUpdate."""
    errs = validate_cluster_ips_update(new, old)
    if needs_health_check(old) and needs_health_check(new) and \
            spec_of(new).get("healthCheckNodePort") != spec_of(old).get("healthCheckNodePort"):
        errs.append(forbidden("spec.healthCheckNodePort", FIELD_IMMUTABLE_MSG))
    old_class = spec_of(old).get("loadBalancerClass")
    if service_type(old) == LOAD_BALANCER and service_type(new) == LOAD_BALANCER and \
            old_class != spec_of(new).get("loadBalancerClass"):
        errs.append(invalid("spec.loadBalancerClass", spec_of(new).get("loadBalancerClass"),
                            "may not change once set"))
    return errs + validate_create(new)


def validate_status_update(new: Object, old: Object) -> list[Cause]:
    """ValidateLoadBalancerStatus: each ingress point's ip is an IP."""
    errs: list[Cause] = []
    ingress = ((new.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    for i, point in enumerate(ingress):
        ip = point.get("ip") if isinstance(point, dict) else None
        if ip and not is_valid_ip(ip):
            errs.append(invalid(f"status.loadBalancer.ingress[{i}].ip", ip, INVALID_IP_MSG))
        if isinstance(point, dict) and point.get("ipMode") is not None and not ip:
            errs.append(forbidden(f"status.loadBalancer.ingress[{i}].ipMode",
                                  "may not be specified when `ip` is not"))
    return errs


def service_warnings(service: Object) -> list[str]:
    """getWarningsForService: what kube accepts but says it will not act on."""
    spec = spec_of(service)
    warnings = []
    if service_type(service) == EXTERNAL_NAME and spec.get("externalIPs"):
        warnings.append("spec.externalIPs is ignored when spec.type is \"ExternalName\"")
    if spec.get("loadBalancerIP"):
        warnings.append("spec.loadBalancerIP is ignored when spec.type is not \"LoadBalancer\""
                        if service_type(service) != LOAD_BALANCER else
                        "spec.loadBalancerIP is deprecated")
    if is_headless(service) and service_type(service) == CLUSTER_IP and \
            any(p.get("targetPort") not in (None, p.get("port")) for p in spec.get("ports") or []):
        warnings.append("spec.ports[].targetPort is ignored when spec.clusterIP is set to "
                        "\"None\"")
    return warnings


# --- what a Service holds: its ClusterIP and NodePorts ----------------------------------------

def refused_allocation(service: Mapping[str, Any], path: str, value: Any,
                       detail: str) -> errors.Invalid:
    name = str((service.get("metadata") or {}).get("name") or "")
    return errors.invalid("Service", name, [invalid(path, value, detail)])


def range_full(what: str, e: AllocationError) -> errors.InternalError:
    return errors.InternalError(f"Internal error occurred: failed to allocate a {what}: {e}",
                                details={"causes": [{"message": f"failed to allocate a "
                                                                f"{what}: {e}"}]})


async def reserve_service(service: Object, old: Object | None, ranges: ServiceRanges | None,
                          dry_run: bool) -> Reservation:
    """kube's allocateCreate/allocateUpdate: the requested ClusterIP and NodePorts are taken
    (or refused with ipallocator's and portallocator's words), the missing ones assigned,
    and what the old Service held and this one does not is given back once it is written.
    A dry run checks against the bitmaps and writes nothing."""
    reservation = Reservation(ranges)
    if ranges is None:
        return reservation
    old_ip = allocated_cluster_ip(old) if old is not None else None
    old_ports = set(allocated_node_ports(old)) if old is not None else set()
    try:
        await reserve_cluster_ip(service, old_ip, ranges, reservation, dry_run)
        await reserve_node_ports(service, old_ports, ranges, reservation, dry_run)
    except BaseException:
        if not dry_run:
            await reservation.revert()
        raise
    new_ip = allocated_cluster_ip(service)
    if old_ip is not None and old_ip != new_ip:
        reservation.freed_ips.append(old_ip)
    reservation.freed_ports = sorted(old_ports - set(allocated_node_ports(service)))
    if dry_run:
        reservation.ips, reservation.ports = [], []
        reservation.freed_ips, reservation.freed_ports = [], []
    return reservation


async def reserve_cluster_ip(service: Object, old_ip: str | None, ranges: ServiceRanges,
                             reservation: Reservation, dry_run: bool) -> None:
    spec = spec_of(service)
    if not needs_cluster_ip(service) or is_headless(service):
        return
    requested = allocated_cluster_ip(service)
    if requested is not None:
        if requested == old_ip:
            return
        try:
            if dry_run:
                await check_free(ranges.ips.store, ranges.ips.range.offset(requested),
                                 ranges.ips.range.not_in_range(requested),
                                 ranges.ips.range.allocated())
            else:
                await ranges.ips.allocate(requested)
        except AllocationError as e:
            raise refused_allocation(service, "spec.clusterIPs", cluster_ips(service),
                                     f"failed to allocate IP {requested}: {e}") from None
        reservation.ips.append(requested)
        return
    try:
        if dry_run:
            offset = (await ranges.ips.store.snapshot()).next_free(
                ranges.ips.store.reserved, ranges.ips.store.rand)
            if offset is None:
                raise Full()
            ip = ranges.ips.range.ip(offset)
        else:
            ip = await ranges.ips.allocate_next()
    except AllocationError as e:
        raise range_full("serviceIP", e) from None
    reservation.ips.append(ip)
    spec["clusterIP"], spec["clusterIPs"] = ip, [ip]


async def check_free(store: RangeAllocator, offset: int | None, outside: AllocationError,
                     taken: AllocationError) -> None:
    """A dry run's check of a requested value: in the range and free, nothing written."""
    if offset is None:
        raise outside
    if (await store.snapshot()).has(offset):
        raise taken


async def reserve_node_ports(service: Object, old_ports: set[int], ranges: ServiceRanges,
                             reservation: Reservation, dry_run: bool) -> None:
    spec = spec_of(service)
    allocator = ranges.ports
    requested: dict[int, str] = {}  # port -> the field that asks for it first
    for i, port in enumerate(spec.get("ports") or []):
        if port.get("nodePort"):
            requested.setdefault(int(port["nodePort"]), f"spec.ports[{i}].nodePort")
    if spec.get("healthCheckNodePort"):
        requested.setdefault(int(spec["healthCheckNodePort"]), "spec.healthCheckNodePort")
    for number, path in requested.items():
        if number in old_ports:
            continue
        try:
            if dry_run:
                await check_free(allocator.store, allocator.range.offset(number),
                                 allocator.range.not_in_range(number),
                                 allocator.range.allocated())
            else:
                await allocator.allocate(number)
        except AllocationError as e:
            raise refused_allocation(service, path, number, str(e)) from None
        reservation.ports.append(number)
    missing = [port for port in spec.get("ports") or []
               if needs_node_ports(service) and not port.get("nodePort")]
    wants_health = needs_health_check(service) and not spec.get("healthCheckNodePort")
    for target in [*missing, *([spec] if wants_health else [])]:
        try:
            if dry_run:
                offset = (await allocator.store.snapshot()).next_free(
                    allocator.store.reserved, allocator.store.rand)
                if offset is None:
                    raise Full()
                number = allocator.range.port(offset)
            else:
                number = await allocator.allocate_next()
        except AllocationError as e:
            raise range_full("nodePort", e) from None
        reservation.ports.append(number)
        target["healthCheckNodePort" if target is spec else "nodePort"] = number


async def release_service(service: Object, ranges: ServiceRanges | None) -> None:
    """A deleted Service's ClusterIP and NodePorts go back to their ranges."""
    if ranges is None:
        return
    ip = allocated_cluster_ip(service)
    if ip is not None:
        await ranges.ips.release([ip])
    await ranges.ports.release(allocated_node_ports(service))


# --- reads --------------------------------------------------------------------------------------

def service_fields(service: Mapping[str, Any]) -> dict[str, str]:
    """ServiceSelectableFields: the metadata fields, spec.clusterIP and spec.type."""
    fields = object_meta_fields(service, namespaced=True)
    spec = spec_of(service)
    fields["spec.clusterIP"] = field_text(spec.get("clusterIP"))
    fields["spec.type"] = field_text(spec.get("type"))
    return fields


FIELDS = SelectableFields(labels=frozenset({"metadata.name", "metadata.namespace",
                                            "spec.clusterIP", "spec.type"}),
                          get=service_fields)

TYPE_DOC = (
    "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
    "ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a "
    "cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by "
    "the selector or if that is not specified, by manual construction of an Endpoints object "
    "or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the "
    "endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" "
    "builds on ClusterIP and allocates a port on every node which routes to the same "
    "endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external "
    "load-balancer (if supported in the current cloud) which routes to the same endpoints as "
    "the clusterIP. \"ExternalName\" aliases this service to the specified externalName. "
    "Several other fields do not apply to ExternalName services. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#publishing-services-service-types")
CLUSTER_IP_DOC = (
    "clusterIP is the IP address of the service and is usually assigned randomly. If an "
    "address is specified manually, is in-range (as per system configuration), and is not in "
    "use, it will be allocated to the service; otherwise creation of the service will fail. "
    "This field may not be changed through updates unless the type field is also being "
    "changed to ExternalName (which requires this field to be blank) or the type field is "
    "being changed from ExternalName (in which case this field may optionally be specified, "
    "as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP "
    "address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is "
    "useful when direct endpoint connections are preferred and proxying is not required.  "
    "Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified "
    "when creating a Service of type ExternalName, creation will fail. This field will be "
    "wiped when updating a Service to type ExternalName. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#virtual-ips-and-service-proxies")
EXTERNAL_IPS_DOC = (
    "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
    "traffic for this service.  These IPs are not managed by Kubernetes.  The user is "
    "responsible for ensuring that traffic arrives at a node with this IP.  A common example "
    "is external load-balancers that are not part of the Kubernetes system.")
PORTS_DOC = (
    "The list of ports that are exposed by this service. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#virtual-ips-and-service-proxies")
SELECTOR_DOC = (
    "Route service traffic to pods with label keys and values matching this selector. If "
    "empty or not present, the service is assumed to have an external process managing its "
    "endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, "
    "and LoadBalancer. Ignored if type is ExternalName. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/")
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Type", TYPE_DOC),
    column("Cluster-IP", CLUSTER_IP_DOC),
    column("External-IP", EXTERNAL_IPS_DOC),
    column("Port(s)", PORTS_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("Selector", SELECTOR_DOC, priority=1),
]


def load_balancer_ips(service: Mapping[str, Any]) -> list[str]:
    """loadBalancerStatusStringer: each ingress point's ip, else its hostname."""
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    found = []
    for point in ingress:
        if isinstance(point, dict) and (point.get("ip") or point.get("hostname")):
            found.append(str(point.get("ip") or point.get("hostname")))
    return found


def external_ip_cell(service: Mapping[str, Any]) -> str:
    """getServiceExternalIP."""
    spec = spec_of(service)
    external = list(spec.get("externalIPs") or [])
    kind = service_type(service)
    if kind in (CLUSTER_IP, NODE_PORT):
        return ",".join(external) if external else NONE
    if kind == LOAD_BALANCER:
        found = load_balancer_ips(service) + external
        return ",".join(found) if found else "<pending>"
    if kind == EXTERNAL_NAME:
        return str(spec.get("externalName") or "")
    return "<unknown>"


def ports_cell(ports: list[Mapping[str, Any]]) -> str:
    """makePortString: `80/TCP`, `80:30080/TCP`, comma-separated."""
    pieces = []
    for port in ports:
        number, protocol = port.get("port", 0), port.get("protocol", "")
        node_port = port.get("nodePort") or 0
        pieces.append(f"{number}:{node_port}/{protocol}" if node_port > 0
                      else f"{number}/{protocol}")
    return ",".join(pieces) or NONE


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels: `k=v,...` sorted by key, or <none>."""
    if not labels:
        return NONE
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


def service_cells(service: Object, now: datetime) -> list[Any]:
    metadata = service.get("metadata") or {}
    spec = spec_of(service)
    ips = cluster_ips(service)
    return [metadata.get("name", ""), spec.get("type", ""), ips[0] if ips else NONE,
            external_ip_cell(service), ports_cell(spec.get("ports") or []),
            format_age(metadata.get("creationTimestamp"), now), format_labels(spec.get("selector"))]


SERVICES = Resource(
    plural="services", singular="service", kind="Service", namespaced=True, model=Service,
    storage_name="services", subresources=frozenset({"status"}), short_names=("svc",),
    categories=("all",),
    descriptions={
        "Service": "Service is a named abstraction of software service (for example, mysql) "
                   "consisting of local port (for example 3306) that the proxy listens on, and "
                   "the selector that determines which pods will answer requests sent through "
                   "the proxy.",
        "ServiceSpec": "ServiceSpec describes the attributes that a user creates on a service.",
        "ServicePort": "ServicePort contains information on service's port.",
        "ServiceStatus": "ServiceStatus represents the current status of a service.",
        "SessionAffinityConfig": "SessionAffinityConfig represents the configurations of "
                                 "session affinity.",
        "ClientIPConfig": "ClientIPConfig represents the configurations of Client IP based "
                          "session affinity.",
    },
    default=default_service, validate=validate_create, validate_update=validate_update,
    validate_status_update=validate_status_update, warnings=service_warnings,
    tracks_generation=False, returns_deleted_object=True, reserve=reserve_service, release=release_service,
    fields=FIELDS, columns=COLUMNS, cells=service_cells,
    merge_keys={"spec.ports": "port", "status.conditions": "type"},
)
