"""The ServiceAccounts controller: every active namespace has a `default` ServiceAccount.

kube-controller-manager's ServiceAccountsController (pkg/controller/serviceaccount) watches
namespaces and ServiceAccounts: a namespace added or updated, or one of the ServiceAccounts
it ensures deleted, makes it create what is missing in that namespace, unless the namespace
is terminating. kubelite has no controller-manager, so the apiserver's controller process
runs it, given the registry, next to the namespace controller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from apiserver.registry import Registry
from apiserver.resources.base import Resource
from apiserver.resources.namespaces import NAMESPACES, is_terminating
from apiserver.resources.serviceaccounts import DEFAULT_SERVICE_ACCOUNT, SERVICE_ACCOUNTS
from apiserver.storage import StorageError
from apiserver.watch import Change, changes
from common import errors

log = logging.getLogger("apiserver.serviceaccounts")

RETRY_INTERVAL = 1.0
MANAGED = (DEFAULT_SERVICE_ACCOUNT,)


def namespace_to_sync(change: Change) -> str | None:
    """The namespace a namespace event asks to sync: an active one added or updated."""
    obj = change.item.obj
    if change.type == "DELETED" or is_terminating(obj):
        return None
    return str(obj["metadata"]["name"])


def service_account_to_sync(change: Change) -> str | None:
    """kube's serviceAccountDeleted: a managed ServiceAccount gone -> its namespace."""
    meta = change.item.obj["metadata"]
    if change.type == "DELETED" and meta.get("name") in MANAGED:
        return str(meta["namespace"])
    return None


class PerNamespaceController:
    """A controller keeping something in every active namespace: it lists and watches
    `watches` (each resource with what an event of it asks to sync) and syncs the namespace
    an event names, one at a time."""

    def __init__(self, registry: Registry,
                 watches: list[tuple[Resource, Callable[[Change], str | None]]]) -> None:
        self.registry = registry
        self.watches = watches
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self.run(resource, to_sync),
                                           name=f"{type(self).__name__}: {resource.plural}")
                       for resource, to_sync in self.watches]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def run(self, resource: Resource, to_sync: Callable[[Change], str | None]) -> None:
        while True:
            try:
                await self._watch(resource, to_sync)
            except StorageError as e:
                log.warning("%s watch: %s", resource.plural, e)
            except errors.ApiError as e:
                log.warning("%s watch: %s", resource.plural, e.message)
            await asyncio.sleep(RETRY_INTERVAL)

    async def _watch(self, resource: Resource, to_sync: Callable[[Change], str | None]) -> None:
        """List and watch `resource` until the watch ends, syncing what it names."""
        async for event in changes(self.registry, resource):
            namespace = to_sync(event)
            if namespace is not None:
                await self.sync(namespace)

    async def sync(self, namespace: str) -> None:
        raise NotImplementedError


class ServiceAccountsController(PerNamespaceController):
    def __init__(self, registry: Registry) -> None:
        super().__init__(registry, [(NAMESPACES, namespace_to_sync),
                                    (SERVICE_ACCOUNTS, service_account_to_sync)])

    async def sync(self, namespace: str) -> None:
        """Create the managed ServiceAccounts missing in `namespace` (kube's syncNamespace)."""
        if namespace in self.registry.terminating_namespaces:
            return
        for name in MANAGED:
            try:
                await self.registry.get(SERVICE_ACCOUNTS, namespace, name)
                continue
            except errors.NotFound:
                pass
            try:
                await self.registry.create(SERVICE_ACCOUNTS, namespace,
                                           {"metadata": {"name": name}},
                                           manager="kube-controller-manager")
                log.info("created serviceaccount %s/%s", namespace, name)
            except (errors.AlreadyExists, errors.Forbidden, errors.NotFound):
                pass  # created meanwhile, or the namespace is going or gone
