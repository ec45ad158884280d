"""The apiserver's front door: authenticate, then authorize, every HTTP request (resource
requests and FastAPI's routes alike) before the app sees it, as kube's WithAuthentication
and WithAuthorization filters do."""

from __future__ import annotations

from typing import Any

from apiserver.auth import USER_SCOPE_KEY, Attributes, Authorizer, Decision, UserInfo
from apiserver.auth.authn import Authenticator
from apiserver.auth.requestinfo import query_of, request_attributes
from apiserver.storage import encode
from common import errors

ASGIApp = Any


def qualified_resource(attributes: Attributes) -> str:
    """`pods`, `leases.coordination.k8s.io`: schema.GroupResource's String()."""
    if attributes.api_group:
        return f"{attributes.resource}.{attributes.api_group}"
    return attributes.resource


def forbidden_message(attributes: Attributes) -> str:
    """responsewriters' forbiddenMessage."""
    user = attributes.user.name
    if not attributes.resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    where = (f'in the namespace "{attributes.namespace}"' if attributes.namespace
             else "at the cluster scope")
    return (f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}')


def forbidden(attributes: Attributes, reason: str) -> errors.Forbidden:
    """responsewriters.ForbiddenStatusError: apierrors.NewForbidden of the request's
    group/resource and name."""
    message = forbidden_message(attributes)
    if reason:
        message = f"{message}: {reason}"
    resource = qualified_resource(attributes) if attributes.resource_request else ""
    if not resource:
        full = f"forbidden: {message}"
    elif attributes.name:
        full = f'{resource} "{attributes.name}" is forbidden: {message}'
    else:
        full = f"{resource} is forbidden: {message}"
    details = {"name": attributes.name, "group": attributes.api_group,
               "kind": attributes.resource if attributes.resource_request else ""}
    return errors.Forbidden(full, details={k: v for k, v in details.items() if v})


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
            user = self.authenticator.authenticate(scope)
        except errors.Unauthorized as e:
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
