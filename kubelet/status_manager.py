"""The status manager: writes a pod's status whenever what the kubelet computes changes.

After kubelet's status manager (`pkg/kubelet/status/status_manager.go`). A pod worker
hands over *how* to compute the pod's status (a function of the pod object, closed over
what the runtime showed and why containers wait) as soon as it learns something — when
it first sees a pod, before pulling or creating anything, and after each change it
makes — and goes on with its sync. The manager writes through `pods/{name}/status`:

- at most one writer task per pod, alive only while there is something to write;
  updates that arrive meanwhile coalesce into one write of the newest state;
- nothing is written when the computed status equals the stored one;
- the status is computed from the freshest copy of the pod the kubelet has (the
  informer's, or the answer to its own last write) and sent as a merge patch carrying
  that copy's resourceVersion as a precondition. A write based on a stale copy gets
  409 Conflict and is computed again from the pod as it is now (GET), so it can never
  overwrite a newer status with an older view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from common.errors import ApiError, Conflict, NotFound
from kubelet.runtime import PodRef, pod_ref
from kubelet.status import status_patch, without_nulls

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
MAX_CONFLICTS = 3

# How to compute a pod's status from the pod object (its spec and the status stored).
StatusFunc = Callable[[Mapping[str, Any]], dict[str, Any]]


class PodStatusApi(Protocol):
    async def get(self, resource: str, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> dict: ...

    async def patch(self, resource: str, name: str, patch: dict, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict: ...


def resource_version(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def newer(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether `candidate` is a later version of the same pod than `current`."""
    return resource_version(candidate) > resource_version(current)


def same_status(stored: Mapping[str, Any], computed: Mapping[str, Any]) -> bool:
    return bool(without_nulls(dict(stored)) == without_nulls(dict(computed)))


def status_write(base: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch turning `base`'s status into `status`, valid only if the pod is
    still at `base`'s resourceVersion."""
    body: dict[str, Any] = {"status": status_patch(base.get("status") or {}, status)}
    rv = (base.get("metadata") or {}).get("resourceVersion")
    if rv:
        body["metadata"] = {"resourceVersion": str(rv)}
    return body


def describe_status(status: Mapping[str, Any]) -> str:
    """`Running [app=running, sidecar=waiting(CrashLoopBackOff)]`, for the log."""
    parts = []
    for container in [*(status.get("initContainerStatuses") or []),
                      *(status.get("containerStatuses") or [])]:
        state = container.get("state") or {}
        kind = next(iter(state), "?")
        reason = (state.get(kind) or {}).get("reason") if isinstance(state.get(kind), dict) \
            else None
        parts.append(f"{container.get('name')}={kind}" + (f"({reason})" if reason else ""))
    return f"{status.get('phase')} [{', '.join(parts)}]"


@dataclass
class _Pod:
    ref: PodRef
    pod: dict  # the freshest copy of the API object we know
    compute: StatusFunc | None = None
    status: dict[str, Any] | None = None  # the newest computed status
    dirty: bool = False
    gone: bool = False  # the API object is gone (or is another pod now)
    task: asyncio.Task[None] | None = None


class StatusManager:
    """Pod status writes for one kubelet, off the pod workers' sync path."""

    def __init__(self, api: PodStatusApi, *, retry_seconds: float = RETRY_SECONDS) -> None:
        self.api = api
        self.retry_seconds = retry_seconds
        self._pods: dict[str, _Pod] = {}

    # --- inputs ------------------------------------------------------------------------
    def set_status(self, pod: dict, compute: StatusFunc) -> dict[str, Any]:
        """Record how to compute `pod`'s status now; write it if it differs from the
        stored one. Returns the status computed from the freshest copy of the pod."""
        entry = self._entry(pod)
        entry.compute = compute
        entry.status = compute(entry.pod)
        if not same_status(entry.pod.get("status") or {}, entry.status):
            self._kick(entry)
        return entry.status

    def pod_updated(self, pod: dict) -> None:
        """A newer copy of the pod (informer): the next write starts from it, and a status
        someone else changed behind our back is written again.

        Only the status is looked at: the pod workers hand over a new status when a spec
        or deletion change means one, from a fresh runtime view."""
        entry = self._pods.get(pod_ref(pod).uid)
        if entry is None or not newer(pod, entry.pod):
            return
        entry.pod = pod
        if entry.compute is None or entry.gone or entry.status is None \
                or same_status(pod.get("status") or {}, entry.status):
            return
        entry.status = entry.compute(pod)
        if not same_status(pod.get("status") or {}, entry.status):
            self._kick(entry)

    def status(self, uid: str) -> dict[str, Any] | None:
        entry = self._pods.get(uid)
        return entry.status if entry is not None else None

    def pending(self, uid: str) -> bool:
        """Whether a write for this pod is queued or in flight."""
        entry = self._pods.get(uid)
        return entry is not None and entry.task is not None and not entry.task.done()

    def known_uids(self) -> set[str]:
        return set(self._pods)

    def forget(self, uid: str) -> None:
        """The pod is done with: drop it and cancel a write still in flight."""
        entry = self._pods.pop(uid, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()

    async def wait_idle(self, uid: str) -> None:
        """Until nothing is left to write for the pod (tests, shutdown)."""
        while (entry := self._pods.get(uid)) is not None and entry.task is not None \
                and not entry.task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(entry.task)

    async def stop(self) -> None:
        tasks = [e.task for e in self._pods.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- writing -----------------------------------------------------------------------
    def _entry(self, pod: dict) -> _Pod:
        ref = pod_ref(pod)
        entry = self._pods.get(ref.uid)
        if entry is None:
            entry = _Pod(ref=ref, pod=pod)
            self._pods[ref.uid] = entry
        elif newer(pod, entry.pod):
            entry.pod = pod
        return entry

    def _kick(self, entry: _Pod) -> None:
        if entry.gone:
            return
        entry.dirty = True
        if entry.task is None or entry.task.done():
            entry.task = asyncio.create_task(self._write_loop(entry),
                                             name=f"pod-status {entry.ref.key}")

    async def _write_loop(self, entry: _Pod) -> None:
        delay = self.retry_seconds
        while entry.dirty and not entry.gone:
            entry.dirty = False
            try:
                await self._write(entry)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                level = logging.WARNING if isinstance(e, ApiError | httpx.HTTPError) \
                    else logging.ERROR
                log.log(level, "%s: status write failed (%s: %s); retrying in %.1fs",
                        entry.ref.key, type(e).__name__, e, delay,
                        exc_info=level == logging.ERROR)
                entry.dirty = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            else:
                delay = self.retry_seconds

    async def _write(self, entry: _Pod) -> None:
        ref = entry.ref
        for _ in range(MAX_CONFLICTS):
            assert entry.compute is not None
            base = entry.pod
            status = entry.compute(base)
            entry.status = status
            if same_status(base.get("status") or {}, status):
                return
            try:
                written = await self.api.patch("pods", ref.name, status_write(base, status),
                                               namespace=ref.namespace, subresource="status")
            except NotFound:
                self._gone(entry, "the pod no longer exists")
                return
            except Conflict:
                # Our copy is stale: compute again from the pod as it is now.
                try:
                    fresh = await self.api.get("pods", ref.name, namespace=ref.namespace)
                except NotFound:
                    self._gone(entry, "the pod no longer exists")
                    return
                if pod_ref(fresh).uid != ref.uid:
                    self._gone(entry, f"the name is another pod's now (uid {pod_ref(fresh).uid})")
                    return
                log.debug("%s: status write conflicted at resourceVersion %s; now %s",
                          ref.key, resource_version(base), resource_version(fresh))
                entry.pod = fresh
                continue
            if pod_ref(written).uid == ref.uid and newer(written, entry.pod):
                entry.pod = written
            log.info("%s: status %s", ref.key, describe_status(status))
            return
        raise Conflict(f"pod {ref.key}: status kept conflicting after {MAX_CONFLICTS} tries")

    def _gone(self, entry: _Pod, why: str) -> None:
        log.info("%s: not writing its status: %s", entry.ref.key, why)
        entry.gone = True
