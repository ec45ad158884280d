"""ServiceAccounts (core/v1): the strategy of pkg/registry/core/serviceaccount, as one
`Resource`. A ServiceAccount is an identity for processes in pods; its tokens are minted by
the `token` subresource (TokenRequest, apiserver/serviceaccount_tokens.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import Cause, name_is_dns_subdomain, validate_object_meta
from common.models import ServiceAccount

DEFAULT_SERVICE_ACCOUNT = "default"


def validate_service_account(sa: dict[str, Any]) -> list[Cause]:
    """ValidateServiceAccount: a DNS-subdomain name in a namespace; the rest is free."""
    return validate_object_meta(sa.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_service_account(new)


SECRETS_DOC = (
    "Secrets is a list of the secrets in the same namespace that pods running using this "
    "ServiceAccount are allowed to use."
)
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Secrets", SECRETS_DOC, type_="integer"),
    column("Age", CREATION_TIMESTAMP_DOC),
]


def service_account_cells(sa: dict[str, Any], now: datetime) -> list[Any]:
    """printServiceAccount: the number of secrets."""
    metadata = sa.get("metadata") or {}
    return [metadata.get("name", ""), len(sa.get("secrets") or []),
            format_age(metadata.get("creationTimestamp"), now)]


SERVICE_ACCOUNTS = Resource(
    plural="serviceaccounts", singular="serviceaccount", kind="ServiceAccount",
    namespaced=True, model=ServiceAccount, storage_name="serviceaccounts",
    subresources=frozenset({"token"}), short_names=("sa",),
    descriptions={"ServiceAccount": "ServiceAccount binds together: * a name, understood by "
                                    "users, and perhaps by peripheral systems, for an "
                                    "identity * a principal that can be authenticated and "
                                    "authorized * a set of secrets"},
    validate=validate_service_account, validate_update=validate_update,
    tracks_generation=False, columns=COLUMNS, cells=service_account_cells,
)
