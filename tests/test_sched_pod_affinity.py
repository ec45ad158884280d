"""Table tests of InterPodAffinity and PodTopologySpread (kube's
`interpodaffinity/filtering_test.go`, `scoring_test.go` and `podtopologyspread/*_test.go`)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework import Cluster, Code, NodeInfo, prepare_filters, run_prepared
from scheduler.labels import from_map
from scheduler.plugins import interpod_affinity, topology_spread

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_SPREAD = "node(s) didn't match pod topology spread constraints"


def node(name: str, zone: str | None = None, *, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    all_labels = {HOST: name, **({ZONE: zone} if zone else {}), **(labels or {})}
    return {"metadata": {"name": name, "labels": all_labels},
            "spec": {"taints": taints} if taints else {}}


def pod(name: str = "incoming", *, labels: dict[str, str] | None = None,
        namespace: str = "default", affinity: dict[str, Any] | None = None,
        spread: list[dict[str, Any]] | None = None, node_name: str | None = None,
        node_selector: dict[str, str] | None = None, deleting: bool = False
        ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": meta, "spec": spec}


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
            namespace_labels: dict[str, dict[str, str]] | None = None) -> Cluster:
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    for placed in pods:
        meta = placed["metadata"]
        infos[placed["spec"]["nodeName"]].add_pod(f"{meta['namespace']}/{meta['name']}", placed)
    return Cluster(list(infos.values()), namespace_labels or {})


def term(selector: dict[str, Any] | None, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, **extra}


def match(**labels: str) -> dict[str, Any]:
    return {"matchLabels": labels}


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind: str, *weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def filter_results(filters: list[Any], incoming: dict[str, Any], snapshot: Cluster
                   ) -> dict[str, str]:
    """node -> "" when it fits, else its reason."""
    prepared = prepare_filters(filters, incoming, snapshot)
    assert not isinstance(prepared, type(Code)) and isinstance(prepared, list)
    out = {}
    for info in snapshot.nodes:
        status = run_prepared(prepared, incoming, info)
        out[info.name] = "" if status.is_success else status.reasons[0]
    return out


NODES = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2"), node("bare", labels={})]
NODES[3]["metadata"]["labels"] = {}  # no zone, no hostname label

AFFINITY_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, str],
                           dict[str, str]]] = [
    ("required affinity: the matching pod's zone",
     pod(affinity=required("podAffinity", term(match(app="db")))),
     [pod("db", labels={"app": "db"}, node_name="n1")], {},
     {"n1": "", "n2": "", "n3": ERR_AFFINITY, "bare": ERR_AFFINITY}),
    ("required affinity: hostname is one node",
     pod(affinity=required("podAffinity", term(match(app="db"), HOST))),
     [pod("db", labels={"app": "db"}, node_name="n1")], {},
     {"n1": "", "n2": ERR_AFFINITY, "n3": ERR_AFFINITY, "bare": ERR_AFFINITY}),
    ("required affinity: terms are ANDed on the same existing pod",
     pod(affinity=required("podAffinity", term(match(app="db")), term(match(tier="x")))),
     [pod("db", labels={"app": "db"}, node_name="n1"),
      pod("x", labels={"tier": "x"}, node_name="n3")], {},
     {"n1": ERR_AFFINITY, "n2": ERR_AFFINITY, "n3": ERR_AFFINITY, "bare": ERR_AFFINITY}),
    ("the first pod of a group that matches itself goes anywhere with the key",
     pod(labels={"app": "web"}, affinity=required("podAffinity", term(match(app="web")))),
     [], {}, {"n1": "", "n2": "", "n3": "", "bare": ERR_AFFINITY}),
    ("a pod whose affinity matches nobody, not even itself, goes nowhere",
     pod(labels={"app": "web"}, affinity=required("podAffinity", term(match(app="db")))),
     [], {}, {"n1": ERR_AFFINITY, "n2": ERR_AFFINITY, "n3": ERR_AFFINITY,
              "bare": ERR_AFFINITY}),
    ("a null label selector matches nothing",
     pod(affinity=required("podAffinity", term(None))),
     [pod("db", labels={"app": "db"}, node_name="n1")], {},
     {"n1": ERR_AFFINITY, "n2": ERR_AFFINITY, "n3": ERR_AFFINITY, "bare": ERR_AFFINITY}),
    ("required anti-affinity: not in the matching pod's zone",
     pod(affinity=required("podAntiAffinity", term(match(app="web")))),
     [pod("web", labels={"app": "web"}, node_name="n1")], {},
     {"n1": ERR_ANTI, "n2": ERR_ANTI, "n3": "", "bare": ""}),
    ("anti-affinity with matchExpressions",
     pod(affinity=required("podAntiAffinity", term({"matchExpressions": [
         {"key": "app", "operator": "In", "values": ["web", "api"]}]}, HOST))),
     [pod("api", labels={"app": "api"}, node_name="n2")], {},
     {"n1": "", "n2": ERR_ANTI, "n3": "", "bare": ""}),
    ("existing pods' anti-affinity is symmetric",
     pod(labels={"app": "web"}),
     [pod("guard", node_name="n3", affinity=required("podAntiAffinity",
                                                      term(match(app="web"))))], {},
     {"n1": "", "n2": "", "n3": ERR_EXISTING, "bare": ""}),
    ("pods of another namespace do not count by default",
     pod(affinity=required("podAntiAffinity", term(match(app="web")))),
     [pod("web", labels={"app": "web"}, namespace="other", node_name="n1")], {},
     {"n1": "", "n2": "", "n3": "", "bare": ""}),
    ("namespaces lists the other namespace",
     pod(affinity=required("podAntiAffinity", term(match(app="web"), namespaces=["other"]))),
     [pod("web", labels={"app": "web"}, namespace="other", node_name="n1")], {},
     {"n1": ERR_ANTI, "n2": ERR_ANTI, "n3": "", "bare": ""}),
    ("an empty namespaceSelector is every namespace",
     pod(affinity=required("podAntiAffinity", term(match(app="web"), namespaceSelector={}))),
     [pod("web", labels={"app": "web"}, namespace="other", node_name="n3")], {},
     {"n1": "", "n2": "", "n3": ERR_ANTI, "bare": ""}),
    ("a namespaceSelector matches namespace labels",
     pod(affinity=required("podAntiAffinity", term(match(app="web"),
                                                   namespaceSelector=match(team="a")))),
     [pod("web", labels={"app": "web"}, namespace="team-a", node_name="n3"),
      pod("web2", labels={"app": "web"}, namespace="team-b", node_name="n1")],
     {"team-a": {"team": "a"}, "team-b": {"team": "b"}},
     {"n1": "", "n2": "", "n3": ERR_ANTI, "bare": ""}),
]


@pytest.mark.parametrize(("case", "incoming", "pods", "ns_labels", "expected"),
                         AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES])
def test_inter_pod_affinity_filter(case: str, incoming: dict[str, Any],
                                   pods: list[dict[str, Any]],
                                   ns_labels: dict[str, dict[str, str]],
                                   expected: dict[str, str]) -> None:
    snapshot = cluster(NODES, pods, ns_labels)
    assert filter_results([interpod_affinity.FILTER], incoming, snapshot) == expected


def test_inter_pod_affinity_codes_and_skip() -> None:
    snapshot = cluster(NODES, [pod("web", labels={"app": "web"}, node_name="n1")])
    assert interpod_affinity.FILTER.prepare(pod(), snapshot) is None  # nothing to check
    check = interpod_affinity.FILTER.prepare(
        pod(affinity=required("podAffinity", term(match(app="db")))), snapshot)
    assert callable(check)
    assert check(pod(), snapshot.nodes[0]).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    anti = interpod_affinity.FILTER.prepare(
        pod(affinity=required("podAntiAffinity", term(match(app="web")))), snapshot)
    assert callable(anti)
    # Preemption could help an anti-affinity rejection: only Unschedulable.
    assert anti(pod(), snapshot.nodes[0]).code is Code.UNSCHEDULABLE


def score_results(plugin: Any, incoming: dict[str, Any], snapshot: Cluster) -> dict[str, int]:
    feasible = list(snapshot.nodes)
    score = plugin.prepare(incoming, feasible, snapshot)
    if score is None:
        return {}
    raw = {info.name: score(incoming, info) for info in feasible}
    return plugin.normalize(raw)


SCORE_NODES = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2")]
AFFINITY_SCORE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, int]]] = [
    ("no terms anywhere: skipped", pod(), [pod("x", node_name="n1")], {}),
    ("preferred affinity: the matching pod's zone wins",
     pod(affinity=preferred("podAffinity", (5, term(match(app="db"))))),
     [pod("db", labels={"app": "db"}, node_name="n3")], {"n1": 0, "n2": 0, "n3": 100}),
    ("preferred anti-affinity: away from the matching pod's zone",
     pod(affinity=preferred("podAntiAffinity", (5, term(match(app="web"))))),
     [pod("web", labels={"app": "web"}, node_name="n1")], {"n1": 0, "n2": 0, "n3": 100}),
    ("weights add up per zone: affinity 8 minus anti-affinity 3 on z1",
     pod(affinity={**preferred("podAffinity", (8, term(match(app="db")))),
                   **preferred("podAntiAffinity", (3, term(match(app="web"))))}),
     [pod("db", labels={"app": "db"}, node_name="n1"),
      pod("web", labels={"app": "web"}, node_name="n2")], {"n1": 100, "n2": 100, "n3": 0}),
    ("an existing pod's preferred anti-affinity keeps the newcomer away",
     pod(labels={"app": "web"}),
     [pod("guard", node_name="n3", affinity=preferred("podAntiAffinity",
                                                       (10, term(match(app="web")))))],
     {"n1": 100, "n2": 100, "n3": 0}),
    ("an existing pod's required affinity attracts (hard pod affinity weight 1)",
     pod(labels={"app": "web"}),
     [pod("fan", node_name="n1", affinity=required("podAffinity", term(match(app="web"),
                                                                        HOST)))],
     {"n1": 100, "n2": 0, "n3": 0}),
]


@pytest.mark.parametrize(("case", "incoming", "pods", "expected"), AFFINITY_SCORE_CASES,
                         ids=[c[0] for c in AFFINITY_SCORE_CASES])
def test_inter_pod_affinity_score(case: str, incoming: dict[str, Any],
                                  pods: list[dict[str, Any]], expected: dict[str, int]) -> None:
    assert score_results(interpod_affinity.SCORE, incoming,
                         cluster(SCORE_NODES, pods)) == expected


# -- PodTopologySpread --------------------------------------------------------------------


def spread(key: str = ZONE, skew: int = 1, when: str = "DoNotSchedule",
           selector: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": match(app="web") if selector is None else selector, **extra}


def web(name: str, node_name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, labels={"app": "web"}, node_name=node_name, **kw)


SPREAD_NODES = [node("a1", "za"), node("a2", "za"), node("b1", "zb"), node("b2", "zb")]
SPREAD_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[dict[str, Any]],
                         dict[str, str]]] = [
    ("no existing pods: every node", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread()]), [],
     {"a1": "", "a2": "", "b1": "", "b2": ""}),
    ("a zone ahead by maxSkew is full", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread()]), [web("w1", "a1")],
     {"a1": ERR_SPREAD, "a2": ERR_SPREAD, "b1": "", "b2": ""}),
    ("maxSkew 2 allows it", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread(skew=2)]), [web("w1", "a1")],
     {"a1": "", "a2": "", "b1": "", "b2": ""}),
    ("a pod its selector does not match adds no skew", SPREAD_NODES,
     pod(labels={"app": "other"}, spread=[spread()]), [web("w1", "a1")],
     {"a1": "", "a2": "", "b1": "", "b2": ""}),
    ("a node without the key is unresolvable", [*SPREAD_NODES, node("nozone")],
     pod(labels={"app": "web"}, spread=[spread()]), [],
     {"a1": "", "a2": "", "b1": "", "b2": "",
      "nozone": ERR_SPREAD + " (missing required label)"}),
    ("hostname spreading", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread(HOST)]),
     [web("w1", "a1"), web("w2", "a2"), web("w3", "b1")],
     {"a1": ERR_SPREAD, "a2": ERR_SPREAD, "b1": ERR_SPREAD, "b2": ""}),
    ("two constraints must both hold", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread(), spread(HOST)]),
     [web("w1", "a1"), web("w2", "b1")],
     {"a1": ERR_SPREAD, "a2": "", "b1": ERR_SPREAD, "b2": ""}),
    ("minDomains above the domains found makes the minimum 0", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread(minDomains=3)]),
     [web("w1", "a1"), web("w2", "b1")],
     {"a1": ERR_SPREAD, "a2": ERR_SPREAD, "b1": ERR_SPREAD, "b2": ERR_SPREAD}),
    ("pods of other namespaces and terminating pods do not count", SPREAD_NODES,
     pod(labels={"app": "web"}, spread=[spread()]),
     [web("w1", "a1", namespace="other"), web("w2", "a2", deleting=True)],
     {"a1": "", "a2": "", "b1": "", "b2": ""}),
    ("nodeAffinityPolicy Honor: nodes the pod cannot use are not counted",
     [node("a1", "za", labels={"pool": "x"}), node("b1", "zb", labels={"pool": "x"}),
      node("c1", "zc")],
     pod(labels={"app": "web"}, spread=[spread()], node_selector={"pool": "x"}),
     [web("w1", "b1")], {"a1": "", "b1": ERR_SPREAD, "c1": ""}),
    ("nodeAffinityPolicy Ignore counts them (zone c's 0 is the minimum)",
     [node("a1", "za", labels={"pool": "x"}), node("b1", "zb", labels={"pool": "x"}),
      node("c1", "zc")],
     pod(labels={"app": "web"}, spread=[spread(nodeAffinityPolicy="Ignore")],
         node_selector={"pool": "x"}),
     [web("w1", "a1"), web("w2", "b1")], {"a1": ERR_SPREAD, "b1": ERR_SPREAD, "c1": ""}),
    ("nodeTaintsPolicy Honor: a tainted node's domain is not counted",
     [node("a1", "za"), node("b1", "zb"),
      node("c1", "zc", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])],
     pod(labels={"app": "web"}, spread=[spread(nodeTaintsPolicy="Honor")]),
     [web("w1", "a1"), web("w2", "b1")], {"a1": "", "b1": "", "c1": ""}),
    ("nodeTaintsPolicy Ignore (default): the tainted zone's 0 counts",
     [node("a1", "za"), node("b1", "zb"),
      node("c1", "zc", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])],
     pod(labels={"app": "web"}, spread=[spread()]),
     [web("w1", "a1"), web("w2", "b1")], {"a1": ERR_SPREAD, "b1": ERR_SPREAD, "c1": ""}),
    ("matchLabelKeys narrows the selector to the pod's own value", SPREAD_NODES,
     pod(labels={"app": "web", "rev": "2"}, spread=[spread(matchLabelKeys=["rev"])]),
     [pod("old", labels={"app": "web", "rev": "1"}, node_name="a1")],
     {"a1": "", "a2": "", "b1": "", "b2": ""}),
]


@pytest.mark.parametrize(("case", "nodes", "incoming", "pods", "expected"), SPREAD_CASES,
                         ids=[c[0] for c in SPREAD_CASES])
def test_topology_spread_filter(case: str, nodes: list[dict[str, Any]],
                                incoming: dict[str, Any], pods: list[dict[str, Any]],
                                expected: dict[str, str]) -> None:
    assert filter_results([topology_spread.FILTER], incoming, cluster(nodes, pods)) == expected


def test_topology_spread_skips_pods_without_hard_constraints() -> None:
    snapshot = cluster(SPREAD_NODES, [])
    assert topology_spread.FILTER.prepare(pod(), snapshot) is None
    assert topology_spread.FILTER.prepare(
        pod(spread=[spread(when="ScheduleAnyway")]), snapshot) is None


SPREAD_SCORE_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, int]]] = [
    ("no soft constraints: skipped", pod(labels={"app": "web"}, spread=[spread()]), [], {}),
    ("no existing pods: every node 100",
     pod(labels={"app": "web"}, spread=[spread(HOST, when="ScheduleAnyway")]), [],
     {"a1": 100, "a2": 100, "b1": 100, "b2": 100}),
    ("hostname: fewer matching pods is better",
     pod(labels={"app": "web"}, spread=[spread(HOST, when="ScheduleAnyway")]),
     [web("w1", "a1"), web("w2", "a1"), web("w3", "a2")],
     # weight log(4 + 2): a1 round(2 * 1.79) = 4, a2 2, b1/b2 0 -> 100 * (4 + 0 - s) / 4
     {"a1": 0, "a2": 50, "b1": 100, "b2": 100}),
    ("zone: the emptier zone is better",
     pod(labels={"app": "web"}, spread=[spread(when="ScheduleAnyway")]),
     [web("w1", "a1")],
     # weight log(2 + 2) = 1.39: za round(1.39) = 1, zb 0
     {"a1": 0, "a2": 0, "b1": 100, "b2": 100}),
]


@pytest.mark.parametrize(("case", "incoming", "pods", "expected"), SPREAD_SCORE_CASES,
                         ids=[c[0] for c in SPREAD_SCORE_CASES])
def test_topology_spread_score(case: str, incoming: dict[str, Any],
                               pods: list[dict[str, Any]], expected: dict[str, int]) -> None:
    assert score_results(topology_spread.SCORE, incoming,
                         cluster(SPREAD_NODES, pods)) == expected


def test_topology_spread_system_defaults_use_the_pods_service_selector() -> None:
    nodes = [*SPREAD_NODES, node("nozone")]
    snapshot = cluster(nodes, [web("w1", "a1"), web("w2", "a1")])
    incoming = pod(labels={"app": "web"})
    # No Service or workload selects it: nothing to spread.
    assert topology_spread.SCORE.prepare(incoming, list(snapshot.nodes), snapshot) is None
    with_service = Cluster(snapshot.nodes, default_selector=lambda _pod: from_map({"app": "web"}))
    score = topology_spread.SCORE.prepare(incoming, list(with_service.nodes), with_service)
    assert score is not None
    raw = {info.name: score(incoming, info) for info in with_service.nodes}
    normalized = topology_spread.normalize(raw)
    # a1 holds both pods (hostname and zone count against it), a2 shares their zone;
    # a node without a zone still spreads by hostname under the defaults (not ignored,
    # and it misses the zone constraint's maxSkew - 1 base, as in kube).
    assert normalized["a1"] < normalized["a2"] < normalized["b1"] == normalized["b2"]
    assert normalized["nozone"] == 100


def service(name: str, selector: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {} if selector is None else {"selector": selector}}


def owned_by(incoming: dict[str, Any], kind: str, name: str, *,
             api_version: str = "apps/v1", controller: bool = True) -> dict[str, Any]:
    incoming["metadata"]["ownerReferences"] = [{
        "apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
        "controller": controller}]
    return incoming


REPLICA_SETS = {"web-rs": {"spec": {"selector": {
    "matchLabels": {"app": "web"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}}}}

WORKLOAD_SELECTOR_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]],
                                    dict[str, str], bool]] = [
    # case, incoming pod, services, labels to test, whether the selector matches them
    ("no service and no owner: empty (no default spreading)",
     pod(labels={"app": "web"}), [], {"app": "web"}, True),
    ("a service that selects the pod",
     pod(labels={"app": "web", "v": "1"}), [service("web", {"app": "web"})],
     {"app": "web", "v": "2"}, True),
    ("the service's selector, not the pod's labels",
     pod(labels={"app": "web"}), [service("web", {"app": "web"})], {"app": "db"}, False),
    ("a service that does not select the pod adds nothing",
     pod(labels={"app": "web"}), [service("db", {"app": "db"})], {"app": "db"}, True),
    ("a service without a selector selects nothing",
     pod(labels={"app": "web"}), [service("headless", None)], {}, True),
    ("two services' selectors merge",
     pod(labels={"app": "web", "tier": "front"}),
     [service("web", {"app": "web"}), service("front", {"tier": "front"})],
     {"app": "web"}, False),
    ("the controlling ReplicaSet's selector, expressions included",
     owned_by(pod(labels={"app": "web", "tier": "front"}), "ReplicaSet", "web-rs"), [],
     {"app": "web", "tier": "back"}, False),
    ("the controlling ReplicaSet's selector matches its pods",
     owned_by(pod(labels={"app": "web", "tier": "front"}), "ReplicaSet", "web-rs"), [],
     {"app": "web", "tier": "front", "x": "y"}, True),
    ("an unknown ReplicaSet adds nothing",
     owned_by(pod(labels={"app": "web"}), "ReplicaSet", "gone"), [], {}, True),
    ("an owner that is not the controller is not a workload",
     owned_by(pod(labels={"app": "web"}), "ReplicaSet", "web-rs", controller=False), [],
     {}, True),
    ("only apps/v1 ReplicaSets are looked up",
     owned_by(pod(labels={"app": "web"}), "ReplicaSet", "web-rs",
              api_version="extensions/v1beta1"), [], {}, True),
]


@pytest.mark.parametrize(("case", "incoming", "services", "labels", "matches"),
                         WORKLOAD_SELECTOR_CASES, ids=[c[0] for c in WORKLOAD_SELECTOR_CASES])
def test_workload_selector_is_kubes_default_selector(
        case: str, incoming: dict[str, Any], services: list[dict[str, Any]],
        labels: dict[str, str], matches: bool) -> None:
    selector = topology_spread.workload_selector(incoming, services, REPLICA_SETS.get)
    assert selector.matches(labels) is matches


def test_workload_selector_is_empty_without_a_workload() -> None:
    lone = pod(labels={"app": "web"})
    assert topology_spread.workload_selector(lone, [service("db", {"app": "db"})],
                                             REPLICA_SETS.get).is_empty
    assert topology_spread.default_constraints(lone, topology_spread.workload_selector(
        lone, [], REPLICA_SETS.get)) == []
    owned = owned_by(pod(labels={"app": "web", "tier": "front"}), "ReplicaSet", "web-rs")
    constraints = topology_spread.default_constraints(
        owned, topology_spread.workload_selector(owned, [], REPLICA_SETS.get))
    assert [(c.topology_key, c.max_skew) for c in constraints] == [(HOST, 3), (ZONE, 5)]
