"""Label selectors as the scheduler evaluates them (apimachinery's labels.Selector).

`compile_selector` turns a metav1.LabelSelector (`matchLabels` + `matchExpressions`
with In, NotIn, Exists, DoesNotExist) into a `Selector` once per cycle; a missing
(null) selector matches nothing and an empty one `{}` matches everything, as
LabelSelectorAsSelector does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def pod_namespace(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")
