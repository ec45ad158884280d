"""The kubelet's events about pods: written in the order they happen, off the sync path
(an event is a hint: a sync never waits for one)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from kubelet.runtime import pod_ref

log = logging.getLogger(__name__)


class Recorder(Protocol):
    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    field_path: str | None = None) -> None: ...


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
        self.queue: asyncio.Queue[tuple[dict, str, str, str, str | None]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

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
        self.queue.put_nowait((involved, type_, reason, message, field_path))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain(), name="kubelet-events")

    async def _drain(self) -> None:
        assert self.recorder is not None
        while not self.queue.empty():
            involved, type_, reason, message, field_path = self.queue.get_nowait()
            await self.recorder.event(involved, type_, reason, message, field_path=field_path)

    async def flush(self, wait_seconds: float = 5.0) -> None:
        if self.task is not None:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                async with asyncio.timeout(wait_seconds):
                    await asyncio.shield(self.task)
