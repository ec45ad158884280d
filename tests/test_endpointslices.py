"""EndpointSlices (discovery.k8s.io/v1): kube's validation as pure functions, then on the
session apiserver: discovery of the group, defaults, generation, addressType immutable,
label selection by `kubernetes.io/service-name`, the Table as the real kubectl prints it,
and the official Python client."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from apiserver.resources.endpointslices import (
    endpoint_slice_cells,
    endpoints_cell,
    ports_cell,
    validate_endpoint_slice,
)
from tests.support import ApiServer, Kubectl, table_lines, unique

SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
MERGE = {"Content-Type": "application/merge-patch+json"}


def slice_body(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["172.17.0.5"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}], **fields}


# --- pure ------------------------------------------------------------------------------------

def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in validate_endpoint_slice(body)]


@pytest.mark.parametrize(("fields", "expected"), [
    ({"addressType": "IPX"}, [("addressType", 'Unsupported value: "IPX": supported values: '
                                              '"FQDN", "IPv4", "IPv6"')]),
    ({"addressType": ""}, [("addressType", "Required value")]),
    ({"endpoints": [{"addresses": []}]},
     [("endpoints[0].addresses", "Required value: must contain at least 1 address")]),
    ({"endpoints": [{"addresses": ["10.0.0.300"]}]},
     [("endpoints[0].addresses[0]", 'Invalid value: "10.0.0.300": must be a valid IPv4 '
                                    'address, (e.g. 10.9.8.7)')]),
    ({"endpoints": [{"addresses": ["127.0.0.1"]}]},
     [("endpoints[0].addresses[0]", 'Invalid value: "127.0.0.1": may not be in the loopback '
                                    'range (127.0.0.0/8, ::1/128)')]),
    ({"endpoints": [{"addresses": ["10.0.0.1"]}] * 1001},
     [("endpoints", "Too many: 1001: must have at most 1000 items")]),
    ({"ports": [{"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "TCP"}]},
     [("ports[1].name", 'Duplicate value: "a"')]),
    ({"ports": [{"name": "a", "protocol": "ICMP"}]},
     [("ports[0].protocol", 'Unsupported value: "ICMP": supported values: "SCTP", "TCP", '
                            '"UDP"')]),
    ({"endpoints": [{"addresses": ["10.0.0.1"], "hostname": "Web_1"}]},
     [("endpoints[0].hostname", 'Invalid value: "Web_1": a lowercase RFC 1123 label must '
                                'consist of lower case alphanumeric characters or \'-\', and '
                                'must start and end with an alphanumeric character (e.g. '
                                '\'my-name\',  or \'123-abc\', regex used for validation is '
                                '\'[a-z0-9]([-a-z0-9]*[a-z0-9])?\')')]),
])
def test_validate(fields: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    body = slice_body("web-abc", **fields)
    body["metadata"]["namespace"] = "default"
    assert causes(body) == expected


def test_cells() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    body = slice_body("web-abc", endpoints=[{"addresses": [f"10.0.0.{i}"]} for i in range(5)],
                      ports=[{"port": 80}, {"name": "dns"}, {}, {"port": 9}])
    body["metadata"]["creationTimestamp"] = "2025-12-31T23:00:00Z"
    assert endpoint_slice_cells(body, now) == [
        "web-abc", "IPv4", "80,dns,* + 1 more...", "10.0.0.0,10.0.0.1,10.0.0.2 + 2 more...",
        "60m"]
    assert (ports_cell([]), endpoints_cell([])) == ("<unset>", "<unset>")


# --- on the apiserver --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path_factory.mktemp("eps-kubectl"))


async def test_discovery_serves_the_group(http: httpx.AsyncClient) -> None:
    group = (await http.get("/apis/discovery.k8s.io")).json()
    assert group["preferredVersion"] == {"groupVersion": "discovery.k8s.io/v1", "version": "v1"}
    resources = (await http.get("/apis/discovery.k8s.io/v1")).json()["resources"]
    assert [(r["name"], r["kind"], r["namespaced"]) for r in resources] == [
        ("endpointslices", "EndpointSlice", True)]


async def test_create_defaults_generation_and_immutable_address_type(
        http: httpx.AsyncClient) -> None:
    name = unique("web")
    body = slice_body(name, ports=[{"port": 8080}])
    created = await http.post(SLICES, json=body)
    assert created.status_code == 201, created.text
    stored = created.json()
    assert stored["ports"] == [{"name": "", "protocol": "TCP", "port": 8080}]
    assert stored["metadata"]["generation"] == 1
    relabelled = await http.patch(f"{SLICES}/{name}", headers=MERGE,
                                  content='{"metadata":{"labels":{"x":"y"}}}')
    assert relabelled.json()["metadata"]["generation"] == 1
    moved = await http.patch(f"{SLICES}/{name}", headers=MERGE,
                             content='{"endpoints":[{"addresses":["172.17.0.9"]}]}')
    assert moved.json()["metadata"]["generation"] == 2
    refused = await http.patch(f"{SLICES}/{name}", headers=MERGE,
                               content='{"addressType":"IPv6","endpoints":[]}')
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "addressType",
         "message": 'Invalid value: "IPv6": field is immutable'}]


async def test_bad_slice_is_422_and_nothing_is_written(http: httpx.AsyncClient) -> None:
    name = unique("bad")
    answer = await http.post(SLICES, json=slice_body(name, addressType="IPX"))
    assert answer.status_code == 422
    assert answer.json()["message"].startswith(
        f'EndpointSlice.discovery.k8s.io "{name}" is invalid: addressType: Unsupported value')
    assert (await http.get(f"{SLICES}/{name}")).status_code == 404


def test_kubectl_get_endpointslices(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("kubectl-web")
    manifest = tmp_path / "slice.yaml"
    body = slice_body(name, endpoints=[{"addresses": ["172.17.0.5"]},
                                       {"addresses": ["172.17.0.6"]}])
    body["metadata"]["labels"] = {"kubernetes.io/service-name": name}
    manifest.write_text(json.dumps(body))
    kubectl("apply", "-f", str(manifest))
    rows = table_lines(kubectl("get", "endpointslices", "-l",
                               f"kubernetes.io/service-name={name}"))
    assert rows[0] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert rows[1][:4] == [name, "IPv4", "8080", "172.17.0.5,172.17.0.6"]
    kubectl("delete", "endpointslice", name)
    assert "No resources found" in kubectl.run("get", "endpointslices", "-l",
                                               f"kubernetes.io/service-name={name}").stderr


def test_official_python_client(apiserver: ApiServer) -> None:
    configuration = apiserver.configure(kubernetes.client.Configuration())
    name = unique("py-web")
    with kubernetes.client.ApiClient(configuration) as api_client:
        api = kubernetes.client.DiscoveryV1Api(api_client)
        api.create_namespaced_endpoint_slice("default", kubernetes.client.V1EndpointSlice(
            metadata=kubernetes.client.V1ObjectMeta(
                name=name, labels={"kubernetes.io/service-name": name}),
            address_type="IPv4",
            endpoints=[kubernetes.client.V1Endpoint(
                addresses=["172.17.0.7"],
                conditions=kubernetes.client.V1EndpointConditions(ready=True))],
            ports=[kubernetes.client.DiscoveryV1EndpointPort(name="http", port=80)]))
        listed = api.list_namespaced_endpoint_slice(
            "default", label_selector=f"kubernetes.io/service-name={name}")
        assert [(s.metadata.name, s.endpoints[0].addresses, s.ports[0].protocol)
                for s in listed.items] == [(name, ["172.17.0.7"], "TCP")]
        api.delete_namespaced_endpoint_slice(name, "default")
        assert api.list_namespaced_endpoint_slice(
            "default", label_selector=f"kubernetes.io/service-name={name}").items == []
