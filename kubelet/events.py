"""The kubelet's events about pods: written in the order they happen, off the sync path
(an event is a hint: a sync never waits for one). Each carries the instant it happened
as its eventTime, and the pod's instants noted so far (when the kubelet first saw it,
when its sandbox was made) as annotations, which `kubectl timeline` draws."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

from common import timeline
from common.timestamps import micro_time
from kubelet.runtime import pod_ref

log = logging.getLogger(__name__)


class Recorder(Protocol):
    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None, at: float | None = None,
                    annotations: dict[str, str] | None = None) -> None: ...


MAX_NOTED_PODS = 4096
Queued = tuple[dict, str, str, str, str | None, float, dict[str, str]]


def container_field_path(pod: Mapping[str, Any], name: str) -> str:
    """The involvedObject.fieldPath of an event about one container of `pod`."""
    spec = pod.get("spec") or {}
    for key in ("initContainers", "ephemeralContainers"):
        if any(c.get("name") == name for c in spec.get(key) or []):
            return f"spec.{key}{{{name}}}"
    return f"spec.containers{{{name}}}"


class EventSink:
    """Queues events and writes them one after the other in a background task."""

    def __init__(self, recorder: Recorder | None) -> None:
        self.recorder = recorder
        self.queue: asyncio.Queue[Queued] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.instants: OrderedDict[str, dict[str, str]] = OrderedDict()

    def note(self, uid: str, key: str, value: str | None = None) -> None:
        """Remember, for the Events about pod `uid`, the annotation `key`: `value`, by
        default the instant now (a MicroTime)."""
        if not timeline.RECORDING:
            return
        self.instants.setdefault(uid, {})[key] = micro_time() if value is None else value
        self.instants.move_to_end(uid)
        while len(self.instants) > MAX_NOTED_PODS:
            self.instants.popitem(last=False)

    def emit(self, pod: Mapping[str, Any], type_: str, reason: str, message: str, *,
             container: str | None = None) -> None:
        ref = pod_ref(pod)
        log.debug("%s: %s %s: %s", ref.key, type_, reason, message)
        if self.recorder is None:
            return
        involved = {"kind": "Pod", "apiVersion": "v1",
                    "metadata": {k: v for k, v in (pod.get("metadata") or {}).items()
                                 if k in ("name", "namespace", "uid", "resourceVersion")}}
        field_path = container_field_path(pod, container) if container else None
        noted = dict(self.instants.get(ref.uid) or {})
        self.queue.put_nowait((involved, type_, reason, message, field_path, time.time(),
                               noted))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain(), name="kubelet-events")

    async def _drain(self) -> None:
        assert self.recorder is not None
        while not self.queue.empty():
            involved, type_, reason, message, field_path, at, noted = self.queue.get_nowait()
            await self.recorder.event(involved, type_, reason, message, field_path=field_path,
                                      at=at, annotations=noted or None)

    async def flush(self, wait_seconds: float = 5.0) -> None:
        if self.task is not None:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                async with asyncio.timeout(wait_seconds):
                    await asyncio.shield(self.task)
