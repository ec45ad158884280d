"""Chaos: a crash or restart of any component loses no pod and leaves no duplicate or
orphaned container.

A cluster of its own (etcd, apiserver, one scheduler, two kubelets on the real Docker
daemon), all real processes. While a background task keeps creating pods (a few with
`nodeName`, most through the scheduler), every component in turn is killed with SIGKILL
and started again on the same ports and data. Then every pod must exist, be bound once
and run, with exactly one app container and one sandbox in Docker, nothing else
labelled with our nodes; and after deleting the pods, no container of our nodes is left.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelet.runtime import (
    LABEL_CONTAINER_TYPE,
    LABEL_POD_UID,
    TYPE_CONTAINER,
)
from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    docker_problems,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.support import ApiServer, Etcd, Process, SchedulerProcess, eventually, unique

pytestmark = pytest.mark.docker

NS = "default"
PODS = 16
# A long runner that exits at once on SIGTERM (a bare `sleep` as PID 1 ignores it).
LONG_RUNNER = "trap 'exit 0' TERM; sleep 3600 & wait"
# The apiserver or etcd may be down for a while: every call is retried until this.
CALL_TIMEOUT = 45.0


@dataclass
class Cluster:
    workdir: Path
    etcd: Etcd
    apiserver: ApiServer
    scheduler: Process
    kubelets: list[KubeletProcess]
    label: str

    @property
    def nodes(self) -> list[str]:
        return [k.node_name for k in self.kubelets]

    def logs(self) -> str:
        return f"(logs in {self.workdir})"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ensure_docker()
    workdir = Path(tmp_path_factory.mktemp("chaos"))
    etcd = Etcd(workdir).start()
    apiserver = ApiServer(etcd, workdir).start()
    scheduler = SchedulerProcess(apiserver, workdir, port=0, leader_elect=False).start().process
    kubelets = [KubeletProcess(apiserver, workdir, node_name=unique("chaos"))
                for _ in range(2)]
    try:
        for kubelet in kubelets:
            kubelet.start()
        yield Cluster(workdir, etcd, apiserver, scheduler, kubelets, unique("chaos-run"))
    finally:
        for kubelet in kubelets:
            kubelet.stop()
        scheduler.stop()
        apiserver.stop()
        etcd.stop()
        for kubelet in kubelets:
            remove_node_containers(kubelet.node_name)


async def call(http: httpx.AsyncClient, method: str, url: str, *, ok: tuple[int, ...],
               **kwargs: Any) -> httpx.Response:
    """One API call, retried through connection errors and 5xx while a component is down."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CALL_TIMEOUT
    last: str = ""
    while loop.time() < deadline:
        try:
            response = await http.request(method, url, **kwargs)
            if response.status_code in ok:
                return response
            last = f"HTTP {response.status_code}: {response.text[:300]}"
            if response.status_code < 500 and response.status_code != 429:
                raise AssertionError(f"{method} {url}: {last}")
        except httpx.HTTPError as e:
            last = f"{type(e).__name__}: {e}"
        await asyncio.sleep(0.3)
    raise AssertionError(f"{method} {url} kept failing for {CALL_TIMEOUT}s: {last}")


def manifest(name: str, label: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                        "command": ["sh", "-c", LONG_RUNNER]}]}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"chaos": label}},
            "spec": spec}


@dataclass
class Creator:
    """Creates the pods one by one, through whatever outage; remembers each one's uid."""

    cluster: Cluster
    http: httpx.AsyncClient
    uids: dict[str, str] = field(default_factory=dict)
    preset: dict[str, str] = field(default_factory=dict)  # pod -> the nodeName it names
    created: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        for i in range(PODS):
            name = f"{self.cluster.label}-{i}"
            node = self.cluster.nodes[(i // 4) % 2] if i % 4 == 0 else None
            if node is not None:
                self.preset[name] = node
            response = await call(self.http, "POST", f"/api/v1/namespaces/{NS}/pods",
                                  json=manifest(name, self.cluster.label, node),
                                  ok=(201, 409))
            if response.status_code == 409:  # an earlier try got through, its answer did not
                response = await call(self.http, "GET", f"/api/v1/namespaces/{NS}/pods/{name}",
                                      ok=(200,))
            self.uids[name] = response.json()["metadata"]["uid"]
            self.created.set()
            await asyncio.sleep(0.4)

    async def until(self, count: int) -> None:
        while len(self.uids) < count:
            self.created.clear()
            await self.created.wait()


@dataclass
class Observer:
    """Lists the pods now and then: a pod's uid and nodeName, once seen, must never change."""

    cluster: Cluster
    http: httpx.AsyncClient
    nodes: dict[str, str] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            try:
                response = await self.http.get(
                    f"/api/v1/namespaces/{NS}/pods",
                    params={"labelSelector": f"chaos={self.cluster.label}"})
                if response.status_code == 200:
                    self.observe(response.json()["items"])
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.3)

    def observe(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            if self.uids.setdefault(name, uid) != uid:
                self.violations.append(f"{name}: uid {self.uids[name]} became {uid}")
            node = pod["spec"].get("nodeName")
            if node and self.nodes.setdefault(name, node) != node:
                self.violations.append(f"{name}: nodeName {self.nodes[name]} became {node}")


async def crash_and_restart(what: str, kill: Callable[[], None], start: Callable[[], Any],
                            log: list[str], down: float = 1.0) -> None:
    await asyncio.to_thread(kill)
    log.append(f"killed {what}")
    await asyncio.sleep(down)
    await asyncio.to_thread(start)
    log.append(f"restarted {what}")


def half_started(node: str) -> str:
    """A pod of `node` caught between its sandbox and its app container running, if any."""
    containers = node_containers(node)
    apps_running = {c["Labels"].get(LABEL_POD_UID) for c in containers
                    if c["Labels"].get(LABEL_CONTAINER_TYPE) == TYPE_CONTAINER
                    and c["State"] == "running"}
    for c in containers:
        if c["Labels"].get(LABEL_POD_UID) not in apps_running:
            return f"{c['Labels'].get(LABEL_CONTAINER_TYPE)} {c['State']} {c['Names']}"
    return ""


def kill_mid_start(kubelet: KubeletProcess, log: list[str]) -> None:
    """SIGKILL the kubelet while it is starting a pod, if it gets to one within a while."""
    deadline = time.monotonic() + 10
    caught = ""
    while not caught and time.monotonic() < deadline:
        caught = half_started(kubelet.node_name)
        if not caught:
            time.sleep(0.02)
    kubelet.kill()
    log.append(f"{kubelet.node_name} caught mid-start: {caught or 'no'}")


async def chaos(cluster: Cluster, creator: Creator, log: list[str]) -> None:
    c = cluster
    k0, k1 = c.kubelets
    steps: list[tuple[int, str, Callable[[], Awaitable[None]]]] = [
        (2, "scheduler", lambda: crash_and_restart(
            "scheduler", c.scheduler.kill, c.scheduler.start, log, down=1.5)),
        (5, "kubelet-0", lambda: crash_and_restart(
            k0.node_name, lambda: kill_mid_start(k0, log), k0.start, log)),
        (8, "apiserver", lambda: crash_and_restart(
            "apiserver", c.apiserver.process.kill, c.apiserver.start, log)),
        (11, "etcd", lambda: crash_and_restart(
            "etcd", c.etcd.process.kill, c.etcd.start, log)),
    ]
    for after, _, step in steps:
        await creator.until(after)
        await step()
    # The last: the other kubelet and the scheduler at once.
    await creator.until(13)
    await asyncio.gather(
        crash_and_restart(k1.node_name, lambda: kill_mid_start(k1, log), k1.start, log),
        crash_and_restart("scheduler", c.scheduler.kill, c.scheduler.start, log, down=0.5))


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return (status.get("phase") == "Running" and len(statuses) == 1
            and all(s.get("ready") and "running" in (s.get("state") or {}) for s in statuses)
            and conditions.get("Ready") == "True")


async def test_crashes_lose_no_pod_and_leave_no_duplicate_or_orphan(cluster: Cluster) -> None:
    async with cluster.apiserver.client(timeout=10) as http:
        async def nodes_ready() -> bool:
            response = await http.get("/api/v1/nodes")
            assert response.status_code == 200, response.text
            ready_nodes = {n["metadata"]["name"] for n in response.json()["items"]
                           if any(c["type"] == "Ready" and c["status"] == "True"
                                  for c in n["status"].get("conditions") or [])}
            return ready_nodes >= set(cluster.nodes)
        await eventually(nodes_ready, timeout=30, what="both nodes Ready")

        creator = Creator(cluster, http)
        observer = Observer(cluster, http)
        chaos_log: list[str] = []
        watching = asyncio.create_task(observer.run())
        creating = asyncio.create_task(creator.run())
        crashing = asyncio.create_task(chaos(cluster, creator, chaos_log))
        try:
            # Either failing fails at once (gather), not after the other's timeout.
            await asyncio.wait_for(asyncio.gather(creating, crashing), timeout=90)
        finally:
            for task in (creating, crashing, watching):
                task.cancel()
        print("chaos:", *chaos_log, sep="\n  ")
        assert len(creator.uids) == PODS

        # Every pod exists (the same one: same uid), bound once, and runs.
        async def all_running() -> dict[str, dict[str, Any]]:
            response = await http.get(f"/api/v1/namespaces/{NS}/pods",
                                      params={"labelSelector": f"chaos={cluster.label}"})
            assert response.status_code == 200, response.text
            pods = {p["metadata"]["name"]: p for p in response.json()["items"]}
            observer.observe(list(pods.values()))
            assert {n: p["metadata"]["uid"] for n, p in pods.items()} == creator.uids
            not_ready = {n: (p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"))
                         for n, p in pods.items() if not ready(p)}
            assert not not_ready, f"not running and ready: {not_ready}"
            return pods
        pods = await eventually(all_running, timeout=60, interval=0.5,
                                what=f"every pod Running {cluster.logs()}; {chaos_log}")
        assert set(chaos_log) >= {f"restarted {n}" for n in ("scheduler", "apiserver", "etcd",
                                                              *cluster.nodes)}
        assert not observer.violations, observer.violations
        for name, node in creator.preset.items():
            assert pods[name]["spec"]["nodeName"] == node
        assert {p["spec"]["nodeName"] for p in pods.values()} <= set(cluster.nodes)

        # In Docker: one running sandbox and one running app container per pod, nothing else.
        async def docker_clean() -> bool:
            problems = await asyncio.to_thread(docker_problems, cluster.nodes, pods)
            assert not problems, problems
            return True
        await eventually(docker_clean, timeout=30, interval=1,
                         what=f"one sandbox and one container per pod {cluster.logs()}")

        # At most one Scheduled event per pod (none for the ones created with nodeName).
        response = await call(http, "GET", f"/api/v1/namespaces/{NS}/events", ok=(200,))
        scheduled: Counter[str] = Counter()
        uids = set(creator.uids.values())
        for event in response.json()["items"]:
            involved = event.get("involvedObject") or {}
            if event.get("reason") == "Scheduled" and involved.get("uid") in uids:
                scheduled[involved["name"]] += int(event.get("count") or 1)
        assert all(n == 1 for n in scheduled.values()), scheduled
        assert not set(scheduled) & set(creator.preset), scheduled

        # Deleting the pods removes every container of our nodes.
        for name in creator.uids:
            await call(http, "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", ok=(200, 404))

        async def all_gone() -> bool:
            response = await http.get(f"/api/v1/namespaces/{NS}/pods",
                                      params={"labelSelector": f"chaos={cluster.label}"})
            assert response.status_code == 200, response.text
            left = [p["metadata"]["name"] for p in response.json()["items"]]
            assert not left, f"pods left: {left}"
            containers = [f"{c['Names']} {c['State']}" for node in cluster.nodes
                          for c in await asyncio.to_thread(node_containers, node)]
            assert not containers, f"containers left: {containers}"
            return True
        await eventually(all_gone, timeout=45, interval=0.5,
                         what=f"pods and containers gone {cluster.logs()}")
