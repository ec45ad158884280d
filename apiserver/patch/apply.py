"""Server-side apply's field sets, on plain JSON documents: a port of what
sigs.k8s.io/structured-merge-diff does for kube-apiserver (fieldpath, typed.ToFieldSet,
typed.Compare, typed.Merge, merge.Updater's prune).

A field set is a `frozenset` of paths; a path is a tuple of path elements, each already in
FieldsV1 form: `f:spec` (a field), `k:{"name":"nginx"}` (an item of a list keyed by its
merge keys), `v:"a"` (an item of a set-like list of scalars), `i:0` (an index; unused by
core/v1). `to_fields_v1`/`from_fields_v1` turn a set into the FieldsV1 tree
(`{"f:spec": {"f:containers": {"k:{\\"name\\":\\"nginx\\"}": {".": {}, ...}}}}`) and back.

What is a struct, a map, a keyed list, a set or an atomic value comes from a `Shape`: the
resource's pydantic model (common.models) and its merge keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.patch.common import JSON, copy_json
from apiserver.schema import field_shapes
from common.models import KubeModel

Path = tuple[str, ...]
FieldSet = frozenset[Path]
EMPTY: FieldSet = frozenset()

# Keys kube lists with `+listMapKey` besides the strategic merge key (listType=map with
# several keys), and the defaults key fields get when the item leaves them out.
EXTRA_LIST_KEYS: dict[str, tuple[str, ...]] = {
    "ports": ("containerPort", "protocol"),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
}
KEY_DEFAULTS: dict[str, JSON] = {"protocol": "TCP"}
# The fields the field manager never tracks (structured-merge-diff's stripmeta).
STRIPPED: FieldSet = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata",),
    *(("f:metadata", f"f:{name}") for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
        "generation", "managedFields", "resourceVersion", "deletionTimestamp",
        "deletionGracePeriodSeconds")),
})


# --- shapes ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Shape:
    """What one value is: `kind` is struct, map, keyed (a list of maps with merge keys),
    set (a list of scalars merged as a set), atomic (replaced whole) or scalar."""

    kind: str
    model: type[KubeModel] | None = None  # the struct (of a struct, a map's or list's items)
    path: str = ""  # the merge-key path ("spec.containers.ports")
    keys: tuple[str, ...] = ()


class Schema:
    """The shapes of one resource's values, from its model and its merge keys."""

    def __init__(self, model: type[KubeModel], merge_keys: Mapping[str, str | None]) -> None:
        self.root = Shape("struct", model)
        self.merge_keys = {**merge_keys, "metadata.finalizers": None,
                           "metadata.ownerReferences": "uid"}
        self._children: dict[tuple[int, str, str], Shape] = {}

    def child(self, shape: Shape, key: str) -> Shape:
        """The shape of `key` inside a struct or map of `shape`."""
        cache_key = (id(shape.model), shape.path, key)
        found = self._children.get(cache_key)
        if found is None:
            found = self._child(shape, key)
            self._children[cache_key] = found
        return found

    def _child(self, shape: Shape, key: str) -> Shape:
        path = f"{shape.path}.{key}" if shape.path else key
        if shape.kind == "map":  # an entry of a map: a struct, or anything untyped
            return Shape("struct", shape.model, path) if shape.model else Shape("untyped")
        if shape.model is None:
            return Shape("untyped")
        field = field_shapes(shape.model).get(key)
        if field is None:
            return Shape("untyped")
        if field.go_type.startswith("[]"):
            merge_key = self.merge_keys.get(path, "")
            if field.model is not None and merge_key:
                keys = EXTRA_LIST_KEYS.get(key, (merge_key,))
                return Shape("keyed", field.model, path, tuple(sorted(keys)))
            if field.model is None and merge_key is None and path in self.merge_keys:
                return Shape("set", None, path)
            return Shape("atomic", None, path)
        if field.go_type.startswith("map["):
            return Shape("map", field.model, path)
        if field.model is not None:
            return Shape("struct", field.model, path)
        return Shape("scalar", None, path)

    def item(self, shape: Shape) -> Shape:
        """The shape of an item of a keyed list."""
        return Shape("struct", shape.model, shape.path)


def _dumps(value: JSON) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def item_element(shape: Shape, item: JSON) -> str:
    """The path element of a list item: `k:{"containerPort":80,"protocol":"TCP"}`, `v:"a"`."""
    if shape.kind == "set":
        return "v:" + _dumps(item)
    key = {}
    for name in shape.keys:
        value = item.get(name) if isinstance(item, dict) else None
        if value is None:
            value = KEY_DEFAULTS.get(name)
        if value is not None:
            key[name] = value
    return "k:" + _dumps(key)


def _is_struct_like(shape: Shape) -> bool:
    return shape.kind in ("struct", "untyped")


# --- field sets of values --------------------------------------------------------------

def field_set(schema: Schema, obj: JSON) -> FieldSet:
    """typed.ToFieldSet: every leaf, every list item, every map entry, every empty or null
    value; struct fields with content are not members themselves. Untracked metadata is
    left out."""
    out: set[Path] = set()
    _walk(schema, schema.root, obj, (), out, added=False)
    return frozenset(out) - STRIPPED


def added_set(schema: Schema, obj: JSON, shape: Shape, path: Path) -> set[Path]:
    """Every path of a value that is new (the value itself included): typed.Compare's
    Added for a subtree the old object did not have."""
    out: set[Path] = set()
    _walk(schema, shape, obj, path, out, added=True)
    out.add(path)
    return out


def _walk(schema: Schema, shape: Shape, value: JSON, path: Path, out: set[Path], *,
          added: bool) -> None:
    if isinstance(value, dict) and shape.kind in ("struct", "map", "untyped"):
        for key, child in value.items():
            child_shape = schema.child(shape, key)
            child_path = (*path, "f:" + key)
            if added or child is None or child == {} or shape.kind != "struct":
                out.add(child_path)
            _walk(schema, child_shape, child, child_path, out, added=added)
    elif isinstance(value, list) and shape.kind in ("keyed", "set"):
        if added:
            out.add(path)
        item_shape = schema.item(shape)
        for item in value:
            item_path = (*path, item_element(shape, item))
            out.add(item_path)
            if shape.kind == "keyed":
                _walk(schema, item_shape, item, item_path, out, added=added)
    elif path:
        out.add(path)


@dataclass(frozen=True, slots=True)
class Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    @property
    def changed(self) -> FieldSet:
        return self.added | self.modified


def compare(schema: Schema, old: JSON, new: JSON) -> Comparison:
    """typed.Compare of two objects: what `new` adds, modifies and removes."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    _compare(schema, schema.root, old, new, (), added, modified, removed)
    return Comparison(frozenset(added) - STRIPPED, frozenset(modified) - STRIPPED,
                      frozenset(removed) - STRIPPED)


def _compare(schema: Schema, shape: Shape, old: JSON, new: JSON, path: Path,
             added: set[Path], modified: set[Path], removed: set[Path]) -> None:
    if isinstance(old, dict) and isinstance(new, dict) and shape.kind in (
            "struct", "map", "untyped"):
        for key, value in new.items():
            child_shape = schema.child(shape, key)
            child_path = (*path, "f:" + key)
            previous = old.get(key)
            if previous is None and isinstance(value, list) and child_shape.kind in (
                    "keyed", "set") and key in old:
                previous = []  # a null list (Go's nil slice) is an empty one
            if previous is None and (key not in old or value is not None):
                added |= added_set(schema, value, child_shape, child_path)
            else:
                _compare(schema, child_shape, previous, value, child_path,
                         added, modified, removed)
        for key, value in old.items():
            if key not in new:
                child_path = (*path, "f:" + key)
                removed |= added_set(schema, value, schema.child(shape, key), child_path)
        return
    if isinstance(old, list) and isinstance(new, list) and shape.kind in ("keyed", "set"):
        item_shape = schema.item(shape)
        old_items = {item_element(shape, item): item for item in old}
        new_items = {item_element(shape, item): item for item in new}
        for element, item in new_items.items():
            item_path = (*path, element)
            if element not in old_items:
                added |= (added_set(schema, item, item_shape, item_path) if shape.kind == "keyed"
                          else {item_path})
            elif shape.kind == "keyed":
                _compare(schema, item_shape, old_items[element], item, item_path,
                         added, modified, removed)
        for element, item in old_items.items():
            if element not in new_items:
                item_path = (*path, element)
                removed |= (added_set(schema, item, item_shape, item_path)
                            if shape.kind == "keyed" else {item_path})
        return
    if old != new:
        modified.add(path)


# --- merge and prune ---------------------------------------------------------------------

def merge(schema: Schema, live: JSON, config: JSON) -> JSON:
    """typed.Merge: the applied configuration over the live object. Maps and structs merge
    key by key, keyed lists item by item, sets as sets; anything else is replaced."""
    return _merge(schema, schema.root, copy_json(live), config)


def _merge(schema: Schema, shape: Shape, live: JSON, config: JSON) -> JSON:
    if isinstance(live, dict) and isinstance(config, dict) and shape.kind in (
            "struct", "map", "untyped"):
        for key, value in config.items():
            if value is None:
                live.pop(key, None)
            elif key in live:
                live[key] = _merge(schema, schema.child(shape, key), live[key], value)
            else:
                live[key] = copy_json(value)
        return live
    if isinstance(live, list) and isinstance(config, list) and shape.kind in ("keyed", "set"):
        positions = {item_element(shape, item): i for i, item in enumerate(live)}
        for item in config:
            element = item_element(shape, item)
            if element not in positions:
                positions[element] = len(live)
                live.append(copy_json(item))
            elif shape.kind == "keyed":
                i = positions[element]
                live[i] = _merge(schema, schema.item(shape), live[i], item)
        return live
    return copy_json(config)


def remove_paths(schema: Schema, obj: JSON, paths: Iterable[Path]) -> JSON:
    """`obj` without the values at `paths` (fields, list items); missing ones are skipped."""
    out = copy_json(obj)
    for path in sorted(paths, key=len, reverse=True):
        _remove(schema, schema.root, out, path)
    return out


def _remove(schema: Schema, shape: Shape, value: JSON, path: Path) -> None:
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and head.startswith("f:"):
        key = head[2:]
        if key not in value:
            return
        if not rest:
            del value[key]
        else:
            _remove(schema, schema.child(shape, key), value[key], rest)
        return
    if isinstance(value, list) and shape.kind in ("keyed", "set"):
        for i, item in enumerate(value):
            if item_element(shape, item) == head:
                if not rest:
                    del value[i]
                elif shape.kind == "keyed":
                    _remove(schema, schema.item(shape), item, rest)
                return


def prune(schema: Schema, merged: JSON, last: FieldSet, applied: FieldSet,
          others: FieldSet) -> JSON:
    """merge.Updater's prune: what the manager applied last time and leaves out now is
    removed, unless someone (another manager, or the new configuration) still owns it or
    something inside it."""
    kept = applied | others
    owned_prefixes = {p[:i] for p in kept for i in range(1, len(p) + 1)}
    gone = [p for p in last - applied if p not in owned_prefixes]
    return remove_paths(schema, merged, gone) if gone else merged


# --- FieldsV1 ----------------------------------------------------------------------------

def _element_order(element: str) -> tuple[int, str]:
    return ("fkvi".find(element[0]), element)


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 tree of a set: `{}` for a member leaf, `".": {}` for a member with
    children; children in structured-merge-diff's order (fields, keys, values, indices)."""
    tree: dict[str, Any] = {}
    members: set[Path] = set()
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        members.add(path)
    return _sorted_tree(tree, (), members)


def _sorted_tree(node: dict[str, Any], path: Path, members: set[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node and path in members:
        out["."] = {}
    for element in sorted(node, key=_element_order):
        out[element] = _sorted_tree(node[element], (*path, element), members)
    return out


def from_fields_v1(tree: Any) -> FieldSet:
    """The set a FieldsV1 tree describes; ValueError when it is not one."""
    out: set[Path] = set()
    _read_tree(tree, (), out)
    return frozenset(out)


def _read_tree(node: Any, path: Path, out: set[Path]) -> None:
    if not isinstance(node, dict):
        raise ValueError(f"expected an object at {path_string(path) or '.'}")
    if not node and path:
        out.add(path)
    for element, child in node.items():
        if element == ".":
            if path:
                out.add(path)
            continue
        if len(element) < 2 or element[0] not in "fkvi" or element[1] != ":":
            raise ValueError(f"unknown path element {element!r}")
        if element[0] in "kv":
            json.loads(element[2:])  # ValueError when it is not JSON
        _read_tree(child, (*path, element), out)


def path_string(path: Path) -> str:
    """fieldpath.Path.String(): `.spec.containers[name="nginx"].image`."""
    parts = []
    for element in path:
        kind, text = element[0], element[2:]
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            key = json.loads(text)
            parts.append("[" + ",".join(f"{k}={_dumps(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


def tree_has(tree: Mapping[str, Any], path: Path) -> bool:
    """Whether a FieldsV1 tree's set holds `path` (without reading the whole tree)."""
    node: Any = tree
    for element in path:
        node = node.get(element) if isinstance(node, dict) else None
        if node is None:
            return False
    return node == {} or "." in node


def under(paths: FieldSet, prefix: Path) -> FieldSet:
    """The paths of `paths` inside `prefix`."""
    return frozenset(p for p in paths if p[:len(prefix)] == prefix)


# --- a new object's fields, straight to FieldsV1 (the create path) -------------------------

def new_object_tree(schema: Schema, obj: JSON, present: Mapping[str, JSON],
                    skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """to_fields_v1(compare(present, obj).added) in one pass, for an object compared with
    the kind's zero value `present` (whose top-level structs exist, so are not added
    themselves); top-level fields in `skip` are left out."""
    out: dict[str, Any] = {}
    root = schema.root
    for key in sorted(obj):
        if key in skip or key in ("apiVersion", "kind"):
            continue
        shape = schema.child(root, key)
        value = obj[key]
        if key not in present or not isinstance(value, dict):
            out["f:" + key] = _added_tree(schema, shape, value)
            continue
        node = _present_tree(schema, shape, value, present[key] or {},
                             key == "metadata")
        if node:
            out["f:" + key] = node
    return out


def _present_tree(schema: Schema, shape: Shape, value: dict[str, JSON], zero: dict[str, JSON],
                  metadata: bool) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for key in sorted(value):
        if metadata and ("f:metadata", "f:" + key) in STRIPPED:
            continue
        child_shape = schema.child(shape, key)
        child = value[key]
        if key in zero and isinstance(child, list) and child_shape.kind in ("keyed", "set"):
            items = _items_tree(schema, child_shape, child)  # a nil list: only its items
            if items:
                node["f:" + key] = items
        else:
            node["f:" + key] = _added_tree(schema, child_shape, child)
    return node


def _items_tree(schema: Schema, shape: Shape, items: list[JSON]) -> dict[str, Any]:
    item_shape = schema.item(shape)
    elements = {item_element(shape, item): item for item in items}
    return {element: (_added_tree(schema, item_shape, elements[element])
                      if shape.kind == "keyed" else {})
            for element in sorted(elements)}


def _added_tree(schema: Schema, shape: Shape, value: JSON) -> dict[str, Any]:
    if isinstance(value, dict) and value and shape.kind in ("struct", "map", "untyped"):
        node: dict[str, Any] = {".": {}}
        for key in sorted(value):
            node["f:" + key] = _added_tree(schema, schema.child(shape, key), value[key])
        return node
    if isinstance(value, list) and value and shape.kind in ("keyed", "set"):
        return {".": {}, **_items_tree(schema, shape, value)}
    return {}
