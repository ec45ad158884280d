"""The kubelet's ConfigMap and Secret managers (after pkg/kubelet/configmap and
pkg/kubelet/secret with the Watch change-detection strategy,
pkg/kubelet/util/manager/watch_based_manager.go).

A pod is registered when the kubelet starts syncing it: each ConfigMap and Secret it
references (`common.pod_refs`) gets one watch of that single object
(`fieldSelector=metadata.name=NAME` in its namespace, the only list/watch the Node
authorizer allows a node), shared by every pod that references it, and stopped when the
last of them is unregistered. `get` answers from the watch's store once it has listed;
a change to a watched object calls `on_change` with the pods that reference it (the
kubelet then refreshes their volumes). What the Node authorizer refuses never lists: the
first `get` waits at most `sync_timeout` for it, then fails like kube's
("failed to sync configmap cache: timed out waiting for the condition").

The Services are the `ServiceLister`'s: one list+watch of every Service, as kubelet.go's
serviceLister, for the service-link variables (`kubelet.env.service_env`); a container
created before it has listed waits at most `sync_timeout`, then fails with kube's message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.client import ApiClient
from common.informer import Informer
from common.pod_refs import pod_references
from kubelet.env import CONFIGMAP, SECRET, EnvSources, not_found, service_env

log = logging.getLogger(__name__)

SYNC_TIMEOUT_SECONDS = 10.0
KINDS = {CONFIGMAP: "configmaps", SECRET: "secrets"}


class ObjectError(Exception):
    """A referenced object the kubelet cannot have (kube's manager errors)."""


@dataclass
class _Watch:
    informer: Informer
    task: asyncio.Task[None]
    pods: set[str] = field(default_factory=set)  # the uids of the pods referencing it


Key = tuple[str, str, str]  # (kind, namespace, name)


def references(pod: Mapping[str, Any]) -> set[Key]:
    """The (kind, namespace, name) of each ConfigMap and Secret the pod references."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    refs = pod_references(pod)
    return ({(CONFIGMAP, namespace, n) for n in refs.configmaps}
            | {(SECRET, namespace, n) for n in refs.secrets})


async def wait_listed(informer: Informer, timeout: float, message: str) -> None:
    if informer.has_synced:
        return
    try:
        async with asyncio.timeout(timeout):
            await informer.wait_synced()
    except TimeoutError:
        raise ObjectError(message) from None


class ServiceLister:
    """Every Service, for the pods' service-link variables."""

    def __init__(self, client: ApiClient, *, sync_timeout: float = SYNC_TIMEOUT_SECONDS) -> None:
        self.informer = Informer(client, "services", name="kubelet services")
        self.sync_timeout = sync_timeout
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.informer.run(), name="service-informer")

    async def env_for(self, pod: Mapping[str, Any]) -> dict[str, str]:
        await wait_listed(self.informer, self.sync_timeout,
                          "services have not yet been read at least once, cannot construct "
                          "envvars")
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        links = (pod.get("spec") or {}).get("enableServiceLinks") is not False
        return service_env(self.informer.list(), namespace, enable_service_links=links)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


class ObjectManager:
    """Watch-based ConfigMap and Secret managers of one kubelet (and its Service lister)."""

    def __init__(self, client: ApiClient, *, on_change: Callable[[set[str]], Any] | None = None,
                 sync_timeout: float = SYNC_TIMEOUT_SECONDS,
                 services: ServiceLister | None = None) -> None:
        self.client = client
        self.services = services
        self.on_change = on_change
        self.sync_timeout = sync_timeout
        self.watches: dict[Key, _Watch] = {}
        self.pods: dict[str, set[Key]] = {}  # uid -> what it references

    def register_pod(self, uid: str, pod: Mapping[str, Any]) -> None:
        """Watch what the pod references now (and stop watching what it no longer does)."""
        wanted = references(pod)
        for key in self.pods.get(uid, set()) - wanted:
            self._release(uid, key)
        self.pods[uid] = wanted
        for key in wanted:
            watch = self.watches.get(key)
            if watch is None:
                watch = self._start(key)
            watch.pods.add(uid)

    def unregister_pod(self, uid: str) -> None:
        for key in self.pods.pop(uid, set()):
            self._release(uid, key)

    def _start(self, key: Key) -> _Watch:
        kind, namespace, name = key

        def changed(*_: Any) -> None:
            watch = self.watches.get(key)
            if watch is not None and self.on_change is not None:
                self.on_change(set(watch.pods))

        informer = Informer(self.client, KINDS[kind], namespace=namespace,
                            field_selector=f"metadata.name={name}", on_add=changed,
                            on_update=changed, on_delete=changed,
                            name=f"kubelet {kind} {namespace}/{name}")
        task = asyncio.create_task(informer.run(), name=f"watch {kind} {namespace}/{name}")
        watch = _Watch(informer, task)
        self.watches[key] = watch
        log.info("%s/%s: watching %s", namespace, name, kind)
        return watch

    def _release(self, uid: str, key: Key) -> None:
        watch = self.watches.get(key)
        if watch is None:
            return
        watch.pods.discard(uid)
        if not watch.pods:
            del self.watches[key]
            watch.task.cancel()
            log.info("%s/%s: no pod references the %s any more: stopped watching it",
                     key[1], key[2], key[0])

    async def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The object as last seen (None: it does not exist); ObjectError when the pod was
        not registered or the watch could not list in time."""
        watch = self.watches.get((kind, namespace, name))
        if watch is None:
            raise ObjectError(f"{kind} {namespace}/{name} not registered")
        await wait_listed(watch.informer, self.sync_timeout,
                          f"failed to sync {kind} cache: timed out waiting for the condition")
        return watch.informer.get(f"{namespace}/{name}")

    async def require(self, kind: str, namespace: str, name: str) -> Mapping[str, Any]:
        found = await self.get(kind, namespace, name)
        if found is None:
            raise ObjectError(not_found(kind, name))
        return found

    async def env_sources(self, pod: Mapping[str, Any],
                          container: Mapping[str, Any]) -> EnvSources:
        """The objects one container's env and envFrom reference (None where missing),
        and the pod's service links."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        only = {"spec": {"containers": [container]}}
        wanted = references(only)
        configmaps: dict[str, Mapping[str, Any] | None] = {}
        secrets: dict[str, Mapping[str, Any] | None] = {}
        for kind, _, name in wanted:
            found = await self.get(kind, namespace, name)
            (configmaps if kind == CONFIGMAP else secrets)[name] = found
        services = await self.services.env_for(pod) if self.services is not None else {}
        return EnvSources(configmaps=configmaps, secrets=secrets, services=services)

    async def stop(self) -> None:
        if self.services is not None:
            await self.services.stop()
        tasks = [w.task for w in self.watches.values()]
        self.watches.clear()
        self.pods.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
