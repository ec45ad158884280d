"""Request-side options: query parameters and DeleteOptions, decoded and validated as kube
does before anything is written.

An option the server cannot read is an error, never a default: a `dryRun` that was
dropped on the way once deleted real pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams

from apiserver import schema
from apiserver.validation import Cause, invalid, not_supported
from common import errors
from common.models import DeleteOptions as DeleteOptionsModel

FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
INT64 = (-(2**63), 2**63 - 1)


def query_int(query: Mapping[str, str], name: str) -> int | None:
    """An int64 query parameter (strconv.ParseInt's words for a bad one); None if absent."""
    value = query.get(name)
    if value is None or value == "":
        return None
    text = value.strip()
    try:
        number = int(text, 10) if text.lstrip("+-").isdigit() else None
    except ValueError:
        number = None
    if number is None:
        raise errors.BadRequest(f'invalid value for {name}: strconv.ParseInt: parsing '
                                f'"{value}": invalid syntax')
    if not INT64[0] <= number <= INT64[1]:
        raise errors.BadRequest(f'invalid value for {name}: strconv.ParseInt: parsing '
                                f'"{value}": value out of range')
    return number


def query_bool(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter as kube's parameter codec decodes one (apimachinery's
    Convert_Slice_string_To_bool): absent, "0" or "false" in any case is false; anything
    else, the empty string included, is true."""
    value = query.get(name)
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")


def field_validation(query: QueryParams) -> str:
    """fieldValidation: Strict, Warn (the default) or Ignore."""
    mode = query.get("fieldValidation") or "Warn"
    if mode not in FIELD_VALIDATION:
        raise errors.BadRequest(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", '
                                f'got "{mode}"')
    return mode


def dry_run_causes(values: list[str]) -> list[Cause]:
    """ValidateDryRun: only "All" is a dry run kube knows."""
    if any(v != "All" for v in values):
        return [not_supported("dryRun", values, ["All"])]
    return []


def dry_run(query: QueryParams) -> bool:
    """`?dryRun=All`: run every check, write nothing (422 for any other value)."""
    values = query.getlist("dryRun")
    causes = dry_run_causes(values)
    if causes:
        raise errors.invalid("DryRun", "", causes)
    return bool(values)


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    preconditions: Mapping[str, str] | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    dry_run: bool = False


def delete_options(query: QueryParams, body: dict[str, Any] | None) -> DeleteOptions:
    """DeleteOptions from the body and the query, typed like Go's and validated like
    ValidateDeleteOptions. Both may be given; an option set in both must agree."""
    from_query = _query_delete_options(query)
    from_body: dict[str, Any] = {}
    if body is not None:
        from_body, _ = schema.decode(DeleteOptionsModel, body)
    merged: dict[str, Any] = dict(from_body)
    for name, value in from_query.items():
        if name in merged and merged[name] != value:
            raise errors.BadRequest(f"{name} is set both in the query ({_show(value)}) and in "
                                    f"the DeleteOptions body ({_show(merged[name])}) to "
                                    f"different values")
        merged[name] = value
    causes: list[Cause] = []
    policy = merged.get("propagationPolicy")
    if merged.get("orphanDependents") is not None and policy is not None:
        causes.append(invalid("propagationPolicy", policy,
                              "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(not_supported("propagationPolicy", policy, [*PROPAGATION_POLICIES, "nil"]))
    dry_run_values = merged.get("dryRun") or []
    causes += dry_run_causes(dry_run_values)
    if causes:
        err = errors.invalid("DeleteOptions.meta.k8s.io", "", causes, group="meta.k8s.io")
        err.details["kind"] = "DeleteOptions"
        raise err
    return DeleteOptions(
        grace_period_seconds=merged.get("gracePeriodSeconds"),
        preconditions=merged.get("preconditions") or None,
        propagation_policy=policy,
        orphan_dependents=merged.get("orphanDependents"),
        dry_run=bool(dry_run_values))


def _query_delete_options(query: QueryParams) -> dict[str, Any]:
    out: dict[str, Any] = {}
    grace = query_int(query, "gracePeriodSeconds")
    if grace is not None:
        out["gracePeriodSeconds"] = grace
    if query.get("propagationPolicy"):
        out["propagationPolicy"] = query["propagationPolicy"]
    if "orphanDependents" in query:
        out["orphanDependents"] = query_bool(query, "orphanDependents")
    if "dryRun" in query:
        out["dryRun"] = query.getlist("dryRun")
    return out


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
