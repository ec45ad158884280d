"""Who may call the kubelet's own port, as kube's kubelet decides it
(pkg/kubelet/server/auth.go; "Kubelet authentication/authorization" in kube's docs).

Authentication, in kube's order: an x509 client certificate verified against
`--client-ca-file` (CN the user, each O a group), then a bearer token checked with a
TokenReview against the apiserver (`--authentication-token-webhook`). A credential that is
presented but does not authenticate is a 401; none at all is `system:anonymous` when
`--anonymous-auth` allows it (kube's default), else a 401.

Authorization (`--authorization-mode=Webhook`): a SubjectAccessReview to the apiserver for
`nodes/SUBRESOURCE` named after this node, the verb from the HTTP method. The subresource
comes from the path: /stats → stats, /metrics → metrics, /logs → log, /spec → spec,
/checkpoint → checkpoint, everything else (/containerLogs, /exec, /run, ...) → proxy;
/healthz, /pods and /configz are asked as their own subresource first and then as proxy
(kube's KubeletFineGrainedAuthz). Answers are cached as kube caches them: allowed for
5 minutes, denied for 30 s; token reviews for 2 minutes. `AlwaysAllow` asks no one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cryptography import x509
from starlette.types import ASGIApp, Receive, Scope, Send

from common.authn import (
    ANONYMOUS,
    AuthenticationFailed,
    UserInfo,
    bearer_token,
    client_certificate,
    verify_client_certificate,
    with_authenticated,
)

log = logging.getLogger("kubelet.auth")

RESOURCE = "nodes"
# kube's kubelet GetRequestAttributes: other methods (HEAD, OPTIONS) get no verb
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
         "DELETE": "delete"}
SUBPATHS = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"),
            ("/spec", "spec"), ("/checkpoint", "checkpoint"))
FINE_GRAINED = (("/healthz", "healthz"), ("/pods", "pods"), ("/configz", "configz"))
ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
TOKEN_TTL = 120.0
MODES = ("AlwaysAllow", "Webhook")

# a bearer token -> its user, None when the apiserver says it is not a valid one
TokenReviewer = Callable[[str], Awaitable[UserInfo | None]]
# (user, verb, subresource) -> (allowed, the reason the apiserver gave)
AccessReviewer = Callable[[UserInfo, str, str], Awaitable[tuple[bool, str]]]


def is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def request_verb(method: str) -> str:
    return VERBS.get(method.upper(), "")


def subresources(path: str) -> tuple[str, ...]:
    """The `nodes/` subresources a request for `path` is authorized as, in order: the
    first one allowed lets it through."""
    for prefix, subresource in SUBPATHS:
        if is_subpath(path, prefix):
            return (subresource,)
    for prefix, subresource in FINE_GRAINED:
        if is_subpath(path, prefix):
            return (subresource, "proxy")
    return ("proxy",)


def forbidden_message(user: UserInfo, verb: str, subs: Sequence[str]) -> str:
    return (f"Forbidden (user={user.name}, verb={verb}, resource={RESOURCE}, "
            f"subresource(s)=[{' '.join(subs)}])")


def access_review(user: UserInfo, *, verb: str, subresource: str, node_name: str,
                  ) -> dict[str, Any]:
    """The SubjectAccessReview kube's kubelet sends for one request."""
    spec: dict[str, Any] = {
        "user": user.name, "groups": list(user.groups),
        "resourceAttributes": {"verb": verb, "group": "", "version": "v1",
                               "resource": RESOURCE, "subresource": subresource,
                               "name": node_name}}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


def user_of_review(status: Mapping[str, Any]) -> UserInfo | None:
    """The user a TokenReview's status names; None when it did not authenticate."""
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    extra = {k: tuple(v) for k, v in (user.get("extra") or {}).items()}
    return UserInfo(str(user.get("username") or ""), str(user.get("uid") or ""),
                    tuple(user.get("groups") or ()), extra)


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class TTLCache(Generic[K, V]):
    """Answers kept until their own expiry; the oldest dropped beyond `size`."""

    size: int = 4096
    clock: Callable[[], float] = time.monotonic
    entries: dict[K, tuple[float, V]] = field(default_factory=dict)

    def get(self, key: K) -> V | None:
        found = self.entries.get(key)
        if found is None:
            return None
        if found[0] <= self.clock():
            del self.entries[key]
            return None
        return found[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if len(self.entries) >= self.size:
            self.entries.pop(next(iter(self.entries)))
        self.entries[key] = (self.clock() + ttl, value)


def user_key(user: UserInfo) -> tuple[Any, ...]:
    return (user.name, user.uid, user.groups,
            tuple(sorted((k, tuple(v)) for k, v in user.extra.items())))


class Unauthenticated(Exception):
    """No user: the kubelet answers 401."""


@dataclass
class KubeletAuth:
    """The kubelet's authenticator and authorizer, from its flags."""

    node_name: str
    client_cas: tuple[x509.Certificate, ...] = ()
    anonymous: bool = True
    review_token: TokenReviewer | None = None
    review_access: AccessReviewer | None = None  # None: AlwaysAllow
    tokens: TTLCache[str, UserInfo | None] = field(default_factory=TTLCache)
    decisions: TTLCache[tuple[Any, ...], tuple[bool, str]] = field(default_factory=TTLCache)

    @property
    def open(self) -> bool:
        """Whether every request gets through (kube's defaults, no flag given)."""
        return (self.anonymous and self.review_access is None and not self.client_cas
                and self.review_token is None)

    async def authenticate(self, scope: Scope) -> UserInfo:
        pem = client_certificate(scope)
        if pem is not None and self.client_cas:
            try:
                user = verify_client_certificate(pem, self.client_cas)
            except AuthenticationFailed as e:
                log.info("unable to authenticate the request: %s", e)
                raise Unauthenticated() from None
            if user is not None:
                return user
        token = bearer_token(scope.get("headers") or ())
        if token is not None and self.review_token is not None:
            return await self.authenticate_token(token)
        if token is not None or not self.anonymous:
            raise Unauthenticated()
        return ANONYMOUS

    async def authenticate_token(self, token: str) -> UserInfo:
        cached = self.tokens.get(token)
        if cached is None and token not in self.tokens.entries:
            assert self.review_token is not None
            cached = await self.review_token(token)
            self.tokens.put(token, cached, TOKEN_TTL)
        if cached is None:
            log.info("unable to authenticate the request: the token is not valid")
            raise Unauthenticated()
        return with_authenticated(cached)

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, the 403's message when not)."""
        subs = subresources(path)
        if self.review_access is None:
            return True, ""
        for subresource in subs:
            key = (user_key(user), verb, subresource)
            decision = self.decisions.get(key)
            if decision is None:
                decision = await self.review_access(user, verb, subresource)
                self.decisions.put(key, decision, ALLOWED_TTL if decision[0] else DENIED_TTL)
            if decision[0]:
                return True, ""
        return False, forbidden_message(user, verb, subs)


async def _plain(send: Send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"x-content-type-options", b"nosniff")]})
    await send({"type": "http.response.body", "body": text.encode()})


def with_auth(app: ASGIApp, auth: KubeletAuth) -> ASGIApp:
    """`app` behind the kubelet's authentication and authorization filter."""
    if auth.open:
        return app

    async def filtered(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        try:
            user = await auth.authenticate(scope)
        except Unauthenticated:
            await _plain(send, 401, "Unauthorized")
            return
        except Exception as e:  # the apiserver did not answer the TokenReview
            log.warning("token review failed: %s", e)
            await _plain(send, 401, "Unauthorized")
            return
        verb = request_verb(scope["method"])
        try:
            allowed, message = await auth.authorize(user, verb, scope["path"])
        except Exception as e:  # the apiserver did not answer the SubjectAccessReview
            log.warning("subject access review failed: %s", e)
            await _plain(send, 500, f"Authorization error (user={user.name}, verb={verb}, "
                                    f"resource={RESOURCE}, subresource(s)="
                                    f"[{' '.join(subresources(scope['path']))}])")
            return
        if not allowed:
            log.info("%s %s: %s", scope["method"], scope["path"], message)
            await _plain(send, 403, message)
            return
        await app(scope, receive, send)

    return filtered


def webhook_reviewers(api: Any, node_name: str) -> tuple[TokenReviewer, AccessReviewer]:
    """TokenReview and SubjectAccessReview through the kubelet's ApiClient (its own
    identity, system:node:NAME: the Node authorizer lets it create both)."""

    async def review_token(token: str) -> UserInfo | None:
        answer = await api.create("tokenreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
        return user_of_review(answer.get("status") or {})

    async def review_access(user: UserInfo, verb: str, subresource: str) -> tuple[bool, str]:
        answer = await api.create("subjectaccessreviews", access_review(
            user, verb=verb, subresource=subresource, node_name=node_name))
        status = answer.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")

    return review_token, review_access


REVIEW_GROUP_VERSIONS = {"tokenreviews": "authentication.k8s.io/v1",
                         "subjectaccessreviews": "authorization.k8s.io/v1"}
