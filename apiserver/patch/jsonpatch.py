"""RFC 6902 JSON patch (`application/json-patch+json`), with the error wording of json-patch
v4 and the status codes of `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.patch.common import JSON, copy_json, json_kind, rejected
from common.errors import BadRequest, RequestEntityTooLarge

MAX_JSON_PATCH_OPERATIONS = 10000


class _PatchFailed(Exception):
    pass


def _decode_pointer_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _go_atoi(key: str) -> int:
    """An array index token: RFC 6901's `0` or digits without a leading zero (`00`, `+1`
    and `01` name no element), or a negative index as kube's json-patch allows."""
    digits = key[1:] if key[:1] == "-" else key
    if not digits.isascii() or not digits.isdigit():
        raise _PatchFailed(f'strconv.Atoi: parsing "{key}": invalid syntax')
    if len(digits) > 1 and digits[0] == "0" or key == "-0":
        raise _PatchFailed(f'array index "{key}" has a leading zero (RFC 6901)')
    return int(key)


def _invalid_index(index: int) -> _PatchFailed:
    return _PatchFailed(f"Unable to access invalid index: {index}: invalid index referenced")


def _find_container(doc: JSON, path: str) -> tuple[dict[str, JSON] | list[JSON], str] | None:
    """json-patch's findObject: the object or array holding the last token of `path`."""
    tokens = path.split("/")
    if len(tokens) < 2:
        return None
    container = doc
    for token in tokens[1:-1]:
        try:
            child = _get(container, _decode_pointer_token(token))
        except _PatchFailed:
            return None
        if not isinstance(child, dict | list):
            return None
        container = child
    return container, _decode_pointer_token(tokens[-1])


def _get(container: JSON, key: str) -> JSON:
    if isinstance(container, dict):
        return container.get(key)
    index = _go_atoi(key)
    if index < 0 or index >= len(container):
        raise _invalid_index(index)
    return container[index]


def _add(container: dict[str, JSON] | list[JSON], key: str, value: JSON) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _go_atoi(key)
    except _PatchFailed as e:
        raise _PatchFailed(f"value was not a proper array index: '{key}': {e}") from None
    if index > len(container) or index < -(len(container) + 1):
        raise _invalid_index(index)
    container.insert(index if index >= 0 else index + len(container) + 1, value)


def _remove(container: dict[str, JSON] | list[JSON], key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _PatchFailed(f"Unable to remove nonexistent key: {key}: missing value")
        del container[key]
        return
    index = _go_atoi(key)
    if index >= len(container) or index < -len(container):
        raise _invalid_index(index)
    del container[index]


def _path_field(op: dict[str, JSON], name: str, verb: str) -> str:
    value = op.get(name)
    if value is None:
        missing = "from field" if name == "from" else "path"
        raise _PatchFailed(f"{verb} operation failed to decode {missing}: missing value")
    if not isinstance(value, str):
        raise _PatchFailed(f"{verb} operation failed to decode {name}: json: cannot unmarshal "
                           f"{json_kind(value)} into Go value of type string")
    return value


def _located(doc: JSON, path: str, failure: str) -> tuple[dict[str, JSON] | list[JSON], str]:
    found = _find_container(doc, path)
    if found is None:
        raise _PatchFailed(f"{failure}: missing value")
    return found


def _op_add(doc: JSON, op: dict[str, JSON]) -> None:
    path = _path_field(op, "path", "add")
    container, key = _located(doc, path, f'add operation does not apply: doc is missing path: "{path}"')
    try:
        _add(container, key, copy_json(op.get("value")))
    except _PatchFailed as e:
        raise _PatchFailed(f"error in add for path: '{path}': {e}") from None


def _op_remove(doc: JSON, op: dict[str, JSON]) -> None:
    path = _path_field(op, "path", "remove")
    container, key = _located(
        doc, path, f'remove operation does not apply: doc is missing path: "{path}"')
    try:
        _remove(container, key)
    except _PatchFailed as e:
        raise _PatchFailed(f"error in remove for path: '{path}': {e}") from None


def _op_replace(doc: JSON, op: dict[str, JSON]) -> None:
    # As in json-patch v4 (what kube-apiserver runs), replacing a missing key of an object
    # sets it; only a missing parent or a bad array index fails.
    path = _path_field(op, "path", "replace")
    container, key = _located(doc, path, f"replace operation does not apply: doc is missing path: {path}")
    try:
        _get(container, key)
    except _PatchFailed:
        raise _PatchFailed(f"replace operation does not apply: doc is missing key: {path}: "
                           "missing value") from None
    value = copy_json(op.get("value"))
    if isinstance(container, dict):
        container[key] = value
    else:
        container[_go_atoi(key)] = value


def _op_move(doc: JSON, op: dict[str, JSON]) -> None:
    source = _path_field(op, "from", "move")
    container, key = _located(
        doc, source, f"move operation does not apply: doc is missing from path: {source}")
    try:
        value = _get(container, key)
        _remove(container, key)
    except _PatchFailed as e:
        raise _PatchFailed(f"error in move for path: '{key}': {e}") from None
    path = _path_field(op, "path", "move")
    target, target_key = _located(
        doc, path, f"move operation does not apply: doc is missing destination path: {path}")
    try:
        _add(target, target_key, value)
    except _PatchFailed as e:
        raise _PatchFailed(f"error in move for path: '{path}': {e}") from None


def _op_copy(doc: JSON, op: dict[str, JSON]) -> None:
    source = _path_field(op, "from", "copy")
    container, key = _located(
        doc, source, f"copy operation does not apply: doc is missing from path: {source}")
    try:
        value = _get(container, key)
    except _PatchFailed as e:
        raise _PatchFailed(f"error in copy for from: '{source}': {e}") from None
    path = _path_field(op, "path", "copy")
    target, target_key = _located(
        doc, path, f"copy operation does not apply: doc is missing destination path: {path}")
    try:
        _add(target, target_key, copy_json(value))
    except _PatchFailed as e:
        raise _PatchFailed(f"error while adding value during copy: {e}") from None


def _op_test(doc: JSON, op: dict[str, JSON]) -> None:
    path = _path_field(op, "path", "test")
    container, key = _located(doc, path, f"test operation does not apply: is missing path: {path}")
    try:
        actual = _get(container, key)
    except _PatchFailed as e:
        raise _PatchFailed(f"error in test for path: '{path}': {e}") from None
    if not _json_equal(actual, op.get("value")):
        raise _PatchFailed(f"testing value {path} failed: test failed")


_OPERATIONS: dict[str, Callable[[JSON, dict[str, JSON]], None]] = {
    "add": _op_add, "remove": _op_remove, "replace": _op_replace,
    "move": _op_move, "copy": _op_copy, "test": _op_test,
}


def _decode_operations(ops: Any) -> list[dict[str, JSON]]:
    """jsonpatch.DecodePatch: an array of objects, else a 400 with Go's decoding error."""
    if ops is None:
        return []
    if not isinstance(ops, list):
        raise BadRequest(f"json: cannot unmarshal {json_kind(ops)} into Go value of type "
                         "jsonpatch.Patch")
    for op in ops:
        if op is not None and not isinstance(op, dict):
            raise BadRequest(f"json: cannot unmarshal {json_kind(op)} into Go value of type "
                             "jsonpatch.Operation")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise RequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(ops)}")
    return [op or {} for op in ops]


def apply_json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902. A malformed patch is a 400; an operation that fails is kube's generic 422."""
    operations = _decode_operations(ops)
    result = copy_json(doc)
    for op in operations:
        kind = op.get("op")
        apply = _OPERATIONS.get(kind) if isinstance(kind, str) else None
        if apply is None:
            raise rejected(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
        try:
            apply(result, op)
        except _PatchFailed as e:
            raise rejected(str(e)) from None
    return result


def _json_equal(left: JSON, right: JSON) -> bool:
    """Structural JSON equality: unlike ==, true is not 1."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict):
        return (isinstance(right, dict) and left.keys() == right.keys()
                and all(_json_equal(v, right[k]) for k, v in left.items()))
    if isinstance(left, list):
        return (isinstance(right, list) and len(left) == len(right)
                and all(_json_equal(a, b) for a, b in zip(left, right, strict=True)))
    return bool(left == right)

