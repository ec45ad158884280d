"""The TTL-after-finished controller (pkg/controller/ttlafterfinished): a finished Job
(`Complete` or `Failed`) with `spec.ttlSecondsAfterFinished` is deleted that many seconds
after it finished, cascading to its pods (Foreground propagation, as kube's). A Job whose
time has not come is synced again when it does."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from common.client import ApiClient
from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from controller_manager.controller import QueueController, key_of, uid_of
from controller_manager.pods import parse_time

log = logging.getLogger("controller_manager.ttlafterfinished")

NAME = "ttl-after-finished-controller"
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


def finish_time(job: Mapping[str, Any]) -> datetime | None:
    """When the Job's Complete or Failed condition became True."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def expires_at(job: Mapping[str, Any]) -> datetime | None:
    """When a finished Job with a TTL is due for deletion; None when it never is (no TTL,
    not finished, or being deleted already)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or (job.get("metadata") or {}).get("deletionTimestamp"):
        return None
    finished = finish_time(job)
    return None if finished is None else finished + timedelta(seconds=int(ttl))


# -- the controller ---------------------------------------------------------------------------


class TTLAfterFinishedController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.jobs = factory.informer("jobs")
        self.jobs.add_event_handler(on_add=self._changed,
                                    on_update=lambda _old, new: self._changed(new),
                                    name=f"{NAME} jobs")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.jobs]

    def _changed(self, job: Object) -> None:
        if expires_at(job) is not None:
            self.queue.add(key_of(job))

    async def sync(self, key: str) -> None:
        job = self.jobs.get(key)
        due = expires_at(job) if job is not None else None
        if job is None or due is None:
            return
        left = (due - datetime.now(UTC)).total_seconds()
        if left > 0:
            self.queue.add_after(key, left)
            return
        meta = job["metadata"]
        log.info("job %s: finished and its ttlSecondsAfterFinished (%s) has passed: "
                 "deleting it and its pods", key, job["spec"]["ttlSecondsAfterFinished"])
        try:
            await self.client.delete("jobs", str(meta["name"]), namespace=str(meta["namespace"]),
                                     preconditions={"uid": uid_of(job)},
                                     propagation_policy="Foreground")
        except (NotFound, Conflict):
            return  # gone already, or another Job of that name
