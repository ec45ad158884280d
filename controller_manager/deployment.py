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

The Progressing condition is progress.go's: NewReplicaSetCreated / FoundNewReplicaSet when
the new ReplicaSet is created / first found, ReplicaSetUpdated whenever pods move (its
lastUpdateTime restarts the `progressDeadlineSeconds` clock), NewReplicaSetAvailable once
complete, ProgressDeadlineExceeded (status False) when no progress was made for the
deadline (a sync is queued for that moment), DeploymentPaused / DeploymentResumed.

A scaling event (sync.go's isScalingEvent: an active ReplicaSet's
`deployment.kubernetes.io/desired-replicas` is not the Deployment's replicas), and any sync
of a paused Deployment, only scales (sync.go's `scale`): a lone active ReplicaSet takes
all the replicas; else, mid-rollout, the change is shared among the active ReplicaSets in
proportion to their size against their `max-replicas` annotation (the largest takes the
leftover), so that `kubectl scale` during a rollout keeps its new/old ratio.

Not done: `kubectl rollout undo`'s rollback annotation path (undo is a template change to
kubectl 1.37, which works).
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.client import ApiClient
from common.errors import AlreadyExists, ApiError, Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from common.timestamps import rfc3339
from controller_manager.controller import QueueController, key_of
from controller_manager.pods import (
    claim,
    controller_of,
    controller_ref,
    labels_of,
    parse_time,
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


def annotation_int(rs: Mapping[str, Any], name: str) -> int | None:
    text = ((rs.get("metadata") or {}).get("annotations") or {}).get(name)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def is_rolling(deployment: Mapping[str, Any]) -> bool:
    return ((deployment.get("spec") or {}).get("strategy") or {}).get("type") != "Recreate"


def max_surge(deployment: Mapping[str, Any]) -> int:
    return surge_and_unavailable(deployment)[0] if is_rolling(deployment) else 0


def is_scaling_event(deployment: Mapping[str, Any],
                     all_rss: Sequence[Mapping[str, Any]]) -> bool:
    """isScalingEvent: an active ReplicaSet was sized for another replica count."""
    wanted = replicas_of(deployment)
    for rs in all_rss:
        desired = annotation_int(rs, DESIRED_REPLICAS)
        if replicas_of(rs) > 0 and desired is not None and desired != wanted:
            return True
    return False


def creation_key(rs: Mapping[str, Any]) -> str:
    return str((rs.get("metadata") or {}).get("creationTimestamp") or "")


def rs_fraction(rs: Mapping[str, Any], deployment: Mapping[str, Any]) -> int:
    """getReplicaSetFraction: how much this ReplicaSet grows (or shrinks) for the
    Deployment's new size, from its size against its max-replicas annotation."""
    if replicas_of(deployment) == 0:
        return -replicas_of(rs)
    allowed = replicas_of(deployment) + max_surge(deployment)
    annotated = annotation_int(rs, MAX_REPLICAS)
    if annotated is None:
        annotated = status_of(deployment, "replicas")
    if annotated == 0:
        return 0
    scaled = replicas_of(rs) * allowed / annotated
    rounded = math.floor(abs(scaled) + 0.5) * (1 if scaled >= 0 else -1)  # Go's math.Round
    return int(rounded) - replicas_of(rs)


def proportion(rs: Mapping[str, Any], deployment: Mapping[str, Any], to_add: int,
               added: int) -> int:
    """GetProportion: the ReplicaSet's share of `to_add`, within what is left of it."""
    if replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = rs_fraction(rs, deployment)
    left = to_add - added
    return min(fraction, left) if to_add > 0 else max(fraction, left)


def is_saturated(deployment: Mapping[str, Any], rs: Mapping[str, Any] | None) -> bool:
    wanted = replicas_of(deployment)
    return (rs is not None and replicas_of(rs) == wanted
            and annotation_int(rs, DESIRED_REPLICAS) == wanted
            and status_of(rs, "availableReplicas") == wanted)


def scale_plan(deployment: Mapping[str, Any], new_rs: Mapping[str, Any] | None,
               old_rss: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """sync.go's `scale`: ReplicaSet name -> its replicas (every ReplicaSet it sizes,
    changed or not, so that their annotations are brought up to date)."""
    wanted = replicas_of(deployment)
    newest_first = sorted(old_rss, key=creation_key, reverse=True)
    active = [rs for rs in [*newest_first, *([new_rs] if new_rs else [])]
              if replicas_of(rs) > 0]
    name = lambda rs: str(rs["metadata"]["name"])  # noqa: E731
    if len(active) <= 1:
        lone = active[0] if active else (new_rs or (newest_first[0] if newest_first else None))
        return {} if lone is None else {name(lone): wanted}
    if is_saturated(deployment, new_rs):
        return {name(rs): 0 for rs in old_rss if replicas_of(rs) > 0}
    if not is_rolling(deployment):
        return {}
    allowed = wanted + max_surge(deployment) if wanted > 0 else 0
    to_add = allowed - sum(replicas_of(rs) for rs in active)
    # Bigger first; among equals the newer first when growing, the older when shrinking.
    by_age = sorted(active, key=creation_key, reverse=to_add > 0)
    ordered = sorted(by_age, key=replicas_of, reverse=True)
    sizes: dict[str, int] = {}
    added = 0
    for rs in ordered:
        share = proportion(rs, deployment, to_add, added)
        sizes[name(rs)] = replicas_of(rs) + share
        added += share
    if to_add != 0:
        first = name(ordered[0])
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


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
    surge = max_surge(deployment)
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


MAX_INT32 = 2**31 - 1
# The Progressing condition's reasons (deployment/util/deployment_util.go).
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"


def has_progress_deadline(deployment: Mapping[str, Any]) -> bool:
    deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return isinstance(deadline, int) and deadline != MAX_INT32


def find_condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def set_condition(conditions: Sequence[Object], new: Object) -> list[Object]:
    """SetDeploymentCondition: unchanged when one of the type has the same status and
    reason; else replaced, keeping its lastTransitionTime when only the reason changes."""
    current = find_condition(conditions, new["type"])
    if current is not None and current.get("status") == new["status"] \
            and current.get("reason") == new["reason"]:
        return list(conditions)
    if current is not None and current.get("status") == new["status"]:
        new = {**new, "lastTransitionTime": current.get("lastTransitionTime")}
    return [*(c for c in conditions if c.get("type") != new["type"]), new]


def new_condition(kind: str, status: str, reason: str, message: str, stamp: str) -> Object:
    return {"type": kind, "status": status, "lastUpdateTime": stamp,
            "lastTransitionTime": stamp, "reason": reason, "message": message}


def is_complete(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """DeploymentComplete."""
    wanted = replicas_of(deployment)
    return (status.get("updatedReplicas") == wanted and status.get("replicas") == wanted
            and status.get("availableReplicas") == wanted
            and int(status.get("observedGeneration") or 0)
            >= int((deployment.get("metadata") or {}).get("generation") or 0))


def is_progressing(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """DeploymentProgressing: more updated, fewer old, more ready or available pods than
    the status last written says."""
    old = deployment.get("status") or {}

    def n(of: Mapping[str, Any], key: str) -> int:
        return int(of.get(key) or 0)

    return (n(status, "updatedReplicas") > n(old, "updatedReplicas")
            or n(status, "replicas") - n(status, "updatedReplicas")
            < n(old, "replicas") - n(old, "updatedReplicas")
            or n(status, "readyReplicas") > n(old, "readyReplicas")
            or n(status, "availableReplicas") > n(old, "availableReplicas"))


def timed_out(deployment: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> bool:
    """DeploymentTimedOut: no progress for progressDeadlineSeconds since the Progressing
    condition's lastUpdateTime."""
    if not has_progress_deadline(deployment):
        return False
    cond = find_condition((status.get("conditions") or []), "Progressing")
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    deadline = int((deployment.get("spec") or {})["progressDeadlineSeconds"])
    return since is not None and (now - since).total_seconds() > deadline


def stuck_requeue_after(deployment: Mapping[str, Any], status: Mapping[str, Any],
                        now: datetime) -> float | None:
    """requeueStuckDeployment: seconds until a rollout still progressing would time out
    (the sync that sets ProgressDeadlineExceeded); None when there is nothing to wait for."""
    cond = find_condition((status.get("conditions") or []), "Progressing")
    if not has_progress_deadline(deployment) or cond is None or \
            cond.get("reason") in (NEW_RS_AVAILABLE, TIMED_OUT) or is_complete(deployment, status):
        return None
    since = parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return None
    deadline = int((deployment.get("spec") or {})["progressDeadlineSeconds"])
    return max(0.0, (since - now).total_seconds() + deadline) + 1.0


def rollout_progress(deployment: Mapping[str, Any], status: Object,
                     new_rs: Mapping[str, Any] | None, now: datetime) -> list[Object]:
    """syncRolloutStatus: the conditions with Progressing as kube's rollout sets it."""
    conditions: list[Object] = list(status.get("conditions") or [])
    if not has_progress_deadline(deployment):
        return [c for c in conditions if c.get("type") != "Progressing"]
    stamp = rfc3339(now)
    current = find_condition((deployment.get("status") or {}).get("conditions") or [],
                             "Progressing")
    if status.get("replicas") == status.get("updatedReplicas") and current is not None \
            and current.get("reason") == NEW_RS_AVAILABLE:
        return conditions
    name = (deployment.get("metadata") or {}).get("name", "")
    what = (f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs is not None
            else f'Deployment "{name}"')
    if is_complete(deployment, status):
        return set_condition(conditions, new_condition(
            "Progressing", "True", NEW_RS_AVAILABLE, f"{what} has successfully progressed.",
            stamp))
    if is_progressing(deployment, status):
        cond = new_condition("Progressing", "True", RS_UPDATED, f"{what} is progressing.",
                             stamp)
        if current is not None and current.get("status") == "True":
            cond["lastTransitionTime"] = current.get("lastTransitionTime")
        return [*(c for c in conditions if c.get("type") != "Progressing"), cond]
    if timed_out(deployment, status, now):
        return set_condition(conditions, new_condition(
            "Progressing", "False", TIMED_OUT, f"{what} has timed out progressing.", stamp))
    return conditions


def paused_conditions(deployment: Mapping[str, Any], stamp: str) -> list[Object] | None:
    """checkPausedConditions: Progressing Unknown while paused, and once resumed; None when
    nothing changes."""
    if not has_progress_deadline(deployment):
        return None
    conditions = list((deployment.get("status") or {}).get("conditions") or [])
    cond = find_condition(conditions, "Progressing")
    if cond is not None and cond.get("reason") == TIMED_OUT:
        return None
    paused = bool((deployment.get("spec") or {}).get("paused"))
    if paused and (cond is None or cond.get("reason") != PAUSED):
        return set_condition(conditions, new_condition(
            "Progressing", "Unknown", PAUSED, "Deployment is paused", stamp))
    if not paused and cond is not None and cond.get("reason") == PAUSED:
        return set_condition(conditions, new_condition(
            "Progressing", "Unknown", RESUMED, "Deployment is resumed", stamp))
    return None


def new_rs_condition(deployment: Mapping[str, Any], rs_name: str, *, created: bool,
                     stamp: str) -> list[Object] | None:
    """getNewReplicaSet's: NewReplicaSetCreated for a ReplicaSet it created, and
    FoundNewReplicaSet for one found while no Progressing condition was recorded."""
    if not has_progress_deadline(deployment):
        return None
    conditions = list((deployment.get("status") or {}).get("conditions") or [])
    if created:
        return set_condition(conditions, new_condition(
            "Progressing", "True", NEW_RS_CREATED, f'Created new replica set "{rs_name}"',
            stamp))
    if find_condition(conditions, "Progressing") is None:
        return set_condition(conditions, new_condition(
            "Progressing", "True", FOUND_NEW_RS, f'Found new replica set "{rs_name}"', stamp))
    return None


def deployment_status(deployment: Mapping[str, Any], all_rss: Sequence[Mapping[str, Any]],
                      new_rs: Mapping[str, Any] | None, stamp: str, *,
                      now: datetime | None = None, rollout: bool = True) -> Object:
    """calculateStatus (the counts, Available), then, for a rollout (not paused),
    syncRolloutStatus's Progressing."""
    replicas = sum(status_of(rs, "replicas") for rs in all_rss)
    available = sum(status_of(rs, "availableReplicas") for rs in all_rss)
    total_spec = sum(replicas_of(rs) for rs in all_rss)
    updated = status_of(new_rs, "replicas") if new_rs else 0
    _, unavailable = surge_and_unavailable(deployment)
    conditions: list[Object] = list((deployment.get("status") or {}).get("conditions") or [])
    if available >= replicas_of(deployment) - unavailable:
        avail = new_condition("Available", "True", "MinimumReplicasAvailable",
                              "Deployment has minimum availability.", stamp)
    else:
        avail = new_condition("Available", "False", "MinimumReplicasUnavailable",
                              "Deployment does not have minimum availability.", stamp)
    conditions = set_condition(conditions, avail)
    status: Object = {
        "observedGeneration": (deployment.get("metadata") or {}).get("generation") or 0,
        "replicas": replicas, "updatedReplicas": updated,
        "readyReplicas": sum(status_of(rs, "readyReplicas") for rs in all_rss),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total_spec - available),
        "conditions": conditions,
    }
    collisions = (deployment.get("status") or {}).get("collisionCount")
    if collisions:
        status["collisionCount"] = collisions
    if rollout:
        moment = now if now is not None else (parse_time(stamp) or datetime.now(UTC))
        status["conditions"] = rollout_progress(deployment, status, new_rs, moment)
    return status


# -- the controller ---------------------------------------------------------------------------


def with_conditions(deployment: Object, conditions: list[Object]) -> Object:
    """The Deployment (a copy: the informer's stays as it is) with these conditions."""
    return {**deployment, "status": {**(deployment.get("status") or {}),
                                     "conditions": conditions}}


class DeploymentController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
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

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.deployments, self.replicasets, self.pods]

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
        stamp = rfc3339(datetime.now(UTC))
        paused = paused_conditions(deployment, stamp)
        if paused is not None:
            deployment = with_conditions(deployment, paused)
        paused_now = bool((deployment.get("spec") or {}).get("paused"))
        if paused_now or is_scaling_event(deployment, all_rss):
            by_name = {rs["metadata"]["name"]: rs for rs in all_rss}
            for name, replicas in scale_plan(deployment, new_rs, old_rss).items():
                await self._scale(deployment, by_name[name], replicas)
            await self._write_status(deployment, all_rss, new_rs, rollout=False)
            return
        created = new_rs is None
        if new_rs is None:
            revision = max((revision_of(rs) for rs in old_rss), default=0) + 1
            new_rs = await self._create_rs(deployment, revision)
            all_rss.append(new_rs)
        progress = new_rs_condition(deployment, new_rs["metadata"]["name"], created=created,
                                    stamp=stamp)
        if progress is not None:
            deployment = with_conditions(deployment, progress)
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
        """Set the ReplicaSet's replicas and its desired/max-replicas annotations (an
        unchanged size with stale annotations is written too: that ends a scaling event)."""
        before = replicas_of(rs)
        surge = max_surge(deployment)
        if before == replicas and (
                annotation_int(rs, DESIRED_REPLICAS) == replicas_of(deployment)
                and annotation_int(rs, MAX_REPLICAS) == replicas_of(deployment) + surge):
            return
        meta = rs["metadata"]
        await self.client.patch("replicasets", meta["name"], {
            "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {
                DESIRED_REPLICAS: str(replicas_of(deployment)),
                MAX_REPLICAS: str(replicas_of(deployment) + surge)}},
            "spec": {"replicas": replicas}}, namespace=meta["namespace"])
        if before == replicas:
            return
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
                            new_rs: Object | None, *, rollout: bool = True) -> None:
        now = datetime.now(UTC)
        status = deployment_status(deployment, all_rss, new_rs, rfc3339(now), now=now,
                                   rollout=rollout)
        wait = stuck_requeue_after(deployment, status, now) if rollout else None
        if wait is not None:
            self.queue.add_after(key_of(deployment), wait)
        if status == (deployment.get("status") or {}):
            return
        before = find_condition((deployment.get("status") or {}).get("conditions") or [],
                                "Progressing")
        after = find_condition(status["conditions"], "Progressing")
        if after is not None and after.get("reason") == TIMED_OUT and (
                before is None or before.get("reason") != TIMED_OUT):
            log.info("deployment %s: %s", key_of(deployment), after.get("message"))
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

