"""The garbage-collection side of a DELETE and of an update, as kube's generic store decides
it (k8s.io/apiserver registry/generic/registry/store.go: shouldOrphanDependents,
shouldDeleteDependents, deletionFinalizersForGarbageCollection, ShouldDeleteDuringUpdate).

A DELETE's `propagationPolicy` (or the older `orphanDependents`) becomes a finalizer on the
object: `Foreground` adds `foregroundDeletion` (the garbage collector deletes the dependents
first, then removes the finalizer), `Orphan` adds `orphan` (the collector strips the
dependents' ownerReferences, then removes it), `Background` neither (the object goes now,
the collector deletes the dependents after). Without either option the finalizers already on
the object decide, then the kind's default (`Resource.gc_policy`). An object with
finalizers is only marked (deletionTimestamp) and stays until they are all removed; the
update that removes the last one removes the object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
FOREGROUND, BACKGROUND, ORPHAN = "Foreground", "Background", "Orphan"


def should_orphan(finalizers: Sequence[str], *, policy: str | None,
                  orphan_dependents: bool | None, default_policy: str) -> bool:
    """shouldOrphanDependents: the option, else the object's finalizers, else the default."""
    if orphan_dependents is not None:
        return orphan_dependents
    if policy is not None:
        return policy == ORPHAN
    for finalizer in finalizers:
        if finalizer == ORPHAN_FINALIZER:
            return True
        if finalizer == FOREGROUND_FINALIZER:
            return False
    return default_policy == ORPHAN


def should_delete_dependents(finalizers: Sequence[str], *, policy: str | None,
                             orphan_dependents: bool | None) -> bool:
    """shouldDeleteDependents: Foreground asked for, or already on the object."""
    if orphan_dependents is not None:
        return False
    if policy is not None:
        return policy == FOREGROUND
    return FOREGROUND_FINALIZER in finalizers


def deletion_finalizers(finalizers: Sequence[str], *, policy: str | None,
                        orphan_dependents: bool | None, default_policy: str) -> list[str]:
    """deletionFinalizersForGarbageCollection: the finalizers the object gets on a DELETE
    (the same list, in its order, when the set does not change)."""
    orphan = should_orphan(finalizers, policy=policy, orphan_dependents=orphan_dependents,
                           default_policy=default_policy)
    foreground = should_delete_dependents(finalizers, policy=policy,
                                          orphan_dependents=orphan_dependents)
    kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    if orphan:
        kept.append(ORPHAN_FINALIZER)
    if foreground:
        kept.append(FOREGROUND_FINALIZER)
    return list(finalizers) if set(kept) == set(finalizers) else kept


def with_deletion_finalizers(obj: dict[str, Any], *, policy: str | None,
                             orphan_dependents: bool | None,
                             default_policy: str) -> dict[str, Any]:
    """`obj` with the finalizers a DELETE gives it; `obj` itself when they do not change."""
    meta = obj.get("metadata") or {}
    current = list(meta.get("finalizers") or [])
    wanted = deletion_finalizers(current, policy=policy, orphan_dependents=orphan_dependents,
                                 default_policy=default_policy)
    if wanted == current:
        return obj
    new_meta = {k: v for k, v in meta.items() if k != "finalizers"}
    if wanted:
        new_meta["finalizers"] = wanted
    return {**obj, "metadata": new_meta}


def uses_default_policy(policy: str | None, orphan_dependents: bool | None) -> bool:
    return policy is None and orphan_dependents is None


def should_delete_during_update(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """ShouldDeleteDuringUpdate: the update removes the last finalizer of an object that is
    marked for deletion with no grace period left, so it is deleted instead of written."""
    new_meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    if new_meta.get("finalizers") or not old_meta.get("finalizers"):
        return False
    return bool(old_meta.get("deletionTimestamp")) and \
        old_meta.get("deletionGracePeriodSeconds") == 0
