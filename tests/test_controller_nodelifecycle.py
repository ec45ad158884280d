"""Node lifecycle and taint eviction decisions (pure), in the style of kube's tables."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.app import (
    ControllerSpec,
    controller_flag_errors,
    enabled_controllers,
)
from controller_manager.nodelifecycle import (
    MESSAGE_NEVER,
    MESSAGE_UNKNOWN,
    REASON_NEVER,
    REASON_UNKNOWN,
    Config,
    Health,
    desired_taints,
    grace_exceeded,
    not_ready_pod_conditions,
    observe,
    unknown_conditions,
)
from controller_manager.tainteviction import NEVER, eviction_delay, tolerates

NOW = "2026-01-01T00:00:00Z"


def node(ready: str | None = "True", heartbeat: str = "t1", *,
         taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    conditions = [] if ready is None else [
        {"type": "Ready", "status": ready, "reason": "KubeletReady",
         "lastHeartbeatTime": heartbeat, "lastTransitionTime": "t0"},
        {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat}]
    return {"metadata": {"name": "n1", "creationTimestamp": "t-1"},
            "spec": {"taints": taints or []}, "status": {"conditions": conditions}}


def lease(renewed: str) -> dict[str, Any]:
    return {"spec": {"renewTime": renewed}}


# -- heartbeats --------------------------------------------------------------------------------

def test_a_heartbeat_is_a_change_of_either_the_status_or_the_lease() -> None:
    first = observe(None, node(), lease("r1"), now=100)
    assert first == Health("t1", "r1", 100)
    assert observe(first, node(), lease("r1"), now=150) is first, "nothing moved"
    assert observe(first, node(), lease("r2"), now=150).probed_at == 150
    assert observe(first, node(heartbeat="t2"), lease("r1"), now=160).probed_at == 160


@pytest.mark.parametrize(("name", "ready", "probed", "now", "exceeded"), [
    ("within the grace period", "True", 100, 140, False),
    ("just past it", "True", 100, 140.5, True),
    ("never reported: the startup grace applies", None, 100, 150, False),
    ("never reported, past the startup grace", None, 100, 161, True),
])
def test_grace(name: str, ready: str | None, probed: float, now: float,
               exceeded: bool) -> None:
    health = Health(None, None, probed)
    assert grace_exceeded(health, node(ready), now, Config(grace_period=40,
                                                           startup_grace_period=60)) is exceeded, name


# -- conditions --------------------------------------------------------------------------------

def test_stale_conditions_go_unknown_with_kubes_words_and_missing_ones_are_added() -> None:
    conditions = unknown_conditions(node(), NOW)
    assert conditions is not None
    by_type = {c["type"]: c for c in conditions}
    assert by_type["Ready"] == {
        "type": "Ready", "status": "Unknown", "reason": REASON_UNKNOWN,
        "message": MESSAGE_UNKNOWN, "lastHeartbeatTime": "t1", "lastTransitionTime": NOW}
    assert by_type["MemoryPressure"]["status"] == "Unknown"
    assert by_type["DiskPressure"] == {
        "type": "DiskPressure", "status": "Unknown", "reason": REASON_NEVER,
        "message": MESSAGE_NEVER, "lastHeartbeatTime": "t-1", "lastTransitionTime": NOW}
    assert unknown_conditions({"status": {"conditions": conditions}}, NOW) is None


def test_pods_are_marked_not_ready_once() -> None:
    pod = {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                     {"type": "PodScheduled", "status": "True"}]}}
    conditions = not_ready_pod_conditions(pod, NOW)
    assert conditions == [{"type": "Ready", "status": "False", "lastTransitionTime": NOW},
                          {"type": "PodScheduled", "status": "True"}]
    assert not_ready_pod_conditions({"status": {"conditions": conditions}}, NOW) is None


# -- taints ------------------------------------------------------------------------------------

UNREACHABLE_NS = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
UNREACHABLE_NE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                  "timeAdded": NOW}
NOT_READY_NS = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
NOT_READY_NE = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": NOW}
OTHERS = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(("name", "taints", "ready", "want"), [
    ("ready, untainted: nothing to do", [OTHERS], "True", None),
    ("unknown: unreachable taints added, others kept", [OTHERS], "Unknown",
     [OTHERS, UNREACHABLE_NS, UNREACHABLE_NE]),
    ("false: not-ready", [], "False", [NOT_READY_NS, NOT_READY_NE]),
    ("already tainted: nothing to do", [UNREACHABLE_NS, UNREACHABLE_NE], "Unknown", None),
    ("not-ready becomes unreachable (swap)", [NOT_READY_NS, NOT_READY_NE], "Unknown",
     [UNREACHABLE_NS, UNREACHABLE_NE]),
    ("ready again: ours removed", [UNREACHABLE_NE, OTHERS, UNREACHABLE_NS], "True", [OTHERS]),
    ("never reported: left alone", [], None, None),
])
def test_taints_follow_the_ready_condition(name: str, taints: list[dict[str, Any]],
                                           ready: str | None,
                                           want: list[dict[str, Any]] | None) -> None:
    assert desired_taints(taints, ready, NOW) == want, name


# -- taint eviction ----------------------------------------------------------------------------

TAINT = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
HAND = {"key": "maintenance", "value": "yes", "effect": "NoExecute"}


@pytest.mark.parametrize(("toleration", "taint", "want"), [
    ({"key": "maintenance", "operator": "Equal", "value": "yes"}, HAND, True),
    ({"key": "maintenance", "value": "no"}, HAND, False),
    ({"key": "maintenance", "operator": "Exists"}, HAND, True),
    ({"operator": "Exists"}, HAND, True),
    ({"operator": "Exists", "effect": "NoSchedule"}, HAND, False),
    ({"key": "other", "operator": "Exists"}, HAND, False),
    ({"value": "yes"}, HAND, False),  # Equal needs a key
])
def test_tolerates(toleration: dict[str, Any], taint: dict[str, Any], want: bool) -> None:
    assert tolerates(toleration, taint) is want


@pytest.mark.parametrize(("name", "tolerations", "taints", "want"), [
    ("no NoExecute taint", [], [], None),
    ("untolerated: now", [], [HAND], 0.0),
    ("one of two untolerated: now",
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}],
     [TAINT, HAND], 0.0),
    ("the default 300 s", [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                            "effect": "NoExecute", "tolerationSeconds": 300}], [TAINT], 300.0),
    ("the smallest of the matching ones",
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30},
      {"key": "maintenance", "operator": "Exists", "tolerationSeconds": 5}], [TAINT, HAND], 5.0),
    ("forever", [{"operator": "Exists"}], [TAINT, HAND], NEVER),
    ("negative is now", [{"operator": "Exists", "tolerationSeconds": -3}], [TAINT], 0.0),
])
def test_eviction_delay(name: str, tolerations: list[dict[str, Any]],
                        taints: list[dict[str, Any]], want: float | None) -> None:
    assert eviction_delay(tolerations, taints) == want, name


# -- --controllers -----------------------------------------------------------------------------

SPECS = (ControllerSpec("a-controller", aliases=("a",)), ControllerSpec("b-controller"),
         ControllerSpec("off-controller", disabled_by_default=True))


@pytest.mark.parametrize(("flag", "want"), [
    (["*"], ["a-controller", "b-controller"]),
    (["*", "-a"], ["b-controller"]),
    (["-a-controller", "*"], ["b-controller"]),
    (["a"], ["a-controller"]),
    (["*", "off-controller"], ["a-controller", "b-controller", "off-controller"]),
    ([], []),
])
def test_controllers_flag(flag: list[str], want: list[str]) -> None:
    assert enabled_controllers(flag, SPECS) == want


def test_unknown_controllers_are_refused() -> None:
    assert controller_flag_errors(["*", "-a", "nope", "-gone"], SPECS) == [
        '"nope" is not in the list of known controllers',
        '"-gone" is not in the list of known controllers']
