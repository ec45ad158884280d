"""EndpointSlices (discovery.k8s.io/v1): the strategy of pkg/registry/discovery/endpointslice
(SetDefaults_EndpointPort, ValidateEndpointSlice with addressType immutable, the Table of
printEndpointSlice), as one `Resource`. Who writes them is the EndpointSlice controller's
business (and the apiserver's own, for the `kubernetes` Service); the label
`kubernetes.io/service-name` says which Service a slice belongs to."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.services import PROTOCOLS, validate_non_special_ip
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    cause,
    duplicate,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    name_is_dns_subdomain,
    not_supported,
    required,
    validate_labels,
    validate_object_meta,
)
from common.models import EndpointSlice

Object = dict[str, Any]

DISCOVERY_GROUP = "discovery.k8s.io"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")  # sets.List: sorted
MAX_ADDRESSES = 100
MAX_PORTS = 20000
MAX_ENDPOINTS = 1000
MAX_TOPOLOGY_LABELS = 16
MAX_ZONE_HINTS = 8
MAX_NODE_HINTS = 8
ZONE_LABEL = "topology.kubernetes.io/zone"


def too_many(path: str, actual: int, limit: int) -> Cause:
    """field.TooMany."""
    return cause("FieldValueTooMany", path, actual, f"must have at most {limit} items")


def default_endpoint_slice(slice_: Object, old: Object | None) -> None:
    """SetDefaults_EndpointPort (a port's name is "" and its protocol TCP), and the
    strategy's generation: 1 on create, one more whenever anything but metadata changes."""
    for port in slice_.get("ports") or []:
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")
    metadata = slice_.setdefault("metadata", {})
    if old is None:
        metadata["generation"] = 1
    elif without_metadata(slice_) != without_metadata(old):
        metadata["generation"] = int((old.get("metadata") or {}).get("generation") or 0) + 1


def without_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items()
            if key not in ("metadata", "kind", "apiVersion")}


def validate_address(address: str, address_type: str, path: str) -> list[Cause]:
    """IsValidIPv4Address / IsValidIPv6Address then ValidateNonSpecialIP, or an FQDN."""
    if address_type in ("IPv4", "IPv6"):
        version = 4 if address_type == "IPv4" else 6
        try:
            parsed = ipaddress.ip_address(address)
        except ValueError:
            parsed = None
        if parsed is None or parsed.version != version:
            example = "10.9.8.7" if version == 4 else "2001:db8::ffff"
            return [invalid(path, address, f"must be a valid IPv{version} address, "
                                           f"(e.g. {example})")]
        return validate_non_special_ip(address, path)
    if address_type == "FQDN":
        return validate_fqdn(address, path)
    return []


def validate_fqdn(name: str, path: str) -> list[Cause]:
    """IsFullyQualifiedDomainName: a subdomain with at least two labels."""
    name = name.removesuffix(".")
    errs = [invalid(path, name, m) for m in is_dns1123_subdomain(name)]
    if not errs and len(name.split(".")) < 2:
        errs.append(invalid(path, name, "should be a domain with at least two segments "
                                        "separated by dots"))
    return errs


def validate_hints(hints: Mapping[str, Any], path: str) -> list[Cause]:
    errs: list[Cause] = []
    for key, limit in (("forZones", MAX_ZONE_HINTS), ("forNodes", MAX_NODE_HINTS)):
        entries = hints.get(key) or []
        if len(entries) > limit:
            errs.append(too_many(f"{path}.{key}", len(entries), limit))
            continue
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            name = str((entry or {}).get("name") or "")
            if name in seen:
                errs.append(duplicate(f"{path}.{key}[{i}].name", name))
            seen.add(name)
    return errs


def validate_endpoints(slice_: Mapping[str, Any]) -> list[Cause]:
    endpoints = slice_.get("endpoints") or []
    address_type = str(slice_.get("addressType") or "")
    if len(endpoints) > MAX_ENDPOINTS:
        return [too_many("endpoints", len(endpoints), MAX_ENDPOINTS)]
    errs: list[Cause] = []
    for i, endpoint in enumerate(endpoints):
        path = f"endpoints[{i}]"
        addresses = endpoint.get("addresses") or []
        if not addresses:
            errs.append(required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            errs.append(too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            errs += validate_address(address, address_type, f"{path}.addresses[{j}]")
        if endpoint.get("nodeName") is not None:
            node = endpoint["nodeName"]
            errs += [invalid(f"{path}.nodeName", node, m) for m in name_is_dns_subdomain(node,
                                                                                        False)]
        topology = endpoint.get("deprecatedTopology") or {}
        if len(topology) > MAX_TOPOLOGY_LABELS:
            errs.append(too_many(f"{path}.deprecatedTopology", len(topology),
                                 MAX_TOPOLOGY_LABELS))
        errs += validate_labels(topology, f"{path}.deprecatedTopology")
        if endpoint.get("hostname") is not None:
            errs += [invalid(f"{path}.hostname", endpoint["hostname"], m)
                     for m in is_dns1123_label(endpoint["hostname"])]
        if endpoint.get("hints") is not None:
            errs += validate_hints(endpoint["hints"], f"{path}.hints")
    return errs


def validate_ports(ports: list[Mapping[str, Any]]) -> list[Cause]:
    if len(ports) > MAX_PORTS:
        return [too_many("ports", len(ports), MAX_PORTS)]
    errs: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        path = f"ports[{i}]"
        name = str(port.get("name") or "")
        if name:
            errs += [invalid(f"{path}.name", name, m) for m in is_dns1123_label(name)]
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
        protocol = port.get("protocol")
        if protocol is None:
            errs.append(required(f"{path}.protocol"))
        elif protocol not in PROTOCOLS:
            errs.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
        if port.get("appProtocol") is not None:
            errs += [invalid(f"{path}.appProtocol", port["appProtocol"], m)
                     for m in is_qualified_name(port["appProtocol"])]
    return errs


def validate_endpoint_slice(slice_: Object) -> list[Cause]:
    """ValidateEndpointSlice."""
    errs = validate_object_meta(slice_.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    address_type = slice_.get("addressType") or ""
    if not address_type:
        errs.append(required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        errs.append(not_supported("addressType", address_type, ADDRESS_TYPES))
    errs += validate_endpoints(slice_)
    return errs + validate_ports(slice_.get("ports") or [])


def validate_update(new: Object, old: Object) -> list[Cause]:
    errs = validate_endpoint_slice(new)
    if new.get("addressType") != old.get("addressType"):
        errs.append(invalid("addressType", new.get("addressType"), FIELD_IMMUTABLE_MSG))
    return errs


ADDRESS_TYPE_DOC = (
    "addressType specifies the type of address carried by this EndpointSlice. All addresses "
    "in this slice must be the same type. This field is immutable after creation. The "
    "following address types are currently supported: * IPv4: Represents an IPv4 Address. * "
    "IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. "
    "(Deprecated) The EndpointSlice controller only generates, and kube-proxy only "
    "processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for "
    "the \"FQDN\" type.")
PORTS_DOC = (
    "ports specifies the list of network ports exposed by each endpoint in this slice. Each "
    "port must have a unique name. Each slice may include a maximum of 100 ports. Services "
    "always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller "
    "will likewise always have at least 1 port. EndpointSlices used for other purposes may "
    "have an empty ports list.")
ENDPOINTS_DOC = (
    "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum "
    "of 1000 endpoints.")
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("AddressType", ADDRESS_TYPE_DOC),
    column("Ports", PORTS_DOC),
    column("Endpoints", ENDPOINTS_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
]
MAX_SHOWN = 3


def list_with_more(shown: list[str], count: int) -> str:
    """listWithMoreString: the first three, `+ N more...`, or <unset>."""
    if count > MAX_SHOWN:
        return f"{','.join(shown)} + {count - MAX_SHOWN} more..."
    return ",".join(shown) or "<unset>"


def ports_cell(ports: list[Mapping[str, Any]]) -> str:
    """formatDiscoveryPorts: each port's number, else its name, else `*`."""
    shown = []
    for port in ports[:MAX_SHOWN]:
        if port.get("port") is not None:
            shown.append(str(port["port"]))
        elif port.get("name") is not None:
            shown.append(str(port["name"]))
        else:
            shown.append("*")
    return list_with_more(shown, len(ports))


def endpoints_cell(endpoints: list[Mapping[str, Any]]) -> str:
    """formatDiscoveryEndpoints: the addresses of every endpoint."""
    addresses = [str(a) for endpoint in endpoints for a in endpoint.get("addresses") or []]
    return list_with_more(addresses[:MAX_SHOWN], len(addresses))


def endpoint_slice_cells(slice_: Object, now: datetime) -> list[Any]:
    metadata = slice_.get("metadata") or {}
    return [metadata.get("name", ""), slice_.get("addressType", ""),
            ports_cell(slice_.get("ports") or []), endpoints_cell(slice_.get("endpoints") or []),
            format_age(metadata.get("creationTimestamp"), now)]


ENDPOINT_SLICES = Resource(
    plural="endpointslices", singular="endpointslice", kind="EndpointSlice", namespaced=True,
    model=EndpointSlice, storage_name="endpointslices", group=DISCOVERY_GROUP,
    descriptions={
        "EndpointSlice": "EndpointSlice represents a set of service endpoints. Most "
                         "EndpointSlices are created by the EndpointSlice controller to "
                         "represent the Pods selected by Service objects. For a given service "
                         "there may be multiple EndpointSlice objects which must be joined to "
                         "produce the full set of endpoints; you can find all of the slices "
                         "for a given service by listing EndpointSlices in the service's "
                         "namespace whose `kubernetes.io/service-name` label contains the "
                         "service's name.",
        "Endpoint": "Endpoint represents a single logical \"backend\" implementing a service.",
        "EndpointConditions": "EndpointConditions represents the current condition of an "
                              "endpoint.",
        "EndpointPort": "EndpointPort represents a Port used by an EndpointSlice",
        "EndpointHints": "EndpointHints provides hints describing how an endpoint should be "
                         "consumed.",
    },
    default=default_endpoint_slice, validate=validate_endpoint_slice,
    validate_update=validate_update, tracks_generation=False,
    columns=COLUMNS, cells=endpoint_slice_cells,
)
