"""The scheduling framework, kept small: filter, score, pick, and explain.

As in kube-scheduler (`pkg/scheduler/framework`), a plugin answers one question about
one (pod, node) pair and returns a `Status`; "unschedulable" is an outcome, not an
exception. `schedule_one` is a pure function of the pod and a snapshot of the nodes:
it runs every filter on every node (stopping early once enough feasible nodes were
found, like kube's percentageOfNodesToScore), scores the feasible ones, and picks the
best, breaking ties at random so that equal nodes share the load. When no node fits,
`fit_error_message` words the outcome as kube-scheduler's FitError does.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from scheduler.labels import (
    NOTHING,
    LabelSet,
    PodTerms,
    Selector,
    Term,
    label_set,
    pod_terms,
)
from scheduler.resources import ZERO, Allocatable, Resources, node_allocatable, pod_requests

Pod = Mapping[str, Any]
Node = Mapping[str, Any]

MAX_NODE_SCORE = 100
# kube-scheduler's defaults for how many feasible nodes to look for before scoring.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


class Code(enum.Enum):
    SUCCESS = "Success"
    # The pod does not fit this node now; a change to the node may fix that.
    UNSCHEDULABLE = "Unschedulable"
    # The pod does not fit and preempting pods on the node would not help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    # The plugin itself failed: the scheduling attempt is aborted and retried.
    ERROR = "Error"


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


SUCCESS = Status()


def unschedulable(reason: str, *, unresolvable: bool = False) -> Status:
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, (reason,))


def error(reason: str) -> Status:
    return Status(Code.ERROR, (reason,))


@dataclass
class NodeInfo:
    """A node as the scheduler sees it: the object plus the pods placed on it (bound,
    or assumed by us) and what they request.

    The cache mutates these between scheduling cycles; a cycle is synchronous, so
    plugins see a consistent snapshot and must not modify it.
    """

    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)  # pod key -> pod
    # The pods with pod affinity or anti-affinity terms (kube's PodsWithAffinity), and
    # those with required anti-affinity: what InterPodAffinity visits for other pods.
    pods_with_affinity: dict[str, Pod] = field(default_factory=dict)
    pods_with_required_anti_affinity: dict[str, Pod] = field(default_factory=dict)
    # Those whose terms score other pods (required affinity, any preferred term).
    pods_with_scoring_terms: dict[str, Pod] = field(default_factory=dict)
    terms: dict[str, PodTerms] = field(default_factory=dict)  # of pods_with_affinity
    # How many pods carry each (namespace, labels): selectors are matched once per
    # distinct set, not once per pod. `live_label_sets` leaves terminating pods out.
    label_sets: Counter[LabelSet] = field(default_factory=Counter)
    # The required anti-affinity terms of the pods here, counted (identical terms of
    # replicas are matched once).
    anti_terms: Counter[Term] = field(default_factory=Counter)
    live_label_sets: Counter[LabelSet] = field(default_factory=Counter)
    requested: Resources = ZERO
    # As `requested`, with kube's defaults for containers that request no cpu/memory.
    non_zero_requested: Resources = ZERO
    name: str = field(init=False)
    labels: Mapping[str, str] = field(init=False)
    allocatable: Allocatable = field(init=False)
    # Facts the filters read on every node of every cycle, taken once per node update.
    ready: str | None = field(init=False)  # the Ready condition's status
    unschedulable: bool = field(init=False)
    hard_taints: tuple[Mapping[str, Any], ...] = field(init=False)  # NoSchedule/NoExecute
    # Whether any taint is PreferNoSchedule (so scoring can skip nodes without one).
    prefers_no_schedule: bool = field(init=False)
    # Schedulable, Ready and without NoSchedule/NoExecute taints: every pod passes the
    # filters marked `passes_clean_nodes` here, so a cycle need not call them.
    clean: bool = field(init=False)

    def __post_init__(self) -> None:
        self.set_node(self.node)

    def set_node(self, node: Node) -> None:
        self.node = node
        self.name = str((node.get("metadata") or {}).get("name") or "")
        self.labels = (node.get("metadata") or {}).get("labels") or {}
        self.allocatable = node_allocatable(node)
        self.ready = node_condition(node, "Ready")
        spec = node.get("spec") or {}
        self.unschedulable = bool(spec.get("unschedulable"))
        taints = spec.get("taints") or ()
        self.hard_taints = tuple(t for t in taints
                                 if t.get("effect") in ("NoSchedule", "NoExecute"))
        self.prefers_no_schedule = any(t.get("effect") == "PreferNoSchedule" for t in taints)
        self.clean = not self.unschedulable and self.ready == "True" and not self.hard_taints

    @property
    def pod_count(self) -> int:
        return len(self.pods)

    def add_pod(self, key: str, pod: Pod) -> None:
        self.remove_pod(key)
        self.pods[key] = pod
        labels = label_set(pod)
        self.label_sets[labels] += 1
        if not (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.live_label_sets[labels] += 1
        terms = pod_terms(pod)
        if not terms.is_empty:
            self.pods_with_affinity[key] = pod
            self.terms[key] = terms
            if terms.scores_others:
                self.pods_with_scoring_terms[key] = pod
            if terms.required_anti_affinity:
                self.pods_with_required_anti_affinity[key] = pod
                self.anti_terms.update(terms.required_anti_affinity)
        self.requested = self.requested + pod_requests(pod)
        self.non_zero_requested = self.non_zero_requested + pod_requests(pod, non_zero=True)

    def remove_pod(self, key: str) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            labels = label_set(pod)
            _decrement(self.label_sets, labels)
            if not (pod.get("metadata") or {}).get("deletionTimestamp"):
                _decrement(self.live_label_sets, labels)
        self.pods_with_affinity.pop(key, None)
        self.pods_with_scoring_terms.pop(key, None)
        if self.pods_with_required_anti_affinity.pop(key, None) is not None:
            self.anti_terms.subtract(self.terms[key].required_anti_affinity)
            self.anti_terms = +self.anti_terms  # drop the zeros
        self.terms.pop(key, None)
        if pod is not None:
            self.requested = self.requested - pod_requests(pod)
            self.non_zero_requested = (self.non_zero_requested
                                       - pod_requests(pod, non_zero=True))


def _no_default_selector(pod: Pod) -> Selector:
    return NOTHING


@dataclass(frozen=True)
class Cluster:
    """What a cycle's PreFilter and PreScore may look at beyond the pod: every node,
    the namespaces' labels (for namespaceSelector), and the selector of the Services
    and workloads a pod belongs to (for PodTopologySpread's default constraints)."""

    nodes: Sequence[NodeInfo]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    default_selector: Callable[[Pod], Selector] = _no_default_selector
    # What the cache counts as it goes (None: count over `nodes` when asked), so that a
    # plugin skips in O(1) what no node or pod could need.
    facts: ClusterFacts | None = None

    def fact(self, name: str) -> int:
        if self.facts is None:  # counted once, on first use
            object.__setattr__(self, "facts", ClusterFacts.of(self.nodes))
        return int(getattr(self.facts, name))


@dataclass
class ClusterFacts:
    limited_nodes: int = 0  # nodes that report allocatable
    prefer_no_schedule_nodes: int = 0
    pods_with_affinity: int = 0
    pods_with_required_anti_affinity: int = 0
    pods_with_scoring_terms: int = 0

    @classmethod
    def of(cls, nodes: Iterable[NodeInfo]) -> ClusterFacts:
        facts = cls()
        for info in nodes:
            facts.count(info, +1)
        return facts

    def count(self, info: NodeInfo, sign: int) -> None:
        """Add (+1) or take away (-1) what one node and its pods contribute."""
        self.limited_nodes += sign * info.allocatable.limited
        self.prefer_no_schedule_nodes += sign * info.prefers_no_schedule
        self.pods_with_affinity += sign * len(info.pods_with_affinity)
        self.pods_with_scoring_terms += sign * len(info.pods_with_scoring_terms)
        self.pods_with_required_anti_affinity += sign * len(
            info.pods_with_required_anti_affinity)


def as_cluster(nodes: Cluster | Sequence[NodeInfo]) -> Cluster:
    return nodes if isinstance(nodes, Cluster) else Cluster(nodes)


def _decrement(counter: Counter[LabelSet], key: LabelSet) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


class FilterFunc(Protocol):
    def __call__(self, pod: Pod, node_info: NodeInfo, /) -> Status: ...


class PreFilterFunc(Protocol):
    """Once per cycle (kube's PreFilter): the pod's filter with what it needs computed
    once (its requests, its terms, counts over all nodes), None when the plugin has
    nothing to check for this pod (kube's Skip), or a Status rejecting every node."""

    def __call__(self, pod: Pod, cluster: Cluster, /) -> FilterFunc | Status | None: ...


class ScoreFunc(Protocol):
    def __call__(self, pod: Pod, node_info: NodeInfo, /) -> int: ...


class BatchScoreFunc(Protocol):
    """Raw scores of every feasible node at once (by node name): for a plugin whose
    score is one cheap expression, without a call per node."""

    def __call__(self, pod: Pod, feasible: Sequence[NodeInfo], /) -> dict[str, int]: ...


class PreScoreFunc(Protocol):
    """Once per cycle (kube's PreScore): the pod's score function, None to skip."""

    def __call__(self, pod: Pod, feasible: Sequence[NodeInfo], cluster: Cluster, /
                 ) -> ScoreFunc | None: ...


class NormalizeFunc(Protocol):
    """Map raw scores (by node name) onto 0..MAX_NODE_SCORE."""

    def __call__(self, scores: Mapping[str, int], /) -> dict[str, int]: ...


@dataclass(frozen=True)
class FilterPlugin:
    """A filter: `filter` when it needs nothing but the pair, else `pre_filter`.

    `passes_clean_nodes`: the filter admits every pod on a clean node (`NodeInfo.clean`:
    schedulable, Ready, no NoSchedule/NoExecute taint), so a cycle skips it there.
    """

    name: str
    filter: FilterFunc | None = None
    pre_filter: PreFilterFunc | None = None
    passes_clean_nodes: bool = False

    def prepare(self, pod: Pod, nodes: Cluster | Sequence[NodeInfo]
                ) -> FilterFunc | Status | None:
        if self.pre_filter is not None:
            return self.pre_filter(pod, as_cluster(nodes))
        return self.filter


@dataclass(frozen=True)
class ScorePlugin:
    name: str
    score: ScoreFunc | None = None
    normalize: NormalizeFunc | None = None
    weight: int = 1
    pre_score: PreScoreFunc | None = None
    score_all: BatchScoreFunc | None = None  # the same as `score`, every node at once

    def prepare(self, pod: Pod, feasible: Sequence[NodeInfo],
                cluster: Cluster | None = None) -> ScoreFunc | None:
        if self.pre_score is not None:
            return self.pre_score(pod, feasible, cluster or Cluster(feasible))
        return self.score


def default_normalize(scores: Mapping[str, int], *, reverse: bool = False) -> dict[str, int]:
    """kube's DefaultNormalizeScore: scale so the highest is MAX_NODE_SCORE (reversed:
    the highest raw score becomes 0)."""
    high = max(scores.values(), default=0)
    if high == 0:
        return {name: MAX_NODE_SCORE if reverse else 0 for name in scores}
    normalized = {name: MAX_NODE_SCORE * value // high for name, value in scores.items()}
    if reverse:
        return {name: MAX_NODE_SCORE - value for name, value in normalized.items()}
    return normalized


@dataclass(frozen=True)
class Diagnosis:
    """Why each node was rejected (node name -> the rejecting filter's status)."""

    node_statuses: dict[str, Status] = field(default_factory=dict)
    num_all_nodes: int = 0


@dataclass(frozen=True)
class ScheduleResult:
    node_name: str | None
    evaluated_nodes: int
    feasible_nodes: int
    diagnosis: Diagnosis
    # Where the next cycle starts looking, so that a partial search visits every node.
    next_start_index: int = 0
    error: str | None = None
    # On success with several feasible nodes: each plugin's weighted score per node.
    scores: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """What a failure means to a user; empty on success."""
        if self.node_name is not None:
            return ""
        if self.error is not None:
            return self.error
        return fit_error_message(self.diagnosis)


class PreparedFilter(NamedTuple):
    name: str
    check: FilterFunc
    passes_clean_nodes: bool = False


def prepare_filters(filters: Iterable[FilterPlugin], pod: Pod,
                    nodes: Cluster | Sequence[NodeInfo]) -> list[PreparedFilter] | Status:
    """Every filter readied for this pod (skipped ones left out), or the first PreFilter
    status that rejects every node (named after its plugin)."""
    prepared: list[PreparedFilter] = []
    cluster = as_cluster(nodes)
    for plugin in filters:
        ready = plugin.prepare(pod, cluster)
        if ready is None:
            continue
        if isinstance(ready, Status):
            if ready.code is Code.SUCCESS:
                continue
            return Status(ready.code, ready.reasons, plugin.name)
        prepared.append(PreparedFilter(plugin.name, ready, plugin.passes_clean_nodes))
    return prepared


def run_prepared(prepared: Iterable[PreparedFilter], pod: Pod, node_info: NodeInfo) -> Status:
    """The first non-success status of the filters, in order (kube stops there too)."""
    for name, check, _ in prepared:
        status = check(pod, node_info)
        if status.code is not Code.SUCCESS:
            return Status(status.code, status.reasons, name)
    return SUCCESS


def run_filters(filters: Iterable[FilterPlugin], pod: Pod, node_info: NodeInfo,
                nodes: Cluster | Sequence[NodeInfo] | None = None) -> Status:
    """Every filter on one node; `nodes` is the snapshot PreFilters count over."""
    prepared = prepare_filters(filters, pod, [node_info] if nodes is None else nodes)
    if isinstance(prepared, Status):
        return prepared
    return run_prepared(prepared, pod, node_info)


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes are enough (kube's adaptive percentageOfNodesToScore)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return num_all_nodes
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def score_nodes(scorers: Sequence[ScorePlugin], pod: Pod, feasible: Sequence[NodeInfo],
                cluster: Cluster | None = None) -> dict[str, dict[str, int]]:
    """Each score plugin's weighted (normalized) score, by plugin then node name."""
    by_plugin: dict[str, dict[str, int]] = {}
    cluster = cluster or Cluster(feasible)
    for plugin in scorers:
        if plugin.score_all is not None:
            raw = plugin.score_all(pod, feasible)
        else:
            score = plugin.prepare(pod, feasible, cluster)
            if score is None:
                continue
            raw = {info.name: score(pod, info) for info in feasible}
        scores = plugin.normalize(raw) if plugin.normalize is not None else raw
        weight = plugin.weight
        by_plugin[plugin.name] = (scores if weight == 1 else
                                  {name: value * weight for name, value in scores.items()})
    return by_plugin


def total_scores(by_plugin: Mapping[str, Mapping[str, int]],
                 feasible: Sequence[NodeInfo]) -> dict[str, int]:
    if len(by_plugin) == 1:  # the common case: one plugin tells the nodes apart
        (scores,) = by_plugin.values()
        return dict(scores)
    totals = {info.name: 0 for info in feasible}
    for scores in by_plugin.values():
        for name, value in scores.items():
            totals[name] = totals.get(name, 0) + value
    return totals


def select_host(scores: Mapping[str, int], rng: random.Random) -> str:
    """The highest-scored node; a random one among equals, so equal nodes share load."""
    best = max(scores.values())
    return rng.choice(sorted(name for name, value in scores.items() if value == best))


def schedule_one(pod: Pod, nodes: Sequence[NodeInfo], *,
                 filters: Sequence[FilterPlugin], scorers: Sequence[ScorePlugin],
                 rng: random.Random, start_index: int = 0,
                 percentage_of_nodes_to_score: int = 0,
                 cluster: Cluster | None = None) -> ScheduleResult:
    """Pick a node for `pod`, or explain why there is none. `cluster` carries what
    PreFilters need beyond the nodes (namespaces' labels, default selectors)."""
    total = len(nodes)
    if total == 0:
        return ScheduleResult(None, 0, 0, Diagnosis())
    cluster = cluster or Cluster(nodes)
    prepared = prepare_filters(filters, pod, cluster)
    if isinstance(prepared, Status):
        if prepared.code is Code.ERROR:
            return ScheduleResult(None, 0, 0, Diagnosis({}, total), error=(
                f"running PreFilter plugin {prepared.plugin!r}: {'; '.join(prepared.reasons)}"))
        # kube: a PreFilter rejection is every node's status.
        return ScheduleResult(None, 0, 0, Diagnosis({info.name: prepared for info in nodes},
                                                    total), start_index)
    wanted = num_feasible_nodes_to_find(total, percentage_of_nodes_to_score)
    # What a clean node still has to pass (often nothing: then it is feasible at once).
    on_clean = [check for check in prepared if not check.passes_clean_nodes]
    feasible: list[NodeInfo] = []
    rejected: dict[str, Status] = {}
    evaluated = 0
    start_index %= total  # the node list may have shrunk since the last cycle
    for index in itertools.chain(range(start_index, total), range(start_index)):
        info = nodes[index]
        evaluated += 1
        if info.clean:
            if not on_clean:
                feasible.append(info)
                if len(feasible) >= wanted:
                    break
                continue
            status = run_prepared(on_clean, pod, info)
        else:
            status = run_prepared(prepared, pod, info)
        if status.code is Code.SUCCESS:
            feasible.append(info)
            if len(feasible) >= wanted:
                break
        elif status.code is Code.ERROR:
            reason = "; ".join(status.reasons)
            return ScheduleResult(None, evaluated, len(feasible),
                                  Diagnosis(rejected, total),
                                  error=f"running {status.plugin!r} filter plugin: {reason}")
        else:
            rejected[info.name] = status
    diagnosis = Diagnosis(rejected, total)
    next_start = (start_index + evaluated) % total
    if not feasible:
        return ScheduleResult(None, evaluated, 0, diagnosis, next_start)
    if len(feasible) == 1:
        return ScheduleResult(feasible[0].name, evaluated, 1, diagnosis, next_start)
    by_plugin = score_nodes(scorers, pod, feasible, cluster)
    chosen = select_host(total_scores(by_plugin, feasible), rng)
    return ScheduleResult(chosen, evaluated, len(feasible), diagnosis, next_start,
                          scores=by_plugin)


def reason_histogram(statuses: Iterable[Status]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for status in statuses:
        counts.update(status.reasons)
    return counts


def fit_error_message(diagnosis: Diagnosis) -> str:
    """`0/2 nodes are available: 1 node(s) didn't match ..., 1 node(s) were unschedulable.`

    Reasons are "<count> <reason>" strings sorted as strings, as kube-scheduler's
    FitError sorts them (so "10 node(s)" sorts before "2 node(s)", as in kube).
    """
    if diagnosis.num_all_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{diagnosis.num_all_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}"
                   for reason, count in reason_histogram(diagnosis.node_statuses.values()).items())
    if parts:
        message += " " + ", ".join(parts) + "."
    return message


def per_node_reason(reason: str) -> str:
    """A counted reason reworded for one node: "node(s) were unschedulable" -> "was ..."."""
    text = reason.removeprefix("node(s) ")
    if text.startswith("were "):
        text = "was " + text.removeprefix("were ")
    return text


def per_node_reasons(diagnosis: Diagnosis, *, limit: int = 100) -> dict[str, str]:
    """Which node failed why (at most `limit` nodes, by name), for the annotation."""
    names = sorted(diagnosis.node_statuses)
    explained = {name: "; ".join(per_node_reason(r) for r in
                                 diagnosis.node_statuses[name].reasons)
                 for name in names[:limit]}
    if len(names) > limit:
        explained["..."] = f"{len(names) - limit} more node(s) not shown"
    return explained


def score_summary(by_plugin: Mapping[str, Mapping[str, int]], chosen: str, *,
                  limit: int = 3) -> str:
    """Beyond kube: how the best nodes scored, for the `Scheduled` event.

    "Scores of 3 feasible nodes: large 253 (NodeAffinity 200, NodeResourcesFit 53),
    small 195 (...), ..." — the chosen node first, then by total; each plugin's weighted
    share, leaving out the zeros. Empty when nothing was scored (one feasible node).
    """
    totals = total_scores(by_plugin, ())
    if not totals:
        return ""
    # The chosen node, then the best others by total and name (only `limit` are shown:
    # no need to sort them all).
    others = heapq.nsmallest(limit, ((-value, name) for name, value in totals.items()
                                     if name != chosen))
    shown = ([chosen] if chosen in totals else []) + [name for _, name in others]
    parts = []
    for name in shown[:limit]:
        shares = ", ".join(f"{plugin} {scores[name]}" for plugin, scores in by_plugin.items()
                           if scores.get(name))
        parts.append(f"{name} {totals[name]}" + (f" ({shares})" if shares else ""))
    more = f", and {len(totals) - limit} more" if len(totals) > limit else ""
    return f"Scores of {len(totals)} feasible nodes: {', '.join(parts)}{more}"


def tolerates(tolerations: Iterable[Mapping[str, Any]] | None, *, key: str, effect: str,
              value: str = "") -> bool:
    """Whether any toleration tolerates the taint key=value:effect (core/v1 semantics)."""
    for toleration in tolerations or ():
        t_effect = toleration.get("effect") or ""
        if t_effect and t_effect != effect:
            continue
        t_key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists":
            if not t_key or t_key == key:
                return True
        elif operator == "Equal" and t_key == key and (toleration.get("value") or "") == value:
            return True
    return False


def node_condition(node: Node, condition_type: str) -> str | None:
    """The status ("True"/"False"/"Unknown") of a node condition, None when absent."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == condition_type:
            return str(condition.get("status"))
    return None
