"""`docker compose --profile ha up -d --wait`: the HA control plane as containers.

The same cluster as tests/test_e2e_compose.py, with the profile that replaces the single
control plane by a 3-member etcd cluster, two apiservers behind haproxy and two
leader-elected schedulers and controller-managers, each control-plane machine a loopback
address of its own (127.0.2.N here, so that tests/test_ha.py's 127.0.1.N stay free).
Between pods created through `kubectl proxy` (so through haproxy), the main processes of
apiserver-1, etcd-1 and the leading scheduler and controller-manager are killed together
with SIGKILL, as a crash would: Docker restarts each (restart: unless-stopped), every
acknowledged pod runs exactly once, and `down` leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.compose_support import ComposeCluster, compose_cluster
from tests.ha_support import NS, all_running, create_batch, leader, no_docker_problems
from tests.support import eventually, unique

pytestmark = pytest.mark.docker

MACHINES = {n: f"127.0.2.{n}" for n in (1, 2, 3)}
CONTROL_PLANE = ["etcd-1", "etcd-2", "etcd-3", "apiserver-1", "apiserver-2", "haproxy",
                 "scheduler-1", "scheduler-2", "controller-manager-1", "controller-manager-2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeCluster]:
    yield from compose_cluster(
        Path(tmp_path_factory.mktemp("compose-ha")), "composeha", profile="ha",
        extra_env={f"CONTROL_PLANE{n}_ADDRESS": address for n, address in MACHINES.items()})


def inspect(cluster: ComposeCluster, service: str) -> dict[str, Any]:
    done = subprocess.run(["docker", "inspect", f"{cluster.project}-{service}-1"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)[0])


def crash(cluster: ComposeCluster, service: str, log: list[str]) -> None:
    """SIGKILL to the container's main process, from the host: a crash, not `docker kill`
    (which Docker's restart policy would take for the user's wish)."""
    pid = int(inspect(cluster, service)["State"]["Pid"])
    os.kill(pid, signal.SIGKILL)
    log.append(f"killed {service} (pid {pid})")


def services_health(cluster: ComposeCluster) -> dict[str, str]:
    ps = cluster.compose("ps", "--format", "json")
    assert ps.returncode == 0, ps.stderr
    rows = [json.loads(line) for line in ps.stdout.splitlines() if line.strip()]
    return {row["Service"]: row.get("Health") or row.get("State", "") for row in rows}


def etcd_members_healthy(cluster: ComposeCluster) -> bool:
    port = cluster.env["ETCD_CLIENT_PORT"]
    endpoints = ",".join(f"https://{a}:{port}" for a in MACHINES.values())
    done = subprocess.run(
        ["docker", "exec", f"{cluster.project}-etcd-1-1", "etcdctl", f"--endpoints={endpoints}",
         "endpoint", "health", "-w", "json"], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and [h["health"] for h in json.loads(done.stdout)] == [True] * 3


# its own waits add up to more than the suite's 300 s default: under a CI machine's load
# every check passed and `compose down` (allowed 300 s itself) was cut off
@pytest.mark.timeout(900)
async def test_compose_ha_profile_survives_its_members_being_killed(
        cluster: ComposeCluster) -> None:
    cluster.up()
    assert {s for s, health in services_health(cluster).items()
            if health == "healthy"} >= set(CONTROL_PLANE)
    assert not {"etcd", "apiserver", "scheduler"} & set(services_health(cluster))
    cluster.proxy.start()  # admin.conf's server is haproxy on 127.0.0.1
    scheduler_port = int(cluster.env["SCHEDULER_PORT"])
    manager_port = int(cluster.env["CONTROLLER_MANAGER_PORT"])
    log: list[str] = []
    acknowledged: list[str] = []
    prefix = unique("cha")
    async with httpx.AsyncClient(base_url=cluster.server, timeout=10) as http:
        async def both_endpoints() -> bool:
            response = await http.get(
                "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
            return response.status_code == 200 and [
                e["addresses"][0] for e in response.json().get("endpoints") or []] == [
                MACHINES[1], MACHINES[2]]
        await eventually(both_endpoints, timeout=30, what="both apiservers' endpoints")

        # (one at a time and the leaders' failover are tests/test_ha.py's; here all four
        # go at once, and Docker's restart policy brings them back)
        await create_batch(http, f"{prefix}-a", acknowledged, count=4)
        scheduler = leader({f"scheduler-{n}": MACHINES[n] for n in (1, 2)}, scheduler_port)
        manager = leader({f"controller-manager-{n}": MACHINES[n] for n in (1, 2)},
                         manager_port)
        assert scheduler and manager, f"no leaders: {scheduler!r} {manager!r}"
        for service in ("apiserver-1", "etcd-1", scheduler, manager):
            crash(cluster, service, log)
        await create_batch(http, f"{prefix}-b", acknowledged, count=4)

        pods = await eventually(lambda: all_running(http, acknowledged), timeout=240,
                                interval=1, what=f"every acknowledged pod Running ({log})")
        assert pods is not None
        assert set(pods) == set(acknowledged), "a pod nobody acknowledged appeared"
        nodes = (cluster.nodes.node1, cluster.nodes.node2)
        await eventually(lambda: no_docker_problems(nodes, pods), timeout=60,
                         what=f"one sandbox and one app container each ({log})")

        killed = ["apiserver-1", "etcd-1", scheduler, manager]

        async def back() -> bool:
            health = services_health(cluster)
            return all(health.get(s) == "healthy" for s in CONTROL_PLANE) and all(
                inspect(cluster, s)["RestartCount"] >= 1 for s in killed)
        await eventually(back, timeout=90, interval=1,
                         what=f"the killed members restarted by Docker and healthy ({log})")

        async def members() -> bool:
            return etcd_members_healthy(cluster)
        await eventually(members, timeout=60, what="3 healthy etcd members")
        await eventually(both_endpoints, timeout=60, what="both apiservers serving again")
        response = await http.delete(f"/api/v1/namespaces/{NS}/pods",
                                     params={"labelSelector": "ha=1"})
        assert response.status_code == 200, response.text

    cluster.proxy.stop()
    down = cluster.compose("down", "--volumes", "--timeout", "60", timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert cluster.containers() == []
