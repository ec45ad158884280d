"""The ReplicaSet controller (pkg/controller/replicaset): keep `spec.replicas` pods that
match the selector, each controlled by the ReplicaSet.

One sync of a ReplicaSet (`sync`): claim the pods (adopt matching orphans, release ours
that stopped matching: `pods.claim`), then — only once the informer has shown every
create and delete of the previous round (`pods.Expectations`) — create the missing pods
in slow-start batches (1, 2, 4, ...) or delete the surplus in kube's order
(`pods.pods_to_delete`), and write the status (replicas, fullyLabeledReplicas,
readyReplicas, availableReplicas, observedGeneration). Events as kube's:
`SuccessfulCreate` "Created pod: NAME", `SuccessfulDelete` "Deleted pod: NAME",
`FailedCreate` "Error creating: ...".
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.client import ApiClient
from common.errors import ApiError, Conflict, NotFound
from common.events import EventRecorder
from common.informer import (
    BY_NAMESPACE,
    SharedInformer,
    SharedInformerFactory,
    indexed_by_namespace,
)
from controller_manager.controller import QueueController, key_of, uid_of
from controller_manager.podcontrol import PodControl
from controller_manager.pods import (
    Expectations,
    claim,
    controller_of,
    controller_ref,
    is_active,
    is_available,
    is_ready,
    labels_of,
    pods_to_delete,
    ready_condition,
    released_refs,
    selector_matches,
)

log = logging.getLogger("controller_manager.replicaset")

NAME = "replicaset-controller"
API_VERSION = "apps/v1"
KIND = "ReplicaSet"
BURST_REPLICAS = 500  # kube's burstReplicas: at most this many creates/deletes per sync
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


def desired_replicas(rs: Mapping[str, Any]) -> int:
    replicas = (rs.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def replica_diff(rs: Mapping[str, Any], active: Sequence[Object]) -> int:
    """Pods to create (> 0) or delete (< 0), at most BURST_REPLICAS either way."""
    diff = desired_replicas(rs) - len(active)
    return max(-BURST_REPLICAS, min(BURST_REPLICAS, diff))


def pod_from_template(rs: Mapping[str, Any]) -> Object:
    """GetPodFromTemplate: the template's metadata and spec, named `<rs>-<random>`,
    controlled by the ReplicaSet."""
    template = copy.deepcopy((rs.get("spec") or {}).get("template") or {})
    meta = rs.get("metadata") or {}
    template_meta = template.get("metadata") or {}
    pod_meta: Object = {"generateName": f"{meta.get('name')}-",
                        "namespace": meta.get("namespace"),
                        "ownerReferences": [controller_ref(rs, api_version=API_VERSION,
                                                           kind=KIND)]}
    for key in ("labels", "annotations", "finalizers"):
        if template_meta.get(key):
            pod_meta[key] = template_meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": template.get("spec") or {}}


def replica_set_status(rs: Mapping[str, Any], active: Sequence[Object], now: datetime,
                       ) -> Object:
    """calculateStatus: the counts over the active pods it controls."""
    spec = rs.get("spec") or {}
    template_labels = labels_of(spec.get("template") or {})
    min_ready = int(spec.get("minReadySeconds") or 0)
    fully_labeled = [p for p in active
                     if all(labels_of(p).get(k) == v for k, v in template_labels.items())]
    status: Object = {
        "replicas": len(active),
        "fullyLabeledReplicas": len(fully_labeled),
        "readyReplicas": sum(1 for p in active if is_ready(p)),
        "availableReplicas": sum(1 for p in active if is_available(p, min_ready, now)),
        "observedGeneration": (rs.get("metadata") or {}).get("generation") or 0,
    }
    conditions = (rs.get("status") or {}).get("conditions")
    if conditions:
        status["conditions"] = conditions
    return status


def status_changed(rs: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    current = rs.get("status") or {}
    return any((current.get(k) or 0) != (v or 0) for k, v in status.items()
               if k != "conditions")


def counted_view(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a pod a ReplicaSet's sync reads to count, claim and report it: a pod update
    that leaves this as it was (a binding, an IP, a container's restart count) changes
    nothing the sync would decide, so it does not queue one (at 1,000 pods, each sync
    reads them all)."""
    meta = pod.get("metadata") or {}
    ready = ready_condition(pod) or {}
    return (meta.get("labels"), meta.get("ownerReferences"), meta.get("deletionTimestamp"),
            (pod.get("status") or {}).get("phase"), ready.get("status"),
            ready.get("lastTransitionTime"))


# -- the controller ---------------------------------------------------------------------------


class ReplicaSetController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.expectations = Expectations()
        self.pod_control = PodControl(self.writer, recorder, self.expectations,
                                      owner_kind=KIND)
        self.replicasets = factory.informer("replicasets")
        self.pods = indexed_by_namespace(factory.informer("pods"))
        self.replicasets.add_event_handler(
            on_add=self._rs_changed, on_update=lambda _old, new: self._rs_changed(new),
            on_delete=self._rs_deleted, name=f"{NAME} replicasets")
        self.pods.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted, name=f"{NAME} pods")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.replicasets, self.pods]

    # -- event handlers: quick, they only enqueue and count expectations -----------------

    def _rs_changed(self, rs: Object) -> None:
        self.queue.add(key_of(rs))

    def _rs_deleted(self, rs: Object) -> None:
        self.expectations.forget(key_of(rs))
        self.queue.add(key_of(rs))

    def _owner_key(self, pod: Mapping[str, Any]) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != KIND:
            return None
        key = f"{(pod.get('metadata') or {}).get('namespace')}/{ref.get('name')}"
        rs = self.replicasets.get(key)
        if rs is None or (rs.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return key

    def _enqueue_matching(self, pod: Mapping[str, Any]) -> None:
        """An orphan: every ReplicaSet whose selector matches may want to adopt it."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        for rs in self.replicasets.list():
            if ((rs.get("metadata") or {}).get("namespace") == namespace
                    and selector_matches((rs.get("spec") or {}).get("selector"),
                                         labels_of(pod))):
                self.queue.add(key_of(rs))

    def _pod_added(self, pod: Object) -> None:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        owner = self._owner_key(pod)
        if owner is not None:
            self.expectations.creation_observed(owner)
            self.queue.add(owner)
        elif controller_of(pod) is None:
            self._enqueue_matching(pod)

    def _pod_updated(self, old: Object, new: Object) -> None:
        if counted_view(old) == counted_view(new):
            return
        if (new.get("metadata") or {}).get("deletionTimestamp") and not (
                old.get("metadata") or {}).get("deletionTimestamp"):
            # A graceful delete started: as kube, count the deletion now.
            owner = self._owner_key(new)
            if owner is not None:
                self.expectations.deletion_observed(owner, uid_of(new))
        for pod in (old, new):
            owner = self._owner_key(pod)
            if owner is not None:
                self.queue.add(owner)
        if controller_of(new) is None:
            self._enqueue_matching(new)

    def _pod_deleted(self, pod: Object) -> None:
        owner = self._owner_key(pod)
        if owner is not None:
            self.expectations.deletion_observed(owner, uid_of(pod))
            self.queue.add(owner)

    # -- sync -------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        rs = self.replicasets.get(key)
        if rs is None:
            self.expectations.forget(key)
            return
        namespace = str(rs["metadata"]["namespace"])
        candidates = self.pods.by_index(BY_NAMESPACE, namespace)
        selector = (rs.get("spec") or {}).get("selector")
        claimed = claim(rs, selector, candidates)
        owned = list(claimed.owned)
        for pod in claimed.adopt:
            if await self._adopt(rs, pod):
                owned.append(pod)
        for pod in claimed.release:
            await self._release(rs, pod)
        active = [p for p in owned if is_active(p)]
        deleting = bool(rs["metadata"].get("deletionTimestamp"))
        error: Exception | None = None
        if self.expectations.satisfied(key) and not deleting:
            try:
                await self._manage(rs, key, active)
            except (ApiError, OSError) as e:
                error = e
        await self._update_status(rs, key, active)
        if error is not None:
            raise error

    async def _adopt(self, rs: Object, pod: Object) -> bool:
        meta = pod["metadata"]
        refs = [*(meta.get("ownerReferences") or []),
                controller_ref(rs, api_version=API_VERSION, kind=KIND)]
        try:
            await self.client.patch("pods", meta["name"], {"metadata": {
                "ownerReferences": refs, "resourceVersion": meta.get("resourceVersion")}},
                namespace=meta["namespace"])
        except (Conflict, NotFound):
            return False
        log.info("replicaset %s: adopted pod %s", key_of(rs), meta["name"])
        return True

    async def _release(self, rs: Object, pod: Object) -> None:
        meta = pod["metadata"]
        try:
            await self.client.patch("pods", meta["name"], {"metadata": {
                "ownerReferences": released_refs(pod, str(rs["metadata"].get("uid"))),
                "resourceVersion": meta.get("resourceVersion")}},
                namespace=meta["namespace"])
        except (Conflict, NotFound):
            return
        log.info("replicaset %s: released pod %s (its labels no longer match)", key_of(rs),
                 meta["name"])

    async def _manage(self, rs: Object, key: str, active: list[Object]) -> None:
        diff = replica_diff(rs, active)
        if diff > 0:
            await self._create(rs, key, diff, len(active))
        elif diff < 0:
            await self._delete(rs, key, pods_to_delete(active, -diff), len(active))

    async def _create(self, rs: Object, key: str, count: int, have: int) -> None:
        log.info("replicaset %s: %d of %d replicas: creating %d pod(s)", key, have,
                 desired_replicas(rs), count)
        await self.pod_control.create(rs, key, [pod_from_template(rs) for _ in range(count)])

    async def _delete(self, rs: Object, key: str, victims: list[Object], have: int) -> None:
        log.info("replicaset %s: %d of %d replicas: deleting %d pod(s)", key, have,
                 desired_replicas(rs), len(victims))
        await self.pod_control.delete(rs, key, victims)

    async def _update_status(self, rs: Object, key: str, active: list[Object]) -> None:
        status = replica_set_status(rs, active, datetime.now(UTC))
        if not status_changed(rs, status):
            return
        try:
            await self.client.update_status("replicasets", {**rs, "status": status})
        except NotFound:
            return
        except Conflict:
            self.queue.add(key)  # our informer is behind: again with the newer object
            return
        log.info("replicaset %s: status replicas=%d ready=%d available=%d", key,
                 status["replicas"], status["readyReplicas"], status["availableReplicas"])
