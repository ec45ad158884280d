"""The review APIs: create-only, never stored, answered by the authorizer
(pkg/registry/authorization/{subjectaccessreview,selfsubjectaccessreview,
selfsubjectrulesreview}, pkg/registry/authentication/selfsubjectreview).

- SubjectAccessReview: may `spec.user` (in `spec.groups`) do this?
- LocalSubjectAccessReview: the same, in the URL's namespace only (namespace admins may ask)
- SelfSubjectAccessReview: may I? (`kubectl auth can-i VERB RESOURCE`)
- SelfSubjectRulesReview: what may I do in a namespace? (`kubectl auth can-i --list`)
- SelfSubjectReview: who am I? (`kubectl auth whoami`)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.auth import Attributes, Decision, UserInfo
from apiserver.resources.base import Caller, Resource
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import Cause, invalid
from common import errors
from common.models import (
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectReview,
    SelfSubjectRulesReview,
    SubjectAccessReview,
)
from common.timestamps import rfc3339

AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"
Object = dict[str, Any]


# --- what is asked ----------------------------------------------------------------------------

def attributes_from(user: UserInfo, spec: Object) -> Attributes:
    """authorizationutil.ResourceAttributesFrom / NonResourceAttributesFrom."""
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return Attributes(user=user, verb=resource.get("verb", ""), resource_request=True,
                          api_group=resource.get("group", ""),
                          api_version=resource.get("version") or "*",
                          resource=resource.get("resource", ""),
                          subresource=resource.get("subresource", ""),
                          namespace=resource.get("namespace", ""),
                          name=resource.get("name", ""))
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(user=user, verb=non_resource.get("verb", ""), resource_request=False,
                      path=non_resource.get("path", ""))


def spec_causes(spec: Object, *, self_review: bool) -> list[Cause]:
    """ValidateSubjectAccessReviewSpec / ValidateSelfSubjectAccessReviewSpec."""
    errs = []
    has_resource = spec.get("resourceAttributes") is not None
    has_non_resource = spec.get("nonResourceAttributes") is not None
    if has_resource and has_non_resource:
        errs.append(invalid("spec.nonResourceAttributes", spec["nonResourceAttributes"],
                            "cannot be specified in combination with resourceAttributes"))
    if not has_resource and not has_non_resource:
        errs.append(invalid("spec.resourceAttributes", None,
                            "exactly one of nonResourceAttributes or resourceAttributes must be "
                            "specified"))
    if not self_review and not spec.get("user") and not spec.get("groups"):
        errs.append(invalid("spec.user", spec.get("user", ""),
                            "at least one of user or group must be specified"))
    return errs


def meta_causes(review: Object) -> list[Cause]:
    meta = {k: v for k, v in (review.get("metadata") or {}).items()
            if k not in ("creationTimestamp", "managedFields")}
    return [invalid("metadata", meta, "must be empty")] if meta else []


def check(resource: Resource, causes: list[Cause]) -> None:
    if causes:
        err = errors.invalid(resource.qualified_kind, "", causes, group=resource.group)
        err.details["kind"] = resource.kind
        raise err


def status_of(decision: Decision, reason: str) -> Object:
    status: Object = {"allowed": decision is Decision.ALLOW}
    if decision is Decision.DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return status


def answer(resource: Resource, review: Object, status: Object) -> Object:
    return {"kind": resource.kind, "apiVersion": resource.api_version,
            "metadata": {"creationTimestamp": None}, **{k: v for k, v in review.items()
                                                        if k not in ("kind", "apiVersion",
                                                                     "metadata", "status")},
            "status": status}


# --- the four reviews -------------------------------------------------------------------------

def user_of_spec(spec: Object) -> UserInfo:
    extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
    return UserInfo(spec.get("user", ""), uid=spec.get("uid", ""),
                    groups=tuple(spec.get("groups") or ()), extra=extra)


async def subject_access_review(review: Object, caller: Caller) -> Object:
    spec = review.get("spec") or {}
    check(SUBJECT_ACCESS_REVIEWS, meta_causes(review) + spec_causes(spec, self_review=False))
    decision, reason = await caller.authorizer.authorize(attributes_from(user_of_spec(spec), spec))
    return answer(SUBJECT_ACCESS_REVIEWS, review, status_of(decision, reason))


async def local_subject_access_review(review: Object, caller: Caller) -> Object:
    """The URL's namespace is the review's (set when the body has none)."""
    namespace = caller.namespace or ""
    meta = {**(review.get("metadata") or {})}
    meta.setdefault("namespace", namespace)
    spec = review.get("spec") or {}
    causes = spec_causes(spec, self_review=False)
    rest = {k: v for k, v in meta.items() if k not in ("namespace", "creationTimestamp",
                                                        "managedFields")}
    if rest:
        causes.append(invalid("metadata", rest, "must be empty except for namespace"))
    attributes = spec.get("resourceAttributes")
    if attributes is not None and attributes.get("namespace", "") != meta["namespace"]:
        causes.append(invalid("spec.resourceAttributes.namespace",
                              attributes.get("namespace", ""), "must match metadata.namespace"))
    if spec.get("nonResourceAttributes") is not None:
        causes.append(invalid("spec.nonResourceAttributes", spec["nonResourceAttributes"],
                              "disallowed on this kind of request"))
    check(LOCAL_SUBJECT_ACCESS_REVIEWS, causes)
    decision, reason = await caller.authorizer.authorize(attributes_from(user_of_spec(spec), spec))
    answered = answer(LOCAL_SUBJECT_ACCESS_REVIEWS, review, status_of(decision, reason))
    answered["metadata"] = {"namespace": meta["namespace"], "creationTimestamp": None}
    return answered


async def self_subject_access_review(review: Object, caller: Caller) -> Object:
    spec = review.get("spec") or {}
    check(SELF_SUBJECT_ACCESS_REVIEWS, spec_causes(spec, self_review=True))
    decision, reason = await caller.authorizer.authorize(attributes_from(caller.user, spec))
    return answer(SELF_SUBJECT_ACCESS_REVIEWS, review, status_of(decision, reason))


def resource_rule_info(rule: Object) -> Object:
    return {k: list(rule[k]) for k in ("verbs", "apiGroups", "resources", "resourceNames")
            if rule.get(k) or k == "verbs"}


async def self_subject_rules_review(review: Object, caller: Caller) -> Object:
    namespace = (review.get("spec") or {}).get("namespace") or ""
    if not namespace:
        raise errors.BadRequest("no namespace on request")
    rules, incomplete, evaluation_errors = await caller.authorizer.rules_for(caller.user,
                                                                             namespace)
    status: Object = {
        "resourceRules": [resource_rule_info(r) for r in rules if r.get("resources")],
        "nonResourceRules": [{"verbs": list(r.get("verbs") or []),
                              "nonResourceURLs": list(r["nonResourceURLs"])}
                             for r in rules if r.get("nonResourceURLs")],
        "incomplete": incomplete,
    }
    if evaluation_errors:
        status["evaluationError"] = "; ".join(evaluation_errors)
    return answer(SELF_SUBJECT_RULES_REVIEWS, review, status)


async def self_subject_review(review: Object, caller: Caller) -> Object:
    return {"kind": "SelfSubjectReview", "apiVersion": SELF_SUBJECT_REVIEWS.api_version,
            "metadata": {"creationTimestamp": rfc3339()},
            "status": {"userInfo": user_info(caller.user)}}


def user_info(user: UserInfo) -> Object:
    """authentication/v1 UserInfo of a request's user (SelfSubjectReview, TokenReview)."""
    info: Object = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra.items()}
    return info


# --- the Resources ----------------------------------------------------------------------------

COLUMNS = [column("Name", NAME_DOC, format_="name"), column("Age", CREATION_TIMESTAMP_DOC)]


def cells(obj: Object, now: datetime) -> list[Any]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), format_age(meta.get("creationTimestamp"), now)]


def no_causes(obj: Object, old: Object | None = None) -> list[Cause]:
    return []


def review_resource(plural: str, kind: str, group: str, model: Any, handler: Any, *,
                    namespaced: bool = False) -> Resource:
    return Resource(plural=plural, singular=plural[:-1], kind=kind, namespaced=namespaced,
                    model=model, storage_name="", group=group, review=handler,
                    validate=no_causes, validate_update=no_causes, delete_collection=False,
                    columns=COLUMNS, cells=cells)


SUBJECT_ACCESS_REVIEWS = review_resource(
    "subjectaccessreviews", "SubjectAccessReview", AUTHORIZATION_GROUP, SubjectAccessReview,
    subject_access_review)
LOCAL_SUBJECT_ACCESS_REVIEWS = review_resource(
    "localsubjectaccessreviews", "LocalSubjectAccessReview", AUTHORIZATION_GROUP,
    LocalSubjectAccessReview, local_subject_access_review, namespaced=True)
SELF_SUBJECT_ACCESS_REVIEWS = review_resource(
    "selfsubjectaccessreviews", "SelfSubjectAccessReview", AUTHORIZATION_GROUP,
    SelfSubjectAccessReview, self_subject_access_review)
SELF_SUBJECT_RULES_REVIEWS = review_resource(
    "selfsubjectrulesreviews", "SelfSubjectRulesReview", AUTHORIZATION_GROUP,
    SelfSubjectRulesReview, self_subject_rules_review)
SELF_SUBJECT_REVIEWS = review_resource(
    "selfsubjectreviews", "SelfSubjectReview", AUTHENTICATION_GROUP, SelfSubjectReview,
    self_subject_review)

REVIEWS = (SUBJECT_ACCESS_REVIEWS, LOCAL_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_ACCESS_REVIEWS,
           SELF_SUBJECT_RULES_REVIEWS, SELF_SUBJECT_REVIEWS)
