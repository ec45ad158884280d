"""Discovery, /version and OpenAPI: the documents' shapes, then the real kubectl reading them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import kubernetes_asyncio
import pytest
from fastapi import FastAPI

from apiserver import discovery, openapi, openapi_v2, protobuf
from tests.support import ApiServer, Kubectl, table_lines, unique

OLD_KUBECTL = "/usr/bin/kubectl"  # 1.32 where installed: explain reads /openapi/v2 with it

AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json")
@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    app.include_router(discovery.router)
    app.include_router(openapi.router)
    app.include_router(openapi_v2.router)
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
    def v1(group: str) -> dict[str, Any]:
        version = {"groupVersion": f"{group}/v1", "version": "v1"}
        return {"name": group, "versions": [version], "preferredVersion": version}

    # kube's order: by group priority (events.k8s.io's is highest), not by name
    assert groups == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        v1("apps"), v1("events.k8s.io"), v1("authentication.k8s.io"),
        v1("authorization.k8s.io"), v1("batch"), v1("certificates.k8s.io"),
        v1("rbac.authorization.k8s.io"),
        v1("scheduling.k8s.io"), v1("coordination.k8s.io"), v1("discovery.k8s.io")]}


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
    for path in ("/apis/storage.k8s.io", "/apis/coordination.k8s.io/v2",
                 "/apis/storage.k8s.io/v1"):
        missing = await client.get(path)
        assert missing.status_code == 404, path
        assert missing.json()["message"] == "the server could not find the requested resource"


async def test_api_resource_list(client: httpx.AsyncClient) -> None:
    body = (await client.get("/api/v1")).json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert sorted(by_name) == [
        "configmaps", "events", "namespaces", "namespaces/finalize", "namespaces/status", "nodes",
        "nodes/status",
        "pods", "pods/attach", "pods/binding", "pods/ephemeralcontainers", "pods/eviction",
        "pods/exec", "pods/log", "pods/portforward", "pods/status",
        "secrets", "serviceaccounts", "serviceaccounts/token", "services",
            "services/status"]
    assert by_name["pods"] == {
        "name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                  "watch"],
        "shortNames": ["po"], "categories": ["all"]}
    assert by_name["pods/binding"] == {"name": "pods/binding", "singularName": "",
                                       "namespaced": True, "kind": "Binding",
                                       "verbs": ["create"]}
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert by_name["pods/exec"] == {"name": "pods/exec", "singularName": "", "namespaced": True,
                                    "kind": "PodExecOptions", "verbs": ["create", "get"]}
    assert (by_name["pods/portforward"]["kind"], by_name["pods/attach"]["kind"]) == (
        "PodPortForwardOptions", "PodAttachOptions")
    assert by_name["nodes/status"]["verbs"] == ["get", "patch", "update"]
    assert (by_name["nodes"]["namespaced"], by_name["nodes"]["shortNames"]) == (False, ["no"])
    assert by_name["events"]["shortNames"] == ["ev"]
    assert (by_name["namespaces"]["kind"], by_name["namespaces"]["shortNames"]) == (
        "Namespace", ["ns"])
    assert by_name["services"]["verbs"] == ["create", "delete", "deletecollection", "get",
                                            "list", "patch", "update", "watch"]
    assert by_name["services"]["shortNames"] == ["svc"]
    assert by_name["services/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["serviceaccounts"]["shortNames"] == ["sa"]
    assert by_name["serviceaccounts/token"] == {
        "name": "serviceaccounts/token", "singularName": "", "namespaced": True,
        "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
        "verbs": ["create"]}


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
            {"subresource": "attach", "verbs": ["create", "get"],
             "responseKind": {"group": "", "version": "v1", "kind": "PodAttachOptions"}},
            {"subresource": "binding", "verbs": ["create"],
             "responseKind": {"group": "", "version": "v1", "kind": "Binding"}},
            {"subresource": "ephemeralcontainers", "verbs": ["get", "patch", "update"],
             "responseKind": {"group": "", "version": "v1", "kind": "Pod"}},
            {"subresource": "eviction", "verbs": ["create"],
             "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}},
            {"subresource": "exec", "verbs": ["create", "get"],
             "responseKind": {"group": "", "version": "v1", "kind": "PodExecOptions"}},
            {"subresource": "log", "verbs": ["get"],
             "responseKind": {"group": "", "version": "v1", "kind": "Pod"}},
            {"subresource": "portforward", "verbs": ["create", "get"],
             "responseKind": {"group": "", "version": "v1",
                              "kind": "PodPortForwardOptions"}},
            {"subresource": "status", "verbs": ["get", "patch", "update"],
             "responseKind": {"group": "", "version": "v1", "kind": "Pod"}}]}
    nodes = next(r for r in version["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"
    assert core["metadata"] == {"creationTimestamp": None}
    groups = await client.get("/apis", headers={"Accept": AGGREGATED_ACCEPT})
    items = groups.json()["items"]
    assert [item["metadata"]["name"] for item in items] == [
        "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "batch",
        "certificates.k8s.io", "rbac.authorization.k8s.io", "scheduling.k8s.io", "coordination.k8s.io",
        "discovery.k8s.io"]
    assert items[2]["versions"][0]["resources"] == [{
        "resource": "selfsubjectreviews",
        "responseKind": {"group": "authentication.k8s.io", "version": "v1",
                         "kind": "SelfSubjectReview"},
        "scope": "Cluster", "singularResource": "selfsubjectreview", "verbs": ["create"]}, {
        "resource": "tokenreviews",
        "responseKind": {"group": "authentication.k8s.io", "version": "v1",
                         "kind": "TokenReview"},
        "scope": "Cluster", "singularResource": "tokenreview", "verbs": ["create"]}]
    assert [item for item in items if item["metadata"]["name"] in (
        "events.k8s.io", "coordination.k8s.io")] == [{
        "metadata": {"name": "events.k8s.io", "creationTimestamp": None},
        "versions": [{"version": "v1", "freshness": "Current", "resources": [{
            "resource": "events",
            "responseKind": {"group": "events.k8s.io", "version": "v1", "kind": "Event"},
            "scope": "Namespaced", "singularResource": "event",
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch",
                      "update", "watch"],
            "shortNames": ["ev"]}]}]}, {
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
    assert (await client.get("/openapi/v3/apis/storage.k8s.io/v1")).status_code == 404


# --- the real kubectl against the live apiserver ---------------------------------------------

@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver, tmp_path / "kubectl")


def test_kubectl_version(kubectl: Kubectl) -> None:
    result = kubectl.run("version")
    assert "Client Version: v1.37.1" in result.stdout
    assert "Server Version: v1.37.0+kubelite" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_kubectl_api_resources(kubectl: Kubectl) -> None:
    rows = table_lines(kubectl("api-resources"))
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert rows[1:] == [["configmaps", "cm", "v1", "true", "ConfigMap"],
                        ["events", "ev", "v1", "true", "Event"],
                        ["namespaces", "ns", "v1", "false", "Namespace"],
                        ["nodes", "no", "v1", "false", "Node"],
                        ["pods", "po", "v1", "true", "Pod"],
                        ["secrets", "v1", "true", "Secret"],
                        ["serviceaccounts", "sa", "v1", "true", "ServiceAccount"],
                        ["services", "svc", "v1", "true", "Service"],
                        ["deployments", "deploy", "apps/v1", "true", "Deployment"],
                        ["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
                        # no short name: the column is blank
                        ["selfsubjectreviews", "authentication.k8s.io/v1", "false",
                         "SelfSubjectReview"],
                        ["tokenreviews", "authentication.k8s.io/v1", "false", "TokenReview"],
                        ["localsubjectaccessreviews", "authorization.k8s.io/v1", "true",
                         "LocalSubjectAccessReview"],
                        ["selfsubjectaccessreviews", "authorization.k8s.io/v1", "false",
                         "SelfSubjectAccessReview"],
                        ["selfsubjectrulesreviews", "authorization.k8s.io/v1", "false",
                         "SelfSubjectRulesReview"],
                        ["subjectaccessreviews", "authorization.k8s.io/v1", "false",
                         "SubjectAccessReview"],
                        ["jobs", "batch/v1", "true", "Job"],
                        ["certificatesigningrequests", "csr", "certificates.k8s.io/v1",
                         "false", "CertificateSigningRequest"],
                        ["leases", "coordination.k8s.io/v1", "true", "Lease"],
                        ["endpointslices", "discovery.k8s.io/v1", "true", "EndpointSlice"],
                        # kubectl sorts by group name, whatever the server's order
                        ["events", "ev", "events.k8s.io/v1", "true", "Event"],
                        ["clusterrolebindings", "rbac.authorization.k8s.io/v1", "false",
                         "ClusterRoleBinding"],
                        ["clusterroles", "rbac.authorization.k8s.io/v1", "false",
                         "ClusterRole"],
                        ["rolebindings", "rbac.authorization.k8s.io/v1", "true",
                         "RoleBinding"],
                        ["roles", "rbac.authorization.k8s.io/v1", "true", "Role"],
                        ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false",
                         "PriorityClass"]]
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


# --- trailing slashes, Status for everything else ----------------------------------------------

@pytest.mark.parametrize("path", ["/api", "/apis", "/api/v1", "/apis/coordination.k8s.io",
                                  "/apis/coordination.k8s.io/v1", "/apis/events.k8s.io/v1",
                                  "/version"])
async def test_discovery_with_a_trailing_slash(client: httpx.AsyncClient, path: str) -> None:
    without, with_slash = await client.get(path), await client.get(path + "/")
    assert with_slash.status_code == without.status_code == 200
    assert with_slash.json() == without.json()
    aggregated = {"Accept": AGGREGATED_ACCEPT}
    if path in ("/api", "/apis"):
        assert (await client.get(path + "/", headers=aggregated)).json()["kind"] == (
            "APIGroupDiscoveryList")


ODD_REQUESTS = [
    ("GET", "/api/v2/pods", 404), ("GET", "/api/v1/foos", 404),
    ("GET", "/api/v1/namespaces/default/pods/web/eviction", 405),  # create only
    ("PATCH", "/api/v1/namespaces/default/pods/web/resize", 404),
    ("GET", "/api/v1/nodes/node1/binding", 404), ("GET", "/api/v1/namespaces/default", 200),
    ("POST", "/apis/coordination.k8s.io/v1/leases", 405),
    ("GET", "/apis/storage.k8s.io", 404), ("GET", "/apis/storage.k8s.io/v1", 404),
    ("GET", "/apis/storage.k8s.io/v1/", 404),
    ("GET", "/apis/storage.k8s.io/v1/storageclasses", 404), ("GET", "/apis/events.k8s.io/v2/events", 404),
    ("OPTIONS", "/api/v1/namespaces/default/pods", 405), ("PUT", "/api/v1/pods", 405),
    ("DELETE", "/version", 405), ("POST", "/api", 405), ("GET", "/nothing/here", 404),
    ("GET", "/healthz/", 404), ("GET", "/openapi/v3/apis/storage.k8s.io/v1", 404),
    ("GET", "/openapi/v2/", 404), ("PATCH", "/openapi/v2", 405),
]


@pytest.mark.parametrize(("method", "path", "code"), ODD_REQUESTS)
async def test_every_refusal_is_a_status(http: httpx.AsyncClient, method: str, path: str,
                                         code: int) -> None:
    response = await http.request(method, path)
    if code == 200:  # a namespace: what the path looks like next to the refused ones
        assert response.status_code == 200
        return
    assert response.status_code == code, response.text
    assert response.headers["content-type"] == "application/json"
    status = response.json()
    assert (status["kind"], status["apiVersion"], status["status"], status["code"]) == (
        "Status", "v1", "Failure", code)
    # kube's generic answer (NewGenericServerResponse): details present, and empty
    assert status["details"] == {}
    assert status["message"] == {
        404: "the server could not find the requested resource",
        405: "the server does not allow this method on the requested resource"}[code]


# --- the official Python clients read discovery ---------------------------------------------

def test_official_python_client_discovery(apiserver: ApiServer) -> None:
    configuration = kubernetes.client.Configuration()
    apiserver.configure(configuration)
    with kubernetes.client.ApiClient(configuration) as api_client:
        client = kubernetes.client
        core = client.CoreV1Api(api_client).get_api_resources()  # GET /api/v1/
        assert "pods" in [r.name for r in core.resources]
        assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]
        groups = client.ApisApi(api_client).get_api_versions().groups
        assert [g.name for g in groups] == ["apps", "events.k8s.io", "authentication.k8s.io",
                                            "authorization.k8s.io", "batch",
                                            "certificates.k8s.io",
                                            "rbac.authorization.k8s.io", "scheduling.k8s.io", "coordination.k8s.io",
            "discovery.k8s.io"]
        assert client.EventsApi(api_client).get_api_group().preferred_version.version == "v1"
        events = client.EventsV1Api(api_client).get_api_resources()
        assert [(r.name, r.kind, r.short_names) for r in events.resources] == [
            ("events", "Event", ["ev"])]
        leases = client.CoordinationV1Api(api_client).get_api_resources()
        assert [r.name for r in leases.resources] == ["leases"]
        group = client.CoordinationApi(api_client).get_api_group()
        assert group.name == "coordination.k8s.io"


async def test_kubernetes_asyncio_discovery(apiserver: ApiServer) -> None:
    configuration = kubernetes_asyncio.client.Configuration()
    apiserver.configure(configuration)
    async with kubernetes_asyncio.client.ApiClient(configuration) as api_client:
        client = kubernetes_asyncio.client
        core = await client.CoreV1Api(api_client).get_api_resources()
        assert "events" in [r.name for r in core.resources]
        versions = await client.CoreApi(api_client).get_api_versions()
        assert versions.versions == ["v1"]
        groups = await client.ApisApi(api_client).get_api_versions()
        assert "events.k8s.io" in [g.name for g in groups.groups]
        events = await client.EventsV1Api(api_client).get_api_resources()
        assert [r.name for r in events.resources] == ["events"]
        group = await client.EventsApi(api_client).get_api_group()
        assert group.name == "events.k8s.io"


# --- /openapi/v2 ----------------------------------------------------------------------------

async def test_openapi_v2_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/openapi/v2", headers={"Accept": "application/json"})
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    pod = definitions["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1",
                                                       "kind": "Pod"}]
    # a v2 reference stands alone, where v3 wraps it in allOf
    assert pod["properties"]["spec"] == {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}
    event = definitions["io.k8s.api.events.v1.Event"]
    assert event["properties"]["regarding"]["$ref"] == (
        "#/definitions/io.k8s.api.core.v1.ObjectReference")
    assert "io.k8s.api.coordination.v1.Lease" in definitions
    refs = re.findall(r'"\$ref":"#/definitions/([^"]+)"', response.text)
    assert refs and set(refs) <= set(definitions)  # every reference resolves
    item = document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    put = item["put"]
    assert put["x-kubernetes-action"] == "put"
    assert put["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1",
                                                      "kind": "Pod"}
    assert put["parameters"][0] == {"name": "body", "in": "body", "required": True,
                                    "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}}
    assert "application/json" in put["produces"] and put["consumes"] == ["*/*"]
    assert "application/merge-patch+json" in item["patch"]["consumes"]
    assert {"name": "name", "in": "path", "description": "name of the Pod",
            "required": True, "type": "string", "uniqueItems": True} in item["parameters"]
    listing = document["paths"]["/apis/events.k8s.io/v1/namespaces/{namespace}/events"]["get"]
    assert listing["operationId"] == "listEventsV1NamespacedEvent"
    assert "application/json;stream=watch" in listing["produces"]
    etag = response.headers["etag"]
    cached = await client.get("/openapi/v2", headers={"If-None-Match": etag})
    assert cached.status_code == 304
    refused = await client.get("/openapi/v2", headers={"Accept": "text/html"})
    assert refused.status_code == 406 and refused.json()["kind"] == "Status"


async def test_openapi_v2_protobuf(client: httpx.AsyncClient) -> None:
    """client-go's OpenAPISchema() asks for gnostic's protobuf (and refuses a Content-Type
    with '@' in it): the document decodes to the same definitions."""
    response = await client.get("/openapi/v2", headers={
        "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert response.headers["content-type"] == (
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    document = dict(protobuf.fields(response.content))
    assert document[1] == b"2.0"
    named = [dict(protobuf.fields(entry)) for number, entry in protobuf.fields(document[9])
             if number == 1 and isinstance(entry, bytes)]
    names = {entry[1].decode() for entry in named if isinstance(entry[1], bytes)}
    json_names = set((await client.get("/openapi/v2")).json()["definitions"])
    assert names == json_names


@pytest.mark.skipif(not Path(OLD_KUBECTL).exists(), reason=f"no kubectl 1.32 at {OLD_KUBECTL}")
@pytest.mark.parametrize("output", ["plaintext-openapiv2", "plaintext"])
def test_kubectl_1_32_explain(apiserver: ApiServer, tmp_path: Path, output: str) -> None:
    kubectl = Kubectl(apiserver, tmp_path / "kubectl", binary=OLD_KUBECTL)
    text = kubectl("explain", "pods.spec.containers", "--output", output)
    assert "KIND:" in text and "Pod" in text
    assert "image\t<string>" in text
    events = kubectl("explain", "events", "--api-version=events.k8s.io/v1", "--output", output)
    assert "regarding\t<" in events and "reportingController\t<string>" in events


def test_kubectl_explain(kubectl: Kubectl) -> None:
    text = kubectl("explain", "pods.spec.containers")
    assert "FIELD: containers <[]Container>" in text
    regarding = kubectl("explain", "events.regarding", "--api-version=events.k8s.io/v1")
    assert "GROUP:      events.k8s.io" in regarding
    assert "FIELD: regarding <ObjectReference>" in regarding
