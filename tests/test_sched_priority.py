"""Priority in the scheduler: the queue's order (kube's PrioritySort) and preemption's
decisions (tables in the style of kube's `default_preemption_test.go`): eligibility, the
victims on one node, the node picked, and the PostFilter message."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.framework import Cluster, NodeInfo, schedule_one
from scheduler.plugins import FILTERS, SCORERS
from scheduler.preemption import (
    NO_VICTIMS,
    POLICY_NEVER,
    TERMINATING_ON_NOMINATED,
    Candidate,
    Outcome,
    lower_priority_nominated,
    nomination,
    not_eligible,
    pick_candidate,
    preempt,
    select_victims,
    with_nominated,
)
from scheduler.queue import SchedulingQueue


def pod(name: str, priority: int = 0, *, cpu: str = "500m", start: str = "2026-01-01T00:00:00Z",
        node: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": start},
        "spec": {"priority": priority, "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
                 **spec},
        "status": {"startTime": start}}
    if node:
        body["spec"]["nodeName"] = node
    return body


def node(name: str, *pods: dict[str, Any], cpu: str = "1", **labels: str) -> NodeInfo:
    info = NodeInfo({"metadata": {"name": name, "labels": labels},
                     "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "110"},
                                "conditions": [{"type": "Ready", "status": "True"}]}})
    for p in pods:
        info.add_pod(f"default/{p['metadata']['name']}", {**p, "spec": {
            **p["spec"], "nodeName": name}})
    return info


def names(pods: Any) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- the queue -------------------------------------------------------------------------------

def test_queue_pops_the_highest_priority_first_then_fifo() -> None:
    queue = SchedulingQueue(clock=lambda: 0.0)
    for name, priority in [("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", -5), ("f", 100)]:
        queue.add(pod(name, priority))
    queue.delete(pod("d"))
    popped = []
    while (item := queue.pop_ready()) is not None:
        popped.append(item.key)
    assert popped == ["default/f", "default/b", "default/a", "default/c", "default/e"]
    assert queue.counts()["active"] == 0


def test_a_failed_pod_requeued_keeps_its_rank() -> None:
    queue = SchedulingQueue(clock=lambda: 0.0)
    queue.add(pod("low", 1))
    queue.add(pod("high", 5))
    item = queue.pop_ready()
    assert item is not None and item.key == "default/high"
    item.moved_while_in_flight = True
    queue.failed(item, unschedulable=True)  # straight back to active
    assert [queue.pop_ready().key for _ in range(2)] == [  # type: ignore[union-attr]
        "default/high", "default/low"]


# --- eligibility -----------------------------------------------------------------------------

ELIGIBLE_CASES = [
    ("a plain pod may preempt", pod("p", 10), {}, None),
    ("preemptionPolicy Never may not", pod("p", 10, preemptionPolicy="Never"), {},
     POLICY_NEVER),
    ("a lower-priority pod terminating on the nominated node: wait for it",
     {**pod("p", 10), "status": {"nominatedNodeName": "n1"}},
     {"n1": node("n1", {**pod("v", 1), "metadata": {
         "name": "v", "deletionTimestamp": "2026-01-01T00:00:00Z"}})},
     TERMINATING_ON_NOMINATED),
    ("a higher-priority pod terminating there does not count",
     {**pod("p", 10), "status": {"nominatedNodeName": "n1"}},
     {"n1": node("n1", {**pod("v", 50), "metadata": {
         "name": "v", "deletionTimestamp": "2026-01-01T00:00:00Z"}})}, None),
]


@pytest.mark.parametrize(("case", "preemptor", "nodes", "expected"), ELIGIBLE_CASES,
                         ids=[c[0] for c in ELIGIBLE_CASES])
def test_not_eligible(case: str, preemptor: dict[str, Any], nodes: dict[str, NodeInfo],
                      expected: str | None) -> None:
    assert not_eligible(preemptor, nodes) == expected


# --- victims on one node -----------------------------------------------------------------------

def fits_cpu(preemptor: dict[str, Any]) -> Any:
    def fits(trial: NodeInfo) -> bool:
        return schedule_one(preemptor, [trial], filters=FILTERS, scorers=SCORERS,
                            rng=random.Random(0)).node_name is not None
    return fits


VICTIM_CASES = [
    ("the one lower pod in the way", pod("p", 10, cpu="600m"),
     node("n", pod("low", 0, cpu="600m")), ["low"]),
    ("only as many as needed, the least important first",
     pod("p", 10, cpu="500m"),
     node("n", pod("a", 1, cpu="250m"), pod("b", 2, cpu="250m"), pod("c", 3, cpu="250m")),
     ["a"]),
    ("the victims, most important first", pod("p", 10, cpu="500m"),
     node("n", pod("a", 1, cpu="300m"), pod("b", 2, cpu="300m"), pod("c", 3, cpu="300m")),
     ["b", "a"]),
    ("equal priority: the one that started later goes",
     pod("p", 10, cpu="500m"),
     node("n", pod("old", 1, cpu="250m", start="2026-01-01T00:00:00Z"),
          pod("new", 1, cpu="250m", start="2026-01-02T00:00:00Z"),
          pod("mid", 1, cpu="250m", start="2026-01-01T12:00:00Z")),
     ["new"]),
    ("higher-priority pods are never victims", pod("p", 10, cpu="600m"),
     node("n", pod("high", 20, cpu="600m")), None),
    ("equal priority is not lower", pod("p", 10, cpu="600m"),
     node("n", pod("same", 10, cpu="600m")), None),
    ("removing every lower pod is not enough", pod("p", 10, cpu="900m"),
     node("n", pod("high", 20, cpu="300m"), pod("low", 0, cpu="300m")), None),
]


@pytest.mark.parametrize(("case", "preemptor", "info", "expected"), VICTIM_CASES,
                         ids=[c[0] for c in VICTIM_CASES])
def test_select_victims(case: str, preemptor: dict[str, Any], info: NodeInfo,
                        expected: list[str] | None) -> None:
    before = dict(info.pods)
    victims = select_victims(preemptor, info, fits_cpu(preemptor))
    assert (None if victims is None else names(victims)) == expected
    assert info.pods == before  # the snapshot is not changed


# --- which node --------------------------------------------------------------------------------

def cand(node_name: str, *victims: dict[str, Any]) -> Candidate:
    return Candidate(node_name, tuple(victims))


PICK_CASES = [
    ("the lowest highest-victim priority",
     [cand("a", pod("x", 5)), cand("b", pod("y", 1), pod("z", 1))], "b"),
    ("then the lowest sum of priorities",
     [cand("a", pod("x", 5), pod("y", 4)), cand("b", pod("z", 5), pod("w", 1))], "b"),
    ("negative priorities count (kube offsets them)",
     [cand("a", pod("x", 5), pod("y", -10)), cand("b", pod("z", 5))], "b"),
    ("then the fewest victims",
     [cand("a", pod("x", 2), pod("y", 0)), cand("b", pod("z", 2))], "b"),
    ("then the latest start of the most important victims",
     [cand("a", pod("x", 2, start="2026-01-01T00:00:00Z")),
      cand("b", pod("y", 2, start="2026-01-03T00:00:00Z")),
      cand("c", pod("z", 2, start="2026-01-02T00:00:00Z"))], "b"),
    ("all equal: the first", [cand("a", pod("x", 2)), cand("b", pod("y", 2))], "a"),
]


@pytest.mark.parametrize(("case", "candidates", "expected"), PICK_CASES,
                         ids=[c[0] for c in PICK_CASES])
def test_pick_candidate(case: str, candidates: list[Candidate], expected: str) -> None:
    assert pick_candidate(candidates).node == expected


# --- the PostFilter, end to end of the pure part ---------------------------------------------

def run(preemptor: dict[str, Any], nodes: list[NodeInfo]) -> tuple[Any, str]:
    result = schedule_one(preemptor, nodes, filters=FILTERS, scorers=SCORERS,
                          rng=random.Random(0))
    assert result.node_name is None
    return preempt(preemptor, Cluster(nodes), FILTERS, result.diagnosis), result.message


def test_preempts_on_the_node_with_the_least_important_victims() -> None:
    nodes = [node("n1", pod("mid", 5, cpu="800m")), node("n2", pod("low", 1, cpu="800m")),
             node("n3", pod("top", 100, cpu="800m"))]
    outcome, message = run(pod("p", 10, cpu="500m"), nodes)
    assert message == "0/3 nodes are available: 3 Insufficient cpu."
    assert outcome.message == ""
    assert outcome.candidate is not None
    assert (outcome.candidate.node, names(outcome.candidate.victims)) == ("n2", ["low"])


def test_no_victims_message_is_kubes() -> None:
    nodes = [node("n1", pod("top", 100, cpu="800m"), disk="ssd"), node("n2")]
    preemptor = pod("p", 10, cpu="500m", nodeSelector={"disk": "ssd"})
    outcome, message = run(preemptor, nodes)
    assert outcome.candidate is None
    assert message == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match "
                       "Pod's node affinity/selector.")
    assert outcome.message == (
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming "
        "pod, 1 Preemption is not helpful for scheduling.")
    assert NO_VICTIMS in outcome.message


def test_never_does_not_preempt() -> None:
    nodes = [node("n1", pod("low", 0, cpu="800m"))]
    outcome, _ = run(pod("p", 10, cpu="500m", preemptionPolicy="Never"), nodes)
    assert outcome.candidate is None
    assert outcome.message == "preemption: not eligible due to preemptionPolicy=Never."


NOMINATION_CASES = [
    ("preempting nominates the node", {}, Outcome(Candidate("n1", ())), "n1"),
    ("no node would do: cleared", {"nominatedNodeName": "n1"},
     Outcome(None, "preemption: ...", clear_nomination=True), None),
    ("not eligible (waiting for the victims): kept", {"nominatedNodeName": "n1"},
     Outcome(None, "preemption: " + TERMINATING_ON_NOMINATED), "n1"),
    ("a scheduler error: kept", {"nominatedNodeName": "n1"}, None, "n1"),
]


@pytest.mark.parametrize(("case", "status", "outcome", "expected"), NOMINATION_CASES,
                         ids=[c[0] for c in NOMINATION_CASES])
def test_nomination(case: str, status: dict[str, str], outcome: Outcome | None,
                    expected: str | None) -> None:
    assert nomination({"status": status}, outcome) == expected


def test_nominated_pods_hold_their_room_against_less_or_equally_important_pods() -> None:
    nodes = [node("n1"), node("n2")]
    high = pod("high", 100, cpu="800m")
    nominated = {"default/high": ("n1", high)}
    # An equally important pod sees high's room as taken, and goes to n2.
    seen = with_nominated(nodes, nominated, pod("peer", 100, cpu="500m"))
    assert names(seen[0].pods.values()) == ["high"] and seen[1] is nodes[1]
    assert not nodes[0].pods  # the snapshot is not changed
    result = schedule_one(pod("peer", 100, cpu="500m"), seen, filters=FILTERS,
                          scorers=SCORERS, rng=random.Random(0))
    assert result.node_name == "n2"
    # A more important pod, and high itself, do not see it.
    assert with_nominated(nodes, nominated, pod("top", 101))[0] is nodes[0]
    assert with_nominated(nodes, nominated, high)[0] is nodes[0]


def test_the_less_important_pods_nominated_to_the_preemptors_node_lose_their_nomination() -> None:
    nominated = {"default/low": ("n1", pod("low", 10)), "default/peer": ("n1", pod("peer", 100)),
                 "default/elsewhere": ("n2", pod("elsewhere", 10)),
                 "default/high": ("n1", pod("high", 100))}
    # kube's getLowerPriorityNominatedPods: on that node, strictly less important, not itself
    assert [key for key, _ in lower_priority_nominated(nominated, pod("high", 100), "n1")] == [
        "default/low"]
    assert lower_priority_nominated(nominated, pod("high", 100), "n3") == []
    assert lower_priority_nominated(nominated, pod("lowest", 0), "n1") == []
