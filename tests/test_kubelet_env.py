"""A container's environment (issue 14, "Configuration and volumes": `env` with
`valueFrom` fieldRef and resourceFieldRef): the decisions as tables after kube's
`expansion_test.go`, `fieldpath_test.go`, `resource/helpers_test.go` and
kubelet_pods_test.go's TestMakeEnvironmentVariables, then a real kubelet on real Docker
through the real kubectl."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelet.docker import container_create_body
from kubelet.env import (
    EnvError,
    PodContext,
    container_env,
    expand,
    field_ref_value,
    resource_field_value,
)
from tests.docker_support import KubeletProcess, running_kubelet
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import create_pod, delete_pod, get_pod, pod_manifest, shell

VARS = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_EMPTY": ""}


@pytest.mark.parametrize(("text", "expected"), [
    ("$(VAR_A)", "A"),
    ("___$(VAR_B)___", "___B___"),
    ("$(VAR_A)-$(VAR_B)-$(VAR_C)", "A-B-C"),
    ("$(VAR_EMPTY)", ""),
    ("$(UNKNOWN)", "$(UNKNOWN)"),
    ("$$(VAR_A)", "$(VAR_A)"),  # escaped
    ("$$$(VAR_A)", "$A"),
    ("$(VAR_A", "$(VAR_A"),  # unterminated
    ("$VAR_A", "$VAR_A"),
    ("$", "$"),
    ("foo$", "foo$"),
    ("$(cat /etc/hostname)", "$(cat /etc/hostname)"),
    ("", ""),
])
def test_expand(text: str, expected: str) -> None:
    assert expand(text, VARS) == expected


POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1",
                 "labels": {"app": "web"}, "annotations": {"team": "a"}},
    "spec": {"nodeName": "n1", "serviceAccountName": "builder", "containers": [
        {"name": "app", "image": "i",
         "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                       "limits": {"cpu": "1500m", "memory": "128Mi"}}},
        {"name": "bare", "image": "i"}]},
}
CONTEXT = PodContext(pod_ip="172.17.0.5", host_ip="10.0.0.1",
                     allocatable={"cpu": Decimal(2), "memory": Decimal(4 * 1024 ** 3),
                                  "ephemeral-storage": Decimal(10 ** 10)})


@pytest.mark.parametrize(("path", "expected"), [
    ("metadata.name", "web"), ("metadata.namespace", "shop"), ("metadata.uid", "u-1"),
    ("metadata.labels['app']", "web"), ("metadata.labels['missing']", ""),
    ("metadata.annotations['team']", "a"), ("spec.nodeName", "n1"),
    ("spec.serviceAccountName", "builder"), ("status.podIP", "172.17.0.5"),
    ("status.podIPs", "172.17.0.5"), ("status.hostIP", "10.0.0.1"),
    ("status.hostIPs", "10.0.0.1"),
])
def test_field_ref_value(path: str, expected: str) -> None:
    assert field_ref_value(POD, path, CONTEXT) == expected


def test_an_unsupported_field_path_is_an_error() -> None:
    with pytest.raises(EnvError, match="unsupported fieldPath: spec.hostname"):
        field_ref_value(POD, "spec.hostname", CONTEXT)


@pytest.mark.parametrize(("container", "ref", "expected"), [
    ("app", {"resource": "limits.cpu"}, "2"),  # 1.5 cores, rounded up
    ("app", {"resource": "limits.cpu", "divisor": "1m"}, "1500"),
    ("app", {"resource": "requests.cpu", "divisor": "1m"}, "250"),
    ("app", {"resource": "requests.cpu"}, "1"),
    ("app", {"resource": "limits.memory"}, "134217728"),
    ("app", {"resource": "limits.memory", "divisor": "1Mi"}, "128"),
    ("app", {"resource": "requests.memory", "divisor": "1Mi"}, "64"),
    ("bare", {"resource": "limits.cpu"}, "2"),  # no limit: the node's allocatable
    ("bare", {"resource": "limits.memory", "divisor": "1Gi"}, "4"),
    ("bare", {"resource": "limits.ephemeral-storage"}, "10000000000"),
    ("bare", {"resource": "requests.cpu", "divisor": "1m"}, "0"),
    ("bare", {"resource": "limits.cpu", "divisor": "1m", "containerName": "app"}, "1500"),
])
def test_resource_field_value(container: str, ref: dict[str, str], expected: str) -> None:
    spec = next(c for c in POD["spec"]["containers"] if c["name"] == container)
    assert resource_field_value(POD, spec, ref, CONTEXT) == expected


def test_an_unsupported_resource_is_an_error() -> None:
    with pytest.raises(EnvError, match="unsupported container resource : limits.gpu"):
        resource_field_value(POD, POD["spec"]["containers"][0], {"resource": "limits.gpu"},
                             CONTEXT)


def test_container_env_in_order_with_expansion() -> None:
    container = {"name": "app", "image": "i", "env": [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "GREETING", "value": "hello $(POD) at $(NODE)"},  # NODE comes later
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "URL", "value": "http://$(POD_IP_X):80/$(NODE)"},
        {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                              "divisor": "1m",
                                                              "containerName": "app"}}},
        {"name": "LITERAL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]}
    assert container_env(POD, container, CONTEXT) == {
        "POD": "web", "GREETING": "hello web at $(NODE)", "NODE": "n1",
        "URL": "http://$(POD_IP_X):80/n1", "CPU_M": "1500", "LITERAL": "shop"}


def test_the_create_body_has_the_env_and_the_expanded_command() -> None:
    container = {"name": "app", "image": "i", "command": ["echo", "$(WHO)"],
                 "args": ["$$(WHO)", "$(WHO)"],
                 "env": [{"name": "WHO", "valueFrom": {"fieldRef": {
                     "fieldPath": "metadata.labels['app']"}}}]}
    body = container_create_body(POD, container, node_name="n1", sandbox_id="sb", attempt=0,
                                 env_context=CONTEXT)
    assert body["Env"] == ["WHO=web"]
    assert body["Entrypoint"] == ["echo", "web"]
    assert body["Cmd"] == ["$(WHO)", "web"]


# --- a real kubelet on real Docker ----------------------------------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-env"),
                         prefix="env") as process:
        yield process


async def test_the_downward_env_reaches_the_container(
        http: httpx.AsyncClient, apiserver: ApiServer, kubelet: KubeletProcess,
        tmp_path: Path) -> None:
    name = unique("downward")
    app = shell("app", "echo $MY_POD $MY_NS $MY_NODE $MY_APP $MY_MEM_MI $MY_CPU_M; "
                       "[ \"$MY_UID\" = \"$EXPECTED_UID\" ] || echo uid differs; "
                       "echo ip=$MY_IP host=$MY_HOST",
                env=[{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}} for n, p in [
                    ("MY_POD", "metadata.name"), ("MY_NS", "metadata.namespace"),
                    ("MY_UID", "metadata.uid"), ("MY_NODE", "spec.nodeName"),
                    ("MY_APP", "metadata.labels['app']"), ("MY_IP", "status.podIP"),
                    ("MY_HOST", "status.hostIP")]] + [
                    {"name": "EXPECTED_UID", "value": "$(MY_UID)"},
                    {"name": "MY_MEM_MI", "valueFrom": {"resourceFieldRef": {
                        "resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "MY_CPU_M", "valueFrom": {"resourceFieldRef": {
                        "resource": "requests.cpu", "divisor": "1m"}}}],
                resources={"requests": {"cpu": "100m", "memory": "32Mi"},
                           "limits": {"cpu": "200m", "memory": "48Mi"}})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [app],
                                        restart_policy="Never", grace=1))

    async def succeeded() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if pod["status"].get("phase") == "Succeeded" else None
    pod = await eventually(succeeded, timeout=60, what=f"{name} Succeeded")
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    logs = (await asyncio.to_thread(kubectl.run, "logs", name)).stdout.splitlines()
    assert logs[0] == f"{name} default {kubelet.node_name} {name} 48 100"
    assert logs[1] == f"ip={pod['status']['podIP']} host={pod['status']['hostIP']}"
    assert len(logs) == 2  # the uid matched
    await delete_pod(http, name)


async def test_a_bad_resource_field_ref_is_create_container_config_error(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("badenv")
    app = shell("app", "env", env=[{"name": "X", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.cpu", "containerName": "nope"}}}])
    response = await http.post("/api/v1/namespaces/default/pods",
                               json=pod_manifest(name, kubelet.node_name, [app]))
    assert response.status_code == 201, response.text  # as kube: the kubelet finds out

    async def config_error() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        waiting = (statuses[0]["state"].get("waiting") or {}) if statuses else {}
        return waiting if waiting.get("reason") == "CreateContainerConfigError" else None
    waiting = await eventually(config_error, timeout=60, what=f"{name} config error")
    assert waiting["message"] == "container nope not found"
    await delete_pod(http, name)
