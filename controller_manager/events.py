"""The controllers' event recorder, as client-go's record.EventBroadcaster gives
kube-controller-manager: recording never waits for the write (the broadcaster's queue),
and the EventCorrelator's spam filter drops events about one object from one source
beyond a burst of 25, refilled at one per 5 minutes (EventSourceObjectSpamFilter), so a
ReplicaSet creating 1,000 pods writes a few dozen `SuccessfulCreate` events, not 1,000.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from common.client import ApiClient
from common.events import EventRecorder, involved_object_of

log = logging.getLogger("controller_manager.events")

SPAM_BURST = 25  # client-go's defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # defaultSpamQPS: one every 5 minutes
MAX_KEYS = 4096  # maxLruCacheEntries


@dataclass
class Bucket:
    tokens: float
    at: float


class SpamFilter:
    """A token bucket per (source, involved object) key (pure but for the clock given)."""

    def __init__(self, burst: int = SPAM_BURST, qps: float = SPAM_QPS) -> None:
        self.burst = burst
        self.qps = qps
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()

    def allow(self, key: str, now: float) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(float(self.burst), now)
            while len(self._buckets) > MAX_KEYS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.qps)
            bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


def spam_key(source: dict[str, str], involved: dict[str, str]) -> str:
    """getSpamKey: the source and the involved object (not the reason or message)."""
    return "/".join([source.get("component", ""), source.get("host", ""),
                     involved.get("kind", ""), involved.get("namespace", ""),
                     involved.get("name", ""), involved.get("uid", ""),
                     involved.get("apiVersion", "")])


class ControllerRecorder(EventRecorder):
    """Fire-and-forget, spam-filtered events (the writes go on in background tasks)."""

    def __init__(self, client: ApiClient, *, component: str,
                 spam_filter: SpamFilter | None = None) -> None:
        super().__init__(client, component=component)
        self.spam_filter = spam_filter or SpamFilter()
        self._writes: set[asyncio.Task[None]] = set()

    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None, at: float | None = None,
                    action: str | None = None,
                    annotations: dict[str, str] | None = None) -> None:
        at = time.time() if at is None else at
        involved = involved_object_of(obj, field_path=field_path)
        if not self.spam_filter.allow(spam_key(self.source, involved), time.monotonic()):
            log.debug("event dropped by the spam filter: %s %s/%s %s", reason,
                      involved.get("namespace", ""), involved.get("name", ""), message)
            return
        task = asyncio.create_task(super().event(obj, type_, reason, message,
                                                 field_path=field_path, at=at, action=action,
                                                 annotations=annotations),
                                   name=f"event {reason}")
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
