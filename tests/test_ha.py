"""`hack/up.py --ha`: a 3-member etcd cluster (peer TLS), two apiservers behind haproxy,
two schedulers and two controller-managers with leader election, every client through
the load balancer, all real processes.

While pods are being created (through `kubectl proxy`, that is through haproxy), one
apiserver, then one etcd member, then the leading scheduler and the leading
controller-manager together are killed with SIGKILL. Every create the cluster
acknowledged must be there, bound once and Running with exactly one sandbox and one app
container in Docker, nothing orphaned; the launcher must have started each killed member
again, and the etcd members, the apiservers' endpoints and the leases must show them back.
Then two of the three etcd members are frozen: quorum is lost, the apiservers say so on
/readyz, haproxy stops sending to them, and everything comes back once they thaw.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.kubeconfig import ssl_context
from kubelet.runtime import LABEL_CONTAINER_TYPE, LABEL_POD_UID, TYPE_CONTAINER, TYPE_SANDBOX
from tests.docker_support import BUSYBOX_IMAGE, ensure_docker, node_containers
from tests.seeds import Launcher, alive
from tests.support import eventually, unique

pytestmark = pytest.mark.docker

NS = "default"
LONG_RUNNER = "trap 'exit 0' TERM; sleep 3600 & wait"
BATCH = 8  # pods created after each kill


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    ensure_docker()
    launched = Launcher.fresh(tmp_path_factory.mktemp("ha") / "state")
    launched.ports.append("--ha")
    launched.start()
    yield launched
    launched.cleanup()


def children(launched: Launcher) -> dict[str, int]:
    state = json.loads((launched.state_dir / "up.pid").read_text())
    return {child["name"]: int(child["pid"]) for child in state["children"]}


def tls(launched: Launcher, name: str, *, etcd: bool = False) -> httpx.Client:
    pki = launched.state_dir / "pki"
    ca = pki / ("etcd/ca.crt" if etcd else "ca.crt")
    cert = pki / ("etcd/healthcheck-client" if etcd else name)
    context = ssl_context(ca=ca.read_bytes(), cert=Path(f"{cert}.crt").read_bytes(),
                          key=Path(f"{cert}.key").read_bytes())
    return httpx.Client(verify=context, timeout=5)


def leader(launched: Launcher, kind: str, port: int) -> str:
    """The member of `kind` whose /metrics says it leads (leader_election_master_status)."""
    for name in children(launched):
        if not re.fullmatch(f"{kind}-[0-9]+", name):
            continue
        address = f"127.0.1.{name.rsplit('-', 1)[1]}"
        try:
            text = httpx.get(f"http://{address}:{port}/metrics", timeout=3).text
        except httpx.HTTPError:
            continue
        if re.search(r'^leader_election_master_status\{name="[^"]+"\} 1', text, re.M):
            return name
    return ""


def kill(launched: Launcher, name: str, log: list[str]) -> int:
    pid = children(launched)[name]
    os.kill(pid, signal.SIGKILL)
    log.append(f"killed {name} (pid {pid})")
    return pid


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"ha": "1"}},
            "spec": {"terminationGracePeriodSeconds": 2, "containers": [
                {"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", LONG_RUNNER]}]}}


async def create_batch(http: httpx.AsyncClient, prefix: str, acknowledged: list[str]) -> None:
    """Create BATCH pods, each retried through the outage until the cluster answers: a 201
    is an acknowledged write, a 409 on a retry one whose answer was lost on the way."""
    for i in range(BATCH):
        name = f"{prefix}-{i}"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = await http.post(f"/api/v1/namespaces/{NS}/pods", json=pod(name))
                if response.status_code in (201, 409):
                    acknowledged.append(name)
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"create {name}: no answer for 60 s"
            await asyncio.sleep(0.3)


def docker_problems(launched: Launcher, pods: dict[str, dict[str, Any]]) -> list[str]:
    by_uid = {p["metadata"]["uid"]: p for p in pods.values()}
    problems: list[str] = []
    seen: Counter[tuple[str, str, str]] = Counter()
    for node in (launched.nodes.node1, launched.nodes.node2):
        for container in node_containers(node):
            labels = container.get("Labels") or {}
            uid, kind = labels.get(LABEL_POD_UID, ""), labels.get(LABEL_CONTAINER_TYPE, "")
            owner = by_uid.get(uid)
            if owner is None:
                problems.append(f"orphan on {node}: {container['Names']} {kind}")
            elif owner["spec"].get("nodeName") != node:
                problems.append(f"{owner['metadata']['name']} runs on {node}, bound elsewhere")
            else:
                seen[(uid, kind, container["State"])] += 1
    for uid, owner in by_uid.items():
        for kind in (TYPE_SANDBOX, TYPE_CONTAINER):
            states = {s: n for (u, k, s), n in seen.items() if u == uid and k == kind}
            if states != {"running": 1}:
                problems.append(f"{owner['metadata']['name']}: {kind} {states}")
    return problems


def running(pod_object: dict[str, Any]) -> bool:
    return (pod_object.get("status") or {}).get("phase") == "Running"


async def test_ha_control_plane_survives_its_members_being_killed(ha: Launcher) -> None:
    log: list[str] = []
    acknowledged: list[str] = []
    prefix = unique("ha")
    scheduler_port = ha.scheduler_port
    args = ha.ports
    cm_port = int(args[args.index("--controller-manager-port") + 1])
    async with httpx.AsyncClient(base_url=ha.server, timeout=10) as http:
        await create_batch(http, f"{prefix}-a", acknowledged)
        before = children(ha)
        killed = [kill(ha, "apiserver-1", log)]
        await create_batch(http, f"{prefix}-b", acknowledged)
        killed.append(kill(ha, "etcd-1", log))
        await create_batch(http, f"{prefix}-c", acknowledged)
        scheduler, manager = (leader(ha, "scheduler", scheduler_port),
                              leader(ha, "controller-manager", cm_port))
        assert scheduler and manager, f"no leaders: {scheduler!r} {manager!r}"
        killed += [kill(ha, scheduler, log), kill(ha, manager, log)]  # two at once
        await create_batch(http, f"{prefix}-d", acknowledged)

        async def all_running() -> dict[str, dict[str, Any]] | None:
            response = await http.get(f"/api/v1/namespaces/{NS}/pods",
                                      params={"labelSelector": "ha=1"})
            if response.status_code != 200:
                return None
            pods = {p["metadata"]["name"]: p for p in response.json()["items"]}
            return pods if set(acknowledged) <= set(pods) and all(
                running(p) for p in pods.values()) else None

        pods = await eventually(all_running, timeout=240, interval=1,
                                what=f"every acknowledged pod Running ({log})")
        assert set(pods) == set(acknowledged), "a pod nobody acknowledged appeared"
        await eventually(lambda: _no_problems(ha, pods), timeout=60,
                         what=f"one sandbox and one app container each ({log})")

        # the killed members were started again, and are back in their roles
        async def restarted() -> bool:
            now = children(ha)
            return all(now[name] != before[name] and alive(now[name])
                       for name in ("apiserver-1", "etcd-1", scheduler, manager))
        await eventually(restarted, timeout=30, what="the killed members started again")
        assert not any(alive(pid) for pid in killed)
        with tls(ha, "", etcd=True) as etcd:
            async def members_healthy() -> bool:
                return all(etcd.get(f"https://127.0.1.{i}:2379/health").json().get("health")
                           == "true" for i in (1, 2, 3))
            await eventually(members_healthy, timeout=60, what="3 healthy etcd members")
        with tls(ha, "admin") as admin:
            async def both_endpoints() -> bool:
                slice_ = admin.get(f"{ha.apiserver}/apis/discovery.k8s.io/v1/namespaces/"
                                   "default/endpointslices/kubernetes").json()
                return [e["addresses"][0] for e in slice_.get("endpoints") or []] == [
                    "127.0.1.1", "127.0.1.2"] and admin.get(
                    f"https://127.0.1.1:{ha.port}/readyz").status_code == 200
            await eventually(both_endpoints, timeout=60, what="both apiservers serving")

        # quorum lost: two members frozen (SIGSTOP: the launcher sees nothing to restart)
        frozen = [children(ha)["etcd-2"], children(ha)["etcd-3"]]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            with tls(ha, "admin") as admin:
                async def not_ready() -> bool:
                    codes = [admin.get(f"https://127.0.1.{i}:{ha.port}/readyz").status_code
                             for i in (1, 2)]
                    return codes == [503, 503]
                await eventually(not_ready, timeout=60, what="apiservers not ready")

                async def balancer_refuses() -> bool:
                    try:
                        with tls(ha, "admin") as fresh:  # a new connection each time
                            fresh.get(f"{ha.apiserver}/readyz")
                    except httpx.HTTPError:
                        return True  # haproxy has no server up: it closes the connection
                    return False
                await eventually(balancer_refuses, timeout=30, what="haproxy refusing")
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        with tls(ha, "admin") as admin:
            async def ready_again() -> bool:
                try:
                    return admin.get(f"{ha.apiserver}/readyz").status_code == 200
                except httpx.HTTPError:
                    return False
            await eventually(ready_again, timeout=90, what="the cluster back after the thaw")
        response = await http.delete(f"/api/v1/namespaces/{NS}/pods",
                                     params={"labelSelector": "ha=1"})
        assert response.status_code == 200, response.text


async def _no_problems(launched: Launcher, pods: dict[str, dict[str, Any]]) -> bool:
    return not await asyncio.to_thread(docker_problems, launched, pods)


def test_ha_plan_gives_each_member_its_machine_address() -> None:
    from tests.test_e2e_up import load_hack_module
    up = load_hack_module("up")
    options = up.Options(state_dir=Path("/tmp/state"), nodes=("a",), kubelet_ports=(1,),
                         secure=True, ha=True)
    components = {c.name: c for c in up.plan(options)}
    assert [n for n in components if not n.startswith(("kube", "cluster"))] == [
        "etcd-1", "etcd-2", "etcd-3", "apiserver-1", "apiserver-2", "haproxy",
        "scheduler-1", "scheduler-2", "controller-manager-1", "controller-manager-2"]
    etcd2 = components["etcd-2"].args
    assert etcd2[etcd2.index("--listen-client-urls") + 1] == "https://127.0.1.2:2379"
    assert etcd2[etcd2.index("--initial-cluster") + 1] == ",".join(
        f"etcd-{i}=https://127.0.1.{i}:2380" for i in (1, 2, 3))
    api2 = components["apiserver-2"].args
    assert api2[api2.index("--etcd-servers") + 1].split(",")[0] == "https://127.0.1.2:2379"
    assert api2[api2.index("--advertise-address") + 1] == "127.0.1.2"
    assert "--leader-elect=true" in components["scheduler-2"].args
    config = up.haproxy_config_text(options)
    assert "server apiserver-2 127.0.1.2:6443 check" in config
    assert "option httpchk GET /readyz" in config
