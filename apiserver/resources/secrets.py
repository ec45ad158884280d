"""Secrets (core/v1): the strategy of pkg/registry/core/secret (SetDefaults_Secret, the v1
conversion that merges `stringData` into `data`, ValidateSecret with the rules of the common
types, ValidateSecretUpdate with `immutable`, the Table of printSecret), as one `Resource`."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.configmaps import (
    MAX_TOTAL_BYTES,
    decoded_size,
    validate_immutable_update,
    validate_keys,
)
from apiserver.selectors import SelectableFields, field_text, object_meta_fields
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    cause,
    invalid,
    name_is_dns_subdomain,
    required,
    validate_object_meta,
)
from common.models import Secret

OPAQUE = "Opaque"
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
DOCKERCFG = "kubernetes.io/dockercfg"
DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
BASIC_AUTH = "kubernetes.io/basic-auth"
SSH_AUTH = "kubernetes.io/ssh-auth"
TLS = "kubernetes.io/tls"
REDACTED = "<secret contents redacted>"


def default_secret(secret: dict[str, Any], old: dict[str, Any] | None) -> None:
    """SetDefaults_Secret (type Opaque) and Convert_v1_Secret_To_core_Secret: `stringData`
    is write-only, each of its values replaces `data`'s under the same key."""
    if not secret.get("type"):
        secret["type"] = OPAQUE
    string_data = secret.pop("stringData", None)
    if string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()


def data_bytes(secret: Mapping[str, Any], key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return None if value is None else base64.b64decode(value)


def validate_json_key(secret: Mapping[str, Any], key: str) -> list[Cause]:
    raw = data_bytes(secret, key)
    if raw is None:
        return [required(f"data[{key}]")]
    try:
        json.loads(raw)
    except ValueError as e:
        return [invalid(f"data[{key}]", REDACTED, str(e))]
    return []


def validate_type(secret: Mapping[str, Any]) -> list[Cause]:
    """ValidateSecret's switch on the type."""
    kind = secret.get("type")
    data = secret.get("data") or {}
    if kind == SERVICE_ACCOUNT_TOKEN:
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
            return [required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]")]
    elif kind == DOCKERCFG:
        return validate_json_key(secret, ".dockercfg")
    elif kind == DOCKER_CONFIG_JSON:
        return validate_json_key(secret, ".dockerconfigjson")
    elif kind == BASIC_AUTH:
        if "username" not in data and "password" not in data:
            return [required("data[username]"), required("data[password]")]
    elif kind == SSH_AUTH:
        if not data_bytes(secret, "ssh-privatekey"):
            return [required("data[ssh-privatekey]")]
    elif kind == TLS:
        return [required(f"data[{key}]") for key in ("tls.crt", "tls.key") if key not in data]
    return []


def validate_secret(secret: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(secret.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    data = secret.get("data") or {}
    errs += validate_keys(list(data), "data")
    if sum(len(k) + decoded_size(v) for k, v in data.items()) > MAX_TOTAL_BYTES:
        errs.append(cause("FieldValueTooLong", "data",
                          detail=f"must have at most {MAX_TOTAL_BYTES} bytes"))
    return errs + validate_type(secret)


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    errs = []
    if (new.get("type") or "") != (old.get("type") or ""):
        errs.append(invalid("type", new.get("type") or "", FIELD_IMMUTABLE_MSG))
    return errs + validate_immutable_update(new, old, ("data",)) + validate_secret(new)


def secret_fields(secret: Mapping[str, Any]) -> dict[str, str]:
    """SecretToSelectableFields: the metadata fields and the type."""
    fields = object_meta_fields(secret, namespaced=True)
    fields["type"] = field_text(secret.get("type"))
    return fields


FIELDS = SelectableFields(labels=frozenset({"metadata.name", "metadata.namespace", "type"}),
                          get=secret_fields)

TYPE_DOC = (
    "Used to facilitate programmatic handling of secret data. More info: "
    "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
)
DATA_DOC = (
    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
    "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
    "representing the arbitrary (possibly non-string) data value here. Described in "
    "https://tools.ietf.org/html/rfc4648#section-4"
)
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Type", TYPE_DOC),
    column("Data", DATA_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
]


def secret_cells(secret: dict[str, Any], now: datetime) -> list[Any]:
    metadata = secret.get("metadata") or {}
    return [metadata.get("name", ""), secret.get("type", ""), len(secret.get("data") or {}),
            format_age(metadata.get("creationTimestamp"), now)]


SECRETS = Resource(
    plural="secrets", singular="secret", kind="Secret", namespaced=True, model=Secret,
    storage_name="secrets",
    descriptions={"Secret": "Secret holds secret data of a certain type. The total bytes of "
                            "the values in the Data field must be less than MaxSecretSize "
                            "bytes."},
    default=default_secret, validate=validate_secret, validate_update=validate_update,
    tracks_generation=False, fields=FIELDS, columns=COLUMNS, cells=secret_cells,
)
