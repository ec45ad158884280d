"""`pods/eviction` in the OpenAPI documents as kube-apiserver has it: in the core group's v3
document (`createCoreV1NamespacedPodEviction`, a policy/v1 Eviction in and out) and in the
Swagger 2.0 one, every reference resolving."""

from __future__ import annotations

import re

import httpx

from tests.support import unique

PATH = "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
EVICTION = "io.k8s.api.policy.v1.Eviction"
DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"


async def test_v3_has_the_eviction_operation(http: httpx.AsyncClient) -> None:
    document = (await http.get("/openapi/v3/api/v1")).json()
    item = document["paths"][PATH]
    assert set(item) == {"post", "parameters"}
    post = item["post"]
    assert post["operationId"] == "createCoreV1NamespacedPodEviction"
    assert post["tags"] == ["core_v1"]
    assert post["x-kubernetes-action"] == "post"
    assert post["x-kubernetes-group-version-kind"] == {"group": "policy", "version": "v1",
                                                       "kind": "Eviction"}
    ref = {"$ref": f"#/components/schemas/{EVICTION}"}
    assert post["requestBody"] == {"content": {"application/json": {"schema": ref}},
                                   "required": True}
    assert sorted(post["responses"]) == ["200", "201", "202"]
    assert all(r["content"]["application/json"]["schema"] == ref
               for r in post["responses"].values())
    assert [p["name"] for p in post["parameters"]] == ["dryRun", "fieldManager",
                                                       "fieldValidation"]
    assert [(p["name"], p["in"]) for p in item["parameters"]] == [
        ("name", "path"), ("namespace", "path"), ("pretty", "query")]
    assert item["parameters"][0]["description"] == "name of the Eviction"
    schemas = document["components"]["schemas"]
    eviction = schemas[EVICTION]
    assert eviction["x-kubernetes-group-version-kind"] == [
        {"group": "policy", "version": "v1", "kind": "Eviction"}]
    assert set(eviction["properties"]) == {"apiVersion", "kind", "metadata", "deleteOptions"}
    assert eviction["properties"]["deleteOptions"]["allOf"] == [
        {"$ref": f"#/components/schemas/{DELETE_OPTIONS}"}]
    assert set(schemas[DELETE_OPTIONS]["properties"]) == {
        "apiVersion", "kind", "gracePeriodSeconds", "preconditions", "orphanDependents",
        "propagationPolicy", "dryRun"}
    text = (await http.get("/openapi/v3/api/v1")).text
    refs = set(re.findall(r'"\$ref":"#/components/schemas/([^"]+)"', text))
    assert refs <= set(schemas)  # every reference resolves, the Eviction's too


async def test_v2_has_it_too(http: httpx.AsyncClient) -> None:
    response = await http.get("/openapi/v2", headers={"Accept": "application/json"})
    document = response.json()
    post = document["paths"][PATH]["post"]
    assert post["operationId"] == "createCoreV1NamespacedPodEviction"
    assert post["parameters"][0] == {"name": "body", "in": "body", "required": True,
                                     "schema": {"$ref": f"#/definitions/{EVICTION}"}}
    assert post["responses"]["201"] == {"description": "Created",
                                        "schema": {"$ref": f"#/definitions/{EVICTION}"}}
    definitions = document["definitions"]
    assert definitions[EVICTION]["properties"]["deleteOptions"]["$ref"] == (
        f"#/definitions/{DELETE_OPTIONS}")
    refs = set(re.findall(r'"\$ref":"#/definitions/([^"]+)"', response.text))
    assert refs <= set(definitions)


async def test_what_it_describes_is_what_is_served(http: httpx.AsyncClient) -> None:
    """An Eviction as the schema has it (metadata and deleteOptions) evicts the pod."""
    name = unique("evicted")
    pods = "/api/v1/namespaces/default/pods"
    created = await http.post(pods, json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert created.status_code == 201, created.text
    evicted = await http.post(f"{pods}/{name}/eviction", json={
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
        "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {
            "uid": created.json()["metadata"]["uid"]}}})
    assert evicted.status_code == 201, evicted.text
    assert (await http.get(f"{pods}/{name}")).status_code == 404
