"""The kubelet's ServiceAccount token manager (after pkg/kubelet/token/token_manager.go):
the bound tokens of projected `serviceAccountToken` volumes, requested from the apiserver
(TokenRequest, bound to the pod) and cached until they need a refresh.

A token is refreshed once 80% of its lifetime has passed or it is 24 hours old, each less
a jitter of up to 10 s (kube's requiresRefresh), so at every pod sync (`--resync-seconds`)
the volume's atomic writer gets either the same token or a fresh one well before the old
one expires. Tokens of a pod are dropped when the pod is gone.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

MAX_TTL_SECONDS = 24 * 3600
MAX_JITTER_SECONDS = 10.0
REFRESH_AT = 0.8  # of the token's lifetime


@dataclass(frozen=True)
class TokenKey:
    namespace: str
    service_account: str
    audiences: tuple[str, ...]
    expiration_seconds: int
    pod_name: str
    pod_uid: str


@dataclass(frozen=True)
class Token:
    token: str
    expires_at: float  # epoch seconds (status.expirationTimestamp)
    lifetime: int  # the seconds the apiserver granted (spec.expirationSeconds)


def requires_refresh(token: Token, now: float, jitter: float) -> bool:
    issued_at = token.expires_at - token.lifetime
    if now > issued_at + MAX_TTL_SECONDS - jitter:
        return True
    return now > issued_at + REFRESH_AT * token.lifetime - jitter


def token_request(key: TokenKey) -> dict[str, Any]:
    """The TokenRequest the kubelet sends: bound to the pod, for the source's audience."""
    spec: dict[str, Any] = {"expirationSeconds": key.expiration_seconds,
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                               "name": key.pod_name, "uid": key.pod_uid}}
    if key.audiences:
        spec["audiences"] = list(key.audiences)
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def token_of(answer: Mapping[str, Any]) -> Token:
    """The Token of an answered TokenRequest; ValueError when it has none."""
    status = answer.get("status") or {}
    token = status.get("token")
    expires = status.get("expirationTimestamp")
    if not isinstance(token, str) or not token or not isinstance(expires, str):
        raise ValueError("the TokenRequest's answer has no token")
    lifetime = int((answer.get("spec") or {}).get("expirationSeconds") or 0)
    return Token(token, datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp(),
                 lifetime)


# (namespace, service account, TokenRequest) -> the answered TokenRequest
RequestToken = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


class TokenManager:
    def __init__(self, request_token: RequestToken, *,
                 clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = lambda: random.uniform(0, MAX_JITTER_SECONDS),
                 ) -> None:
        self.request_token = request_token
        self.clock = clock
        self.jitter = jitter
        self.cache: dict[TokenKey, Token] = {}

    async def get(self, key: TokenKey) -> str:
        cached = self.cache.get(key)
        if cached is not None and not requires_refresh(cached, self.clock(), self.jitter()):
            return cached.token
        answer = await self.request_token(key.namespace, key.service_account, token_request(key))
        token = token_of(answer)
        self.cache[key] = token
        log.info("%s/%s: %s token for serviceaccount %s (expires in %d s)", key.namespace,
                 key.pod_name, "refreshed the" if cached else "got a", key.service_account,
                 token.expires_at - self.clock())
        return token.token

    def forget_pod(self, uid: str) -> None:
        """Drop the tokens bound to a pod that is gone (kube's DeleteServiceAccountToken)."""
        for key in [k for k in self.cache if k.pod_uid == uid]:
            del self.cache[key]
