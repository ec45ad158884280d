"""Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): kube's WithImpersonation filter
(k8s.io/apiserver/pkg/endpoints/filters/impersonation.go), as a function.

It runs after authentication and before authorization: each thing asked for (the user or
service account, each group, each extra value, the uid) must be allowed to the
authenticated user with the verb `impersonate`; the request then goes on as the
impersonated user. The secure port's front door (apiserver/auth/filters.py) calls it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from apiserver.auth import Attributes, Authorizer, Decision, UserInfo
from apiserver.auth.forbidden import forbidden
from common import errors

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ANONYMOUS = "system:anonymous"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"


@dataclass(frozen=True, slots=True)
class Request:
    """One impersonation request: what is asked for, as the authorizer is asked about it."""

    resource: str  # users serviceaccounts groups userextras uids
    name: str
    namespace: str = ""
    group: str = ""
    subresource: str = ""  # the extra's key


def split_service_account(username: str) -> tuple[str, str] | None:
    """serviceaccount.SplitUsername: (namespace, name) of system:serviceaccount:NS:NAME."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = username[len(SERVICE_ACCOUNT_PREFIX):].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def impersonation_requests(headers: Mapping[str, Sequence[str]]) -> list[Request]:
    """buildImpersonationRequests; `headers`: lower-cased names -> every value sent."""
    found: list[Request] = []
    user = next(iter(headers.get(USER_HEADER, ())), "")
    if user:
        account = split_service_account(user)
        found.append(Request("serviceaccounts", account[1], account[0]) if account
                     else Request("users", user))
    groups = [Request("groups", g) for g in headers.get(GROUP_HEADER, ())]
    extras = [Request("userextras", value, group=AUTHENTICATION_GROUP,
                      subresource=unquote(name[len(EXTRA_PREFIX):].lower()))
              for name, values in headers.items() if name.startswith(EXTRA_PREFIX)
              for value in values]
    uid = next(iter(headers.get(UID_HEADER, ())), "")
    others = [*groups, *extras, *([Request("uids", uid, group=AUTHENTICATION_GROUP)]
                                  if uid else [])]
    if others and not user:
        raise errors.InternalError(f"requested {[r.name for r in others]} without "
                                   f"impersonating a user")
    return [*found, *others]


def impersonated_groups(username: str, groups: list[str]) -> list[str]:
    """system:authenticated (or, for anonymous, system:unauthenticated) is added unless
    one of them was asked for."""
    if username != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            return [*groups, AUTHENTICATED]
        return groups
    return groups if UNAUTHENTICATED in groups else [*groups, UNAUTHENTICATED]


async def impersonate(requestor: UserInfo, headers: Mapping[str, Sequence[str]],
                      authorizer: Authorizer) -> UserInfo:
    """The user a request acts as: `requestor` itself without Impersonate-* headers."""
    requests = impersonation_requests(headers)
    if not requests:
        return requestor
    groups_specified = bool(headers.get(GROUP_HEADER))
    username, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for request in requests:
        attributes = Attributes(user=requestor, verb="impersonate", resource_request=True,
                                api_group=request.group, resource=request.resource,
                                subresource=request.subresource,
                                namespace=request.namespace, name=request.name)
        if request.resource == "serviceaccounts":
            username = f"{SERVICE_ACCOUNT_PREFIX}{request.namespace}:{request.name}"
            if not groups_specified:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{request.namespace}"]
        elif request.resource == "users":
            username = request.name
        elif request.resource == "groups":
            groups.append(request.name)
        elif request.resource == "userextras":
            extra.setdefault(request.subresource, []).append(request.name)
        else:
            uid = request.name
        decision, reason = await authorizer.authorize(attributes)
        if decision is not Decision.ALLOW:
            raise forbidden(attributes, reason)
    return UserInfo(username, uid=uid, groups=tuple(impersonated_groups(username, groups)),
                    extra={k: tuple(v) for k, v in extra.items()})
