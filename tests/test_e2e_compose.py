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
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.compose_support import ComposeCluster, compose_cluster
from tests.docker_support import BUSYBOX_IMAGE, node_containers
from tests.seeds import KUBECTL, example, kubectl, run_seeds, running_on
from tests.support import eventually

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeCluster]:
    yield from compose_cluster(Path(tmp_path_factory.mktemp("compose")), "compose")


async def test_compose_up_runs_the_seeds_and_down_leaves_nothing(
        cluster: ComposeCluster) -> None:
    assert shutil.which("docker"), "the docker CLI is needed (docker.io)"
    cluster.up()

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
