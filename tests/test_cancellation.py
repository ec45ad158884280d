"""A stop cancels what waits with a timeout, even when the wait ends in the same instant.

Python 3.11's asyncio.wait_for returns the awaited result when a cancel arrives as it
completes (cpython gh-86296), so the cancel is lost: the apiserver's lifespan once hung
stopping a controller whose consistent LIST was answered just as it was cancelled. These
race the two on purpose; `asyncio.wait_for` is banned outside tests (pyproject's TID251).
"""

from __future__ import annotations

import asyncio

import pytest

from apiserver.cacher import ResourceCache
from scheduler.queue import SchedulingQueue


class StalledStorage:
    """A store whose marker writes never return: only the test answers the waiters."""

    async def bump_revision(self, key: str) -> int:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_wait_fresh_is_cancelled_when_answered_in_the_same_instant() -> None:
    cache = ResourceCache(StalledStorage(), "/r/pods/",  # type: ignore[arg-type]
                          lambda obj: ({}, {}))
    cache.ready = True
    waiting = asyncio.create_task(cache.wait_fresh(5, timeout=30))
    await asyncio.sleep(0)
    [(_, answer)] = cache._waiters
    answer.set_result(True)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert cache._pump is not None
    cache._pump.cancel()


async def test_queue_pop_is_cancelled_when_a_pod_arrives_in_the_same_instant() -> None:
    def pod(name: str) -> dict[str, object]:
        return {"metadata": {"namespace": "default", "name": name, "uid": name}, "spec": {}}

    queue = SchedulingQueue()
    queue.add(pod("backing-off"))
    queue.failed(await queue.pop(), unschedulable=True)  # pop now sleeps with a timeout
    popping = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    assert queue.seconds_until_next_backoff()
    queue.add(pod("web"))
    popping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await popping
