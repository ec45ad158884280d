"""Creating and deleting an owner's pods, as kube's controllers do through
`controller.RealPodControl` and `slowStartBatch`: each write logged and recorded as an
event on the owner in kube's words (`SuccessfulCreate` "Created pod: NAME",
`FailedCreate` "Error creating: ...", `SuccessfulDelete` "Deleted pod: NAME",
`FailedDelete` "Error deleting: ..."), with the owner's `Expectations` kept right: what
failed, or was never tried, will not show up in the informer and is not waited for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from common.client import ApiClient
from common.errors import ApiError, Conflict, NotFound
from common.events import EventRecorder
from controller_manager.controller import uid_of
from controller_manager.pods import Expectations, slow_start_batches

log = logging.getLogger("controller_manager")

Object = dict[str, Any]
# Writes in flight at once per controller: as many as the client's pool keeps alive
# (controller_manager.app.MAX_CONNECTIONS); more would only queue inside httpcore's pool,
# whose bookkeeping grows with every queued request.
IN_FLIGHT = 64


def first_error(results: Sequence[object]) -> Exception | None:
    for result in results:
        if isinstance(result, Exception):
            return result
        if isinstance(result, BaseException):
            return RuntimeError(str(result))
    return None


class PodControl:
    def __init__(self, client: ApiClient, recorder: EventRecorder,
                 expectations: Expectations, *, owner_kind: str) -> None:
        self.client = client
        self.recorder = recorder
        self.expectations = expectations
        self.owner_kind = owner_kind.lower()  # for the logs: "replicaset web-5d8f"
        self.in_flight = asyncio.Semaphore(IN_FLIGHT)

    async def create(self, owner: Object, key: str, pods: Sequence[Object]) -> None:
        """Create `pods` in slow-start batches (1, 2, 4, ...: a template the apiserver
        refuses fails once, not a thousand times), expecting each; the first error is
        raised after its batch, and the rest are not tried."""
        self.expectations.expect(key, add=len(pods))
        start = 0
        for batch in slow_start_batches(len(pods)):
            results = await asyncio.gather(
                *(self.create_one(owner, pod) for pod in pods[start:start + batch]),
                return_exceptions=True)
            start += batch
            error = first_error(results)
            if error is not None:
                failed = sum(1 for r in results if isinstance(r, BaseException))
                self.expectations.creation_observed(key, failed + len(pods) - start)
                raise error

    async def create_one(self, owner: Object, pod: Object) -> None:
        namespace = str(owner["metadata"]["namespace"])
        try:
            async with self.in_flight:
                created = await self.client.create("pods", pod, namespace=namespace)
        except ApiError as e:
            await self.recorder.event(owner, "Warning", "FailedCreate",
                                      f"Error creating: {e.message}")
            raise
        name = created["metadata"]["name"]
        log.info("%s %s/%s: created pod %s", self.owner_kind, namespace,
                 owner["metadata"].get("name"), name)
        await self.recorder.event(owner, "Normal", "SuccessfulCreate", f"Created pod: {name}")

    async def delete(self, owner: Object, key: str, victims: Sequence[Mapping[str, Any]], *,
                     expect: bool = True) -> None:
        """Delete `victims` at once (expecting each when `expect`); the first error is
        raised once all were tried."""
        if expect:
            self.expectations.expect(key, deletes=[uid_of(p) for p in victims])
        results = await asyncio.gather(*(self.delete_one(owner, key, p) for p in victims),
                                       return_exceptions=True)
        error = first_error(results)
        if error is not None:
            raise error

    async def delete_one(self, owner: Object, key: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        name = str(meta.get("name"))
        try:
            async with self.in_flight:
                await self.client.delete("pods", name, namespace=str(meta.get("namespace")),
                                         preconditions={"uid": uid_of(pod)})
        except (NotFound, Conflict):
            self.expectations.deletion_observed(key, uid_of(pod))  # gone: no event comes
            return
        except ApiError as e:
            self.expectations.deletion_observed(key, uid_of(pod))
            await self.recorder.event(owner, "Warning", "FailedDelete",
                                      f"Error deleting: {e.message}")
            raise
        log.info("%s %s: deleted pod %s", self.owner_kind, key, name)
        await self.recorder.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
