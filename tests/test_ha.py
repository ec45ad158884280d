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
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.kubeconfig import ssl_context
from tests.docker_support import ensure_docker
from tests.ha_support import (
    BATCH,
    NS,
    all_running,
    create_batch,
    leader,
    no_docker_problems,
    no_pods_left,
)
from tests.seeds import Launcher, alive
from tests.support import REPO, eventually, unique

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    ensure_docker()
    launched = Launcher.fresh(tmp_path_factory.mktemp("ha") / "state")
    launched.ports.append("--ha")
    if 4 * BATCH > 200:  # the storm: past 2 nodes x kube's default --max-pods of 110
        launched.ports += ["--kubelet-arg", f"max-pods={2 * BATCH + 20}"]
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


def members(launched: Launcher, kind: str) -> dict[str, str]:
    """The launcher's members of `kind` (scheduler-1, ...) by their machine's address."""
    return {name: f"127.0.1.{name.rsplit('-', 1)[1]}" for name in children(launched)
            if re.fullmatch(f"{kind}-[0-9]+", name)}


def kill(launched: Launcher, name: str, log: list[str]) -> int:
    pid = children(launched)[name]
    os.kill(pid, signal.SIGKILL)
    log.append(f"killed {name} (pid {pid})")
    return pid


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
        scheduler, manager = (leader(members(ha, "scheduler"), scheduler_port),
                              leader(members(ha, "controller-manager"), cm_port))
        assert scheduler and manager, f"no leaders: {scheduler!r} {manager!r}"
        killed += [kill(ha, scheduler, log), kill(ha, manager, log)]  # two at once
        await create_batch(http, f"{prefix}-d", acknowledged)

        pods = await eventually(lambda: all_running(http, acknowledged),
                                timeout=240 + 2 * len(acknowledged), interval=1,
                                what=f"every acknowledged pod Running ({log})")
        assert pods is not None
        assert set(pods) == set(acknowledged), "a pod nobody acknowledged appeared"
        nodes = (ha.nodes.node1, ha.nodes.node2)
        await eventually(lambda: no_docker_problems(nodes, pods), timeout=60,
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


async def test_ha_backup_and_restore_brings_every_member_back_to_the_snapshot(
        ha: Launcher) -> None:
    """`hack/etcd_snapshot.py save --ha` from a live member; the cluster stopped;
    `restore --ha` gives all three members the snapshot's data (revision moved past what
    they served); the cluster started again: the snapshot's pods are Running with one
    sandbox and one container each, and what came after the snapshot is gone, from the
    API and from Docker."""
    tool = [sys.executable, str(REPO / "hack" / "etcd_snapshot.py")]
    state = ["--ha", "--state-dir", str(ha.state_dir)]
    snapshot = ha.state_dir.parent / "ha-snapshot.db"
    kept = [f"{unique('kept')}-{i}" for i in range(2)]
    later = unique("later")
    nodes = (ha.nodes.node1, ha.nodes.node2)
    async with httpx.AsyncClient(base_url=ha.server, timeout=10) as http:
        await eventually(lambda: no_pods_left(http), timeout=300, interval=1,
                         what="the chaos test's pods deleted")
        acknowledged: list[str] = []
        for name in kept:
            await create_batch(http, name, acknowledged, count=1)
        await eventually(lambda: all_running(http, acknowledged), timeout=120, interval=1,
                         what="the pods to keep Running")
        saved = await asyncio.to_thread(subprocess.run, [*tool, "save", str(snapshot), *state],
                                        capture_output=True, text=True, timeout=120)
        assert saved.returncode == 0, saved.stderr
        assert saved.stdout.startswith(f"saved {snapshot}: revision "), saved.stdout
        await create_batch(http, later, acknowledged, count=1)
        pods = await eventually(lambda: all_running(http, acknowledged), timeout=120,
                                interval=1, what="the pod after the snapshot Running")
        assert pods is not None

    assert ha.interrupt() == 0
    restored = await asyncio.to_thread(subprocess.run,
                                       [*tool, "restore", str(snapshot), *state],
                                       capture_output=True, text=True, timeout=300)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    lines = restored.stdout.splitlines()
    assert lines[0].startswith("restored " + ", ".join(
        str(ha.state_dir / f"etcd-{i}") for i in (1, 2, 3))), lines
    assert any(line.startswith("revision moved forward to ") for line in lines), lines
    assert len([line for line in lines if "before-restore" in line]) == 3, lines

    ha.start()
    async with httpx.AsyncClient(base_url=ha.server, timeout=10) as http:
        async def only_the_snapshots() -> dict[str, dict[str, Any]] | None:
            pods = await all_running(http, [f"{name}-0" for name in kept])
            return pods if pods is not None and f"{later}-0" not in pods else None
        pods = await eventually(only_the_snapshots, timeout=180, interval=1,
                                what="the snapshot's pods back, the later one gone")
        assert pods is not None
        await eventually(lambda: no_docker_problems(nodes, pods), timeout=120,
                         what="one sandbox and one container each, the later pod's gone")
        with tls(ha, "", etcd=True) as etcd:
            async def members_healthy() -> bool:
                return all(etcd.get(f"https://127.0.1.{i}:2379/health").json().get("health")
                           == "true" for i in (1, 2, 3))
            await eventually(members_healthy, timeout=60, what="3 healthy etcd members")
        response = await http.delete(f"/api/v1/namespaces/{NS}/pods",
                                     params={"labelSelector": "ha=1"})
        assert response.status_code == 200, response.text


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


def test_a_control_plane_without_nodes_waits_for_them_to_join() -> None:
    from tests.test_e2e_up import load_hack_module
    up = load_hack_module("up")
    options = up.Options(state_dir=Path("/tmp/state"), nodes=(), kubelet_ports=(),
                         secure=True, ha=True)
    kinds = {c.kind for c in up.plan(options)}
    assert "kubelet" not in kinds and "kube-proxy" not in kinds
    assert {"etcd", "apiserver", "load-balancer", "scheduler", "controller-manager"} <= kinds
    steps = up.next_steps(options)
    assert "no nodes yet" in steps and "create --print-join-command" in steps
    assert "apiservers 127.0.1.1, 127.0.1.2 (:6443) behind haproxy" in steps
