"""Deployments (apps/v1): the strategy of pkg/registry/apps/deployment (SetDefaults_Deployment,
ValidateDeployment/ValidateDeploymentUpdate, the Table of printDeployment), as one `Resource`,
with the status and scale subresources. The controller that acts on them is the
controller-manager's; the apiserver only stores, defaults and validates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.workloads import (
    CONTAINERS_DOC,
    IMAGES_DOC,
    default_template,
    int_or_percent_value,
    nonnegative,
    not_more_than_100_percent,
    template_cells,
    template_merge_keys,
    validate_positive_int_or_percent,
    validate_selector_and_template,
    validate_selector_immutable,
)
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    Cause,
    forbidden,
    invalid,
    name_is_dns_subdomain,
    not_supported,
    validate_object_meta,
)
from common.models import Deployment

APPS_GROUP = "apps"
STRATEGY_TYPES = ("Recreate", "RollingUpdate")
DEFAULT_MAX_UNAVAILABLE = "25%"
DEFAULT_MAX_SURGE = "25%"
DEFAULT_REVISION_HISTORY_LIMIT = 10
DEFAULT_PROGRESS_DEADLINE_SECONDS = 600


# --- defaults (apps/v1 SetDefaults_Deployment) ------------------------------------------------

def default_deployment(deployment: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", DEFAULT_MAX_UNAVAILABLE)
        rolling.setdefault("maxSurge", DEFAULT_MAX_SURGE)
    spec.setdefault("revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    spec.setdefault("progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE_SECONDS)
    default_template(spec)


# --- validation (ValidateDeployment, ValidateDeploymentUpdate) --------------------------------

def validate_deployment(deployment: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(deployment.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    return errs + validate_deployment_spec(deployment.get("spec") or {})


def validate_deployment_spec(spec: dict[str, Any]) -> list[Cause]:
    errs = nonnegative(spec, "replicas")
    errs += validate_selector_and_template(spec, kind_word="deployment",
                                           restart_policies=("Always",))
    if (((spec.get("template") or {}).get("spec") or {}).get("activeDeadlineSeconds")
            is not None):
        errs.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                              "activeDeadlineSeconds in ReplicaSet is not Supported"))
    errs += validate_strategy(spec.get("strategy") or {}, "spec.strategy")
    errs += nonnegative(spec, "minReadySeconds")
    errs += nonnegative(spec, "revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        errs += nonnegative(spec, "progressDeadlineSeconds")
        if deadline <= (spec.get("minReadySeconds") or 0):
            errs.append(invalid("spec.progressDeadlineSeconds", deadline,
                                "must be greater than minReadySeconds"))
    return errs


def validate_strategy(strategy: dict[str, Any], path: str) -> list[Cause]:
    """ValidateDeploymentStrategy and ValidateRollingUpdateDeployment."""
    kind = strategy.get("type") or ""
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [forbidden(f"{path}.rollingUpdate",
                              "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind != "RollingUpdate":
        return [not_supported(f"{path}.type", kind, STRATEGY_TYPES)]
    if rolling is None:
        return []
    at = f"{path}.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = validate_positive_int_or_percent(unavailable, f"{at}.maxUnavailable")
    errs += validate_positive_int_or_percent(surge, f"{at}.maxSurge")
    if int_or_percent_value(unavailable) == 0 and int_or_percent_value(surge) == 0:
        errs.append(invalid(f"{at}.maxUnavailable", unavailable,
                            "may not be 0 when `maxSurge` is 0"))
    return errs + not_more_than_100_percent(unavailable, f"{at}.maxUnavailable")


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_deployment_spec(new.get("spec") or {}) + validate_selector_immutable(new, old)


# --- the Table (printDeployment) ------------------------------------------------------------

UPDATED_REPLICAS_DOC = ("Total number of non-terminated pods targeted by this deployment that "
                        "have the desired template spec.")
AVAILABLE_REPLICAS_DOC = ("Total number of available pods (ready for at least minReadySeconds) "
                          "targeted by this deployment.")
SELECTOR_DOC = ("Label selector for pods. Existing ReplicaSets whose pods are selected by this "
                "will be the ones affected by this deployment.")
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Ready", "Number of the pod with ready state"),
    column("Up-to-date", UPDATED_REPLICAS_DOC),
    column("Available", AVAILABLE_REPLICAS_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("Containers", CONTAINERS_DOC, priority=1),
    column("Images", IMAGES_DOC, priority=1),
    column("Selector", SELECTOR_DOC, priority=1),
]


def deployment_cells(deployment: dict[str, Any], now: datetime) -> list[Any]:
    metadata = deployment.get("metadata") or {}
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return [metadata.get("name", ""),
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0),
            format_age(metadata.get("creationTimestamp"), now), *template_cells(spec)]


DEPLOYMENTS = Resource(
    plural="deployments", singular="deployment", kind="Deployment", namespaced=True,
    model=Deployment, storage_name="deployments", group=APPS_GROUP,
    subresources=frozenset({"status", "scale"}), short_names=("deploy",), categories=("all",),
    descriptions={"Deployment": "Deployment enables declarative updates for Pods and "
                                "ReplicaSets.",
                  "DeploymentSpec": "DeploymentSpec is the specification of the desired "
                                    "behavior of the Deployment."},
    default=default_deployment, validate=validate_deployment, validate_update=validate_update,
    generation_includes_annotations=True,
    columns=COLUMNS, cells=deployment_cells,
    merge_keys={**template_merge_keys(), "status.conditions": "type"},
)
