"""PriorityClasses (scheduling.k8s.io/v1): the strategy of pkg/registry/scheduling/
priorityclass (defaults, ValidatePriorityClass and ValidatePriorityClassUpdate, the Table
of printPriorityClass), the two system classes kube-apiserver creates at start, and the
Priority admission plugin (plugin/pkg/admission/priority): a pod's priorityClassName
resolved into spec.priority and spec.preemptionPolicy, and one globalDefault at most.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource, delete_unless_finalized
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    forbidden,
    invalid,
    name_is_dns_subdomain,
    not_supported,
    required,
    validate_object_meta,
)
from common import errors
from common.models import Int32, KubeModel, ObjectMeta

log = logging.getLogger("apiserver")

SCHEDULING_GROUP = "scheduling.k8s.io"
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
# scheduling.SystemPriorityClasses(): name -> (value, description)
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    SYSTEM_NODE_CRITICAL: (2_000_001_000,
                           "Used for system critical pods that must not be moved from their "
                           "current node."),
    SYSTEM_CLUSTER_CRITICAL: (2_000_000_000,
                              "Used for system critical pods that must run in the cluster, "
                              "but can be moved to another node if necessary."),
}
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPTION_POLICIES = ("Never", PREEMPT_LOWER_PRIORITY)

Object = dict[str, Any]


class PriorityClass(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    value: Int32 | None = None
    global_default: bool | None = None
    description: str | None = None
    preemption_policy: str | None = None


# --- defaults and validation -------------------------------------------------------------------

def default_priority_class(pc: Object, old: Object | None) -> None:
    """SetDefaults_PriorityClass."""
    pc.setdefault("preemptionPolicy", PREEMPT_LOWER_PRIORITY)
    pc.setdefault("value", 0)


def known_system_class_error(name: str, value: Any, global_default: bool) -> str | None:
    """scheduling.IsKnownSystemPriorityClass: None when it is one, else why not."""
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_preemption_policy(policy: Any, path: str) -> list[Cause]:
    if policy is None or policy == "":
        return [required(path)]
    if policy not in PREEMPTION_POLICIES:
        return [not_supported(path, policy, PREEMPTION_POLICIES)]
    return []


def validate_priority_class(pc: Object) -> list[Cause]:
    """ValidatePriorityClass: a DNS-subdomain name; `system-` names are the system
    classes only; user values at most 1,000,000,000; a supported preemptionPolicy."""
    meta = pc.get("metadata") or {}
    errs = validate_object_meta(meta, namespaced=False, name_check=name_is_dns_subdomain)
    name = str(meta.get("name") or "")
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        why = known_system_class_error(name, pc.get("value"), bool(pc.get("globalDefault")))
        if why is not None:
            errs.append(forbidden("metadata.name", (
                f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are "
                f"reserved for system use only. error: {why}")))
    elif (pc.get("value") or 0) > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(forbidden("value", "maximum allowed value of a user defined priority is "
                                       f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if "preemptionPolicy" in pc:
        errs += validate_preemption_policy(pc.get("preemptionPolicy"), "preemptionPolicy")
    return errs


def validate_update(new: Object, old: Object) -> list[Cause]:
    """ValidatePriorityClassUpdate: value and preemptionPolicy are immutable."""
    errs = []
    if new.get("value") != old.get("value"):
        errs.append(forbidden("value", "may not be changed in an update."))
    if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
        errs.append(invalid("preemptionPolicy", new.get("preemptionPolicy"),
                            FIELD_IMMUTABLE_MSG))
    return errs


# --- Priority admission ------------------------------------------------------------------------

def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def global_default(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The globalDefault class; with several (a race between apiservers), the one with the
    lowest value, as kube's getDefaultPriorityClass."""
    defaults = [pc for pc in classes if pc.get("globalDefault")]
    return min(defaults, key=lambda pc: pc.get("value") or 0, default=None)


def admit_priority_class(pc: Object, classes: Iterable[Mapping[str, Any]]) -> None:
    """Only one globalDefault class may exist (refused with kube's Forbidden)."""
    if not pc.get("globalDefault"):
        return
    for other in classes:
        if other.get("globalDefault") and _name(other) != _name(pc):
            raise errors.Forbidden(
                f'priorityclasses.scheduling.k8s.io "{_name(pc)}" is forbidden: '
                f"PriorityClass {_name(other)} is already marked as default. "
                "Only one default can exist")


def resolve_pod_priority(pod: Object, classes: Mapping[str, Mapping[str, Any]]) -> None:
    """The Priority admission plugin on pod create: spec.priorityClassName (or the global
    default class, or none: 0) gives spec.priority and spec.preemptionPolicy; a pod that
    sends either must send the class's own value. `classes`: name -> PriorityClass."""
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName") or ""
    refused = f'pods "{_name(pod) or (pod.get("metadata") or {}).get("generateName", "")}" is forbidden: '
    if not name:
        found = global_default(classes.values())
        if found is None:
            priority, policy = 0, PREEMPT_LOWER_PRIORITY
        else:
            spec["priorityClassName"] = name = _name(found)
            priority = int(found.get("value") or 0)
            policy = str(found.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
    else:
        found = classes.get(name)
        if found is None:
            raise errors.Forbidden(refused + f"no PriorityClass with name {name} was found")
        priority = int(found.get("value") or 0)
        policy = str(found.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise errors.Forbidden(refused + (
            f"the integer value of priority ({spec['priority']}) must not be provided in pod "
            f"spec; priority admission controller computed {priority} from the given "
            "PriorityClass name"))
    if spec.get("preemptionPolicy") is not None and spec["preemptionPolicy"] != policy:
        raise errors.Forbidden(refused + (
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be "
            f"provided in pod spec; priority admission controller computed {policy} from "
            "the given PriorityClass name"))
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy


async def current_classes(registry: Any) -> dict[str, Mapping[str, Any]]:
    """Every PriorityClass, from the watch cache as kube's admission reads its lister."""
    cache = registry.cache(PRIORITY_CLASSES)
    if cache.ready:
        prefix = f"{registry.prefix}/{PRIORITY_CLASSES.storage_name}/"
        return {_name(item.obj): item.obj for item in cache.scan(prefix)}
    items, _ = await registry.list_objects(PRIORITY_CLASSES, None)
    return {_name(item): item for item in items}


async def admit_pod(pod: Object, registry: Any) -> None:
    resolve_pod_priority(pod, await current_classes(registry))


async def admit_new_class(pc: Object, registry: Any) -> None:
    admit_priority_class(pc, (await current_classes(registry)).values())


async def admit_updated_class(pc: Object, old: Object, registry: Any) -> None:
    """As on create: a class turned globalDefault while another is refused."""
    admit_priority_class(pc, (await current_classes(registry)).values())


def prepare_for_delete(pc: Object, grace_period: int | None) -> Object | None:
    """The system classes cannot be deleted (kube's priorityclass REST Delete)."""
    name = _name(pc)
    if name in SYSTEM_PRIORITY_CLASSES:
        raise errors.Forbidden(f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: '
                               "this is a system priority class and cannot be deleted")
    return delete_unless_finalized(pc, grace_period)


def system_priority_classes() -> list[Object]:
    return [{"apiVersion": f"{SCHEDULING_GROUP}/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value, "description": description,
             "preemptionPolicy": PREEMPT_LOWER_PRIORITY}
            for name, (value, description) in SYSTEM_PRIORITY_CLASSES.items()]


async def ensure_system_priority_classes(registry: Any) -> None:
    """kube-apiserver's scheduling post-start hook: create the system classes once."""
    for pc in system_priority_classes():
        try:
            await registry.create(PRIORITY_CLASSES, None, pc, manager="kube-apiserver")
        except errors.AlreadyExists:
            continue
        log.info("created PriorityClass %s with value %d", _name(pc), pc["value"])


# --- the Table ----------------------------------------------------------------------------------

COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Value", "value represents the integer value of this priority class. This is the "
                    "actual priority that pods receive when they have the name of this class "
                    "in their pod spec.", type_="integer"),
    column("Global-Default", "globalDefault specifies whether this PriorityClass should be "
                             "considered as the default priority for pods that do not have "
                             "any priority class.", type_="boolean"),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("PreemptionPolicy", "preemptionPolicy is the Policy for preempting pods with "
                               "lower priority."),
]


def priority_class_cells(pc: Object, now: datetime) -> list[Any]:
    """printPriorityClass."""
    return [_name(pc), pc.get("value") or 0, bool(pc.get("globalDefault")),
            format_age((pc.get("metadata") or {}).get("creationTimestamp"), now),
            pc.get("preemptionPolicy") or ""]


PRIORITY_CLASSES = Resource(
    plural="priorityclasses", singular="priorityclass", kind="PriorityClass",
    namespaced=False, model=PriorityClass, storage_name="priorityclasses",
    group=SCHEDULING_GROUP, short_names=("pc",),
    descriptions={"PriorityClass": (
        "PriorityClass defines mapping from a priority class name to the priority integer "
        "value. The value can be any valid integer.")},
    default=default_priority_class, validate=validate_priority_class,
    validate_update=validate_update, tracks_generation=False,
    admit_lookup=admit_new_class, admit_update_lookup=admit_updated_class,
    prepare_for_delete=prepare_for_delete,
    columns=COLUMNS, cells=priority_class_cells,
)
