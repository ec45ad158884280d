"""ReplicaSets (apps/v1): the strategy of pkg/registry/apps/replicaset (SetDefaults_ReplicaSet,
ValidateReplicaSet/ValidateReplicaSetUpdate, the Table of printReplicaSet), as one `Resource`,
with the status and scale subresources."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.deployments import APPS_GROUP
from apiserver.resources.workloads import (
    CONTAINERS_DOC,
    IMAGES_DOC,
    default_template,
    nonnegative,
    template_cells,
    template_merge_keys,
    validate_selector_and_template,
    validate_selector_immutable,
)
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    Cause,
    forbidden,
    name_is_dns_subdomain,
    validate_object_meta,
)
from common.models import ReplicaSet


def default_replica_set(replica_set: dict[str, Any], old: dict[str, Any] | None) -> None:
    """apps/v1 SetDefaults_ReplicaSet: one replica; the template as a pod's spec. The
    status's `replicas` is always written (a Go int32 without omitempty)."""
    spec = replica_set.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_template(spec)
    replica_set.setdefault("status", {}).setdefault("replicas", 0)


def validate_replica_set(replica_set: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(replica_set.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    return errs + validate_replica_set_spec(replica_set.get("spec") or {})


def validate_replica_set_spec(spec: dict[str, Any]) -> list[Cause]:
    """ValidateReplicaSetSpec (kube's message says "deployment" for replica sets too)."""
    errs = nonnegative(spec, "replicas") + nonnegative(spec, "minReadySeconds")
    errs += validate_selector_and_template(spec, kind_word="deployment",
                                           restart_policies=("Always",))
    if (((spec.get("template") or {}).get("spec") or {}).get("activeDeadlineSeconds")
            is not None):
        errs.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                              "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errs


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return (validate_replica_set_spec(new.get("spec") or {})
            + validate_selector_immutable(new, old))


REPLICAS_DOC = ("Replicas is the number of desired replicas. This is a pointer to distinguish "
                "between explicit zero and unspecified. Defaults to 1. More info: "
                "https://kubernetes.io/docs/concepts/workloads/controllers/"
                "replicationcontroller/#what-is-a-replicationcontroller")
STATUS_REPLICAS_DOC = ("Replicas is the most recently observed number of replicas. More info: "
                       "https://kubernetes.io/docs/concepts/workloads/controllers/"
                       "replicationcontroller/#what-is-a-replicationcontroller")
READY_REPLICAS_DOC = "The number of ready replicas for this replica set."
SELECTOR_DOC = ("Selector is a label query over pods that should match the replica count. If "
                "the selector is empty, it is defaulted to the labels present on the pod "
                "template. Label keys and values that must match in order to be controlled by "
                "this replica set. More info: https://kubernetes.io/docs/concepts/overview/"
                "working-with-objects/labels/#label-selectors")
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Desired", REPLICAS_DOC, type_="integer"),
    column("Current", STATUS_REPLICAS_DOC, type_="integer"),
    column("Ready", READY_REPLICAS_DOC, type_="integer"),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("Containers", CONTAINERS_DOC, priority=1),
    column("Images", IMAGES_DOC, priority=1),
    column("Selector", SELECTOR_DOC, priority=1),
]


def replica_set_cells(replica_set: dict[str, Any], now: datetime) -> list[Any]:
    metadata = replica_set.get("metadata") or {}
    spec, status = replica_set.get("spec") or {}, replica_set.get("status") or {}
    return [metadata.get("name", ""), spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), format_age(metadata.get("creationTimestamp"), now),
            *template_cells(spec)]


REPLICA_SETS = Resource(
    plural="replicasets", singular="replicaset", kind="ReplicaSet", namespaced=True,
    model=ReplicaSet, storage_name="replicasets", group=APPS_GROUP,
    subresources=frozenset({"status", "scale"}), short_names=("rs",), categories=("all",),
    descriptions={"ReplicaSet": "ReplicaSet ensures that a specified number of pod replicas "
                                "are running at any given time.",
                  "ReplicaSetSpec": "ReplicaSetSpec is the specification of a ReplicaSet."},
    default=default_replica_set, validate=validate_replica_set, validate_update=validate_update,
    columns=COLUMNS, cells=replica_set_cells,
    merge_keys={**template_merge_keys(), "status.conditions": "type"},
)
