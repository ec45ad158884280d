"""Volumes and env from ConfigMaps and Secrets on a real kubelet over real Docker (issue
14, "Configuration and volumes"): a secure apiserver (RBAC + the Node authorizer, so the
kubelet reads only what its pods reference), the real kubectl and the official client."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    remove_node_containers,
    unmount_under,
)
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import PRIVILEGED_NS, SERVE_FOREVER, pod_manifest, shell


@pytest.fixture(scope="module")
def root_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("kubelet-volumes-root"))


@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, root_dir: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeletProcess]:
    ensure_docker()
    node = unique("vol")
    process = KubeletProcess(apiserver, Path(tmp_path_factory.mktemp("kubelet-volumes")),
                             node_name=node, extra_args=["--root-dir", str(root_dir)]).start()
    yield process
    process.stop()
    remove_node_containers(node)
    unmount_under(root_dir)


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver, Path(tmp_path_factory.mktemp("kubectl-volumes")))


@pytest.fixture
async def ns(http: httpx.AsyncClient) -> AsyncIterator[str]:
    name = unique("vol")
    created = await http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert created.status_code == 201, created.text
    yield name
    await http.delete(f"/api/v1/namespaces/{name}")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def create(http: httpx.AsyncClient, ns: str, kind: str, body: dict[str, Any]) -> None:
    created = await http.post(f"/api/v1/namespaces/{ns}/{kind}", json=body)
    assert created.status_code == 201, created.text


async def pod_status(http: httpx.AsyncClient, ns: str, name: str) -> dict[str, Any]:
    got = await http.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert got.status_code == 200, got.text
    return dict(got.json().get("status") or {})


async def running(http: httpx.AsyncClient, ns: str, name: str) -> None:
    async def check() -> bool:
        statuses = (await pod_status(http, ns, name)).get("containerStatuses") or []
        return bool(statuses) and all("running" in s["state"] for s in statuses)
    await eventually(check, timeout=60, what=f"{ns}/{name} running")


async def waiting(http: httpx.AsyncClient, ns: str, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        for status in (await pod_status(http, ns, name)).get("containerStatuses") or []:
            reason = (status["state"].get("waiting") or {}).get("reason")
            if reason and reason not in ("ContainerCreating", "PodInitializing"):
                return dict(status["state"]["waiting"])
        return None
    return await eventually(check, timeout=60, what=f"{ns}/{name} waiting")


async def events(http: httpx.AsyncClient, ns: str, name: str) -> list[dict[str, Any]]:
    got = await http.get(f"/api/v1/namespaces/{ns}/events",
                         params={"fieldSelector": f"involvedObject.name={name}"})
    return list(got.json()["items"])


def exec_(kubectl: Kubectl, ns: str, pod: str, *command: str, container: str = "") -> str:
    where = ["-c", container] if container else []
    return kubectl("exec", "-n", ns, pod, *where, "--", *command)


async def test_configmap_secret_downward_and_empty_dir_volumes(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl, ns: str,
        root_dir: Path) -> None:
    kubectl("create", "configmap", "app", "-n", ns, "--from-literal=greeting=hello",
            "--from-literal=color=blue")
    await create(http, ns, "secrets", {"metadata": {"name": "creds"},
                                       "data": {"password": b64("hunter2")}})
    name = unique("vols")
    manifest = pod_manifest(name, kubelet.node_name, [
        shell("app", SERVE_FOREVER, volumeMounts=[
            {"name": "config", "mountPath": "/etc/app"},
            {"name": "picked", "mountPath": "/etc/picked"},
            {"name": "creds", "mountPath": "/etc/creds"},
            {"name": "info", "mountPath": "/etc/info"},
            {"name": "all", "mountPath": "/etc/all"},
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "memory", "mountPath": "/memory"},
            {"name": "scratch", "mountPath": "/one-file", "subPath": "sub/dir"}]),
        shell("writer", "echo shared > /data/file; echo in-memory > /mem/file; "
              + SERVE_FOREVER, volumeMounts=[{"name": "scratch", "mountPath": "/data"},
                                             {"name": "memory", "mountPath": "/mem"}]),
    ], namespace=ns)
    manifest["spec"]["volumes"] = [
        {"name": "config", "configMap": {"name": "app"}},
        {"name": "picked", "configMap": {"name": "app", "defaultMode": 0o600, "items": [
            {"key": "greeting", "path": "nested/hello.txt"}]}},
        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "all", "projected": {"sources": [
            {"configMap": {"name": "app", "items": [{"key": "color", "path": "color"}]}},
            {"secret": {"name": "creds"}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {
                "fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "memory", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
    ]
    created = await http.post(f"/api/v1/namespaces/{ns}/pods", json=manifest)
    assert created.status_code == 201, created.text
    uid = created.json()["metadata"]["uid"]
    await running(http, ns, name)

    def cat(path: str) -> str:
        return exec_(kubectl, ns, name, "cat", path, container="app")

    assert cat("/etc/app/greeting") == "hello"
    assert cat("/etc/picked/nested/hello.txt") == "hello"
    assert exec_(kubectl, ns, name, "stat", "-L", "-c", "%a", "/etc/picked/nested/hello.txt",
                 container="app").strip() == "600"
    assert cat("/etc/creds/password") == "hunter2"
    assert exec_(kubectl, ns, name, "stat", "-L", "-c", "%a", "/etc/creds/password",
                 container="app").strip() == "400"
    assert cat("/etc/info/name") == name
    assert cat("/etc/info/labels") == f'app="{name}"'
    assert (cat("/etc/all/color"), cat("/etc/all/password"), cat("/etc/all/ns")) == (
        "blue", "hunter2", ns)
    listing = exec_(kubectl, ns, name, "ls", "-a", "/etc/app", container="app").split()
    assert "..data" in listing and {"greeting", "color"} <= set(listing)
    # API data is read-only in the container
    refused = kubectl.run("exec", "-n", ns, name, "-c", "app", "--", "sh", "-c",
                          "echo x > /etc/app/new", check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    # emptyDirs are shared between the containers; Memory is a tmpfs
    async def shared() -> bool:
        return kubectl.run("exec", "-n", ns, name, "-c", "app", "--", "cat",
                           "/scratch/file", check=False).stdout == "shared\n"
    await eventually(shared, what="the writer's file in the app container")
    assert cat("/memory/file") == "in-memory\n"
    mounts = exec_(kubectl, ns, name, "cat", "/proc/mounts", container="app")
    assert any(line.split()[1] == "/memory" and line.split()[2] == "tmpfs"
               for line in mounts.splitlines())
    assert (root_dir / "pods" / uid / "volumes" / "kubernetes.io~empty-dir" / "scratch"
            / "sub" / "dir").is_dir()

    # an update shows in the pod, in place (the ..data swap)
    patched = await http.patch(f"/api/v1/namespaces/{ns}/configmaps/app",
                               json={"data": {"greeting": "bonjour"}},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text

    async def updated() -> bool:
        return cat("/etc/app/greeting") == "bonjour" and \
            cat("/etc/picked/nested/hello.txt") == "bonjour"
    await eventually(updated, timeout=60, what="the new greeting in the pod")

    # deletion removes the pod's volumes, tmpfs unmounted
    await http.delete(f"/api/v1/namespaces/{ns}/pods/{name}")
    pod_dir = root_dir / "pods" / uid

    async def removed() -> bool:
        return not pod_dir.exists()
    await eventually(removed, timeout=60, what="the pod directory removed")
    assert str(pod_dir) not in await asyncio.to_thread(Path("/proc/mounts").read_text)


async def test_env_from_secrets_and_configmaps_with_the_official_client(
        apiserver: ApiServer, http: httpx.AsyncClient, kubelet: KubeletProcess,
        kubectl: Kubectl, ns: str) -> None:
    config = kubernetes.client.Configuration()
    apiserver.configure(config)
    name = unique("env")
    with kubernetes.client.ApiClient(config) as client:
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespaced_secret(ns, {"metadata": {"name": "db"},
                                           "stringData": {"user": "admin", "pass": "s3cret"}})
        core.create_namespaced_config_map(ns, {"metadata": {"name": "settings"},
                                               "data": {"MODE": "fast", "LEVEL": "3"}})
        core.create_namespaced_pod(ns, pod_manifest(name, kubelet.node_name, [shell(
            "app", "env | sort; " + SERVE_FOREVER,
            envFrom=[{"configMapRef": {"name": "settings"}},
                     {"secretRef": {"name": "db"}, "prefix": "DB_"}],
            env=[{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
                     "name": "db", "key": "pass"}}},
                 {"name": "MODE", "value": "overridden-$(LEVEL)"},
                 {"name": "MISSING", "valueFrom": {"configMapKeyRef": {
                     "name": "nope", "key": "x", "optional": True}}}])], namespace=ns))
        await running(http, ns, name)
        logs = core.read_namespaced_pod_log(name, ns)
    lines = set(logs.split())
    assert {"LEVEL=3", "MODE=overridden-3", "DB_user=admin", "DB_pass=s3cret",
            "PASSWORD=s3cret"} <= lines
    assert not any(line.startswith("MISSING=") for line in lines)


async def test_a_missing_configmap_is_a_config_error_until_it_exists(
        http: httpx.AsyncClient, kubelet: KubeletProcess, ns: str) -> None:
    name = unique("missing")
    manifest = pod_manifest(name, kubelet.node_name, [shell(
        "app", SERVE_FOREVER, env=[{"name": "X", "valueFrom": {"configMapKeyRef": {
            "name": "later", "key": "x"}}}])], namespace=ns)
    await create(http, ns, "pods", manifest)
    state = await waiting(http, ns, name)
    assert state == {"reason": "CreateContainerConfigError",
                     "message": 'configmap "later" not found'}
    await create(http, ns, "configmaps", {"metadata": {"name": "later"}, "data": {"y": "1"}})
    state = await waiting(http, ns, name)  # (the waiting reason of the next try)

    async def key_missing() -> bool:
        found = await waiting(http, ns, name)
        return found.get("message") == f"couldn't find key x in ConfigMap {ns}/later"
    await eventually(key_missing, what="the missing key reported")
    patched = await http.patch(f"/api/v1/namespaces/{ns}/configmaps/later",
                               json={"data": {"x": "1"}},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200
    await running(http, ns, name)


async def test_a_missing_volume_source_fails_the_mount(
        http: httpx.AsyncClient, kubelet: KubeletProcess, ns: str) -> None:
    name = unique("nomount")
    manifest = pod_manifest(name, kubelet.node_name, [shell(
        "app", SERVE_FOREVER, volumeMounts=[{"name": "cfg", "mountPath": "/cfg"},
                                            {"name": "opt", "mountPath": "/opt/x"}])],
                            namespace=ns)
    manifest["spec"]["volumes"] = [
        {"name": "cfg", "secret": {"secretName": "absent"}},
        {"name": "opt", "configMap": {"name": "absent-too", "optional": True}}]
    await create(http, ns, "pods", manifest)

    async def failed_mount() -> list[str]:
        return [e["message"] for e in await events(http, ns, name)
                if e["reason"] == "FailedMount"]
    messages = await eventually(failed_mount, what="a FailedMount event")
    assert messages[0] == 'MountVolume.SetUp failed for volume "cfg" : secret "absent" not found'
    status = await pod_status(http, ns, name)
    assert status["phase"] == "Pending"
    assert [s["state"] for s in status.get("containerStatuses") or []] == [
        {"waiting": {"reason": "ContainerCreating"}}]
    await create(http, ns, "secrets", {"metadata": {"name": "absent"}, "data": {}})
    await running(http, ns, name)


async def test_host_path_volumes_where_pod_security_allows_them(
        http: httpx.AsyncClient, kubelet: KubeletProcess, kubectl: Kubectl, ns: str,
        tmp_path: Path) -> None:
    host_dir = tmp_path / "host" / "made"
    name = unique("hostpath")
    manifest = pod_manifest(name, kubelet.node_name, [shell(
        "app", "echo from-the-pod > /host/out; " + SERVE_FOREVER,
        volumeMounts=[{"name": "h", "mountPath": "/host"},
                      {"name": "f", "mountPath": "/in/file", "readOnly": True}])],
                            namespace=ns)
    manifest["spec"]["volumes"] = [
        {"name": "h", "hostPath": {"path": str(host_dir), "type": "DirectoryOrCreate"}},
        {"name": "f", "hostPath": {"path": str(tmp_path / "f"), "type": "FileOrCreate"}}]
    # baseline (this namespace's level) refuses it
    refused = await http.post(f"/api/v1/namespaces/{ns}/pods", json=manifest)
    assert refused.status_code == 403, refused.text
    assert "hostPath volumes" in refused.json()["message"]
    manifest["metadata"]["namespace"] = PRIVILEGED_NS
    await create(http, PRIVILEGED_NS, "pods", manifest)
    try:
        async def written() -> bool:
            return (host_dir / "out").exists() and \
                (host_dir / "out").read_text() == "from-the-pod\n"
        await eventually(written, what="the pod's file on the host")
        denied = kubectl.run("exec", "-n", PRIVILEGED_NS, name, "--", "sh", "-c",
                             "echo x > /in/file", check=False)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr
        wrong = unique("wrongtype")
        manifest["metadata"]["name"] = wrong
        manifest["metadata"]["labels"] = {"app": wrong}
        manifest["spec"]["volumes"] = [{"name": "h", "hostPath": {
            "path": str(tmp_path / "f"), "type": "Directory"}},
            {"name": "f", "emptyDir": {}}]
        await create(http, PRIVILEGED_NS, "pods", manifest)

        async def type_failure() -> list[str]:
            return [e["message"] for e in await events(http, PRIVILEGED_NS, wrong)
                    if e["reason"] == "FailedMount"]
        messages = await eventually(type_failure, what="the type check's FailedMount")
        assert messages[0] == (f'MountVolume.SetUp failed for volume "h" : hostPath type '
                               f'check failed: {tmp_path / "f"} is not a directory')
    finally:
        for pod in {name, manifest["metadata"]["name"]}:
            await http.delete(f"/api/v1/namespaces/{PRIVILEGED_NS}/pods/{pod}",
                              params={"gracePeriodSeconds": "0"})


async def test_a_sub_path_cannot_escape_its_volume(
        http: httpx.AsyncClient, kubelet: KubeletProcess, ns: str) -> None:
    """An init container plants `escape -> /` in the emptyDir; the app container's
    `subPath: escape` would bind the host's root: the kubelet refuses to create it."""
    name = unique("escape")
    manifest = pod_manifest(name, kubelet.node_name, [shell(
        "app", SERVE_FOREVER, volumeMounts=[
            {"name": "data", "mountPath": "/stolen", "subPath": "escape"}])], namespace=ns)
    manifest["spec"]["initContainers"] = [shell(
        "plant", "ln -s / /data/escape", volumeMounts=[{"name": "data", "mountPath": "/data"}])]
    manifest["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    await create(http, ns, "pods", manifest)
    state = await waiting(http, ns, name)
    assert state["reason"] == "CreateContainerConfigError"
    assert state["message"].startswith("subPath 'escape' resolves to /, outside the volume")


async def test_unsupported_volumes_and_bad_paths_are_refused(
        http: httpx.AsyncClient, ns: str) -> None:
    base = pod_manifest("refused", "nowhere", [shell("app", "true")], namespace=ns)
    cases: list[tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = [
        ([{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}], [],
         "spec.volumes[0].persistentVolumeClaim: Forbidden: kubelite's kubelet does not "
         "implement persistentVolumeClaim volumes"),
        ([{"name": "c", "configMap": {"name": "x", "items": [
            {"key": "k", "path": "../../etc/cron.d/x"}]}}], [],
         'spec.volumes[0].configMap.items[0].path: Invalid value: "../../etc/cron.d/x": '
         "must not contain '..'"),
        ([{"name": "c", "secret": {"secretName": "x", "items": [
            {"key": "k", "path": "/abs"}]}}], [],
         'spec.volumes[0].secret.items[0].path: Invalid value: "/abs": must be a relative '
         "path"),
        ([{"name": "c", "configMap": {"name": "x", "defaultMode": 1000}}], [],
         "spec.volumes[0].configMap.defaultMode: Invalid value: 1000: must be a number "
         "between 0 and 0777 (octal), both inclusive"),
        ([{"name": "e", "emptyDir": {}}], [{"name": "e", "mountPath": "/e", "subPath": "../x"}],
         'spec.containers[0].volumeMounts[0].subPath: Invalid value: "../x": must not '
         "contain '..'"),
    ]
    for volumes, mounts, message in cases:
        manifest = {**base, "spec": {**base["spec"], "volumes": volumes,
                                     "containers": [{**base["spec"]["containers"][0],
                                                     "volumeMounts": mounts}]}}
        refused = await http.post(f"/api/v1/namespaces/{ns}/pods", json=manifest)
        assert refused.status_code == 422, refused.text
        assert message in refused.json()["message"]
        assert (await http.get(f"/api/v1/namespaces/{ns}/pods/refused")).status_code == 404


def test_orphaned_pod_dirs_are_removed_at_start(
        apiserver: ApiServer, tmp_path: Path) -> None:
    ensure_docker()
    root = tmp_path / "root"
    node = unique("orphans")
    orphan, foreign = root / "pods" / "dead-uid", root / "pods" / "other-uid"
    (orphan / "volumes" / "kubernetes.io~empty-dir" / "x").mkdir(parents=True)
    (orphan / ".node").write_text(node)
    foreign.mkdir(parents=True)
    (foreign / ".node").write_text("someone-else")
    process = KubeletProcess(apiserver, tmp_path, node_name=node,
                             extra_args=["--root-dir", str(root)]).start()
    try:
        deadline = time.monotonic() + 60
        while orphan.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not orphan.exists(), process.log()[-3000:]
        assert foreign.exists()
        assert os.listdir(root / "pods") == ["other-uid"]
    finally:
        process.stop()
        remove_node_containers(node)
