"""Unit tests of the scheduler's pure parts: plugins, framework, message, queue, cache,
metrics and health reports."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from scheduler.cache import ClusterCache
from scheduler.framework import (
    NO_NODES_AVAILABLE,
    SUCCESS,
    Code,
    Diagnosis,
    NodeInfo,
    Status,
    error,
    fit_error_message,
    num_feasible_nodes_to_find,
    per_node_reasons,
    run_filters,
    schedule_one,
    tolerates,
    unschedulable,
)
from scheduler.metrics import MetricsSnapshot, health_report, render_metrics
from scheduler.plugins import (
    FILTERS,
    SCORERS,
    least_pods,
    node_affinity,
    node_name,
    node_ready,
    node_unschedulable,
    taint_toleration,
)
from scheduler.pods import (
    UNSCHEDULABLE_NODES_ANNOTATION,
    annotation_patch,
    unschedulable_condition_patch,
)
from scheduler.queue import SchedulingQueue, backoff_seconds, node_change_could_help


def make_node(name: str, *, labels: dict[str, str] | None = None, ready: str | None = "True",
              unschedulable_: bool = False, taints: list[dict[str, str]] | None = None
              ) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if unschedulable_:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    status: dict[str, Any] = {"conditions": []}
    if ready is not None:
        status["conditions"].append({"type": "Ready", "status": ready})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


def make_pod(name: str = "web", *, node_selector_: dict[str, str] | None = None,
             tolerations: list[dict[str, str]] | None = None, node_name_: str | None = None,
             uid: str = "uid-1", namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_selector_ is not None:
        spec["nodeSelector"] = node_selector_
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if node_name_ is not None:
        spec["nodeName"] = node_name_
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": spec, "status": {"phase": "Pending"}}


def info(node: dict[str, Any], pods: int = 0) -> NodeInfo:
    placed = NodeInfo(node)
    for i in range(pods):
        placed.add_pod(f"default/placed-{i}", make_pod(f"placed-{i}", uid=f"placed-{i}"))
    return placed


# -- plugins --------------------------------------------------------------------------------

NODE_SELECTOR_CASES = [
    ("no selector", None, {"shuai": "a"}, True),
    ("empty selector", {}, {}, True),
    ("match", {"shuai": "b"}, {"shuai": "b"}, True),
    ("match among other labels", {"shuai": "b"}, {"shuai": "b", "zone": "x"}, True),
    ("every pair must match", {"shuai": "b", "zone": "y"}, {"shuai": "b", "zone": "x"}, False),
    ("other value", {"shuai": "b"}, {"shuai": "a"}, False),
    ("missing label", {"shuai": "b"}, {}, False),
]


@pytest.mark.parametrize(("case", "selector", "labels", "fits"), NODE_SELECTOR_CASES,
                         ids=[c[0] for c in NODE_SELECTOR_CASES])
def test_node_selector(case: str, selector: dict[str, str] | None, labels: dict[str, str],
                       fits: bool) -> None:
    status = node_affinity.fits(make_pod(node_selector_=selector),
                                info(make_node("n", labels=labels)))
    assert status.is_success is fits
    if not fits:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("node(s) didn't match Pod's node affinity/selector",)


TOLERATE_ALL = [{"operator": "Exists"}]
NOT_READY_TOLERATION = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                         "effect": "NoSchedule"}]
UNREACHABLE_TOLERATION = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]

NODE_READY_CASES = [
    ("ready", "True", None, True),
    ("not ready", "False", None, False),
    ("unknown", "Unknown", None, False),
    ("never reported", None, None, False),
    ("not ready, tolerated", "False", NOT_READY_TOLERATION, True),
    ("not ready, wrong toleration", "False", UNREACHABLE_TOLERATION, False),
    ("unknown, unreachable tolerated", "Unknown", UNREACHABLE_TOLERATION, True),
    ("unknown, tolerates everything", "Unknown", TOLERATE_ALL, True),
]


@pytest.mark.parametrize(("case", "ready", "tolerations", "fits"), NODE_READY_CASES,
                         ids=[c[0] for c in NODE_READY_CASES])
def test_node_ready(case: str, ready: str | None, tolerations: list[dict[str, str]] | None,
                    fits: bool) -> None:
    status = node_ready.fits(make_pod(tolerations=tolerations), info(make_node("n", ready=ready)))
    assert status.is_success is fits
    if not fits:  # as kube's not-ready taint: preemption cannot help
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ("node(s) were not ready",)


UNSCHEDULABLE_TOLERATION = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                             "effect": "NoSchedule"}]

NODE_UNSCHEDULABLE_CASES = [
    ("schedulable", False, None, True),
    ("cordoned", True, None, False),
    ("cordoned, tolerated", True, UNSCHEDULABLE_TOLERATION, True),
    ("cordoned, tolerates everything", True, TOLERATE_ALL, True),
    ("cordoned, NoExecute only", True,
     [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}],
     False),
    ("cordoned, other key", True, NOT_READY_TOLERATION, False),
]


@pytest.mark.parametrize(("case", "cordoned", "tolerations", "fits"), NODE_UNSCHEDULABLE_CASES,
                         ids=[c[0] for c in NODE_UNSCHEDULABLE_CASES])
def test_node_unschedulable(case: str, cordoned: bool,
                            tolerations: list[dict[str, str]] | None, fits: bool) -> None:
    status = node_unschedulable.fits(make_pod(tolerations=tolerations),
                                     info(make_node("n", unschedulable_=cordoned)))
    assert status.is_success is fits
    if not fits:
        assert status.reasons == ("node(s) were unschedulable",)


@pytest.mark.parametrize(("wanted", "node", "fits"), [
    (None, "node1", True), ("node1", "node1", True), ("node2", "node1", False)])
def test_node_name(wanted: str | None, node: str, fits: bool) -> None:
    status = node_name.fits(make_pod(node_name_=wanted), info(make_node(node)))
    assert status.is_success is fits
    if not fits:
        assert status.reasons == ("node(s) didn't match the requested node name",)


GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
TAINT_CASES = [
    ("no taints", [], None, None),
    ("untolerated", [GPU_TAINT], None, "node(s) had untolerated taint {gpu: true}"),
    ("tolerated by Equal", [GPU_TAINT],
     [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}], None),
    ("Equal with another value", [GPU_TAINT],
     [{"key": "gpu", "operator": "Equal", "value": "false"}],
     "node(s) had untolerated taint {gpu: true}"),
    ("tolerated by Exists on key", [GPU_TAINT], [{"key": "gpu", "operator": "Exists"}], None),
    ("PreferNoSchedule does not filter",
     [{"key": "slow", "value": "", "effect": "PreferNoSchedule"}], None, None),
    ("NoExecute filters", [{"key": "bad", "effect": "NoExecute"}], None,
     "node(s) had untolerated taint {bad: }"),
]


@pytest.mark.parametrize(("case", "taints", "tolerations", "reason"), TAINT_CASES,
                         ids=[c[0] for c in TAINT_CASES])
def test_taint_toleration(case: str, taints: list[dict[str, str]],
                          tolerations: list[dict[str, str]] | None, reason: str | None) -> None:
    status = taint_toleration.fits(make_pod(tolerations=tolerations),
                                   info(make_node("n", taints=taints)))
    assert status.reasons == (() if reason is None else (reason,))


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    ({"operator": "Exists"}, ("k", "v", "NoSchedule"), True),
    ({"key": "k", "operator": "Exists"}, ("k", "v", "NoExecute"), True),
    ({"key": "k", "value": "v"}, ("k", "v", "NoSchedule"), True),  # operator defaults to Equal
    ({"key": "k", "value": "w"}, ("k", "v", "NoSchedule"), False),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, ("k", "", "NoSchedule"), False),
    ({"key": "other", "operator": "Exists"}, ("k", "", "NoSchedule"), False),
])
def test_tolerates(toleration: dict[str, str], taint: tuple[str, str, str],
                   expected: bool) -> None:
    key, value, effect = taint
    assert tolerates([toleration], key=key, value=value, effect=effect) is expected


@pytest.mark.parametrize(("counts", "expected"), [
    ({}, {}),
    ({"a": 3, "b": 3}, {"a": 100, "b": 100}),
    ({"a": 0, "b": 10}, {"a": 100, "b": 0}),
    ({"a": 0, "b": 5, "c": 10}, {"a": 100, "b": 50, "c": 0}),
])
def test_least_pods_normalize(counts: dict[str, int], expected: dict[str, int]) -> None:
    assert least_pods.fewest_is_best(counts) == expected


def test_registry_lists_every_plugin_once() -> None:
    names = [p.name for p in FILTERS]
    assert names == ["NodeUnschedulable", "NodeName", "NodeReady", "TaintToleration",
                     "NodeAffinity", "NodeResourcesFit", "PodTopologySpread",
                     "InterPodAffinity"]
    assert [p.name for p in SCORERS] == ["TaintToleration", "NodeResourcesFit",
                                         "NodeResourcesBalancedAllocation", "NodeAffinity",
                                         "PodTopologySpread", "InterPodAffinity",
                                         "LeastPods"]


# -- framework: filters, message, choice ---------------------------------------------------

def diagnosis(*reasons: str, total: int | None = None) -> Diagnosis:
    statuses = {f"node{i}": unschedulable(r) for i, r in enumerate(reasons)}
    return Diagnosis(statuses, len(reasons) if total is None else total)


SELECTOR = "node(s) didn't match Pod's node affinity/selector"
CORDONED = "node(s) were unschedulable"
NOT_READY = "node(s) were not ready"

MESSAGE_CASES = [
    ("issue example", diagnosis(SELECTOR, CORDONED),
     "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
     "1 node(s) were unschedulable."),
    ("counted", diagnosis(SELECTOR, SELECTOR),
     "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."),
    ("sorted as strings, like kube", diagnosis(NOT_READY, CORDONED, CORDONED),
     "0/3 nodes are available: 1 node(s) were not ready, 2 node(s) were unschedulable."),
    ("10 sorts before 9, as in kube", diagnosis(*([CORDONED] * 9 + [SELECTOR] * 10)),
     "0/19 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, "
     "9 node(s) were unschedulable."),
    ("no nodes at all", Diagnosis({}, 0), NO_NODES_AVAILABLE),
]


@pytest.mark.parametrize(("case", "diag", "message"), MESSAGE_CASES,
                         ids=[c[0] for c in MESSAGE_CASES])
def test_fit_error_message(case: str, diag: Diagnosis, message: str) -> None:
    assert fit_error_message(diag) == message


def test_fit_error_counts_every_reason_of_a_node() -> None:
    diag = Diagnosis({"a": Status(Code.UNSCHEDULABLE, ("r1", "r2")),
                      "b": Status(Code.UNSCHEDULABLE, ("r1",))}, 2)
    assert fit_error_message(diag) == "0/2 nodes are available: 1 r2, 2 r1."


def test_per_node_reasons_reworded_and_capped() -> None:
    diag = diagnosis(SELECTOR, CORDONED, NOT_READY)
    assert per_node_reasons(diag) == {
        "node0": "didn't match Pod's node affinity/selector",
        "node1": "was unschedulable",
        "node2": "was not ready",
    }
    many = diagnosis(*([CORDONED] * 5))
    capped = per_node_reasons(many, limit=2)
    assert capped == {"node0": "was unschedulable", "node1": "was unschedulable",
                      "...": "3 more node(s) not shown"}


def test_run_filters_stops_at_first_rejection_and_names_it() -> None:
    node = make_node("n", labels={}, ready="False", unschedulable_=True)
    status = run_filters(FILTERS, make_pod(node_selector_={"a": "b"}), info(node))
    assert status.plugin == "NodeUnschedulable"
    assert status.reasons == (CORDONED,)


def schedule(pod: dict[str, Any], nodes: list[NodeInfo], **kw: Any) -> Any:
    return schedule_one(pod, nodes, filters=FILTERS, scorers=SCORERS,
                        rng=random.Random(1), **kw)


def test_schedule_one_picks_the_matching_node() -> None:
    nodes = [info(make_node("node1", labels={"shuai": "a"})),
             info(make_node("node2", labels={"shuai": "b"}))]
    result = schedule(make_pod(node_selector_={"shuai": "b"}), nodes)
    assert result.node_name == "node2"
    assert result.message == ""


def test_schedule_one_explains_when_nothing_fits() -> None:
    nodes = [info(make_node("node1", labels={"shuai": "a"})),
             info(make_node("node2", labels={"shuai": "b"}, unschedulable_=True))]
    result = schedule(make_pod(node_selector_={"shuai": "c"}), nodes)
    assert result.node_name is None
    assert result.message == ("0/2 nodes are available: 1 node(s) didn't match Pod's node "
                              "affinity/selector, 1 node(s) were unschedulable.")
    assert per_node_reasons(result.diagnosis) == {
        "node1": "didn't match Pod's node affinity/selector", "node2": "was unschedulable"}


def test_schedule_one_without_nodes() -> None:
    result = schedule(make_pod(), [])
    assert result.node_name is None and result.error is None
    assert result.message == "no nodes available to schedule pods"


def test_schedule_one_prefers_fewest_pods() -> None:
    nodes = [info(make_node("a"), 5), info(make_node("b"), 2), info(make_node("c"), 9)]
    assert schedule(make_pod(), nodes).node_name == "b"


def test_schedule_one_breaks_ties_at_random_so_equal_nodes_share() -> None:
    nodes = [info(make_node(n)) for n in ("a", "b", "c")]
    rng = random.Random(7)
    chosen = Counter(schedule_one(make_pod(), nodes, filters=FILTERS, scorers=SCORERS,
                                  rng=rng).node_name for _ in range(300))
    assert set(chosen) == {"a", "b", "c"}
    assert min(chosen.values()) > 60


def test_schedule_one_plugin_error_aborts_the_cycle() -> None:
    from scheduler.framework import FilterPlugin

    broken = FilterPlugin("Broken", lambda pod, node: error("boom"))
    result = schedule_one(make_pod(), [info(make_node("a"))], filters=[broken], scorers=[],
                          rng=random.Random(0))
    assert result.node_name is None
    assert result.error is not None and "Broken" in result.error and "boom" in result.error


@pytest.mark.parametrize(("nodes", "percentage", "expected"), [
    (3, 0, 3), (99, 0, 99), (100, 0, 100), (1000, 0, 420), (5000, 0, 500),
    (100000, 0, 5000), (1000, 100, 1000), (1000, 1, 100), (1000, 30, 300),
])
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_partial_search_rotates_over_all_nodes() -> None:
    nodes = [info(make_node(f"n{i:04d}")) for i in range(1000)]
    first = schedule(make_pod(), nodes)
    assert first.evaluated_nodes == first.feasible_nodes == 420
    assert first.next_start_index == 420
    second = schedule(make_pod(), nodes, start_index=first.next_start_index)
    assert second.next_start_index == 840
    third = schedule(make_pod(), nodes, start_index=second.next_start_index)
    assert third.next_start_index == (840 + 420) % 1000


def test_partial_search_still_evaluates_every_node_when_few_fit() -> None:
    nodes = [info(make_node(f"n{i:04d}", labels={"ok": str(i == 999)})) for i in range(1000)]
    result = schedule(make_pod(node_selector_={"ok": "True"}), nodes)
    assert result.node_name == "n0999"
    assert result.evaluated_nodes == 1000


def test_status_helpers() -> None:
    assert SUCCESS.is_success and not SUCCESS.is_rejected
    assert unschedulable("x").is_rejected
    assert unschedulable("x", unresolvable=True).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert not error("x").is_rejected


# -- what is written back to the pod -------------------------------------------------------

def test_condition_patch_appends_replaces_and_skips_when_unchanged() -> None:
    pod = make_pod()
    pod["status"]["conditions"] = [{"type": "Initialized", "status": "True"}]
    patch = unschedulable_condition_patch(pod, "0/1 nodes are available: x.", "T1")
    assert patch == {"status": {"conditions": [
        {"type": "Initialized", "status": "True"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: x.", "lastTransitionTime": "T1"}]}}
    pod["status"]["conditions"] = patch["status"]["conditions"]
    assert unschedulable_condition_patch(pod, "0/1 nodes are available: x.", "T2") is None
    changed = unschedulable_condition_patch(pod, "0/2 nodes are available: y.", "T3")
    assert changed is not None
    conditions = changed["status"]["conditions"]
    assert len(conditions) == 2
    # Still False: the transition time is the one of the first failure.
    assert conditions[1]["message"] == "0/2 nodes are available: y."
    assert conditions[1]["lastTransitionTime"] == "T1"


def test_annotation_patch() -> None:
    pod = make_pod()
    reasons = {"node1": "was unschedulable"}
    patch = annotation_patch(pod, reasons)
    assert patch == {"metadata": {"annotations": {
        UNSCHEDULABLE_NODES_ANNOTATION: json.dumps(reasons)}}}
    pod["metadata"]["annotations"] = patch["metadata"]["annotations"]
    assert annotation_patch(pod, reasons) is None
    assert annotation_patch(pod, None) == {"metadata": {"annotations": {
        UNSCHEDULABLE_NODES_ANNOTATION: None}}}
    assert annotation_patch(make_pod(), None) is None


# -- queue ------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("attempts", "seconds"), [
    (0, 0), (1, 1), (2, 2), (3, 4), (6, 32), (7, 60), (8, 60), (500, 60)])
def test_backoff_doubles_from_one_second_to_sixty(attempts: int, seconds: float) -> None:
    assert backoff_seconds(attempts) == seconds


def test_queue_is_fifo_and_dedupes() -> None:
    queue = SchedulingQueue(clock=FakeClock())
    for name in ("a", "b", "a", "c"):
        queue.add(make_pod(name))
    popped = [queue.pop_ready() for _ in range(4)]
    assert [p.key if p else None for p in popped] == ["default/a", "default/b", "default/c",
                                                       None]
    assert len(queue) == 3  # all in flight


def test_failed_pod_waits_its_backoff_then_comes_back() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make_pod("a"))
    delays = []
    for _ in range(8):
        item = queue.pop_ready()
        assert item is not None
        delays.append(queue.failed(item, unschedulable=True))
        assert queue.pop_ready() is None
        assert queue.seconds_until_next_backoff() == delays[-1]
        clock.now += delays[-1] - 0.01
        assert queue.pop_ready() is None
        clock.now += 0.01
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    assert queue.pop_ready() is not None


def test_done_forgets_and_delete_drops_from_anywhere() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("active", "backoff", "flight", "bound"):
        queue.add(make_pod(name))
    items = {}
    for _ in range(4):
        item = queue.pop_ready()
        assert item is not None
        items[item.key.split("/")[1]] = item
    queue.add(make_pod("active"))  # an informer update while in flight: no duplicate
    queue.done(items["bound"])
    queue.failed(items["backoff"], unschedulable=True)
    assert queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "in_flight": 2}
    queue.delete(make_pod("backoff"))
    queue.delete(make_pod("flight"))
    queue.delete(make_pod("never-seen"))
    assert queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 1}
    # A deleted pod whose attempt ends later is not resurrected.
    assert queue.failed(items["flight"], unschedulable=True) == 0
    assert "default/flight" not in queue
    clock.now += 120
    assert queue.pop_ready() is None


def test_node_change_moves_only_pods_that_now_fit() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make_pod("wants-b", node_selector_={"shuai": "b"}))
    queue.add(make_pod("wants-c", node_selector_={"shuai": "c"}))
    queue.add(make_pod("errored"))
    for _ in range(3):
        item = queue.pop_ready()
        assert item is not None
        queue.failed(item, unschedulable=item.key != "default/errored")
    relabelled = info(make_node("node1", labels={"shuai": "b"}))
    moved = queue.move_matching(lambda pod: run_filters(FILTERS, pod, relabelled).is_success)
    assert moved == 1  # not wants-c; and not errored: only its back-off brings it back
    item = queue.pop_ready()
    assert item is not None and item.key == "default/wants-b"
    assert queue.pop_ready() is None


def test_node_change_during_an_attempt_sends_the_pod_straight_back() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    queue.add(make_pod("a"))
    item = queue.pop_ready()
    assert item is not None
    assert queue.move_matching(lambda pod: True) == 0  # in flight: marked, not moved
    assert queue.failed(item, unschedulable=True) == 0
    again = queue.pop_ready()
    assert again is item and item.attempts == 1


def test_spec_update_retries_a_waiting_pod_but_status_update_does_not() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    pod = make_pod("a", node_selector_={"x": "1"})
    queue.add(pod)
    item = queue.pop_ready()
    assert item is not None
    queue.failed(item, unschedulable=True)
    with_status = {**pod, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False"}]}}
    queue.update(pod, with_status)
    assert queue.pop_ready() is None
    assert item.pod is with_status  # the latest object is kept
    tolerated = {**with_status, "spec": {**pod["spec"], "tolerations": TOLERATE_ALL}}
    queue.update(with_status, tolerated)
    assert queue.pop_ready() is item


@pytest.mark.parametrize(("case", "change", "helps"), [
    ("heartbeat", {}, False),
    ("labels", {"metadata": {"name": "n", "labels": {"a": "b"}}}, True),
    ("uncordoned", {"spec": {}}, True),
    ("became ready", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, True),
    ("taints", {"spec": {"unschedulable": True, "taints": [GPU_TAINT]}}, True),
    ("allocatable grew", {"status": {"conditions": [{"type": "Ready", "status": "False"}],
                                     "allocatable": {"cpu": "4"}}}, True),
])
def test_node_change_could_help(case: str, change: dict[str, Any], helps: bool) -> None:
    old = make_node("n", ready="False", unschedulable_=True)
    old["status"]["conditions"][0]["lastHeartbeatTime"] = "T1"
    new = json.loads(json.dumps(old))
    new["status"]["conditions"][0]["lastHeartbeatTime"] = "T2"
    new.update(change)
    assert node_change_could_help(old, new) is helps
    assert node_change_could_help(None, new) is True


async def test_pop_sleeps_until_a_pod_arrives_or_a_backoff_ends() -> None:
    import asyncio

    queue = SchedulingQueue(initial_backoff=0.05)
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    queue.add(make_pod("a"))
    item = await asyncio.wait_for(waiter, 5)
    queue.failed(item, unschedulable=True)
    again = await asyncio.wait_for(queue.pop(), 5)  # woken by the back-off deadline
    assert again is item


# -- cache ------------------------------------------------------------------------------------

def bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    return {**pod, "spec": {**pod["spec"], "nodeName": node}}


def test_cache_counts_bound_and_assumed_pods() -> None:
    clock = FakeClock()
    cache = ClusterCache(clock=clock, assumed_ttl=30)
    cache.set_pod(bound(make_pod("early", uid="u0"), "n1"))  # before its node is known
    n1 = cache.set_node(make_node("n1"))
    n2 = cache.set_node(make_node("n2"))
    assert (n1.pod_count, n2.pod_count) == (1, 0)
    pod = make_pod("a", uid="u1")
    cache.assume(pod, "n2")
    assert n2.pod_count == 1 and cache.is_assumed(pod)
    assert not cache.is_assumed(make_pod("a", uid="other"))
    cache.set_pod(bound(pod, "n2"))  # the informer confirms: counted once
    assert n2.pod_count == 1 and not cache.is_assumed(pod)
    cache.remove_pod(bound(pod, "n2"))
    assert n2.pod_count == 0
    failed = make_pod("b", uid="u2")
    cache.assume(failed, "n1")
    cache.forget(failed)
    assert n1.pod_count == 1
    lost = make_pod("c", uid="u3")
    cache.assume(lost, "n1")
    cache.finish_binding(lost)
    clock.now += 29
    assert cache.cleanup_expired() == 0 and n1.pod_count == 2
    clock.now += 2
    assert cache.cleanup_expired() == 1 and n1.pod_count == 1
    cache.remove_node(make_node("n2"))
    assert [i.name for i in cache.node_infos()] == ["n1"]
    assert cache.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 0}  # "early"


def test_cache_sizes_count_an_assumed_pod_once() -> None:
    cache = ClusterCache(clock=FakeClock())
    cache.set_node(make_node("n1"))
    pod = make_pod("a", uid="u1")
    cache.assume(pod, "n1")
    assert cache.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 1}
    cache.set_pod(bound(pod, "n1"))
    assert cache.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 0}


def test_queue_counts_split_waiting_pods_by_why_they_failed() -> None:
    clock = FakeClock()
    queue = SchedulingQueue(clock=clock)
    for name in ("fits-nowhere", "errored", "new"):
        queue.add(make_pod(name))
    first, second = queue.pop_ready(), queue.pop_ready()
    assert first is not None and second is not None
    assert queue.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "in_flight": 2}
    queue.failed(first, unschedulable=True)
    queue.failed(second, unschedulable=False)
    assert queue.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "in_flight": 0}
    clock.now += 1
    assert queue.counts()["active"] == 1  # back-offs end when the loop next pops
    assert [queue.pop_ready() is not None for _ in range(4)] == [True, True, True, False]
    assert queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 3}


def test_render_metrics_writes_every_series_in_prometheus_text() -> None:
    text = render_metrics(MetricsSnapshot(
        profile='odd"name', pending={"active": 2, "unschedulable": 1}, in_flight=3,
        attempts={"scheduled": 5, "error": 1}, cache={"nodes": 4, "pods": 7}))
    lines = text.splitlines()
    assert text.endswith("\n")
    # as kube's Go components write it: each family's samples sorted by label values
    assert [line for line in lines if not line.startswith("#")] == [
        'scheduler_pending_pods{queue="active"} 2',
        'scheduler_pending_pods{queue="backoff"} 0',
        'scheduler_pending_pods{queue="unschedulable"} 1',
        "kubelite_scheduler_pods_in_flight 3",
        'scheduler_schedule_attempts_total{profile="odd\\"name",result="error"} 1',
        'scheduler_schedule_attempts_total{profile="odd\\"name",result="scheduled"} 5',
        'scheduler_schedule_attempts_total{profile="odd\\"name",result="unschedulable"} 0',
        'scheduler_cache_size{type="assumed_pods"} 0',
        'scheduler_cache_size{type="nodes"} 4',
        'scheduler_cache_size{type="pods"} 7',
    ]
    assert [line for line in lines if line.startswith("# TYPE")] == [
        "# TYPE scheduler_pending_pods gauge",
        "# TYPE kubelite_scheduler_pods_in_flight gauge",
        "# TYPE scheduler_schedule_attempts_total counter",
        "# TYPE scheduler_cache_size gauge",
        "# TYPE leader_election_master_status gauge",  # no sample without an election
        "# TYPE scheduler_scheduling_attempt_duration_seconds histogram",
        "# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram",
        "# TYPE scheduler_pod_scheduling_attempts histogram",
        "# TYPE scheduler_preemption_attempts_total counter",
    ]
    assert sum(line.startswith("# HELP ") for line in lines) == 9


@pytest.mark.parametrize(("leading", "value"), [(True, 1), (False, 0)])
def test_render_metrics_with_leader_election_adds_kubes_gauge(leading: bool,
                                                              value: int) -> None:
    text = render_metrics(MetricsSnapshot(
        profile="default-scheduler", pending={}, in_flight=0, attempts={}, cache={},
        leader=("kube-scheduler", leading)))
    assert ("# TYPE leader_election_master_status gauge\n"
            f'leader_election_master_status{{name="kube-scheduler"}} {value}\n') in text


@pytest.mark.parametrize(("checks", "verbose", "status", "body"), [
    ({"ping": None, "informer-sync": None}, False, 200, "ok"),
    ({"ping": None, "informer-sync": None}, True, 200,
     "[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n"),
    ({"ping": None, "informer-sync": "not synced yet: nodes"}, False, 503,
     "[+]ping ok\n[-]informer-sync failed: not synced yet: nodes\nreadyz check failed\n"),
])
def test_health_report(checks: dict[str, str | None], verbose: bool, status: int,
                       body: str) -> None:
    assert health_report("readyz", checks, verbose=verbose) == (status, body)
