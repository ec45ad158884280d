"""The apiserver's front door: authenticate, then authorize, every HTTP request (resource
requests and FastAPI's routes alike) before the app sees it, as kube's WithAuthentication
and WithAuthorization filters do."""

from __future__ import annotations

from typing import Any

from apiserver.auth import USER_SCOPE_KEY, Authorizer, Decision, UserInfo
from apiserver.auth.authn import Authenticator
from apiserver.auth.forbidden import forbidden
from apiserver.auth.impersonation import impersonate
from apiserver.auth.requestinfo import query_of, request_attributes
from apiserver.storage import encode
from common import errors

ASGIApp = Any


def request_headers(scope: Any) -> dict[str, list[str]]:
    """Lower-cased header names -> every value sent (Impersonate-Group may repeat)."""
    headers: dict[str, list[str]] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return headers


async def send_status(send: Any, err: errors.ApiError) -> None:
    body = encode(err.status())
    await send({"type": "http.response.start", "status": err.code,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Secured:
    """The app behind authentication and authorization (the secure port)."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator,
                 authorizer: Authorizer) -> None:
        self.app = app
        self.authenticator = authenticator
        self.authorizer = authorizer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):  # the lifespan
            await self.app(scope, receive, send)
            return
        try:
            user = await self.authenticator.authenticate_request(scope)
        except errors.Unauthorized as e:
            await self.refuse(scope, send, e)
            return
        try:  # kube's WithImpersonation: after authentication, before authorization
            user = await impersonate(user, request_headers(scope), self.authorizer)
        except errors.ApiError as e:
            await self.refuse(scope, send, e)
            return
        scope[USER_SCOPE_KEY] = user
        attributes = request_attributes(user, scope.get("method", "GET"), scope["path"],
                                        query_of(scope.get("query_string", b"")))
        decision, reason = await self.authorizer.authorize(attributes)
        if decision is not Decision.ALLOW:
            await self.refuse(scope, send, forbidden(attributes, reason))
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def refuse(scope: Any, send: Any, err: errors.ApiError) -> None:
        if scope["type"] == "websocket":
            # closed before it is accepted: the server answers the handshake with a 403
            await send({"type": "websocket.close", "code": 1008})
        else:
            await send_status(send, err)


class Unsecured:
    """The app as kube's old insecure port served it: every request by one superuser,
    neither authenticated nor authorized."""

    def __init__(self, app: ASGIApp, user: UserInfo) -> None:
        self.app = app
        self.user = user

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope[USER_SCOPE_KEY] = self.user
        await self.app(scope, receive, send)
