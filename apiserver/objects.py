"""Pure decisions about objects that every resource shares: server-set metadata, defaults,
what an update may change, deletion marks.

These are the generic halves of kube-apiserver's `rest.RESTCreateStrategy`/
`RESTUpdateStrategy` hooks (PrepareForCreate, PrepareForUpdate, BeforeDelete); what differs
between resources comes from each one's `Resource` (apiserver/resources/).
"""

from __future__ import annotations

import copy
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from common.timestamps import rfc3339

if TYPE_CHECKING:
    from apiserver.resources import Resource

# kube's generateName suffix alphabet (no vowels, no confusable digits), 5 characters.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_SET_META = ("uid", "creationTimestamp", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "generation", "resourceVersion", "selfLink")


def generate_name(prefix: str) -> str:
    # kube keeps the generated name within 63 characters: a 58-character prefix + 5
    prefix = prefix[:58]
    return prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def with_resource_version(obj: dict[str, Any], revision: int) -> dict[str, Any]:
    """A shallow copy of `obj` whose metadata carries `resourceVersion` (never stored)."""
    out = dict(obj)
    out["metadata"] = {**obj.get("metadata", {}), "resourceVersion": str(revision)}
    return out


def without_resource_version(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    if "resourceVersion" not in meta:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    return out


def with_type_meta(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of obj that starts with the kind and apiVersion it is stored as."""
    rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return {"kind": resource.kind, "apiVersion": resource.storage_api_version, **rest}


def prepare_for_create(resource: Resource, obj: dict[str, Any], *,
                       namespace: str | None, now: datetime | None = None) -> dict[str, Any]:
    """Set server-owned metadata; drop the status a client may not set on create."""
    out = with_type_meta(resource, obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_SET_META}
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(meta["generateName"])
    if resource.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = rfc3339(now)
    if resource.tracks_generation and (resource.has_status or "spec" in obj):
        meta["generation"] = 1
    out["metadata"] = meta
    if resource.has_status and not resource.keeps_status_on_create:
        out["status"] = {}
    return out


def default_object(resource: Resource, obj: dict[str, Any], *,
                   old: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of obj with Kubernetes' defaults filled in (explicit values are kept).

    On create (`old` is None) this also does what kube-apiserver's create path adds
    (pod `status.phase`/`qosClass`, pod priority, the namespace's `kubernetes`
    finalizer). On update pass the stored object as `old`: only the decode-time
    defaults apply, and a pod keeps its priority and preemptionPolicy, as the Priority
    admission plugin does.
    """
    out = copy.deepcopy(obj)
    resource.default(out, old)
    return out


def prepare_for_update(resource: Resource, new: dict[str, Any], old: dict[str, Any], *,
                       subresource: str | None) -> dict[str, Any]:
    """What an update keeps from the stored object.

    The main resource cannot change `status`; the status subresource can change only
    `status`. Server-set metadata always comes from the stored object, and
    `metadata.generation` goes up when the spec changes.
    """
    if subresource == "status":
        out = dict(old)
        out["status"] = new.get("status") or {}
        return out
    custom = resource.subresource_updates.get(subresource or "")
    if custom is not None:
        return custom.prepare(new, old)
    out = with_type_meta(resource, new)
    old_meta = old.get("metadata") or {}
    meta = {k: v for k, v in (new.get("metadata") or {}).items() if k not in _SERVER_SET_META}
    # rest.BeforeUpdate: timestamps and generation are the server's; a uid the client
    # sent must be the object's (validation refuses another), a missing one is kept
    for key in ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "generation"):
        if key in old_meta:
            meta[key] = old_meta[key]
    sent_uid = (new.get("metadata") or {}).get("uid")
    if sent_uid:
        meta["uid"] = sent_uid
    elif "uid" in old_meta:
        meta["uid"] = old_meta["uid"]
    meta["name"] = old_meta.get("name")
    if "namespace" in old_meta:
        meta["namespace"] = old_meta["namespace"]
    # kube keeps generateName as sent on the stored object unless changed explicitly
    if "generateName" in old_meta and "generateName" not in meta:
        meta["generateName"] = old_meta["generateName"]
    if resource.has_status:
        if "status" in old:
            out["status"] = old["status"]
        else:
            out.pop("status", None)
    if "generation" in old_meta and (new.get("spec") != old.get("spec") or (
            resource.generation_includes_annotations
            and meta.get("annotations") != old_meta.get("annotations"))):
        meta["generation"] = int(old_meta["generation"]) + 1
    out["metadata"] = meta
    return out


def mark_for_deletion(obj: dict[str, Any], grace: int, *,
                      now: datetime | None = None) -> dict[str, Any] | None:
    """Set deletionTimestamp/deletionGracePeriodSeconds; None when nothing would change.

    A second delete may shorten the grace period, never lengthen it (kube's
    BeforeDelete rule).
    """
    meta = obj.get("metadata") or {}
    current = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp") and current is not None and grace >= int(current):
        return None
    out = copy.copy(obj)
    when = (now or datetime.now(UTC)) + timedelta(seconds=grace)
    out["metadata"] = {**meta, "deletionTimestamp": rfc3339(when),
                       "deletionGracePeriodSeconds": grace}
    return out
