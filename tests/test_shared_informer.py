"""common.informer.SharedInformer / SharedInformerFactory: one list+watch, many handlers
each behind its own buffer, indexes, late handlers replayed; on a scripted source."""

from __future__ import annotations

import asyncio
from typing import Any

from common.informer import SharedInformerFactory
from tests.support import eventually
from tests.test_informer import ScriptedApiServer, event_line, pod, pod_list, watch_stream


async def at_least(calls: list[str], count: int) -> bool:
    return len(calls) >= count


def on_node(obj: dict[str, Any]) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


async def test_one_watch_feeds_every_handler_and_a_slow_one_blocks_only_itself() -> None:
    release = asyncio.Event()
    slow: list[str] = []
    fast: list[str] = []

    async def slow_add(obj: dict[str, Any]) -> None:
        await release.wait()
        slow.append(obj["metadata"]["name"])

    server = ScriptedApiServer(
        pod_list("10", pod("a", "5", spec={"nodeName": "n1"})),
        watch_stream(event_line("ADDED", pod("b", "11", spec={"nodeName": "n1"})),
                     event_line("MODIFIED", pod("a", "12", spec={"nodeName": "n2"})),
                     event_line("DELETED", pod("b", "13", spec={"nodeName": "n1"}))))
    async with server.client() as client:
        factory = SharedInformerFactory(client)
        pods = factory.informer("pods")
        assert factory.informer("pods") is pods, "one informer per resource"
        pods.add_indexers({"node": on_node})
        pods.add_event_handler(on_add=slow_add, name="slow")
        fast_listener = pods.add_event_handler(
            on_add=lambda o: fast.append("add " + o["metadata"]["name"]),
            on_update=lambda old, new: fast.append("update " + new["metadata"]["name"]),
            on_delete=lambda o: fast.append("delete " + o["metadata"]["name"]), name="fast")
        factory.start()
        async with asyncio.timeout(10):
            await server.exhausted.wait()
            await factory.wait_for_cache_sync()
            await fast_listener.wait_synced()
        await eventually(lambda: at_least(fast, 4), timeout=10, what="4 fast calls")
        assert fast == ["add a", "add b", "update a", "delete b"]
        assert slow == []
        assert server.requests.count("list") == 1
        assert [p["metadata"]["name"] for p in pods.by_index("node", "n2")] == ["a"]
        assert pods.by_index("node", "n1") == []

        late: list[str] = []
        late_listener = pods.add_event_handler(
            on_add=lambda o: late.append(o["metadata"]["name"]), name="late")
        async with asyncio.timeout(10):
            await late_listener.wait_synced()
        assert late == ["a"], "a handler added late gets the store's objects first"

        release.set()
        await eventually(lambda: at_least(slow, 2), timeout=10, what="2 slow calls")
        assert slow == ["a", "b"]
        await factory.shutdown()
