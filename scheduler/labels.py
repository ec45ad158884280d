"""Label selectors as the scheduler evaluates them (apimachinery's labels.Selector).

`compile_selector` turns a metav1.LabelSelector (`matchLabels` + `matchExpressions`
with In, NotIn, Exists, DoesNotExist) into a `Selector` once per cycle; a missing
(null) selector matches nothing and an empty one `{}` matches everything, as
LabelSelectorAsSelector does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Requirement = tuple[str, str, frozenset[str]]  # key, operator, values


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        labels = labels or {}
        for key, operator, values in self.requirements:
            value = labels.get(key)
            if operator == "In":
                if value is None or value not in values:
                    return False
            elif operator == "NotIn":
                if value is not None and value in values:
                    return False
            elif operator == "Exists":
                if value is None:
                    return False
            elif operator == "DoesNotExist":
                if value is not None:
                    return False
            else:
                return False
        return True

    @property
    def is_empty(self) -> bool:
        """Matches everything (kube's Selector.Empty())."""
        return not self.nothing and not self.requirements

    def and_(self, requirements: Iterable[Requirement]) -> Selector:
        return Selector(self.requirements + tuple(requirements), self.nothing)


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def compile_selector(selector: Mapping[str, Any] | None) -> Selector:
    if selector is None:
        return NOTHING
    requirements: list[Requirement] = [
        (str(key), "In", frozenset([str(value)]))
        for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        requirements.append((str(expression.get("key")), str(expression.get("operator")),
                             frozenset(str(v) for v in expression.get("values") or ())))
    return Selector(tuple(requirements))


def from_map(labels: Mapping[str, str]) -> Selector:
    """A `spec.selector` map (Services, ReplicationControllers): every pair must match."""
    return Selector(tuple((k, "In", frozenset([v])) for k, v in sorted(labels.items())))


@dataclass(frozen=True, eq=False)
class Term:
    """A PodAffinityTerm, compiled: which pods it selects and across which label.

    Interned (`compile_term` returns one object for equal terms), so that counting
    them hashes by identity: replicas share one term.
    """

    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector
    topology_key: str
    weight: int = 0

    def matches(self, pod: Mapping[str, Any],
                namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        return self.matches_labels(pod_namespace(pod), pod_labels(pod), namespace_labels)

    def matches_labels(self, namespace: str, labels: Mapping[str, str],
                       namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        if namespace not in self.namespaces and not self.namespace_selector.matches(
                namespace_labels.get(namespace) or {}):
            return False
        return self.selector.matches(labels)


def compile_term(owner: Mapping[str, Any], term: Mapping[str, Any], weight: int = 0) -> Term:
    """`namespaces` plus those `namespaceSelector` matches; the owner's namespace when
    neither is set; `namespaceSelector: {}` is every namespace."""
    namespaces = frozenset(str(n) for n in term.get("namespaces") or ())
    raw_ns_selector = term.get("namespaceSelector")
    if not namespaces and raw_ns_selector is None:
        namespaces = frozenset([pod_namespace(owner)])
    ns_selector = NOTHING if raw_ns_selector is None else (
        compile_selector(raw_ns_selector) if raw_ns_selector else EVERYTHING)
    selector = compile_selector(term.get("labelSelector"))
    topology_key = str(term.get("topologyKey") or "")
    key = (selector, namespaces, ns_selector, topology_key, weight)
    found = _TERMS.get(key)
    if found is None:
        if len(_TERMS) > MAX_INTERNED_TERMS:
            _TERMS.clear()  # terms of long-gone pods; equal terms compiled later still work
        found = _TERMS[key] = Term(selector, namespaces, ns_selector, topology_key, weight)
    return found


MAX_INTERNED_TERMS = 10_000
_TERMS: dict[tuple[Selector, frozenset[str], Selector, str, int], Term] = {}


@dataclass(frozen=True)
class PodTerms:
    """A pod's pod (anti-)affinity, compiled once (kube's PodInfo terms)."""

    required_affinity: tuple[Term, ...] = ()
    required_anti_affinity: tuple[Term, ...] = ()
    preferred_affinity: tuple[Term, ...] = ()
    preferred_anti_affinity: tuple[Term, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.required_affinity or self.required_anti_affinity
                    or self.preferred_affinity or self.preferred_anti_affinity)

    @property
    def scores_others(self) -> bool:
        """Whether these terms weigh in on where other pods go (kube's scoring counts
        required affinity, hard pod affinity weight, and preferred terms; not required
        anti-affinity)."""
        return bool(self.required_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity)


NO_TERMS = PodTerms()


def pod_terms(pod: Mapping[str, Any]) -> PodTerms:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    if not affinity.get("podAffinity") and not affinity.get("podAntiAffinity"):
        return NO_TERMS

    def required(kind: str) -> tuple[Term, ...]:
        section = affinity.get(kind) or {}
        return tuple(compile_term(pod, t) for t in
                     section.get("requiredDuringSchedulingIgnoredDuringExecution") or ())

    def preferred(kind: str) -> tuple[Term, ...]:
        section = affinity.get(kind) or {}
        return tuple(compile_term(pod, t.get("podAffinityTerm") or {},
                                  int(t.get("weight") or 0))
                     for t in section.get("preferredDuringSchedulingIgnoredDuringExecution")
                     or ())
    return PodTerms(required("podAffinity"), required("podAntiAffinity"),
                    preferred("podAffinity"), preferred("podAntiAffinity"))


@dataclass(frozen=True)
class LabelSet:
    """A pod's namespace and labels, hashable (the labels as a frozenset) and readable
    as a mapping (`labels`, left out of equality)."""

    namespace: str
    items: frozenset[tuple[str, str]]
    labels: Mapping[str, str] = field(compare=False, hash=False)


def label_set(pod: Mapping[str, Any]) -> LabelSet:
    """Interned, as terms are: replicas share one object, so the per-cycle matching
    caches keyed by label set compare by identity, not field by field."""
    labels = pod_labels(pod)
    key = (pod_namespace(pod), frozenset(labels.items()))
    found = _LABEL_SETS.get(key)
    if found is None:
        if len(_LABEL_SETS) > MAX_INTERNED_LABEL_SETS:
            _LABEL_SETS.clear()  # as _TERMS: equal sets made later still compare equal
        found = _LABEL_SETS[key] = LabelSet(key[0], key[1], dict(labels))
    return found


MAX_INTERNED_LABEL_SETS = 100_000
_LABEL_SETS: dict[tuple[str, frozenset[tuple[str, str]]], LabelSet] = {}


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def pod_namespace(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")
