"""`--authorization-mode`: the authorizers a request is put to, in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.auth import AlwaysAllow, Attributes, Authorizer, Decision

MODES = ("AlwaysAllow",)


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


def build_authorizer(modes: Sequence[str], registry: Any) -> Authorizer:
    """The authorizer of `modes` (each one of MODES), over the registry's resources."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown authorization mode(s) {', '.join(unknown)}: "
                         f"use {', '.join(MODES)}")
    by_mode: dict[str, Authorizer] = {"AlwaysAllow": AlwaysAllow()}
    return Chain([by_mode[m] for m in modes])
