"""Strategic merge patch (`application/strategic-merge-patch+json`): a port of the apply half
of `k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`; which lists merge, and by which
key, is each resource's (core/v1's patchStrategy and patchMergeKey tags)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.patch.common import JSON, UnknownError, copy_json, json_kind, rejected
from common.errors import BadRequest

# The merge keys of ObjectMeta's lists, which every resource has; each resource brings its
# own (`Resource.merge_keys`: field path -> patchMergeKey, None for a set-like list of
# primitives). Lists named in neither are replaced, maps always merge. Paths skip list
# indices ("spec.containers.ports").
OBJECT_META_MERGE_KEYS: dict[str, str | None] = {
    "metadata.finalizers": None,
    "metadata.ownerReferences": "uid",
}

_DIRECTIVE = "$patch"
_REPLACE, _DELETE, _MERGE = "replace", "delete", "merge"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"
_NOT_MERGED = object()  # marks a list whose patch strategy is not "merge"

# mergepatch errors that kube-apiserver turns into 400s (interpretStrategicMergePatchError).
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
_NO_LIST_OF_LISTS = "lists of lists are not supported"


class _Rules:
    """The patch strategy lookups for one resource."""

    def __init__(self, merge_keys: Mapping[str, str | None]) -> None:
        self.merge_keys = merge_keys

    def merge_key(self, path: str) -> str | None | object:
        for keys in (self.merge_keys, OBJECT_META_MERGE_KEYS):
            if path in keys:
                return keys[path]
        return _NOT_MERGED


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _bad_arg_type(expected: str, actual: JSON) -> UnknownError:
    return UnknownError(f"expected a {expected}, but received a {_go_type(actual)}")


def _no_merge_key(item: dict[str, JSON], merge_key: str) -> UnknownError:
    return UnknownError(f"map: {_go_value(item)} does not contain declared merge key: {merge_key}")


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, slash, rest = key.partition("/")
    if not slash or head != prefix:
        raise BadRequest(error)
    return rest


def _discard_nulls(value: JSON) -> JSON:
    if isinstance(value, dict):
        return {k: _discard_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_discard_nulls(v) for v in value]
    return value


def _remove_directives(value: JSON) -> tuple[JSON, bool]:
    """removeDirectives: a map carrying `$patch` is dropped, with the field holding it.

    The other directive keys are dropped too: kube-apiserver loses them when it decodes the
    result into a typed object, and here the result is stored as it is.
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        kept = {}
        for k, v in value.items():
            if k == _RETAIN_KEYS or k.startswith((_SET_ELEMENT_ORDER, _DELETE_FROM_PRIMITIVE_LIST)):
                continue
            cleaned, keep = _remove_directives(v)
            if keep:
                kept[k] = cleaned
        return kept, True
    if isinstance(value, list):
        out = []
        for item in value:
            cleaned, keep = _remove_directives(item)
            if keep:
                out.append(cleaned)
        return out, True
    return value, True


def _new_value(patch_value: JSON) -> tuple[JSON, bool]:
    """What a patch value becomes where the original has nothing to merge it with."""
    return _remove_directives(_discard_nulls(patch_value))


def _merge_map(original: dict[str, JSON] | None, patch: dict[str, JSON], path: str,
               rules: _Rules) -> dict[str, JSON]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == _REPLACE:
            return _new_value({k: v for k, v in patch.items() if k != _DIRECTIVE})[0]
        if directive == _DELETE:
            return {}
        raise UnknownError(f"unknown patch type: {directive} in map: {_go_value(patch)}")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, path, rules)
    for key, patch_value in patch.items():
        is_delete_list = key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
        if is_delete_list:
            key = _extract_key(key, _DELETE_FROM_PRIMITIVE_LIST, _BAD_PRIMITIVE_LIST)
        if patch_value is None:
            original.pop(key, None)
            continue
        if key not in original or type(original[key]) is not type(patch_value):
            if not is_delete_list:
                value, keep = _new_value(patch_value)
                if keep:
                    original[key] = value
                else:
                    original.pop(key, None)
            continue
        current = original[key]
        if isinstance(current, dict):
            original[key] = _merge_map(current, patch_value, _child(path, key), rules)
        elif isinstance(current, list):
            original[key] = _merge_list_field(
                current, patch_value, _child(path, key), rules, is_delete_list)
        else:
            original[key] = patch_value
    return original


def _apply_retain_keys(original: dict[str, JSON], patch: dict[str, JSON]) -> None:
    """`$retainKeys`: clear what the list omits; every key the patch sets must be listed."""
    if _RETAIN_KEYS not in patch:
        return
    retained = patch.pop(_RETAIN_KEYS)
    if not isinstance(retained, list):
        raise BadRequest(_BAD_RETAIN_KEYS)
    allowed = {k for k in retained if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
            continue
        if key not in allowed:
            raise BadRequest(_BAD_RETAIN_KEYS)
    for key in [k for k in original if k not in allowed]:
        del original[key]


def _merge_ordered_lists(original: dict[str, JSON], patch: dict[str, JSON], path: str,
                         rules: _Rules) -> None:
    """`$setElementOrder/<list>`: merge that list now and order it as the directive says."""
    for directive_key in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise _bad_arg_type("[]interface {}", order)
        key = _extract_key(directive_key, _SET_ELEMENT_ORDER, _BAD_SET_ELEMENT_ORDER)
        in_original, in_patch = key in original, key in patch
        original_list, patch_list = original.get(key), patch.get(key)
        if in_original and not isinstance(original_list, list):
            raise _bad_arg_type("[]interface {}", original_list)
        if in_patch and not isinstance(patch_list, list):
            raise _bad_arg_type("[]interface {}", patch_list)
        merge_key = rules.merge_key(_child(path, key))
        key_name = merge_key if isinstance(merge_key, str) else None
        _check_order(patch_list or [], order, key_name)
        if in_original and in_patch:
            merged = _merge_list_field(original_list or [], patch_list or [], _child(path, key),
                                       rules, False)
        elif in_original:
            merged = original_list or []
        elif in_patch:
            merged = _new_value(patch_list)[0]
        else:
            continue
        items, server_only = _partition(merged, order, key_name)
        is_map = _element_kind(original_list or [], patch_list or []) is dict
        original[key] = _normalize_order(items, server_only, order, original_list or [],
                                         key_name if is_map else None)
        patch.pop(key, None)


def _check_order(patch_list: list[JSON], order: list[JSON], merge_key: str | None) -> None:
    """validatePatchWithSetOrderList: the patch list must follow the order list."""
    if not patch_list or not order:
        return
    items = [i for i in patch_list if not _is_delete_item(i)] if merge_key else patch_list
    patch_index = order_index = 0
    while patch_index < len(items) and order_index < len(order):
        item = items[patch_index]
        if isinstance(item, dict) and _DIRECTIVE in item:
            patch_index += 1
            continue
        if _same_item(item, order[order_index], merge_key):
            patch_index += 1
        order_index += 1
    if patch_index < len(items):
        raise UnknownError(f"The order in patch list:\n{_go_value(patch_list)}\n doesn't match "
                           f"{_SET_ELEMENT_ORDER} list:\n{_go_value(order)}\n")


def _is_delete_item(item: JSON) -> bool:
    if not isinstance(item, dict):
        raise _bad_arg_type("map[string]interface {}", item)
    return item.get(_DIRECTIVE) == _DELETE


def _same_item(left: JSON, right: JSON, merge_key: str | None) -> bool:
    if merge_key is None:
        return bool(left == right)
    for item in (left, right):
        if not isinstance(item, dict):
            raise _bad_arg_type("map[string]interface {}", item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
    return bool(left[merge_key] == right[merge_key])


def _merge_list_field(original: list[JSON], patch: list[JSON], path: str, rules: _Rules,
                      is_delete_list: bool) -> list[JSON]:
    merge_key = rules.merge_key(path)
    if merge_key is _NOT_MERGED:
        return patch
    key_name = merge_key if isinstance(merge_key, str) else None
    return _merge_list(original, patch, path, key_name, rules, is_delete_list)


def _merge_list(original: list[JSON], patch: list[JSON], path: str, merge_key: str | None,
                rules: _Rules, is_delete_list: bool) -> list[JSON]:
    if not original and not patch:
        return original
    if _element_kind(original, patch) is not dict:
        if is_delete_list:
            return [v for v in original if v not in patch]
        merged = list(dict.fromkeys(original + patch))
        items, server_only = _partition(merged, patch, None)
        return _normalize_order(items, server_only, patch, original, None)
    if merge_key is None:
        raise UnknownError("cannot merge lists without merge key for type map")
    original, patch = _apply_element_directives(original, patch, merge_key)
    merged = _merge_by_key(original, patch, path, merge_key, rules)
    items, server_only = _partition(merged, patch, merge_key)
    return _normalize_order(items, server_only, patch, original, merge_key)


def _element_kind(*lists: list[JSON]) -> type | None:
    """sliceElementType: one element type for all lists, and never a list."""
    kind: type | None = None
    for items in lists:
        for item in items:
            item_kind = type(item)
            if kind is None:
                if item_kind is list:
                    raise rejected(_NO_LIST_OF_LISTS)
                kind = item_kind
            elif item_kind is not kind:
                raise UnknownError(f"list element types are not identical: "
                                   f"{_go_value(list(lists))}")
    return kind


def _apply_element_directives(original: list[JSON], patch: list[JSON],
                              merge_key: str) -> tuple[list[JSON], list[JSON]]:
    """`{"$patch": "delete", key: v}` drops matches; `{"$patch": "replace"}` replaces all."""
    plain: list[JSON] = []
    replace = False
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == _DELETE:
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            value = item[merge_key]
            original = [o for o in original if not _has_key_value(o, merge_key, value)]
        elif directive == _REPLACE:
            replace = True
        elif directive == _MERGE:
            raise UnknownError("merging lists cannot yet be specified in the patch")
        else:
            raise UnknownError(f"unknown patch type: {directive} in map: {_go_value(item)}")
    if replace:
        return [_new_value(item)[0] for item in plain], []
    return original, plain


def _has_key_value(item: dict[str, JSON], merge_key: str, value: JSON) -> bool:
    return merge_key in item and bool(item[merge_key] == value)


def _merge_by_key(original: list[JSON], patch: list[JSON], path: str, merge_key: str,
                  rules: _Rules) -> list[JSON]:
    merged = list(original)
    for item in patch:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        value = item[merge_key]
        index = next((i for i, o in enumerate(merged) if _has_key_value(o, merge_key, value)),
                     None)
        if index is None:
            merged.append(_new_value(item)[0])
        else:
            merged[index] = _merge_map(merged[index], item, path, rules)
    return merged


def _identity(item: JSON, merge_key: str | None) -> JSON:
    return item.get(merge_key) if merge_key is not None and isinstance(item, dict) else item


def _position(items: list[JSON], item: JSON, merge_key: str | None) -> int:
    wanted = _identity(item, merge_key)
    for index, candidate in enumerate(items):
        if _identity(candidate, merge_key) == wanted:
            return index
    return -1


def _partition(merged: list[JSON], present: list[JSON],
               merge_key: str | None) -> tuple[list[JSON], list[JSON]]:
    """Split `merged` into the items named in `present` and the server-only rest."""
    if merge_key is not None:
        for item in merged:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
    named: list[JSON] = []
    server_only: list[JSON] = []
    for item in merged:
        (named if _position(present, item, merge_key) >= 0 else server_only).append(item)
    return named, server_only


def _sorted_by(items: list[JSON], order: list[JSON], merge_key: str | None) -> list[JSON]:
    deletions: list[JSON] = []
    if merge_key is not None:
        for item in items + order:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
        deletions = [i for i in items if i.get(_DIRECTIVE) == _DELETE]
        items = [i for i in items if i.get(_DIRECTIVE) != _DELETE]

    def rank(item: JSON) -> int:
        position = _position(order, item, merge_key)
        return position if position >= 0 else len(order)

    return sorted(items, key=rank) + deletions


def _normalize_order(items: list[JSON], server_only: list[JSON], patch_order: list[JSON],
                     server_order: list[JSON], merge_key: str | None) -> list[JSON]:
    """normalizeElementOrder: patch items in patch order, server-only items in server order,
    interleaved by their places in the server's list (patch items first when in doubt)."""
    right = _sorted_by(items, patch_order, merge_key)
    left = _sorted_by(server_only, server_order, merge_key)
    out: list[JSON] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            left_at = _position(server_order, left[i], merge_key)
            right_at = _position(server_order, right[j], merge_key)
            if 0 <= left_at < right_at:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def apply_strategic_merge_patch(doc: dict[str, Any], patch: dict[str, Any], *,
                                merge_keys: Mapping[str, str | None]) -> dict[str, Any]:
    """Kubernetes strategic merge patch with a resource's patch strategies (`merge_keys`).

    Errors map as kube-apiserver maps them: a malformed directive is a 400, a list of lists
    a 422, anything else a 500.
    """
    if patch is None:
        return copy_json(doc)
    if not isinstance(patch, dict):
        raise BadRequest(f"json: cannot unmarshal {json_kind(patch)} into Go value of type "
                         "map[string]interface {}")
    return _merge_map(copy_json(doc), copy_json(patch), "", _Rules(merge_keys))


def _go_type(value: JSON) -> str:
    """The Go type encoding/json decodes `value` into, for messages that print it."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    return {dict: "map[string]interface {}", list: "[]interface {}", str: "string",
            float: "float64"}.get(type(value), type(value).__name__)



def _go_value(value: JSON) -> str:
    """fmt's %v of a decoded JSON value (maps print with sorted keys)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    return str(value)

