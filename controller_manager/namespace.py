"""The namespace controller (pkg/controller/namespace and its namespaced resources deleter).

A namespace being deleted (deletionTimestamp set, phase Terminating) that still carries
the `kubernetes` finalizer in `spec.finalizers` is emptied: discovery lists every
namespaced resource the apiserver serves that can be listed and deleted, every object of
those in the namespace is deleted (Background propagation, pods gracefully), and the
namespace's status conditions say how far it got (NamespaceDeletionDiscoveryFailure,
NamespaceDeletionGroupVersionParsingFailure, NamespaceDeletionContentFailure,
NamespaceContentRemaining, NamespaceFinalizersRemaining, in kube's words). While content
remains the namespace is looked at again shortly; once none does, `kubernetes` is removed
through `PUT namespaces/{name}/finalize`, and the apiserver removes the namespace when
no finalizer is left. A restart picks up every Terminating namespace from the first list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.client import ApiClient
from common.errors import ApiError, Conflict, NotFound
from common.informer import SharedInformerFactory
from common.timestamps import rfc3339
from common.workqueue import WorkQueue
from controller_manager.controller import run_workers

log = logging.getLogger("controller_manager.namespace")

NAME = "namespace-controller"
FINALIZER = "kubernetes"
REMAINING_RECHECK = 1.0  # seconds until a namespace whose content remains is looked at again
CONDITION_TYPES = ("NamespaceDeletionDiscoveryFailure",
                   "NamespaceDeletionGroupVersionParsingFailure",
                   "NamespaceDeletionContentFailure", "NamespaceContentRemaining",
                   "NamespaceFinalizersRemaining")
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiResource:
    """One namespaced resource to empty: its plural, group (\"\" for core) and the
    `/api/v1` or `/apis/{group}/{version}` prefix it is served under."""

    plural: str
    group: str
    prefix: str

    @property
    def group_resource(self) -> str:
        """schema.GroupResource.String(): `pods`, `deployments.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def deletable_resources(prefix: str, resource_list: Mapping[str, Any]) -> list[ApiResource]:
    """The resources of one APIResourceList that the deleter empties: namespaced, with
    the list and delete verbs, not sub-resources (discovery.FilteredBy with
    SupportsAllVerbs{list, delete}, as kube's namespaced resources deleter)."""
    group_version = str(resource_list.get("groupVersion") or "")
    group = group_version.split("/", 1)[0] if "/" in group_version else ""
    found = []
    for resource in resource_list.get("resources") or []:
        name = str(resource.get("name") or "")
        verbs = set(resource.get("verbs") or [])
        if "/" in name or not resource.get("namespaced") or not {"list", "delete"} <= verbs:
            continue
        found.append(ApiResource(name, group, prefix))
    return found


def preferred_group_versions(groups: Mapping[str, Any]) -> list[str]:
    """`/apis/{group}/{version}` of each group's preferred version (an APIGroupList)."""
    paths = []
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if not preferred and group.get("versions"):
            preferred = group["versions"][0].get("groupVersion")
        if preferred:
            paths.append(f"/apis/{preferred}")
    return paths


@dataclass
class Content:
    """What one pass over the namespace found: objects left (per group resource), the
    finalizers they carry (per finalizer, how many objects), and the errors met."""

    remaining: dict[str, int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)
    discovery_errors: list[str] = field(default_factory=list)
    deletion_errors: list[str] = field(default_factory=list)

    def count(self, group_resource: str, obj: Mapping[str, Any]) -> None:
        self.remaining[group_resource] = self.remaining.get(group_resource, 0) + 1
        for finalizer in (obj.get("metadata") or {}).get("finalizers") or []:
            self.finalizers[finalizer] = self.finalizers.get(finalizer, 0) + 1

    @property
    def done(self) -> bool:
        return not self.remaining and not self.deletion_errors and not self.discovery_errors


def condition(kind: str, failing: bool, reason: str, message: str) -> Object:
    return {"type": kind, "status": "True" if failing else "False", "reason": reason,
            "message": message}


def deletion_conditions(content: Content) -> list[Object]:
    """The five conditions of kube's namespace conditionUpdater, in its words."""
    remaining = ", ".join(f"{gr} has {n} resource instances"
                          for gr, n in sorted(content.remaining.items()))
    finalizers = ", ".join(f"{f} in {n} resource instances"
                           for f, n in sorted(content.finalizers.items()))
    discovery, deletion = content.discovery_errors, content.deletion_errors
    return [
        condition(CONDITION_TYPES[0], bool(discovery), "DiscoveryFailed",
                  f"Discovery failed for some groups, {len(discovery)} failing: "
                  f"{', '.join(discovery)}") if discovery else
        condition(CONDITION_TYPES[0], False, "ResourcesDiscovered",
                  "All resources successfully discovered"),
        condition(CONDITION_TYPES[1], False, "ParsedGroupVersions",
                  "All legacy kube types successfully parsed"),
        condition(CONDITION_TYPES[2], True, "ContentDeletionFailed",
                  f"Failed to delete all resource types, {len(deletion)} remaining: "
                  f"{', '.join(deletion)}") if deletion else
        condition(CONDITION_TYPES[2], False, "ContentDeleted",
                  "All content successfully deleted, may be waiting on finalization"),
        condition(CONDITION_TYPES[3], True, "SomeResourcesRemain",
                  f"Some resources are remaining: {remaining}") if remaining else
        condition(CONDITION_TYPES[3], False, "ContentRemoved", "All content successfully removed"),
        condition(CONDITION_TYPES[4], True, "SomeFinalizersRemain",
                  f"Some content in the namespace has finalizers remaining: {finalizers}")
        if finalizers else
        condition(CONDITION_TYPES[4], False, "ContentHasNoFinalizers",
                  "All content-preserving finalizers finished"),
    ]


def merged_conditions(old: Iterable[Mapping[str, Any]], new: Sequence[Object],
                      now: str) -> list[Object]:
    """`new` with each lastTransitionTime kept from `old` when nothing about it changed;
    conditions of other types are kept as they were (after ours)."""
    previous = {str(c.get("type")): c for c in old}
    out = []
    for cond in new:
        before = previous.get(cond["type"])
        same = before is not None and all(before.get(k) == cond[k]
                                          for k in ("status", "reason", "message"))
        out.append({**cond, "lastTransitionTime":
                    before.get("lastTransitionTime") if same and before else now})
    ours = {c["type"] for c in new}
    out += [dict(c) for t, c in previous.items() if t not in ours]
    return out


def needs_emptying(namespace: Mapping[str, Any]) -> bool:
    """Terminating and still waiting for us (our finalizer in spec.finalizers)."""
    return bool((namespace.get("metadata") or {}).get("deletionTimestamp")) and \
        FINALIZER in ((namespace.get("spec") or {}).get("finalizers") or [])


def without_our_finalizer(namespace: Mapping[str, Any]) -> Object:
    spec = namespace.get("spec") or {}
    return {**namespace, "spec": {**spec, "finalizers": [
        f for f in spec.get("finalizers") or [] if f != FINALIZER]}}


# -- the controller ---------------------------------------------------------------------------


class NamespaceController:
    def __init__(self, factory: SharedInformerFactory, *, workers: int = 5) -> None:
        self.client: ApiClient = factory.client
        self.workers = workers
        self.queue = WorkQueue(NAME)
        self.informer = factory.informer("namespaces")
        self.informer.add_event_handler(on_add=self._changed,
                                        on_update=lambda _old, new: self._changed(new),
                                        name=NAME)

    def _changed(self, namespace: Object) -> None:
        if needs_emptying(namespace):
            self.queue.add(str(namespace["metadata"]["name"]))

    async def run(self) -> None:
        await self.informer.wait_synced()
        try:
            await run_workers(self.queue, self.sync, workers=self.workers, name=NAME)
        finally:
            self.queue.shut_down()

    async def sync(self, name: str) -> None:
        namespace = self.informer.get(name)
        if namespace is None or not needs_emptying(namespace):
            return
        content = await self.empty(name)
        namespace = await self._record_conditions(namespace, content)
        if not content.done:
            log.info("namespace %s: content remains (%s), looking again in %.0fs", name,
                     ", ".join(f"{gr}: {n}" for gr, n in sorted(content.remaining.items()))
                     or "; ".join(content.deletion_errors + content.discovery_errors),
                     REMAINING_RECHECK)
            self.queue.add_after(name, REMAINING_RECHECK)
            return
        try:
            await self.client.update("namespaces", without_our_finalizer(namespace),
                                     subresource="finalize")
            log.info("namespace %s: emptied and finalized", name)
        except NotFound:
            pass

    async def discover(self, content: Content) -> list[ApiResource]:
        resources: list[ApiResource] = []
        lists: list[tuple[str, Mapping[str, Any]]] = []
        core = await self.client._request("GET", "/api/v1")
        lists.append(("/api/v1", core))
        groups = await self.client._request("GET", "/apis")
        for prefix in preferred_group_versions(groups):
            try:
                lists.append((prefix, await self.client._request("GET", prefix)))
            except ApiError as e:
                content.discovery_errors.append(f"{prefix.removeprefix('/apis/')}: {e}")
        for prefix, resource_list in lists:
            resources += deletable_resources(prefix, resource_list)
        return resources

    async def empty(self, name: str) -> Content:
        """One pass: delete what is in the namespace, count what is left."""
        content = Content()
        for resource in await self.discover(content):
            path = f"{resource.prefix}/namespaces/{name}/{resource.plural}"
            try:
                listed = await self.client._request("GET", path)
            except ApiError as e:
                content.deletion_errors.append(f"{resource.group_resource}: {e}")
                continue
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                content.count(resource.group_resource, item)
                if meta.get("deletionTimestamp"):
                    continue  # on its way (pods stopping on their node, finalizers)
                try:
                    await self.client._request(
                        "DELETE", f"{path}/{meta['name']}",
                        body={"kind": "DeleteOptions", "apiVersion": "v1",
                              "propagationPolicy": "Background",
                              "preconditions": {"uid": meta.get("uid")}})
                    log.info("namespace %s: deleted %s %s", name, resource.group_resource,
                             meta["name"])
                except (NotFound, Conflict):
                    pass
                except ApiError as e:
                    content.deletion_errors.append(f"{resource.group_resource}: {e}")
        return content

    async def _record_conditions(self, namespace: Object, content: Content) -> Object:
        status = namespace.get("status") or {}
        conditions = merged_conditions(status.get("conditions") or [],
                                       deletion_conditions(content), rfc3339())
        if conditions == (status.get("conditions") or []):
            return namespace
        updated = {**namespace, "status": {**status, "conditions": conditions}}
        try:
            return await self.client.update_status("namespaces", updated)
        except Conflict:
            # a newer namespace: the next sync records them; finalize on a fresh read
            return await self.client.get("namespaces", namespace["metadata"]["name"])

