"""One resource kubelite serves: what it is, and everything in which it differs from the others.

kube-apiserver gives each resource a strategy (pkg/registry/*/strategy.go: PrepareForCreate,
Validate, WarningsOnCreate, AllowCreateOnUpdate, CheckGracefulDelete, GetAttrs, the
TableConvertor...). Here that is one frozen `Resource` per resource, made of its identity and
plain functions and values; the generic code (registry, objects, tables, selectors, patch,
discovery, openapi) asks it and never names a resource.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from apiserver.auth import UserInfo
from apiserver.objects import mark_for_deletion
from apiserver.selectors import SelectableFields
from common.models import KubeModel

Object = dict[str, Any]
Cause = dict[str, str]
Mutation = Callable[[Object], Object]


def no_defaults(obj: Object, old: Object | None) -> None:
    return None


def no_causes(new: Object, old: Object) -> list[Cause]:
    return []


def no_admission(obj: Object) -> None:
    return None


def no_warnings(obj: Object) -> list[str]:
    return []


def no_row_conditions(obj: Object) -> list[dict[str, str]]:
    return []


def delete_unless_finalized(obj: Object, requested_grace: int | None) -> Object | None:
    """What a DELETE leaves behind: an object with finalizers is marked and waits for them
    (returned unchanged when already marked); anything else is removed now (None)."""
    if (obj.get("metadata") or {}).get("finalizers"):
        return mark_for_deletion(obj, 0) or obj
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubresourceUpdate:
    """A subresource whose PUT and PATCH change one part of the object (kube's own update
    strategy for it, like pods/ephemeralcontainers' PrepareForUpdate and ValidateUpdate)."""

    # (the object sent, the stored one) -> the object to store: the stored one with only
    # the part this subresource owns taken from what was sent.
    prepare: Callable[[Object, Object], Object]
    # (new, old) -> causes, after the ObjectMeta update rules every kind gets; may refuse
    # with an ApiError (validating admission).
    validate: Callable[[Object, Object], list[Cause]]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request to a review resource, and the authorizer that answers it (the
    `--authorization-mode` chain, which can also list the rules a user has)."""

    user: UserInfo
    authorizer: Any
    namespace: str | None = None  # of a namespaced review's URL
    # TokenReview: (token, audiences) -> (user, audiences), AuthenticationFailed otherwise
    review_token: Any = None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Resource:
    # --- identity
    plural: str
    singular: str
    kind: str
    namespaced: bool
    model: type[KubeModel]  # what a body decodes into (common.models)
    storage_name: str  # the etcd key segment (kube-apiserver keeps nodes under "minions")
    group: str = ""  # "" is the core (legacy) group
    version: str = "v1"
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # OpenAPI descriptions of the kind and of the types inside it, by model name.
    descriptions: Mapping[str, str] = field(default_factory=dict)

    # --- create and update
    # Fill in defaults in place; `old` is the stored object on update, None on create (where
    # PrepareForCreate's additions, like a pod's status.phase, come too).
    default: Callable[[Object, Object | None], None] = no_defaults
    # The kind's own rules; validation.py adds the ObjectMeta checks every kind gets.
    validate: Callable[[Object], list[Cause]]
    validate_update: Callable[[Object, Object], list[Cause]]
    validate_status_update: Callable[[Object, Object], list[Cause]] = no_causes
    warnings: Callable[[Object], list[str]] = no_warnings
    # PrepareForCreate's part that needs who asks (a CSR's spec.username and groups): (the
    # new object, changed in place; the requesting user, None for the apiserver's own).
    prepare_for_user: Callable[[Object, UserInfo | None], None] | None = None
    # Validating admission of a new object: raises (Forbidden) to refuse it.
    admit: Callable[[Object], None] = no_admission
    # Admission that reads other objects, on create, before the defaults: (the object,
    # the registry) -> None, changing it in place or refusing it (Priority admission).
    admit_lookup: Callable[[Object, Any], Awaitable[None]] | None = None
    # Mutating admission that reads other objects, on create, once the field manager
    # recorded the create (what it adds belongs to no manager, as in kube, so an apply
    # never takes it away) and validating admission passed: (the object, the registry)
    # -> None, changing it in place or refusing it (the ServiceAccount admission).
    mutating_admission: Callable[[Object, Any], Awaitable[None]] | None = None
    # The same on update (a PUT, a patch, an apply; not a subresource), after validation:
    # (the new object, the stored one, the registry) -> None or refused.
    admit_update_lookup: Callable[[Object, Object, Any], Awaitable[None]] | None = None
    # Fields `default` sets on create as kube's admission plugins do (after the field
    # manager recorded the create): the creator manages them only when it sent them.
    admission_defaults: tuple[tuple[str, ...], ...] = ()
    # The status a client sends on create is kept (nodes register with their status).
    keeps_status_on_create: bool = False
    # metadata.generation is set on create and bumped when the spec changes.
    tracks_generation: bool = True
    # ... and when the annotations change (Deployments: they are copied to ReplicaSets).
    generation_includes_annotations: bool = False
    # AllowCreateOnUpdate: a PUT of a missing object creates it.
    allow_create_on_update: bool = False
    # AllowUnconditionalUpdate: a PUT may leave out metadata.resourceVersion.
    allow_unconditional_update: bool = True
    # Written with an etcd lease of the registry's event TTL (kube's TTLFunc for events).
    expires: bool = False

    # --- what an object holds outside its own key (a Service's ClusterIP and NodePorts in
    # the cluster's allocation ranges, apiserver/allocator.py)
    # (object to write, changed in place to say what it got; the stored object, None on
    # create; the registry's `allocations`; dry run) -> a reservation whose `commit()` runs
    # once the write is in (giving back what the old object held and the new one does not)
    # and `revert()` when it failed. Raises an ApiError to refuse (422: already allocated).
    reserve: Callable[[Object, Object | None, Any, bool], Awaitable[Any]] | None = None
    # (an object just removed, the registry's `allocations`): give back all it held.
    release: Callable[[Object, Any], Awaitable[None]] | None = None

    # --- delete
    # (stored object, requested grace period) -> the object a DELETE leaves behind instead of
    # removing it (graceful deletion, finalizers, a Terminating namespace), or None to remove
    # it now; the object itself when nothing changes. May refuse with an ApiError.
    prepare_for_delete: Callable[[Object, int | None], Object | None] = delete_unless_finalized
    # Deleting returns the object (pods) instead of a Success Status (most others).
    returns_deleted_object: bool = False
    # Deleting one starts emptying a namespace: creates in it are refused from then on.
    terminates_namespace: bool = False
    # DELETE on the collection (deletecollection) is served; kube has it for most kinds.
    delete_collection: bool = True
    # DefaultGarbageCollectionPolicy: what a DELETE naming no propagationPolicy (nor
    # orphanDependents) does to the dependents, "Background" or "Orphan" (batch/v1 Jobs);
    # and the warning kube sends when that default orphans them.
    gc_policy: str = "Background"
    gc_default_warning: str = ""

    # --- subresources
    # pods/binding: (name, Binding) -> the change it makes; raises when the Binding is invalid.
    bind: Callable[[str, Object], Mutation] | None = None
    # Subresources served with get/update/patch besides status, each with its strategy.
    subresource_updates: Mapping[str, SubresourceUpdate] = field(default_factory=dict)

    # --- versions
    # A resource served in another group/version than the one it is stored in (kube keeps
    # events.k8s.io/v1 Events as core/v1 Events in etcd and converts): `stored_version` is
    # the stored form's apiVersion, `to_storage` turns an object of this version into the
    # stored form and `from_storage` back. Registry, strategy and caches see the stored
    # form; the HTTP layer converts what it reads from and writes to a client. None: stored
    # as served (the fast path: cached JSON bytes go out as they are).
    stored_version: str = ""
    to_storage: Mutation | None = None
    from_storage: Mutation | None = None

    # --- create-only, never stored (the review APIs: SubjectAccessReview, SelfSubjectReview)
    # (the decoded body, the `Caller`) -> the answer. The registry is not involved: no etcd
    # key, no watch cache; only POST on the collection is served, discovery says [create].
    review: Callable[[Object, Caller], Awaitable[Object]] | None = None

    # --- reads
    # Field selectors; None: only metadata.name and metadata.namespace, kube's default.
    fields: SelectableFields | None = None
    columns: Sequence[dict[str, Any]]  # the Table's columnDefinitions
    cells: Callable[[Object, datetime], list[Any]]
    row_conditions: Callable[[Object], list[dict[str, str]]] = no_row_conditions

    # --- patch
    # Strategic merge patch: field path (list indices skipped) -> patchMergeKey of each list
    # whose patchStrategy is "merge"; None for a set-like list of primitives.
    merge_keys: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def api_version(self) -> str:
        """What objects carry in `apiVersion`: `v1`, `coordination.k8s.io/v1`."""
        return group_version(self.group, self.version)

    @property
    def storage_api_version(self) -> str:
        """The apiVersion of the objects in etcd: `v1` for Events of either group."""
        return self.stored_version or self.api_version

    @property
    def qualified(self) -> str:
        """schema.GroupResource.String(): `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """schema.GroupKind.String(): `Pod`, `Lease.coordination.k8s.io`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def path_prefix(self) -> str:
        """Where the resource's URLs start: `/api/v1`, `/apis/coordination.k8s.io/v1`."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version
