"""The Service strategy as pure functions: kube's defaults, ValidateService's causes, the
update rules for clusterIP, and printService's cells."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver.resources.services import (
    SERVICES,
    allocated_cluster_ip,
    allocated_node_ports,
    default_service,
    ports_cell,
    service_cells,
    validate_create,
    validate_update,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def service(spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default",
                         "creationTimestamp": "2025-12-31T23:59:00Z"}, "spec": spec}


def defaulted(spec: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = service(copy.deepcopy(spec))
    default_service(obj, old)
    return obj


def messages(spec: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in validate_create(defaulted(spec))]


def test_cluster_ip_defaults() -> None:
    svc = defaulted({"ports": [{"port": 80}], "selector": {"app": "web"}})
    assert svc["spec"] == {
        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
        "selector": {"app": "web"}, "sessionAffinity": "None", "type": "ClusterIP",
        "internalTrafficPolicy": "Cluster", "ipFamilyPolicy": "SingleStack",
        "ipFamilies": ["IPv4"]}
    assert svc["status"] == {"loadBalancer": {}}
    assert validate_create(svc) == []


def test_node_port_and_client_ip_defaults() -> None:
    svc = defaulted({"type": "NodePort", "ports": [{"port": 80, "targetPort": "http"}],
                     "sessionAffinity": "ClientIP"})
    assert svc["spec"]["externalTrafficPolicy"] == "Cluster"
    assert svc["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert validate_create(svc) == []


def test_headless_without_selector_is_require_dual_stack_as_kube_makes_it() -> None:
    svc = defaulted({"clusterIP": "None", "ports": [{"port": 53}]})
    assert svc["spec"]["clusterIPs"] == ["None"]
    assert (svc["spec"]["ipFamilyPolicy"], svc["spec"]["ipFamilies"]) == (
        "RequireDualStack", ["IPv4", "IPv6"])
    assert validate_create(svc) == []
    assert allocated_cluster_ip(svc) is None


def test_external_name_has_no_cluster_ip_fields() -> None:
    svc = defaulted({"type": "ExternalName", "externalName": "db.example.com."})
    assert "ipFamilies" not in svc["spec"] and "internalTrafficPolicy" not in svc["spec"]
    assert validate_create(svc) == []
    assert messages({"type": "ExternalName", "externalName": "db.example.com",
                     "clusterIP": "10.96.0.9"}) == [
        ("spec.clusterIPs", "Forbidden: may not be set for ExternalName services")]


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, [("spec.ports", "Required value")]),
    ({"ports": [{"port": 80}, {"port": 81}]},
     [("spec.ports[0].name", "Required value"), ("spec.ports[1].name", "Required value")]),
    ({"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 81}]},
     [("spec.ports[1].name", 'Duplicate value: "a"')]),
    ({"ports": [{"port": 0}]},  # and targetPort, defaulted to the port
     [("spec.ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive"),
      ("spec.ports[0].targetPort", "Invalid value: 0: must be between 1 and 65535, inclusive")]),
    ({"ports": [{"port": 80, "targetPort": "Web_Port"}]},
     [("spec.ports[0].targetPort", 'Invalid value: "Web_Port": must contain only '
                                   'alpha-numeric characters (a-z, 0-9), and hyphens (-)')]),
    ({"ports": [{"port": 80, "protocol": "ICMP"}]},
     [("spec.ports[0].protocol",
       'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"')]),
    ({"type": "Magic", "ports": [{"port": 80}]},
     [("spec.type", 'Unsupported value: "Magic": supported values: "ClusterIP", '
                    '"ExternalName", "LoadBalancer", "NodePort"')]),
    ({"ports": [{"port": 80, "nodePort": 30080}]},
     [("spec.ports[0].nodePort", "Forbidden: may not be used when `type` is 'ClusterIP'")]),
    ({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]},
     [("spec.clusterIPs[0]", "Invalid value: \"None\": may not be set to 'None' for NodePort "
                             "services")]),
    ({"clusterIP": "10.96.0.300", "ports": [{"port": 80}]},
     [("spec.clusterIPs[0]", 'Invalid value: "10.96.0.300": must be a valid IP address, '
                             '(e.g. 10.9.8.7 or 2001:db8::ffff)')]),
    ({"ports": [{"port": 80}], "sessionAffinity": "Sticky"},
     [("spec.sessionAffinity",
       'Unsupported value: "Sticky": supported values: "ClientIP", "None"')]),
    ({"ports": [{"port": 80}], "sessionAffinity": "ClientIP",
      "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 90000}}},
     [("spec.sessionAffinityConfig.clientIP.timeoutSeconds",
       "Invalid value: 90000: must be greater than 0 and less than 86400")]),
    ({"ports": [{"port": 80}], "externalTrafficPolicy": "Local"},
     [("spec.externalTrafficPolicy",
       'Invalid value: "Local": may only be set for externally-accessible services')]),
    ({"ports": [{"port": 80}], "ipFamilyPolicy": "RequireDualStack"},
     [("spec.ipFamilyPolicy", 'Invalid value: "RequireDualStack": this cluster is not '
                              'configured for dual-stack services')]),
    ({"ports": [{"port": 80}], "externalIPs": ["127.0.0.1"]},
     [("spec.externalIPs[0]", 'Invalid value: "127.0.0.1": may not be in the loopback '
                              'range (127.0.0.0/8, ::1/128)')]),
])
def test_validate_service(spec: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert messages(spec) == expected


def test_duplicate_port_is_named_as_kube_prints_it() -> None:
    [(field, message)] = messages({"ports": [{"name": "a", "port": 80},
                                             {"name": "b", "port": 80}]})
    assert field == "spec.ports[1]"
    assert message.startswith('Duplicate value: core.ServicePort{Name:"", Protocol:"TCP"')


def test_service_name_is_a_dns1035_label() -> None:
    svc = defaulted({"ports": [{"port": 80}]})
    svc["metadata"]["name"] = "9web"
    [cause] = validate_create(svc)
    assert cause["field"] == "metadata.name"
    assert "a DNS-1035 label must consist of lower case alphanumeric characters" in \
        cause["message"]


def test_update_keeps_what_was_allocated_and_refuses_a_new_cluster_ip() -> None:
    old = defaulted({"type": "NodePort", "clusterIP": "10.96.0.10",
                     "ports": [{"port": 80, "nodePort": 30080}]})
    # kubectl replace of a manifest without clusterIP or nodePort keeps both
    new = defaulted({"type": "NodePort", "ports": [{"port": 80}]}, old)
    assert new["spec"]["clusterIPs"] == ["10.96.0.10"]
    assert new["spec"]["ports"][0]["nodePort"] == 30080
    assert validate_update(new, old) == []
    moved = defaulted({"type": "NodePort", "clusterIP": "10.96.0.11",
                       "ports": [{"port": 80}]}, old)
    assert [(c["field"], c["message"]) for c in validate_update(moved, old)] == [
        ("spec.clusterIPs[0]", 'Invalid value: []string{"10.96.0.11"}: may not change once set')]


def test_type_change_drops_node_ports_and_to_external_name_drops_the_cluster_ip() -> None:
    old = defaulted({"type": "NodePort", "clusterIP": "10.96.0.10",
                     "ports": [{"port": 80, "nodePort": 30080}]})
    old_spec = copy.deepcopy(old["spec"])
    cluster_ip = defaulted({**old_spec, "type": "ClusterIP"}, old)
    assert "nodePort" not in cluster_ip["spec"]["ports"][0]
    assert "externalTrafficPolicy" not in cluster_ip["spec"]
    assert validate_update(cluster_ip, old) == []
    external = defaulted({**old_spec, "type": "ExternalName", "externalName": "x.example"}, old)
    assert "clusterIP" not in external["spec"] and "clusterIPs" not in external["spec"]
    assert "ipFamilies" not in external["spec"]
    assert validate_update(external, old) == []


def test_holdings() -> None:
    svc = defaulted({"type": "NodePort", "clusterIP": "10.96.0.10",
                     "ports": [{"name": "a", "port": 80, "nodePort": 30080},
                               {"name": "b", "port": 81, "nodePort": 30081}]})
    assert allocated_cluster_ip(svc) == "10.96.0.10"
    assert allocated_node_ports(svc) == [30080, 30081]


def test_table_cells() -> None:
    svc = defaulted({"type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"b": "2",
                                                                                 "a": "1"},
                     "ports": [{"name": "a", "port": 80, "nodePort": 30080},
                               {"name": "b", "port": 53, "protocol": "UDP"}]})
    assert service_cells(svc, NOW) == ["web", "NodePort", "10.96.0.10", "<none>",
                                       "80:30080/TCP,53/UDP", "60s", "a=1,b=2"]
    balancer = defaulted({"type": "LoadBalancer", "ports": [{"port": 443}]})
    assert service_cells(balancer, NOW)[2:5] == ["<none>", "<pending>", "443/TCP"]
    external = defaulted({"type": "ExternalName", "externalName": "db.example.com"})
    assert service_cells(external, NOW)[1:5] == ["ExternalName", "<none>", "db.example.com",
                                                 "<none>"]
    assert ports_cell([]) == "<none>"
    assert [c["name"] for c in SERVICES.columns] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
