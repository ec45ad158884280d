"""The seeds against any cluster, and the `make up` launcher, for the end-to-end tests.

The seeds (examples/*.yaml): 1. a pod with `nodeName` runs on node1 with the kubelet's
events only; 2. nodes labelled shuai=a / shuai=b, a pod with `nodeSelector: shuai=b` is
Scheduled to node2 and runs; 3. a pod whose selector matches nothing stays Pending with
FailedScheduling until a node gets the label; 4. deleting the three removes their
containers. Used by tests/test_e2e_up.py, tests/test_e2e_compose.py and tests/test_readme.py.

Each cluster gets node names of its own (kubelets own the containers labelled with their
node name, so sharing `node1` with a user's cluster on the same dockerd would be a fight);
the seeds' `node1`/`node2` are mapped to them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from cluster_dns.__main__ import docker_bridge_gateway
from tests.docker_support import DOCKER_SOCKET, node_containers, remove_node_containers
from tests.proxy_support import unique_service_net
from tests.support import PYTHON, REPO, Process, eventually, free_port, wait_http_ok

NS = "default"
EXAMPLES = REPO / "examples"
KUBECTL = REPO / ".venv" / "bin" / "kubectl"
NO_MATCH = ("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
            " preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
            "scheduling..")


# --- the seeds, against any cluster (shared with the compose test) ----------------------


@dataclass(frozen=True)
class Nodes:
    node1: str
    node2: str

    @classmethod
    def fresh(cls, prefix: str) -> Nodes:
        token = uuid.uuid4().hex[:6]
        return cls(f"{prefix}-{token}-node1", f"{prefix}-{token}-node2")

    def real_name(self, seed_name: str) -> str:
        return {"node1": self.node1, "node2": self.node2}[seed_name]


def example(name: str, nodes: Nodes) -> dict[str, Any]:
    """An examples/ manifest, with the seeds' node names mapped to this cluster's."""
    manifest: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    spec = manifest["spec"]
    if "nodeName" in spec:
        spec["nodeName"] = nodes.real_name(spec["nodeName"])
    return manifest


def kubectl(server: str, *args: str, stdin: str | None = None) -> str:
    """The real kubectl, as the seeds use it."""
    done = subprocess.run([str(KUBECTL), "--server", server, *args], input=stdin,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


async def pod(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await http.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def events_of(http: httpx.AsyncClient, name: str) -> list[dict[str, Any]]:
    response = await http.get(f"/api/v1/namespaces/{NS}/events",
                              params={"fieldSelector": f"involvedObject.name={name}"})
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    return sorted(items, key=lambda e: (e.get("firstTimestamp") or "",
                                        int(e["metadata"]["resourceVersion"])))


async def running_on(http: httpx.AsyncClient, name: str, node: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        current = await pod(http, name)
        assert current["spec"].get("nodeName") == node, current["spec"].get("nodeName")
        return current if current["status"].get("phase") == "Running" else None
    return await eventually(check, timeout=90, what=f"{name} Running on {node}") or {}


async def label_node(http: httpx.AsyncClient, node: str, key: str, value: str) -> None:
    """What `kubectl label nodes NODE key=value` sends: a JSON merge patch."""
    response = await http.patch(
        f"/api/v1/nodes/{node}", content=json.dumps({"metadata": {"labels": {key: value}}}),
        headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["labels"][key] == value


def reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in events]


async def seed_node_name(http: httpx.AsyncClient, server: str, nodes: Nodes) -> None:
    """1. nodeName: runs on node1; only the kubelet speaks, no `Scheduled`."""
    kubectl(server, "create", "-f", "-", stdin=json.dumps(example("nodename.yaml", nodes)))
    await running_on(http, "pod-example", nodes.node1)

    async def kubelet_events() -> list[dict[str, Any]] | None:
        events = await events_of(http, "pod-example")
        return events if {"Pulled", "Created", "Started"} <= set(reasons(events)) else None
    events = await eventually(kubelet_events, timeout=30, what="pod-example's events") or []
    assert "Scheduled" not in reasons(events)
    assert {e["source"]["component"] for e in events} == {"kubelet"}, events
    assert {e["source"].get("host") for e in events} == {nodes.node1}


async def seed_node_selector(http: httpx.AsyncClient, server: str, nodes: Nodes) -> None:
    """2. nodeSelector shuai=b: Scheduled to node2, then Pulled/Created/Started, Running."""
    await label_node(http, nodes.node1, "shuai", "a")
    await label_node(http, nodes.node2, "shuai", "b")
    kubectl(server, "apply", "-f", str(EXAMPLES / "nodeSelector.yaml"))
    await running_on(http, "pod-selector", nodes.node2)

    async def all_events() -> list[dict[str, Any]] | None:
        events = await events_of(http, "pod-selector")
        wanted = ["Scheduled", "Pulled", "Created", "Started"]
        return events if [r for r in reasons(events) if r in wanted] == wanted else None
    events = await eventually(all_events, timeout=30,
                              what="pod-selector's events in order") or []
    scheduled = events[reasons(events).index("Scheduled")]
    assert scheduled["source"]["component"] == "default-scheduler"
    assert scheduled["message"] == f"Successfully assigned {NS}/pod-selector to {nodes.node2}"


async def seed_no_match(http: httpx.AsyncClient, server: str, nodes: Nodes) -> None:
    """3. A selector nothing matches: Pending with FailedScheduling; a label makes it run."""
    kubectl(server, "apply", "-f", str(EXAMPLES / "no-match.yaml"))

    async def failed_scheduling() -> dict[str, Any] | None:
        return next((e for e in await events_of(http, "pod-ssd")
                     if e["reason"] == "FailedScheduling"), None)
    event = await eventually(failed_scheduling, timeout=30, what="FailedScheduling") or {}
    assert (event["type"], event["message"]) == ("Warning", NO_MATCH)
    current = await pod(http, "pod-ssd")
    assert current["status"]["phase"] == "Pending"
    assert not current["spec"].get("nodeName")

    await label_node(http, nodes.node1, "disktype", "ssd")
    await running_on(http, "pod-ssd", nodes.node1)


async def seed_delete_all(http: httpx.AsyncClient, nodes: Nodes) -> None:
    """4. Delete the three pods: they leave the API, and their containers leave Docker."""
    names = ["pod-example", "pod-selector", "pod-ssd"]
    assert any(node_containers(nodes.node1)) and any(node_containers(nodes.node2))
    for name in names:
        response = await http.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
        assert response.status_code == 200, response.text

    async def all_gone() -> bool:
        statuses = [(await http.get(f"/api/v1/namespaces/{NS}/pods/{n}")).status_code
                    for n in names]
        containers = node_containers(nodes.node1) + node_containers(nodes.node2)
        assert statuses == [404] * 3 and not containers, (statuses, [
            c["Names"] for c in containers])
        return True
    await eventually(all_gone, timeout=90, what="the pods and their containers to be gone")


async def run_seeds(server: str, nodes: Nodes) -> None:
    async with httpx.AsyncClient(base_url=server, timeout=30) as http:
        await seed_node_name(http, server, nodes)
        await seed_node_selector(http, server, nodes)
        await seed_no_match(http, server, nodes)
        await seed_delete_all(http, nodes)


# --- the launcher ------------------------------------------------------------------------


@dataclass
class KubectlProxy:
    """`kubectl proxy` with a kubeconfig: plain HTTP on loopback, every request forwarded
    to the apiserver authenticated as the kubeconfig's user (how Kubernetes documents curl)."""

    kubeconfig: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> KubectlProxy:
        """Start it unless it runs, and wait until it answers through the apiserver."""
        if self.process is not None and self.process.alive():
            return self
        self.process = Process("kubectl-proxy", [
            str(KUBECTL), "proxy", "--port", str(self.port),
            "--kubeconfig", str(self.kubeconfig)], self.log_path).start()
        wait_http_ok(f"{self.url}/readyz", process=self.process)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


@dataclass
class Launcher:
    """`hack/up.py` with its own state directory, ports and node names, secure as `make up`
    is; plain HTTP clients go through `kubectl proxy`, as Kubernetes documents for curl."""

    state_dir: Path
    nodes: Nodes
    port: int  # the apiserver's HTTPS port
    scheduler_port: int
    proxy: KubectlProxy
    ports: list[str]
    process: Process | None = None
    starts: int = 0

    @classmethod
    def fresh(cls, state_dir: Path) -> Launcher:
        scheduler_port = free_port()
        service_net = unique_service_net()
        ports = ["--etcd-port", str(free_port()), "--etcd-peer-port", str(free_port()),
                 "--scheduler-port", str(scheduler_port),
                 "--controller-manager-port", str(free_port()),
                 "--kubelet-ports", f"{free_port()},{free_port()}",
                 # the host's iptables and Docker's bridge are shared with every other
                 # cluster: chains, endpoints and a DNS port of this cluster's own
                 "--kube-proxy-ports", f"{free_port()},{free_port()}",
                 "--kube-proxy-chain-prefixes", ",".join(
                     f"T{uuid.uuid4().hex[:4].upper()}{n}" for n in ("A", "B")),
                 "--cluster-dns-port", str(free_port()),
                 "--cluster-dns-listen",
                 f"{docker_bridge_gateway(DOCKER_SOCKET)}:{free_port()}",
                 # and cluster IPs of its own: two clusters' kube-proxies would otherwise
                 # both claim 10.96.0.10 (each cluster's DNS) on the one host
                 "--service-cluster-ip-range", f"{service_net}.0/24",
                 "--cluster-dns", f"{service_net}.10"]
        return cls(state_dir=state_dir, nodes=Nodes.fresh("up"), port=free_port(),
                   scheduler_port=scheduler_port, ports=ports,
                   proxy=KubectlProxy(state_dir / "kubeconfig",
                                      state_dir.parent / "kubectl-proxy.log"))

    @property
    def apiserver(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def server(self) -> str:
        """`kubectl proxy` to the apiserver, authenticated as the kubeconfig's admin."""
        return self.proxy.url

    @property
    def scheduler(self) -> str:
        return f"http://127.0.0.1:{self.scheduler_port}"

    def args(self, *command: str) -> list[str]:
        return [PYTHON, str(REPO / "hack" / "up.py"), *command,
                "--state-dir", str(self.state_dir), "--secure-port", str(self.port),
                *self.ports,
                "--nodes", f"{self.nodes.node1},{self.nodes.node2}"]

    def start(self) -> Launcher:
        """Start it and wait for its "kubelite is up" with the next steps."""
        self.starts += 1
        console_log = self.state_dir.parent / f"console-{self.starts}.log"
        self.process = Process("up", self.args(), console_log).start()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            console = self.process.log()
            if "kubelite is up" in console:
                self.proxy.start()
                return self
            if not self.process.alive():
                raise AssertionError(f"hack/up.py exited early:\n{console}")
            time.sleep(0.2)
        raise AssertionError(f"hack/up.py not up after 180s:\n{self.process.log()}")

    def console(self) -> str:
        return self.process.log() if self.process else ""

    def children(self) -> list[int]:
        state = json.loads((self.state_dir / "up.pid").read_text())
        return [int(child["pid"]) for child in state["children"]]

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the launcher, as the terminal sends it; its exit code."""
        assert self.process is not None and self.process.proc is not None
        self.process.signal(signal.SIGINT)
        return self.process.proc.wait(timeout=90)

    def cleanup(self) -> None:
        self.proxy.stop()
        if self.process is not None:
            self.process.stop(timeout=60)
        subprocess.run(self.args("down"), capture_output=True, timeout=120)
        remove_node_containers(self.nodes.node1)
        remove_node_containers(self.nodes.node2)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return not stat.rsplit(")", 1)[1].split()[0] == "Z"
