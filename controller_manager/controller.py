"""What every queue-driven controller shares: workers take keys from a WorkQueue and sync
them; a failed sync is retried with the key's back-off, a good one forgets it (client-go's
processNextWorkItem); and `QueueController`, the shell around that loop (its client,
recorder, queue, and a `run` that waits for its informers' caches first)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from common.client import ApiClient
from common.errors import ApiError
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from common.workqueue import WorkQueue

log = logging.getLogger("controller_manager")

Sync = Callable[[str], Awaitable[None]]


def key_of(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, the work queue's key (MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


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


class QueueController:
    """A controller whose event handlers enqueue keys that `sync` reconciles."""

    name = "controller"

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        self.client = factory.client
        # Where the controller's writes of many objects go (a lean pool of their own in
        # the controller-manager: common.http_pool); else the client.
        self.writer = writer or factory.client
        self.recorder = recorder
        self.workers = workers
        self.queue = WorkQueue(self.name)

    def synced_before_start(self) -> Sequence[SharedInformer]:
        """The informers whose caches must be full before the first sync."""
        raise NotImplementedError

    async def sync(self, key: str) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self.synced_before_start()))
        log.info("%s: caches synced", self.name)
        try:
            await run_workers(self.queue, self.sync, workers=self.workers, name=self.name)
        finally:
            self.queue.shut_down()
