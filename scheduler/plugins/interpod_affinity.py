"""InterPodAffinity: pods placed by the pods already placed (kube's `interpodaffinity`).

A term (`podAffinity`/`podAntiAffinity`, required or preferred) selects pods by label
(`labelSelector`) in namespaces (`namespaces` ∪ those matching `namespaceSelector`;
the pod's own namespace when both are unset) and relates nodes through a
`topologyKey`: two nodes are in the same domain when they carry that label with the
same value.

PreFilter counts, once per cycle, by (topologyKey, value):
- the existing pods whose required anti-affinity terms match the incoming pod
  (symmetry: an existing pod can keep the newcomer out);
- the existing pods matching ALL the incoming pod's required affinity terms;
- the existing pods matching each of its required anti-affinity terms.
Filter then answers per node, in kube's order and words: "node(s) didn't match pod
affinity rules" (UnschedulableAndUnresolvable), "node(s) didn't match pod
anti-affinity rules", "node(s) didn't satisfy existing pods anti-affinity rules".
A pod whose affinity no pod matches yet may go anywhere its topology keys exist if it
matches its own terms (the first pod of a group).

Score (weight 2): preferred terms of the pod (+/- weight for each matching existing
pod's domain), existing pods' preferred terms matching the pod, and existing pods'
required affinity terms (hard pod affinity weight 1); each node sums the domains its
labels are in, normalized min..max onto 0..100.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    Cluster,
    FilterFunc,
    FilterPlugin,
    NodeInfo,
    Pod,
    ScoreFunc,
    ScorePlugin,
    Status,
    unschedulable,
)
from scheduler.labels import (
    EVERYTHING,
    NOTHING,
    Selector,
    compile_selector,
    pod_labels,
    pod_namespace,
)

NAME = "InterPodAffinity"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1  # kube's default hardPodAffinityWeight

TopologyPair = tuple[str, str]


@dataclass(frozen=True)
class Term:
    """A PodAffinityTerm, compiled: which pods it selects and across which label."""

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector
    topology_key: str
    weight: int = 0

    def matches(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        namespace = pod_namespace(pod)
        if namespace not in self.namespaces and not self.namespace_selector.matches(
                namespace_labels.get(namespace) or {}):
            return False
        return self.selector.matches(pod_labels(pod))


def compile_term(owner: Pod, term: Mapping[str, Any], weight: int = 0) -> Term:
    namespaces = frozenset(str(n) for n in term.get("namespaces") or ())
    raw_ns_selector = term.get("namespaceSelector")
    if not namespaces and raw_ns_selector is None:
        namespaces = frozenset([pod_namespace(owner)])
    ns_selector = NOTHING if raw_ns_selector is None else (
        compile_selector(raw_ns_selector) if raw_ns_selector else EVERYTHING)
    return Term(compile_selector(term.get("labelSelector")), namespaces, ns_selector,
                str(term.get("topologyKey") or ""), weight)


def _section(pod: Pod, kind: str) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}


def required_terms(pod: Pod, kind: str) -> list[Term]:
    """kind: podAffinity or podAntiAffinity."""
    return [compile_term(pod, t) for t in
            _section(pod, kind).get("requiredDuringSchedulingIgnoredDuringExecution") or ()]


def preferred_terms(pod: Pod, kind: str) -> list[Term]:
    return [compile_term(pod, t.get("podAffinityTerm") or {}, int(t.get("weight") or 0))
            for t in _section(pod, kind).get("preferredDuringSchedulingIgnoredDuringExecution")
            or ()]


def node_labels(info: NodeInfo) -> Mapping[str, str]:
    return (info.node.get("metadata") or {}).get("labels") or {}


def matches_all(terms: Sequence[Term], pod: Pod,
                namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    return bool(terms) and all(t.matches(pod, namespace_labels) for t in terms)


@dataclass(frozen=True)
class PreFilterState:
    affinity: Sequence[Term]
    anti_affinity: Sequence[Term]
    affinity_counts: Mapping[TopologyPair, int]
    anti_affinity_counts: Mapping[TopologyPair, int]
    existing_anti_affinity_counts: Mapping[TopologyPair, int]
    matches_own_affinity: bool


def existing_anti_affinity_counts(pod: Pod, nodes: Iterable[NodeInfo],
                                  namespace_labels: Mapping[str, Mapping[str, str]]
                                  ) -> Counter[TopologyPair]:
    counts: Counter[TopologyPair] = Counter()
    for info in nodes:
        if not info.pods_with_required_anti_affinity:
            continue
        labels = node_labels(info)
        for existing in info.pods_with_required_anti_affinity.values():
            for term in required_terms(existing, "podAntiAffinity"):
                value = labels.get(term.topology_key)
                if value is not None and term.matches(pod, namespace_labels):
                    counts[(term.topology_key, value)] += 1
    return counts


def compute_state(pod: Pod, cluster: Cluster) -> PreFilterState | None:
    namespace_labels = cluster.namespace_labels
    affinity = required_terms(pod, "podAffinity")
    anti = required_terms(pod, "podAntiAffinity")
    existing = (existing_anti_affinity_counts(pod, cluster.nodes, namespace_labels)
                if cluster.fact("pods_with_required_anti_affinity") else Counter())
    if not affinity and not anti and not existing:
        return None  # kube's Skip: nothing can reject a node
    affinity_counts: Counter[TopologyPair] = Counter()
    anti_counts: Counter[TopologyPair] = Counter()
    if affinity or anti:
        for info in cluster.nodes:
            labels = node_labels(info)
            for other in info.pods.values():
                if affinity and matches_all(affinity, other, namespace_labels):
                    for term in affinity:
                        value = labels.get(term.topology_key)
                        if value is not None:
                            affinity_counts[(term.topology_key, value)] += 1
                for term in anti:
                    value = labels.get(term.topology_key)
                    if value is not None and term.matches(other, namespace_labels):
                        anti_counts[(term.topology_key, value)] += 1
    return PreFilterState(affinity, anti, affinity_counts, anti_counts, existing,
                          matches_all(affinity, pod, namespace_labels))


def satisfies_affinity(state: PreFilterState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    for term in state.affinity:
        value = labels.get(term.topology_key)
        if value is None:
            return False  # every topology key must exist on the node
        if state.affinity_counts.get((term.topology_key, value), 0) <= 0:
            pods_exist = False
    if not pods_exist:
        # The first pod of a group with affinity to itself: allowed while no pod at all
        # matches, if it matches its own terms.
        return not state.affinity_counts and state.matches_own_affinity
    return True


def satisfies_anti_affinity(state: PreFilterState, labels: Mapping[str, str]) -> bool:
    if not state.anti_affinity_counts:
        return True
    for term in state.anti_affinity:
        value = labels.get(term.topology_key)
        if value is not None and state.anti_affinity_counts.get((term.topology_key, value), 0):
            return False
    return True


def satisfies_existing_anti_affinity(state: PreFilterState, labels: Mapping[str, str]
                                     ) -> bool:
    counts = state.existing_anti_affinity_counts
    return not counts or not any(counts.get(pair, 0) for pair in labels.items())


def check(state: PreFilterState, node_info: NodeInfo) -> Status:
    labels = node_labels(node_info)
    if not satisfies_affinity(state, labels):
        return unschedulable(ERR_AFFINITY, unresolvable=True)
    if not satisfies_anti_affinity(state, labels):
        return unschedulable(ERR_ANTI_AFFINITY)
    if not satisfies_existing_anti_affinity(state, labels):
        return unschedulable(ERR_EXISTING_ANTI_AFFINITY)
    return SUCCESS


def pre_filter(pod: Pod, cluster: Cluster) -> FilterFunc | None:
    state = compute_state(pod, cluster)
    if state is None:
        return None
    return lambda _pod, node_info: check(state, node_info)


# -- scoring ----------------------------------------------------------------------------

TopologyScores = dict[str, dict[str, int]]  # topologyKey -> value -> score


def _add(scores: TopologyScores, term: Term, weight: int, target: Pod,
         node: Mapping[str, str], namespace_labels: Mapping[str, Mapping[str, str]]) -> None:
    value = node.get(term.topology_key)
    if value is not None and term.matches(target, namespace_labels):
        by_value = scores.setdefault(term.topology_key, {})
        by_value[value] = by_value.get(value, 0) + weight


def topology_scores(pod: Pod, cluster: Cluster) -> TopologyScores | None:
    """kube's PreScore: the score of each (topologyKey, value) for this pod."""
    ns_labels = cluster.namespace_labels
    preferred = preferred_terms(pod, "podAffinity")
    preferred_anti = preferred_terms(pod, "podAntiAffinity")
    own_terms = bool(preferred or preferred_anti)
    if not own_terms and not cluster.fact("pods_with_affinity"):
        return None
    scores: TopologyScores = {}
    for info in cluster.nodes:
        labels = node_labels(info)
        if not labels:
            continue
        for existing in (info.pods if own_terms else info.pods_with_affinity).values():
            for term in preferred:
                _add(scores, term, term.weight, existing, labels, ns_labels)
            for term in preferred_anti:
                _add(scores, term, -term.weight, existing, labels, ns_labels)
            if (existing.get("spec") or {}).get("affinity"):
                for term in required_terms(existing, "podAffinity"):
                    _add(scores, term, HARD_POD_AFFINITY_WEIGHT, pod, labels, ns_labels)
                for term in preferred_terms(existing, "podAffinity"):
                    _add(scores, term, term.weight, pod, labels, ns_labels)
                for term in preferred_terms(existing, "podAntiAffinity"):
                    _add(scores, term, -term.weight, pod, labels, ns_labels)
    return scores


def node_score(scores: TopologyScores, node_info: NodeInfo) -> int:
    labels = node_labels(node_info)
    return sum(by_value.get(labels[key], 0) for key, by_value in scores.items() if key in labels)


def pre_score(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster) -> ScoreFunc | None:
    scores = topology_scores(pod, cluster)
    if scores is None:
        return None
    return lambda _pod, node_info: node_score(scores, node_info)


def normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """min..max onto 0..100; all 0 when every node scored the same (kube's)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {name: 0 for name in scores}
    return {name: int(MAX_NODE_SCORE * (value - low) / (high - low))
            for name, value in scores.items()}


FILTER = FilterPlugin(NAME, pre_filter=pre_filter)
SCORE = ScorePlugin(NAME, pre_score=pre_score, normalize=normalize, weight=2)
