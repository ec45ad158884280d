"""common.workqueue: client-go's workqueue semantics (dedup, processing, delays)."""

from __future__ import annotations

import asyncio

from common.backoff import ItemBackoff
from common.workqueue import WorkQueue


async def test_a_key_is_queued_once_however_often_it_is_added() -> None:
    queue = WorkQueue()
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["a", "b"]
    assert len(queue) == 0


async def test_a_key_added_while_processing_comes_back_after_done_only() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0, "never handed to a second worker while being processed"
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_get_waits_for_a_key_and_shut_down_releases_waiters() -> None:
    queue = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    queue.add("x")
    assert await getter == "x"
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    queue.shut_down()
    assert await waiting is None
    queue.add("y")
    assert await queue.get() is None


async def test_add_after_keeps_the_earliest_time() -> None:
    queue = WorkQueue()
    queue.add_after("k", 30)
    queue.add_after("k", 0.05)
    queue.add_after("k", 10)
    async with asyncio.timeout(5):
        assert await queue.get() == "k"
    queue.done("k")
    await asyncio.sleep(0.1)
    assert len(queue) == 0


async def test_rate_limited_adds_back_off_per_key_until_forgotten() -> None:
    queue = WorkQueue(rate_limiter=ItemBackoff(base=0.01, cap=1.0))
    for _ in range(3):
        queue.add_rate_limited("k")
    assert queue.num_requeues("k") == 3
    async with asyncio.timeout(5):
        assert await queue.get() == "k"  # the earliest (10 ms) wins
    queue.forget("k")
    assert queue.num_requeues("k") == 0
    queue.done("k")
