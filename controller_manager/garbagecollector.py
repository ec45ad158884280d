"""The garbage collector (pkg/controller/garbagecollector), for the kinds kubelite serves:
dependents whose owners are gone are deleted, and the `orphan` and `foregroundDeletion`
finalizers the apiserver puts on an owner being deleted are carried out.

- A dependent (an object with ownerReferences) whose every owner is absent — not in our
  cache and a live GET says NotFound, or another uid — is deleted (background
  cascading: `kubectl delete deployment` removes its ReplicaSets, they their pods). One
  with some owners left only loses the dangling references.
- An owner being deleted with the `orphan` finalizer: its dependents lose their
  reference to it, then the finalizer is removed (so the owner goes, the dependents stay).
- With `foregroundDeletion`: its dependents are deleted, and once none is left the
  finalizer is removed, so the owner goes last.

A restart starts over from the informers' lists, so a cascade interrupted by a kill goes
on where it stopped. Not done: kube's full dependency graph over every discovered
resource (only the kinds below are watched) and the `blockOwnerDeletion` subtleties of
foreground deletion through several levels at once (each level is handled in turn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import ApiError, Conflict, NotFound
from common.informer import SharedInformer, SharedInformerFactory
from common.workqueue import WorkQueue
from controller_manager.controller import run_workers

log = logging.getLogger("controller_manager.garbagecollector")

NAME = "garbage-collector-controller"
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
# kind -> (resource, namespaced) for every kind this collector knows.
KINDS: dict[str, tuple[str, bool]] = {
    "Pod": ("pods", True), "ReplicaSet": ("replicasets", True),
    "Deployment": ("deployments", True), "Job": ("jobs", True), "Node": ("nodes", False),
    "Service": ("services", True), "EndpointSlice": ("endpointslices", True),
}
# The resources whose objects may be dependents (or owners) here.
WATCHED = ("pods", "replicasets", "deployments", "jobs", "services", "endpointslices")
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


def owner_refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in (obj.get("metadata") or {}).get("ownerReferences") or []
            if isinstance(r, Mapping)]


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def dependent_verdict(refs: list[Mapping[str, Any]], absent: set[str]) -> str:
    """"delete" when every owner is absent, "strip" when some are, else "keep"."""
    if not refs:
        return "keep"
    gone = [r for r in refs if r.get("uid") in absent]
    if len(gone) == len(refs):
        return "delete"
    return "strip" if gone else "keep"


def owner_action(owner: Mapping[str, Any]) -> str | None:
    """What a deleted owner's finalizers ask of us: "orphan", "foreground" or nothing."""
    if not (owner.get("metadata") or {}).get("deletionTimestamp"):
        return None
    found = finalizers(owner)
    if ORPHAN in found:
        return "orphan"
    if FOREGROUND in found:
        return "foreground"
    return None


# -- the controller ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Handlers:
    """One resource's informer callbacks."""

    collector: GarbageCollector
    resource: str

    def changed(self, obj: Object) -> None:
        self.collector._changed(self.resource, obj)

    def updated(self, _old: Object, new: Object) -> None:
        self.collector._changed(self.resource, new)

    def deleted(self, obj: Object) -> None:
        self.collector._deleted(self.resource, obj)


def object_key(resource: str, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{resource}|{meta.get('namespace') or ''}|{meta.get('name')}"


class GarbageCollector:
    def __init__(self, factory: SharedInformerFactory, *, workers: int = 5) -> None:
        self.client = factory.client
        self.workers = workers
        self.queue = WorkQueue(NAME)
        self.informers: dict[str, SharedInformer] = {}
        for resource in WATCHED:
            informer = factory.informer(resource)
            self.informers[resource] = informer
            handlers = Handlers(self, resource)
            informer.add_event_handler(on_add=handlers.changed, on_update=handlers.updated,
                                       on_delete=handlers.deleted, name=f"{NAME} {resource}")

    def _changed(self, resource: str, obj: Object) -> None:
        if owner_refs(obj) or owner_action(obj):
            self.queue.add(object_key(resource, obj))

    def _deleted(self, resource: str, obj: Object) -> None:
        """An owner went: its dependents may be garbage. A dependent went: an owner waiting
        in foreground deletion may be done."""
        uid = (obj.get("metadata") or {}).get("uid")
        for dep_resource, informer in self.informers.items():
            for dependent in informer.list():
                if any(r.get("uid") == uid for r in owner_refs(dependent)):
                    self.queue.add(object_key(dep_resource, dependent))
        for ref in owner_refs(obj):
            kind = KINDS.get(str(ref.get("kind")))
            if kind is not None and kind[0] in self.informers:
                namespace = (obj.get("metadata") or {}).get("namespace") if kind[1] else ""
                self.queue.add(f"{kind[0]}|{namespace or ''}|{ref.get('name')}")

    async def run(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self.informers.values()))
        log.info("%s: caches synced", NAME)
        try:
            await run_workers(self.queue, self.sync, workers=self.workers, name=NAME)
        finally:
            self.queue.shut_down()

    def _cached(self, resource: str, namespace: str, name: str) -> Object | None:
        informer = self.informers.get(resource)
        if informer is None:
            return None
        return informer.get(f"{namespace}/{name}" if namespace else name)

    async def sync(self, key: str) -> None:
        resource, namespace, name = key.split("|", 2)
        obj = self._cached(resource, namespace, name)
        if obj is None:
            return
        action = owner_action(obj)
        if action == "orphan":
            await self._orphan_dependents(resource, obj)
        elif action == "foreground":
            await self._delete_dependents(resource, obj)
        if owner_refs(obj) and not (obj.get("metadata") or {}).get("deletionTimestamp"):
            await self._collect(resource, obj)

    def _dependents(self, uid: str) -> list[tuple[str, Object]]:
        return [(resource, dep) for resource, informer in self.informers.items()
                for dep in informer.list()
                if any(r.get("uid") == uid for r in owner_refs(dep))]

    async def _owner_absent(self, ref: Mapping[str, Any], namespace: str) -> bool:
        kind = KINDS.get(str(ref.get("kind")))
        if kind is None:
            return False  # a kind we do not know: never collect on its account
        resource, namespaced = kind
        ns = namespace if namespaced else ""
        cached = self._cached(resource, ns, str(ref.get("name")))
        if cached is not None and (cached.get("metadata") or {}).get("uid") == ref.get("uid"):
            return False
        try:  # the cache may lag: ask the apiserver before deleting anything
            live = await self.client.get(resource, str(ref.get("name")),
                                         namespace=ns or None)
        except NotFound:
            return True
        return bool((live.get("metadata") or {}).get("uid") != ref.get("uid"))

    async def _collect(self, resource: str, obj: Object) -> None:
        meta = obj["metadata"]
        namespace = str(meta.get("namespace") or "")
        refs = owner_refs(obj)
        absent = {str(r.get("uid")) for r in refs if await self._owner_absent(r, namespace)}
        verdict = dependent_verdict(refs, absent)
        what = f"{resource} {namespace + '/' if namespace else ''}{meta['name']}"
        if verdict == "delete":
            try:
                await self.client.delete(resource, meta["name"], namespace=namespace or None,
                                         preconditions={"uid": str(meta.get("uid") or "")})
                log.info("deleted %s: its owners are gone", what)
            except (NotFound, Conflict):
                pass
        elif verdict == "strip":
            kept = [dict(r) for r in refs if r.get("uid") not in absent]
            await self._patch_refs(resource, obj, kept)
            log.info("%s: removed references to owners that are gone", what)

    async def _patch_refs(self, resource: str, obj: Object, refs: list[Object]) -> None:
        meta = obj["metadata"]
        try:
            await self.client.patch(resource, meta["name"], {"metadata": {
                "ownerReferences": refs, "resourceVersion": meta.get("resourceVersion")}},
                namespace=meta.get("namespace") or None)
        except NotFound:
            pass

    async def _remove_finalizer(self, resource: str, owner: Object, finalizer: str) -> None:
        meta = owner["metadata"]
        left = [f for f in finalizers(owner) if f != finalizer]
        try:
            await self.client.patch(resource, meta["name"], {"metadata": {
                "finalizers": left or None, "resourceVersion": meta.get("resourceVersion")}},
                namespace=meta.get("namespace") or None)
        except NotFound:
            return
        log.info("%s %s: %s finalizer done", resource, meta["name"], finalizer)

    async def _orphan_dependents(self, resource: str, owner: Object) -> None:
        uid = owner["metadata"].get("uid")
        for dep_resource, dep in self._dependents(str(uid)):
            kept = [dict(r) for r in owner_refs(dep) if r.get("uid") != uid]
            await self._patch_refs(dep_resource, dep, kept)
            log.info("%s %s: orphaned from %s %s", dep_resource, dep["metadata"]["name"],
                     resource, owner["metadata"]["name"])
        await self._remove_finalizer(resource, owner, ORPHAN)

    async def _delete_dependents(self, resource: str, owner: Object) -> None:
        uid = str(owner["metadata"].get("uid"))
        dependents = self._dependents(uid)
        for dep_resource, dep in dependents:
            meta = dep["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            try:
                await self.client.delete(dep_resource, meta["name"],
                                         namespace=meta.get("namespace") or None)
                log.info("deleted %s %s: its owner %s %s is being deleted in the foreground",
                         dep_resource, meta["name"], resource, owner["metadata"]["name"])
            except NotFound:
                pass
            except ApiError as e:
                log.warning("%s %s: %s", dep_resource, meta["name"], e.message)
        if not dependents:
            await self._remove_finalizer(resource, owner, FOREGROUND)
