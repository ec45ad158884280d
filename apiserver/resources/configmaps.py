"""ConfigMaps (core/v1): the strategy of pkg/registry/core/configmap (ValidateConfigMap,
ValidateConfigMapUpdate with `immutable`, the Table of printConfigMap), as one `Resource`.
What a pod does with them (env, volumes) is the kubelet's."""

from __future__ import annotations

import base64
import re
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    Cause,
    cause,
    forbidden,
    invalid,
    name_is_dns_subdomain,
    validate_object_meta,
)
from common.models import ConfigMap

MAX_TOTAL_BYTES = 1024 * 1024  # corev1.MaxSecretSize, ConfigMaps' limit too
CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_CONFIG_KEY = re.compile(CONFIG_KEY_FMT)
IMMUTABLE_SET_MSG = "field is immutable when `immutable` is set"

# Every namespace's copy of the cluster's CA (apiserver/rootca_publisher.py), which the
# pods' kube-api-access volumes project as ca.crt.
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"


def is_config_map_key(key: str) -> list[str]:
    """IsConfigMapKey: what a key of data, binaryData (and a Secret's data) may be."""
    errs = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        errs.append(f"{CONFIG_KEY_MSG} (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
                    f"regex used for validation is '{CONFIG_KEY_FMT}')")
    if key in (".", ".."):
        errs.append(f"must not be '{key}'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def validate_keys(keys: list[str], path: str) -> list[Cause]:
    return [invalid(f"{path}[{key}]", key, m) for key in keys for m in is_config_map_key(key)]


def decoded_size(text: str) -> int:
    return len(base64.b64decode(text)) if text else 0


def validate_config_map(config_map: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(config_map.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    data = config_map.get("data") or {}
    binary = config_map.get("binaryData") or {}
    errs += validate_keys(list(data), "data")
    errs += validate_keys(list(binary), "binaryData")
    errs += [invalid(f"data[{key}]", key, "duplicate of key present in binaryData")
             for key in data if key in binary]
    size = sum(len(k) + len(v.encode()) for k, v in data.items()) + sum(
        len(k) + decoded_size(v) for k, v in binary.items())
    if size > MAX_TOTAL_BYTES:
        errs.append(cause("FieldValueTooLong", "", detail=f"must have at most "
                                                          f"{MAX_TOTAL_BYTES} bytes"))
    return errs


def validate_immutable_update(new: dict[str, Any], old: dict[str, Any],
                              fields: tuple[str, ...]) -> list[Cause]:
    """An object created or updated with `immutable: true` keeps it and its data."""
    if not old.get("immutable"):
        return []
    errs = []
    if not new.get("immutable"):
        errs.append(forbidden("immutable", IMMUTABLE_SET_MSG))
    errs += [forbidden(key, IMMUTABLE_SET_MSG) for key in fields
             if (new.get(key) or {}) != (old.get(key) or {})]
    return errs


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return (validate_immutable_update(new, old, ("data", "binaryData"))
            + validate_config_map(new))


DATA_DOC = (
    "Data contains the configuration data. Each key must consist of alphanumeric "
    "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the "
    "BinaryData field. The keys stored in Data must not overlap with the keys in the "
    "BinaryData field, this is enforced during validation process."
)
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Data", DATA_DOC),
    column("Age", CREATION_TIMESTAMP_DOC),
]


def config_map_cells(config_map: dict[str, Any], now: datetime) -> list[Any]:
    """printConfigMap: the number of keys in data and binaryData."""
    metadata = config_map.get("metadata") or {}
    count = len(config_map.get("data") or {}) + len(config_map.get("binaryData") or {})
    return [metadata.get("name", ""), count, format_age(metadata.get("creationTimestamp"), now)]


CONFIG_MAPS = Resource(
    plural="configmaps", singular="configmap", kind="ConfigMap", namespaced=True,
    model=ConfigMap, storage_name="configmaps", short_names=("cm",),
    descriptions={"ConfigMap": "ConfigMap holds configuration data for pods to consume."},
    validate=validate_config_map, validate_update=validate_update, tracks_generation=False,
    columns=COLUMNS, cells=config_map_cells,
)
