"""Table tests of TaintToleration's score (kube's `tainttoleration/taint_toleration_test.go`);
its filter's table is in test_scheduler_plugins.py."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework import NodeInfo
from scheduler.plugins import taint_toleration


def node(name: str, *taints: dict[str, str]) -> NodeInfo:
    return NodeInfo({"metadata": {"name": name}, "spec": {"taints": list(taints)}})


def pod(*tolerations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}],
                                               "tolerations": list(tolerations)}}


def taint(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str, value: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


SCORE_CASES = [
    ("two nodes with no taints: skipped, equal anyway", pod(toleration("foo", "bar")),
     [node("n1"), node("n2")], None),
    ("tolerated taints do not count",
     pod(toleration("foo", "bar"), toleration("cpu-type", "arm64")),
     [node("n1"), node("n2", taint("foo", "bar")),
      node("n3", taint("foo", "bar"), taint("cpu-type", "arm64"))],
     {"n1": 100, "n2": 100, "n3": 100}),
    ("the more intolerable taints a node has, the lower it scores",
     pod(toleration("foo", "bar")),
     [node("n1"), node("n2", taint("cpu-type", "arm64")),
      node("n3", taint("cpu-type", "arm64"), taint("disk-type", "ssd"))],
     {"n1": 100, "n2": 50, "n3": 0}),
    ("only PreferNoSchedule taints are counted",
     pod(toleration("cpu-type", "arm64", "NoSchedule")),
     [node("n1"), node("n2", taint("cpu-type", "arm64", "NoSchedule")),
      node("n3", taint("cpu-type", "arm64"))],
     {"n1": 100, "n2": 100, "n3": 0}),
    ("a NoSchedule toleration does not tolerate a PreferNoSchedule taint",
     pod(toleration("cpu-type", "arm64", "NoSchedule")),
     [node("n1"), node("n2", taint("cpu-type", "arm64"))], {"n1": 100, "n2": 0}),
    ("no taints and tolerations: lands on the node without taints", pod(),
     [node("n1"), node("n2", taint("cpu-type", "arm64"))], {"n1": 100, "n2": 0}),
    ("a toleration without effect tolerates PreferNoSchedule",
     pod({"key": "cpu-type", "operator": "Exists"}),
     [node("n1"), node("n2", taint("cpu-type", "arm64"))], {"n1": 100, "n2": 100}),
]


@pytest.mark.parametrize(("case", "spec", "nodes", "expected"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(case: str, spec: dict[str, Any], nodes: list[NodeInfo],
               expected: dict[str, int] | None) -> None:
    plugin = taint_toleration.SCORE
    score = plugin.prepare(spec, nodes)
    if expected is None:
        assert score is None
        return
    assert score is not None and plugin.normalize is not None and plugin.weight == 3
    assert plugin.normalize({n.name: score(spec, n) for n in nodes}) == expected
