"""Preemption, kube-scheduler's DefaultPreemption PostFilter (`pkg/scheduler/framework/
plugins/defaultpreemption`, `pkg/scheduler/framework/preemption`), as pure functions.

For a pod no node fits: is it eligible to preempt (not `preemptionPolicy: Never`, no
lower-priority pod already terminating on its nominated node)? On every node that failed
for a reason preemption can fix (Unschedulable, not UnschedulableAndUnresolvable),
remove every lower-priority pod and re-run the filters; when the pod then fits, give the
pods back one by one, most important first, keeping each one it still fits with: the
rest are that node's victims. Of the candidate nodes, pick kube's way (lowest
highest-victim priority, lowest sum of priorities, fewest victims, latest start of the
highest-priority victims, then the first). PodDisruptionBudgets are not served, so none
is violated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.framework import (
    Cluster,
    Code,
    Diagnosis,
    FilterPlugin,
    NodeInfo,
    Pod,
    Status,
    fit_error_message,
    run_filters,
)
from scheduler.pods import pod_key
from scheduler.queue import pod_priority

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING_ON_NOMINATED = "not eligible due to a terminating pod on the nominated node."
# kube adds MaxInt32+1 to each priority before summing, so that negatives count right.
PRIORITY_OFFSET = 2**31


@dataclass(frozen=True)
class Candidate:
    node: str
    victims: tuple[Pod, ...]  # most important first


@dataclass(frozen=True)
class Outcome:
    """A node to preempt on, or None; `message` is the PostFilter's (empty on success);
    `clear_nomination`: no node would do, so a nominatedNodeName is cleared (an ineligible
    pod keeps its nomination, kube's ModeNoop)."""

    candidate: Candidate | None
    message: str = ""
    clear_nomination: bool = False


def start_time(pod: Pod) -> str:
    """status.startTime, else creationTimestamp (RFC 3339 strings sort as times)."""
    return str((pod.get("status") or {}).get("startTime")
               or (pod.get("metadata") or {}).get("creationTimestamp") or "")


def importance(pod: Pod) -> tuple[int, str]:
    """Sort key, most important first (kube's MoreImportantPod: higher priority, then
    the one that started earlier)."""
    return -pod_priority(pod), start_time(pod)


def is_terminating(pod: Pod) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def not_eligible(pod: Pod, nodes: Mapping[str, NodeInfo]) -> str | None:
    """PodEligibleToPreemptOthers: None when the pod may preempt, else why not."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return POLICY_NEVER
    nominated = (pod.get("status") or {}).get("nominatedNodeName")
    info = nodes.get(str(nominated)) if nominated else None
    if info is not None:
        priority = pod_priority(pod)
        if any(is_terminating(p) and pod_priority(p) < priority for p in info.pods.values()):
            return TERMINATING_ON_NOMINATED
    return None


def node_with_pods(info: NodeInfo, pods: Mapping[str, Pod]) -> NodeInfo:
    """A copy of the node holding only `pods` (the snapshot itself is never changed)."""
    copy = NodeInfo(info.node)
    for key, pod in pods.items():
        copy.add_pod(key, pod)
    return copy


def select_victims(pod: Pod, info: NodeInfo, fits: Callable[[NodeInfo], bool]
                   ) -> tuple[Pod, ...] | None:
    """SelectVictimsOnNode: the fewest lower-priority pods, least important first to go,
    whose removal lets `pod` fit; None when removing all of them does not help."""
    priority = pod_priority(pod)
    lower = {key: p for key, p in info.pods.items() if pod_priority(p) < priority}
    if not lower:
        return None
    trial = node_with_pods(info, {k: p for k, p in info.pods.items() if k not in lower})
    if not fits(trial):
        return None
    victims = []
    for key, victim in sorted(lower.items(), key=lambda item: importance(item[1])):
        trial.add_pod(key, victim)
        if not fits(trial):
            trial.remove_pod(key)
            victims.append(victim)
    return tuple(victims) or None


def _latest_start_of_most_important(candidate: Candidate) -> str:
    top = pod_priority(candidate.victims[0])
    return min(start_time(v) for v in candidate.victims if pod_priority(v) == top)


def pick_candidate(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption, each criterion narrowing the previous one's winners."""
    remaining = list(candidates)
    criteria: list[Callable[[Candidate], object]] = [
        lambda c: max(pod_priority(v) for v in c.victims),
        lambda c: sum(pod_priority(v) + PRIORITY_OFFSET for v in c.victims),
        lambda c: len(c.victims),
    ]
    for key in criteria:
        best = min(key(c) for c in remaining)  # type: ignore[type-var]
        remaining = [c for c in remaining if key(c) == best]
        if len(remaining) == 1:
            return remaining[0]
    latest = max(_latest_start_of_most_important(c) for c in remaining)
    return next(c for c in remaining if _latest_start_of_most_important(c) == latest)


def cluster_with(cluster: Cluster, info: NodeInfo) -> Cluster:
    """The cluster with one node replaced (its PreFilters count over the trial state)."""
    nodes = [info if n.name == info.name else n for n in cluster.nodes]
    return Cluster(nodes, cluster.namespace_labels, cluster.default_selector)


def preempt(pod: Pod, cluster: Cluster, filters: Sequence[FilterPlugin],
            diagnosis: Diagnosis) -> Outcome:
    """The PostFilter for `pod`, which fit no node for the reasons in `diagnosis`."""
    by_name = {info.name: info for info in cluster.nodes}
    why_not = not_eligible(pod, by_name)
    if why_not is not None:
        return Outcome(None, f"preemption: {why_not}")

    def fits(trial: NodeInfo) -> bool:
        return run_filters(filters, pod, trial, cluster_with(cluster, trial)).is_success

    candidates: list[Candidate] = []
    statuses: dict[str, Status] = {}
    for info in cluster.nodes:
        status = diagnosis.node_statuses.get(info.name)
        if status is None or status.code is not Code.UNSCHEDULABLE:
            statuses[info.name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NOT_HELPFUL,))
            continue
        victims = select_victims(pod, info, fits)
        if victims is None:
            statuses[info.name] = Status(Code.UNSCHEDULABLE, (NO_VICTIMS,))
        else:
            candidates.append(Candidate(info.name, victims))
    if not candidates:
        return Outcome(None, "preemption: " + fit_error_message(
            Diagnosis(statuses, len(cluster.nodes))), clear_nomination=True)
    return Outcome(pick_candidate(candidates))


def lower_priority_nominated(nominated: Mapping[str, tuple[str, Pod]], pod: Pod, node: str
                             ) -> list[tuple[str, Pod]]:
    """The pods nominated to `node` that are less important than `pod`, which is about
    to take the room there (kube's getLowerPriorityNominatedPods): their nominations are
    cleared, so that they look for room elsewhere."""
    me, priority = pod_key(pod), pod_priority(pod)
    return [(key, other) for key, (on, other) in nominated.items()
            if on == node and key != me and pod_priority(other) < priority]


def with_nominated(nodes: Sequence[NodeInfo], nominated: Mapping[str, tuple[str, Pod]],
                   pod: Pod) -> list[NodeInfo]:
    """The nodes as `pod` must see them: with the pods nominated to them (by preemption)
    that are at least as important, so that it does not take the room they made (kube's
    RunFilterPluginsWithNominatedPods). `nominated`: pod key -> (node, pod)."""
    me, priority = pod_key(pod), pod_priority(pod)
    extra: dict[str, dict[str, Pod]] = {}
    for key, (node, other) in nominated.items():
        if key != me and pod_priority(other) >= priority:
            extra.setdefault(node, {})[key] = other
    if not extra:
        return list(nodes)
    return [node_with_pods(info, {**info.pods, **extra[info.name]}) if info.name in extra
            else info for info in nodes]


def nomination(pod: Pod, outcome: Outcome | None) -> str | None:
    """The status.nominatedNodeName the pod should carry after this attempt."""
    current = (pod.get("status") or {}).get("nominatedNodeName") or None
    if outcome is None:
        return current
    if outcome.candidate is not None:
        return outcome.candidate.node
    return None if outcome.clear_nomination else current


def preempted_message(preemptor_uid: str, node: str) -> str:
    """The `Preempted` event on each victim, in kube's words."""
    return f"Preempted by pod {preemptor_uid} on node {node}"
