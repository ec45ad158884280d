"""deletecollection: DELETE on a collection, with selectors, dry runs and grace periods,
through plain HTTP, the official client and lightkube."""

from __future__ import annotations

from typing import Any

import httpx
import kubernetes
import lightkube
import pytest
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import Pod as LightkubePod

from tests.support import ApiServer, unique


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}}


async def make_namespace_with_pods(http: httpx.AsyncClient, labels: list[dict[str, str]],
                                   ) -> str:
    namespace = unique("dc")
    r = await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
    assert r.status_code == 201, r.text
    for i, pod_labels in enumerate(labels):
        r = await http.post(f"/api/v1/namespaces/{namespace}/pods", json=pod(f"p{i}", pod_labels))
        assert r.status_code == 201, r.text
    return namespace


async def pod_names(http: httpx.AsyncClient, namespace: str) -> list[str]:
    r = await http.get(f"/api/v1/namespaces/{namespace}/pods")
    return sorted(item["metadata"]["name"] for item in r.json()["items"])


async def test_deletecollection_deletes_what_the_selector_selects(http: httpx.AsyncClient,
                                                                  ) -> None:
    namespace = await make_namespace_with_pods(http, [{"app": "a"}, {"app": "b"},
                                                      {"app": "a"}])
    r = await http.delete(f"/api/v1/namespaces/{namespace}/pods",
                          params={"labelSelector": "app=a", "gracePeriodSeconds": "0"})
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "PodList"
    assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["p0", "p2"]
    assert await pod_names(http, namespace) == ["p1"]


async def test_deletecollection_dry_run_deletes_nothing(http: httpx.AsyncClient) -> None:
    namespace = await make_namespace_with_pods(http, [{"app": "a"}, {"app": "a"}])
    def versions(listed: httpx.Response) -> dict[str, str]:
        return {i["metadata"]["name"]: i["metadata"]["resourceVersion"]
                for i in listed.json()["items"]}

    # the pods' own versions, not the list's: other tests' namespaces may still be
    # finalizing in the background and move etcd's revision
    before = versions(await http.get(f"/api/v1/namespaces/{namespace}/pods"))
    for how in ({"params": {"dryRun": "All"}},
                {"content": b'{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}',
                 "headers": {"content-type": "application/json"}}):
        r = await http.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", **how)
        assert r.status_code == 200, r.text
        assert len(r.json()["items"]) == 2
    after = await http.get(f"/api/v1/namespaces/{namespace}/pods")
    assert versions(after) == before
    assert [i["metadata"].get("deletionTimestamp") for i in after.json()["items"]] == [None,
                                                                                       None]


async def test_deletecollection_graceful_marks_pods(http: httpx.AsyncClient) -> None:
    namespace = await make_namespace_with_pods(http, [])
    bound = pod("bound", {})
    bound["spec"]["nodeName"] = "node-that-is-not-there"  # a bound pod gets its grace period
    r = await http.post(f"/api/v1/namespaces/{namespace}/pods", json=bound)
    assert r.status_code == 201, r.text
    r = await http.delete(f"/api/v1/namespaces/{namespace}/pods")
    assert r.status_code == 200, r.text
    [marked] = r.json()["items"]
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30


@pytest.mark.parametrize("how", [
    {"params": {"propagationPolicy": "Sometimes"}},
    {"params": {"gracePeriodSeconds": "soon"}},
    {"params": {"labelSelector": "a==="}},
    {"content": b'{"dryRun":"All"}', "headers": {"content-type": "application/json"}},
    {"content": b"dryRun: All", "headers": {"content-type": "text/plain"}},
])
async def test_a_bad_deletecollection_deletes_nothing(http: httpx.AsyncClient,
                                                      how: dict[str, Any]) -> None:
    namespace = await make_namespace_with_pods(http, [{"app": "a"}])
    r = await http.request("DELETE", f"/api/v1/namespaces/{namespace}/pods", **how)
    assert 400 <= r.status_code < 500, r.text
    assert r.json()["kind"] == "Status"
    assert await pod_names(http, namespace) == ["p0"]
    pods = (await http.get(f"/api/v1/namespaces/{namespace}/pods")).json()["items"]
    assert pods[0]["metadata"].get("deletionTimestamp") is None


async def test_deletecollection_is_not_served_across_namespaces_or_on_namespaces(
        http: httpx.AsyncClient) -> None:
    for path in ("/api/v1/pods", "/api/v1/namespaces"):
        r = await http.delete(path)
        assert r.status_code == 405, r.text
        assert r.json()["reason"] == "MethodNotAllowed"


async def test_discovery_lists_deletecollection_where_it_is_served(
        http: httpx.AsyncClient) -> None:
    resources = {r["name"]: r for r in (await http.get("/api/v1")).json()["resources"]}
    assert "deletecollection" in resources["pods"]["verbs"]
    assert "deletecollection" in resources["nodes"]["verbs"]
    assert "deletecollection" not in resources["namespaces"]["verbs"]


def test_the_official_client_deletes_a_collection(apiserver: ApiServer) -> None:
    config = kubernetes.client.Configuration()
    apiserver.configure(config)
    with kubernetes.client.ApiClient(config) as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        namespace = unique("dc-official")
        core.create_namespace({"metadata": {"name": namespace}})
        for i, app in enumerate(("a", "b")):
            core.create_namespaced_pod(namespace, pod(f"p{i}", {"app": app}))
        core.delete_collection_namespaced_pod(namespace, label_selector="app=a",
                                              grace_period_seconds=0)
        left = core.list_namespaced_pod(namespace)
        assert [p.metadata.name for p in left.items] == ["p1"]


def test_lightkube_deletes_a_collection(apiserver: ApiServer) -> None:
    client = lightkube.Client(config=KubeConfig.from_dict(apiserver.config_dict()))
    namespace = unique("dc-lightkube")
    with apiserver.sync_client() as http:
        assert http.post("/api/v1/namespaces",
                         json={"metadata": {"name": namespace}}).status_code == 201
        for i, app in enumerate(("a", "b")):
            assert http.post(f"/api/v1/namespaces/{namespace}/pods",
                             json=pod(f"p{i}", {"app": app})).status_code == 201
    client.deletecollection(LightkubePod, namespace=namespace, dry_run=True)
    assert len(list(client.list(LightkubePod, namespace=namespace))) == 2
    client.deletecollection(LightkubePod, namespace=namespace, grace_period=0)
    assert list(client.list(LightkubePod, namespace=namespace)) == []
