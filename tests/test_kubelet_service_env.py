"""The service-link variables the kubelet injects (issue 14, "the variables kube injects";
issue 17): tables after kubelet_pods_test.go's TestMakeEnvironmentVariables and
pkg/kubelet/envvars's envvars_test.go, then a real kubelet on real Docker."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kubelet.env import EnvSources, PodContext, container_env, link_variables, service_env
from tests.docker_support import KubeletProcess, running_kubelet
from tests.support import ApiServer, eventually, unique
from tests.test_kubelet import create_pod, get_pod, pod_manifest, shell


def service(namespace: str, name: str, cluster_ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name},
            "spec": {"clusterIP": cluster_ip, "ports": list(ports) or [{"port": 80}]}}


def tcp(port: int, name: str = "") -> dict[str, Any]:
    return {"port": port, "protocol": "TCP", **({"name": name} if name else {})}


SERVICES = [
    service("default", "kubernetes", "1.2.3.1", tcp(8081)),
    service("test1", "test", "1.2.3.3", tcp(8083)),
    service("test2", "kubernetes", "1.2.3.4", tcp(8084)),
    service("test2", "test", "1.2.3.5", tcp(8085)),
    service("test2", "headless", "None", tcp(8085)),
    service("test2", "external", "", tcp(8085)),
    service("kubernetes", "kubernetes", "1.2.3.6", tcp(8086)),
]


def links(prefix: str, ip: str, port: int) -> dict[str, str]:
    url = f"tcp://{ip}:{port}"
    return {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(port),
            f"{prefix}_PORT": url, f"{prefix}_PORT_{port}_TCP": url,
            f"{prefix}_PORT_{port}_TCP_PROTO": "tcp", f"{prefix}_PORT_{port}_TCP_PORT": str(port),
            f"{prefix}_PORT_{port}_TCP_ADDR": ip}


def test_a_pod_gets_its_namespaces_services_and_the_master_service() -> None:
    assert service_env(SERVICES, "test1", enable_service_links=True) == {
        **links("KUBERNETES", "1.2.3.1", 8081), **links("TEST", "1.2.3.3", 8083)}


def test_the_namespaces_own_kubernetes_service_wins_over_the_master_one() -> None:
    for ordered in (SERVICES, list(reversed(SERVICES))):
        assert service_env(ordered, "test2", enable_service_links=True) == {
            **links("KUBERNETES", "1.2.3.4", 8084), **links("TEST", "1.2.3.5", 8085)}


def test_without_service_links_only_the_master_service_is_linked() -> None:
    assert service_env(SERVICES, "test2", enable_service_links=False) == links(
        "KUBERNETES", "1.2.3.1", 8081)
    assert service_env(SERVICES, "default", enable_service_links=False) == links(
        "KUBERNETES", "1.2.3.1", 8081)


def test_headless_and_external_name_services_have_no_links() -> None:
    only = [s for s in SERVICES if s["metadata"]["name"] in ("headless", "external")]
    assert service_env(only, "test2", enable_service_links=True) == {}


def test_named_ports_udp_and_dashes_as_kube_writes_them() -> None:
    svc = service("ns", "my-db", "10.0.0.7", {"name": "sql-main", "port": 5432, "protocol": "TCP"},
                  {"name": "stats", "port": 9000, "protocol": "UDP"})
    assert link_variables(svc) == [
        ("MY_DB_SERVICE_HOST", "10.0.0.7"), ("MY_DB_SERVICE_PORT", "5432"),
        ("MY_DB_SERVICE_PORT_SQL_MAIN", "5432"), ("MY_DB_SERVICE_PORT_STATS", "9000"),
        ("MY_DB_PORT", "tcp://10.0.0.7:5432"),
        ("MY_DB_PORT_5432_TCP", "tcp://10.0.0.7:5432"), ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
        ("MY_DB_PORT_5432_TCP_PORT", "5432"), ("MY_DB_PORT_5432_TCP_ADDR", "10.0.0.7"),
        ("MY_DB_PORT_9000_UDP", "udp://10.0.0.7:9000"), ("MY_DB_PORT_9000_UDP_PROTO", "udp"),
        ("MY_DB_PORT_9000_UDP_PORT", "9000"), ("MY_DB_PORT_9000_UDP_ADDR", "10.0.0.7"),
    ]


def test_the_containers_own_variables_win_and_can_expand_links() -> None:
    context = PodContext(sources=EnvSources(services=links("TEST", "1.2.3.3", 8083)))
    container = {"env": [{"name": "TEST_SERVICE_HOST", "value": "mine"},
                         {"name": "URL", "value": "http://$(TEST_SERVICE_HOST):$(TEST_SERVICE_PORT)"}]}
    env = container_env({}, container, context)
    assert env["TEST_SERVICE_HOST"] == "mine"
    assert env["URL"] == "http://mine:8083"  # the container's own first, then the links
    assert env["TEST_PORT"] == "tcp://1.2.3.3:8083"
    assert list(env)[:2] == ["TEST_SERVICE_HOST", "URL"]


# --- a real kubelet on real Docker ----------------------------------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-svcenv"),
                         prefix="svcenv") as process:
        yield process


async def test_a_pod_sees_its_namespaces_services_unless_it_opts_out(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    ns = unique("svcenv")
    assert (await http.post("/api/v1/namespaces", json={
        "metadata": {"name": ns}})).status_code == 201
    cluster_ip = f"10.96.{random.randint(1, 254)}.{random.randint(2, 254)}"
    created = await http.post(f"/api/v1/namespaces/{ns}/services", json={
        "metadata": {"name": "web-front"},
        "spec": {"clusterIP": cluster_ip, "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
    assert created.status_code == 201, created.text
    script = 'echo "links: $WEB_FRONT_SERVICE_HOST $WEB_FRONT_SERVICE_PORT_HTTP $WEB_FRONT_PORT"'
    for name, links in (("linked", True), ("unlinked", False)):
        manifest = pod_manifest(name, kubelet.node_name, [shell("app", script)],
                                restart_policy="Never", grace=1, namespace=ns)
        manifest["spec"]["enableServiceLinks"] = links
        await create_pod(http, manifest)

    async def logs(name: str) -> str | None:
        pod = await get_pod(http, name, ns=ns)
        if pod["status"].get("phase") != "Succeeded":
            return None
        answer = await http.get(f"/api/v1/namespaces/{ns}/pods/{name}/log")
        return answer.text.strip() if answer.status_code == 200 else None

    assert await eventually(lambda: logs("linked"), timeout=60) == (
        f"links: {cluster_ip} 80 tcp://{cluster_ip}:80")
    assert await eventually(lambda: logs("unlinked"), timeout=60) == "links:"
    await http.delete(f"/api/v1/namespaces/{ns}")
