"""The scheduling strategies end to end: a real scheduler process against a real
apiserver on a real etcd, with API-only Nodes that carry the allocatable, labels and
taints each test needs (no kubelet), and the real kubectl where a user would use it.

The module has its own etcd and apiserver so that other modules' nodes cannot change
the "0/N nodes" counts; every test deletes what it made.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.client import ApiClient
from common.errors import NotFound
from scheduler.pods import UNSCHEDULABLE_NODES_ANNOTATION
from tests.support import ApiServer, Etcd, Kubectl, SchedulerProcess, eventually, unique

# kube's PostFilter suffix when every pod in the way is as important (all priority 0)
NO_VICTIMS_1 = " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
NO_VICTIMS_2 = " preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    etcd = Etcd(tmp_path_factory.mktemp("strategies-etcd")).start()
    server = ApiServer(etcd, tmp_path_factory.mktemp("strategies-apiserver")).start()
    yield server
    server.stop()
    etcd.stop()


@pytest.fixture(scope="module")
def scheduler(cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess(cluster, tmp_path_factory.mktemp("strategies-scheduler")).start()
    yield proc
    proc.stop()


def client_for(server: ApiServer) -> ApiClient:
    """The one place this module builds a client from a server's address."""
    return ApiClient(server.connection())


@pytest.fixture(scope="module")
def kubectl(cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(cluster.url, Path(tmp_path_factory.mktemp("strategies-kubectl")))


class Objects:
    """Creates nodes and pods through the API and deletes them after the test."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.nodes: list[str] = []
        self.pods: list[str] = []

    async def node(self, name: str, *, labels: dict[str, str] | None = None,
                   allocatable: dict[str, str] | None = None,
                   taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
        status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True",
                                                  "reason": "KubeletReady"}]}
        if allocatable is not None:
            status["allocatable"] = status["capacity"] = allocatable
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {"taints": taints} if taints else {}, "status": status}
        await self.client.create("nodes", body)
        self.nodes.append(name)
        return await self.client.patch("nodes", name, {"status": status},
                                       subresource="status")

    async def pod(self, name: str, *, requests: dict[str, str] | None = None,
                  spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
                  owner: dict[str, Any] | None = None) -> dict[str, Any]:
        app: dict[str, Any] = {"name": "app", "image": "busybox:1.36"}
        if requests:
            app["resources"] = {"requests": requests}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": labels or {},
                             **({"ownerReferences": [owner]} if owner else {})},
                "spec": {"containers": [app], **(spec or {})}}
        self.pods.append(name)
        return await self.client.create("pods", body, namespace="default")

    async def cleanup(self) -> None:
        for name in self.pods:
            try:
                await self.client.delete("pods", name, namespace="default",
                                         grace_period_seconds=0)
            except NotFound:
                pass
        for name in self.nodes:
            try:
                await self.client.delete("nodes", name)
            except NotFound:
                pass


@pytest.fixture
async def api(cluster: ApiServer) -> AsyncIterator[ApiClient]:
    async with client_for(cluster) as client:
        yield client


@pytest.fixture
async def objects(api: ApiClient) -> AsyncIterator[Objects]:
    made = Objects(api)
    yield made
    await made.cleanup()


async def wait_bound(api: ApiClient, name: str, *, within: float = 30) -> str:
    async def bound() -> str | None:
        pod = await api.get("pods", name, namespace="default")
        return (pod.get("spec") or {}).get("nodeName") or None
    node = await eventually(bound, timeout=within, what=f"pod {name} to be bound")
    assert node is not None
    return node


async def events_of(api: ApiClient, name: str) -> list[dict[str, Any]]:
    listed = await api.list("events", namespace="default",
                            field_selector=f"involvedObject.name={name}")
    return list(listed.get("items") or [])


async def wait_event(api: ApiClient, name: str, reason: str, *,
                     message: str | None = None, within: float = 30) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        for event in await events_of(api, name):
            if event.get("reason") == reason and message in (None, event.get("message")):
                return event
        return None
    event = await eventually(found, timeout=within,
                             what=f"{reason} event for {name}: {message or 'any'}")
    assert event is not None
    return event


async def per_node_annotation(api: ApiClient, name: str, count: int) -> dict[str, str]:
    async def explained() -> dict[str, str] | None:
        pod = await api.get("pods", name, namespace="default")
        text = (pod["metadata"].get("annotations") or {}).get(UNSCHEDULABLE_NODES_ANNOTATION)
        reasons = json.loads(text or "{}")
        return reasons if len(reasons) == count else None
    reasons = await eventually(explained, timeout=30, what=f"{name}'s per-node reasons")
    assert reasons is not None
    return reasons


# -- NodeResourcesFit ------------------------------------------------------------------


async def test_requests_pick_the_node_with_room_and_growing_allocatable_admits_a_waiter(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    small, big = unique("small"), unique("big")
    await objects.node(small, allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"})
    await objects.node(big, allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"})

    await objects.pod("needs-two-cpus", requests={"cpu": "2", "memory": "1Gi"})
    assert await wait_bound(api, "needs-two-cpus") == big

    # 3 more cpus fit nowhere now (big has 2 left): kube's counted message.
    await objects.pod("needs-three-cpus", requests={"cpu": "3"})
    await wait_event(api, "needs-three-cpus", "FailedScheduling",
                     message="0/2 nodes are available: 2 Insufficient cpu." + NO_VICTIMS_2)
    assert await per_node_annotation(api, "needs-three-cpus", 2) == {
        small: "Insufficient cpu", big: "Insufficient cpu"}

    # The small node grows (a kubelet restarted with more cpus): the waiting pod is
    # retried at once because of that node event.
    before = scheduler.log_count(f"node {small} changed: 1 waiting pod(s)")
    await api.patch("nodes", small, {"status": {"allocatable": {
        "cpu": "8", "memory": "1Gi", "pods": "10"}}}, subresource="status")
    assert await wait_bound(api, "needs-three-cpus", within=20) == small
    assert scheduler.log_count(f"node {small} changed: 1 waiting pod(s)") > before


async def test_init_containers_count_as_their_max_and_pods_are_limited(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    one = unique("one-pod")
    await objects.node(one, allocatable={"cpu": "2", "memory": "1Gi", "pods": "1"})
    # The init container's 3 cpus do not fit in 2, though the app's 1 would.
    await objects.pod("init-heavy", requests={"cpu": "1"}, spec={"initContainers": [
        {"name": "setup", "image": "busybox:1.36", "resources": {"requests": {"cpu": "3"}}}]})
    await wait_event(api, "init-heavy", "FailedScheduling",
                     message="0/1 nodes are available: 1 Insufficient cpu." + NO_VICTIMS_1)

    await objects.pod("first", requests={"cpu": "1"})
    assert await wait_bound(api, "first") == one
    await objects.pod("second")
    await wait_event(api, "second", "FailedScheduling",
                     message="0/1 nodes are available: 1 Too many pods." + NO_VICTIMS_1)


# -- NodeAffinity ----------------------------------------------------------------------


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}}


async def test_node_affinity_required_preferred_and_match_fields(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    zone = unique("zone")
    a, b, c = unique("aff-a"), unique("aff-b"), unique("aff-c")
    await objects.node(a, labels={zone: "a", "disk": "hdd", "cores": "8"})
    await objects.node(b, labels={zone: "b", "disk": "ssd", "cores": "16"})
    await objects.node(c, labels={zone: "c", "disk": "ssd", "cores": "32"})

    # Required: zone a or b; preferred: ssd (only b is both).
    spec = required({"matchExpressions": [{"key": zone, "operator": "In",
                                           "values": ["a", "b"]}]})
    spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 80, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]
    for i in range(3):
        await objects.pod(f"prefers-ssd-{i}", spec=spec)
        assert await wait_bound(api, f"prefers-ssd-{i}") == b

    # Gt on a label, NotIn, and matchFields on the node's name, ORed across terms.
    await objects.pod("gt", spec=required({"matchExpressions": [
        {"key": "cores", "operator": "Gt", "values": ["20"]}]}))
    assert await wait_bound(api, "gt") == c
    await objects.pod("by-name", spec=required(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [a]}]},
        {"matchExpressions": [{"key": zone, "operator": "In", "values": ["nowhere"]}]}))
    assert await wait_bound(api, "by-name") == a

    # nodeSelector and required affinity together: both must hold, kube's one reason.
    await objects.pod("contradiction", spec={
        "nodeSelector": {zone: "a"},
        **required({"matchExpressions": [{"key": "disk", "operator": "NotIn",
                                          "values": ["hdd"]}]})})
    await wait_event(api, "contradiction", "FailedScheduling", message=(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        " preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."))
    # A label added to the node: the pod is retried at once and lands.
    await api.patch("nodes", a, {"metadata": {"labels": {"disk": "nvme"}}})
    assert await wait_bound(api, "contradiction", within=20) == a


# -- TaintToleration -------------------------------------------------------------------


async def test_kubectl_taint_filters_tolerations_admit_and_prefer_no_schedule_scores(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess,
        kubectl: Kubectl) -> None:
    key = unique("pool")
    t1, t2 = unique("taint-1"), unique("taint-2")
    await objects.node(t1, labels={key: "x"})
    await objects.node(t2, labels={key: "x"})
    assert kubectl("taint", "nodes", t1, "dedicated=gpu:NoSchedule").strip() == (
        f"node/{t1} tainted")
    kubectl("taint", "nodes", t2, "maintenance=soon:NoExecute")

    await objects.pod("untolerated", spec={"nodeSelector": {key: "x"}})
    await wait_event(api, "untolerated", "FailedScheduling", message=(
        "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) had untolerated taint {maintenance: soon}. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.."))
    assert await per_node_annotation(api, "untolerated", 2) == {
        t1: "had untolerated taint {dedicated: gpu}",
        t2: "had untolerated taint {maintenance: soon}"}

    await objects.pod("tolerates-gpu", spec={"nodeSelector": {key: "x"}, "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]})
    assert await wait_bound(api, "tolerates-gpu") == t1

    # Removing the taint retries the waiting pod at once (that node event moves it).
    before = scheduler.log_count(f"node {t2} changed: 1 waiting pod(s)")
    assert kubectl("taint", "nodes", t2, "maintenance-").strip() == f"node/{t2} untainted"
    assert await wait_bound(api, "untolerated", within=20) == t2
    assert scheduler.log_count(f"node {t2} changed: 1 waiting pod(s)") > before

    # PreferNoSchedule never filters, but the node without it wins (weight 3).
    kubectl("taint", "nodes", t1, "dedicated-")
    kubectl("taint", "nodes", t2, "slow=yes:PreferNoSchedule")
    for i in range(3):
        await objects.pod(f"avoids-slow-{i}", spec={"nodeSelector": {key: "x"}})
        assert await wait_bound(api, f"avoids-slow-{i}") == t1
    await objects.pod("only-slow", spec={"nodeSelector": {key: "x"}, "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [t2]}]}]}}}})
    assert await wait_bound(api, "only-slow") == t2


# -- InterPodAffinity, PodTopologySpread, requeueing on pod events, scores ---------------

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def anti_affinity(app: str, key: str = HOSTNAME) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}}


async def test_anti_affinity_spreads_replicas_and_a_deleted_replica_frees_its_node(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    app = unique("web")
    names = [unique("spread") for _ in range(3)]
    for name in names:
        await objects.node(name, labels={HOSTNAME: name})
    for i in range(3):
        await objects.pod(f"{app}-{i}", labels={"app": app}, spec=anti_affinity(app))
    placed = [await wait_bound(api, f"{app}-{i}") for i in range(3)]
    assert sorted(placed) == sorted(names)  # one per node

    await objects.pod(f"{app}-3", labels={"app": app}, spec=anti_affinity(app))
    await wait_event(api, f"{app}-3", "FailedScheduling", message=(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
        " preemption: 0/3 nodes are available: 3 No preemption victims found for incoming "
        "pod.."))
    # A pod without anti-affinity of its own is kept out by theirs (symmetry).
    await objects.pod(f"{app}-plain", labels={"app": app})
    await wait_event(api, f"{app}-plain", "FailedScheduling", message=(
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity "
        "rules. preemption: 0/3 nodes are available: 3 No preemption victims found for "
        "incoming pod.."))

    # Deleting one replica retries the waiting pods at once: the deletion event moved them.
    freed = placed[0]
    await api.delete("pods", f"{app}-0", namespace="default", grace_period_seconds=0)
    async def first_waiter_bound() -> str | None:
        for name in (f"{app}-3", f"{app}-plain"):
            pod = await api.get("pods", name, namespace="default")
            if (pod.get("spec") or {}).get("nodeName"):
                return str(pod["spec"]["nodeName"])
        return None
    assert await eventually(first_waiter_bound, timeout=20, what="a waiter bound") == freed
    assert scheduler.log_count(f"pod default/{app}-0 left {freed}: ") >= 1


async def test_topology_spread_over_zones_and_the_scores_in_the_scheduled_event(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    app = unique("zoned")
    nodes = {unique("za"): "a", unique("za"): "a", unique("zb"): "b"}
    for name, zone in nodes.items():
        await objects.node(name, labels={HOSTNAME: name, ZONE: f"{app}-{zone}"})
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}}}]}
    zones = []
    for i in range(4):
        await objects.pod(f"{app}-{i}", labels={"app": app}, spec=spread)
        zones.append(nodes[await wait_bound(api, f"{app}-{i}")])
    assert sorted(zones) == ["a", "a", "b", "b"]  # zone b's one node took half

    # The Scheduled event keeps kube's sentence and adds how the feasible nodes scored.
    b_node = next(name for name, zone in nodes.items() if zone == "b")
    await objects.pod(f"{app}-pref", spec={"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [b_node]}]}}]}}})
    assert await wait_bound(api, f"{app}-pref") == b_node
    event = await wait_event(api, f"{app}-pref", "Scheduled")
    first, _, rest = event["message"].partition(". ")
    assert first == f"Successfully assigned default/{app}-pref to {b_node}"
    assert rest.startswith(f"Scores of 3 feasible nodes: {b_node} ")
    assert f"{b_node} 200 (NodeAffinity 200)" in rest  # weight 2 x normalized 100


async def cached_pods(scheduler: SchedulerProcess) -> int:
    """The scheduler's scheduler_cache_size{type="pods"}: the placed pods it has seen."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{scheduler.url}/metrics")).text
    found = re.search(r'^scheduler_cache_size\{type="pods"\} (\S+)$', text, re.M)
    assert found, "scheduler_cache_size{type=\"pods\"} is not in /metrics"
    return int(float(found.group(1)))


async def test_system_default_spreading_counts_the_replica_sets_and_the_services_pods(
        cluster: ApiServer, api: ApiClient, objects: Objects,
        scheduler: SchedulerProcess) -> None:
    """A pod with no topologySpreadConstraints is spread by kube's system defaults
    (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) over the pods of the ReplicaSet
    that controls it and of the Services that select it; a pod of neither is not."""
    await scheduler.wait_synced()  # and serving /metrics
    crowded, empty = unique("crowded"), unique("roomy")
    for name in (crowded, empty):
        await objects.node(name, labels={HOSTNAME: name})
    app, served = unique("rs-app"), unique("svc-app")
    async with ApiClient(cluster.connection(),
                         group_versions={"replicasets": "apps/v1"}) as apps:
        rs = await apps.create("replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": app},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": {
                         "containers": [{"name": "app", "image": "busybox:1.36"}]}}}},
            namespace="default")
        try:
            await api.create("services", {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": served},
                "spec": {"selector": {"app": served}, "ports": [{"port": 80}]}},
                namespace="default")
            owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                     "uid": rs["metadata"]["uid"], "controller": True}
            before = await cached_pods(scheduler)
            for i in range(3):  # already placed on `crowded`: the scheduler only counts them
                await objects.pod(f"{app}-placed-{i}", labels={"app": app}, owner=owner,
                                  spec={"nodeName": crowded})
                await objects.pod(f"{served}-placed-{i}", labels={"app": served},
                                  spec={"nodeName": crowded})

            async def seen() -> bool:
                return await cached_pods(scheduler) >= before + 6
            await eventually(seen, what="the scheduler to cache the placed pods")

            for name, labels, owned in ((f"{app}-new", {"app": app}, owner),
                                        (f"{served}-new", {"app": served}, None)):
                await objects.pod(name, labels=labels, owner=owned)
                assert await wait_bound(api, name) == empty
                message = (await wait_event(api, name, "Scheduled"))["message"]
                assert re.search(rf"{empty} \d+ \([^)]*PodTopologySpread \d+", message), message
            # A pod no Service or workload selects gets no spreading score at all.
            await objects.pod(f"{app}-lone", labels={"other": app})
            await wait_bound(api, f"{app}-lone")
            message = (await wait_event(api, f"{app}-lone", "Scheduled"))["message"]
            assert "PodTopologySpread" not in message, message
        finally:
            await apps.delete("replicasets", app, namespace="default")
            try:
                await api.delete("services", served, namespace="default")
            except NotFound:
                pass


async def test_a_deleted_pod_gives_its_requests_back(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    node = unique("full")
    await objects.node(node, allocatable={"cpu": "2", "memory": "2Gi", "pods": "10"})
    await objects.pod("hog", requests={"cpu": "2"})
    assert await wait_bound(api, "hog") == node
    await objects.pod("waiter", requests={"cpu": "1"})
    await wait_event(api, "waiter", "FailedScheduling",
                     message="0/1 nodes are available: 1 Insufficient cpu." + NO_VICTIMS_1)
    await api.delete("pods", "hog", namespace="default", grace_period_seconds=0)
    assert await wait_bound(api, "waiter", within=20) == node
    assert scheduler.log_count(f"pod default/hog left {node}: 1 waiting pod(s)") == 1
