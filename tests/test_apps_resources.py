"""apps/v1 Deployments and ReplicaSets, batch/v1 Jobs on the session apiserver: what the real
kubectl and the official Python client send reaches the store defaulted and validated as
kube-apiserver does; no controller runs, so the tests look at the stored objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
import yaml

from tests.support import ApiServer, Kubectl, table_lines, unique

APPS = "/apis/apps/v1/namespaces/default"
BATCH = "/apis/batch/v1/namespaces/default"
IMAGE = "kubelite/busybox:1.35"


# The two places this module builds clients itself (adapt them when the fixtures move).
@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path_factory.mktemp("apps-kubectl"))


@pytest.fixture(scope="module")
def api_client(apiserver: ApiServer) -> Iterator[kubernetes.client.ApiClient]:
    configuration = kubernetes.client.Configuration()
    configuration.host = apiserver.url
    with kubernetes.client.ApiClient(configuration) as client:
        yield client


def deployment(name: str, *, labels: dict[str, str] | None = None,
               selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    labels = labels if labels is not None else {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": selector if selector is not None else {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": IMAGE}]}},
                     **spec}}


async def test_kubectl_create_deployment_stores_kube_defaults(kubectl: Kubectl,
                                                              http: httpx.AsyncClient) -> None:
    name = unique("web")
    kubectl("create", "deployment", name, f"--image={IMAGE}", "--replicas=3", "--",
            "httpd", "-f")
    stored = (await http.get(f"{APPS}/deployments/{name}")).json()
    assert stored["metadata"]["generation"] == 1
    assert stored["status"] == {}
    spec = stored["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"app": name}}
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod_spec = spec["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Always"
    assert pod_spec["dnsPolicy"] == "ClusterFirst"
    assert pod_spec["terminationGracePeriodSeconds"] == 30
    assert pod_spec["schedulerName"] == "default-scheduler"
    assert "enableServiceLinks" not in pod_spec and "priority" not in pod_spec
    assert pod_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod_spec["containers"][0]["command"] == ["httpd", "-f"]


async def test_kubectl_scale_and_set_image_bump_the_generation(kubectl: Kubectl,
                                                              http: httpx.AsyncClient) -> None:
    name = unique("scaled")
    kubectl("create", "deployment", name, f"--image={IMAGE}")
    assert "scaled" in kubectl("scale", f"deployment/{name}", "--replicas=5")
    scale = (await http.get(f"{APPS}/deployments/{name}/scale")).json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 5}
    assert scale["status"] == {"replicas": 0, "selector": f"app={name}"}
    kubectl("set", "image", f"deployment/{name}", "busybox=kubelite/busybox:1.36")
    stored = (await http.get(f"{APPS}/deployments/{name}")).json()
    assert stored["spec"]["replicas"] == 5
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "kubelite/busybox:1.36"
    assert stored["metadata"]["generation"] == 3
    # a status write is the controller's: it changes no generation and no spec
    status = {**stored, "status": {"replicas": 5, "readyReplicas": 2, "observedGeneration": 3}}
    answer = await http.put(f"{APPS}/deployments/{name}/status", json=status)
    assert answer.status_code == 200, answer.text
    assert answer.json()["metadata"]["generation"] == 3
    lines = table_lines(kubectl("get", "deployment", name, "-o", "wide"))
    assert lines[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS",
                        "IMAGES", "SELECTOR"]
    assert lines[1][:4] == [name, "2/5", "0", "0"]
    assert lines[1][5:] == ["busybox", "kubelite/busybox:1.36", f"app={name}"]


async def test_scale_refuses_negative_replicas_and_stale_versions(
        http: httpx.AsyncClient) -> None:
    name = unique("neg")
    assert (await http.post(f"{APPS}/deployments", json=deployment(name))).status_code == 201
    answer = await http.patch(f"{APPS}/deployments/{name}/scale",
                              json={"spec": {"replicas": -1}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status_code == 422
    assert answer.json()["message"] == (f'Scale.autoscaling "{name}" is invalid: spec.replicas: '
                                        "Invalid value: -1: must be greater than or equal to 0")
    scale = (await http.get(f"{APPS}/deployments/{name}/scale")).json()
    stale = {**scale, "metadata": {**scale["metadata"], "resourceVersion": "1"},
             "spec": {"replicas": 7}}
    answer = await http.put(f"{APPS}/deployments/{name}/scale", json=stale)
    assert answer.status_code == 409
    scale["spec"] = {"replicas": 7}
    answer = await http.put(f"{APPS}/deployments/{name}/scale", json=scale)
    assert answer.status_code == 200, answer.text
    assert (await http.get(f"{APPS}/deployments/{name}")).json()["spec"]["replicas"] == 7


def never_restarting(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return body


async def test_deployment_validation_as_kube(http: httpx.AsyncClient) -> None:
    cases = {
        "selector does not match": (
            deployment(unique("bad"), selector={"matchLabels": {"app": "other"}}),
            "spec.template.metadata.labels: Invalid value: "
            'map[string]string{"app":"NAME"}: `selector` does not match template `labels`'),
        "empty selector": (
            deployment(unique("bad"), selector={}),
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid "
            "for deployment"),
        "restartPolicy": (
            never_restarting(deployment(unique("bad"))),
            'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: '
            '"Always"'),
        "both zero": (
            deployment(unique("bad"), strategy={"rollingUpdate": {"maxSurge": 0,
                                                                  "maxUnavailable": 0}}),
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when "
            "`maxSurge` is 0"),
        "recreate with rollingUpdate": (
            deployment(unique("bad"), strategy={"type": "Recreate",
                                                "rollingUpdate": {"maxSurge": 1}}),
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` "
            "is 'Recreate'"),
        "negative replicas": (
            deployment(unique("bad"), replicas=-2),
            "spec.replicas: Invalid value: -2: must be greater than or equal to 0"),
    }
    for what, (body, message) in cases.items():
        name = body["metadata"]["name"]
        answer = await http.post(f"{APPS}/deployments", json=body)
        assert answer.status_code == 422, what
        status = answer.json()
        assert status["message"] == (f'Deployment.apps "{name}" is invalid: '
                                     f"{message.replace('NAME', name)}"), what
        assert status["details"]["group"] == "apps" and status["details"]["kind"] == "Deployment"
        assert (await http.get(f"{APPS}/deployments/{name}")).status_code == 404, what


async def test_selector_is_immutable(http: httpx.AsyncClient) -> None:
    name = unique("immutable")
    created = (await http.post(f"{APPS}/deployments", json=deployment(name))).json()
    changed = deployment(name, labels={"app": name, "tier": "x"})
    changed["metadata"] = created["metadata"]
    answer = await http.put(f"{APPS}/deployments/{name}", json=changed)
    assert answer.status_code == 422
    assert answer.json()["message"] == (
        f'Deployment.apps "{name}" is invalid: spec.selector: Invalid value: '
        'v1.LabelSelector{MatchLabels:map[string]string{"app":"' + name + '", "tier":"x"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable")


def test_kubectl_apply_twice_then_server_side(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("applied")
    manifest = tmp_path / "deployment.yaml"
    body = deployment(name, replicas=2)
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    manifest.write_text(yaml.safe_dump(body))
    assert "created" in kubectl("apply", "-f", str(manifest))
    body["spec"]["replicas"] = 4
    body["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2"
    manifest.write_text(yaml.safe_dump(body))
    assert "configured" in kubectl("apply", "-f", str(manifest))
    stored = yaml.safe_load(kubectl("get", "deployment", name, "-o", "yaml"))
    assert stored["spec"]["replicas"] == 4
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "2"}]
    assert stored["metadata"]["generation"] == 2
    assert "serverside-applied" in kubectl("apply", "--server-side", "--force-conflicts",
                                           "-f", str(manifest))


async def test_kubectl_create_job_generates_the_selector(kubectl: Kubectl,
                                                         http: httpx.AsyncClient) -> None:
    name = unique("hello")
    kubectl("create", "job", name, f"--image={IMAGE}", "--", "echo", "hi")
    job = (await http.get(f"{BATCH}/jobs/{name}")).json()
    uid = job["metadata"]["uid"]
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == generated
    assert job["metadata"]["labels"] == generated
    assert {k: job["spec"][k] for k in ("completions", "parallelism", "backoffLimit",
                                        "completionMode", "suspend", "manualSelector",
                                        "podReplacementPolicy")} == {
        "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
        "suspend": False, "manualSelector": False, "podReplacementPolicy": "TerminatingOrFailed"}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    lines = table_lines(kubectl("get", "job", name))
    assert lines[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert lines[1][:3] == [name, "Running", "0/1"] and len(lines[1]) == 4  # no duration yet
    # the template is fixed once the job exists
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "kubelite/busybox:1.36"
    answer = await http.put(f"{BATCH}/jobs/{name}", json=job)
    assert answer.status_code == 422
    assert "spec.template: Invalid value" in answer.json()["message"]
    assert "field is immutable" in answer.json()["message"]


async def test_job_refuses_a_selector_it_did_not_generate_and_restart_always(
        http: httpx.AsyncClient) -> None:
    name = unique("job")
    template = {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]}}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template}}
    answer = await http.post(f"{BATCH}/jobs", json=body)
    assert answer.status_code == 422
    message = answer.json()["message"]
    assert "`selector` not auto-generated" in message
    assert ('spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
            '"OnFailure", "Never"') in message
    body["spec"]["manualSelector"] = True
    template["spec"]["restartPolicy"] = "OnFailure"
    answer = await http.post(f"{BATCH}/jobs", json=body)
    assert answer.status_code == 201, answer.text
    assert answer.json()["spec"]["selector"] == {"matchLabels": {"a": "b"}}


def test_official_client_replica_sets_and_scale(api_client: kubernetes.client.ApiClient) -> None:
    apps = kubernetes.client.AppsV1Api(api_client)
    name = unique("rs")
    body = kubernetes.client.V1ReplicaSet(
        metadata=kubernetes.client.V1ObjectMeta(name=name),
        spec=kubernetes.client.V1ReplicaSetSpec(
            selector=kubernetes.client.V1LabelSelector(match_labels={"rs": name}),
            template=kubernetes.client.V1PodTemplateSpec(
                metadata=kubernetes.client.V1ObjectMeta(labels={"rs": name}),
                spec=kubernetes.client.V1PodSpec(containers=[
                    kubernetes.client.V1Container(name="c", image=IMAGE)]))))
    created = apps.create_namespaced_replica_set("default", body)
    assert created.spec.replicas == 1
    assert created.metadata.generation == 1
    scale = apps.read_namespaced_replica_set_scale(name, "default")
    assert scale.spec.replicas == 1 and scale.status.selector == f"rs={name}"
    apps.patch_namespaced_replica_set_scale(name, "default", {"spec": {"replicas": 4}})
    assert apps.read_namespaced_replica_set(name, "default").spec.replicas == 4
    names = [rs.metadata.name for rs in apps.list_namespaced_replica_set("default").items]
    assert name in names
    batch = kubernetes.client.BatchV1Api(api_client)
    assert isinstance(batch.list_namespaced_job("default").items, list)


def test_kubectl_get_all_lists_the_workloads(kubectl: Kubectl) -> None:
    name = unique("all")
    kubectl("create", "deployment", name, f"--image={IMAGE}")
    kubectl("create", "job", name, f"--image={IMAGE}")
    output = kubectl("get", "all")
    assert f"deployment.apps/{name}" in output
    assert f"job.batch/{name}" in output
    rows = table_lines(kubectl("get", "rs"))
    assert rows[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"] or rows == []


async def test_discovery_names_the_groups_short_names_and_scale(http: httpx.AsyncClient) -> None:
    groups = {g["name"]: g for g in (await http.get("/apis")).json()["groups"]}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert groups["batch"]["preferredVersion"] == {"groupVersion": "batch/v1", "version": "v1"}
    apps = {r["name"]: r for r in (await http.get("/apis/apps/v1")).json()["resources"]}
    assert apps["deployments"]["shortNames"] == ["deploy"]
    assert apps["deployments"]["categories"] == ["all"]
    assert apps["replicasets"]["shortNames"] == ["rs"]
    assert apps["deployments/scale"]["kind"] == "Scale"
    assert apps["deployments/scale"]["group"] == "autoscaling"
    assert apps["deployments/scale"]["version"] == "v1"
    assert sorted(apps["deployments/scale"]["verbs"]) == ["get", "patch", "update"]
    assert "deployments/status" in apps
    batch = {r["name"]: r for r in (await http.get("/apis/batch/v1")).json()["resources"]}
    assert batch["jobs"]["categories"] == ["all"] and "jobs/status" in batch


def test_kubectl_explain_reads_the_schema(kubectl: Kubectl) -> None:
    output = kubectl("explain", "deployment.spec.strategy")
    assert "rollingUpdate" in output and "KIND:       Deployment" in output
    assert "completionMode" in kubectl("explain", "job.spec")
