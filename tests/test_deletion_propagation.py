"""DELETE's propagationPolicy and orphanDependents, finalizers that hold an object until they
are removed, and ownerReferences validation, on the session apiserver (no garbage collector
runs here: the tests look at the finalizers the store sets and at what removing them does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.support import ApiServer, Kubectl, unique

APPS = "/apis/apps/v1/namespaces/default"
BATCH = "/apis/batch/v1/namespaces/default"
CORE = "/api/v1/namespaces/default"
MERGE = {"Content-Type": "application/merge-patch+json"}
JOB_WARNING = ("child pods are preserved by default when jobs are deleted; set "
               "propagationPolicy=Background to remove them or set propagationPolicy=Orphan "
               "to suppress this warning")


def deployment(name: str, **meta: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, **meta},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}}}}


async def create_deployment(http: httpx.AsyncClient, **meta: Any) -> str:
    name = unique("owner")
    answer = await http.post(f"{APPS}/deployments", json=deployment(name, **meta))
    assert answer.status_code == 201, answer.text
    return name


async def test_foreground_marks_and_waits_for_the_finalizer(http: httpx.AsyncClient) -> None:
    name = await create_deployment(http)
    answer = await http.request("DELETE", f"{APPS}/deployments/{name}",
                                json={"propagationPolicy": "Foreground"})
    assert answer.status_code == 200
    marked = answer.json()
    assert marked["kind"] == "Deployment"
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    stored = (await http.get(f"{APPS}/deployments/{name}")).json()
    assert stored["metadata"]["finalizers"] == ["foregroundDeletion"]
    # a second DELETE changes nothing while the finalizer is there
    again = await http.delete(f"{APPS}/deployments/{name}")
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    # what the garbage collector does once the dependents are gone: remove the finalizer
    answer = await http.patch(f"{APPS}/deployments/{name}",
                              json={"metadata": {"finalizers": None}}, headers=MERGE)
    assert answer.status_code == 200, answer.text
    assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 404


async def test_orphan_by_policy_and_by_orphan_dependents(http: httpx.AsyncClient) -> None:
    for query in ("propagationPolicy=Orphan", "orphanDependents=true"):
        name = await create_deployment(http)
        answer = await http.delete(f"{APPS}/deployments/{name}?{query}")
        assert answer.status_code == 200, query
        assert answer.json()["metadata"]["finalizers"] == ["orphan"], query
        # a later DELETE may change its mind: foreground instead of orphan
        answer = await http.delete(f"{APPS}/deployments/{name}?propagationPolicy=Foreground")
        assert answer.json()["metadata"]["finalizers"] == ["foregroundDeletion"], query
        # and Background drops the garbage collector's finalizer: the object goes now
        answer = await http.delete(f"{APPS}/deployments/{name}?propagationPolicy=Background")
        assert answer.status_code == 200
        assert answer.json()["kind"] == "Status" and answer.json()["status"] == "Success"
        assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 404


async def test_background_is_the_default_for_apps(http: httpx.AsyncClient) -> None:
    name = await create_deployment(http)
    answer = await http.delete(f"{APPS}/deployments/{name}")
    assert answer.status_code == 200
    assert answer.json()["status"] == "Success"
    assert "warning" not in answer.headers
    assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 404


async def test_batch_v1_jobs_orphan_by_default_with_kubes_warning(
        http: httpx.AsyncClient) -> None:
    name = unique("job")
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "kubelite/busybox:1.35"}]}}}}
    assert (await http.post(f"{BATCH}/jobs", json=body)).status_code == 201
    answer = await http.delete(f"{BATCH}/jobs/{name}")
    assert answer.status_code == 200
    assert answer.headers["warning"] == f'299 - "{JOB_WARNING}"'
    assert answer.json()["metadata"]["finalizers"] == ["orphan"]
    answer = await http.delete(f"{BATCH}/jobs/{name}?propagationPolicy=Background")
    assert "warning" not in answer.headers
    assert (await http.get(f"{BATCH}/jobs/{name}")).status_code == 404


async def test_a_finalizer_blocks_removal_until_an_update_empties_it(
        http: httpx.AsyncClient) -> None:
    name = unique("held")
    body = {"metadata": {"name": name, "finalizers": ["example.com/hold"]}}
    assert (await http.post(f"{CORE}/serviceaccounts", json=body)).status_code == 201
    answer = await http.delete(f"{CORE}/serviceaccounts/{name}")
    assert answer.status_code == 200
    held = answer.json()
    assert held["metadata"]["finalizers"] == ["example.com/hold"]
    assert held["metadata"]["deletionTimestamp"]
    # no finalizer may be added now
    added = {**held, "metadata": {**held["metadata"],
                                  "finalizers": ["example.com/hold", "example.com/more"]}}
    answer = await http.put(f"{CORE}/serviceaccounts/{name}", json=added)
    assert answer.status_code == 422
    assert "no new finalizers can be added if the object is being deleted" in \
        answer.json()["message"]
    # another change keeps it; emptying the finalizers removes it
    labelled = await http.patch(f"{CORE}/serviceaccounts/{name}",
                                json={"metadata": {"labels": {"a": "b"}}}, headers=MERGE)
    assert labelled.status_code == 200
    emptied = {**labelled.json(), "metadata": {**labelled.json()["metadata"], "finalizers": []}}
    answer = await http.put(f"{CORE}/serviceaccounts/{name}", json=emptied)
    assert answer.status_code == 200, answer.text
    assert (await http.get(f"{CORE}/serviceaccounts/{name}")).status_code == 404


async def test_an_update_of_a_finalizer_not_being_deleted_keeps_the_object(
        http: httpx.AsyncClient) -> None:
    name = await create_deployment(http, finalizers=["example.com/hold"])
    answer = await http.patch(f"{APPS}/deployments/{name}",
                              json={"metadata": {"finalizers": None}}, headers=MERGE)
    assert answer.status_code == 200
    assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 200
    await http.delete(f"{APPS}/deployments/{name}")


async def test_dry_run_delete_changes_nothing(http: httpx.AsyncClient) -> None:
    name = await create_deployment(http)
    before = (await http.get(f"{APPS}/deployments/{name}")).json()
    answer = await http.delete(f"{APPS}/deployments/{name}?dryRun=All&propagationPolicy=Foreground")
    assert answer.status_code == 200
    assert answer.json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert (await http.get(f"{APPS}/deployments/{name}")).json() == before


async def test_bad_propagation_policy_is_refused(http: httpx.AsyncClient) -> None:
    name = await create_deployment(http)
    answer = await http.delete(f"{APPS}/deployments/{name}?propagationPolicy=Sideways")
    assert answer.status_code == 422
    assert answer.json()["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"')
    answer = await http.request("DELETE", f"{APPS}/deployments/{name}",
                                json={"propagationPolicy": "Orphan", "orphanDependents": True})
    assert answer.status_code == 422
    assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 200


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1"}


@pytest.mark.parametrize(("refs", "message"), [
    ([{**OWNER, "uid": ""}], 'metadata.ownerReferences.uid: Invalid value: "": must not be empty'),
    ([{**OWNER, "apiVersion": "apps/"}],
     'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty'),
    ([{**OWNER, "controller": True}, {**OWNER, "name": "rs2", "uid": "u-2", "controller": True}],
     "metadata.ownerReferences: Invalid value: "),
])
async def test_owner_references_are_validated(http: httpx.AsyncClient, refs: list[Any],
                                              message: str) -> None:
    name = unique("owned")
    body = {"metadata": {"name": name, "ownerReferences": refs}}
    answer = await http.post(f"{CORE}/serviceaccounts", json=body)
    assert answer.status_code == 422
    assert message in answer.json()["message"]
    if len(refs) == 2:
        assert ('Only one reference can have Controller set to true. Found "true" in '
                "references for ReplicaSet/rs and ReplicaSet/rs2") in answer.json()["message"]
    assert (await http.get(f"{CORE}/serviceaccounts/{name}")).status_code == 404


def test_kubectl_cascade_and_the_official_client(apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver.url, tmp_path / "kubectl")
    name = unique("cascade")
    kubectl("create", "deployment", name, "--image=kubelite/busybox:1.35")
    kubectl("delete", "deployment", name, "--cascade=orphan", "--wait=false")
    finalizers = kubectl("get", "deployment", name, "-o", "jsonpath={.metadata.finalizers}")
    assert finalizers == '["orphan"]'
    kubectl("delete", "deployment", name, "--cascade=foreground", "--wait=false")
    finalizers = kubectl("get", "deployment", name, "-o", "jsonpath={.metadata.finalizers}")
    assert finalizers == '["foregroundDeletion"]'
    kubectl("patch", "deployment", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert "NotFound" in kubectl.run("get", "deployment", name, check=False).stderr
    configuration = kubernetes.client.Configuration()
    configuration.host = apiserver.url
    with kubernetes.client.ApiClient(configuration) as client:
        apps = kubernetes.client.AppsV1Api(client)
        other = unique("client")
        kubectl("create", "deployment", other, "--image=kubelite/busybox:1.35")
        apps.delete_namespaced_deployment(
            other, "default", body=kubernetes.client.V1DeleteOptions(
                propagation_policy="Foreground"))
        assert apps.read_namespaced_deployment(other, "default").metadata.finalizers == [
            "foregroundDeletion"]
        apps.patch_namespaced_deployment(other, "default", {"metadata": {"finalizers": None}})
        kubectl.run("get", "deployment", other, check=False)
        with pytest.raises(kubernetes.client.exceptions.ApiException) as gone:
            apps.read_namespaced_deployment(other, "default")
        assert gone.value.status == 404
