"""Who is asking, and may they: the types authentication and authorization share.

As in kube-apiserver, a request is first authenticated (`UserInfo`: x509 client
certificate, bearer token, or anonymous), then described as `Attributes` (verb, resource,
namespace, name, or a non-resource path) and put to the authorizers in order: the first
that allows or denies decides; if none has an opinion, the request is forbidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

# the user and anonymous are common to the apiserver's and the kubelet's authentication
from common.authn import ANONYMOUS as ANONYMOUS
from common.authn import UserInfo as UserInfo


@dataclass(frozen=True)
class Attributes:
    """kube's authorizer.Attributes: what a request asks to do."""

    user: UserInfo
    verb: str  # get list watch create update patch delete deletecollection (or an HTTP verb)
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # for a non-resource request
    # a list's, watch's or deletecollection's field selector as (field, operator, value)
    # requirements, operator "=" (also for "==") or "!=" (kube's GetFieldSelector; empty
    # when it has none or it does not parse)
    field_selector: tuple[tuple[str, str, str], ...] = ()


class Decision(Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no opinion"


class Authorizer(Protocol):
    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        """The decision and its reason (shown in a 403's message and in reviews)."""
        ...


class AlwaysAllow:
    """kube's --authorization-mode=AlwaysAllow."""

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return Decision.ALLOW, ""


# Where authentication leaves the request's user in the ASGI scope, for the authorizer and
# for what answers about the caller (SelfSubjectReview, SelfSubjectAccessReview).
USER_SCOPE_KEY = "kubelite.user"


def request_user(scope: Mapping[str, object]) -> UserInfo:
    user = scope.get(USER_SCOPE_KEY)
    return user if isinstance(user, UserInfo) else ANONYMOUS
