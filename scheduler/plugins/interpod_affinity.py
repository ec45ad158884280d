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
from scheduler.labels import LabelSet, PodTerms, Term, pod_terms

NAME = "InterPodAffinity"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1  # kube's default hardPodAffinityWeight

TopologyPair = tuple[str, str]


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
    """Existing pods whose required anti-affinity terms match the incoming pod, by the
    topology pair of their node (each distinct term is matched once per cycle)."""
    counts: Counter[TopologyPair] = Counter()
    matched: dict[Term, bool] = {}
    for info in nodes:
        if not info.anti_terms:
            continue
        for term, n in info.anti_terms.items():
            hit = matched.get(term)
            if hit is None:
                hit = matched[term] = term.matches(pod, namespace_labels)
            value = info.labels.get(term.topology_key)
            if hit and value is not None:
                counts[(term.topology_key, value)] += n
    return counts


def compute_state(pod: Pod, cluster: Cluster) -> PreFilterState | None:
    namespace_labels = cluster.namespace_labels
    own = pod_terms(pod)
    affinity, anti = own.required_affinity, own.required_anti_affinity
    existing = (existing_anti_affinity_counts(pod, cluster.nodes, namespace_labels)
                if cluster.fact("pods_with_required_anti_affinity") else Counter())
    if not affinity and not anti and not existing:
        return None  # kube's Skip: nothing can reject a node
    affinity_counts: Counter[TopologyPair] = Counter()
    anti_counts: Counter[TopologyPair] = Counter()
    if affinity or anti:
        # Existing pods are matched by distinct (namespace, labels), once per cycle.
        all_match: dict[LabelSet, bool] = {}
        anti_match: dict[tuple[int, LabelSet], bool] = {}
        for info in cluster.nodes:
            labels = info.labels
            for key, n in info.label_sets.items():
                if affinity:
                    hit = all_match.get(key)
                    if hit is None:
                        hit = all_match[key] = all(
                            t.matches_labels(key.namespace, key.labels, namespace_labels)
                            for t in affinity)
                    if hit:
                        for term in affinity:
                            value = labels.get(term.topology_key)
                            if value is not None:
                                affinity_counts[(term.topology_key, value)] += n
                for i, term in enumerate(anti):
                    value = labels.get(term.topology_key)
                    if value is None:
                        continue
                    hit = anti_match.get((i, key))
                    if hit is None:
                        hit = anti_match[(i, key)] = term.matches_labels(
                            key.namespace, key.labels, namespace_labels)
                    if hit:
                        anti_counts[(term.topology_key, value)] += n
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


# Made once: the filter answers one of these for every node it rejects.
AFFINITY_REJECTED = unschedulable(ERR_AFFINITY, unresolvable=True)
ANTI_AFFINITY_REJECTED = unschedulable(ERR_ANTI_AFFINITY)
EXISTING_ANTI_AFFINITY_REJECTED = unschedulable(ERR_EXISTING_ANTI_AFFINITY)


def check(state: PreFilterState, node_info: NodeInfo) -> Status:
    labels = node_info.labels
    if state.affinity and not satisfies_affinity(state, labels):
        return AFFINITY_REJECTED
    if not satisfies_anti_affinity(state, labels):
        return ANTI_AFFINITY_REJECTED
    if not satisfies_existing_anti_affinity(state, labels):
        return EXISTING_ANTI_AFFINITY_REJECTED
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
    own = pod_terms(pod)
    preferred, preferred_anti = own.preferred_affinity, own.preferred_anti_affinity
    own_terms = bool(preferred or preferred_anti)
    if not own_terms and not cluster.fact("pods_with_scoring_terms"):
        return None
    scores: TopologyScores = {}
    for info in cluster.nodes:
        labels = info.labels
        if not labels:
            continue
        for key, existing in (info.pods if own_terms else info.pods_with_scoring_terms).items():
            for term in preferred:
                _add(scores, term, term.weight, existing, labels, ns_labels)
            for term in preferred_anti:
                _add(scores, term, -term.weight, existing, labels, ns_labels)
            theirs: PodTerms | None = info.terms.get(key)
            if theirs is not None:
                for term in theirs.required_affinity:
                    _add(scores, term, HARD_POD_AFFINITY_WEIGHT, pod, labels, ns_labels)
                for term in theirs.preferred_affinity:
                    _add(scores, term, term.weight, pod, labels, ns_labels)
                for term in theirs.preferred_anti_affinity:
                    _add(scores, term, -term.weight, pod, labels, ns_labels)
    return scores


def node_score(scores: TopologyScores, node_info: NodeInfo) -> int:
    labels = node_info.labels
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
