"""Pod workers, PLEG, pod cache and status manager against an in-memory runtime and API.

No Docker and no apiserver: `FakeRuntime` keeps containers in a dict and counts the
calls made to it, `FakeApi` keeps pods with a resourceVersion and honours the
resourceVersion precondition of a status patch as the apiserver does (409 Conflict).
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.errors import Conflict, InternalError, NotFound
from kubelet.dns import DnsConfig
from kubelet.docker import DockerClient
from kubelet.pleg import Pleg, PodCache
from kubelet.pod_workers import KubeletConfig, PodWorkers
from kubelet.runtime import (
    ContainerExtras,
    ContainerInfo,
    ContainerState,
    ContainerSummary,
    ImageInfo,
    ImagePullError,
    PodObservation,
    PodRef,
    SandboxInfo,
    build_observation,
    container_spec_hash,
    pod_ref,
)
from kubelet.status import generate_pod_status
from kubelet.status_manager import StatusManager
from tests.support import eventually

NS = "default"
PRESENT_IMAGE = "kubelite/busybox:1.35"


def make_pod(name: str = "web", *, uid: str = "u-1", image: str = PRESENT_IMAGE,
             restart_policy: str = "Always") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": {"nodeName": "n1", "restartPolicy": restart_policy,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": image,
                                     "imagePullPolicy": "IfNotPresent"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}}


class FakeApi:
    """Pods by (namespace, name), each write bumping one global revision."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = 10
        self.status_patches: list[dict[str, Any]] = []  # the bodies, in order
        self.conflicts = 0
        self.attempts = 0
        self.gate: asyncio.Event | None = None  # when set: patches wait for it
        self.failures = 0  # the next patches that fail with a 500

    def put(self, pod: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        stored = copy.deepcopy(pod)
        stored["metadata"]["resourceVersion"] = str(self.revision)
        self.pods[(stored["metadata"]["namespace"], stored["metadata"]["name"])] = stored
        return copy.deepcopy(stored)

    def pod(self, name: str = "web") -> dict[str, Any]:
        return copy.deepcopy(self.pods[(NS, name)])

    async def get(self, resource: str, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> dict:
        try:
            return copy.deepcopy(self.pods[(namespace or NS, name)])
        except KeyError:
            raise NotFound(f'pods "{name}" not found') from None

    async def patch(self, resource: str, name: str, patch: dict, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict:
        assert resource == "pods" and subresource == "status" and patch_type == "merge"
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise InternalError("etcd is having a bad day")
        if self.gate is not None:
            await self.gate.wait()
        current = await self.get(resource, name, namespace=namespace)
        precondition = (patch.get("metadata") or {}).get("resourceVersion")
        self.status_patches.append(copy.deepcopy(patch))
        if precondition and precondition != current["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise Conflict(f'Operation cannot be fulfilled on pods "{name}"')
        status = dict(current.get("status") or {})
        for key, value in patch["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        current["status"] = status
        return self.put(current)

    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None) -> dict:
        current = self.pods.get((namespace or NS, name))
        if current is None:
            raise NotFound(f'pods "{name}" not found')
        uid = (preconditions or {}).get("uid")
        if uid and uid != current["metadata"].get("uid"):
            raise Conflict(f'Operation cannot be fulfilled on pods "{name}": Precondition '
                           f'failed: UID in precondition: {uid}')
        return self.pods.pop((namespace or NS, name))


class FakeRuntime:
    """Containers in memory; `calls` counts every runtime call by name."""

    def __init__(self, *, images: tuple[str, ...] = (PRESENT_IMAGE,)) -> None:
        self.items: dict[str, ContainerInfo | SandboxInfo] = {}
        self.images = set(images)
        self.calls: Counter[str] = Counter()
        self.pull_gate = asyncio.Event()  # pulls wait for it
        self.pull_started = asyncio.Event()
        self.pull_error: str | None = None
        self.sandbox_gate: asyncio.Event | None = None  # when set: sandboxes wait for it
        self.pid_targets: dict[str, str | None] = {}  # container name -> its pid_target
        self._ids = 0

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    def running(self) -> list[str]:
        return [i.id for i in self.items.values()
                if (i.state == "running")]

    def set_state(self, container_id: str, state: ContainerState, **changes: Any) -> None:
        item = self.items[container_id]
        self.items[container_id] = type(item)(**{**item.__dict__, "state": state, **changes})

    async def list_summaries(self) -> list[ContainerSummary]:
        self.calls["list_summaries"] += 1
        return [ContainerSummary(id=i.id, pod=i.pod,
                                 name=getattr(i, "name", "POD"),
                                 is_sandbox=isinstance(i, SandboxInfo), state=i.state)
                for i in self.items.values()]

    async def observe_pod(self, pod_uid: str) -> PodObservation:
        self.calls["observe_pod"] += 1
        return build_observation(i for i in self.items.values() if i.pod.uid == pod_uid)

    async def inspect(self, summary: ContainerSummary) -> ContainerInfo | SandboxInfo | None:
        self.calls["inspect"] += 1
        return self.items.get(summary.id)

    async def inspect_image(self, image: str) -> ImageInfo | None:
        return ImageInfo(id=f"sha256:{image}") if image in self.images else None

    async def pull_image(self, image: str, *, registry_auth: str | None = None) -> ImageInfo:
        self.calls["pull_image"] += 1
        self.pull_started.set()
        await self.pull_gate.wait()
        if self.pull_error:
            raise ImagePullError(self.pull_error)
        self.images.add(image)
        return ImageInfo(id=f"sha256:{image}")

    async def run_sandbox(self, pod: Mapping[str, Any], *, attempt: int, node_ip: str,
                          dns: DnsConfig | None = None) -> str:
        self.calls["run_sandbox"] += 1
        if self.sandbox_gate is not None:
            await self.sandbox_gate.wait()
        sandbox_id = self._next_id("sb")
        self.items[sandbox_id] = SandboxInfo(id=sandbox_id, pod=pod_ref(pod), attempt=attempt,
                                             state="running", ip="10.0.0.7",
                                             created_at=datetime.now(UTC))
        return sandbox_id

    async def create_container(self, pod: Mapping[str, Any], container: Mapping[str, Any], *,
                               sandbox: SandboxInfo, attempt: int,
                               pid_target: str | None = None,
                               extras: ContainerExtras | None = None) -> str:
        self.calls["create_container"] += 1
        self.pid_targets[str(container["name"])] = pid_target
        container_id = self._next_id("c")
        self.items[container_id] = ContainerInfo(
            id=container_id, name=str(container["name"]), pod=pod_ref(pod), attempt=attempt,
            image=str(container["image"]), image_id="sha256:img", state="created",
            created_at=datetime.now(UTC), spec_hash=container_spec_hash(container))
        return container_id

    async def start_container(self, container_id: str) -> None:
        self.calls["start_container"] += 1
        self.set_state(container_id, "running", started_at=datetime.now(UTC))

    async def stop_container(self, container_id: str, *, grace_seconds: int) -> None:
        self.calls["stop_container"] += 1
        if container_id in self.items:
            extra = {} if isinstance(self.items[container_id], SandboxInfo) else {
                "finished_at": datetime.now(UTC), "exit_code": 0}
            self.set_state(container_id, "exited", **extra)

    async def remove_container(self, container_id: str) -> None:
        self.calls["remove_container"] += 1
        self.items.pop(container_id, None)

    async def container_logs(self, container_id: str, *, follow: bool = False,
                             tail_lines: int | None = None, timestamps: bool = False,
                             since_seconds: int | None = None) -> AsyncIterator[bytes]:
        yield b""


def new_workers(runtime: FakeRuntime, api: FakeApi, *,
                resync_seconds: float = 30.0) -> PodWorkers:
    return PodWorkers(runtime=runtime, api=api, recorder=None,  # type: ignore[arg-type]
                      config=KubeletConfig(node_name="n1", node_ip="127.0.0.1",
                                           resync_seconds=resync_seconds),
                      status_retry_seconds=0.05)


def kubelet_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if not t.done()
            and t.get_name().startswith(("pod-worker", "pod-sync", "pod-status"))]


async def running_status(api: FakeApi, name: str = "web") -> dict[str, Any]:
    async def running() -> dict[str, Any]:
        status = api.pod(name).get("status") or {}
        ready = [s.get("ready") for s in status.get("containerStatuses") or []]
        return status if status.get("phase") == "Running" and ready == [True] else {}
    return await eventually(running, timeout=10, interval=0.01, what=f"{name} Running")


# --- the status a pod gets as soon as it is seen -----------------------------------------

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STAMP = "2026-01-02T03:04:05Z"


def test_initial_status_of_a_new_pod_is_container_creating() -> None:
    pod = make_pod(image="nginx:1.15")
    status = generate_pod_status(pod, PodObservation(), {}, node_ip="127.0.0.1", now=NOW)
    assert status == {
        "qosClass": "BestEffort",
        "phase": "Pending",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False",
             "lastTransitionTime": STAMP},
            {"type": "Initialized", "status": "True", "lastTransitionTime": STAMP},
            {"type": "Ready", "status": "False", "lastTransitionTime": STAMP,
             "reason": "ContainersNotReady", "message": "containers with unready status: [app]"},
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": STAMP,
             "reason": "ContainersNotReady", "message": "containers with unready status: [app]"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": STAMP},
        ],
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "startTime": STAMP,
        "containerStatuses": [{
            "name": "app", "image": "nginx:1.15", "imageID": "", "ready": False,
            "started": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}],
    }


async def test_a_new_pod_shows_container_creating_while_its_image_is_pulled() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    pod = api.put(make_pod(image="example.test/slow:1"))
    runtime.sandbox_gate = asyncio.Event()
    workers = new_workers(runtime, api)
    try:
        workers.update(pod)

        async def written() -> bool:
            return bool(api.status_patches)
        await eventually(written, timeout=10, interval=0.01, what="a status write")
        # Written before anything was made: the sandbox is still being created.
        assert runtime.items == {} and runtime.calls["pull_image"] == 0
        first = api.status_patches[0]
        assert first["metadata"] == {"resourceVersion": pod["metadata"]["resourceVersion"]}
        conditions = {c["type"]: c["status"] for c in first["status"]["conditions"]}
        assert conditions == {"PodReadyToStartContainers": "False", "Initialized": "True",
                              "Ready": "False", "ContainersReady": "False",
                              "PodScheduled": "True"}
        assert first["status"]["phase"] == "Pending"
        assert first["status"]["containerStatuses"][0]["state"] == {
            "waiting": {"reason": "ContainerCreating"}}

        runtime.sandbox_gate.set()
        await asyncio.wait_for(runtime.pull_started.wait(), 10)
        await workers.status.wait_idle("u-1")

        # While the pull is in progress: the sandbox is up, the container still waits.
        status = api.pod()["status"]
        assert runtime.calls["pull_image"] == 1 and runtime.calls["create_container"] == 0
        assert status["phase"] == "Pending" and status["podIP"] == "10.0.0.7"
        app = status["containerStatuses"][0]
        assert app["state"] == {"waiting": {"reason": "ContainerCreating"}}
        assert (app["ready"], app["started"], app["restartCount"]) == (False, False, 0)
        ready_to_start = next(c for c in status["conditions"]
                              if c["type"] == "PodReadyToStartContainers")
        assert ready_to_start["status"] == "True"

        runtime.pull_gate.set()
        status = await running_status(api)
        assert "running" in status["containerStatuses"][0]["state"]
    finally:
        await workers.stop()


async def test_deleting_a_pod_interrupts_a_hanging_pull_and_leaves_nothing_behind() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    pod = api.put(make_pod(image="example.test/hangs:1"))
    workers = new_workers(runtime, api)
    try:
        workers.update(pod)
        await asyncio.wait_for(runtime.pull_started.wait(), 10)  # the pull never ends
        deleting = copy.deepcopy(api.pod())
        deleting["metadata"]["deletionTimestamp"] = STAMP
        deleting["metadata"]["deletionGracePeriodSeconds"] = 1
        workers.update(api.put(deleting))

        async def pod_deleted() -> bool:
            return (NS, "web") not in api.pods
        await eventually(pod_deleted, timeout=10, interval=0.01, what="the pod deleted")
        assert runtime.items == {}  # sandbox stopped and removed
        workers.forget(deleting)  # the informer's DELETED

        async def worker_gone() -> bool:
            return not workers.workers
        await eventually(worker_gone, timeout=10, interval=0.01, what="the worker to end")
        assert workers.status.known_uids() == set() and len(workers.cache) == 0
        assert workers.crash_backoff.entries == {} and workers.pull_backoff.entries == {}
        await asyncio.sleep(0)
        assert kubelet_tasks() == []
    finally:
        await workers.stop()


async def test_pods_forgotten_by_the_api_leave_no_tasks_or_state() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    workers = new_workers(runtime, api)
    try:
        pods = [api.put(make_pod(f"p{i}", uid=f"u-{i}")) for i in range(5)]
        for pod in pods:
            workers.update(pod)
        for pod in pods:
            await running_status(api, pod["metadata"]["name"])
        assert len(runtime.running()) == 10
        for pod in pods:  # force-deleted: the informer's DELETED is all the kubelet sees
            del api.pods[(NS, pod["metadata"]["name"])]
            workers.forget(pod)

        async def all_done() -> bool:
            return not workers.workers and not kubelet_tasks()
        await eventually(all_done, timeout=10, interval=0.01, what="every worker to end")
        assert runtime.items == {}
        assert workers.status.known_uids() == set() and len(workers.cache) == 0
    finally:
        await workers.stop()


# --- one relist feeds every worker ------------------------------------------------------

async def test_resyncs_of_a_running_pod_read_the_pleg_cache_not_the_runtime() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    workers = new_workers(runtime, api, resync_seconds=0.02)
    pleg = Pleg(runtime, workers.cache, on_change=workers.poke)
    try:
        workers.update(api.put(make_pod()))
        await running_status(api)
        await pleg.relist()  # a relist after the worker's last change
        await pleg.relist()
        before = Counter(runtime.calls)
        syncs = workers.workers["u-1"].syncs

        async def resynced_often() -> bool:
            return workers.workers["u-1"].syncs >= syncs + 10
        await eventually(resynced_often, timeout=10, interval=0.01, what="ten resyncs")
        assert runtime.calls == before  # not one Docker call for ten syncs
    finally:
        await workers.stop()


async def test_pleg_lists_once_and_inspects_only_what_changed() -> None:
    runtime = FakeRuntime()
    cache = PodCache()
    poked: list[str] = []
    pleg = Pleg(runtime, cache, on_change=poked.append)
    for uid in ("a", "b", "c"):
        pod = make_pod(uid, uid=uid)
        sandbox_id = await runtime.run_sandbox(pod, attempt=0, node_ip="127.0.0.1")
        sandbox = runtime.items[sandbox_id]
        assert isinstance(sandbox, SandboxInfo)
        cid = await runtime.create_container(pod, pod["spec"]["containers"][0], sandbox=sandbox,
                                             attempt=0)
        await runtime.start_container(cid)
    runtime.calls.clear()

    await pleg.relist()
    assert runtime.calls == {"list_summaries": 1, "inspect": 6}
    assert sorted(poked) == ["a", "b", "c"]
    entry = cache.get_newer_than("b", 0.0)
    assert entry is not None and [c.state for c in entry.observation.containers] == ["running"]

    poked.clear()
    runtime.calls.clear()
    await pleg.relist()
    assert runtime.calls == {"list_summaries": 1} and poked == []

    crashed = next(i.id for i in runtime.items.values()
                   if i.pod.uid == "b" and isinstance(i, ContainerInfo))
    runtime.set_state(crashed, "exited", exit_code=1, finished_at=datetime.now(UTC))
    await pleg.relist()
    assert runtime.calls == {"list_summaries": 2, "inspect": 1} and poked == ["b"]
    entry = cache.get_newer_than("b", 0.0)
    assert entry is not None and entry.observation.containers[0].exit_code == 1

    for item in [i for i in runtime.items.values() if i.pod.uid == "c"]:
        await runtime.remove_container(item.id)
    await pleg.relist()
    assert poked == ["b", "c"] and len(cache) == 2
    gone = cache.get_newer_than("c", 0.0)
    assert gone is not None and gone.observation == PodObservation()


def _view(*states: ContainerState) -> PodObservation:
    ref = PodRef("u", "p", NS)
    return PodObservation(containers=[
        ContainerInfo(id=f"c{i}", name="app", pod=ref, attempt=i, image="i", image_id="",
                      state=state) for i, state in enumerate(states)])


def test_pod_cache_only_answers_with_views_taken_after_the_workers_last_change() -> None:
    cache = PodCache()
    assert cache.get_newer_than("u", 0.0) is None  # never relisted: ask the runtime
    cache.set("u", _view("running"), at=5.0)
    assert cache.get_newer_than("u", 5.0) is not None
    assert cache.get_newer_than("u", 6.0) is None  # the worker acted after this view
    cache.set("u", _view("exited"), at=4.0)  # an older view never replaces a newer one
    entry = cache.get_newer_than("u", 5.0)
    assert entry is not None and entry.observation == _view("running")

    cache.relisted(4.5, present=[])  # a relist older than the entry drops nothing
    assert len(cache) == 1
    cache.relisted(7.0, present=["u"])  # seen unchanged: valid as of the relist
    entry = cache.get_newer_than("u", 6.0)
    assert entry is not None and entry.at == 7.0 and entry.observation == _view("running")
    cache.relisted(8.0, present=[])  # no containers any more
    entry = cache.get_newer_than("u", 7.5)
    assert len(cache) == 0 and entry is not None and entry.observation == PodObservation()


async def test_a_restarted_kubelet_adopts_running_containers_whatever_the_relist_timing() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    first = new_workers(runtime, api)
    first.update(api.put(make_pod()))
    before = (await running_status(api))["containerStatuses"][0]["containerID"]
    await first.stop()  # containers keep running
    assert runtime.calls["create_container"] == 1

    for relist_first in (True, False):
        await restart_and_sync(runtime, api, relist_first=relist_first)
        assert runtime.calls["create_container"] == 1 and runtime.calls["run_sandbox"] == 1
        status = api.pod()["status"]["containerStatuses"][0]
        assert status["containerID"] == before and status["restartCount"] == 0


async def restart_and_sync(runtime: FakeRuntime, api: FakeApi, *, relist_first: bool) -> None:
    """A new kubelet (workers + PLEG) that syncs the pod a few times, then stops."""
    workers = new_workers(runtime, api, resync_seconds=0.02)
    pleg = Pleg(runtime, workers.cache, on_change=workers.poke)
    try:
        if relist_first:
            await pleg.relist()
        workers.update(api.pod())
        if not relist_first:
            await pleg.relist()

        async def synced_a_few_times() -> bool:
            return workers.workers["u-1"].syncs >= 5
        await eventually(synced_a_few_times, timeout=10, interval=0.01, what="syncs")
    finally:
        await workers.stop()


# --- the status manager ---------------------------------------------------------------------

def _fixed(status: dict[str, Any]) -> Any:
    return lambda _pod: copy.deepcopy(status)


async def test_status_manager_writes_only_changes_and_coalesces_bursts() -> None:
    api = FakeApi()
    pod = api.put(make_pod())
    manager = StatusManager(api)
    first = {"phase": "Pending", "qosClass": "BestEffort", "hostIP": "127.0.0.1"}
    manager.set_status(pod, _fixed(first))
    await manager.wait_idle("u-1")
    assert len(api.status_patches) == 1 and api.pod()["status"] == first
    manager.set_status(api.pod(), _fixed(first))  # nothing new: nothing written
    await manager.wait_idle("u-1")
    assert len(api.status_patches) == 1

    api.gate = asyncio.Event()  # the next write hangs until the gate opens
    manager.set_status(pod, _fixed({**first, "phase": "Running", "podIP": "0"}))
    await asyncio.sleep(0)
    for i in range(1, 6):  # arrive while that write is in flight
        manager.set_status(pod, _fixed({**first, "phase": "Running", "podIP": str(i)}))
    api.gate.set()
    await manager.wait_idle("u-1")
    assert api.pod()["status"]["podIP"] == "5"
    assert len(api.status_patches) == 3  # the first, the one in flight, then the newest
    await manager.stop()


async def test_a_status_computed_from_a_stale_pod_never_overwrites_a_newer_one() -> None:
    api = FakeApi()
    stale = api.put(make_pod(restart_policy="Never"))
    newer = copy.deepcopy(stale)
    # Meanwhile the pod finished, and that was written (say, by the previous kubelet).
    newer["status"] = generate_pod_status(
        newer, _view("exited"), {}, node_ip="127.0.0.1", now=NOW)
    assert newer["status"]["phase"] == "Succeeded"
    api.put(newer)

    manager = StatusManager(api)
    # A view in which the container is not there (any more): from the stale copy it
    # would say Pending; from the pod as it is, the pod stays Succeeded.
    manager.set_status(stale, lambda pod: generate_pod_status(
        pod, PodObservation(), {}, node_ip="127.0.0.1", now=NOW))
    await manager.wait_idle("u-1")
    assert api.conflicts == 1
    assert api.status_patches[0]["metadata"]["resourceVersion"] == stale["metadata"][
        "resourceVersion"]
    assert api.pod()["status"]["phase"] == "Succeeded"
    assert manager.status("u-1") is not None
    assert manager.status("u-1")["phase"] == "Succeeded"  # type: ignore[index]
    await manager.stop()


async def test_a_failed_status_write_is_retried_with_the_newest_status() -> None:
    api = FakeApi()
    pod = api.put(make_pod())
    api.failures = 2
    manager = StatusManager(api, retry_seconds=0.01)
    manager.set_status(pod, _fixed({"phase": "Pending"}))
    manager.set_status(pod, _fixed({"phase": "Running"}))
    await manager.wait_idle("u-1")
    assert api.attempts == 3 and api.pod()["status"] == {"phase": "Running"}
    await manager.stop()


async def test_status_manager_stops_writing_for_a_pod_that_is_gone() -> None:
    api = FakeApi()
    pod = api.put(make_pod())
    del api.pods[(NS, "web")]
    manager = StatusManager(api, retry_seconds=0.01)
    manager.set_status(pod, _fixed({"phase": "Running"}))
    await manager.wait_idle("u-1")
    assert api.attempts == 1  # NotFound: not retried
    manager.set_status(pod, _fixed({"phase": "Pending"}))
    await manager.wait_idle("u-1")
    assert api.attempts == 1 and not manager.pending("u-1")


async def test_status_manager_rewrites_a_status_changed_behind_its_back() -> None:
    api = FakeApi()
    pod = api.put(make_pod())
    manager = StatusManager(api)
    ours = {"phase": "Running", "qosClass": "BestEffort"}
    manager.set_status(pod, _fixed(ours))
    await manager.wait_idle("u-1")
    clobbered = api.pod()
    clobbered["status"] = {"phase": "Pending"}
    manager.pod_updated(api.put(clobbered))
    await manager.wait_idle("u-1")
    assert api.pod()["status"] == ours
    writes = len(api.status_patches)
    manager.pod_updated(api.pod())  # our own write coming back: nothing to do
    await manager.wait_idle("u-1")
    assert len(api.status_patches) == writes
    await manager.stop()


async def test_a_failed_pull_after_a_slow_start_shows_err_image_pull() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    runtime.pull_error = "connection refused"
    workers = new_workers(runtime, api)
    try:
        workers.update(api.put(make_pod(image="example.test/broken:1")))
        await asyncio.wait_for(runtime.pull_started.wait(), 10)
        await workers.status.wait_idle("u-1")
        reason = api.pod()["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        assert reason == "ContainerCreating"
        runtime.pull_gate.set()

        async def err_image_pull() -> bool:
            state = api.pod()["status"]["containerStatuses"][0]["state"]
            return state.get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")
        await eventually(err_image_pull, timeout=10, interval=0.01, what="ErrImagePull")
    finally:
        await workers.stop()


# --- the Docker client under many long calls ---------------------------------------------

async def test_long_docker_calls_do_not_starve_the_others(tmp_path: Path) -> None:
    """Stops wait out a grace period, pulls and followed logs can last for ever: with 150
    of them in flight, a ping (what the node heartbeat and the PLEG need) still goes."""
    held: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET /_ping "):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
                    await writer.drain()
                    continue
                held.append(writer)  # a long call: no answer until the test ends
                await reader.read()
                return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    socket_path = str(tmp_path / "docker.sock")
    server = await asyncio.start_unix_server(serve, path=socket_path)
    client = DockerClient(socket_path, timeout=5)
    stops = [asyncio.create_task(client.stop_container(f"c{i}", timeout_seconds=600))
             for i in range(150)]
    try:
        async def all_held() -> bool:
            return len(held) == 150
        await eventually(all_held, timeout=30, interval=0.05, what="150 calls in flight")
        assert await client.ping()
    finally:
        for task in stops:
            task.cancel()
        await asyncio.gather(*stops, return_exceptions=True)
        await client.aclose()
        server.close()
