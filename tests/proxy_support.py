"""Fixtures for the kube-proxy tests: unique chain prefixes and service ranges (tests
share this host's iptables with each other and with other engineers' clusters),
iptables-save snapshots that ignore other instances' churn, httpd containers on docker0
as endpoints, and an HTTP GET from the host."""

from __future__ import annotations

import asyncio
import os
import random
import re
import string
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    docker_api,
    ensure_docker,
    remove_node_containers,
)
from tests.support import (
    PYTHON,
    REPO,
    ApiServer,
    Etcd,
    Kubectl,
    Process,
    SchedulerProcess,
    free_port,
    wait_http_ok,
)

_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def unique_prefix() -> str:
    """A chain prefix no other test or cluster on this host uses ("K" + 5 characters)."""
    return "K" + "".join(_rng.choice(string.ascii_uppercase + string.digits) for _ in range(5))


def unique_service_net() -> str:
    """A /24 from 10.200.0.0/13's neighbours, for synthetic cluster IPs: "10.2xx.y"."""
    return f"10.{_rng.randrange(200, 250)}.{_rng.randrange(0, 256)}"


def unique_node_port() -> int:
    return _rng.randrange(30000, 32768)


def iptables_save(table: str) -> list[str]:
    """`iptables-save -t TABLE` without comments and counters."""
    out = subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [re.sub(r" \[\d+:\d+\]$", "", line) for line in out.splitlines()
            if line and not line.startswith("#")]


def chains_of(lines: list[str]) -> set[str]:
    return {line[1:].split()[0] for line in lines if line.startswith(":")}


def stable_lines(before: list[str], after: list[str]) -> tuple[list[str], list[str]]:
    """Both snapshots without the lines of chains that exist in only one of them (other
    instances creating or deleting chains meanwhile) and without rules jumping to them."""
    volatile = chains_of(before) ^ chains_of(after)

    def keep(line: str) -> bool:
        words = line.split()
        if line.startswith(":"):
            return words[0][1:] not in volatile
        if line.startswith("-A "):
            return words[1] not in volatile and not (set(words) & volatile)
        return True
    return [x for x in before if keep(x)], [x for x in after if keep(x)]


def own_lines(lines: list[str], prefix: str) -> list[str]:
    return [line for line in lines if f"{prefix}-" in line]


# -- endpoints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Httpd:
    container_id: str
    name: str
    ip: str
    port: int


@contextmanager
def httpd_containers(names: list[str], port: int = 8080) -> Iterator[list[Httpd]]:
    """busybox httpd containers on docker0, each answering its own name; removed after."""
    ensure_docker()
    started: list[Httpd] = []
    try:
        with docker_api() as api:
            for name in names:
                script = (f"mkdir -p /www && echo {name} > /www/index.html && "
                          f"exec httpd -f -p {port} -h /www")
                created = api.post("/containers/create", params={"name": name}, json={
                    "Image": BUSYBOX_IMAGE, "Cmd": ["sh", "-c", script],
                    "Labels": {"kubelite.test": "kube-proxy"}})
                created.raise_for_status()
                container_id = str(created.json()["Id"])
                api.post(f"/containers/{container_id}/start").raise_for_status()
                info = api.get(f"/containers/{container_id}/json").json()
                ip = info["NetworkSettings"]["IPAddress"]
                started.append(Httpd(container_id, name, ip, port))
        yield started
    finally:
        with docker_api() as api:
            for httpd in started:
                api.delete(f"/containers/{httpd.container_id}", params={"force": "true"})


async def http_get(ip: str, port: int, *, timeout: float = 3.0) -> str:
    """The body of `GET /` (HTTP/1.0), raw sockets; raises OSError when refused."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(ip, port)
        try:
            writer.write(f"GET / HTTP/1.0\r\nHost: {ip}\r\n\r\n".encode())
            await writer.drain()
            response = await reader.read()
        finally:
            writer.close()
    return response.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip()


async def answers(ip: str, port: int, *, requests: int = 40) -> dict[str, int]:
    """Which endpoint answered, over many requests: name -> count."""
    counts: dict[str, int] = {}
    for _ in range(requests):
        body = await http_get(ip, port)
        counts[body] = counts.get(body, 0) + 1
    return counts


def service(ns: str, name: str, cluster_ip: str, ports: list[dict[str, Any]],
            **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": cluster_ip, "ports": ports, **spec}}


def endpoint_slice(ns: str, service_name: str, ports: list[dict[str, Any]],
                   ips: list[str], suffix: str = "abc") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": f"{service_name}-{suffix}",
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "ports": ports,
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips]}


# -- the process ---------------------------------------------------------------------------


class KubeProxyProcess:
    """`python -m kube_proxy` for one node, as the cluster runs it: its own identity
    (system:kube-proxy, bound to system:node-proxier), a unique chain prefix, its healthz
    and metrics on a free loopback port."""

    def __init__(self, apiserver: ApiServer, workdir: Path, *, node_name: str, prefix: str,
                 extra_args: list[str] | None = None) -> None:
        self.prefix = prefix
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if apiserver.plain:
            connect = ["--master", apiserver.url]
        else:
            config = apiserver.kubeconfig(workdir / f"kube-proxy-{node_name}.kubeconfig",
                                          cert="kube-proxy", user="system:kube-proxy",
                                          namespace=None)
            connect = ["--kubeconfig", str(config)]
        self.args = [PYTHON, "-m", "kube_proxy", *connect, "--hostname-override", node_name,
                     "--iptables-chain-prefix", prefix, "--healthz-bind-address", f"127.0.0.1:{self.port}",
                     "--iptables-min-sync-period", "0.2", *(extra_args or [])]
        self.process = Process(f"kube-proxy-{node_name}", self.args,
                               workdir / f"kube-proxy-{node_name}.log")

    def start(self) -> KubeProxyProcess:
        self.process.start()
        wait_http_ok(f"{self.url}/readyz", process=self.process, timeout=60)
        return self

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def log(self) -> str:
        return self.process.log()

    def cleanup(self) -> None:
        """`python -m kube_proxy --cleanup` with this instance's prefix."""
        subprocess.run([PYTHON, "-m", "kube_proxy", "--cleanup", "--iptables-chain-prefix",
                        self.prefix], check=True, timeout=120, capture_output=True, cwd=REPO)


@contextmanager
def services_cluster(workdir: Path, nodes: Sequence[str], *, service_range: str
                     ) -> Iterator[tuple[ApiServer, Kubectl]]:
    """docker_support.docker_cluster with the apiserver's `--service-cluster-ip-range` set
    (clusters sharing this host's iptables must not share service addresses): etcd, the
    secure apiserver, the scheduler, a kubelet per node, every node Ready."""
    ensure_docker()
    etcd = Etcd(workdir).start()
    started: list[ApiServer | SchedulerProcess | KubeletProcess] = []
    try:
        apiserver = ApiServer(etcd, workdir, extra_args=[
            "--service-cluster-ip-range", service_range]).start()
        started.append(apiserver)
        started.append(SchedulerProcess(apiserver, workdir, port=0).start())
        for node in nodes:
            started.append(KubeletProcess(apiserver, workdir, node_name=node).start())
        kubectl = Kubectl(apiserver, workdir / "kubectl")
        wanted = sorted(f"{node}=True" for node in nodes)
        deadline = time.monotonic() + 90
        ready: list[str] = []
        while ready != wanted:
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes not Ready after 90s: {ready} (want {wanted})")
            time.sleep(0.5)
            ready = sorted(kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}"
                                   "{.metadata.name}={.status.conditions[?(@.type=="
                                   "\"Ready\")].status} {end}").split())
        yield apiserver, kubectl
    finally:
        for process in reversed(started):
            process.stop()
        etcd.stop()
        for node in nodes:
            remove_node_containers(node)
