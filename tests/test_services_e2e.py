"""Services end to end on real processes: etcd, the secure apiserver, the scheduler, the
controller-manager (EndpointSlices, ReplicaSets, Deployments), the cluster DNS, and two
nodes, each a kubelet on Docker and a kube-proxy on this host's iptables.

A 3-replica Deployment behind a NodePort Service: another pod reaches it by name (`wget
http://web`, through the pod's resolv.conf, the cluster DNS and the ClusterIP), the host
reaches it on the NodePort; every replica answers. A replica whose readiness probe fails
leaves the rotation within its probe period, and comes back. kill -9 of a kube-proxy and a
restart: its rules reconciled as they were, nothing duplicated (`iptables -t nat -S`)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from controller_manager.endpointslice import LAST_CHANGE_TRIGGER_TIME
from tests.docker_support import BUSYBOX_IMAGE
from tests.proxy_support import KubeProxyProcess, answers, http_get
from tests.services_support import ServicesCluster, apply, nat_rules, services_cluster
from tests.support import eventually, unique

pytestmark = pytest.mark.docker

PROBE_PERIOD = 1  # seconds; failureThreshold 1: one failed probe and the pod is unready
REQUESTS = 60
DRAIN_SECONDS = 5  # the preStop pause of the rolling-update test
MAX_OUTAGE_SECONDS = 5  # generous: kube-proxy's own minSyncPeriod is 1 s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServicesCluster]:
    workdir = tmp_path_factory.mktemp("services-e2e")
    with services_cluster(workdir, [unique("svc-node1"), unique("svc-node2")]) as found:
        yield found


def web(name: str) -> list[dict[str, Any]]:
    """The README's web: busybox httpd answering its hostname, readiness on GET /."""
    script = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{
                         "name": "httpd", "image": BUSYBOX_IMAGE,
                         "command": ["sh", "-c", script],
                         "ports": [{"name": "http", "containerPort": 8080}],
                         "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                                            "periodSeconds": PROBE_PERIOD,
                                            "failureThreshold": 1}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"type": "NodePort", "selector": {"app": name},
                        "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
    return [deployment, service]


def ready_endpoints(cluster: ServicesCluster, service: str) -> dict[str, bool]:
    listed = json.loads(cluster.kubectl("get", "endpointslices", "-l",
                                        f"kubernetes.io/service-name={service}", "-o", "json"))
    return {e["targetRef"]["name"]: bool(e["conditions"]["ready"])
            for s in listed["items"] for e in s.get("endpoints") or []}


def from_pod(cluster: ServicesCluster, pod: str, url: str, count: int) -> dict[str, int]:
    """`count` wget's of `url` from inside `pod`: which hostname answered how often.
    (`timeout`, not wget's own -T, which makes Debian's busybox 1.35 wget segfault.)"""
    out = cluster.kubectl("exec", pod, "--", "sh", "-c",
                          f"for i in $(seq {count}); do timeout 5 wget -qO- {url}; done; true")
    counts: dict[str, int] = {}
    for line in out.split():
        counts[line] = counts.get(line, 0) + 1
    return counts


async def test_a_service_by_name_by_node_port_with_readiness_and_a_proxy_restart(
        cluster: ServicesCluster) -> None:
    name = unique("web")
    apply(cluster.kubectl, *web(name))
    apply(cluster.kubectl, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-client"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [
            {"name": "client", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}})

    async def three_ready() -> dict[str, bool] | None:
        ready = ready_endpoints(cluster, name)
        return ready if len(ready) == 3 and all(ready.values()) else None

    replicas = sorted(await eventually(three_ready, timeout=120, what="3 ready endpoints"))
    cluster.kubectl("wait", "--for=condition=Ready", f"pod/{name}-client", "--timeout=60s")
    svc = json.loads(cluster.kubectl("get", "service", name, "-o", "json"))
    cluster_ip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
    assert cluster_ip.startswith(f"{cluster.service_net}.")

    # By name from another pod: resolv.conf -> cluster DNS -> ClusterIP -> every replica.
    async def all_answer_by_name() -> dict[str, int] | None:
        counts = from_pod(cluster, f"{name}-client", f"http://{name}", REQUESTS)
        return counts if sorted(counts) == replicas else None

    counts = await eventually(all_answer_by_name, timeout=60, interval=1,
                              what="every replica answering by name")
    assert sum(counts.values()) == REQUESTS, counts
    fqdn = f"http://{name}.default.svc.cluster.local"
    assert sorted(from_pod(cluster, f"{name}-client", fqdn, 30)) == replicas

    # From the host, on the NodePort (127.0.0.1: kube-proxy's localhost node ports).
    async def all_answer_on_node_port() -> dict[str, int] | None:
        found = await answers("127.0.0.1", node_port, requests=REQUESTS)
        return found if sorted(found) == replicas else None

    await eventually(all_answer_on_node_port, timeout=30, what="the NodePort")

    # A replica whose probe fails leaves the rotation within its probe period (plus the
    # slice's and the proxy's sync, well under the generous bound), then comes back.
    sick = replicas[0]
    cluster.kubectl("exec", sick, "--", "rm", "/www/index.html")
    broke = time.monotonic()

    async def out_of_rotation() -> bool:
        return not ready_endpoints(cluster, name).get(sick, True)

    await eventually(out_of_rotation, timeout=15, interval=0.2, what=f"{sick} unready")
    assert time.monotonic() - broke < 15

    # The slice says unready; kube-proxy's next sync (a partial one, within its
    # --iptables-min-sync-period) takes the endpoint out of the rules, and it stays out.
    async def only_the_healthy() -> dict[str, int] | None:
        found = await answers(cluster_ip, 80, requests=REQUESTS)
        return found if sorted(found) == replicas[1:] else None

    await eventually(only_the_healthy, timeout=10, what=f"{sick} out of kube-proxy's rules")
    healthy = await answers(cluster_ip, 80, requests=REQUESTS)
    assert sorted(healthy) == replicas[1:], healthy  # never the unready one
    assert sorted(from_pod(cluster, f"{name}-client", f"http://{name}", 30)) == replicas[1:]
    cluster.kubectl("exec", sick, "--", "sh", "-c", "hostname > /www/index.html")

    async def back_in_rotation() -> bool:
        return sorted(await answers(cluster_ip, 80, requests=REQUESTS)) == replicas

    await eventually(back_in_rotation, timeout=30, what=f"{sick} back in the rotation")

    # kill -9 a kube-proxy and start it again: the same rules, none twice.
    proxy = cluster.proxies[0]
    before = sorted(nat_rules(proxy.prefix))
    assert any(cluster_ip in line for line in before)
    proxy.kill()
    restarted = KubeProxyProcess(cluster.apiserver, cluster.workdir,
                                 node_name=cluster.nodes[0], prefix=proxy.prefix)
    cluster.proxies[0] = restarted  # it serves the next tests; the cluster stops it
    restarted.start()

    async def reconciled() -> list[str] | None:
        after = nat_rules(proxy.prefix)
        return after if sorted(after) == before else None

    after = await eventually(reconciled, timeout=30, what="the rules reconciled")
    assert len(after) == len(set(after)), [r for r in after if after.count(r) > 1]
    assert sorted(await answers(cluster_ip, 80, requests=REQUESTS)) == replicas
    assert (await http_get("127.0.0.1", node_port)) in replicas
    cluster.kubectl("delete", "deployment", name)
    cluster.kubectl("delete", "service", name)
    cluster.kubectl("delete", "pod", f"{name}-client", "--wait=false")


async def metrics_of(proxy: KubeProxyProcess) -> str:
    async with httpx.AsyncClient(base_url=proxy.url) as http:
        return (await http.get("/metrics")).text


def longest_failing_window(failed_at: list[float], gap: float = 2.0) -> float:
    """The longest stretch in which requests kept failing: failures less than `gap` s
    apart are one stretch. An endpoint left in the rules after its replica died fails a
    share of the requests until the end, one stretch as long as the rest of the run."""
    longest, start = 0.0, None
    for previous, at in zip([None, *failed_at], failed_at, strict=False):
        if previous is None or at - previous >= gap:
            start = at
        assert start is not None
        longest = max(longest, at - start)
    return longest


@pytest.mark.parametrize("drain", [0, DRAIN_SECONDS], ids=["no-prestop", "prestop-drain"])
async def test_a_rolling_update_and_a_scale_down_send_no_request_to_a_dead_endpoint(
        cluster: ServicesCluster, drain: int) -> None:
    """While every replica is replaced and then two are scaled away, the Service is hit
    non-stop. Replicas stop on SIGTERM, as real servers do. Without a preStop pause, a
    request can meet a dead replica only until its endpoint leaves the rules (pod deleted
    -> slice's ready=false -> kube-proxy's partial sync), a second or so, as on kube. With
    kube's draining recipe, a preStop pause longer than that, not one request fails."""
    name = unique("roll")
    deployment, service = web(name)
    spec = deployment["spec"]
    spec["strategy"] = {"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod_spec = spec["template"]["spec"]
    pod_spec["terminationGracePeriodSeconds"] = 20
    # As a real server does, and busybox httpd as PID 1 does not: stop on SIGTERM.
    pod_spec["containers"][0]["command"][-1] = (
        "mkdir -p /www; hostname > /www/index.html; trap 'kill $!; exit 0' TERM; "
        "httpd -f -p 8080 -h /www & wait")
    pod_spec["containers"][0]["lifecycle"] = {
        "preStop": {"exec": {"command": ["sleep", str(drain)]}}}
    apply(cluster.kubectl, deployment, service)

    async def three_ready() -> dict[str, bool] | None:
        ready = ready_endpoints(cluster, name)
        return ready if len(ready) == 3 and all(ready.values()) else None

    first = set(await eventually(three_ready, timeout=120, what="3 ready endpoints"))
    # The controller stamps a slice write with its cause's time (here the last replica's
    # Ready transition); kube-proxy measures from it to the rules programmed.
    slices = json.loads(cluster.kubectl("get", "endpointslices", "-l",
                                        f"kubernetes.io/service-name={name}", "-o", "json"))
    stamped = [s["metadata"].get("annotations", {}).get(LAST_CHANGE_TRIGGER_TIME)
               for s in slices["items"]]
    assert stamped and all(stamped), slices
    cluster_ip = json.loads(cluster.kubectl("get", "service", name, "-o", "json")
                            )["spec"]["clusterIP"]

    async def answering() -> bool:
        try:
            return bool(await answers(cluster_ip, 80, requests=10))
        except OSError:  # refused (no rules for the endpoints yet) or timed out: not yet
            return False
    await eventually(answering, timeout=30, what="the Service answering")

    failed_at: list[float] = []
    failures: list[str] = []
    answered: list[str] = []
    stop = asyncio.Event()

    async def traffic() -> None:
        while not stop.is_set():
            try:
                answered.append(await http_get(cluster_ip, 80, timeout=3))
            except (OSError, TimeoutError) as error:
                failed_at.append(time.monotonic())
                failures.append(f"{time.monotonic():.1f}: {error!r}")
            await asyncio.sleep(0.02)

    sender = asyncio.create_task(traffic())
    try:
        await asyncio.to_thread(cluster.kubectl, "rollout", "restart", f"deployment/{name}")
        await asyncio.to_thread(cluster.kubectl, "rollout", "status", f"deployment/{name}",
                                "--timeout=240s")
        await asyncio.to_thread(cluster.kubectl, "scale", f"deployment/{name}", "--replicas=1")

        async def one_left() -> dict[str, bool] | None:
            ready = ready_endpoints(cluster, name)
            return ready if len(ready) == 1 and all(ready.values()) else None

        survivor = set(await eventually(one_left, timeout=120, what="1 endpoint left"))
        before = len(answered)

        async def more_answered() -> bool:
            return len(answered) >= before + 20

        await eventually(more_answered, timeout=30, what="requests after the scale-down")
    finally:
        stop.set()
        await sender
    summary = f"{len(failures)} of {len(failures) + len(answered)} failed: {failures[:5]}"
    if drain:
        assert not failures, summary
    else:
        assert longest_failing_window(failed_at) < MAX_OUTAGE_SECONDS, summary
    assert first & set(answered) and set(answered) - first, "traffic spans the rollout"
    assert not first & survivor
    assert set(answered[-10:]) == survivor

    # kube-proxy measured the way from each stamped change to its rules.
    metrics = await metrics_of(cluster.proxies[0])
    programmed = re.search(
        r"^kubeproxy_network_programming_duration_seconds_count (\S+)$", metrics, re.M)
    assert programmed and float(programmed[1]) > 0, metrics
    cluster.kubectl("delete", "deployment", name)
    cluster.kubectl("delete", "service", name)
