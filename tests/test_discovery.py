"""Discovery, /version and OpenAPI: the documents' shapes, then the real kubectl reading them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from apiserver import discovery, openapi
from tests.support import ApiServer, Kubectl, table_lines, unique

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json")
@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(discovery.router)
    app.include_router(openapi.router)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:6443") as test_client:
        yield test_client


async def test_legacy_api_versions(client: httpx.AsyncClient) -> None:
    response = await client.get("/api", headers={"Accept": "application/json"})
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"kind": "APIVersions", "versions": ["v1"],
                               "serverAddressByClientCIDRs": [
                                   {"clientCIDR": "0.0.0.0/0",
                                    "serverAddress": "127.0.0.1:6443"}]}
    groups = (await client.get("/apis")).json()
    coordination_v1 = {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}
    assert groups == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "coordination.k8s.io", "versions": [coordination_v1],
         "preferredVersion": coordination_v1}]}


async def test_api_group_and_its_resource_list(client: httpx.AsyncClient) -> None:
    group = (await client.get("/apis/coordination.k8s.io")).json()
    coordination_v1 = {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}
    assert group == {"kind": "APIGroup", "apiVersion": "v1", "name": "coordination.k8s.io",
                     "versions": [coordination_v1], "preferredVersion": coordination_v1}
    resources = (await client.get("/apis/coordination.k8s.io/v1")).json()
    assert resources == {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "coordination.k8s.io/v1",
        "resources": [{"name": "leases", "singularName": "lease", "namespaced": True,
                       "kind": "Lease",
                       "verbs": ["create", "delete", "deletecollection", "get", "list",
                                 "patch", "update", "watch"]}]}
    for path in ("/apis/apps", "/apis/coordination.k8s.io/v2", "/apis/apps/v1"):
        missing = await client.get(path)
        assert missing.status_code == 404, path
        assert missing.json()["message"] == "the server could not find the requested resource"


async def test_api_resource_list(client: httpx.AsyncClient) -> None:
    body = (await client.get("/api/v1")).json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert sorted(by_name) == [
        "events", "namespaces", "namespaces/status", "nodes", "nodes/status", "pods",
        "pods/binding", "pods/log", "pods/status", "services"]
    assert by_name["pods"] == {
        "name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch"],
        "shortNames": ["po"], "categories": ["all"]}
    assert by_name["pods/binding"] == {"name": "pods/binding", "singularName": "",
                                       "namespaced": True, "kind": "Binding",
                                       "verbs": ["create"]}
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert by_name["nodes/status"]["verbs"] == ["get", "patch", "update"]
    assert (by_name["nodes"]["namespaced"], by_name["nodes"]["shortNames"]) == (False, ["no"])
    assert by_name["events"]["shortNames"] == ["ev"]
    assert (by_name["namespaces"]["kind"], by_name["namespaces"]["shortNames"]) == (
        "Namespace", ["ns"])
    assert by_name["services"]["verbs"] == ["get", "list"]


async def test_aggregated_discovery(client: httpx.AsyncClient) -> None:
    response = await client.get("/api", headers={"Accept": AGGREGATED_ACCEPT})
    assert response.headers["content-type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    body = response.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList",
                                                  "apidiscovery.k8s.io/v2")
    [core] = body["items"]
    [version] = core["versions"]
    assert (version["version"], version["freshness"]) == ("v1", "Current")
    pods = next(r for r in version["resources"] if r["resource"] == "pods")
    assert pods == {
        "resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
        "scope": "Namespaced", "singularResource": "pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch"],
        "shortNames": ["po"], "categories": ["all"],
        "subresources": [
            {"subresource": "binding", "verbs": ["create"],
             "responseKind": {"group": "", "version": "v1", "kind": "Binding"}},
            {"subresource": "log", "verbs": ["get"],
             "responseKind": {"group": "", "version": "v1", "kind": "Pod"}},
            {"subresource": "status", "verbs": ["get", "patch", "update"],
             "responseKind": {"group": "", "version": "v1", "kind": "Pod"}}]}
    nodes = next(r for r in version["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"
    assert core["metadata"] == {"creationTimestamp": None}
    groups = await client.get("/apis", headers={"Accept": AGGREGATED_ACCEPT})
    assert groups.json()["items"] == [{
        "metadata": {"name": "coordination.k8s.io", "creationTimestamp": None},
        "versions": [{"version": "v1", "freshness": "Current", "resources": [{
            "resource": "leases",
            "responseKind": {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"},
            "scope": "Namespaced", "singularResource": "lease",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                      "update", "watch"]}]}]}]
    beta = await client.get("/apis", headers={"Accept": AGGREGATED_ACCEPT.split(",", 1)[1]})
    assert beta.headers["content-type"].endswith(";v=v2beta1;as=APIGroupDiscoveryList")


@pytest.mark.parametrize(("accept", "expected"), [
    (AGGREGATED_ACCEPT, "v2"),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", "v2beta1"),
    ("application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
     None),
    ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", None),
    ("application/json", None), ("*/*", None), (None, None),
])
def test_aggregated_negotiation(accept: str | None, expected: str | None) -> None:
    assert discovery.aggregated_version(accept) == expected


async def test_version(client: httpx.AsyncClient) -> None:
    info = (await client.get("/version")).json()
    assert (info["major"], info["minor"]) == ("1", "37")
    assert info["gitVersion"] == "v1.37.0+kubelite"
    assert re.fullmatch(r"[a-z]+/[a-z0-9]+", info["platform"])
    assert {"buildDate", "goVersion", "compiler", "gitCommit", "gitTreeState"} <= info.keys()


def supports_field_validation(document: dict[str, Any], kind: str, group: str = "") -> bool:
    """kubectl's queryParamVerifierV3: a PATCH of `kind` that takes ?fieldValidation."""
    for path in document["paths"].values():
        operation = path.get("patch")
        if operation and operation.get("x-kubernetes-group-version-kind") == {
                "group": group, "version": "v1", "kind": kind}:
            return any(p["name"] == "fieldValidation" and p["in"] == "query"
                       for p in operation["parameters"])
    return False


async def test_openapi_v3(client: httpx.AsyncClient) -> None:
    index = (await client.get("/openapi/v3")).json()
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    response = await client.get(url)
    assert response.headers["cache-control"] == "public, immutable"
    document = response.json()
    assert document["openapi"].startswith("3.")
    for kind in ("Pod", "Node", "Event", "Namespace"):
        assert supports_field_validation(document, kind), kind
        schema = document["components"]["schemas"][f"io.k8s.api.core.v1.{kind}"]
        assert schema["x-kubernetes-group-version-kind"] == [
            {"group": "", "version": "v1", "kind": kind}]
    pod_patch = document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    # Leaving strategic merge patch out makes kubectl apply use its compiled-in Pod type.
    assert "application/strategic-merge-patch+json" not in pod_patch["requestBody"]["content"]
    assert "/api/v1/nodes/{name}/status" in document["paths"]


async def test_openapi_v3_of_a_group(client: httpx.AsyncClient) -> None:
    index = (await client.get("/openapi/v3")).json()
    url = index["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/coordination.k8s.io/v1?hash=")
    document = (await client.get(url)).json()
    assert supports_field_validation(document, "Lease", "coordination.k8s.io")
    assert sorted(document["paths"]) == [
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
    item = document["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
    assert item["put"]["operationId"] == "replaceCoordinationV1NamespacedLease"
    assert item["put"]["tags"] == ["coordination_v1"]
    schemas = document["components"]["schemas"]
    lease = schemas["io.k8s.api.coordination.v1.Lease"]
    assert lease["x-kubernetes-group-version-kind"] == [
        {"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}]
    assert lease["properties"]["spec"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.coordination.v1.LeaseSpec"}]
    assert set(schemas["io.k8s.api.coordination.v1.LeaseSpec"]["properties"]) == {
        "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
        "leaseTransitions", "strategy", "preferredHolder"}
    assert (await client.get("/openapi/v3/apis/apps/v1")).status_code == 404


async def test_services_are_served_empty(client: httpx.AsyncClient) -> None:
    listed = await client.get("/api/v1/namespaces/kube-system/services",
                        params={"labelSelector": "kubernetes.io/cluster-service=true"})
    assert listed.json()["kind"] == "ServiceList"
    assert listed.json()["items"] == []
    missing = await client.get("/api/v1/namespaces/default/services/web")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'services "web" not found'


# --- the real kubectl against the live apiserver ---------------------------------------------

@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path / "kubectl")


def test_kubectl_version(kubectl: Kubectl) -> None:
    result = kubectl.run("version")
    assert "Client Version: v1.37.1" in result.stdout
    assert "Server Version: v1.37.0+kubelite" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_kubectl_api_resources(kubectl: Kubectl) -> None:
    rows = table_lines(kubectl("api-resources"))
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert rows[1:] == [["events", "ev", "v1", "true", "Event"],
                        ["namespaces", "ns", "v1", "false", "Namespace"],
                        ["nodes", "no", "v1", "false", "Node"],
                        ["pods", "po", "v1", "true", "Pod"],
                        ["services", "svc", "v1", "true", "Service"],
                        # no short name: the column is blank
                        ["leases", "coordination.k8s.io/v1", "true", "Lease"]]
    wide = table_lines(kubectl("api-resources", "-o", "wide"))
    assert wide[0][-2:] == ["VERBS", "CATEGORIES"]
    pods = next(row for row in wide if row[0] == "pods")
    assert pods[-2:] == ["create,delete,deletecollection,get,list,patch,update,watch", "all"]


def test_kubectl_cluster_info(kubectl: Kubectl, apiserver: ApiServer) -> None:
    output = kubectl("cluster-info")
    assert f"Kubernetes control plane is running at {apiserver.url}" in output


async def test_kubectl_get_prints_the_servers_columns(kubectl: Kubectl,
                                                      http: httpx.AsyncClient) -> None:
    pod_name, node_name = unique("columns"), unique("node")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name},
           "spec": {"nodeName": node_name,
                    "containers": [{"name": "app", "image": "busybox:1.36"}]}}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name,
                         "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.37.0+kubelite"}}}
    (await http.post("/api/v1/namespaces/default/pods", json=pod)).raise_for_status()
    (await http.post("/api/v1/nodes", json=node)).raise_for_status()
    try:
        header, row = table_lines(kubectl("get", "pods", pod_name))
        assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert row[:4] == [pod_name, "0/1", "Pending", "0"]
        assert re.fullmatch(r"\d+s", row[4])
        header, row = table_lines(kubectl("get", "po", pod_name, "-o", "wide"))
        assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                          "NOMINATED NODE", "READINESS GATES"]
        assert row[5:] == ["<none>", node_name, "<none>", "<none>"]
        header, row = table_lines(kubectl("get", "no", node_name))
        assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert [row[i] for i in (0, 1, 2, 4)] == [node_name, "Ready", "control-plane",
                                                  "v1.37.0+kubelite"]
        header, row = table_lines(kubectl("get", "ns", "default"))
        assert (header, row[:2]) == (["NAME", "STATUS", "AGE"], ["default", "Active"])
    finally:
        await http.delete(f"/api/v1/namespaces/default/pods/{pod_name}",
                          params={"gracePeriodSeconds": "0"})
        await http.delete(f"/api/v1/nodes/{node_name}")
