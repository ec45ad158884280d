"""The ServiceAccount admission's token volume and the root CA publisher (issue 14): every
pod gets kube's `kube-api-access-*` projected volume (a bound token, the cluster CA from
each namespace's `kube-root-ca.crt` ConfigMap, its namespace) unless it or its
ServiceAccount opts out; a pod naming a ServiceAccount that does not exist is refused.
The rules as tables, the API on the session's secure apiserver, then a real kubelet on
Docker: the files the volume holds are an in-cluster configuration the official Python
client loads and authenticates with, as the pod's ServiceAccount."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes.config.incluster_config import InClusterConfigLoader

from apiserver.resources.pod_serviceaccount import (
    MOUNT_PATH,
    mount_service_account_token,
    should_automount,
    token_volume_source,
)
from apiserver.rootca_publisher import DESCRIPTION, DESCRIPTION_ANNOTATION, wanted_config_map
from tests.docker_support import KubeletProcess, running_kubelet
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import SERVE_FOREVER, create_pod, delete_pod, get_pod, pod_manifest, shell

PODS = "/api/v1/namespaces/default/pods"
ROOT_CA = "/api/v1/namespaces/{}/configmaps/kube-root-ca.crt"


# --- the rules -------------------------------------------------------------------------------

def two_containers() -> dict[str, Any]:
    return {"spec": {"initContainers": [{"name": "init"}],
                     "containers": [{"name": "app"},
                                    {"name": "own", "volumeMounts": [
                                        {"name": "mine", "mountPath": MOUNT_PATH}]}],
                     "volumes": [{"name": "mine", "emptyDir": {}}]}}


def test_each_container_without_its_own_mount_gets_the_volume() -> None:
    pod = two_containers()
    mount_service_account_token(pod, suffix=lambda: "x7k2p")
    spec = pod["spec"]
    mount = {"name": "kube-api-access-x7k2p", "readOnly": True, "mountPath": MOUNT_PATH}
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][1]["volumeMounts"] == [{"name": "mine", "mountPath": MOUNT_PATH}]
    assert spec["volumes"] == [{"name": "mine", "emptyDir": {}},
                               {"name": "kube-api-access-x7k2p", **token_volume_source()}]
    # kube's TokenVolumeSource, to the field
    assert token_volume_source() == {"projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def test_an_existing_token_volume_is_reused_and_nothing_needed_adds_nothing() -> None:
    pod = {"spec": {"containers": [{"name": "app"}],
                    "volumes": [{"name": "kube-api-access-abcde", "emptyDir": {}}]}}
    mount_service_account_token(pod, suffix=lambda: "zzzzz")
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-abcde"
    assert len(pod["spec"]["volumes"]) == 1
    mounted = {"spec": {"containers": [{"name": "a", "volumeMounts": [
        {"name": "v", "mountPath": MOUNT_PATH}]}], "volumes": [{"name": "v"}]}}
    before = copy.deepcopy(mounted)
    mount_service_account_token(mounted)
    assert mounted == before


@pytest.mark.parametrize(("pod_says", "sa_says", "mounted"), [
    (None, None, True), (None, False, False), (True, False, True), (False, None, False),
    (False, True, False),
])
def test_the_pod_decides_then_its_service_account(pod_says: bool | None, sa_says: bool | None,
                                                  mounted: bool) -> None:
    pod: dict[str, Any] = {"spec": {} if pod_says is None
                           else {"automountServiceAccountToken": pod_says}}
    sa: dict[str, Any] = {} if sa_says is None else {"automountServiceAccountToken": sa_says}
    assert should_automount(sa, pod) is mounted


def test_the_root_ca_config_map_is_written_only_when_it_differs() -> None:
    created = wanted_config_map("PEM", None)
    assert created == {"metadata": {"name": "kube-root-ca.crt", "annotations": {
        DESCRIPTION_ANNOTATION: DESCRIPTION}}, "data": {"ca.crt": "PEM"}}
    assert created is not None
    assert wanted_config_map("PEM", created) is None
    changed = {**created, "data": {"ca.crt": "other"},
               "metadata": {**created["metadata"], "labels": {"keep": "me"}}}
    fixed = wanted_config_map("PEM", changed)
    assert fixed is not None and fixed["data"] == {"ca.crt": "PEM"}
    assert fixed["metadata"]["labels"] == {"keep": "me"}


# --- the API -----------------------------------------------------------------------------------

async def test_a_pod_gets_the_volume_unless_it_opts_out(http: httpx.AsyncClient) -> None:
    name = unique("sa-vol")
    body = pod_manifest(name, "nowhere", [shell("app", "true")])
    body["spec"]["initContainers"] = [shell("init", "true")]
    response = await http.post(PODS, json=body)
    assert response.status_code == 201, response.text
    spec = response.json()["spec"]
    (volume,) = spec["volumes"]
    assert volume["name"].startswith("kube-api-access-") and len(volume["name"]) == 21
    assert volume["projected"] == token_volume_source()["projected"]
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["volumeMounts"] == [
            {"name": volume["name"], "readOnly": True, "mountPath": MOUNT_PATH}]
    assert spec["serviceAccountName"] == "default"
    await http.delete(f"{PODS}/{name}")

    opted_out = pod_manifest(unique("sa-none"), "nowhere", [shell("app", "true")])
    opted_out["spec"]["automountServiceAccountToken"] = False
    response = await http.post(PODS, json=opted_out)
    assert response.status_code == 201, response.text
    assert "volumes" not in response.json()["spec"]
    await http.delete(f"{PODS}/{opted_out['metadata']['name']}")


async def test_a_service_account_that_opts_out_and_one_that_does_not_exist(
        http: httpx.AsyncClient) -> None:
    account = unique("quiet")
    response = await http.post("/api/v1/namespaces/default/serviceaccounts", json={
        "metadata": {"name": account}, "automountServiceAccountToken": False})
    assert response.status_code == 201, response.text
    body = pod_manifest(unique("sa-quiet"), "nowhere", [shell("app", "true")])
    body["spec"]["serviceAccountName"] = account
    response = await http.post(PODS, json=body)
    assert response.status_code == 201, response.text
    assert "volumes" not in response.json()["spec"]
    await http.delete(f"{PODS}/{body['metadata']['name']}")
    await http.delete(f"/api/v1/namespaces/default/serviceaccounts/{account}")

    missing = pod_manifest(unique("sa-missing"), "nowhere", [shell("app", "true")])
    missing["spec"]["serviceAccountName"] = "nosuch"
    response = await http.post(PODS, json=missing)
    assert response.status_code == 403, response.text
    assert response.json()["message"] == (
        f'pods "{missing["metadata"]["name"]}" is forbidden: error looking up service '
        f'account default/nosuch: serviceaccount "nosuch" not found')
    assert (await http.get(f"{PODS}/{missing['metadata']['name']}")).status_code == 404


async def test_every_namespace_holds_the_root_ca_and_gets_it_back(
        http: httpx.AsyncClient, apiserver: ApiServer) -> None:
    assert apiserver.pki_dir is not None
    ca = (apiserver.pki_dir / "ca.crt").read_text()
    namespace = unique("rootca")
    assert (await http.post("/api/v1/namespaces",
                            json={"metadata": {"name": namespace}})).status_code == 201

    async def published(ns: str) -> dict[str, Any] | None:
        response = await http.get(ROOT_CA.format(ns))
        if response.status_code != 200 or response.json().get("data") != {"ca.crt": ca}:
            return None
        return dict(response.json())
    for ns in ("default", "kube-system", namespace):
        found = await eventually(lambda ns=ns: published(ns), timeout=30,
                                 what=f"kube-root-ca.crt in {ns}")
        assert found["metadata"]["annotations"][DESCRIPTION_ANNOTATION] == DESCRIPTION
    # Changed or deleted, it comes back.
    found["data"] = {"ca.crt": "not a CA"}
    assert (await http.put(ROOT_CA.format(namespace), json=found)).status_code == 200
    await eventually(lambda: published(namespace), timeout=30, what="the root CA put back")
    assert (await http.delete(ROOT_CA.format(namespace))).status_code == 200
    await eventually(lambda: published(namespace), timeout=30, what="the root CA recreated")
    await http.delete(f"/api/v1/namespaces/{namespace}")


# --- a real kubelet on Docker, and the official Python client as an in-cluster client ---------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-sa"),
                         prefix="sa") as process:
        yield process


async def test_the_volume_is_an_in_cluster_config_the_python_client_loads(
        http: httpx.AsyncClient, apiserver: ApiServer, kubelet: KubeletProcess,
        tmp_path: Path) -> None:
    assert apiserver.pki_dir is not None
    name = unique("incluster")
    await create_pod(http, pod_manifest(name, kubelet.node_name,
                                        [shell("app", SERVE_FOREVER)], grace=1))

    async def running() -> bool:
        return (await get_pod(http, name))["status"].get("phase") == "Running"
    await eventually(running, timeout=90, what=f"{name} Running")
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")

    def read(file: str) -> str:
        return kubectl.run("exec", name, "--", "cat", f"{MOUNT_PATH}/{file}").stdout
    token, ca, namespace = [await asyncio.to_thread(read, f)
                            for f in ("token", "ca.crt", "namespace")]
    assert namespace == "default"
    assert ca == (apiserver.pki_dir / "ca.crt").read_text()
    listing = await asyncio.to_thread(kubectl.run, "exec", name, "--", "ls", "-a", MOUNT_PATH)
    assert {"..data", "token", "ca.crt", "namespace"} <= set(listing.stdout.split())

    # What client-go's InClusterConfig and the Python client's load_incluster_config read:
    # the token and CA at those paths, the kubernetes Service's host and port.
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text(ca)
    host, port = apiserver.url.removeprefix("https://").rsplit(":", 1)
    configuration = k8s.Configuration()
    InClusterConfigLoader(token_filename=str(tmp_path / "token"),
                          cert_filename=str(tmp_path / "ca.crt"),
                          environ={"KUBERNETES_SERVICE_HOST": host,
                                   "KUBERNETES_SERVICE_PORT": port}
                          ).load_and_set(configuration)

    def who_am_i() -> Any:
        with k8s.ApiClient(configuration) as api:
            return k8s.AuthenticationV1Api(api).create_self_subject_review(
                k8s.V1SelfSubjectReview())
    review = await asyncio.to_thread(who_am_i)
    user = review.status.user_info
    assert user.username == "system:serviceaccount:default:default"
    assert user.extra["authentication.kubernetes.io/pod-name"] == [name]
    await delete_pod(http, name)
