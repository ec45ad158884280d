"""Table tests of the queueing hints (which cluster event may undo which plugin's
rejection) and of the score summary in the `Scheduled` event."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework import score_summary
from scheduler.hints import pod_event_could_help
from scheduler.queue import (
    NODE_ADDED,
    NODE_CHANGED,
    POD_ADDED,
    POD_DELETED,
    SchedulingQueue,
    interested,
)


@pytest.mark.parametrize(("rejected_by", "event", "wakes"), [
    (frozenset(), POD_DELETED, True),  # nothing known: any event may help
    (frozenset({"NodeAffinity"}), POD_DELETED, False),
    (frozenset({"NodeAffinity"}), NODE_CHANGED, True),
    (frozenset({"NodeResourcesFit"}), POD_DELETED, True),
    (frozenset({"NodeResourcesFit"}), POD_ADDED, False),
    (frozenset({"InterPodAffinity"}), POD_ADDED, True),
    (frozenset({"PodTopologySpread"}), POD_DELETED, True),
    (frozenset({"NodeName"}), NODE_CHANGED, False),
    (frozenset({"NodeName"}), NODE_ADDED, True),
    (frozenset({"TaintToleration", "NodeResourcesFit"}), POD_DELETED, True),
    (frozenset({"TaintToleration"}), None, True),  # no event: a plain check
    (frozenset({"SomeOtherPlugin"}), POD_DELETED, True),
])
def test_interested(rejected_by: frozenset[str], event: str | None, wakes: bool) -> None:
    assert interested(rejected_by, event) is wakes


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {}}


def test_a_pod_deletion_moves_only_pods_rejected_for_resources() -> None:
    queue = SchedulingQueue()
    for name in ("needs-cpu", "needs-label"):
        queue.add(pod(name))
    first, second = queue.pop_ready(), queue.pop_ready()
    assert first is not None and second is not None
    queue.failed(first, unschedulable=True, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.failed(second, unschedulable=True, rejected_by=frozenset({"NodeAffinity"}))
    asked: list[str] = []

    def fits(p: dict[str, Any]) -> bool:
        asked.append(p["metadata"]["name"])
        return True
    assert queue.move_matching(fits, event=POD_DELETED) == 1
    assert asked == ["needs-cpu"]  # the other pod is not even checked
    item = queue.pop_ready()
    assert item is not None and item.key == "default/needs-cpu"
    assert queue.move_matching(fits, event=NODE_CHANGED) == 1


SCORES = {"NodeAffinity": {"large": 200, "small": 0, "gpu": 0},
          "NodeResourcesFit": {"large": 53, "small": 95, "gpu": 90},
          "LeastPods": {"large": 0, "small": 100, "gpu": 100}}


@pytest.mark.parametrize(("scores", "chosen", "limit", "expected"), [
    ({}, "n1", 3, ""),
    (SCORES, "large", 3, "Scores of 3 feasible nodes: large 253 (NodeAffinity 200, "
     "NodeResourcesFit 53), small 195 (NodeResourcesFit 95, LeastPods 100), "
     "gpu 190 (NodeResourcesFit 90, LeastPods 100)"),
    (SCORES, "large", 1, "Scores of 3 feasible nodes: large 253 (NodeAffinity 200, "
     "NodeResourcesFit 53), and 2 more"),
    # A tie broken at random: the chosen node still comes first.
    ({"LeastPods": {"a": 100, "b": 100}}, "b", 3,
     "Scores of 2 feasible nodes: b 100 (LeastPods 100), a 100 (LeastPods 100)"),
    ({"LeastPods": {"a": 0, "b": 0}}, "a", 3, "Scores of 2 feasible nodes: a 0, b 0"),
])
def test_score_summary(scores: dict[str, dict[str, int]], chosen: str, limit: int,
                       expected: str) -> None:
    assert score_summary(scores, chosen, limit=limit) == expected


def labelled(name: str, spec: dict[str, Any] | None = None, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "c"}], **(spec or {})}}


def affinity(kind: str, app: str) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "x"}]}}}


SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                         "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "web"}}}]}

HINT_CASES = [
    ("a deleted pod frees resources", frozenset({"NodeResourcesFit"}), labelled("w"),
     labelled("any"), POD_DELETED, True),
    ("a placed pod never frees resources", frozenset({"NodeResourcesFit"}), labelled("w"),
     labelled("any"), POD_ADDED, False),
    ("a placed pod the waiter's affinity selects", frozenset({"InterPodAffinity"}),
     labelled("w", affinity("podAffinity", "db")), labelled("db", app="db"), POD_ADDED, True),
    ("a placed pod it does not select", frozenset({"InterPodAffinity"}),
     labelled("w", affinity("podAffinity", "db")), labelled("x", app="cache"), POD_ADDED,
     False),
    ("a deleted pod the waiter's anti-affinity selected", frozenset({"InterPodAffinity"}),
     labelled("w", affinity("podAntiAffinity", "web")), labelled("old", app="web"),
     POD_DELETED, True),
    ("a deleted pod whose anti-affinity kept the waiter out", frozenset({"InterPodAffinity"}),
     labelled("w", app="web"), labelled("guard", affinity("podAntiAffinity", "web")),
     POD_DELETED, True),
    ("a deleted unrelated pod", frozenset({"InterPodAffinity"}),
     labelled("w", affinity("podAntiAffinity", "web")), labelled("x", app="other"),
     POD_DELETED, False),
    ("a pod the spread constraint counts", frozenset({"PodTopologySpread"}),
     labelled("w", SPREAD, app="web"), labelled("peer", app="web"), POD_ADDED, True),
    ("a pod it does not count", frozenset({"PodTopologySpread"}),
     labelled("w", SPREAD, app="web"), labelled("x", app="other"), POD_DELETED, False),
    ("nothing known: yes", frozenset(), labelled("w"), labelled("x"), POD_ADDED, True),
]


@pytest.mark.parametrize(("case", "rejected_by", "waiting", "changed", "event", "helps"),
                         HINT_CASES, ids=[c[0] for c in HINT_CASES])
def test_pod_event_could_help(case: str, rejected_by: frozenset[str], waiting: dict[str, Any],
                              changed: dict[str, Any], event: str, helps: bool) -> None:
    assert pod_event_could_help(waiting, rejected_by, changed, event, {}) is helps
