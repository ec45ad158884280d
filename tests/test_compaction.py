"""etcd compaction on kube-apiserver's schedule (--etcd-compaction-interval), on real etcd:
what is compacted is gone for watchers, LISTs and etcd itself; informers relist."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.compactor import Tick, tick
from apiserver.storage import Compacted, Storage
from common import ApiClient, Informer
from tests.support import ApiServer, Etcd, eventually, unique

PODS = "/api/v1/namespaces/default/pods"
INTERVAL = ["--etcd-compaction-interval", "1s"]


def pod(name: str, label: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"suite": label} if label else {}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}


def compactions(server: ApiServer) -> list[int]:
    """The revisions the apiserver's log says it compacted to."""
    return [int(m) for m in re.findall(r"compacted etcd to revision (\d+)",
                                       server.process.log())]


async def compacted_past(server: ApiServer, revision: int) -> None:
    async def check() -> bool:
        return any(r > revision for r in compactions(server))

    await eventually(check, timeout=20, what=f"a compaction past revision {revision}")


async def watch_events(http: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    """Every event of a watch, until the server ends it (or 10 s pass)."""
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async with http.stream("GET", PODS, params={"watch": "true", **params},
                               timeout=httpx.Timeout(30, read=None)) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.strip():
                    events.append(json.loads(line))

    try:
        await asyncio.wait_for(run(), 10)
    except TimeoutError:
        events.append({"type": "TIMEOUT"})
    return events


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Etcd, ApiServer]]:
    etcd = await asyncio.to_thread(Etcd(tmp_path / "etcd").start)
    server = ApiServer(etcd, tmp_path, extra_args=INTERVAL)
    await asyncio.to_thread(server.start)
    yield etcd, server
    server.stop()
    etcd.stop()


async def test_a_watch_from_a_compacted_version_gets_one_410_and_ends(
        cluster: tuple[Etcd, ApiServer]) -> None:
    """rv=1 is older than the watch cache; an rv written after the apiserver started is in
    the cache's window: both are compacted, and neither is replayed."""
    _, server = cluster
    async with server.client(timeout=30) as http:
        first = (await http.post(PODS, json=pod("first"))).json()
        in_window = first["metadata"]["resourceVersion"]
        for i in range(3):
            assert (await http.post(PODS, json=pod(f"p{i}"))).status_code == 201
        current = int((await http.get(PODS)).json()["metadata"]["resourceVersion"])
        await compacted_past(server, current)  # two ticks: recorded, then compacted to it
        for rv in ("1", in_window):
            events = await watch_events(http, resourceVersion=rv)
            assert [e["type"] for e in events] == ["ERROR"], events
            status = events[0]["object"]
            assert (status["kind"], status["code"], status["reason"]) == ("Status", 410,
                                                                           "Expired")
            assert status["message"].startswith(f"too old resource version: {rv} (")
        # an exact LIST at the compacted revision, too
        r = await http.get(PODS, params={"resourceVersion": in_window,
                                         "resourceVersionMatch": "Exact"})
        assert r.status_code == 410 and r.json()["reason"] == "Expired"
        # the latest state is still there, and watching from it works
        listed = (await http.get(PODS)).json()
        assert sorted(p["metadata"]["name"] for p in listed["items"]) == [
            "first", "p0", "p1", "p2"]
        await http.post(PODS, json=pod("after"))
        events = await watch_events(http, resourceVersion=listed["metadata"]["resourceVersion"],
                                    timeoutSeconds="2")
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "after")]


async def test_etcd_keeps_no_compacted_revision(cluster: tuple[Etcd, ApiServer]) -> None:
    etcd, server = cluster
    async with server.client(timeout=30) as http:
        old = int((await http.post(PODS, json=pod("old"))).json()["metadata"]["resourceVersion"])
        await http.delete(f"{PODS}/old", params={"gracePeriodSeconds": "0"})
    await compacted_past(server, old)
    storage = Storage([etcd.endpoint])
    await storage.start()
    try:
        with pytest.raises(Compacted):
            await storage.range("/registry/pods/", revision=old)
        assert await storage.is_compacted(old)
    finally:
        await storage.close()


async def test_the_lease_lets_one_apiserver_compact_per_interval(tmp_path: Path) -> None:
    """Two compactors over one etcd (kube's protocol): per round, one of them compacts, the
    other learns the lease's new version and what was compacted."""
    etcd = await asyncio.to_thread(Etcd(tmp_path / "etcd").start)
    storage = Storage([etcd.endpoint])
    await storage.start()
    try:
        a, b = Tick(), Tick()
        a = await tick(storage, a)  # a takes the lease at version 0 and records a revision
        b = await tick(storage, b)  # b loses (version is 1 now) and learns it
        assert (a.version, b.version, a.compacted, b.compacted) == (1, 1, 0, 0)
        recorded = a.revision
        await storage.bump_revision("/somewhere/else")
        a = await tick(storage, a)  # a compacts to what it recorded
        assert a.compacted == recorded and a.version == 2
        assert await storage.is_compacted(recorded - 1)
        assert not await storage.is_compacted(recorded)
        b = await tick(storage, b)  # b's version is stale: it does not compact again
        assert b.version == 2 and b.compacted == recorded
        # a stops: b holds the lease's current version, so its next round compacts
        ahead = b.revision
        await storage.bump_revision("/somewhere/else")
        b = await tick(storage, b)
        assert b.version == 3 and b.compacted == ahead
        assert await storage.is_compacted(ahead - 1)
    finally:
        await storage.close()
        etcd.stop()


async def test_an_informer_relists_after_compaction(tmp_path: Path) -> None:
    """An informer's apiserver is down while another one writes and compacts: when it is
    back the watch from the informer's resourceVersion is 410, it lists again, and it
    goes on following changes."""
    etcd = await asyncio.to_thread(Etcd(tmp_path / "etcd").start)
    watched = ApiServer(etcd, tmp_path, name="watched", extra_args=INTERVAL)
    writer = ApiServer(etcd, tmp_path, name="writer", extra_args=INTERVAL)
    label = unique("compact")
    try:
        await asyncio.gather(asyncio.to_thread(watched.start), asyncio.to_thread(writer.start))
        async with ApiClient(writer.connection(), timeout=10) as write, \
                ApiClient(watched.connection(), timeout=10) as read:
            informer = Informer(read, "pods", namespace="default",
                                label_selector=f"suite={label}")
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.wait_synced(), timeout=30)

                async def has(names: set[str]) -> bool:
                    return {p["metadata"]["name"] for p in informer.list()} == names

                await write.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                            **pod("a", label)}, namespace="default")
                await eventually(lambda: has({"a"}), what="the informer sees a")
                watched.process.kill()
                seen = int(informer.last_sync_resource_version or 0)
                created = await write.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                                      **pod("b", label)}, namespace="default")
                await write.delete("pods", "a", namespace="default", grace_period_seconds=0)
                await compacted_past(writer, int(created["metadata"]["resourceVersion"]))
                assert seen < max(compactions(writer))
                await asyncio.to_thread(watched.start)
                await eventually(lambda: has({"b"}), what="the informer relists")
                await write.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                            **pod("c", label)}, namespace="default")
                await eventually(lambda: has({"b", "c"}), what="the informer watches again")
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
    finally:
        watched.stop()
        writer.stop()
        etcd.stop()


async def test_an_interval_of_0_disables_compaction(tmp_path: Path) -> None:
    etcd = await asyncio.to_thread(Etcd(tmp_path / "etcd").start)
    server = ApiServer(etcd, tmp_path, extra_args=["--etcd-compaction-interval", "0"])
    try:
        await asyncio.to_thread(server.start)
        async with server.client(timeout=30) as http:
            rv = (await http.post(PODS, json=pod("kept"))).json()["metadata"]["resourceVersion"]
            await asyncio.sleep(2.5)
            events = await watch_events(http, resourceVersion="1", timeoutSeconds="1")
        assert [e["type"] for e in events] == ["ADDED"], events
        assert int(events[0]["object"]["metadata"]["resourceVersion"]) == int(rv)
        assert compactions(server) == []
    finally:
        server.stop()
        etcd.stop()
