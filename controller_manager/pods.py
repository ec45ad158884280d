"""What the pod-owning controllers share (pkg/controller/controller_utils.go and
controller_ref_manager.go): label selectors, controller references, pod readiness, the
order in which surplus pods are deleted, and expectations.

All pure, except `Expectations`, which is a small in-memory ledger with a clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Object = dict[str, Any]


# -- label selectors (metav1.LabelSelectorAsSelector) -------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector against labels: every matchLabels pair and every matchExpression
    (In, NotIn, Exists, DoesNotExist). A missing selector matches nothing; an empty one
    (`{}`) everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = expression.get("key")
        operator = expression.get("operator")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


# -- controller references -------------------------------------------------------------------


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with controller: true (metav1.GetControllerOf)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def controller_ref(owner: Mapping[str, Any], *, api_version: str, kind: str) -> Object:
    """metav1.NewControllerRef: controller and blockOwnerDeletion both true."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


@dataclass(frozen=True)
class Claim:
    """ClaimPods' verdict: the pods the owner controls after adoption and release."""

    owned: list[Object]  # already ours and matching
    adopt: list[Object]  # orphans that match: ours once patched
    release: list[Object]  # ours but no longer matching: to be let go


def claim(owner: Mapping[str, Any], selector: Mapping[str, Any] | None,
          candidates: Sequence[Object]) -> Claim:
    """PodControllerRefManager.ClaimPods: keep ours that match, adopt matching orphans
    (never while the owner or the pod is being deleted), release ours that stopped
    matching (not while the owner is being deleted)."""
    uid = (owner.get("metadata") or {}).get("uid")
    owner_deleting = bool((owner.get("metadata") or {}).get("deletionTimestamp"))
    owned, adopt, release = [], [], []
    for pod in candidates:
        ref = controller_of(pod)
        matches = selector_matches(selector, labels_of(pod))
        if ref is not None:
            if ref.get("uid") != uid:
                continue  # someone else's
            if matches:
                owned.append(pod)
            elif not owner_deleting:
                release.append(pod)
            continue
        if matches and not owner_deleting and not (pod.get("metadata") or {}).get(
                "deletionTimestamp"):
            adopt.append(pod)
    return Claim(owned, adopt, release)


def released_refs(pod: Mapping[str, Any], owner_uid: str) -> list[Object]:
    return [dict(r) for r in (pod.get("metadata") or {}).get("ownerReferences") or []
            if r.get("uid") != owner_uid]


# -- pod state --------------------------------------------------------------------------------


def is_active(pod: Mapping[str, Any]) -> bool:
    """FilterActivePods: not Succeeded/Failed and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return (phase not in ("Succeeded", "Failed")
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def parse_time(text: Any) -> datetime | None:
    """An RFC 3339 timestamp of the API (None when absent or malformed)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def is_available(pod: Mapping[str, Any], min_ready_seconds: int, now: datetime) -> bool:
    """IsPodAvailable: Ready, and for at least minReadySeconds."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and (now - since).total_seconds() >= min_ready_seconds


def restarts(pod: Mapping[str, Any]) -> int:
    return max((int(s.get("restartCount") or 0)
                for s in (pod.get("status") or {}).get("containerStatuses") or []), default=0)


# -- which pods go first (ActivePodsWithRanks.Less) ---------------------------------------------

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


def deletion_cost(pod: Mapping[str, Any]) -> int:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(
        DELETION_COST_ANNOTATION)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def deletion_order_key(pod: Mapping[str, Any], rank: int) -> tuple[Any, ...]:
    """Sorts the pods to delete first to the front, as kube's ActivePodsWithRanks:
    1. unassigned before assigned; 2. Pending < Unknown < Running; 3. not ready before
    ready; 4. lower pod-deletion-cost first; 5. more pods of the owner on the same node
    (higher rank) first; 6. ready for a shorter time first; 7. more restarts first;
    8. newer before older."""
    meta = pod.get("metadata") or {}
    assigned = bool((pod.get("spec") or {}).get("nodeName"))
    phase = _PHASE_ORDER.get(str((pod.get("status") or {}).get("phase")), 0)
    ready = is_ready(pod)
    ready_since = (parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
                   if ready else None)
    created = parse_time(meta.get("creationTimestamp"))
    # Newer first: negate the timestamps (None sorts as "newest").
    ready_key = -(ready_since.timestamp()) if ready_since else float("-inf")
    created_key = -(created.timestamp()) if created else float("-inf")
    return (assigned, phase, ready, deletion_cost(pod), -rank, ready_key, -restarts(pod),
            created_key,
            str(meta.get("name") or ""))


def pods_to_delete(pods: Sequence[Object], count: int,
                   related: Sequence[Object] | None = None) -> list[Object]:
    """getPodsToDelete: the `count` pods that go first. A pod's rank is how many of
    `related` (the owner's active pods, default `pods`) share its node."""
    if count <= 0:
        return []
    on_node: dict[str, int] = {}
    for pod in related if related is not None else pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            on_node[node] = on_node.get(node, 0) + 1

    def key(pod: Object) -> tuple[Any, ...]:
        node = (pod.get("spec") or {}).get("nodeName")
        return deletion_order_key(pod, on_node.get(node, 0) if node else 0)

    return sorted(pods, key=key)[:count]


def slow_start_batches(count: int, initial: int = 1) -> list[int]:
    """slowStartBatch's batch sizes: 1, 2, 4, ... until `count` is covered."""
    batches, size, left = [], initial, count
    while left > 0:
        batch = min(size, left)
        batches.append(batch)
        left -= batch
        size *= 2
    return batches


# -- expectations (ControllerExpectations) ---------------------------------------------------

EXPECTATIONS_TIMEOUT = 5 * 60.0  # ExpectationsTimeout


@dataclass
class Expectation:
    add: int
    deletes: set[str]  # the uids of the pods we deleted and have not seen go yet
    at: float


@dataclass
class Expectations:
    """What a controller is waiting to see in its informer after its own creates and
    deletes (UIDTrackingControllerExpectations): it does not act on an owner again until
    they arrived (or 5 minutes passed), so that a lagging watch never causes a second round
    of creates or deletes. Deletions are tracked by pod uid, so that seeing a pod's
    graceful delete start and then its removal counts once."""

    clock: Callable[[], float] = time.monotonic
    entries: dict[str, Expectation] = field(default_factory=dict)

    def satisfied(self, key: str) -> bool:
        entry = self.entries.get(key)
        if entry is None:
            return True
        return (entry.add <= 0 and not entry.deletes
                or self.clock() - entry.at > EXPECTATIONS_TIMEOUT)

    def expect(self, key: str, *, add: int = 0, deletes: Sequence[str] = ()) -> None:
        self.entries[key] = Expectation(add, set(deletes), self.clock())

    def creation_observed(self, key: str, count: int = 1) -> None:
        entry = self.entries.get(key)
        if entry is not None:
            entry.add -= count

    def deletion_observed(self, key: str, uid: str) -> None:
        entry = self.entries.get(key)
        if entry is not None:
            entry.deletes.discard(uid)

    def forget(self, key: str) -> None:
        self.entries.pop(key, None)

    def pending(self, key: str) -> tuple[int, int]:
        entry = self.entries.get(key)
        return (entry.add, len(entry.deletes)) if entry else (0, 0)
