"""Watch semantics on a real etcd: resume, compaction, selectors, bookmarks, no leaks."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import ApiServer, Etcd, eventually, unique

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]}}


async def watch_lines(http: httpx.AsyncClient, path: str, **params: Any,
                      ) -> AsyncIterator[dict[str, Any]]:
    async with http.stream("GET", path, params={"watch": "true", **params},
                           timeout=httpx.Timeout(30, read=None)) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.strip():
                yield json.loads(line)


async def collect(http: httpx.AsyncClient, path: str, count: int, **params: Any,
                  ) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async for event in watch_lines(http, path, **params):
            events.append(event)
            if len(events) >= count:
                return

    await asyncio.wait_for(run(), 30)
    return events


async def test_watch_without_version_starts_with_synthetic_added(
        http: httpx.AsyncClient) -> None:
    tag = unique("syn")
    for i in range(3):
        await http.post(PODS, json=pod(f"{tag}-{i}", {"batch": tag}))
    events = await collect(http, PODS, 3, labelSelector=f"batch={tag}")
    assert [e["type"] for e in events] == ["ADDED"] * 3
    assert sorted(e["object"]["metadata"]["name"] for e in events) == [
        f"{tag}-0", f"{tag}-1", f"{tag}-2"]


async def test_watch_from_version_sees_every_change_in_order(http: httpx.AsyncClient) -> None:
    tag = unique("seq")
    listed = (await http.get(PODS)).json()
    rv = listed["metadata"]["resourceVersion"]
    name = f"{tag}-a"
    await http.post(PODS, json=pod(name, {"batch": tag}))
    await http.patch(f"{PODS}/{name}", json={"metadata": {"labels": {"batch": tag, "n": "1"}}},
                     headers={"Content-Type": "application/merge-patch+json"})
    await http.delete(f"{PODS}/{name}")
    events = await collect(http, PODS, 3, resourceVersion=rv, labelSelector=f"batch={tag}")
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3


async def test_selector_transitions(http: httpx.AsyncClient) -> None:
    tag = unique("tr")
    name = f"{tag}-p"
    created = (await http.post(PODS, json=pod(name, {"batch": tag, "color": "red"}))).json()
    rv = created["metadata"]["resourceVersion"]
    for color in ("blue", "red"):
        await http.patch(f"{PODS}/{name}",
                         json={"metadata": {"labels": {"color": color}}},
                         headers={"Content-Type": "application/merge-patch+json"})
    events = await collect(http, PODS, 2, resourceVersion=rv,
                           labelSelector=f"batch={tag},color=red")
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


async def test_bookmarks(http: httpx.AsyncClient) -> None:
    tag = unique("bm")
    rv = (await http.get(PODS)).json()["metadata"]["resourceVersion"]
    await http.post(PODS, json=pod(f"{tag}-x"))  # not selected: only moves the revision
    events = await collect(http, PODS, 1, resourceVersion=rv, labelSelector=f"batch={tag}",
                           allowWatchBookmarks="true")
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["object"]["kind"] == "Pod"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)


async def test_timeout_seconds_ends_the_stream(http: httpx.AsyncClient) -> None:
    async def drain() -> int:
        n = 0
        async for _ in watch_lines(http, PODS, timeoutSeconds="1",
                                   labelSelector="never=matches"):
            n += 1
        return n

    assert await asyncio.wait_for(drain(), 15) == 0


async def test_resume_after_dropped_connections_delivers_every_change_once(
        http: httpx.AsyncClient) -> None:
    """Create/update/delete a few hundred objects while a watcher reconnects at random."""
    tag = unique("resume")
    rv = (await http.get(PODS)).json()["metadata"]["resourceVersion"]
    expected: list[tuple[str, str]] = []
    rng = random.Random(7)

    async def writer() -> None:
        for i in range(100):
            name = f"{tag}-{i}"
            await http.post(PODS, json=pod(name, {"batch": tag}))
            expected.append(("ADDED", name))
            await http.patch(f"{PODS}/{name}", json={"metadata": {"labels": {"i": str(i)}}},
                             headers={"Content-Type": "application/merge-patch+json"})
            expected.append(("MODIFIED", name))
            if i % 2 == 0:
                await http.delete(f"{PODS}/{name}")
                expected.append(("DELETED", name))

    seen: list[tuple[str, str]] = []
    seen_versions: list[int] = []
    done = asyncio.Event()

    async def watcher() -> None:
        last = rv
        while not (done.is_set() and len(seen) >= len(expected)):
            budget = rng.randint(1, 25)  # drop the connection after this many events
            try:
                async with asyncio.timeout(2):
                    async for event in watch_lines(http, PODS, resourceVersion=last,
                                                   labelSelector=f"batch={tag}"):
                        seen.append((event["type"], event["object"]["metadata"]["name"]))
                        last = event["object"]["metadata"]["resourceVersion"]
                        seen_versions.append(int(last))
                        budget -= 1
                        if budget == 0:
                            break
            except TimeoutError:
                pass

    watch_task = asyncio.create_task(watcher())
    await writer()
    done.set()
    await asyncio.wait_for(watch_task, 120)
    assert seen == expected
    assert seen_versions == sorted(seen_versions) and len(set(seen_versions)) == len(seen)


@pytest.fixture
async def private_apiserver(tmp_path: Path) -> AsyncIterator[tuple[Etcd, ApiServer]]:
    etcd = Etcd(tmp_path).start()
    server = ApiServer(etcd, tmp_path).start()
    yield etcd, server
    server.stop()
    etcd.stop()


async def test_compacted_version_gives_410_error_event(
        private_apiserver: tuple[Etcd, ApiServer], tmp_path: Path) -> None:
    """A resourceVersion etcd has compacted is 410, whether the watch cache's window still
    holds it or it is older than the window: compacted history is never replayed."""
    etcd, server = private_apiserver
    async with server.client(timeout=30) as http:
        first = (await http.post(PODS, json=pod("c-0"))).json()
        old_rv = int(first["metadata"]["resourceVersion"])
        for i in range(1, 5):
            await http.post(PODS, json=pod(f"c-{i}"))
        current = int((await http.get(PODS)).json()["metadata"]["resourceVersion"])
        async with httpx.AsyncClient(timeout=10) as raw:
            r = await raw.post(f"{etcd.endpoint}/v3/kv/compaction",
                               json={"revision": str(current), "physical": True})
            assert r.status_code == 200, r.text
        events = await collect(http, PODS, 1, resourceVersion=str(old_rv))
        assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
        assert events[0]["object"]["message"] == (
            f"too old resource version: {old_rv} ({current})")
        # the oldest revision kept is still there to watch from
        events = await collect(http, PODS, 1, resourceVersion=str(current - 1))
        assert events[0]["object"]["metadata"]["name"] == "c-4"
    # a restarted apiserver's cache starts after the compaction: the old version is gone
    server.stop()
    restarted = ApiServer(etcd, tmp_path, name="restarted").start()
    try:
        async with restarted.client(timeout=30) as http:
            events = await collect(http, PODS, 1, resourceVersion=str(old_rv))
    finally:
        restarted.stop()
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"] == f"too old resource version: {old_rv} ({current})"


def etcd_watchers(etcd: Etcd) -> int:
    metrics = httpx.get(f"{etcd.endpoint}/metrics", timeout=10).text
    for line in metrics.splitlines():
        if line.startswith("etcd_debugging_mvcc_watcher_total "):
            return int(float(line.split()[1]))
    raise AssertionError("etcd did not report etcd_debugging_mvcc_watcher_total")


def apiserver_gauges(server: ApiServer) -> dict[str, float]:
    gauges = {}
    metrics = httpx.get(f"{server.url}/metrics", timeout=10, verify=server.ssl_context())
    for line in metrics.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            gauges[name] = float(value)
    return gauges


async def test_disconnecting_clients_leave_no_watch_behind(
        private_apiserver: tuple[Etcd, ApiServer]) -> None:
    etcd, server = private_apiserver
    async with server.client(timeout=30) as http:
        # the first watch starts the shared watch cache of pods: one etcd watch for good
        async with http.stream("GET", PODS, params={"watch": "true"}) as r:
            assert r.status_code == 200

        async def quiet() -> dict[str, float] | None:
            gauges = apiserver_gauges(server)
            idle = gauges['apiserver_registered_watchers{resource="pods"}'] == 0
            return gauges if idle else None

        baseline = await eventually(quiet, timeout=30, what="no registered watcher")
        etcd_baseline = etcd_watchers(etcd)
        for i in range(200):
            params = {"watch": "true"}
            if i % 2:  # half of them from an old revision: served by etcd watches of their own
                params["resourceVersion"] = "1"
            async with http.stream("GET", PODS, params=params) as r:
                assert r.status_code == 200

        async def settled() -> bool:
            gauges = apiserver_gauges(server)
            return (gauges['apiserver_registered_watchers{resource="pods"}'] == 0
                    and gauges["kubelite_apiserver_etcd_watches"]
                    == baseline["kubelite_apiserver_etcd_watches"]
                    and gauges["kubelite_apiserver_tasks"] <= baseline["kubelite_apiserver_tasks"]
                    and etcd_watchers(etcd) <= etcd_baseline)

        await eventually(settled, timeout=30, what="watchers, etcd watches and tasks at baseline")


async def test_many_watchers_share_one_etcd_watch(
        private_apiserver: tuple[Etcd, ApiServer]) -> None:
    etcd, server = private_apiserver
    async with server.client(timeout=30) as http:
        async with http.stream("GET", PODS, params={"watch": "true", "timeoutSeconds": "1"}):
            pass
        before = etcd_watchers(etcd)
        rv = (await http.get(PODS)).json()["metadata"]["resourceVersion"]
        watches = [asyncio.create_task(collect(http, PODS, 1, resourceVersion=rv))
                   for _ in range(20)]

        async def all_registered() -> bool:
            gauges = apiserver_gauges(server)
            return gauges['apiserver_registered_watchers{resource="pods"}'] == 20

        await eventually(all_registered, timeout=30, what="20 watchers on the cache")
        assert etcd_watchers(etcd) == before
        await http.post(PODS, json=pod("shared"))
        results = await asyncio.gather(*watches)
        assert all(events[0]["object"]["metadata"]["name"] == "shared" for events in results)


async def test_etcd_down_gives_fast_503_then_recovers(
        private_apiserver: tuple[Etcd, ApiServer]) -> None:
    etcd, server = private_apiserver
    async with server.client(timeout=30) as http:
        assert (await http.post(PODS, json=pod("before"))).status_code == 201
        etcd.stop()
        for method, call in (("GET", http.get(PODS)),
                             ("POST", http.post(PODS, json=pod("during")))):
            # an answer, not a hang (the storage gives etcd 1.5 s per call; the timeout
            # here is only a generous bound)
            r = await asyncio.wait_for(call, 10)
            assert r.status_code == 503, (method, r.text)
            assert r.json()["reason"] == "ServiceUnavailable"
            assert r.headers.get("Retry-After")
        assert (await http.get("/readyz")).status_code == 503
        etcd.process.start()

        async def recovered() -> bool:
            r = await http.get(f"{PODS}/before")
            return r.status_code == 200

        await eventually(recovered, timeout=30, what="apiserver recovery after etcd restart")
        assert (await http.post(PODS, json=pod("after"))).status_code == 201
        assert (await http.get(f"{PODS}/during")).status_code == 404


async def test_send_initial_events_ends_with_marked_bookmark(http: httpx.AsyncClient) -> None:
    """What `kubectl delete` and `kubectl wait` ask for (watch-list)."""
    tag = unique("wl")
    await http.post(PODS, json=pod(f"{tag}-0", {"batch": tag}))
    events = await collect(http, PODS, 2, labelSelector=f"batch={tag}", sendInitialEvents="true",
                           resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true")
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    r = await http.get(PODS, params={"watch": "true", "sendInitialEvents": "true"})
    assert r.status_code == 422


def test_a_change_is_encoded_once_for_every_watcher() -> None:
    from apiserver.cacher import CachedObject, CacheEvent
    from apiserver.selectors import parse_label_selector
    from apiserver.watch import WatchRequest, translate

    obj = {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "7",
                                      "labels": {"app": "web"}}}
    item = CachedObject("/registry/pods/default/a", json.dumps(obj).encode(), 7,
                        {"app": "web"}, {})
    event = CacheEvent("PUT", item.key, 7, item, None)

    def watcher(selector: str) -> WatchRequest:
        return WatchRequest(resource=None, namespace=None, resource_version="6",  # type: ignore[arg-type]
                            labels=parse_label_selector(selector) if selector else None,
                            fields=None, timeout_seconds=1, bookmarks=False)

    first, second = translate(watcher(""), event), translate(watcher("app=web"), event)
    assert first is not None and second is not None
    assert first.item.json is second.item.json  # the same bytes object: encoded once
    assert json.loads(first.line()) == {"type": "ADDED", "object": obj}
    assert translate(watcher("app=db"), event) is None


@pytest.mark.parametrize("rv, code", [
    # past etcd's int64 revisions, up to the largest uint64 kube parses: a watch from the
    # future, which (as kube's cacher) waits for events that never come, until its timeout
    ("9223372036854775808", 200), ("18446744073709551615", 200),
    ("18446744073709551616", 400), ("-5", 400), ("+5", 400), ("1e3", 400),
])
async def test_a_watch_from_an_out_of_range_resource_version_is_answered(
        http: httpx.AsyncClient, rv: str, code: int) -> None:
    r = await http.get("/api/v1/namespaces/default/pods",
                       params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "1"})
    assert r.status_code == code, r.text
    if code == 200:
        events = [json.loads(line) for line in r.text.splitlines() if line]
        assert all(event["type"] != "ERROR" for event in events), events
    else:
        assert r.json()["kind"] == "Status"
        assert r.json()["message"] == f'invalid resource version "{rv}"'
