"""RFC 7386 JSON merge patch (`application/merge-patch+json`), as
`gopkg.in/evanphx/json-patch.v4` MergePatch does it for kube-apiserver."""

from __future__ import annotations

import json
from typing import Any

from apiserver.patch.common import JSON, copy_json
from common.errors import BadRequest, invalid


def _prune_nulls(value: JSON) -> JSON:
    """Drop nulls from objects and arrays, recursively (json-patch's pruneNulls)."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value if v is not None]
    return value


def _merge_docs(doc: dict[str, JSON], patch: dict[str, JSON]) -> dict[str, JSON]:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif key not in doc or not isinstance(doc[key], dict):
            doc[key] = _prune_nulls(value)
        elif isinstance(value, dict):
            doc[key] = _merge_docs(doc[key], value)
        else:
            doc[key] = value
    return doc


def apply_merge_patch(doc: dict[str, Any], patch: Any) -> dict[str, Any]:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces.

    A null or scalar patch is kube's 400 "Invalid JSON Patch"; an array would replace the
    whole object, which kube then fails to decode (422).
    """
    if isinstance(patch, dict):
        return _merge_docs(copy_json(doc), patch)
    if isinstance(patch, list):
        # The result is an array, which kube-apiserver then fails to decode as an object.
        patched = json.dumps(_prune_nulls(patch), separators=(",", ":"))
        raise invalid("", "", [{
            "reason": "FieldValueInvalid", "field": "patch",
            "message": f"Invalid value: {json.dumps(patched)}: couldn't get version/kind; "
                       "json parse error: json: cannot unmarshal array into Go value of type "
                       'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
                       'Kind string "json:\\"kind,omitempty\\"" }'}])
    raise BadRequest("Invalid JSON Patch")
