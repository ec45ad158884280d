"""Informer: pure decisions, a scripted source that drops and expires, a real apiserver."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from common import ApiClient, Informer, object_key
from common.informer import (
    Backoff,
    Change,
    change_for_event,
    changes_for_relist,
    watch_was_healthy,
    with_type_meta,
)
from tests.support import ApiServer, Etcd, eventually, unique


def pod(name: str, rv: str, *, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, **extra}


# -- pure decisions ---------------------------------------------------------------------


def test_object_key() -> None:
    assert object_key(pod("web", "1", namespace="prod")) == "prod/web"
    assert object_key({"kind": "Node", "metadata": {"name": "node1"}}) == "node1"


def test_change_for_event() -> None:
    old, new = pod("a", "1"), pod("a", "2")
    assert change_for_event("ADDED", new, None) == Change("add", "default/a", new=new)
    assert change_for_event("MODIFIED", new, None) == Change("add", "default/a", new=new)
    assert change_for_event("MODIFIED", new, old) == Change("update", "default/a", new=new,
                                                            old=old)
    assert change_for_event("ADDED", new, old) == Change("update", "default/a", new=new, old=old)
    assert change_for_event("DELETED", new, old) == Change("delete", "default/a", old=new)
    assert change_for_event("DELETED", new, None) is None
    assert change_for_event("BOOKMARK", {"metadata": {"resourceVersion": "9"}}, None) is None


def test_changes_for_relist() -> None:
    store = {"default/same": pod("same", "1"), "default/moved": pod("moved", "2"),
             "default/gone": pod("gone", "3")}
    listed = [pod("moved", "7"), pod("new", "8"), pod("same", "1")]
    assert changes_for_relist(store, listed) == [
        Change("update", "default/moved", new=listed[0], old=store["default/moved"]),
        Change("add", "default/new", new=listed[1]),
        Change("delete", "default/gone", old=store["default/gone"]),
    ]
    assert changes_for_relist({}, []) == []


def test_list_items_get_the_kind_of_their_list() -> None:
    item = {"metadata": {"name": "a"}}
    assert with_type_meta(item, {"kind": "PodList", "apiVersion": "v1"}) == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}
    full = pod("a", "1")
    assert with_type_meta(full, {"kind": "PodList", "apiVersion": "v1"}) is full


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial=0.2, cap=1.0)
    assert [backoff.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next() == 0.2


def test_watch_health() -> None:
    assert watch_was_healthy(events=1, seconds=0.01)
    assert watch_was_healthy(events=0, seconds=60)
    assert not watch_was_healthy(events=0, seconds=0.01)


# -- a scripted source ------------------------------------------------------------------

Answer = Callable[[httpx.Request], httpx.Response]


def pod_list(rv: str, *items: dict[str, Any]) -> Answer:
    # kube-apiserver leaves kind/apiVersion out of list items; the informer fills them in.
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
            for item in items]
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
            "items": bare}
    return lambda request: httpx.Response(200, json=body)


def event_line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"


def watch_stream(*lines: bytes, then: BaseException | None = None) -> Answer:
    async def body() -> AsyncIterator[bytes]:
        for chunk in lines:
            yield chunk
            await asyncio.sleep(0)
        if then is not None:
            raise then

    return lambda request: httpx.Response(200, content=body())


def failure(code: int, reason: str) -> Answer:
    return lambda request: httpx.Response(code, json={
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
        "code": code, "message": reason})


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


class ScriptedApiServer:
    """Answers requests from a script, in order; once it runs out, watches hang."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[str] = []
        self.exhausted = asyncio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params.get("watch") == "true":
            self.requests.append(f"watch {params.get('resourceVersion', '')}")
        else:
            self.requests.append("list")
        if self.answers:
            return self.answers.pop(0)(request)
        self.exhausted.set()
        return httpx.Response(200, content=self.hang())

    @staticmethod
    async def hang() -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b""

    def client(self) -> ApiClient:
        return ApiClient("http://127.0.0.1:6443", transport=httpx.MockTransport(self.handle))


class Calls:
    """Handlers that log (action, name, resourceVersion) and check the store first."""

    def __init__(self) -> None:
        self.log: list[tuple[str, ...]] = []
        self.informer: Informer | None = None

    @staticmethod
    def tag(obj: dict) -> str:
        return f"{obj['metadata']['name']}@{obj['metadata']['resourceVersion']}"

    def on_add(self, obj: dict) -> None:
        assert self.informer is not None
        assert self.informer.get(object_key(obj)) is obj, "the store changes before handlers"
        assert obj["kind"] == "Pod"
        self.log.append(("add", self.tag(obj)))
        if obj["metadata"]["name"] == "boom":
            raise RuntimeError("a handler bug must not stop the informer")

    async def on_update(self, old: dict, new: dict) -> None:
        await asyncio.sleep(0)
        self.log.append(("update", self.tag(old), self.tag(new)))

    def on_delete(self, obj: dict) -> None:
        assert self.informer is not None
        assert self.informer.get(object_key(obj)) is None
        self.log.append(("delete", self.tag(obj)))

    def informer_on(self, client: ApiClient) -> Informer:
        self.informer = Informer(client, "pods", on_add=self.on_add, on_update=self.on_update,
                                 on_delete=self.on_delete, name="test pods")
        return self.informer


async def run_until_exhausted(server: ScriptedApiServer, calls: Calls) -> Informer:
    async with server.client() as client:
        informer = calls.informer_on(client)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(server.exhausted.wait(), timeout=30)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    return informer


async def test_rewatches_from_the_last_version_and_relists_on_410() -> None:
    expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
               "code": 410, "message": "too old resource version: 18 (25)"}
    server = ScriptedApiServer(
        pod_list("10", pod("a", "5"), pod("b", "6")),
        watch_stream(event_line("ADDED", pod("c", "11")),
                     event_line("MODIFIED", pod("a", "12")),
                     event_line("ADDED", pod("boom", "13")),
                     event_line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                             "metadata": {"resourceVersion": "15"}}),
                     then=httpx.ReadError("connection reset by peer")),
        watch_stream(event_line("DELETED", pod("b", "16")),
                     event_line("MODIFIED", pod("d", "17")),   # unknown key: an add
                     event_line("DELETED", pod("zz", "18"))),  # unknown key: ignored
        watch_stream(event_line("ERROR", expired)),
        pod_list("30", pod("a", "12"), pod("boom", "13"), pod("c", "20"), pod("e", "25")),
    )
    calls = Calls()
    informer = await run_until_exhausted(server, calls)

    assert server.requests == ["list", "watch 10", "watch 15", "watch 18", "list", "watch 30"]
    assert calls.log == [
        ("add", "a@5"), ("add", "b@6"),
        ("add", "c@11"), ("update", "a@5", "a@12"), ("add", "boom@13"),
        ("delete", "b@16"), ("add", "d@17"),
        ("update", "c@11", "c@20"), ("add", "e@25"), ("delete", "d@17"),
    ]
    assert sorted(Calls.tag(p) for p in informer.list()) == ["a@12", "boom@13", "c@20", "e@25"]
    assert informer.get("default/b") is None
    assert informer.last_sync_resource_version == "30"
    assert informer.has_synced


async def test_waits_out_failures_before_the_first_list() -> None:
    server = ScriptedApiServer(
        refuse,
        failure(503, "ServiceUnavailable"),
        pod_list("3", pod("a", "2")),
        failure(500, "InternalError"),  # the watch is refused: watch again, no relist
    )
    calls = Calls()
    async with server.client() as client:
        informer = calls.informer_on(client)
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.wait_synced(), timeout=30)
        assert informer.has_synced
        assert calls.log == [("add", "a@2")]
        await asyncio.wait_for(server.exhausted.wait(), timeout=30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert server.requests == ["list", "list", "list", "watch 3", "watch 3"]


async def test_not_synced_before_the_first_list() -> None:
    server = ScriptedApiServer(refuse, refuse)
    async with server.client() as client:
        informer = Informer(client, "pods")
        task = asyncio.create_task(informer.run())
        await asyncio.sleep(0.1)
        assert not informer.has_synced
        assert informer.list() == []
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# -- against a real apiserver that restarts, over an etcd that compacts ------------------


class RecordingTransport(httpx.AsyncBaseTransport):
    """A real HTTP transport that remembers what was asked ("list" / "watch <rv>")."""

    def __init__(self, verify: ssl.SSLContext | bool = True) -> None:
        self.inner = httpx.AsyncHTTPTransport(verify=verify)
        self.requests: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        watching = params.get("watch") == "true"
        self.requests.append(f"watch {params.get('resourceVersion', '')}" if watching
                             else "list")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def compact_etcd(etcd: Etcd) -> int:
    """Compact etcd's history up to its current revision (through its JSON gateway)."""
    async with httpx.AsyncClient(base_url=etcd.endpoint, timeout=10) as http:
        answer = await http.post("/v3/kv/range", json={"key": base64.b64encode(b"/").decode()})
        answer.raise_for_status()
        revision = int(answer.json()["header"]["revision"])
        compacted = await http.post("/v3/kv/compaction",
                                    json={"revision": revision, "physical": True})
        compacted.raise_for_status()
    return revision


def new_pod(name: str, label: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"suite": label}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}


async def test_survives_apiserver_restarts_and_compaction(tmp_path: Path) -> None:
    etcd = await asyncio.to_thread(Etcd(tmp_path / "etcd").start)
    watched = ApiServer(etcd, tmp_path, name="watched-apiserver")
    writer = ApiServer(etcd, tmp_path, name="writer-apiserver")
    try:
        await asyncio.gather(asyncio.to_thread(watched.start), asyncio.to_thread(writer.start))
        await informer_through_restarts(etcd, watched, writer)
    finally:
        watched.stop()
        writer.stop()
        etcd.stop()


async def informer_through_restarts(etcd: Etcd, watched: ApiServer, writer: ApiServer) -> None:
    label = unique("suite")
    selector = f"suite={label}"
    calls: list[tuple[str, str]] = []
    transport = RecordingTransport(watched.ssl_context())
    async with ApiClient(writer.connection(), timeout=10) as write, \
            ApiClient(watched.connection(), timeout=10, transport=transport) as read:
        informer = Informer(
            read, "pods", namespace="default", label_selector=selector,
            on_add=lambda obj: calls.append(("add", obj["metadata"]["name"])),
            on_update=lambda old, new: calls.append(("update", new["metadata"]["name"])),
            on_delete=lambda obj: calls.append(("delete", obj["metadata"]["name"])))
        task = asyncio.create_task(informer.run())
        try:
            async def converged() -> bool:
                truth = await write.list("pods", namespace="default", label_selector=selector)
                want = {(p["metadata"]["name"], p["metadata"]["resourceVersion"])
                        for p in truth["items"]}
                have = {(p["metadata"]["name"], p["metadata"]["resourceVersion"])
                        for p in informer.list()}
                assert have == want, f"informer has {sorted(have)}, apiserver {sorted(want)}"
                return True

            await asyncio.wait_for(informer.wait_synced(), timeout=30)
            await write.create("pods", new_pod("p1", label))
            await write.create("pods", new_pod("p2", label))
            await eventually(converged, what="informer sees p1 and p2")
            assert calls == [("add", "p1"), ("add", "p2")]

            # A crash: the stream drops; what happens meanwhile arrives by watching again.
            watched.process.kill()
            calls.clear()
            await write.patch("pods", "p1", {"metadata": {"annotations": {"step": "1"}}},
                              namespace="default")
            await write.delete("pods", "p2", namespace="default", grace_period_seconds=0)
            await write.create("pods", new_pod("p3", label))
            await asyncio.to_thread(watched.start)
            await eventually(converged, what="informer catches up after a restart")
            assert calls == [("update", "p1"), ("delete", "p2"), ("add", "p3")]
            assert transport.requests.count("list") == 1

            # Down again, and etcd forgets the history: the watch gets 410, so list again.
            watched.process.kill()
            calls.clear()
            await write.create("pods", new_pod("p4", label))
            await write.delete("pods", "p3", namespace="default", grace_period_seconds=0)
            await write.patch("pods", "p1", {"metadata": {"annotations": {"step": "2"}}},
                              namespace="default")
            await compact_etcd(etcd)
            await asyncio.to_thread(watched.start)
            await eventually(converged, what="informer relists after 410")
            assert sorted(calls) == [("add", "p4"), ("delete", "p3"), ("update", "p1")]
            assert transport.requests.count("list") == 2
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
