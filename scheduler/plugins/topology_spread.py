"""PodTopologySpread: spread matching pods evenly over domains (kube's
`podtopologyspread`).

A constraint (`spec.topologySpreadConstraints[]`) counts the pods its `labelSelector`
(plus `matchLabelKeys`) selects in the pod's namespace, per value of `topologyKey`,
over the nodes that carry every constraint's key and pass its inclusion policies
(`nodeAffinityPolicy`, Honor by default: the pod's nodeSelector/required affinity;
`nodeTaintsPolicy`, Ignore by default: Honor skips nodes with untolerated
NoSchedule/NoExecute taints).

Filter (DoNotSchedule): placing the pod must keep `count(domain) + self - min <=
maxSkew`, where min is the smallest domain's count, or 0 while fewer than
`minDomains` domains exist. Reasons as kube: "node(s) didn't match pod topology spread
constraints", and "... (missing required label)" (unresolvable) for a node without the
key.

Score (ScheduleAnyway; or kube's system defaults for a pod with no constraints at
all: hostname maxSkew 3 and zone maxSkew 5, over the selector of the Services and
workloads the pod belongs to): fewer matching pods in a node's domains is better,
each constraint weighted by log(domains + 2); weight 2 in the profile.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    tolerates,
    unschedulable,
)
from scheduler.labels import (
    LabelSet,
    Selector,
    compile_selector,
    from_map,
    pod_labels,
    pod_namespace,
)
from scheduler.plugins import node_affinity

NAME = "PodTopologySpread"
ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
ERR_MISSING_LABEL = ERR_CONSTRAINTS + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
# kube's systemDefaultConstraints (ScheduleAnyway).
SYSTEM_DEFAULTS = ((HOSTNAME, 3), (ZONE, 5))


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False


def compile_constraint(pod: Pod, raw: Mapping[str, Any]) -> Constraint:
    selector = compile_selector(raw.get("labelSelector"))
    labels = pod_labels(pod)
    keys = [k for k in raw.get("matchLabelKeys") or () if k in labels]
    if keys and not selector.nothing:
        selector = selector.and_((k, "In", frozenset([labels[k]])) for k in keys)
    return Constraint(int(raw.get("maxSkew") or 1), str(raw.get("topologyKey") or ""),
                      selector, int(raw.get("minDomains") or 1),
                      (raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
                      (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor")


def constraints_of(pod: Pod, when: str) -> list[Constraint]:
    return [compile_constraint(pod, c)
            for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or ()
            if c.get("whenUnsatisfiable") == when]


def workload_selector(pod: Pod, services: Iterable[Mapping[str, Any]],
                      replica_set: Callable[[str], Mapping[str, Any] | None]) -> Selector:
    """kube's helper.DefaultSelector, what the system default constraints count: the
    merged `spec.selector` of the pod's namespace's Services that select it (a Service
    without one selects nothing), and the selector of the apps/v1 ReplicaSet that
    controls it (`replica_set(name)`, None if unknown). Empty when neither exists."""
    labels = pod_labels(pod)
    merged: dict[str, str] = {}
    for service in services:
        selector = (service.get("spec") or {}).get("selector")
        if selector is not None and all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    found = from_map(merged)
    owner = controller_of(pod)
    if owner is not None and owner.get("apiVersion") == "apps/v1" \
            and owner.get("kind") == "ReplicaSet":
        rs = replica_set(str(owner.get("name") or ""))
        if rs is not None:
            found = found.and_(compile_selector((rs.get("spec") or {}).get("selector"))
                               .requirements)
    return found


def controller_of(pod: Pod) -> Mapping[str, Any] | None:
    """The ownerReference with `controller: true` (metav1.GetControllerOf)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def default_constraints(pod: Pod, selector: Selector) -> list[Constraint]:
    if selector.is_empty or selector.nothing:
        return []  # a pod of no Service or workload: kube spreads nothing
    return [Constraint(skew, key, selector) for key, skew in SYSTEM_DEFAULTS]


def has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def untolerated_hard_taint(pod: Pod, node: Mapping[str, Any]) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations")
    return any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(
        tolerations, key=str(t.get("key") or ""), value=str(t.get("value") or ""),
        effect=str(t.get("effect")))
        for t in (node.get("spec") or {}).get("taints") or ())


def included(constraint: Constraint, pod: Pod, info: NodeInfo) -> bool:
    """kube's matchNodeInclusionPolicies."""
    if constraint.honor_node_affinity and not node_affinity.matches(pod, info.node):
        return False
    return not (constraint.honor_node_taints and untolerated_hard_taint(pod, info.node))


def count_matching(info: NodeInfo, selector: Selector, namespace: str) -> int:
    """The node's pods in `namespace` that `selector` matches, terminating ones left out."""
    return sum(n for key, n in info.live_label_sets.items()
               if key.namespace == namespace and selector.matches(key.labels))


# -- filter -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterState:
    constraints: Sequence[Constraint]
    counts: Sequence[Mapping[str, int]]  # per constraint: domain value -> matching pods
    self_match: Sequence[int]
    mins: Sequence[int]  # per constraint: the global minimum (0 below minDomains)


def min_match(counts: Mapping[str, int], min_domains: int) -> int:
    if not counts or len(counts) < min_domains:
        return 0
    return min(counts.values())


def compute_filter_state(pod: Pod, cluster: Cluster) -> FilterState | None:
    constraints = constraints_of(pod, "DoNotSchedule")
    if not constraints:
        return None
    namespace = pod_namespace(pod)
    # What is the same for every node, once: whether the pod limits its nodes at all,
    # and which label sets each selector matches.
    spec = pod.get("spec") or {}
    limits_nodes = bool(spec.get("nodeSelector") or node_affinity.required_terms(pod))
    tolerations = bool(spec.get("tolerations"))
    matched: dict[tuple[int, LabelSet], bool] = {}
    counts: list[Counter[str]] = [Counter() for _ in constraints]
    keys = [c.topology_key for c in constraints]
    for info in cluster.nodes:
        labels = info.labels
        if not all(topology_key in labels for topology_key in keys):
            continue
        if not info.live_label_sets and not limits_nodes and not info.hard_taints:
            # No pod to count and no policy to apply: the node's domains exist (count 0).
            for i, topology_key in enumerate(keys):
                counts[i][labels[topology_key]] += 0
            continue
        for i, constraint in enumerate(constraints):
            if constraint.honor_node_affinity and limits_nodes and not node_affinity.matches(
                    pod, info.node):
                continue
            if constraint.honor_node_taints and info.hard_taints and (
                    not tolerations or untolerated_hard_taint(pod, info.node)):
                continue
            count = 0
            for key, n in info.live_label_sets.items():
                if key.namespace != namespace:
                    continue
                hit = matched.get((i, key))
                if hit is None:
                    hit = matched[(i, key)] = constraint.selector.matches(key.labels)
                if hit:
                    count += n
            # A domain with no matching pod is a domain too (count 0).
            counts[i][labels[constraint.topology_key]] += count
    own = pod_labels(pod)
    return FilterState(constraints, counts,
                       [1 if c.selector.matches(own) else 0 for c in constraints],
                       [min_match(counts[i], c.min_domains) for i, c in enumerate(constraints)])


MISSING_LABEL = unschedulable(ERR_MISSING_LABEL, unresolvable=True)
SKEWED = unschedulable(ERR_CONSTRAINTS)


def check(state: FilterState, node_info: NodeInfo) -> Status:
    labels = node_info.labels
    for i, constraint in enumerate(state.constraints):
        value = labels.get(constraint.topology_key)
        if value is None:
            return MISSING_LABEL
        skew = state.counts[i].get(value, 0) + state.self_match[i] - state.mins[i]
        if skew > constraint.max_skew:
            return SKEWED
    return SUCCESS


def pre_filter(pod: Pod, cluster: Cluster) -> FilterFunc | None:
    state = compute_filter_state(pod, cluster)
    if state is None:
        return None
    return lambda _pod, node_info: check(state, node_info)


# -- score ------------------------------------------------------------------------------

IGNORED = -1


@dataclass(frozen=True)
class ScoreState:
    constraints: Sequence[Constraint]
    counts: Sequence[Mapping[str, int]]  # per non-hostname constraint: value -> pods
    weights: Sequence[float]
    ignored: frozenset[str]
    namespace: str


def compute_score_state(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster
                        ) -> ScoreState | None:
    explicit = bool((pod.get("spec") or {}).get("topologySpreadConstraints"))
    constraints = (constraints_of(pod, "ScheduleAnyway") if explicit
                   else default_constraints(pod, cluster.default_selector(pod)))
    if not constraints or not feasible:
        return None
    # System defaults do not require every key (nodes without a zone still spread by
    # hostname); explicit constraints do.
    require_all = explicit
    ignored = set()
    domains: list[set[str]] = [set() for _ in constraints]
    for info in feasible:
        labels = info.labels
        if require_all and not has_all_keys(labels, constraints):
            ignored.add(info.name)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != HOSTNAME and c.topology_key in labels:
                domains[i].add(labels[c.topology_key])
    namespace = pod_namespace(pod)
    counts: list[Counter[str]] = [Counter() for _ in constraints]
    for info in cluster.nodes:
        labels = info.labels
        if require_all and not has_all_keys(labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if c.topology_key == HOSTNAME:
                continue
            value = labels.get(c.topology_key)
            if value is None or value not in domains[i] or not included(c, pod, info):
                continue
            counts[i][value] += count_matching(info, c.selector, namespace)
    weights = [math.log((len(feasible) - len(ignored) if c.topology_key == HOSTNAME
                         else len(domains[i])) + 2) for i, c in enumerate(constraints)]
    return ScoreState(constraints, counts, weights, frozenset(ignored), namespace)


def node_score(state: ScoreState, node_info: NodeInfo) -> int:
    if node_info.name in state.ignored:
        return IGNORED
    labels = node_info.labels
    score = 0.0
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == HOSTNAME:
            count = count_matching(node_info, c.selector, state.namespace)
        else:
            count = state.counts[i].get(value, 0)
        score += count * state.weights[i] + (c.max_skew - 1)
    return round(score)


def normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """Fewest matching pods best: MAX * (max + min - s) / max; ignored nodes 0."""
    valid = [s for s in scores.values() if s != IGNORED]
    if not valid:
        return {name: 0 for name in scores}
    low, high = min(valid), max(valid)
    return {name: 0 if s == IGNORED else MAX_NODE_SCORE if high == 0
            else MAX_NODE_SCORE * (high + low - s) // high for name, s in scores.items()}


def pre_score(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster) -> ScoreFunc | None:
    state = compute_score_state(pod, feasible, cluster)
    if state is None:
        return None
    return lambda _pod, node_info: node_score(state, node_info)


FILTER = FilterPlugin(NAME, pre_filter=pre_filter)
SCORE = ScorePlugin(NAME, pre_score=pre_score, normalize=normalize, weight=2)
