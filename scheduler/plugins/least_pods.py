"""LeastPods: prefer the node with the fewest pods (bound, plus assumed by us).

Raw score is the pod count; normalization maps the emptiest feasible node to 100 and
the fullest to 0, so the plugin composes with others on kube's 0..100 scale. Equal
nodes get equal scores and the framework picks among them at random.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.framework import MAX_NODE_SCORE, NodeInfo, Pod, ScorePlugin

NAME = "LeastPods"


def pod_count(pod: Pod, node_info: NodeInfo) -> int:
    return node_info.pod_count


def pod_counts(pod: Pod, feasible: Sequence[NodeInfo]) -> dict[str, int]:
    return {info.name: len(info.pods) for info in feasible}


def fewest_is_best(counts: Mapping[str, int]) -> dict[str, int]:
    if not counts:
        return {}
    low, high = min(counts.values()), max(counts.values())
    if low == high:
        return {name: MAX_NODE_SCORE for name in counts}
    return {name: MAX_NODE_SCORE * (high - count) // (high - low)
            for name, count in counts.items()}


PLUGIN = ScorePlugin(NAME, pod_count, normalize=fewest_is_best, score_all=pod_counts)
