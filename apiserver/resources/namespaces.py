"""Namespaces: the strategy of pkg/registry/core/namespace (defaults, validation, field
selectors, the Table, merge keys) and the NamespaceLifecycle rules the store applies.

Deleting a namespace with finalizers (`spec.finalizers: [kubernetes]` from its create on)
marks it `Terminating` (deletionTimestamp, phase), and from then on nothing may be created
in it; the controller-manager's namespace controller (controller_manager/namespace.py)
empties it and removes `kubernetes` through the `namespaces/finalize` sub-resource; the
update that leaves both `spec.finalizers` and `metadata.finalizers` empty removes it
(ShouldDeleteNamespaceDuringUpdate). The built-in namespaces cannot be deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiserver.auth.podsecurity import policy_from_labels, policy_labels
from apiserver.resources.base import Resource, SubresourceUpdate
from apiserver.selectors import SelectableFields, field_text, object_meta_fields
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    STANDARD_FINALIZERS,
    Cause,
    invalid,
    is_qualified_name,
    name_is_dns_label,
    validate_object_meta,
)
from common import errors
from common.models import Namespace
from common.timestamps import rfc3339

log = logging.getLogger("apiserver.namespaces")

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
IMMORTAL = frozenset({"default", "kube-system", "kube-public"})


# --- defaults (SetDefaults_Namespace, PrepareForCreate) -----------------------------------

def default_namespace(namespace: dict[str, Any], old: dict[str, Any] | None) -> None:
    metadata = namespace.setdefault("metadata", {})
    name = metadata.get("name")
    if name:
        labels = metadata.get("labels") or {}
        metadata["labels"] = {**labels, NAMESPACE_NAME_LABEL: name}
    if old is None:  # PrepareForCreate: removable later, so not a decode-time default
        spec = namespace.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]
    namespace.setdefault("status", {}).setdefault("phase", "Active")


# --- validation (ValidateNamespace) -------------------------------------------------------

def validate_namespace(namespace: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(namespace.get("metadata") or {}, namespaced=False,
                                name_check=name_is_dns_label)
    for finalizer in (namespace.get("spec") or {}).get("finalizers") or []:
        errs += [invalid("spec.finalizers", finalizer, m) for m in is_qualified_name(finalizer)]
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
            errs.append(invalid("spec.finalizers", finalizer,
                                "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def pod_security_label_causes(namespace: dict[str, Any]) -> list[Cause]:
    """PodSecurity's namespace admission: its labels must name a level and a version."""
    meta = namespace.get("metadata") or {}
    _, causes = policy_from_labels(meta.get("labels") or {}, str(meta.get("name") or ""))
    return causes


def validate_create(namespace: dict[str, Any]) -> list[Cause]:
    return validate_namespace(namespace) + pod_security_label_causes(namespace)


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """As on create; PodSecurity's labels are checked only when they change, as kube does,
    so that a namespace stored with a bad label can still be finalized."""
    causes = validate_namespace(new)
    new_labels = policy_labels((new.get("metadata") or {}).get("labels") or {})
    if new_labels != policy_labels((old.get("metadata") or {}).get("labels") or {}):
        causes += pod_security_label_causes(new)
    return causes


# --- lifecycle -------------------------------------------------------------------------------

def forbidden_delete(name: str) -> errors.Forbidden:
    return errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                            details={"name": name, "kind": "namespaces"})


def forbidden_create(resource_name: str, name: str, namespace: str) -> errors.Forbidden:
    return errors.Forbidden(
        f'{resource_name} "{name}" is forbidden: unable to create new content in namespace '
        f'{namespace} because it is being terminated',
        details={"name": name, "kind": resource_name})


def check_create(terminating: bool, resource_name: str, name: str, namespace: str) -> None:
    """NamespaceLifecycle: nothing new in a namespace being terminated."""
    if terminating:
        raise forbidden_create(resource_name, name, namespace)


def mark_terminating(namespace: dict[str, Any], *, now: datetime | None = None,
                     ) -> dict[str, Any] | None:
    """The namespace with deletionTimestamp and phase Terminating; None if it already is."""
    meta = namespace.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    out = dict(namespace)
    out["metadata"] = {**meta, "deletionTimestamp": rfc3339(now),
                       "deletionGracePeriodSeconds": 0}
    out["status"] = {**(namespace.get("status") or {}), "phase": "Terminating"}
    return out


def is_terminating(namespace: dict[str, Any]) -> bool:
    return bool((namespace.get("metadata") or {}).get("deletionTimestamp"))


def spec_finalizers(namespace: Mapping[str, Any]) -> list[str]:
    return list((namespace.get("spec") or {}).get("finalizers") or [])


def finalized(namespace: Mapping[str, Any]) -> bool:
    """Nothing holds it back any more: no spec.finalizers and no metadata.finalizers."""
    return not spec_finalizers(namespace) and \
        not (namespace.get("metadata") or {}).get("finalizers")


def prepare_for_delete(namespace: dict[str, Any], requested_grace: int | None,
                       ) -> dict[str, Any] | None:
    """The namespace REST's Delete: one with finalizers is marked Terminating (unchanged if
    it already is); one with none left is removed now (None)."""
    name = (namespace.get("metadata") or {}).get("name") or ""
    if name in IMMORTAL:
        raise forbidden_delete(name)
    if finalized(namespace):
        return None
    return mark_terminating(namespace) or namespace


def should_delete_during_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """ShouldDeleteNamespaceDuringUpdate: an update (a finalize, or one removing the last
    metadata.finalizers) of a Terminating namespace that leaves no finalizer removes it."""
    return is_terminating(dict(old)) and finalized(new)


# --- namespaces/finalize (FinalizeStrategy) -----------------------------------------------

def prepare_finalize(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """Only spec.finalizers is taken from what was sent; the rest stays as stored."""
    out = dict(old)
    out["spec"] = {**(old.get("spec") or {}), "finalizers": spec_finalizers(new)}
    return out


def validate_finalize(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    return validate_namespace(new)


FINALIZE = SubresourceUpdate(prepare=prepare_finalize, validate=validate_finalize)


async def ensure_default_namespaces(registry: Any) -> None:
    """The apiserver's own (kube's system namespaces controller): the built-in namespaces
    exist; retried while etcd is not reachable. `registry`: apiserver.registry.Registry
    (imported late: it imports this module)."""
    from apiserver import managed_fields, objects
    from apiserver.storage import KeyExists, Unavailable

    for name in DEFAULT_NAMESPACES:
        obj = objects.default_object(NAMESPACES, objects.prepare_for_create(
            NAMESPACES, {"metadata": {"name": name}}, namespace=None))
        obj = managed_fields.record_create(NAMESPACES, obj, manager="kube-apiserver")
        while True:
            try:
                await registry.storage.create(registry.key(NAMESPACES, None, name), obj)
                log.info("created namespace %s", name)
            except KeyExists:
                pass
            except Unavailable as e:
                log.warning("etcd not reachable yet (%s); retrying", e)
                await asyncio.sleep(1.0)
                continue
            break


# --- field selectors -------------------------------------------------------------------------

def namespace_fields(namespace: Mapping[str, Any]) -> dict[str, str]:
    fields = object_meta_fields(namespace, namespaced=False)
    fields["status.phase"] = field_text((namespace.get("status") or {}).get("phase"))
    return fields


FIELDS = SelectableFields(labels=frozenset({"metadata.name", "status.phase"}),
                          get=namespace_fields)


# --- the Table -------------------------------------------------------------------------------

COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Status", "The status of the namespace"),
    column("Age", CREATION_TIMESTAMP_DOC),
]


def namespace_cells(namespace: dict[str, Any], now: datetime) -> list[Any]:
    metadata = namespace.get("metadata") or {}
    return [metadata.get("name", ""), (namespace.get("status") or {}).get("phase", ""),
            format_age(metadata.get("creationTimestamp"), now)]


NAMESPACES = Resource(
    plural="namespaces", singular="namespace", kind="Namespace", namespaced=False,
    model=Namespace, storage_name="namespaces",
    subresources=frozenset({"status", "finalize"}), subresource_updates={"finalize": FINALIZE},
    short_names=("ns",),
    descriptions={"Namespace": "Namespace provides a scope for Names. Use of multiple "
                               "namespaces is optional."},
    default=default_namespace, validate=validate_create, validate_update=validate_update,
    prepare_for_delete=prepare_for_delete, returns_deleted_object=True,
    terminates_namespace=True, delete_collection=False, fields=FIELDS, columns=COLUMNS, cells=namespace_cells,
    merge_keys={"status.conditions": "type"},
)
