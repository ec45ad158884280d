"""Pure tests of the garbage-collection decisions of DELETE and update (kube's
store_test.go TestDeletionFinalizersForGarbageCollection and ShouldDeleteDuringUpdate)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.resources.deletion import (
    deletion_finalizers,
    should_delete_during_update,
    with_deletion_finalizers,
)


@pytest.mark.parametrize(("finalizers", "policy", "orphan", "default", "expected"), [
    # the options win
    ([], "Foreground", None, "Background", ["foregroundDeletion"]),
    ([], "Orphan", None, "Background", ["orphan"]),
    ([], "Background", None, "Orphan", []),
    ([], None, True, "Background", ["orphan"]),
    ([], None, False, "Orphan", []),
    # then the finalizers on the object
    (["orphan"], None, None, "Background", ["orphan"]),
    (["foregroundDeletion"], None, None, "Orphan", ["foregroundDeletion"]),
    # then the kind's default
    ([], None, None, "Background", []),
    ([], None, None, "Orphan", ["orphan"]),
    # a policy replaces the other GC finalizer and keeps the rest, in order
    (["a.io/x", "orphan", "b.io/y"], "Foreground", None, "Background",
     ["a.io/x", "b.io/y", "foregroundDeletion"]),
    (["a.io/x", "foregroundDeletion"], "Background", None, "Background", ["a.io/x"]),
    # an unchanged set keeps the object's order
    (["foregroundDeletion", "a.io/x"], "Foreground", None, "Background",
     ["foregroundDeletion", "a.io/x"]),
])
def test_deletion_finalizers(finalizers: list[str], policy: str | None, orphan: bool | None,
                             default: str, expected: list[str]) -> None:
    assert deletion_finalizers(finalizers, policy=policy, orphan_dependents=orphan,
                               default_policy=default) == expected


def test_with_deletion_finalizers_returns_the_object_itself_when_unchanged() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "x"}}
    assert with_deletion_finalizers(obj, policy="Background", orphan_dependents=None,
                                    default_policy="Background") is obj
    changed = with_deletion_finalizers(obj, policy="Orphan", orphan_dependents=None,
                                       default_policy="Background")
    assert changed["metadata"] == {"name": "x", "finalizers": ["orphan"]}
    assert obj == {"metadata": {"name": "x"}}


MARKED = {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0}


@pytest.mark.parametrize(("new", "old", "deleted"), [
    ({}, {**MARKED, "finalizers": ["a.io/x"]}, True),
    ({"finalizers": ["a.io/y"]}, {**MARKED, "finalizers": ["a.io/x"]}, False),
    ({}, {"finalizers": ["a.io/x"]}, False),  # not being deleted
    ({}, {**MARKED}, False),  # had no finalizers to remove
    ({}, {**MARKED, "deletionGracePeriodSeconds": 30, "finalizers": ["a.io/x"]}, False),
])
def test_should_delete_during_update(new: dict[str, Any], old: dict[str, Any],
                                     deleted: bool) -> None:
    assert should_delete_during_update({"metadata": new}, {"metadata": old}) is deleted
