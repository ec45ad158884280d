"""NodeAffinity: `spec.nodeSelector` and `spec.affinity.nodeAffinity` (kube's plugin).

Filter: every nodeSelector pair must be a node label, AND the required terms
(`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`) must match: the
terms are ORed, the expressions and fields inside one term ANDed; a term with neither
matches nothing. Operators In, NotIn, Exists, DoesNotExist, Gt, Lt on labels;
`matchFields` on `metadata.name` (In, NotIn). Both fail with kube's one reason,
"node(s) didn't match Pod's node affinity/selector".

Score: the sum of the weights of the preferred terms a node matches, normalized so
the best node gets 100 (kube's DefaultNormalizeScore); weight 2 in the profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework import (
    SUCCESS,
    Cluster,
    FilterFunc,
    FilterPlugin,
    NodeInfo,
    Pod,
    ScoreFunc,
    ScorePlugin,
    Status,
    default_normalize,
    unschedulable,
)

NAME = "NodeAffinity"
ERR_REASON = "node(s) didn't match Pod's node affinity/selector"
REJECTED = unschedulable(ERR_REASON, unresolvable=True)


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def requirement_matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    """One NodeSelectorRequirement against a label's (or field's) value, None if absent."""
    operator = requirement.get("operator")
    values = requirement.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        have, bound = _int(value), _int(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an unknown operator matches nothing (kube: a parse error)


def node_field(node: Mapping[str, Any], key: str) -> str | None:
    if key == "metadata.name":
        return str((node.get("metadata") or {}).get("name") or "")
    return None  # the only field kube supports


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # "a null or empty node selector term matches no objects"
    labels = (node.get("metadata") or {}).get("labels") or {}
    return (all(requirement_matches(r, labels.get(str(r.get("key")))) for r in expressions)
            and all(requirement_matches(r, node_field(node, str(r.get("key"))))
                    for r in fields))


def any_term_matches(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> bool:
    return any(term_matches(term, node) for term in terms)


def node_affinity(pod: Pod) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


def required_terms(pod: Pod) -> list[Mapping[str, Any]] | None:
    """The required nodeSelectorTerms, None when there is no required node affinity."""
    required = node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return list(required.get("nodeSelectorTerms") or [])


def selector_matches(selector: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def matches(pod: Pod, node: Mapping[str, Any]) -> bool:
    """Whether the node satisfies the pod's nodeSelector and required node affinity
    (kube's RequiredNodeAffinity.Match; also used by PodTopologySpread)."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    terms = required_terms(pod)
    return (selector_matches(selector, node)
            and (terms is None or any_term_matches(terms, node)))


def pre_filter(pod: Pod, cluster: Cluster) -> FilterFunc | None:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    terms = required_terms(pod)
    if not selector and terms is None:
        return None

    def fits(_pod: Pod, node_info: NodeInfo) -> Status:
        node = node_info.node
        if selector and not selector_matches(selector, node):
            return REJECTED
        if terms is not None and not any_term_matches(terms, node):
            return REJECTED
        return SUCCESS
    return fits


def fits(pod: Pod, node_info: NodeInfo) -> Status:
    """The filter on one pair (tests, and the queue's what-would-fit checks)."""
    return SUCCESS if matches(pod, node_info.node) else REJECTED


def preferred_score(terms: Sequence[Mapping[str, Any]], node: Mapping[str, Any]) -> int:
    total = 0
    for term in terms:
        weight = int(term.get("weight") or 0)
        if weight and term_matches(term.get("preference") or {}, node):
            total += weight
    return total


def pre_score(pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster) -> ScoreFunc | None:
    terms = node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    if not terms:
        return None
    return lambda _pod, node_info: preferred_score(terms, node_info.node)


FILTER = FilterPlugin(NAME, pre_filter=pre_filter)
SCORE = ScorePlugin(NAME, pre_score=pre_score, normalize=default_normalize, weight=2)
