"""The Node authorizer's graph (issue 14, "Configuration and volumes"): what a pod
references (after kube's graph_populator_test.go and pod_test.go's
TestPodSecrets/TestPodConfigmaps), and node_authorizer_test.go's cases for secrets,
configmaps, claims and service account tokens as tables."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth import Attributes, Decision, UserInfo
from apiserver.auth.node import node_decision
from apiserver.auth.requestinfo import request_attributes
from common.pod_refs import pod_references
from tests.support import ApiServer, eventually, unique, user_cert

NODE_A = UserInfo("system:node:a", groups=("system:nodes", "system:authenticated"))
NODE_B = UserInfo("system:node:b", groups=("system:nodes", "system:authenticated"))

EVERYTHING: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns"},
    "spec": {
        "serviceAccountName": "builder",
        "imagePullSecrets": [{"name": "pull"}],
        "volumes": [
            {"name": "s", "secret": {"secretName": "vol-secret"}},
            {"name": "c", "configMap": {"name": "vol-cm"}},
            {"name": "p", "projected": {"sources": [
                {"secret": {"name": "proj-secret"}}, {"configMap": {"name": "proj-cm"}},
                {"downwardAPI": {"items": []}}, {"serviceAccountToken": {"path": "t"}}]}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-s"}}},
            {"name": "az", "azureFile": {"secretName": "az-s", "shareName": "x"}},
        ],
        "initContainers": [{"name": "i", "image": "i", "envFrom": [
            {"secretRef": {"name": "init-from-secret"}}]}],
        "containers": [{"name": "app", "image": "i", "env": [
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "D", "value": "plain"}],
            "envFrom": [{"configMapRef": {"name": "from-cm"}, "prefix": "X_"}]}],
        "ephemeralContainers": [{"name": "debug", "image": "i", "env": [
            {"name": "E", "valueFrom": {"secretKeyRef": {"name": "debug-secret",
                                                          "key": "k"}}}]}],
    },
}


def test_every_reference_of_a_pod() -> None:
    refs = pod_references(EVERYTHING)
    assert refs.secrets == {"pull", "vol-secret", "proj-secret", "csi-s", "az-s",
                            "init-from-secret", "env-secret", "debug-secret"}
    assert refs.configmaps == {"vol-cm", "proj-cm", "env-cm", "from-cm"}
    assert refs.serviceaccounts == {"builder"}
    assert refs.persistentvolumeclaims == {"data", "web-scratch"}


@pytest.mark.parametrize("pod", [
    {}, {"spec": None}, {"spec": {"volumes": [None, 3, {"secret": None}]}},
    {"spec": {"containers": [{"env": [None, {"valueFrom": "x"}]}]}},
    {"spec": {"imagePullSecrets": [{"name": 5}], "serviceAccountName": ""}},
])
def test_malformed_pods_reference_nothing(pod: dict[str, Any]) -> None:
    refs = pod_references(pod)
    assert not (refs.secrets or refs.configmaps or refs.serviceaccounts
                or refs.persistentvolumeclaims)


# pods bound where: ns/web on node a references what EVERYTHING does; ns/other on b
PODS = {("ns", "web"): ("a", EVERYTHING),
        ("ns", "other"): ("b", {"spec": {"volumes": [{"secret": {"secretName": "b-only"}}]}})}


def graph(node: str, resource: str, namespace: str, name: str) -> bool:
    return any(bound == node and key[0] == namespace
               and name in pod_references(pod).names(resource)
               for key, (bound, pod) in PODS.items())


def res(verb: str, resource: str, *, sub: str = "", ns: str = "ns", name: str = "",
        user: UserInfo = NODE_A) -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=True, resource=resource,
                      subresource=sub, namespace=ns, name=name)


def selected(verb: str, resource: str, selector: str, *, ns: str = "ns") -> Attributes:
    query = {"fieldSelector": selector, **({"watch": "true"} if verb == "watch" else {})}
    return request_attributes(NODE_A, "GET", f"/api/v1/namespaces/{ns}/{resource}", query)


ALLOW = (Decision.ALLOW, "")
NO_PATH_A = (Decision.NO_OPINION, "no relationship found between node 'a' and this object")
NO_NAME = (Decision.NO_OPINION, "No Object name found")


@pytest.mark.parametrize(("attributes", "expected"), [
    (res("get", "secrets", name="vol-secret"), ALLOW),
    (res("get", "secrets", name="pull"), ALLOW),
    (res("get", "secrets", name="debug-secret"), ALLOW),
    (res("get", "configmaps", name="from-cm"), ALLOW),
    (selected("watch", "configmaps", "metadata.name=env-cm"), ALLOW),
    (selected("list", "secrets", "metadata.name=proj-secret"), ALLOW),
    (res("get", "secrets", name="b-only"), NO_PATH_A),  # another node's pod
    (res("get", "secrets", name="b-only", user=NODE_B), ALLOW),
    (res("get", "secrets", name="unrelated"), NO_PATH_A),
    (res("get", "secrets", name="vol-secret", ns="elsewhere"), NO_PATH_A),
    (res("get", "configmaps", name="vol-secret"), NO_PATH_A),  # a secret's name, not a cm
    (selected("list", "secrets", ""), NO_NAME),
    (selected("watch", "configmaps", "metadata.name!=env-cm"), NO_NAME),
    (res("list", "secrets", ns=""),
     (Decision.NO_OPINION, "can only read namespaced object of this type")),
    (res("update", "secrets", name="vol-secret"),
     (Decision.NO_OPINION, "can only read resources of this type")),
    (res("delete", "configmaps", name="vol-cm"),
     (Decision.NO_OPINION, "can only read resources of this type")),
    (res("get", "secrets", sub="x", name="vol-secret"),
     (Decision.NO_OPINION, "cannot read subresource")),
    (res("get", "persistentvolumeclaims", name="data"), ALLOW),
    (res("get", "persistentvolumeclaims", name="web-scratch"), ALLOW),
    (res("list", "persistentvolumeclaims", name="data"),
     (Decision.NO_OPINION, "can only get individual resources of this type")),
    (res("patch", "persistentvolumeclaims", sub="status", name="data"), ALLOW),
    (res("get", "persistentvolumes", ns="", name="pv"), NO_PATH_A),
    (res("create", "serviceaccounts", sub="token", name="builder"), ALLOW),
    (res("create", "serviceaccounts", sub="token", name="default"), NO_PATH_A),
    (res("get", "serviceaccounts", name="builder"),
     (Decision.NO_OPINION, "can only create tokens for individual service accounts")),
    (res("create", "serviceaccounts", name="builder"),
     (Decision.NO_OPINION, "can only create token subresource of serviceaccount")),
])
def test_node_reads_what_its_pods_reference(attributes: Attributes,
                                            expected: tuple[Decision, str]) -> None:
    assert node_decision(attributes, graph=graph) == expected


def test_without_a_graph_nothing_is_related() -> None:
    assert node_decision(res("get", "secrets", name="vol-secret")) == NO_PATH_A


# --- over HTTP: the secure apiserver's Node authorizer, two nodes ---------------------------

async def test_each_node_reads_only_what_its_pods_reference(apiserver: ApiServer) -> None:
    ns = unique("graph")
    n1, n2 = unique("n1"), unique("n2")
    node_cert = {n: user_cert(f"system:node:{n}", ("system:nodes",)) for n in (n1, n2)}
    async with apiserver.client() as admin:
        assert (await admin.post("/api/v1/namespaces", json={
            "metadata": {"name": ns}})).status_code == 201
        for kind, name in (("configmaps", "app-config"), ("secrets", "app-secret"),
                           ("secrets", "unreferenced")):
            created = await admin.post(f"/api/v1/namespaces/{ns}/{kind}",
                                       json={"metadata": {"name": name}, "data": {}})
            assert created.status_code == 201, created.text
        pod = {"metadata": {"name": "web"}, "spec": {
            "nodeName": n1, "containers": [{"name": "app", "image": "busybox"}],
            "volumes": [{"name": "c", "configMap": {"name": "app-config"}},
                        {"name": "s", "secret": {"secretName": "app-secret"}}]}}
        created = await admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
        assert created.status_code == 201, created.text
        try:
            async with apiserver.client(node_cert[n1]) as node1, \
                    apiserver.client(node_cert[n2]) as node2:
                async def node1_reads() -> bool:
                    got = await node1.get(f"/api/v1/namespaces/{ns}/secrets/app-secret")
                    return got.status_code == 200
                await eventually(node1_reads, what="the graph to learn the pod")
                got = await node1.get(f"/api/v1/namespaces/{ns}/configmaps/app-config")
                assert got.json()["metadata"]["name"] == "app-config"
                # the kubelet's watch of one object
                listed = await node1.get(f"/api/v1/namespaces/{ns}/configmaps", params={
                    "fieldSelector": "metadata.name=app-config"})
                assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["app-config"]
                for client, user, path in (
                        (node2, n2, "secrets/app-secret"), (node2, n2, "configmaps/app-config"),
                        (node1, n1, "secrets/unreferenced")):
                    denied = await client.get(f"/api/v1/namespaces/{ns}/{path}")
                    assert denied.status_code == 403, denied.text
                    kind, name = path.split("/")
                    assert denied.json()["message"] == (
                        f'{kind} "{name}" is forbidden: User "system:node:{user}" cannot get '
                        f'resource "{kind}" in API group "" in the namespace "{ns}": no '
                        f"relationship found between node '{user}' and this object")
                every = await node1.get(f"/api/v1/namespaces/{ns}/secrets")
                assert every.status_code == 403
                assert every.json()["message"].endswith("No Object name found")
                # the pod goes: so does node 1's access
                await admin.delete(f"/api/v1/namespaces/{ns}/pods/web",
                                   params={"gracePeriodSeconds": "0"})

                async def node1_denied() -> bool:
                    got = await node1.get(f"/api/v1/namespaces/{ns}/secrets/app-secret")
                    return got.status_code == 403
                await eventually(node1_denied, what="the graph to forget the pod")
        finally:
            await admin.delete(f"/api/v1/namespaces/{ns}")
