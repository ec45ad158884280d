"""The namespace controller: the built-in namespaces exist, and a Terminating namespace is
emptied, then removed.

Kubernetes runs this in kube-controller-manager; kubelite has none, so the apiserver's
lifespan starts it in-process, given the registry. The store keeps only the rules
(apiserver/resources/namespaces.py): the built-in namespaces cannot be deleted, a DELETE
marks a namespace Terminating, nothing may be created in a Terminating namespace. The
controller watches namespaces and, for each Terminating one, deletes everything in it (pods
gracefully, so their kubelets stop the containers first) and removes the namespace once
nothing is left. Its first list after a start picks up what an earlier run left Terminating.
"""

from __future__ import annotations

import asyncio
import logging

from apiserver import managed_fields, objects
from apiserver.registry import Registry
from apiserver.resources import RESOURCES
from apiserver.resources.namespaces import DEFAULT_NAMESPACES, NAMESPACES, is_terminating
from apiserver.storage import KeyExists, StorageError, Unavailable
from apiserver.watch import changes
from common import errors

log = logging.getLogger("apiserver.namespaces")

FINALIZE_INTERVAL = 1.0
RETRY_INTERVAL = 1.0


async def ensure_default_namespaces(registry: Registry) -> None:
    for name in DEFAULT_NAMESPACES:
        obj = objects.default_object(NAMESPACES, objects.prepare_for_create(
            NAMESPACES, {"metadata": {"name": name}}, namespace=None))
        obj = managed_fields.record_create(NAMESPACES, obj, manager="kube-apiserver")
        try:
            await registry.storage.create(registry.key(NAMESPACES, None, name), obj)
            log.info("created namespace %s", name)
        except KeyExists:
            pass


class NamespaceController:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._run: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        self._run = asyncio.create_task(self.run(), name="namespace controller")

    async def stop(self) -> None:
        tasks = [*self._tasks.values(), *([self._run] if self._run else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self) -> None:
        while True:
            try:
                await ensure_default_namespaces(self.registry)
                break
            except Unavailable as e:
                log.warning("etcd not reachable yet (%s); retrying", e)
                await asyncio.sleep(RETRY_INTERVAL)
        while True:
            try:
                await self._watch()
            except StorageError as e:
                log.warning("namespace watch: %s", e)
            except errors.ApiError as e:
                log.warning("namespace watch: %s", e.message)
            await asyncio.sleep(RETRY_INTERVAL)

    async def _watch(self) -> None:
        """List and watch namespaces until the watch ends; finalize every Terminating one."""
        async for event in changes(self.registry, NAMESPACES):
            namespace = event.item.obj
            if event.type in ("ADDED", "MODIFIED") and is_terminating(namespace):
                self.finalize(namespace["metadata"]["name"])

    def finalize(self, name: str) -> None:
        self.registry.terminating_namespaces.add(name)
        if name not in self._tasks or self._tasks[name].done():
            log.info("namespace %s is terminating", name)
            self._tasks[name] = asyncio.create_task(self._finalize(name),
                                                    name=f"finalize namespace {name}")

    async def _finalize(self, name: str) -> None:
        while True:
            try:
                if await self._empty(name):
                    await self._remove(name)
                    log.info("namespace %s: emptied and deleted", name)
                    self.registry.terminating_namespaces.discard(name)
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
                    # Background, as kube's namespace controller: no kind's default
                    # (batch/v1 Jobs orphan) may leave an orphan finalizer behind
                    await self.registry.delete(resource, name, item["metadata"]["name"],
                                               propagation_policy="Background")
                except errors.NotFound:
                    pass
        return left == 0

    async def _remove(self, name: str) -> None:
        # Not registry.delete: for a namespace that only marks it Terminating.
        key = self.registry.key(NAMESPACES, None, name)
        kv = await self.registry.storage.get(key)
        if kv is not None:
            await self.registry.storage.delete(key, expected_revision=kv.mod_revision)
