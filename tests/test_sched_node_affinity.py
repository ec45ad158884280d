"""Table tests of NodeAffinity (kube's `nodeaffinity/node_affinity_test.go`)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework import Code, NodeInfo, run_filters
from scheduler.plugins import node_affinity

REASON = "node(s) didn't match Pod's node affinity/selector"


def node(name: str = "node1", **labels: str) -> NodeInfo:
    return NodeInfo({"metadata": {"name": name, "labels": labels}})


def pod(*, selector: dict[str, str] | None = None, terms: list[dict[str, Any]] | None = None,
        preferred: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    affinity: dict[str, Any] = {}
    if terms is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms}
    if preferred is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def term(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None
         ) -> dict[str, Any]:
    built: dict[str, Any] = {}
    if expressions:
        built["matchExpressions"] = list(expressions)
    if fields:
        built["matchFields"] = fields
    return built


FILTER_CASES: list[tuple[str, dict[str, Any], NodeInfo, bool]] = [
    ("no selector", pod(), node(), True),
    ("missing labels", pod(selector={"foo": "bar"}), node(), False),
    ("same labels", pod(selector={"foo": "bar"}), node(foo="bar"), True),
    ("node labels are a superset", pod(selector={"foo": "bar"}), node(foo="bar", baz="blah"),
     True),
    ("node labels are a subset", pod(selector={"foo": "bar", "baz": "blah"}), node(foo="bar"),
     False),
    ("In matches", pod(terms=[term(expr("foo", "In", "bar", "value2"))]), node(foo="bar"), True),
    ("In does not match another value", pod(terms=[term(expr("foo", "In", "value1"))]),
     node(foo="bar"), False),
    ("In on a missing label", pod(terms=[term(expr("foo", "In", "bar"))]), node(), False),
    ("Gt matches", pod(terms=[term(expr("kernel-version", "Gt", "0204"))]),
     node(**{"kernel-version": "0206"}), True),
    ("Gt is strict", pod(terms=[term(expr("kernel-version", "Gt", "206"))]),
     node(**{"kernel-version": "206"}), False),
    ("Gt with a non-integer label never matches", pod(terms=[term(expr("v", "Gt", "1"))]),
     node(v="two"), False),
    ("Lt matches", pod(terms=[term(expr("gpus", "Lt", "4"))]), node(gpus="2"), True),
    ("Lt on a missing label", pod(terms=[term(expr("gpus", "Lt", "4"))]), node(), False),
    ("NotIn matches another value", pod(terms=[term(expr("mem-type", "NotIn", "DDR", "DDR2"))]),
     node(**{"mem-type": "DDR3"}), True),
    ("NotIn matches a missing label", pod(terms=[term(expr("mem-type", "NotIn", "DDR"))]),
     node(), True),
    ("NotIn rejects a listed value", pod(terms=[term(expr("mem-type", "NotIn", "DDR"))]),
     node(**{"mem-type": "DDR"}), False),
    ("Exists", pod(terms=[term(expr("GPU", "Exists"))]), node(GPU="NVIDIA-GRID-K1"), True),
    ("Exists on a missing label", pod(terms=[term(expr("GPU", "Exists"))]), node(), False),
    ("DoesNotExist", pod(terms=[term(expr("GPU", "DoesNotExist"))]), node(), True),
    ("DoesNotExist on a present label", pod(terms=[term(expr("GPU", "DoesNotExist"))]),
     node(GPU="x"), False),
    ("expressions in a term are ANDed",
     pod(terms=[term(expr("foo", "In", "bar"), expr("GPU", "Exists"))]), node(foo="bar"), False),
    ("terms are ORed",
     pod(terms=[term(expr("foo", "In", "other")), term(expr("GPU", "Exists"))]),
     node(GPU="yes"), True),
    ("an empty term matches nothing", pod(terms=[term()]), node(foo="bar"), False),
    ("no terms match nothing", pod(terms=[]), node(foo="bar"), False),
    ("nodeSelector and affinity both must match",
     pod(selector={"foo": "bar"}, terms=[term(expr("GPU", "Exists"))]), node(foo="bar"), False),
    ("nodeSelector and affinity both match",
     pod(selector={"foo": "bar"}, terms=[term(expr("GPU", "Exists"))]),
     node(foo="bar", GPU="yes"), True),
    ("matchFields on metadata.name",
     pod(terms=[term(fields=[expr("metadata.name", "In", "node1")])]), node("node1"), True),
    ("matchFields on another name",
     pod(terms=[term(fields=[expr("metadata.name", "In", "node1")])]), node("node2"), False),
    ("matchFields NotIn", pod(terms=[term(fields=[expr("metadata.name", "NotIn", "node1")])]),
     node("node2"), True),
    ("matchFields and matchExpressions are ANDed",
     pod(terms=[term(expr("foo", "In", "bar"), fields=[expr("metadata.name", "In", "node1")])]),
     node("node1", foo="baz"), False),
    ("matchFields or matchExpressions in two terms",
     pod(terms=[term(expr("foo", "In", "bar")), term(fields=[expr("metadata.name", "In",
                                                                  "node1")])]),
     node("node1", foo="baz"), True),
    ("an unknown field matches nothing",
     pod(terms=[term(fields=[expr("metadata.uid", "In", "x")])]), node(), False),
]


@pytest.mark.parametrize(("case", "spec", "info", "fits"), FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(case: str, spec: dict[str, Any], info: NodeInfo, fits: bool) -> None:
    status = run_filters([node_affinity.FILTER], spec, info)
    assert status.is_success is fits
    # The one-pair function used outside a cycle agrees with the prepared filter.
    assert node_affinity.fits(spec, info).is_success is fits
    if not fits:
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (REASON,)


def test_filter_is_skipped_for_pods_without_selector_or_affinity() -> None:
    assert node_affinity.FILTER.prepare(pod(), [node()]) is None
    assert node_affinity.FILTER.prepare(pod(preferred=[]), [node()]) is None


def preference(weight: int, *expressions: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "preference": term(*expressions)}


SCORE_CASES: list[tuple[str, list[dict[str, Any]] | None, dict[str, int]]] = [
    ("no preferences: skipped", None, {}),
    ("one preference: the matching node gets all", [preference(2, expr("foo", "In", "bar"))],
     {"node1": 100, "node2": 100, "node3": 0}),
    ("weights add up and are normalized",
     [preference(2, expr("foo", "In", "bar")), preference(4, expr("key", "In", "value")),
      preference(5, expr("az", "In", "az1"))],
     {"node1": 2 * 100 // 11, "node2": 100, "node3": 5 * 100 // 11}),
    ("nothing matches: all 0", [preference(5, expr("none", "Exists"))],
     {"node1": 0, "node2": 0, "node3": 0}),
    ("weight 0 and empty preferences count nothing",
     [{"weight": 0, "preference": term(expr("foo", "Exists"))}, {"weight": 3, "preference": {}}],
     {"node1": 0, "node2": 0, "node3": 0}),
]


@pytest.mark.parametrize(("case", "preferred", "expected"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(case: str, preferred: list[dict[str, Any]] | None,
               expected: dict[str, int]) -> None:
    nodes = [node("node1", foo="bar"), node("node2", foo="bar", key="value", az="az1"),
             node("node3", az="az1")]
    spec = pod(preferred=preferred)
    plugin = node_affinity.SCORE
    score = plugin.prepare(spec, nodes)
    if score is None:
        assert expected == {}
        return
    raw = {n.name: score(spec, n) for n in nodes}
    assert plugin.normalize is not None and plugin.weight == 2
    assert plugin.normalize(raw) == expected
