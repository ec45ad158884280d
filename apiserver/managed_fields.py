"""metadata.managedFields: who manages which fields of an object (kube-apiserver's
fieldmanager package over structured-merge-diff's Updater).

Every write records its manager. A create, update or non-apply patch is an `Update`
operation: its manager gains the fields it added or changed, and those fields (and the
ones it removed) leave the other managers. An apply (`Apply`) sets the fields of the
applied configuration, removes what the manager applied before and omits now (unless
someone else owns it), and refuses to change a field another manager owns (409, unless
forced). The field sets are apiserver/patch/apply.py's.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from apiserver import validation
from apiserver.patch import apply as fields
from apiserver.patch.apply import EMPTY, Comparison, FieldSet, Schema
from apiserver.resources import Resource
from common import errors
from common.timestamps import rfc3339

Object = dict[str, Any]
APPLY, UPDATE = "Apply", "Update"
FIELD_MANAGER_MAX_LENGTH = 128
# kubectl's client-side apply, and the annotation it keeps its last configuration in
CLIENT_SIDE_APPLY = "kubectl-client-side-apply"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ANNOTATIONS_SIZE_LIMIT = 256 * 1024
BEFORE_FIRST_APPLY = "before-first-apply"
STATUS: fields.Path = ("f:status",)


@dataclass(frozen=True, slots=True)
class Entry:
    """One managedFields entry. Its field set is read from its FieldsV1 tree only when
    needed: most writes touch none of the other managers' fields, and their entries are
    written back as they were read."""

    manager: str
    operation: str
    api_version: str
    tree: dict[str, Any]  # FieldsV1
    time: str | None = None
    subresource: str = ""
    _fields: list[FieldSet] = field(default_factory=list, compare=False, repr=False)

    @property
    def fields(self) -> FieldSet:
        if not self._fields:
            self._fields.append(fields.from_fields_v1(self.tree))
        return self._fields[0]

    def with_fields(self, paths: FieldSet, *, time: str | None = None) -> Entry:
        return Entry(self.manager, self.operation, self.api_version,
                     fields.to_fields_v1(paths), time if time is not None else self.time,
                     self.subresource, [paths])

    def touches(self, paths: FieldSet) -> bool:
        return any(fields.tree_has(self.tree, path) for path in paths)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """BuildManagerIdentifier: an Apply is one manager whatever its version."""
        version = self.api_version if self.operation == UPDATE else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """How a conflict names the manager (printManager)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text

    def encode(self) -> Object:
        out: Object = {"manager": self.manager, "operation": self.operation,
                       "apiVersion": self.api_version}
        if self.time is not None:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = self.tree
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def new_entry(manager: str, operation: str, api_version: str, subresource: str | None,
              ) -> Entry:
    return Entry(manager, operation, api_version, {}, None, subresource or "", [EMPTY])


Managers = dict[tuple[str, str, str, str], Entry]


@functools.cache
def schema_of(resource: Resource) -> Schema:
    return Schema(resource.model, resource.merge_keys)


# --- who is writing ----------------------------------------------------------------------

def manager_name(query: Mapping[str, str], user_agent: str | None) -> str:
    """`?fieldManager=`, else the User-Agent's product (`kubectl/v1.37.1 (...)` ->
    `kubectl`), as kube's prefixFromUserAgent does."""
    explicit = query.get("fieldManager")
    if explicit:
        return explicit
    return (user_agent or "").split("/", 1)[0][:FIELD_MANAGER_MAX_LENGTH]


def field_manager_causes(manager: str, field: str = "fieldManager") -> list[dict[str, str]]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        return [validation.cause("FieldValueTooLong", field, manager,
                                 f"may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes")]
    if any(not c.isprintable() for c in manager):
        return [validation.invalid(field, manager, "must only contain printable characters")]
    return []


def check_patch_options(query: Mapping[str, str], *, apply: bool) -> None:
    """ValidatePatchOptions: apply needs a fieldManager; only apply may force."""
    causes = []
    if not apply and "force" in query:
        causes.append(validation.forbidden("force", "may not be specified for non-apply patch"))
    if apply and not query.get("fieldManager"):
        causes.append(validation.required("fieldManager", "is required for apply patch"))
    causes += field_manager_causes(query.get("fieldManager", ""))
    if causes:
        raise _patch_options_invalid(causes)


def check_field_manager(query: Mapping[str, str], options_kind: str) -> None:
    """ValidateCreateOptions/ValidateUpdateOptions' check of `fieldManager`."""
    manager = query.get("fieldManager")
    causes = field_manager_causes(manager) if manager else []
    if causes:
        raise _patch_options_invalid(causes, options_kind)


def _patch_options_invalid(causes: list[dict[str, str]],
                           options_kind: str = "PatchOptions") -> errors.Invalid:
    err = errors.invalid(f"{options_kind}.meta.k8s.io", "", causes, group="meta.k8s.io")
    err.details["kind"] = options_kind
    return err


# --- managedFields <-> entries -----------------------------------------------------------

def validate(managed: Any) -> list[dict[str, str]]:
    """ValidateManagedFields: what an object's managedFields may hold."""
    if managed is None or is_reset(managed):
        return []
    causes = []
    for i, entry in enumerate(managed if isinstance(managed, list) else []):
        path = f"metadata.managedFields[{i}]"
        if not isinstance(entry, dict):
            continue
        if entry.get("operation") not in (APPLY, UPDATE):
            causes.append(validation.invalid(f"{path}.operation", entry.get("operation", ""),
                                             "must be `Apply` or `Update`"))
        if entry.get("fieldsType") not in (None, "", "FieldsV1"):
            causes.append(validation.invalid(f"{path}.fieldsType", entry.get("fieldsType"),
                                             "must be `FieldsV1`"))
        causes += field_manager_causes(str(entry.get("manager") or ""), f"{path}.manager")
    return causes


def decode(managed: Any, *, check: bool = False) -> Managers | None:
    """The entries of managedFields; None when they cannot be read (DecodeManagedFields).
    Stored entries are the server's own; a client's are `check`ed."""
    out: Managers = {}
    if not managed:
        return out
    if not isinstance(managed, list):
        return None
    try:
        for raw in managed:
            tree = raw.get("fieldsV1") or {}
            entry = Entry(manager=str(raw.get("manager") or ""),
                          operation=str(raw.get("operation") or ""),
                          api_version=str(raw.get("apiVersion") or ""), tree=tree,
                          time=raw.get("time"), subresource=str(raw.get("subresource") or ""))
            if check:
                entry.fields  # noqa: B018 (reads the tree: ValueError when it is not FieldsV1)
            out[entry.key] = entry
    except (AttributeError, ValueError):
        return None
    return out


def encode(managers: Managers) -> list[Object]:
    """managedFields in kube's order: operation, then time, manager, version, subresource."""
    entries = sorted(managers.values(), key=lambda e: (e.operation, e.time or "", e.manager,
                                                         e.api_version, e.subresource))
    return [e.encode() for e in entries if e.tree]


def is_reset(managed: Any) -> bool:
    """`managedFields: [{}]` asks to clear them."""
    return isinstance(managed, list) and len(managed) == 1 and managed[0] == {}


def managed_of(obj: Object | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("managedFields")


def with_managed(obj: Object, managed: list[Object]) -> Object:
    out = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if managed:
        meta["managedFields"] = managed
    out["metadata"] = meta
    return out


def base_managers(live: Object | None, new: Object, subresource: str | None) -> Managers:
    """decodeLiveOrNew: managedFields a client sent replace the live ones (a subresource
    cannot change them); `[{}]` clears them; unreadable or empty ones keep the live ones."""
    live_managers = decode(managed_of(live)) or {}
    if subresource:
        return live_managers
    sent = managed_of(new)
    if is_reset(sent):
        return {}
    if not sent or sent == managed_of(live):
        return live_managers
    decoded = decode(sent, check=True)
    return decoded if decoded else live_managers


# --- the field sets an operation touches -------------------------------------------------

def empty_object(resource: Resource) -> Object:
    """What kube compares a new object with: the kind's zero value (structs present, a
    pod's containers a nil list)."""
    shapes = resource.model.model_fields
    out: Object = {"metadata": {}}
    if "spec" in shapes:
        out["spec"] = {"containers": None} if resource.kind == "Pod" else {}
    if "status" in shapes:
        out["status"] = {}
    return out


def tracked(resource: Resource, paths: FieldSet, subresource: str | None) -> FieldSet:
    """The status wiping of each strategy's ResetFields: the main resource does not own
    status, the status subresource owns nothing else."""
    if not resource.has_status:
        return paths
    status = fields.under(paths, STATUS)
    return status if subresource == "status" else paths - status


def comparison(resource: Resource, old: Object | None, new: Object,
               subresource: str | None) -> Comparison:
    """What a write changes in the fields it may own (compared in those parts only)."""
    old = old if old is not None else empty_object(resource)
    if resource.has_status and subresource == "status":
        old, new = {"status": old.get("status")}, {"status": new.get("status")}
    elif resource.has_status:
        old = {k: v for k, v in old.items() if k != "status"}
        new = {k: v for k, v in new.items() if k != "status"}
    cmp = fields.compare(schema_of(resource), old, new)
    return Comparison(tracked(resource, cmp.added, subresource),
                      tracked(resource, cmp.modified, subresource),
                      tracked(resource, cmp.removed, subresource))


def _drop(managers: Managers, key: tuple[str, str, str, str], paths: FieldSet) -> None:
    for other, entry in list(managers.items()):
        if other != key and entry.touches(paths):
            managers[other] = entry.with_fields(entry.fields - paths)


# --- the cap on Update entries ----------------------------------------------------------

MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"


def cap_update_managers(managers: Managers) -> Managers:
    """capManagersManager: past 10 Update entries the oldest are merged, per version, into
    one `ancient-changes` entry (with the time of the newest one merged)."""
    updaters = sorted((k for k, e in managers.items() if e.operation == UPDATE),
                      key=lambda k: (managers[k].time or "", k))
    count = len(updaters)
    if count <= MAX_UPDATE_MANAGERS:
        return managers
    out = dict(managers)
    first_of_version: dict[str, tuple[str, str, str, str]] = {}
    for key in updaters:
        if count <= MAX_UPDATE_MANAGERS:
            break
        entry = out[key]
        bucket = new_entry(ANCIENT_CHANGES, UPDATE, entry.api_version, None)
        first = first_of_version.get(entry.api_version)
        if first is None or key == bucket.key:
            first_of_version.setdefault(entry.api_version, key)
            continue
        if bucket.key not in out:
            out[bucket.key] = bucket.with_fields(out.pop(first).fields)
        merged = out[bucket.key].fields | entry.fields
        del out[key]
        out[bucket.key] = bucket.with_fields(merged, time=entry.time)
        count -= 1
    return out


# --- Update ------------------------------------------------------------------------------

def record_update(resource: Resource, live: Object | None, new: Object, *, manager: str,
                  subresource: str | None, now: str | None = None) -> Object:
    """`new` with the managedFields of an Update by `manager` (live None: a create)."""
    managers = base_managers(live, new, subresource)
    cmp = comparison(resource, live, new, subresource)
    changed = cmp.changed
    if not changed and not cmp.removed:
        if live is not None and managers == (decode(managed_of(live)) or {}):
            return with_managed(new, managed_of(live) or [])
        return with_managed(new, encode(managers))
    _drop(managers, ("", "", "", ""), changed | cmp.removed)
    entry = new_entry(manager, UPDATE, resource.api_version, subresource)
    previous = managers.get(entry.key)
    if changed:
        mine = changed | (previous.fields if previous else EMPTY)
        managers[entry.key] = entry.with_fields(mine, time=now or rfc3339())
    elif previous is not None:
        managers[entry.key] = previous
    return with_managed(new, encode(cap_update_managers(managers)))


# --- create ------------------------------------------------------------------------------

_CREATE_TREES: dict[tuple[int, bytes, tuple[tuple[str, ...], ...]], dict[str, Any]] = {}
_CREATE_TREES_MAX = 512


def create_tree(resource: Resource, obj: Object, sent: Object | None = None) -> dict[str, Any]:
    """The FieldsV1 of everything a new object has (but the admission defaults the client
    did not send), remembered per object shape and content: creates of the same pod under
    other names cost one JSON encoding. The tree is shared: never change it."""
    meta = obj.get("metadata") or {}
    kept_meta = {k: v for k, v in meta.items()
                 if ("f:metadata", "f:" + k) not in fields.STRIPPED}
    admitted = tuple(path for path in resource.admission_defaults
                     if not _has(sent, path)) if sent is not None else ()
    cache_key = (id(resource), orjson.dumps({**obj, "metadata": kept_meta}), admitted)
    tree = _CREATE_TREES.get(cache_key)
    if tree is None:
        skip = frozenset({"status"}) if resource.has_status else frozenset()
        tree = fields.new_object_tree(schema_of(resource), _without(obj, admitted),
                                      empty_object(resource), skip)
        if len(_CREATE_TREES) >= _CREATE_TREES_MAX:
            _CREATE_TREES.clear()
        _CREATE_TREES[cache_key] = tree
    return tree


def _has(obj: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return False
        obj = obj[key]
    return True


def _without(obj: Object, paths: tuple[tuple[str, ...], ...]) -> Object:
    """A copy of `obj` without the (two-level) `paths`."""
    out = dict(obj)
    for head, *rest in paths:
        if rest and isinstance(out.get(head), dict):
            out[head] = {k: v for k, v in out[head].items() if k != rest[0]}
    return out


def record_create(resource: Resource, obj: Object, *, manager: str,
                  sent: Object | None = None, now: str | None = None) -> Object:
    """A new object with the managedFields of its create (an Update by `manager`);
    `sent` is the object as the client sent it (before any defaults)."""
    managed = managed_of(obj)
    if managed and not is_reset(managed):
        recorded = record_update(resource, None, _without(obj, _not_sent(resource, sent)),
                                 manager=manager, subresource=None, now=now)
        return with_managed(obj, managed_of(recorded) or [])
    tree = create_tree(resource, obj, sent)
    if not tree:
        return with_managed(obj, [])
    entry = {"manager": manager, "operation": UPDATE, "apiVersion": resource.api_version,
             "time": now or rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": tree}
    return with_managed(obj, [entry])


def _not_sent(resource: Resource, sent: Object | None) -> tuple[tuple[str, ...], ...]:
    if sent is None:
        return ()
    return tuple(path for path in resource.admission_defaults if not _has(sent, path))


# --- Apply -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Conflict:
    entry: Entry
    path: fields.Path


def conflict_error(conflicts: list[Conflict]) -> errors.Conflict:
    """NewApplyConflict, worded as kube's getConflictMessage."""
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {c.entry.describe()}",
               "field": fields.path_string(c.path)} for c in conflicts]
    if len(conflicts) == 1:
        c = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {c.entry.describe()}: "
                   f"{fields.path_string(c.path)}")
    else:
        lines = []
        for described in sorted({c.entry.describe() for c in conflicts}):
            lines.append(f"conflicts with {described}:")
            lines += [f"- {fields.path_string(c.path)}" for c in conflicts
                      if c.entry.describe() == described]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, details={"causes": causes})


def find_conflicts(managers: Managers, key: tuple[str, str, str, str],
                   changed: FieldSet) -> list[Conflict]:
    out = []
    for other, entry in managers.items():
        if other != key and entry.touches(changed):
            out += [Conflict(entry, path) for path in sorted(entry.fields & changed)]
    return sorted(out, key=lambda c: (c.entry.manager, c.path))


def allowed_by_last_applied(resource: Resource, live: Object | None) -> FieldSet:
    """lastAppliedManager's allowed conflicts: the fields of client-side apply's last
    configuration (the annotation) that still have the values it gave them."""
    text = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text or live is None:
        return EMPTY
    try:
        config = json.loads(text)
    except ValueError:
        return EMPTY
    if not isinstance(config, dict):
        return EMPTY
    schema = schema_of(resource)
    cmp = fields.compare(schema, config, live)
    return fields.field_set(schema, config) - cmp.added - cmp.modified - cmp.removed


def unresolved(resource: Resource, live: Object | None, manager: str,
               conflicts: list[Conflict]) -> list[Conflict]:
    """The conflicts left once `kubectl apply --server-side` (the manager `kubectl`) takes
    over what client-side apply last applied and nobody changed since (kube's upgrade)."""
    if manager != "kubectl" or not conflicts:
        return conflicts
    allowed = allowed_by_last_applied(resource, live)
    return [c for c in conflicts if c.path not in allowed]


def sync_last_applied(live: Object | None, new: Object, config: Object, manager: str) -> Object:
    """lastAppliedUpdater: kubectl's server-side apply keeps an existing last-applied
    annotation in step with what it applied, so client-side apply can follow."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    if manager != "kubectl" or LAST_APPLIED not in annotations:
        return new
    applied = json.loads(json.dumps(config))
    applied_meta = applied.get("metadata") or {}
    if isinstance(applied_meta.get("annotations"), dict):
        applied_meta["annotations"].pop(LAST_APPLIED, None)
    # encoded as Go's json.Encoder encodes a map: keys sorted, a newline at the end
    text = json.dumps(applied, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    out = dict(new)
    meta = dict(out.get("metadata") or {})
    annotations = {**(meta.get("annotations") or {}), LAST_APPLIED: text + "\n"}
    if sum(len(k) + len(v) for k, v in annotations.items()) > ANNOTATIONS_SIZE_LIMIT:
        del annotations[LAST_APPLIED]  # kube drops what would not fit
    meta["annotations"] = annotations
    out["metadata"] = meta
    return out


def record_apply(resource: Resource, live: Object | None, config: Object, *, manager: str,
                 subresource: str | None, force: bool, now: str | None = None) -> Object:
    """The object an apply of `config` by `manager` makes of `live` (None: it creates),
    with its managedFields; a 409 on conflicts unless `force`."""
    schema = schema_of(resource)
    managers = decode(managed_of(live)) or {}
    if live is not None and not managers:
        # skipNonAppliedManager: what an object without managedFields has belongs to
        # `before-first-apply`, so the first apply conflicts with it as with anyone
        managers = decode(managed_of(record_update(
            resource, None, with_managed(live, []), manager=BEFORE_FIRST_APPLY,
            subresource=None, now=now))) or {}
    entry = new_entry(manager, APPLY, resource.api_version, subresource)
    applied = tracked(resource, fields.field_set(schema, config), subresource)
    previous = managers.get(entry.key)
    others = frozenset().union(*(e.fields for k, e in managers.items() if k != entry.key))
    base = live if live is not None else {}
    merged = fields.merge(schema, base, config)
    merged = fields.prune(schema, merged, previous.fields if previous else EMPTY, applied, others)
    cmp = comparison(resource, live, merged, subresource)
    conflicts = find_conflicts(managers, entry.key, cmp.changed)
    if conflicts and not force:
        conflicts = unresolved(resource, live, manager, conflicts)
        if conflicts:
            raise conflict_error(conflicts)
    _drop(managers, entry.key, cmp.changed | cmp.removed)
    unchanged = live is not None and fields.compare(schema, live, merged) == Comparison(
        EMPTY, EMPTY, EMPTY)
    time = previous.time if unchanged and previous else (now or rfc3339())
    managers[entry.key] = entry.with_fields(applied, time=time)
    merged = sync_last_applied(live, merged, config, manager)
    return with_managed(merged, encode(managers))
