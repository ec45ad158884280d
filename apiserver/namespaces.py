"""Namespace deletion, the way Kubernetes does it (NamespaceLifecycle + the namespace
controller), kept inside the apiserver because kubelite has no controller manager.

Deleting a namespace marks it `Terminating`; a finalizer task then deletes everything in
it (pods gracefully, so their kubelets stop the containers first) and removes the
namespace once nothing is left. Creating in a terminating namespace is refused. The
built-in namespaces cannot be deleted. An apiserver that restarts resumes the
finalization of every namespace it finds terminating.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from apiserver import objects
from apiserver.resources import RESOURCES
from apiserver.storage import KeyNotFound, RevisionMismatch, StorageError
from common import errors
from common.timestamps import rfc3339

if TYPE_CHECKING:
    from apiserver.registry import Registry

log = logging.getLogger("apiserver.namespaces")

IMMORTAL = frozenset({"default", "kube-system", "kube-public"})
FINALIZE_INTERVAL = 1.0


def forbidden_delete(name: str) -> errors.Forbidden:
    return errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                            details={"name": name, "kind": "namespaces"})


def forbidden_create(resource_name: str, name: str, namespace: str) -> errors.Forbidden:
    return errors.Forbidden(
        f'{resource_name} "{name}" is forbidden: unable to create new content in namespace '
        f'{namespace} because it is being terminated',
        details={"name": name, "kind": resource_name})


def mark_terminating(namespace: dict[str, Any], *, now: datetime | None = None,
                     ) -> dict[str, Any] | None:
    """The namespace with deletionTimestamp and phase Terminating; None if it already is."""
    meta = namespace.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    out = dict(namespace)
    out["metadata"] = {**meta, "deletionTimestamp": rfc3339(now),
                       "deletionGracePeriodSeconds": 0}
    out["status"] = {**(namespace.get("status") or {}), "phase": "Terminating"}
    return out


def is_terminating(namespace: dict[str, Any]) -> bool:
    return bool((namespace.get("metadata") or {}).get("deletionTimestamp"))


class NamespaceLifecycle:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.terminating: set[str] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def check_create(self, resource_name: str, name: str, namespace: str | None) -> None:
        if namespace is not None and namespace in self.terminating:
            raise forbidden_create(resource_name, name, namespace)

    async def delete(self, name: str) -> dict[str, Any]:
        """Mark the namespace Terminating and start emptying it; returns the namespace."""
        if name in IMMORTAL:
            raise forbidden_delete(name)
        resource = RESOURCES["namespaces"]
        key = self.registry.key(resource, None, name)
        while True:
            kv = await self.registry.storage.get(key)
            if kv is None:
                raise errors.not_found("namespaces", name)
            marked = mark_terminating(kv.value)
            if marked is None:
                self.start(name)
                return objects.with_resource_version(kv.value, kv.mod_revision)
            try:
                revision = await self.registry.storage.update(
                    key, marked, expected_revision=kv.mod_revision)
            except RevisionMismatch:
                continue
            except KeyNotFound:
                raise errors.not_found("namespaces", name) from None
            log.info("namespace %s is terminating", name)
            self.start(name)
            return objects.with_resource_version(marked, revision)

    def start(self, name: str) -> None:
        self.terminating.add(name)
        if name not in self._tasks or self._tasks[name].done():
            self._tasks[name] = asyncio.create_task(self._finalize(name),
                                                    name=f"finalize namespace {name}")

    async def resume(self) -> None:
        """Pick up the namespaces left terminating by an earlier run."""
        items, _ = await self.registry.list_objects(RESOURCES["namespaces"], None)
        for namespace in items:
            if is_terminating(namespace):
                self.start(namespace["metadata"]["name"])

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def _finalize(self, name: str) -> None:
        while True:
            try:
                if await self._empty(name):
                    await self._remove(name)
                    log.info("namespace %s: emptied and deleted", name)
                    self.terminating.discard(name)
                    return
            except StorageError as e:
                log.warning("namespace %s: finalizing paused: %s", name, e)
            except errors.ApiError as e:
                log.warning("namespace %s: finalizing: %s", name, e.message)
            await asyncio.sleep(FINALIZE_INTERVAL)

    async def _empty(self, name: str) -> bool:
        """Delete what is in the namespace; True once nothing is left."""
        left = 0
        for resource in RESOURCES.values():
            if not resource.namespaced:
                continue
            items, _ = await self.registry.list_objects(resource, name)
            for item in items:
                left += 1
                if (item.get("metadata") or {}).get("deletionTimestamp"):
                    continue  # pods already stopping on their node
                try:
                    await self.registry.delete(resource, name, item["metadata"]["name"])
                except errors.NotFound:
                    pass
        return left == 0

    async def _remove(self, name: str) -> None:
        key = self.registry.key(RESOURCES["namespaces"], None, name)
        kv = await self.registry.storage.get(key)
        if kv is not None:
            await self.registry.storage.delete(key, expected_revision=kv.mod_revision)
