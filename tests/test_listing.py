"""LIST on a real etcd: resourceVersion, resourceVersionMatch, limit and continue, served
from the watch cache or etcd, consistent with the first page even while writes race it."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver import listing
from apiserver.cacher import ResourceCache
from apiserver.storage import KV, WatchEvent
from common import errors
from tests.support import ApiServer, Etcd, unique

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]}}


async def namespace_with_pods(http: httpx.AsyncClient, count: int, *,
                              labels: dict[str, str] | None = None) -> tuple[str, str]:
    """A fresh namespace holding pods p-000 .. p-{count-1}; returns (namespace, pods URL)."""
    namespace = unique("ls")
    r = await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
    assert r.status_code == 201, r.text
    url = f"/api/v1/namespaces/{namespace}/pods"
    for start in range(0, count, 20):
        results = await asyncio.gather(*(http.post(url, json=pod(f"p-{i:03d}", labels))
                                         for i in range(start, min(start + 20, count))))
        assert all(r.status_code == 201 for r in results)
    return namespace, url


async def pages(http: httpx.AsyncClient, url: str, limit: int,
                **params: Any) -> list[dict[str, Any]]:
    """Every page of a paged LIST, following continue tokens."""
    found = []
    token = ""
    while True:
        query = {"limit": str(limit), **params, **({"continue": token} if token else {})}
        r = await http.get(url, params=query)
        assert r.status_code == 200, r.text
        found.append(r.json())
        token = r.json()["metadata"].get("continue", "")
        if not token:
            return found


async def pages_served(http: httpx.AsyncClient) -> dict[str, int]:
    """The apiserver's count of LIST pages by source (cache, etcd), from /metrics."""
    metrics = (await http.get("/metrics")).text
    served = {}
    for line in metrics.splitlines():
        if line.startswith("kubelite_apiserver_list_pages_total{"):
            source = line.split('"')[1]
            served[source] = int(line.rsplit(" ", 1)[1])
    return served


def names(lists: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for page in lists for item in page["items"]]


# -- pure parts --------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "message"), [
    ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch is forbidden unless "
                                        "resourceVersion is provided"),
    ({"resourceVersionMatch": "Exact", "resourceVersion": "0"},
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ({"resourceVersionMatch": "Newest", "resourceVersion": "5"}, 'Unsupported value: "Newest"'),
    ({"resourceVersionMatch": "Exact", "resourceVersion": "5", "continue": "x"},
     "resourceVersionMatch is forbidden when continue is provided"),
])
def test_list_options_are_checked_as_kube_does(query: dict[str, str], message: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        listing.parse_list_options(query)
    assert caught.value.message.startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert message in caught.value.message


@pytest.mark.parametrize("query", [
    {"continue": "abc", "resourceVersion": "5"}, {"limit": "ten"}, {"resourceVersion": "-3"},
    {"resourceVersion": "abc"},
])
def test_unreadable_list_options_are_bad_requests(query: dict[str, str]) -> None:
    with pytest.raises(errors.BadRequest):
        listing.parse_list_options(query)


def test_continue_token_is_kubes() -> None:
    token = listing.encode_continue("/registry/pods/default/web\0", "/registry/pods/", 42)
    assert json.loads(base64.urlsafe_b64decode(token + "==")) == {
        "v": "meta.k8s.io/v1", "rv": 42, "start": "default/web\u0000"}
    assert listing.decode_continue(token, "/registry/pods/") == (
        "/registry/pods/default/web\0", 42)


@pytest.mark.parametrize("start", ["../secrets/x", "default/../../x", "", "/a//b"])
def test_a_continue_token_cannot_leave_its_prefix(start: str) -> None:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": 5, "start": start}).encode()
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    with pytest.raises(errors.BadRequest, match="continue key is not valid"):
        listing.decode_continue(token, "/registry/pods/")


@pytest.mark.parametrize("token", ["%%%", base64.urlsafe_b64encode(b"[1]").decode(),
                                   base64.urlsafe_b64encode(b'{"v":"x","rv":1,"start":"a"}').decode(),
                                   base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":0,'
                                                            b'"start":"a"}').decode()])
def test_unreadable_continue_tokens_are_refused(token: str) -> None:
    with pytest.raises(errors.BadRequest, match="^invalid continue token"):
        listing.decode_continue(token, "/registry/pods/")


def test_cache_pages_cost_the_page_and_count_what_remains() -> None:
    cache = ResourceCache(None, "/r/pods/", lambda obj: ({}, {}))  # type: ignore[arg-type]
    kvs = [KV(f"/r/pods/{ns}/p{i}", {"metadata": {"name": f"p{i}"}}, 10 + i, 10 + i)
           for ns in ("a", "b") for i in range(5)]
    cache._reset(kvs, 30)
    first = cache.page("/r/pods/a/", start=None, limit=2, selected=None)
    assert [i.key for i in first.items] == ["/r/pods/a/p0", "/r/pods/a/p1"]
    assert first.more and first.remaining == 3
    rest = cache.page("/r/pods/a/", start="/r/pods/a/p1\0", limit=0, selected=None)
    assert [i.key for i in rest.items] == [f"/r/pods/a/p{i}" for i in range(2, 5)]
    assert not rest.more and rest.remaining == 0
    assert cache.page("/r/pods/", start=None, limit=0, selected=None).items[5].key == "/r/pods/b/p0"


def test_the_cache_indexes_pods_by_node_through_every_change() -> None:
    def node_field(obj: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        return {}, {"spec.nodeName": obj["spec"].get("nodeName", "")}

    def pod(name: str, node: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}

    def on(node: str) -> set[str]:
        return {item.key for item in cache.with_field("spec.nodeName", node)}

    cache = ResourceCache(None, "/r/pods/", node_field)  # type: ignore[arg-type]
    cache._reset([KV("/r/pods/a/p1", pod("p1", "n1"), 5, 5),
                  KV("/r/pods/a/p2", pod("p2", ""), 6, 6)], 6)
    assert on("n1") == {"/r/pods/a/p1"} and on("") == {"/r/pods/a/p2"}
    cache._apply(WatchEvent("PUT", "/r/pods/a/p2", pod("p2", "n1"), pod("p2", ""), 7, False))
    cache._apply(WatchEvent("PUT", "/r/pods/b/p3", pod("p3", "n2"), None, 8, True))
    assert on("n1") == {"/r/pods/a/p1", "/r/pods/a/p2"} and on("") == set()
    cache._apply(WatchEvent("DELETE", "/r/pods/a/p1", None, pod("p1", "n1"), 9, False))
    assert on("n1") == {"/r/pods/a/p2"} and on("n2") == {"/r/pods/b/p3"}
    assert cache.indexes["spec.nodeName"].keys() == {"n1", "n2"}  # no empty sets left


# -- on a real etcd ------------------------------------------------------------------------

async def test_limit_and_continue_return_every_object_once(http: httpx.AsyncClient) -> None:
    _, url = await namespace_with_pods(http, 23)
    found = await pages(http, url, 5)
    assert names(found) == [f"p-{i:03d}" for i in range(23)]
    assert [len(p["items"]) for p in found] == [5, 5, 5, 5, 3]
    assert [p["metadata"].get("remainingItemCount") for p in found] == [18, 13, 8, 3, None]
    assert len({p["metadata"]["resourceVersion"] for p in found}) == 1


async def test_a_page_with_a_selector_holds_only_selected_objects(
        http: httpx.AsyncClient) -> None:
    namespace, url = await namespace_with_pods(http, 12)
    for i in range(0, 12, 3):
        r = await http.patch(f"{url}/p-{i:03d}", json={"metadata": {"labels": {"pick": "yes"}}},
                             headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200
    found = await pages(http, url, 2, labelSelector="pick=yes")
    assert names(found) == ["p-000", "p-003", "p-006", "p-009"]
    assert all("remainingItemCount" not in p["metadata"] for p in found)


async def test_a_paged_list_racing_with_writes_is_the_first_pages_snapshot(
        http: httpx.AsyncClient) -> None:
    """Every object of the first page's resourceVersion exactly once, as it was then,
    while pods are created before and after the cursor, deleted and modified."""
    _, url = await namespace_with_pods(http, 40)
    served_before = await pages_served(http)
    r = await http.get(url, params={"limit": "6"})
    first = r.json()
    snapshot_rv = first["metadata"]["resourceVersion"]
    created_rv = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in first["items"]}
    token = first["metadata"]["continue"]
    found = [first]
    step = 0
    while token:
        step += 1
        # writes between pages: a new pod ahead of the cursor, one behind it, a delete
        # ahead, a modification ahead
        writes = [http.post(url, json=pod(f"p-{step:03d}a")),
                  http.post(url, json=pod(f"a-{step:03d}")),
                  http.delete(f"{url}/p-{39 - step:03d}", params={"gracePeriodSeconds": "0"}),
                  http.patch(f"{url}/p-{38 - step:03d}",
                             json={"metadata": {"labels": {"touched": "yes"}}},
                             headers={"Content-Type": "application/merge-patch+json"})]
        assert all(w.status_code < 300 for w in await asyncio.gather(*writes))
        r = await http.get(url, params={"limit": "6", "continue": token})
        assert r.status_code == 200, r.text
        found.append(r.json())
        token = r.json()["metadata"].get("continue", "")
    assert names(found) == [f"p-{i:03d}" for i in range(40)]
    assert {p["metadata"]["resourceVersion"] for p in found} == {snapshot_rv}
    served = await pages_served(http)  # the pages after writes were read from etcd
    assert served["etcd"] - served_before["etcd"] >= step
    for page in found:
        for item in page["items"]:
            assert int(item["metadata"]["resourceVersion"]) <= int(snapshot_rv)
            assert "touched" not in (item["metadata"].get("labels") or {})
            if item["metadata"]["name"] in created_rv:
                assert item["metadata"]["resourceVersion"] == created_rv[item["metadata"]["name"]]
    now = (await http.get(url)).json()
    assert len(now["items"]) == 40 + 2 * step - step


# Every resourceVersion / resourceVersionMatch / limit combination a client may send, on a
# namespace of 5 pods p-000..p-004 whose p-001 was relabelled after `old` was read:
# (query, which revision the answer is at, where its pages come from, its names).
OLD, NOW = "old", "now"
COMBINATIONS = [
    ({}, NOW, "cache", 5),
    ({"limit": "2"}, NOW, "cache", 5),
    ({"resourceVersion": "0"}, NOW, "cache", 5),
    ({"resourceVersion": "0", "limit": "2"}, NOW, "cache", 5),
    ({"resourceVersion": OLD}, NOW, "cache", 5),  # legacy NotOlderThan
    ({"resourceVersion": OLD, "resourceVersionMatch": "NotOlderThan"}, NOW, "cache", 5),
    ({"resourceVersion": OLD, "resourceVersionMatch": "NotOlderThan", "limit": "2"}, NOW,
     "cache", 5),
    ({"resourceVersion": OLD, "limit": "2"}, OLD, "etcd", 5),  # legacy Exact
    ({"resourceVersion": OLD, "resourceVersionMatch": "Exact"}, OLD, "etcd", 5),
    ({"resourceVersion": OLD, "resourceVersionMatch": "Exact", "limit": "2"}, OLD, "etcd", 5),
    ({"resourceVersion": NOW, "resourceVersionMatch": "Exact", "limit": "2"}, NOW, "cache", 5),
]


@pytest.fixture(scope="module")
def counted_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory,
                      ) -> Iterator[ApiServer]:
    """An apiserver and etcd prefix of this module's own: its LIST page counters move only
    with what these tests ask (the session's is also listed by other tests' schedulers and
    kubelets, and its namespace controller lists what other tests left Terminating)."""
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("counted")), name="apiserver-counted",
                       extra_args=["--etcd-prefix", f"/{unique('counted')}"]).start()
    yield server
    server.stop()


@pytest.mark.parametrize(("query", "at", "source", "count"), COMBINATIONS,
                         ids=lambda v: str(v) if isinstance(v, dict) else None)
async def test_every_list_option_combination(counted_apiserver: ApiServer,
                                             query: dict[str, str], at: str, source: str,
                                             count: int) -> None:
    async with counted_apiserver.client(timeout=30) as http:
        await list_with_options(http, query, at, source, count)


async def list_with_options(http: httpx.AsyncClient, query: dict[str, str], at: str,
                            source: str, count: int) -> None:
    namespace, url = await namespace_with_pods(http, 5)
    old = (await http.get(url)).json()["metadata"]["resourceVersion"]
    r = await http.patch(f"{url}/p-001", json={"metadata": {"labels": {"late": "yes"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
    now = r.json()["metadata"]["resourceVersion"]
    revisions = {OLD: old, NOW: now}
    params = {k: revisions.get(v, v) for k, v in query.items()}
    served_before = await pages_served(http)
    found = [(await http.get(url, params=params)).json()]
    while token := found[-1]["metadata"].get("continue"):  # a continue carries the rest
        found.append((await http.get(url, params={"limit": params["limit"],
                                                  "continue": token})).json())
    served = await pages_served(http)

    assert names(found) == [f"p-{i:03d}" for i in range(count)]
    listed_at = {int(p["metadata"]["resourceVersion"]) for p in found}
    assert len(listed_at) == 1  # every page of one LIST is at the first page's revision
    if at == OLD:
        assert listed_at == {int(old)}
        assert "late" not in (found[0]["items"][1]["metadata"].get("labels") or {})
    else:
        assert listed_at.pop() >= int(now)
        p001 = next(i for p in found for i in p["items"] if i["metadata"]["name"] == "p-001")
        assert p001["metadata"]["labels"] == {"late": "yes"}
    if "limit" in params:
        assert [len(p["items"]) for p in found] == [2, 2, 1]
        assert [p["metadata"].get("remainingItemCount") for p in found] == [3, 1, None]
    grew = {s: served[s] - served_before[s] for s in ("cache", "etcd")}
    assert grew[source] == len(found), grew
    assert grew["cache" if source == "etcd" else "etcd"] == 0, grew


async def test_a_paged_list_with_writes_racing_it_concurrently(
        http: httpx.AsyncClient) -> None:
    """Pages read while a writer creates pods ahead of and behind the cursor, deletes and
    relabels: each page is the first page's snapshot, every object exactly once."""
    _, url = await namespace_with_pods(http, 60)
    first = (await http.get(url, params={"limit": "4"})).json()
    snapshot = int(first["metadata"]["resourceVersion"])
    stop = asyncio.Event()
    writes = 0

    async def writer() -> None:
        nonlocal writes
        i = 0
        while not stop.is_set():
            i += 1
            results = await asyncio.gather(
                http.post(url, json=pod(f"z-{i:03d}")),  # ahead of every cursor
                http.post(url, json=pod(f"a-{i:03d}")),  # behind every cursor
                http.delete(f"{url}/p-{60 - i:03d}", params={"gracePeriodSeconds": "0"}),
                http.patch(f"{url}/p-{30 + i % 30:03d}",
                           json={"metadata": {"labels": {"touched": str(i)}}},
                           headers={"Content-Type": "application/merge-patch+json"}))
            assert all(r.status_code < 300 for r in results[:2])
            writes += 1

    task = asyncio.create_task(writer())
    found = [first]
    token = first["metadata"]["continue"]
    try:
        while token:
            r = await http.get(url, params={"limit": "4", "continue": token})
            assert r.status_code == 200, r.text
            found.append(r.json())
            token = r.json()["metadata"].get("continue", "")
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await task
    assert writes > 0
    assert names(found) == [f"p-{i:03d}" for i in range(60)]
    assert {int(p["metadata"]["resourceVersion"]) for p in found} == {snapshot}
    for page in found:
        for item in page["items"]:
            assert int(item["metadata"]["resourceVersion"]) <= snapshot
            assert "touched" not in (item["metadata"].get("labels") or {})


async def test_a_consistent_list_sees_every_acknowledged_write(http: httpx.AsyncClient) -> None:
    namespace, url = await namespace_with_pods(http, 0)
    served_before = await pages_served(http)
    for i in range(15):
        r = await http.post(url, json=pod(f"w-{i}"))
        created = int(r.json()["metadata"]["resourceVersion"])
        listed = (await http.get(url)).json()
        assert int(listed["metadata"]["resourceVersion"]) >= created
        assert len(listed["items"]) == i + 1
        # a write to another resource moves etcd on; the pod list must still be fresh
        await http.post(f"/api/v1/namespaces/{namespace}/events", json={
            "metadata": {"name": f"e-{i}"}, "involvedObject": {"kind": "Pod", "name": "x"},
            "reason": "Test", "message": "m", "type": "Normal"})
        again = (await http.get(url)).json()
        assert len(again["items"]) == i + 1
    served = await pages_served(http)  # from the cache, once it proved it caught up
    assert served["cache"] - served_before["cache"] >= 25


async def test_resource_version_semantics(http: httpx.AsyncClient) -> None:
    _, url = await namespace_with_pods(http, 3)
    before = (await http.get(url)).json()["metadata"]["resourceVersion"]
    deleted = await http.delete(f"{url}/p-001", params={"gracePeriodSeconds": "0"})
    assert deleted.status_code == 200
    after = (await http.get(url)).json()

    exact = await http.get(url, params={"resourceVersion": before,
                                        "resourceVersionMatch": "Exact"})
    assert [i["metadata"]["name"] for i in exact.json()["items"]] == ["p-000", "p-001", "p-002"]
    assert exact.json()["metadata"]["resourceVersion"] == before
    # legacy: a resourceVersion with a limit is exact too
    legacy_exact = await http.get(url, params={"resourceVersion": before, "limit": "10"})
    assert len(legacy_exact.json()["items"]) == 3

    deleted_rv = after["metadata"]["resourceVersion"]
    not_older = await http.get(url, params={"resourceVersion": deleted_rv,
                                            "resourceVersionMatch": "NotOlderThan"})
    assert int(not_older.json()["metadata"]["resourceVersion"]) >= int(deleted_rv)
    assert [i["metadata"]["name"] for i in not_older.json()["items"]] == ["p-000", "p-002"]
    legacy = await http.get(url, params={"resourceVersion": deleted_rv})  # NotOlderThan
    assert len(legacy.json()["items"]) == 2
    assert len((await http.get(url, params={"resourceVersion": "0"})).json()["items"]) in (2, 3)

    future = str(int(after["metadata"]["resourceVersion"]) + 1_000_000)
    too_large = await http.get(url, params={"resourceVersion": future,
                                            "resourceVersionMatch": "NotOlderThan"},
                               timeout=30)
    assert too_large.status_code == 504
    assert too_large.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    exact_future = await http.get(url, params={"resourceVersion": future,
                                               "resourceVersionMatch": "Exact"})
    assert exact_future.status_code == 504


@pytest.mark.parametrize("query", [
    {"resourceVersionMatch": "Exact"},
    {"resourceVersionMatch": "Exact", "resourceVersion": "0"},
    {"resourceVersionMatch": "Sometimes", "resourceVersion": "3"},
    {"sendInitialEvents": "true"},
    {"watch": "true", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "3"},
    {"watch": "true", "resourceVersionMatch": "Exact", "resourceVersion": "3",
     "sendInitialEvents": "true", "allowWatchBookmarks": "true"},
])
async def test_invalid_list_options_are_422(http: httpx.AsyncClient,
                                            query: dict[str, str]) -> None:
    r = await http.get("/api/v1/pods", params=query)
    assert r.status_code == 422, r.text
    assert r.json()["reason"] == "Invalid"


@pytest.mark.parametrize("query", [
    {"continue": "not-a-token"}, {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MywiIn0"},
    {"limit": "many"}, {"resourceVersion": "x"},
])
async def test_unreadable_list_options_are_400(http: httpx.AsyncClient,
                                               query: dict[str, str]) -> None:
    r = await http.get("/api/v1/pods", params=query)
    assert r.status_code == 400, r.text
    assert r.json()["kind"] == "Status"


async def test_a_table_page_carries_the_continue_token(http: httpx.AsyncClient) -> None:
    _, url = await namespace_with_pods(http, 4)
    r = await http.get(url, params={"limit": "3"}, headers={"Accept": TABLE})
    table = r.json()
    assert table["kind"] == "Table" and len(table["rows"]) == 3
    assert table["metadata"]["remainingItemCount"] == 1
    rest = await http.get(url, params={"limit": "3", "continue": table["metadata"]["continue"]},
                          headers={"Accept": TABLE})
    assert [row["cells"][0] for row in rest.json()["rows"]] == ["p-003"]


@pytest.fixture
async def private_apiserver(tmp_path: Path) -> AsyncIterator[tuple[Etcd, httpx.AsyncClient]]:
    etcd = Etcd(tmp_path).start()
    server = ApiServer(etcd, tmp_path).start()
    async with server.client(timeout=30) as http:
        yield etcd, http
    server.stop()
    etcd.stop()


async def test_a_compacted_continue_token_is_410_with_a_token_to_go_on(
        private_apiserver: tuple[Etcd, httpx.AsyncClient]) -> None:
    etcd, http = private_apiserver
    _, url = await namespace_with_pods(http, 5)
    first = (await http.get(url, params={"limit": "2"})).json()
    await http.post(url, json=pod("p-100"))  # the cache moves on: pages come from etcd
    current = int((await http.get(url)).json()["metadata"]["resourceVersion"])
    r = await http.post(f"{etcd.endpoint}/v3/kv/compaction",
                        json={"revision": str(current), "physical": True})
    assert r.status_code == 200, r.text

    expired = await http.get(url, params={"limit": "2", "continue": first["metadata"]["continue"]})
    assert expired.status_code == 410
    status = expired.json()
    assert status["reason"] == "Expired"
    assert status["message"].startswith("The provided continue parameter is too old")
    resumed = await http.get(url, params={"limit": "10",
                                          "continue": status["metadata"]["continue"]})
    assert resumed.status_code == 200
    assert [i["metadata"]["name"] for i in resumed.json()["items"]] == [
        "p-002", "p-003", "p-004", "p-100"]

    exact = await http.get(url, params={"resourceVersion": first["metadata"]["resourceVersion"],
                                        "resourceVersionMatch": "Exact"})
    assert exact.status_code == 410
    assert exact.json()["message"] == "The resourceVersion for the provided list is too old."


async def test_a_watcher_gets_what_arrives_while_its_client_is_written_to() -> None:
    """An event offered while the consumer handles a Flush (writes to its client) is
    delivered next, not left queued behind a cleared wakeup."""
    from apiserver.cacher import FLUSH, CachedObject, CacheEvent, CacheWatcher

    cache = ResourceCache(None, "/r/pods/", lambda obj: ({}, {}))  # type: ignore[arg-type]

    def event(revision: int) -> CacheEvent:
        item = CachedObject(f"/r/pods/a/p{revision}", b"{}", revision, {}, {})
        return CacheEvent("PUT", item.key, revision, item, None)

    watcher = CacheWatcher(cache, "/r/pods/", 0)
    items = watcher.items()
    watcher.offer(event(1))
    assert isinstance(first := await anext(items), CacheEvent) and first.revision == 1
    assert await anext(items) is FLUSH
    watcher.offer(event(2))  # while the client is being written to
    second = await asyncio.wait_for(anext(items), 5)
    assert isinstance(second, CacheEvent) and second.revision == 2
    assert await asyncio.wait_for(anext(items), 5) is FLUSH
    await items.aclose()


async def test_a_consistent_list_sees_every_write_before_it_even_at_startup(
        tmp_path: Path) -> None:
    """etcd 3.4 answers a progress request with its current revision even while a new
    watch is still catching up; a cache trusting it served empty LISTs now and then."""
    etcd = Etcd(tmp_path).start()
    try:
        for round_ in range(5):
            server = ApiServer(etcd, tmp_path, name=f"apiserver-{round_}").start()
            try:
                async with server.client(timeout=30) as http:
                    _, url = await namespace_with_pods(http, 10)
                    listed = (await http.get(url)).json()["items"]
                    assert len(listed) == 10, f"round {round_}: {len(listed)} of 10 pods"
            finally:
                server.stop()
    finally:
        etcd.stop()
