"""TokenRequest (serviceaccounts/token) and TokenReview, authentication.k8s.io/v1
(pkg/registry/core/serviceaccount/storage/token.go, pkg/registry/authentication/tokenreview).

A TokenRequest mints a bound token for a ServiceAccount: for `spec.audiences` (default
the apiserver's), for `spec.expirationSeconds` (at least 10 minutes, default an hour,
capped by --service-account-max-token-expiration), optionally bound to a Pod, whose
deletion then revokes it. A TokenReview asks the apiserver's authenticator who a token is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from apiserver.auth import UserInfo
from apiserver.auth.authn import AuthenticationFailed
from apiserver.auth.serviceaccount import ServiceAccountTokens, Subject
from apiserver.resources.base import Caller
from apiserver.resources.reviews import AUTHENTICATION_GROUP, check, review_resource, user_info
from apiserver.validation import Cause, invalid, not_supported
from common import errors
from common.models import TokenReview

Object = dict[str, Any]
MIN_EXPIRATION = 600  # kube's ValidateTokenRequest: "less than 10 minutes"
MAX_EXPIRATION = 1 << 32
DEFAULT_EXPIRATION = 3600
BOUND_KINDS = ("Pod",)


def timestamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_request_causes(spec: Object) -> list[Cause]:
    """ValidateTokenRequest, and the bound object kinds kubelite can bind to."""
    errs = []
    seconds = spec.get("expirationSeconds")
    if seconds is not None and seconds < MIN_EXPIRATION:
        errs.append(invalid("spec.expirationSeconds", seconds,
                            "may not specify a duration less than 10 minutes"))
    if seconds is not None and seconds > MAX_EXPIRATION:
        errs.append(invalid("spec.expirationSeconds", seconds,
                            "may not specify a duration larger than 2^32 seconds"))
    ref = spec.get("boundObjectRef")
    if ref is not None and ref.get("kind") not in BOUND_KINDS:
        errs.append(not_supported("spec.boundObjectRef.kind", ref.get("kind", ""),
                                  BOUND_KINDS))
    return errs


def defaulted_spec(spec: Object, tokens: ServiceAccountTokens) -> Object:
    return {**spec, "audiences": list(spec.get("audiences") or tokens.audiences),
            "expirationSeconds": tokens.expiration(
                spec.get("expirationSeconds") or DEFAULT_EXPIRATION)}


def bound_pod(sa_name: str, ref: Object, pod: Object) -> tuple[str, str]:
    """(name, uid) of the pod a token is bound to; refused when the reference's uid is not
    the pod's or the pod runs as another ServiceAccount."""
    meta = pod.get("metadata") or {}
    if ref.get("uid") and ref["uid"] != meta.get("uid"):
        raise errors.Conflict(f"the UID in the bound object reference ({ref['uid']}) does "
                              f"not match the UID in record. The object might have been "
                              f"deleted and then recreated")
    runs_as = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    if runs_as != sa_name:
        raise errors.BadRequest(f"cannot bind token for serviceaccount {sa_name!r} to pod "
                                f"{meta.get('name')!r} running as serviceaccount {runs_as!r}")
    return meta.get("name", ""), meta.get("uid", "")


async def token_request(tokens: ServiceAccountTokens, sa: Object, request: Object,
                        get_pod: Callable[[str], Awaitable[Object]], now: int) -> Object:
    """The answered TokenRequest for the stored ServiceAccount `sa`."""
    spec = request.get("spec") or {}
    causes = token_request_causes(spec)
    if causes:
        err = errors.invalid("TokenRequest.authentication.k8s.io", "", causes,
                             group=AUTHENTICATION_GROUP)
        err.details["kind"] = "TokenRequest"
        raise err
    meta = sa["metadata"]
    pod_name = pod_uid = ""
    ref = spec.get("boundObjectRef")
    if ref is not None:
        pod_name, pod_uid = bound_pod(meta["name"], ref, await get_pod(ref.get("name", "")))
        ref = {**ref, "uid": pod_uid}
    spec = defaulted_spec(spec, tokens)
    if ref is not None:
        spec["boundObjectRef"] = ref
    subject = Subject(meta["namespace"], meta["name"], meta["uid"], pod_name, pod_uid)
    token = tokens.mint(subject, spec["audiences"], spec["expirationSeconds"], now)
    return {"kind": "TokenRequest", "apiVersion": f"{AUTHENTICATION_GROUP}/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "creationTimestamp": timestamp(now)},
            "spec": spec,
            "status": {"token": token,
                       "expirationTimestamp": timestamp(now + spec["expirationSeconds"])}}


# --- TokenReview --------------------------------------------------------------------------

# (token, audiences) -> (the user, the audiences it is good for); AuthenticationFailed
TokenReviewer = Callable[[str, Sequence[str]], Awaitable[tuple[UserInfo, list[str]]]]


async def token_review(review: Object, caller: Caller) -> Object:
    spec = review.get("spec") or {}
    token = spec.get("token") or ""
    if not token:
        check(TOKEN_REVIEWS, [invalid("spec.token", "", "token must not be empty")])
    status: Object
    try:
        if caller.review_token is None:
            raise AuthenticationFailed("token authentication is not configured")
        user, audiences = await caller.review_token(token, spec.get("audiences") or ())
        status = {"authenticated": True, "user": user_info(user), "audiences": audiences}
    except AuthenticationFailed as e:
        status = {"user": {}, "error": f"[invalid bearer token, {e}]"}
    return {"kind": "TokenReview", "apiVersion": TOKEN_REVIEWS.api_version,
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


TOKEN_REVIEWS = review_resource("tokenreviews", "TokenReview", AUTHENTICATION_GROUP,
                                TokenReview, token_review)
