"""pods/ephemeralcontainers on the apiserver: served as kube serves it (only
spec.ephemeralContainers changes, append-only, validated as ValidatePodEphemeralContainersUpdate),
with PUT and each patch type, and listed in discovery and OpenAPI. The kubelet's side is
in tests/test_kubelet_ephemeral.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ApiServer, Kubectl, unique

NS = "default"
BUSYBOX = "kubelite/busybox:1.35"


def pods(name: str = "", sub: str = "") -> str:
    path = f"/api/v1/namespaces/{NS}/pods"
    return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver, tmp_path / "kubectl")


@pytest.fixture
async def pod(http: httpx.AsyncClient) -> AsyncIterator[dict[str, Any]]:
    """A pod bound to a node no kubelet runs: the API side only."""
    name = unique("ephemeral")
    body = {"metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": "nowhere",
                     "containers": [{"name": "app", "image": BUSYBOX}],
                     "initContainers": [{"name": "setup", "image": BUSYBOX}]}}
    response = await http.post(pods(), json=body)
    assert response.status_code == 201, response.text
    yield response.json()
    await http.delete(pods(name), params={"gracePeriodSeconds": "0"})


def debugger(name: str = "debugger", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX, "command": ["sleep", "3600"], **extra}


async def patch(http: httpx.AsyncClient, name: str, body: Any,
                patch_type: str = "strategic-merge-patch+json") -> httpx.Response:
    return await http.patch(pods(name, "ephemeralcontainers"), json=body,
                            headers={"Content-Type": f"application/{patch_type}"})


def causes(response: httpx.Response) -> list[tuple[str, str, str]]:
    assert response.status_code == 422, response.text
    return [(c["reason"], c["field"], c["message"])
            for c in response.json()["details"]["causes"]]


async def test_get_is_the_pod(http: httpx.AsyncClient, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    response = await http.get(pods(name, "ephemeralcontainers"))
    assert response.status_code == 200
    assert response.json() == (await http.get(pods(name))).json()


@pytest.mark.parametrize("patch_type", ["strategic-merge-patch+json", "merge-patch+json",
                                        "json-patch+json"])
async def test_patch_adds_only_ephemeral_containers(http: httpx.AsyncClient,
                                                    pod: dict[str, Any], patch_type: str) -> None:
    name = pod["metadata"]["name"]
    container = debugger(targetContainerName="app")
    # Everything else in the patch is ignored, as kube's strategy drops it.
    if patch_type == "json-patch+json":
        body: Any = [{"op": "add", "path": "/spec/ephemeralContainers", "value": [container]},
                     {"op": "add", "path": "/metadata/labels/extra", "value": "x"},
                     {"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 5}]
    else:
        body = {"metadata": {"labels": {"extra": "x"}},
                "spec": {"ephemeralContainers": [container], "activeDeadlineSeconds": 5},
                "status": {"phase": "Failed"}}
    response = await patch(http, name, body, patch_type)
    assert response.status_code == 200, response.text
    got = response.json()
    assert got["spec"]["ephemeralContainers"] == [{
        **container, "imagePullPolicy": "IfNotPresent", "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]
    assert got["metadata"]["labels"] == {"app": "web"}
    assert "activeDeadlineSeconds" not in got["spec"]
    assert got["status"]["phase"] == "Pending"
    assert got["metadata"]["generation"] == 2
    assert (await http.get(pods(name))).json() == got


async def test_put_appends_and_keeps_the_rest(http: httpx.AsyncClient,
                                              pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    first = (await patch(http, name, {"spec": {"ephemeralContainers": [debugger("one")]}}))
    assert first.status_code == 200, first.text
    sent = first.json()
    sent["spec"]["ephemeralContainers"].append(debugger("two"))
    sent["spec"]["containers"][0]["image"] = "kubelite/busybox:other"  # ignored
    response = await http.put(pods(name, "ephemeralcontainers"), json=sent)
    assert response.status_code == 200, response.text
    got = response.json()
    assert [c["name"] for c in got["spec"]["ephemeralContainers"]] == ["one", "two"]
    assert got["spec"]["containers"][0]["image"] == BUSYBOX
    # a stale resourceVersion is a conflict, as for any update
    response = await http.put(pods(name, "ephemeralcontainers"), json=sent)
    assert response.status_code == 409, response.text


async def test_existing_ones_cannot_change_or_go(http: httpx.AsyncClient,
                                                 pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    assert (await patch(http, name, {"spec": {"ephemeralContainers": [debugger()]}})
            ).status_code == 200
    removed = await patch(http, name, [{"op": "remove", "path": "/spec/ephemeralContainers"}],
                          "json-patch+json")
    assert causes(removed) == [(
        "FieldValueForbidden", "spec.ephemeralContainers",
        'Forbidden: existing ephemeral containers "debugger" may not be removed\n')]
    changed = await patch(http, name, {"spec": {"ephemeralContainers": [
        {"name": "debugger", "image": "kubelite/busybox:other"}]}})
    (reason, path, message), = causes(changed)
    assert (reason, path) == ("FieldValueForbidden", "spec.ephemeralContainers")
    assert message.startswith('Forbidden: existing ephemeral containers "debugger" may not be '
                              "changed\n")
    assert "kubelite/busybox:other" in message


async def test_validated_as_kube_validates(http: httpx.AsyncClient, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    response = await patch(http, name, {"spec": {"ephemeralContainers": [
        debugger("app"), debugger("setup"),
        debugger("web", targetContainerName="nothere",
                 ports=[{"containerPort": 80}], resources={"limits": {"cpu": "1"}},
                 readinessProbe={"exec": {"command": ["true"]}},
                 lifecycle={"preStop": {"exec": {"command": ["true"]}}}),
        debugger("web"),
    ]}})
    assert causes(response) == [
        ("FieldValueDuplicate", "spec.ephemeralContainers[0].name", 'Duplicate value: "app"'),
        ("FieldValueDuplicate", "spec.ephemeralContainers[1].name", 'Duplicate value: "setup"'),
        ("FieldValueNotFound", "spec.ephemeralContainers[2].targetContainerName",
         'Not found: "nothere"'),
        ("FieldValueForbidden", "spec.ephemeralContainers[2].ports",
         "Forbidden: cannot be set for an Ephemeral Container"),
        ("FieldValueForbidden", "spec.ephemeralContainers[2].resources",
         "Forbidden: cannot be set for an Ephemeral Container"),
        ("FieldValueForbidden", "spec.ephemeralContainers[2].readinessProbe",
         "Forbidden: cannot be set for an Ephemeral Container"),
        ("FieldValueForbidden", "spec.ephemeralContainers[2].lifecycle",
         "Forbidden: cannot be set for an Ephemeral Container"),
        ("FieldValueDuplicate", "spec.ephemeralContainers[3].name", 'Duplicate value: "web"'),
    ]
    assert response.json()["message"].startswith(f'Pod "{name}" is invalid: [')
    # nothing was written
    assert "ephemeralContainers" not in (await http.get(pods(name))).json()["spec"]


async def test_admission_sees_them(http: httpx.AsyncClient, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    response = await patch(http, name, {"spec": {"ephemeralContainers": [
        debugger(securityContext={"privileged": True})]}})
    assert response.status_code == 403, response.text
    assert response.json()["message"] == (
        f'pods "{name}" is forbidden: violates PodSecurity "baseline:latest": privileged '
        '(container "debugger" must not set securityContext.privileged=true)')


async def test_not_through_the_pod_itself(http: httpx.AsyncClient, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    created = await http.post(pods(), json={
        "metadata": {"name": unique("with-debugger")},
        "spec": {"containers": [{"name": "app", "image": BUSYBOX}],
                 "ephemeralContainers": [debugger()]}})
    assert causes(created) == [("FieldValueForbidden", "spec.ephemeralContainers",
                                "Forbidden: cannot be set on create")]
    patched = await http.patch(pods(name), json={"spec": {"ephemeralContainers": [debugger()]}},
                               headers={"Content-Type": "application/merge-patch+json"})
    (reason, path, message), = causes(patched)
    assert (reason, path) == ("FieldValueForbidden", "spec")
    assert message.startswith("Forbidden: pod updates may not change fields other than")
    # once added, a pod update that keeps them as they are is fine
    assert (await patch(http, name, {"spec": {"ephemeralContainers": [debugger()]}})
            ).status_code == 200
    labelled = await http.patch(pods(name), json={"metadata": {"labels": {"more": "yes"}}},
                                headers={"Content-Type": "application/merge-patch+json"})
    assert labelled.status_code == 200, labelled.text


async def test_missing_pod_is_a_404_with_details(http: httpx.AsyncClient) -> None:
    response = await http.get(pods("nope", "ephemeralcontainers"))
    assert response.status_code == 404
    assert response.json()["details"] == {"name": "nope", "kind": "pods"}
    response = await patch(http, "nope", {"spec": {"ephemeralContainers": [debugger()]}})
    assert response.status_code == 404
    assert response.json()["details"] == {"name": "nope", "kind": "pods"}


async def test_listed_in_discovery_and_openapi(http: httpx.AsyncClient) -> None:
    resources = {r["name"]: r for r in (await http.get("/api/v1")).json()["resources"]}
    assert resources["pods/ephemeralcontainers"]["verbs"] == ["get", "patch", "update"]
    assert resources["pods/ephemeralcontainers"]["kind"] == "Pod"
    aggregated = (await http.get("/api", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})).json()
    pod_entry = next(r for r in aggregated["items"][0]["versions"][0]["resources"]
                     if r["resource"] == "pods")
    subresources = {s["subresource"]: s for s in pod_entry["subresources"]}
    assert subresources["ephemeralcontainers"]["verbs"] == ["get", "patch", "update"]
    paths = (await http.get("/openapi/v3/api/v1")).json()["paths"]
    operations = paths["/api/v1/namespaces/{namespace}/pods/{name}/ephemeralcontainers"]
    assert operations["get"]["operationId"] == "readCoreV1NamespacedPodEphemeralcontainers"
    assert operations["patch"]["operationId"] == "patchCoreV1NamespacedPodEphemeralcontainers"
    assert operations["put"]["operationId"] == "replaceCoreV1NamespacedPodEphemeralcontainers"
    swagger = (await http.get("/openapi/v2")).json()["paths"]
    assert set(swagger["/api/v1/namespaces/{namespace}/pods/{name}/ephemeralcontainers"]) >= {
        "get", "put", "patch"}


async def test_kubectl_debug_adds_one(http: httpx.AsyncClient, pod: dict[str, Any],
                                      kubectl: Kubectl) -> None:
    name = pod["metadata"]["name"]
    debug = ("debug", name, f"--image={BUSYBOX}", "--image-pull-policy=IfNotPresent",
             "--target=app", "-c", "debugger")
    # kubectl's default (general) profile lets a debugger with a target trace its processes:
    # SYS_PTRACE, which Pod Security's baseline (the default namespace's level) forbids
    refused = kubectl.run(*debug, "--", "sleep", "3600", check=False)
    assert refused.returncode != 0 and "panic" not in refused.stderr
    assert 'violates PodSecurity "baseline:latest": non-default capabilities (container ' \
           '"debugger" must not include "SYS_PTRACE" in securityContext.capabilities.add)' \
           in refused.stderr
    assert "ephemeralContainers" not in (await http.get(pods(name))).json()["spec"]
    result = kubectl.run(*debug, "--profile=baseline", "--", "sleep", "3600")
    assert "panic" not in result.stderr
    got = (await http.get(pods(name))).json()["spec"]["ephemeralContainers"]
    assert [(c["name"], c["image"], c["command"], c["targetContainerName"]) for c in got] == [
        ("debugger", BUSYBOX, ["sleep", "3600"], "app")]
    assert "capabilities" not in (got[0].get("securityContext") or {})


async def test_kubectl_debug_general_profile_in_a_privileged_namespace(
        http: httpx.AsyncClient, kubectl: Kubectl) -> None:
    namespace = unique("debug-privileged")
    created = await http.post("/api/v1/namespaces", json={"metadata": {
        "name": namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    assert created.status_code == 201, created.text
    base = f"/api/v1/namespaces/{namespace}/pods"
    name = unique("ephemeral")
    assert (await http.post(base, json={"metadata": {"name": name}, "spec": {
        "nodeName": "nowhere", "containers": [{"name": "app", "image": BUSYBOX}]}})
            ).status_code == 201
    try:
        kubectl.run("-n", namespace, "debug", name, f"--image={BUSYBOX}",
                    "--image-pull-policy=IfNotPresent", "--target=app", "-c", "debugger", "--",
                    "sleep", "3600")
        got = (await http.get(f"{base}/{name}")).json()["spec"]["ephemeralContainers"]
        # kubectl's default (general) profile lets a debugger trace its target's processes
        assert got[0]["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]}}
        # a second one is appended (kubectl's patch then carries $setElementOrder)
        kubectl.run("-n", namespace, "debug", name, f"--image={BUSYBOX}", "-c", "second", "--",
                    "true")
        got = (await http.get(f"{base}/{name}")).json()["spec"]["ephemeralContainers"]
        assert [c["name"] for c in got] == ["debugger", "second"]
        # the same name again is refused, as an existing one cannot change
        again = kubectl.run("-n", namespace, "debug", name, f"--image={BUSYBOX}", "-c", "second",
                            "--", "false", check=False)
        assert again.returncode == 1 and "panic" not in again.stderr
        assert 'existing ephemeral containers "second" may not be changed' in again.stderr
    finally:
        await http.delete(f"/api/v1/namespaces/{namespace}")
