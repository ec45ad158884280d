"""The loop every queue-driven controller runs: workers take keys from a WorkQueue and
sync them; a failed sync is retried with the key's back-off, a good one forgets it
(client-go's processNextWorkItem)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx

from common.errors import ApiError
from common.workqueue import WorkQueue

log = logging.getLogger("controller_manager")

Sync = Callable[[str], Awaitable[None]]


async def process_next(queue: WorkQueue, sync: Sync, name: str) -> bool:
    """Sync one key; False once the queue is shut down."""
    key = await queue.get()
    if key is None:
        return False
    try:
        await sync(key)
        queue.forget(key)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        queue.add_rate_limited(key)
        log.warning("%s: syncing %s failed (retry %d): %s: %s", name, key,
                    queue.num_requeues(key), type(e).__name__, e,
                    exc_info=not isinstance(e, ApiError | httpx.HTTPError | OSError))
    finally:
        queue.done(key)
    return True


async def worker(queue: WorkQueue, sync: Sync, name: str) -> None:
    while await process_next(queue, sync, name):
        pass


async def run_workers(queue: WorkQueue, sync: Sync, *, workers: int, name: str) -> None:
    """`workers` concurrent workers on `queue` until cancelled or shut down."""
    await asyncio.gather(*(worker(queue, sync, name) for _ in range(max(1, workers))))
