"""The Deployment controller (pkg/controller/deployment): a Deployment owns one ReplicaSet
per pod template it has had, named `<deployment>-<pod-template-hash>`, and moves pods from
the old ones to the new one.

One sync (`sync`): claim the ReplicaSets (adopt/release by selector, as pods are claimed);
find the new one (its template, less the `pod-template-hash` label, equals the
Deployment's) or create it with the next `deployment.kubernetes.io/revision`; then, unless
paused, either
- RollingUpdate (rolling.go): scale the new ReplicaSet up to at most
  replicas + maxSurge pods in all, and the old ones down while at least
  replicas - maxUnavailable stay available (unhealthy old pods first), or
- Recreate (recreate.go): the old ones to 0, and only once none of their pods is left,
  the new one to `replicas`;
drop old, empty ReplicaSets beyond `revisionHistoryLimit`, and write the status (replicas,
updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
observedGeneration, the Available and Progressing conditions) that `kubectl rollout status`
reads. Events as kube's: `ScalingReplicaSet` "Scaled up replica set NAME from A to B".

Not done: progressDeadlineSeconds (ProgressDeadlineExceeded), proportional scaling of
several ReplicaSets during a rollout (the rolling arithmetic converges instead),
`kubectl rollout undo`'s rollback annotation path (undo is a template change to kubectl
1.37, which works).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.errors import AlreadyExists, ApiError, Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformerFactory
from common.timestamps import rfc3339
from common.workqueue import WorkQueue
from controller_manager.controller import run_workers
from controller_manager.pods import (
    claim,
    controller_of,
    controller_ref,
    labels_of,
    selector_matches,
)

log = logging.getLogger("controller_manager.deployment")

NAME = "deployment-controller"
API_VERSION = "apps/v1"
KIND = "Deployment"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Annotations of the Deployment that are not copied to its ReplicaSets (skipCopyAnnotation).
NOT_COPIED = frozenset({"kubectl.kubernetes.io/last-applied-configuration", REVISION,
                        "deployment.kubernetes.io/revision-history", DESIRED_REPLICAS,
                        MAX_REPLICAS, "deprecated.deployment.rollback.to"})
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
Object = dict[str, Any]


# -- pure decisions ---------------------------------------------------------------------------


def pod_template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """ComputeHash's shape: an FNV-1a 32-bit hash of the template (and the collision
    count), rendered with SafeEncodeString. (kube hashes Go's printing of the struct, so
    the values differ from kube's; the shape and the stability do not.)"""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE_ALPHABET[int(d) % len(SAFE_ALPHABET)] for d in str(value))


def template_without_hash(template: Mapping[str, Any]) -> Object:
    out = copy.deepcopy(dict(template))
    labels = dict((out.get("metadata") or {}).get("labels") or {})
    labels.pop(HASH_LABEL, None)
    out.setdefault("metadata", {})
    out["metadata"] = {**out["metadata"], "labels": labels}
    return out


def equal_ignore_hash(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """EqualIgnoreHash: two pod templates, the pod-template-hash label aside."""
    def canonical(template: Mapping[str, Any]) -> Object:
        out = template_without_hash(template)
        meta = {k: v for k, v in (out.get("metadata") or {}).items() if v not in ({}, None)}
        return {**out, "metadata": meta}
    return canonical(a) == canonical(b)


def replicas_of(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_of(obj: Mapping[str, Any], field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def revision_of(rs: Mapping[str, Any]) -> int:
    text = ((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def resolve(value: Any, total: int, *, round_up: bool) -> int:
    """GetScaledValueFromIntOrPercent: an int, or a percentage of `total`."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return 0


def surge_and_unavailable(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """ResolveFenceposts: maxSurge rounds up, maxUnavailable down; both 0 → 1 unavailable."""
    rolling = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    replicas = replicas_of(deployment)
    surge = resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def new_rs_replicas(deployment: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any]],
                    new_rs: Mapping[str, Any]) -> int:
    """NewRSNewReplicas for RollingUpdate: up to replicas + maxSurge pods in all."""
    replicas = replicas_of(deployment)
    surge, _ = surge_and_unavailable(deployment)
    current = sum(replicas_of(rs) for rs in all_rss)
    max_total = replicas + surge
    if current >= max_total:
        return replicas_of(new_rs)
    scale_up = min(max_total - current, replicas - replicas_of(new_rs))
    return replicas_of(new_rs) + max(0, scale_up)


def old_rs_scale_downs(deployment: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any]],
                       old_rss: Sequence[Mapping[str, Any]], new_rs: Mapping[str, Any]
                       ) -> dict[str, int]:
    """reconcileOldReplicaSets: old ReplicaSet name -> its new replicas. Unhealthy old pods
    go first (cleanupUnhealthyReplicas), then available ones while at least
    replicas - maxUnavailable stay available. Oldest ReplicaSets first."""
    old_rss = sorted(old_rss, key=lambda rs: str((rs.get("metadata") or {}).get(
        "creationTimestamp") or ""))
    if sum(replicas_of(rs) for rs in old_rss) == 0:
        return {}
    _, unavailable = surge_and_unavailable(deployment)
    min_available = replicas_of(deployment) - unavailable
    all_pods = sum(replicas_of(rs) for rs in all_rss)
    new_unavailable = replicas_of(new_rs) - status_of(new_rs, "availableReplicas")
    max_scaled_down = all_pods - min_available - new_unavailable
    if max_scaled_down <= 0:
        return {}
    targets = {str(rs["metadata"]["name"]): replicas_of(rs) for rs in old_rss}
    cleaned = 0
    for rs in old_rss:
        name = str(rs["metadata"]["name"])
        if cleaned >= max_scaled_down or targets[name] == 0:
            continue
        unhealthy = targets[name] - status_of(rs, "availableReplicas")
        if unhealthy <= 0:
            continue
        down = min(max_scaled_down - cleaned, unhealthy)
        targets[name] -= down
        cleaned += down
    available = sum(status_of(rs, "availableReplicas") for rs in all_rss)
    total_down = available - min_available
    scaled = 0
    for rs in old_rss:
        name = str(rs["metadata"]["name"])
        if scaled >= total_down:
            break
        if targets[name] == 0:
            continue
        down = min(targets[name], total_down - scaled)
        targets[name] -= down
        scaled += down
    return {name: replicas for name, replicas in targets.items()
            if replicas != replicas_of(next(rs for rs in old_rss
                                              if rs["metadata"]["name"] == name))}


def new_replica_set(deployment: Mapping[str, Any], revision: int,
                    collision_count: int = 0) -> Object:
    """The ReplicaSet for the Deployment's current template (getNewReplicaSet)."""
    spec = deployment.get("spec") or {}
    meta = deployment.get("metadata") or {}
    template = copy.deepcopy(spec.get("template") or {})
    hash_ = pod_template_hash(template_without_hash(template), collision_count)
    template.setdefault("metadata", {})
    template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}),
                                      HASH_LABEL: hash_}
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: hash_}
    surge, _ = surge_and_unavailable(deployment)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in NOT_COPIED}
    annotations.update({REVISION: str(revision), DESIRED_REPLICAS: str(replicas_of(deployment)),
                        MAX_REPLICAS: str(replicas_of(deployment) + surge)})
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta.get('name')}-{hash_}",
                         "namespace": meta.get("namespace"),
                         "labels": template["metadata"]["labels"],
                         "annotations": annotations,
                         "ownerReferences": [controller_ref(deployment, api_version=API_VERSION,
                                                            kind=KIND)]},
            "spec": {"replicas": 0, "minReadySeconds": spec.get("minReadySeconds") or 0,
                     "selector": selector, "template": template}}


def history_to_delete(old_rss: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    """cleanupDeployment: empty old ReplicaSets beyond revisionHistoryLimit, oldest first."""
    empty = [rs for rs in old_rss if replicas_of(rs) == 0
             and status_of(rs, "replicas") == 0
             and not (rs.get("metadata") or {}).get("deletionTimestamp")]
    excess = len(old_rss) - limit
    if excess <= 0:
        return []
    empty.sort(key=revision_of)
    return [str(rs["metadata"]["name"]) for rs in empty[:excess]]


def condition(kind: str, status: str, reason: str, message: str, stamp: str,
              previous: Mapping[str, Any] | None) -> Object:
    transition = (previous.get("lastTransitionTime") if previous
                  and previous.get("status") == status else stamp)
    return {"type": kind, "status": status, "lastUpdateTime": stamp,
            "lastTransitionTime": transition, "reason": reason, "message": message}


def deployment_status(deployment: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any]],
                      new_rs: Mapping[str, Any] | None, stamp: str) -> Object:
    """calculateStatus and the Available/Progressing conditions."""
    replicas = sum(status_of(rs, "replicas") for rs in all_rss)
    available = sum(status_of(rs, "availableReplicas") for rs in all_rss)
    total_spec = sum(replicas_of(rs) for rs in all_rss)
    updated = status_of(new_rs, "replicas") if new_rs else 0
    _, unavailable = surge_and_unavailable(deployment)
    previous = {c.get("type"): c for c in (deployment.get("status") or {}).get(
        "conditions") or []}
    if available >= replicas_of(deployment) - unavailable:
        avail = condition("Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.", stamp,
                          previous.get("Available"))
    else:
        avail = condition("Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.", stamp,
                          previous.get("Available"))
    name = (new_rs or {}).get("metadata", {}).get("name", "")
    complete = (new_rs is not None and updated == replicas_of(deployment)
                and replicas == updated and available >= updated
                and status_of(new_rs, "availableReplicas") >= replicas_of(deployment))
    if complete:
        progressing = condition("Progressing", "True", "NewReplicaSetAvailable",
                                f'ReplicaSet "{name}" has successfully progressed.', stamp,
                                previous.get("Progressing"))
    else:
        progressing = condition("Progressing", "True", "ReplicaSetUpdated",
                                f'ReplicaSet "{name}" is progressing.', stamp,
                                previous.get("Progressing"))
    # Unchanged conditions keep their lastUpdateTime (nothing to write then).
    for cond in (avail, progressing):
        before = previous.get(cond["type"])
        if before and all(before.get(k) == cond[k] for k in ("status", "reason", "message")):
            cond["lastUpdateTime"] = before.get("lastUpdateTime", stamp)
    status: Object = {
        "observedGeneration": (deployment.get("metadata") or {}).get("generation") or 0,
        "replicas": replicas, "updatedReplicas": updated,
        "readyReplicas": sum(status_of(rs, "readyReplicas") for rs in all_rss),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total_spec - available),
        "conditions": [avail, progressing],
    }
    collisions = (deployment.get("status") or {}).get("collisionCount")
    if collisions:
        status["collisionCount"] = collisions
    return status


# -- the controller ---------------------------------------------------------------------------


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


class DeploymentController:
    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5) -> None:
        self.client = factory.client
        self.recorder = recorder
        self.workers = workers
        self.queue = WorkQueue(NAME)
        self.deployments = factory.informer("deployments")
        self.replicasets = factory.informer("replicasets")
        self.pods = factory.informer("pods")
        self.deployments.add_event_handler(
            on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new),
            on_delete=self._enqueue, name=f"{NAME} deployments")
        self.replicasets.add_event_handler(
            on_add=self._rs_changed, on_update=self._rs_updated,
            on_delete=self._rs_changed, name=f"{NAME} replicasets")
        self.pods.add_event_handler(on_delete=self._pod_deleted, name=f"{NAME} pods")

    def _enqueue(self, deployment: Object) -> None:
        self.queue.add(key_of(deployment))

    def _rs_updated(self, old: Object, new: Object) -> None:
        self._rs_changed(old)
        self._rs_changed(new)

    def _rs_changed(self, rs: Object) -> None:
        ref = controller_of(rs)
        namespace = (rs.get("metadata") or {}).get("namespace")
        if ref is not None:
            if ref.get("kind") == KIND:
                self.queue.add(f"{namespace}/{ref.get('name')}")
            return
        for deployment in self.deployments.list():
            if ((deployment.get("metadata") or {}).get("namespace") == namespace
                    and selector_matches((deployment.get("spec") or {}).get("selector"),
                                         labels_of(rs))):
                self._enqueue(deployment)

    def _pod_deleted(self, pod: Object) -> None:
        """Recreate waits for the old pods to be gone: their deletion is news."""
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        namespace = (pod.get("metadata") or {}).get("namespace")
        rs = self.replicasets.get(f"{namespace}/{ref.get('name')}")
        if rs is not None:
            self._rs_changed(rs)

    async def run(self) -> None:
        await asyncio.gather(self.deployments.wait_synced(), self.replicasets.wait_synced(),
                             self.pods.wait_synced())
        log.info("%s: caches synced", NAME)
        try:
            await run_workers(self.queue, self.sync, workers=self.workers, name=NAME)
        finally:
            self.queue.shut_down()

    async def sync(self, key: str) -> None:
        deployment = self.deployments.get(key)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return
        namespace = str(deployment["metadata"]["namespace"])
        candidates = [rs for rs in self.replicasets.list()
                      if rs["metadata"].get("namespace") == namespace]
        claimed = claim(deployment, (deployment.get("spec") or {}).get("selector"),
                        candidates)
        all_rss = list(claimed.owned)
        for rs in claimed.adopt:
            adopted = await self._adopt(deployment, rs)
            if adopted is not None:
                all_rss.append(adopted)
        template = (deployment.get("spec") or {}).get("template") or {}
        new_rs = next((rs for rs in sorted(all_rss, key=lambda r: str(
            r["metadata"].get("creationTimestamp") or ""))
            if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template)),
            None)
        old_rss = [rs for rs in all_rss if rs is not new_rs]
        if (deployment.get("spec") or {}).get("paused"):
            await self._write_status(deployment, all_rss, new_rs)
            return
        if new_rs is None:
            revision = max((revision_of(rs) for rs in old_rss), default=0) + 1
            new_rs = await self._create_rs(deployment, revision)
            all_rss.append(new_rs)
        elif revision_of(new_rs) <= max((revision_of(rs) for rs in old_rss), default=0):
            new_rs = await self._bump_revision(new_rs, old_rss)
            all_rss = [*old_rss, new_rs]
        strategy = ((deployment.get("spec") or {}).get("strategy") or {}).get("type")
        if strategy == "Recreate":
            await self._recreate(deployment, old_rss, new_rs)
        else:
            await self._rolling(deployment, all_rss, old_rss, new_rs)
        limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
        for name in history_to_delete(old_rss, 10 if limit is None else int(limit)):
            try:
                await self.client.delete("replicasets", name, namespace=namespace)
                log.info("deployment %s: deleted old replica set %s (revision history)", key,
                         name)
            except NotFound:
                pass
        await self._write_status(deployment, all_rss, new_rs)

    async def _adopt(self, deployment: Object, rs: Object) -> Object | None:
        meta = rs["metadata"]
        refs = [*(meta.get("ownerReferences") or []),
                controller_ref(deployment, api_version=API_VERSION, kind=KIND)]
        try:
            return await self.client.patch("replicasets", meta["name"], {"metadata": {
                "ownerReferences": refs, "resourceVersion": meta.get("resourceVersion")}},
                namespace=meta["namespace"])
        except (Conflict, NotFound):
            return None

    async def _create_rs(self, deployment: Object, revision: int) -> Object:
        namespace = deployment["metadata"]["namespace"]
        collisions = int((deployment.get("status") or {}).get("collisionCount") or 0)
        rs = new_replica_set(deployment, revision, collisions)
        replicas = (replicas_of(deployment)
                    if (((deployment.get("spec") or {}).get("strategy") or {}).get("type")
                        != "Recreate")
                    else 0)
        rs["spec"]["replicas"] = min(replicas, new_rs_replicas(deployment, [
            r for r in self.replicasets.list()
            if (controller_of(r) or {}).get("uid") == deployment["metadata"].get("uid")], rs))
        try:
            created = await self.client.create("replicasets", rs, namespace=namespace)
        except AlreadyExists:
            # A hash collision with a ReplicaSet not ours (or one our informer has not
            # shown yet): count it, as kube does, and try another name next sync.
            existing = await self.client.get("replicasets", rs["metadata"]["name"],
                                             namespace=namespace)
            if (controller_of(existing) or {}).get("uid") == deployment["metadata"].get("uid"):
                return existing
            await self.client.update_status("deployments", {
                **deployment, "status": {**(deployment.get("status") or {}),
                                         "collisionCount": collisions + 1}})
            raise
        name = created["metadata"]["name"]
        log.info("deployment %s: created replica set %s (revision %d) with %d replica(s)",
                 key_of(deployment), name, revision, replicas_of(created))
        if replicas_of(created) > 0:
            await self.recorder.event(deployment, "Normal", "ScalingReplicaSet",
                                      f"Scaled up replica set {name} from 0 to "
                                      f"{replicas_of(created)}")
        return created

    async def _bump_revision(self, new_rs: Object, old_rss: Sequence[Object]) -> Object:
        revision = max(revision_of(rs) for rs in old_rss) + 1
        meta = new_rs["metadata"]
        return await self.client.patch("replicasets", meta["name"], {"metadata": {
            "annotations": {REVISION: str(revision)},
            "resourceVersion": meta.get("resourceVersion")}}, namespace=meta["namespace"])

    async def _scale(self, deployment: Object, rs: Object, replicas: int) -> None:
        before = replicas_of(rs)
        if before == replicas:
            return
        meta = rs["metadata"]
        surge, _ = surge_and_unavailable(deployment)
        await self.client.patch("replicasets", meta["name"], {
            "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {
                DESIRED_REPLICAS: str(replicas_of(deployment)),
                MAX_REPLICAS: str(replicas_of(deployment) + surge)}},
            "spec": {"replicas": replicas}}, namespace=meta["namespace"])
        direction = "up" if replicas > before else "down"
        log.info("deployment %s: scaled %s replica set %s from %d to %d", key_of(deployment),
                 direction, meta["name"], before, replicas)
        await self.recorder.event(deployment, "Normal", "ScalingReplicaSet",
                                  f"Scaled {direction} replica set {meta['name']} from "
                                  f"{before} to {replicas}")

    async def _rolling(self, deployment: Object, all_rss: list[Object],
                       old_rss: list[Object], new_rs: Object) -> None:
        wanted = replicas_of(deployment)
        if replicas_of(new_rs) > wanted:
            await self._scale(deployment, new_rs, wanted)
            return
        target = new_rs_replicas(deployment, all_rss, new_rs)
        if target != replicas_of(new_rs):
            await self._scale(deployment, new_rs, target)
            return  # the next sync sees the new counts, as kube's rolloutRolling
        scale_downs = old_rs_scale_downs(deployment, all_rss, old_rss, new_rs)
        for rs in old_rss:
            name = rs["metadata"]["name"]
            if name in scale_downs:
                await self._scale(deployment, rs, scale_downs[name])

    async def _recreate(self, deployment: Object, old_rss: list[Object],
                        new_rs: Object) -> None:
        for rs in old_rss:
            if replicas_of(rs) > 0:
                await self._scale(deployment, rs, 0)
        old_uids = {rs["metadata"].get("uid") for rs in old_rss}
        old_pods = [p for p in self.pods.list()
                    if (controller_of(p) or {}).get("uid") in old_uids]
        if old_pods or any(status_of(rs, "replicas") for rs in old_rss):
            return  # wait until the old pods are gone
        await self._scale(deployment, new_rs, replicas_of(deployment))

    async def _write_status(self, deployment: Object, all_rss: list[Object],
                            new_rs: Object | None) -> None:
        status = deployment_status(deployment, all_rss, new_rs, rfc3339(datetime.now(UTC)))
        if status == (deployment.get("status") or {}):
            return
        try:
            await self.client.update_status("deployments", {**deployment, "status": status})
        except NotFound:
            return
        except Conflict:
            self.queue.add(key_of(deployment))
            return
        except ApiError:
            raise
        log.info("deployment %s: status replicas=%d updated=%d available=%d", key_of(
            deployment), status["replicas"], status["updatedReplicas"],
            status["availableReplicas"])

