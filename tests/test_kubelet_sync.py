"""One sync reads the pod's containers from Docker once (kuberuntime's SyncPod reads the
pod status once too): what it changes is inspected one container at a time, never by a
second read of the whole pod. The old single-class worker read it up to three times
(before acting, after the sandbox, after the containers)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from kubelet.docker import DockerClient, DockerRuntime
from kubelet.runtime import ContainerInfo, PodObservation, PodRef, SandboxInfo
from kubelet.sync import with_changes
from tests.docker_support import (
    BUSYBOX_IMAGE,
    DOCKER_SOCKET,
    PAUSE_IMAGE,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.support import unique
from tests.test_kubelet_workers import FakeApi, FakeRuntime, make_pod, new_workers, running_status

REF = PodRef(uid="u-1", name="web", namespace="default")
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def app(id_: str, attempt: int, state: str = "running") -> ContainerInfo:
    return ContainerInfo(id=id_, name="app", pod=REF, attempt=attempt, image="i",
                         image_id="sha256:i", state=state, created_at=T0)  # type: ignore[arg-type]


def sandbox(id_: str, attempt: int, state: str = "running") -> SandboxInfo:
    return SandboxInfo(id=id_, pod=REF, attempt=attempt, state=state,  # type: ignore[arg-type]
                       created_at=T0)


@pytest.mark.parametrize(("name", "before", "found", "gone", "sandboxes", "containers"), [
    ("nothing changed", PodObservation([sandbox("s0", 0)], [app("c0", 0)]), [], [],
     ["s0"], ["c0"]),
    ("a new sandbox comes first", PodObservation([sandbox("s0", 0, "exited")], []),
     [sandbox("s1", 1)], [], ["s1", "s0"], []),
    ("a container inspected again replaces its old view",
     PodObservation([sandbox("s0", 0)], [app("c0", 0)]), [app("c0", 0, "exited")], [],
     ["s0"], ["c0:exited"]),
    ("a new attempt is the latest", PodObservation([sandbox("s0", 0)], [app("c0", 0, "exited")]),
     [app("c1", 1)], [], ["s0"], ["c1", "c0:exited"]),
    ("removed containers are gone", PodObservation([sandbox("s0", 0)],
                                                   [app("c1", 1), app("c0", 0, "exited")]),
     [], ["c0"], ["s0"], ["c1"]),
])
def test_with_changes(name: str, before: PodObservation, found: list[ContainerInfo | SandboxInfo],
                      gone: list[str], sandboxes: list[str], containers: list[str]) -> None:
    snapshot = (list(before.sandboxes), list(before.containers))
    after = with_changes(before, found, gone=gone)

    def ids(items: list[ContainerInfo] | list[SandboxInfo]) -> list[str]:
        return [i.id if i.state == "running" else f"{i.id}:{i.state}" for i in items]
    assert [s.id for s in after.sandboxes] == sandboxes, name
    assert ids(after.containers) == containers, name
    assert (before.sandboxes, before.containers) == snapshot, "the input is left as it was"


async def test_a_new_pod_is_running_after_one_sync_that_read_it_once() -> None:
    runtime, api = FakeRuntime(), FakeApi()
    workers = new_workers(runtime, api)  # no PLEG: only this sync can make it Running
    try:
        workers.update(api.put(make_pod()))
        await running_status(api)
        assert workers.workers["u-1"].syncs == 1
        # The old worker: one read before acting, one after the sandbox, one after the app.
        assert runtime.calls["observe_pod"] == 1
        # What it made is inspected once each: the sandbox, then the app container.
        assert runtime.calls["inspect"] == 2
    finally:
        await workers.stop()


# --- the same on the real Docker Engine API ----------------------------------------------

class CountingTransport(httpx.AsyncBaseTransport):
    """Docker's transport, counting requests by method and path shape."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(uds=DOCKER_SOCKET)
        self.calls: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = re.sub(r"^/containers/[0-9a-f]{64}/", "/containers/ID/", request.url.path)
        self.calls[f"{request.method} {path}"] += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def docker_node() -> Iterator[str]:
    ensure_docker()
    node = unique("sync-node")
    yield node
    remove_node_containers(node)


async def test_one_sync_reads_docker_once(docker_node: str) -> None:
    transport = CountingTransport()
    docker = DockerClient(DOCKER_SOCKET, transport=transport)
    runtime = DockerRuntime(docker, node_name=docker_node, sandbox_image=PAUSE_IMAGE)
    api = FakeApi()
    workers = new_workers(runtime, api)  # type: ignore[arg-type]
    pod = make_pod(uid=unique("uid"), image=BUSYBOX_IMAGE)
    pod["spec"]["containers"][0]["command"] = ["sleep", "3600"]
    try:
        workers.update(api.put(pod))
        await running_status(api)
        assert workers.workers[pod["metadata"]["uid"]].syncs == 1
        assert len(node_containers(docker_node)) == 2  # the sandbox and the app
        calls = transport.calls
        # One list of the pod's containers; each container made is inspected once (the
        # old code listed 3 times and inspected the sandbox twice, the app once).
        assert calls["GET /containers/json"] == 1, calls
        assert calls["GET /containers/ID/json"] == 2, calls
        assert calls["POST /containers/create"] == 2 and calls["POST /containers/ID/start"] == 2
    finally:
        await workers.stop()
        async with asyncio.timeout(30):
            await docker.aclose()
