"""The scheduler as a real process against a real apiserver on a real etcd.

Nodes are plain API objects (no kubelet). The module runs its own etcd + apiserver so
other modules' nodes cannot change the "0/N nodes" counts, and every test deletes the
nodes and pods it made. Tests that start their own scheduler processes give them their
own `--scheduler-name`, so the module's shared scheduler never touches those pods, and
a leader election lease of that name (kube's advice for several schedulers), so they do
not wait for the shared scheduler's `kube-system/kube-scheduler`.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from common.client import ApiClient
from common.errors import NotFound
from common.models import format_micro_time, parse_micro_time
from scheduler.pods import UNSCHEDULABLE_NODES_ANNOTATION
from tests.support import (
    ApiServer,
    Etcd,
    SchedulerProcess,
    eventually,
    unique,
    wait_http_ok,
)

T = TypeVar("T")


@pytest.fixture(scope="module")
def module_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    started = Etcd(tmp_path_factory.mktemp("scheduler-etcd")).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def cluster(module_etcd: Etcd, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ApiServer]:
    server = ApiServer(module_etcd, tmp_path_factory.mktemp("scheduler-cluster")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scheduler(cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerProcess]:
    # a generous renew deadline: an apiserver restart on a loaded machine (a TLS apiserver
    # takes seconds to start) must not outlast it, or the leader exits, as kube's does
    proc = SchedulerProcess(cluster, tmp_path_factory.mktemp("scheduler"), extra_args=(
        "--leader-elect-lease-duration", "90s", "--leader-elect-renew-deadline", "60s")).start()
    yield proc
    proc.process.stop()


class Objects:
    """Creates nodes and pods through the API and deletes them after the test."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.nodes: list[str] = []
        self.pods: list[tuple[str, str]] = []

    async def node(self, name: str, *, labels: dict[str, str] | None = None,
                   ready: bool = True, cordoned: bool = False) -> dict[str, Any]:
        conditions = [{"type": "Ready", "status": "True" if ready else "False",
                       "reason": "KubeletReady" if ready else "KubeletNotReady"}]
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {"unschedulable": True} if cordoned else {},
                "status": {"conditions": conditions}}
        created = await self.client.create("nodes", body)
        self.nodes.append(name)
        if (created.get("status") or {}).get("conditions") != conditions:
            created = await self.client.patch("nodes", name,
                                              {"status": {"conditions": conditions}},
                                              subresource="status")
        return created

    async def pod(self, name: str, *, node_selector: dict[str, str] | None = None,
                  scheduler_name: str | None = None, node_name: str | None = None,
                  namespace: str = "default") -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox:1.36"}]}
        if node_selector:
            spec["nodeSelector"] = node_selector
        if scheduler_name:
            spec["schedulerName"] = scheduler_name
        if node_name:
            spec["nodeName"] = node_name
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        self.pods.append((namespace, name))
        return await self.client.create("pods", body, namespace=namespace)

    async def cleanup(self) -> None:
        for namespace, name in self.pods:
            try:
                await self.client.delete("pods", name, namespace=namespace,
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
    async with ApiClient(cluster.connection()) as client:
        yield client


@pytest.fixture
async def objects(api: ApiClient) -> AsyncIterator[Objects]:
    made = Objects(api)
    yield made
    await made.cleanup()


async def until(check: Callable[[], Awaitable[T | None]], *, within: float = 30,
                what: str) -> T:
    """`eventually` for checks that answer None until they have a result."""
    result = await eventually(check, timeout=within, what=what)
    assert result is not None
    return result


async def node_of(api: ApiClient, name: str, namespace: str = "default") -> str | None:
    pod = await api.get("pods", name, namespace=namespace)
    return (pod.get("spec") or {}).get("nodeName") or None


async def wait_bound(api: ApiClient, name: str, *, within: float = 30) -> str:
    async def bound() -> str | None:
        return await node_of(api, name)
    return await until(bound, within=within, what=f"pod {name} to be bound")


async def events_of(api: ApiClient, name: str, namespace: str = "default"
                    ) -> list[dict[str, Any]]:
    listed = await api.list("events", namespace=namespace,
                            field_selector=f"involvedObject.name={name}")
    return list(listed.get("items") or [])


async def wait_event(api: ApiClient, name: str, reason: str, *, min_count: int = 1,
                     message: str | None = None, within: float = 30) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        for event in await events_of(api, name):
            if (event.get("reason") == reason and int(event.get("count") or 1) >= min_count
                    and message in (None, event.get("message"))):
                return event
        return None
    return await until(found, within=within,
                       what=f"{reason} event (count >= {min_count}) for {name}"
                            + (f": {message}" if message else ""))


def condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


async def test_seed_scenario_pod_lands_on_the_node_its_selector_names(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    await objects.node("node1", labels={"shuai": "a"})
    await objects.node("node2", labels={"shuai": "b"})
    await objects.pod("pod-example", node_selector={"shuai": "b"})

    assert await wait_bound(api, "pod-example") == "node2"
    event = await wait_event(api, "pod-example", "Scheduled")
    assert event["type"] == "Normal"
    assert event["message"] == "Successfully assigned default/pod-example to node2"
    assert event["source"]["component"] == "default-scheduler"
    assert event["involvedObject"]["kind"] == "Pod"
    pod = await api.get("pods", "pod-example", namespace="default")
    assert (condition(pod, "PodScheduled") or {}).get("status") == "True"


async def test_no_node_matches_then_a_label_makes_one_match(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    key = unique("zone")
    n1, n2 = unique("plain"), unique("cordoned")
    await objects.node(n1, labels={key: "a"})
    await objects.node(n2, labels={key: "b"}, cordoned=True)
    await objects.pod("waiting", node_selector={key: "b"})

    expected = ("0/2 nodes are available: 1 node(s) didn't match Pod's node "
                "affinity/selector, 1 node(s) were unschedulable. preemption: 0/2 nodes are "
                "available: 2 Preemption is not helpful for scheduling..")
    # Retried with back-off (1 s, 2 s, ...): the repeat bumps the count of one Event.
    event = await wait_event(api, "waiting", "FailedScheduling", min_count=2)
    assert event["type"] == "Warning"
    assert event["message"] == expected
    assert event["source"]["component"] == "default-scheduler"
    # An attempt made before the scheduler's node watch delivered the second node says
    # "0/1 nodes": a different message, so a different Event. The same message is one Event.
    failed = [e for e in await events_of(api, "waiting")
              if e["reason"] == "FailedScheduling" and e["message"] == expected]
    assert len(failed) == 1

    # The condition and the annotation are patched after the Event is recorded.
    async def explained() -> dict[str, Any] | None:
        pod = await api.get("pods", "waiting", namespace="default")
        cond = condition(pod, "PodScheduled") or {}
        annotation = (pod["metadata"].get("annotations") or {}).get(
            UNSCHEDULABLE_NODES_ANNOTATION)
        both_nodes = len(json.loads(annotation or "{}")) == 2
        return pod if cond.get("message") == expected and both_nodes else None
    pod = await until(explained, what="the pod's PodScheduled condition and annotation")
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable",
                                                                 expected)
    per_node = json.loads(pod["metadata"]["annotations"][UNSCHEDULABLE_NODES_ANNOTATION])
    assert per_node == {n1: "didn't match Pod's node affinity/selector",
                        n2: "was unschedulable"}
    assert await node_of(api, "waiting") is None

    retries_before = scheduler.log_count(f"node {n1} changed")
    await api.patch("nodes", n1, {"metadata": {"labels": {key: "b"}}})  # kubectl label
    assert await wait_bound(api, "waiting") == n1
    # It came back because of the node change, not because its back-off ran out.
    assert scheduler.log_count(f"node {n1} changed: 1 waiting pod(s)") > retries_before
    await wait_event(api, "waiting", "Scheduled")

    async def annotation_gone() -> bool:
        pod = await api.get("pods", "waiting", namespace="default")
        return UNSCHEDULABLE_NODES_ANNOTATION not in (pod["metadata"].get("annotations") or {})
    await eventually(annotation_gone, what="the unschedulable-nodes annotation to go")


async def test_pod_created_with_node_name_is_never_touched(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    key = unique("direct")
    node = unique("direct-node")
    await objects.node(node, labels={key: "yes"})
    await objects.pod("preassigned", node_name=node)
    # A pod created after it gets scheduled: by then the first one was seen too.
    await objects.pod("sentinel", node_selector={key: "yes"})
    await wait_event(api, "sentinel", "Scheduled")

    assert await events_of(api, "preassigned") == []
    assert "default/preassigned" not in scheduler.process.log()
    assert await node_of(api, "preassigned") == node


async def test_not_ready_and_cordoned_nodes_are_skipped_until_they_change(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    key = unique("pool")
    ready, not_ready, cordoned = unique("ready"), unique("notready"), unique("cordon")
    await objects.node(ready, labels={key: "x", "which": ready})
    await objects.node(not_ready, labels={key: "x", "which": not_ready}, ready=False)
    await objects.node(cordoned, labels={key: "x", "which": cordoned}, cordoned=True)
    names = [f"skip-{i}" for i in range(6)]
    await asyncio.gather(*(objects.pod(n, node_selector={key: "x"}) for n in names))
    placed = await asyncio.gather(*(wait_bound(api, n) for n in names))
    assert set(placed) == {ready}

    await objects.pod("wants-not-ready", node_selector={"which": not_ready})
    await objects.pod("wants-cordoned", node_selector={"which": cordoned})
    # Each node's first rejecting filter gives its reason (kube's filter order).
    expected = ("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                "1 node(s) were not ready, 1 node(s) were unschedulable. preemption: 0/3 "
                "nodes are available: 3 Preemption is not helpful for scheduling..")
    # An attempt made before the node watch delivered all three says "0/1" or "0/2".
    for pod in ("wants-not-ready", "wants-cordoned"):
        event = await wait_event(api, pod, "FailedScheduling", message=expected)
        assert event["type"] == "Warning"

    await api.patch("nodes", not_ready, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}, subresource="status")
    await api.patch("nodes", cordoned, {"spec": {"unschedulable": None}})  # kubectl uncordon
    assert await wait_bound(api, "wants-not-ready") == not_ready
    assert await wait_bound(api, "wants-cordoned") == cordoned


async def test_equal_nodes_share_thirty_pods(
        api: ApiClient, objects: Objects, scheduler: SchedulerProcess) -> None:
    key = unique("spread")
    nodes = [unique("equal") for _ in range(3)]
    for node in nodes:
        await objects.node(node, labels={key: "yes", "which": node})
    # Nodes arrive in order on the scheduler's node watch: once a pod bound to the last
    # node, the scheduler knows all three.
    await objects.pod("spread-probe", node_selector={"which": nodes[-1]})
    assert await wait_bound(api, "spread-probe") == nodes[-1]
    names = [f"spread-{i}" for i in range(30)]
    await asyncio.gather(*(objects.pod(n, node_selector={key: "yes"}) for n in names))
    placed = Counter(await asyncio.gather(*(wait_bound(api, n) for n in names)))
    assert set(placed) == set(nodes)
    placed[nodes[-1]] += 1  # the probe
    assert max(placed.values()) <= 31 // 3 + 1, placed


async def test_two_schedulers_bind_every_pod_exactly_once(
        api: ApiClient, objects: Objects, cluster: ApiServer,
        tmp_path: Path) -> None:
    name = unique("race-scheduler")
    key = unique("race")
    for _ in range(4):
        await objects.node(unique("race-node"), labels={key: "yes"})
    # Without leader election, on purpose: both schedule at once, to exercise the
    # apiserver's refusal of a second binding (with it, only one of them would schedule).
    racers = [SchedulerProcess(cluster, tmp_path, name=f"racer{i}", scheduler_name=name,
                               leader_elect=False).start()
              for i in range(2)]
    try:
        await asyncio.gather(*(r.wait_synced() for r in racers))
        pods = [f"race-{i}" for i in range(200)]
        semaphore = asyncio.Semaphore(16)

        async def create(pod: str) -> None:
            async with semaphore:
                await objects.pod(pod, node_selector={key: "yes"}, scheduler_name=name)
        await asyncio.gather(*(create(p) for p in pods))

        async def all_bound() -> bool:
            listed = await api.list("pods", namespace="default",
                                    field_selector=f"spec.schedulerName={name}")
            bound = [p for p in listed["items"] if p["spec"].get("nodeName")]
            return len(bound) == len(pods)
        await eventually(all_bound, timeout=120, interval=0.5, what="200 pods bound")

        async def one_event_per_pod() -> Counter[str] | None:
            listed = await api.list("events", namespace="default",
                                    field_selector="reason=Scheduled")
            counts = Counter(e["involvedObject"]["name"] for e in listed["items"]
                             if e["involvedObject"]["name"] in set(pods))
            return counts if len(counts) == len(pods) else None
        counts = await until(one_event_per_pod, within=60, what="a Scheduled event per pod")
        assert set(counts.values()) == {1}, [p for p, c in counts.items() if c != 1]
        listed = await api.list("events", namespace="default", field_selector="reason=Scheduled")
        assert all(int(e.get("count") or 1) == 1 for e in listed["items"])

        assigned = sum(r.log_count("scheduler INFO Successfully assigned default/race-")
                       for r in racers)
        refused = sum(r.log_count("was bound by someone else") for r in racers)
        assert assigned == len(pods)
        # Both schedulers went for the same pods and the apiserver refused the second bind.
        assert refused >= 1
        for racer in racers:
            assert racer.process.alive(), racer.process.log()[-3000:]
            assert "Traceback" not in racer.process.log()
    finally:
        for racer in racers:
            racer.process.stop()


async def test_scheduler_restart_schedules_pods_created_while_it_was_down(
        api: ApiClient, objects: Objects, cluster: ApiServer, tmp_path: Path) -> None:
    name = unique("restart-scheduler")
    key = unique("restart")
    node = unique("restart-node")
    await objects.node(node, labels={key: "yes"})
    sched = SchedulerProcess(cluster, tmp_path, name="restarting", scheduler_name=name,
                             port=0).start()
    try:
        await sched.wait_synced()
        await objects.pod("before-restart", node_selector={key: "yes"}, scheduler_name=name)
        assert await wait_bound(api, "before-restart") == node

        sched.process.signal(signal.SIGTERM)
        assert sched.process.proc is not None
        assert sched.process.proc.wait(timeout=15) == 0  # graceful
        assert "stopped" in sched.process.log()

        down = [f"while-down-{i}" for i in range(5)]
        for pod in down:
            await objects.pod(pod, node_selector={key: "yes"}, scheduler_name=name)
        await asyncio.sleep(0.5)
        assert all([await node_of(api, p) is None for p in down])

        sched.start()
        for pod in down:
            assert await wait_bound(api, pod) == node
        assert "serving /healthz" not in sched.process.log()  # --port 0: no endpoint
    finally:
        sched.process.stop()


async def test_survives_an_apiserver_restart(
        api: ApiClient, objects: Objects, cluster: ApiServer,
        scheduler: SchedulerProcess) -> None:
    key = unique("survive")
    node = unique("survive-node")
    await objects.node(node, labels={key: "yes"})
    await objects.pod("before-outage", node_selector={key: "yes"})
    assert await wait_bound(api, "before-outage") == node

    cluster.process.stop()
    await asyncio.sleep(1)
    cluster.process.start()
    wait_http_ok(f"{cluster.url}/readyz", process=cluster.process, verify=cluster.ssl_context())

    await objects.pod("after-outage", node_selector={key: "yes"})
    assert await wait_bound(api, "after-outage", within=60) == node
    await wait_event(api, "after-outage", "Scheduled")
    assert scheduler.process.alive()


def metric_samples(text: str) -> dict[str, float]:
    """The samples of a Prometheus text page, keyed by `name{labels}` as written."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            samples[key] = float(value)
    return samples


async def test_readyz_waits_for_the_informers_and_metrics_count_attempts(
        api: ApiClient, objects: Objects, module_etcd: Etcd, cluster: ApiServer,
        tmp_path: Path) -> None:
    name = unique("probed-scheduler")
    key = unique("probed")
    late = ApiServer(module_etcd, tmp_path, name="late-apiserver")  # started after the 503
    sched = SchedulerProcess(late, tmp_path, name="probed", scheduler_name=name,
                             grant_through=cluster).start()
    attempts = f'scheduler_schedule_attempts_total{{profile="{name}",result='
    try:
        async with httpx.AsyncClient(base_url=sched.url, timeout=10) as http:
            async def healthz() -> httpx.Response | None:
                assert sched.process.alive(), sched.process.log()[-3000:]
                try:
                    return await http.get("/healthz")
                except httpx.TransportError:
                    return None
            response = await until(healthz, what="the scheduler's /healthz to answer")
            assert (response.status_code, response.text) == (200, "ok")
            assert (await http.get("/livez")).text == "ok"
            response = await http.get("/readyz")
            assert response.status_code == 503
            assert ("[-]informer-sync failed: not synced yet: nodes, assigned pods, unbound pods, "
                    "namespaces, services, replicasets"
                    in response.text.splitlines())

            await asyncio.to_thread(late.start)

            async def ready() -> bool:
                return (await http.get("/readyz")).status_code == 200
            await eventually(ready, what="/readyz to answer 200 once the informers synced")
            assert (await http.get("/readyz")).text == "ok"
            verbose = await http.get("/readyz", params={"verbose": ""})
            assert verbose.text == ("[+]ping ok\n[+]informer-sync ok\n[+]shutdown ok\n"
                                    "readyz check passed\n")

            node = unique("probed-node")
            await objects.node(node, labels={key: "yes"})
            await objects.pod("probed-fits", node_selector={key: "yes"}, scheduler_name=name)
            await objects.pod("probed-waits", node_selector={key: "no"}, scheduler_name=name)
            assert await wait_bound(api, "probed-fits") == node

            async def counted() -> dict[str, float] | None:
                response = await http.get("/metrics")
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
                samples = metric_samples(response.text)
                done = (samples[f'{attempts}"scheduled"}}'] == 1
                        and samples[f'{attempts}"unschedulable"}}'] >= 1)
                return samples if done else None
            samples = await until(counted, what="/metrics to count one bind and one miss")
            assert samples[f'{attempts}"error"}}'] == 0
            # The waiting pod sits in `unschedulable` between its (synchronous) attempts.
            assert {q: samples[f'scheduler_pending_pods{{queue="{q}"}}']
                    for q in ("active", "backoff", "unschedulable")} == {
                "active": 0, "backoff": 0, "unschedulable": 1}
            assert samples["kubelite_scheduler_pods_in_flight"] == 0
            assert samples['scheduler_cache_size{type="nodes"}'] >= 1

            await api.delete("pods", "probed-waits", namespace="default", grace_period_seconds=0)

            async def queue_empty() -> bool:
                text = (await http.get("/metrics")).text
                return metric_samples(text)['scheduler_pending_pods{queue="unschedulable"}'] == 0
            await eventually(queue_empty, what="the deleted pod to leave the queue")
    finally:
        sched.process.stop()
        late.stop()


def test_a_port_in_use_stops_the_scheduler_with_one_clear_line(
        cluster: ApiServer, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = int(holder.getsockname()[1])
        sched = SchedulerProcess(cluster, tmp_path, name="collides",
                                 scheduler_name=unique("collides"), port=port).start()
        assert sched.process.proc is not None
        assert sched.process.proc.wait(timeout=30) == 1
    log = sched.process.log()
    assert f"cannot serve /healthz and /metrics on 127.0.0.1:{port}" in log, log
    assert "--port 0 for none" in log
    assert "Traceback" not in log and "starting" not in log, log


async def test_leader_election_one_schedules_sigterm_hands_over_a_crash_waits_for_expiry(
        api: ApiClient, objects: Objects, cluster: ApiServer, tmp_path: Path) -> None:
    name = unique("elected-scheduler")  # the scheduler name and its lease's name
    key = unique("elected")
    node = unique("elected-node")
    await objects.node(node, labels={key: "yes"})
    timing = ("--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
              "--leader-elect-retry-period", "1s")
    candidates = [SchedulerProcess(cluster, tmp_path, name=f"candidate{i}", scheduler_name=name,
                                   extra_args=timing).start() for i in range(2)]

    async def lease() -> dict[str, Any]:
        return await api.get("leases", name, namespace="kube-system")

    async def leader_other_than(gone: str) -> SchedulerProcess | None:
        """The live candidate holding the lease, once someone other than `gone` holds it."""
        for candidate in candidates:
            assert candidate.process.alive() or candidate.identity() == gone, (
                candidate.process.log()[-3000:])
        try:
            holder = (await lease())["spec"].get("holderIdentity")
        except NotFound:
            return None
        for candidate in candidates:
            if holder and holder != gone and candidate.identity() == holder:
                return candidate
        return None

    async def bound_by(leader: SchedulerProcess, pod: str) -> None:
        await objects.pod(pod, node_selector={key: "yes"}, scheduler_name=name)
        assert await wait_bound(api, pod) == node
        # The Scheduled Event is written after the scheduler logged the assignment.
        await wait_event(api, pod, "Scheduled")
        assert leader.log_count(f"Successfully assigned default/{pod} ") == 1
        assert sum(c.log_count(f"Successfully assigned default/{pod} ")
                   for c in candidates) == 1

    try:
        first = await until(lambda: leader_other_than(""), what="a leader")
        [second] = [c for c in candidates if c is not first]
        await second.wait_synced()
        first_id, second_id = first.identity(), second.identity()
        assert first_id and second_id
        spec = (await lease())["spec"]
        assert (spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (4, 0)

        async def acquired() -> bool:  # logged once the lease update returned
            return first.log_count(f"lease kube-system/{name} acquired: {first_id}") == 1
        await eventually(acquired, what="the leader to log its acquisition")

        async def waiting() -> bool:
            return second.log_count(f"lease kube-system/{name} is held by {first_id}") == 1
        await eventually(waiting, what="the other candidate to say it waits")
        await bound_by(first, "elected-1")
        assert second.log_count("Successfully assigned") == 0
        async with httpx.AsyncClient(timeout=10) as http:
            gauge = f'leader_election_master_status{{name="{name}"}}'
            for candidate, value in ((first, 1), (second, 0)):
                samples = metric_samples((await http.get(f"{candidate.url}/metrics")).text)
                assert samples[gauge] == value

        # SIGTERM: the leader releases the lease as it goes; the other takes over at once.
        first.process.signal(signal.SIGTERM)
        assert first.process.proc is not None
        assert first.process.proc.wait(timeout=15) == 0
        assert f"lease kube-system/{name} released" in first.process.log()
        # Still well within the 4 s the lease had left: only a release explains this.
        assert (await lease())["spec"]["holderIdentity"] in ("", second_id)
        assert await until(lambda: leader_other_than(first_id), within=15,
                           what="the other candidate to take over") is second
        assert (await lease())["spec"]["leaseTransitions"] == 1
        await bound_by(second, "elected-2")

        # Its supervisor restarts it: a new identity, now the one waiting.
        first.start()
        await first.wait_synced(times=2)
        restarted_id = first.identity()
        assert restarted_id and restarted_id != first_id

        # kill -9: no release; the other waits until the lease expired.
        second.process.kill()
        held = (await lease())["spec"]
        assert held["holderIdentity"] == second_id
        assert await until(lambda: leader_other_than(second_id), within=30,
                           what="the restarted candidate to take the expired lease") is first
        taken = (await lease())["spec"]
        assert taken["holderIdentity"] == restarted_id
        assert taken["leaseTransitions"] == 2
        expired_at = (parse_micro_time(held["renewTime"])
                      + timedelta(seconds=held["leaseDurationSeconds"]))
        assert parse_micro_time(taken["acquireTime"]) > expired_at
        await bound_by(first, "elected-3")

        # Someone else takes the lease: the leader stops at its next renewal, exit status 1.
        current = await lease()
        current["spec"] = {**current["spec"], "holderIdentity": "intruder",
                           "leaseDurationSeconds": 60,
                           "renewTime": format_micro_time(datetime.now(UTC))}
        await api.update("leases", current)
        assert await asyncio.to_thread(first.process.proc.wait, 30) == 1
        log = first.process.log()
        assert f"lease kube-system/{name}: now held by intruder" in log
        assert "leader election lost: exiting" in log
        assert "Traceback" not in log
    finally:
        for candidate in candidates:
            candidate.process.stop()
