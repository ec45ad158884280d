"""`--authorization-mode`: the authorizers a request is put to, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.auth import AlwaysAllow, Attributes, Authorizer, Decision, UserInfo
from apiserver.auth.node import NodeAuthorizer, cached_graph, cached_pod_node, node_identity
from apiserver.auth.rbac import RBACAuthorizer, Rule, cached_policy

MODES = ("AlwaysAllow", "Node", "RBAC")

ALL_RULES: list[Rule] = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                         {"verbs": ["*"], "nonResourceURLs": ["*"]}]


class Chain:
    """kube's union authorizer: the first authorizer with an opinion decides."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = list(authorizers)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        reasons = []
        for authorizer in self.authorizers:
            decision, reason = await authorizer.authorize(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        return Decision.NO_OPINION, "; ".join(reasons)

    async def rules_for(self, user: UserInfo, namespace: str,
                        ) -> tuple[list[Rule], bool, list[str]]:
        """The union's RulesFor (SelfSubjectRulesReview): every rule each authorizer can
        list, whether the list is incomplete, and the evaluation errors."""
        rules: list[Rule] = []
        incomplete = False
        errors: list[str] = []
        for authorizer in self.authorizers:
            if isinstance(authorizer, AlwaysAllow):
                rules += ALL_RULES
            elif isinstance(authorizer, RBACAuthorizer):
                found, resolution_errors = await authorizer.rules_for(user, namespace)
                rules += found
                errors += resolution_errors
            elif isinstance(authorizer, NodeAuthorizer):
                if node_identity(user)[1]:
                    incomplete = True  # nodes' permissions are not enumerated
                    errors.append("node authorizer does not support user rule resolution")
            else:
                incomplete = True
        return rules, incomplete, errors


def build_authorizer(modes: Sequence[str], registry: Any) -> Chain:
    """The authorizer of `modes` (each one of MODES), over the registry's resources."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown authorization mode(s) {', '.join(unknown)}: "
                         f"use {', '.join(MODES)}")
    by_mode: dict[str, Any] = {"AlwaysAllow": AlwaysAllow,
                               "Node": lambda: NodeAuthorizer(cached_pod_node(registry),
                                                               cached_graph(registry)),
                               "RBAC": lambda: RBACAuthorizer(cached_policy(registry))}
    return Chain([by_mode[m]() for m in modes])
