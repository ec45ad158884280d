"""Leases (coordination.k8s.io/v1): the strategy of pkg/registry/coordination/lease
(validation, the Table), as one `Resource`. A PUT may create a lease but must name the
resourceVersion it replaces, and leases have no generation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    IS_NEGATIVE_MSG,
    Cause,
    forbidden,
    invalid,
    is_qualified_name,
    name_is_dns_subdomain,
    not_supported,
    validate_object_meta,
)
from common.models import Lease

COORDINATION_GROUP = "coordination.k8s.io"


# --- validation (ValidateLease, ValidateLeaseUpdate) --------------------------------------

LEASE_STRATEGIES = ("OldestEmulationVersion",)


def validate_lease(lease: dict[str, Any]) -> list[Cause]:
    """ValidateLease: a DNS-subdomain name in a namespace, and the spec."""
    errs = validate_object_meta(lease.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    return errs + validate_lease_spec(lease.get("spec") or {}, "spec")


def validate_lease_spec(spec: dict[str, Any], path: str) -> list[Cause]:
    """ValidateLeaseSpec; holderIdentity is free-form and the times were checked on decode."""
    errs = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.append(invalid(f"{path}.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errs.append(invalid(f"{path}.leaseTransitions", transitions, IS_NEGATIVE_MSG))
    strategy = spec.get("strategy")
    if strategy is not None:
        # kube appends "strategy" to a path that already ends in it
        errs += validate_lease_strategy(strategy, f"{path}.strategy.strategy")
    if spec.get("preferredHolder") and not strategy:
        errs.append(forbidden(f"{path}.preferredHolder",
                              "may only be specified if `strategy` is defined"))
    return errs


def validate_lease_strategy(strategy: str, path: str) -> list[Cause]:
    """ValidateCoordinatedLeaseStrategy: a Kubernetes-defined name, or a qualified name."""
    if "/" not in strategy:
        return [] if strategy in LEASE_STRATEGIES else [
            not_supported(path, strategy, LEASE_STRATEGIES)]
    return [invalid(path, strategy, m) for m in is_qualified_name(strategy)]


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_lease_spec(new.get("spec") or {}, "spec")


# --- the Table -------------------------------------------------------------------------------

HOLDER_IDENTITY_DOC = (
    "holderIdentity contains the identity of the holder of a current lease. If Coordinated "
    "Leader Election is used, the holder identity must be equal to the elected "
    "LeaseCandidate.metadata.name field."
)
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Holder", HOLDER_IDENTITY_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
]


def lease_cells(lease: dict[str, Any], now: datetime) -> list[Any]:
    """printLease: an unset holder is an empty cell, not <none>."""
    metadata = lease.get("metadata") or {}
    return [metadata.get("name", ""), (lease.get("spec") or {}).get("holderIdentity") or "",
            format_age(metadata.get("creationTimestamp"), now)]


LEASES = Resource(
    plural="leases", singular="lease", kind="Lease", namespaced=True, model=Lease,
    storage_name="leases", group=COORDINATION_GROUP,
    descriptions={"Lease": "Lease defines a lease concept.",
                  "LeaseSpec": "LeaseSpec is a specification of a Lease."},
    validate=validate_lease, validate_update=validate_update, tracks_generation=False,
    allow_create_on_update=True, allow_unconditional_update=False,
    columns=COLUMNS, cells=lease_cells,
)
