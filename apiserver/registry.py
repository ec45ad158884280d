"""The verbs of every resource on etcd: create, get, list, update, patch, delete, bind.

The store is generic: whatever differs between resources (defaults, validation, delete
rules, TTLs, selectable fields) it asks the resource's strategy (apiserver/resources/).
Each verb turns storage outcomes into Kubernetes Status errors; nothing is written
unless the whole request is valid. Updates without a resourceVersion precondition
retry on a concurrent write (kube's GuaranteedUpdate); with one, a stale version is a
409 Conflict.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from apiserver import managed_fields, objects, schema, validation
from apiserver.auth import AlwaysAllow, Authorizer, UserInfo
from apiserver.auth.admission import Write, WriteCheck
from apiserver.cacher import Cacher, Describe, ResourceCache
from apiserver.listing import ListOptions, ListPage, ListQuery, list_page
from apiserver.resources import (
    RESOURCES,
    Resource,
    collection_prefix,
    deletion,
    namespace_key,
    object_key,
)
from apiserver.resources import namespaces as namespace_rules
from apiserver.resources.namespaces import NAMESPACES, check_create, is_terminating
from apiserver.selectors import FieldSelector, LabelSelector, selectable_fields
from apiserver.storage import (
    KV,
    KeyExists,
    KeyNotFound,
    RequiredKeyMissing,
    RevisionMismatch,
    Storage,
)
from apiserver.warning import add_warning
from common import errors

log = logging.getLogger("apiserver")

Mutation = Callable[[dict[str, Any]], dict[str, Any]]
MAX_UPDATE_ATTEMPTS = 20


def status_details(resource: Resource, name: str) -> dict[str, Any]:
    """StatusDetails of an error about one object: `group` only for a named group."""
    details: dict[str, Any] = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    return details


def not_found(resource: Resource, name: str) -> errors.NotFound:
    """`pods "web" not found`, `leases.coordination.k8s.io "node1" not found`."""
    return errors.NotFound(f'{resource.qualified} "{name}" not found',
                           details=status_details(resource, name))


def already_exists(resource: Resource, name: str) -> errors.AlreadyExists:
    return errors.AlreadyExists(f'{resource.qualified} "{name}" already exists',
                                details=status_details(resource, name))


def conflict(resource: Resource, name: str, why: str | None = None) -> errors.Conflict:
    err = errors.conflict(resource.qualified, name, why)
    err.details = status_details(resource, name)
    return err


def invalid(resource: Resource, name: str, causes: list[dict[str, str]]) -> errors.Invalid:
    """NewInvalid(GroupKind, ...): `Lease.coordination.k8s.io "x" is invalid: ...`."""
    err = errors.invalid(resource.qualified_kind, name, causes, group=resource.group)
    err.details["kind"] = resource.kind
    return err


def decode(resource: Resource, body: dict[str, Any], *,
           strict: bool) -> tuple[dict[str, Any], list[str]]:
    """schema.decode, then into the stored form (the registry works on nothing else); with
    fieldValidation=Strict an unknown field is the decoder's 400."""
    pruned, unknown = schema.decode(resource.model, body)
    if strict and unknown:
        kind = resource.kind
        raise errors.BadRequest(f'{kind} in version "{resource.version}" cannot be handled as '
                                f'a {kind}: {schema.strict_decoding_message(unknown)}')
    if resource.to_storage is not None:
        pruned = resource.to_storage(pruned)
    return pruned, unknown


def resource_version_required(resource: Resource, name: str) -> errors.Invalid:
    """The store's answer to an unconditional PUT its strategy does not allow (kube names
    the resource, not the kind, here)."""
    err = errors.invalid(resource.qualified, name, [validation.invalid(
        "metadata.resourceVersion", 0, "must be specified for an update")], group=resource.group)
    err.details["kind"] = resource.plural
    return err


def check_no_causes(resource: Resource, name: str, causes: list[dict[str, str]]) -> None:
    if causes:
        raise invalid(resource, name, causes)


def managed_causes(obj: dict[str, Any]) -> list[dict[str, str]]:
    return managed_fields.validate(managed_fields.managed_of(obj))


def object_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class LeaseManager:
    """Reuses one etcd lease for the events written within a minute (kube does the same)."""

    REUSE_SECONDS = 60

    def __init__(self, storage: Storage, ttl: int) -> None:
        self.storage = storage
        self.ttl = ttl
        self._lease = 0
        self._granted_at = 0.0
        self._lock = asyncio.Lock()

    async def lease(self) -> int:
        async with self._lock:
            if not self._lease or time.monotonic() - self._granted_at > self.REUSE_SECONDS:
                self._lease = await self.storage.grant_lease(self.ttl + self.REUSE_SECONDS)
                self._granted_at = time.monotonic()
            return self._lease


class Registry:
    def __init__(self, storage: Storage, *, prefix: str = "/registry",
                 event_ttl: int = 3600) -> None:
        self.storage = storage
        self.prefix = prefix.rstrip("/")
        self.event_leases = LeaseManager(storage, event_ttl)
        self.cacher = Cacher(storage)
        # Namespaces seen Terminating (NamespaceLifecycle: nothing new may be created in
        # them): a DELETE of a namespace adds it at once, a create finding it Terminating in
        # the watch cache too; a create finding it Active again (re-created) or its removal
        # takes it out.
        self.terminating_namespaces: set[str] = set()
        # The --authorization-mode chain (the review APIs and the escalation check ask it),
        # and the admission checks of who writes (apiserver/auth/admission.py): both set by
        # create_app. A write passed no `user` is the apiserver's own and skips the checks.
        self.authorizer: Authorizer = AlwaysAllow()
        self.write_checks: list[WriteCheck] = []
        # What objects allocate from outside their own keys (the Services' ClusterIP and
        # NodePort ranges, apiserver/allocator.ServiceRanges), set by create_app; passed to
        # the strategies' reserve/release hooks.
        self.allocations: Any = None
        # Whether pods get the kube-api-access-* token volume (the ServiceAccount admission:
        # when this apiserver can sign tokens), set by create_app.
        self.mount_service_account_tokens = False

    async def admit_write(self, user: UserInfo | None, operation: str, resource: Resource,
                          namespace: str | None, name: str, obj: dict[str, Any] | None,
                          old: dict[str, Any] | None, subresource: str | None = None) -> None:
        if user is None:
            return
        write = Write(user=user, operation=operation, group=resource.group,
                      resource=resource.plural, subresource=subresource or "",
                      namespace=namespace or "", name=name, obj=obj, old=old)
        for check in self.write_checks:
            await check(write)

    def key(self, resource: Resource, namespace: str | None, name: str) -> str:
        return object_key(self.prefix, resource, namespace, name)

    # -- reads -------------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        kv = await self._get_kv(resource, namespace, name)
        return objects.with_resource_version(kv.value, kv.mod_revision)

    async def get_recent(self, resource: Resource, namespace: str | None,
                         name: str) -> dict[str, Any] | None:
        """The object as the watch cache has it, as kube's admission and token checks read
        their informers' listers; etcd only for one the cache has not seen (created a
        moment ago). None when it does not exist. Not a copy: do not change it."""
        cache = self.cache(resource)
        cached = cache.get(self.key(resource, namespace, name)) if cache.ready else None
        if cached is not None:
            return cached.obj
        try:
            return await self.get(resource, namespace, name)
        except errors.NotFound:
            return None

    def _cached_kv(self, resource: Resource, key: str) -> KV | None:
        """The watch cache's copy of `key` as etcd would give it, if the cache has one
        (it may be behind etcd). Its create revision is unknown (0)."""
        cache = self.cache(resource)
        item = cache.get(key) if cache.ready else None
        if item is None:
            return None
        return KV(key, objects.without_resource_version(item.obj), item.revision, 0)

    async def _get_kv(self, resource: Resource, namespace: str | None, name: str) -> KV:
        kv = await self.storage.get(self.key(resource, namespace, name))
        if kv is None:
            raise not_found(resource, name)
        return kv

    def cache(self, resource: Resource) -> ResourceCache:
        """The resource's watch cache (started on first use)."""
        return self.cacher.cache(collection_prefix(self.prefix, resource, None),
                                 describer(resource))

    def start_caches(self) -> None:
        for resource in RESOURCES.values():
            self.cache(resource)

    async def list_page(self, resource: Resource, namespace: str | None, options: ListOptions,
                        *, labels: LabelSelector | None = None,
                        fields: FieldSelector | None = None) -> ListPage:
        """One page of a LIST with kube's resourceVersion semantics (apiserver/listing.py);
        its items are shared with the cache: read them, never change them."""
        name = fields.exact("metadata.name") if fields is not None else None
        exact_key = None
        if name is not None and (namespace or not resource.namespaced):
            exact_key = self.key(resource, namespace, name)
        query = ListQuery(collection_prefix(self.prefix, resource, namespace), options,
                          labels, fields, exact_key)
        return await list_page(self.storage, self.cache(resource), query)

    async def list_objects(self, resource: Resource, namespace: str | None, *,
                           labels: LabelSelector | None = None,
                           fields: FieldSelector | None = None,
                           ) -> tuple[list[dict[str, Any]], int]:
        """Every selected object now (a consistent read), and the revision it was read at."""
        page = await self.list_page(resource, namespace, ListOptions(), labels=labels,
                                    fields=fields)
        return [item.obj for item in page.items], page.revision

    # -- writes ------------------------------------------------------------------------

    async def create(self, resource: Resource, namespace: str | None, body: dict[str, Any],
                     *, strict: bool = False, dry_run: bool = False,
                     decoded: bool = False, manager: str | None = None,
                     user: UserInfo | None = None,
                     ) -> tuple[dict[str, Any], list[str]]:
        """Store a new object; returns it and the unknown fields that were dropped
        (`strict`: fieldValidation=Strict, unknown fields are a 400 and nothing is written;
        `dry_run`: every check, no write; `decoded`: the body went through decode already;
        `manager`: record the create in managedFields as this manager's Update, None when
        the caller recorded them already, as an apply does)."""
        pruned, unknown = (body, []) if decoded else decode(resource, body, strict=strict)
        obj = objects.prepare_for_create(resource, pruned, namespace=namespace)
        if resource.prepare_for_user is not None:
            resource.prepare_for_user(obj, user)
        if resource.admit_lookup is not None:
            await resource.admit_lookup(obj, self)
        obj = objects.default_object(resource, obj)
        name = object_name(obj)
        check_no_causes(resource, name or object_name(body),
                        validation.validate(resource, obj) + managed_causes(obj))
        if manager is not None:
            obj = managed_fields.record_create(resource, obj, manager=manager, sent=pruned)
        resource.admit(obj)
        if resource.mutating_admission is not None:
            await resource.mutating_admission(obj, self)
        await self.admit_write(user, "CREATE", resource, namespace, name, obj, None)
        lease = await self.event_leases.lease() if resource.expires else 0
        requires = namespace_key(self.prefix, namespace or "") if resource.namespaced else None
        if resource.namespaced and namespace:
            check_create(await self._namespace_terminating(namespace), resource.qualified,
                         name, namespace)
        if dry_run:
            await self._check_creatable(resource, namespace, name, requires)
            await self._reserve(resource, obj, None, dry_run=True)
            return obj, unknown
        reservation = await self._reserve(resource, obj, None, dry_run=False)
        try:
            revision = await self.storage.create(self.key(resource, namespace, name), obj,
                                                 lease=lease, requires=requires)
        except KeyExists:
            await self._revert(reservation)
            raise already_exists(resource, name) from None
        except RequiredKeyMissing:
            await self._revert(reservation)
            raise errors.not_found("namespaces", namespace or "") from None
        except BaseException:
            await self._revert(reservation)
            raise
        await self._commit(reservation)
        return objects.with_resource_version(obj, revision), unknown

    async def _reserve(self, resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None,
                       *, dry_run: bool) -> Any:
        """What `obj` holds outside its key, reserved before it is written (the strategy's
        `reserve` fills it in: a Service's ClusterIP and NodePorts); None for most kinds."""
        if resource.reserve is None:
            return None
        return await resource.reserve(obj, old, self.allocations, dry_run)

    @staticmethod
    async def _revert(reservation: Any) -> None:
        if reservation is not None:
            await asyncio.shield(reservation.revert())

    @staticmethod
    async def _commit(reservation: Any) -> None:
        if reservation is not None:
            await reservation.commit()

    async def _released(self, resource: Resource, obj: dict[str, Any]) -> None:
        """Give back what a removed object held (its key is gone from etcd)."""
        if resource.release is not None:
            await resource.release(obj, self.allocations)

    async def check_namespace_admits(self, resource_name: str, namespace: str,
                                     name: str) -> None:
        """NamespaceLifecycle now, for an admission that must not speak first: a namespace
        that does not exist is its 404, one being terminated its 403."""
        if await self.get_recent(NAMESPACES, None, namespace) is None:
            raise errors.not_found("namespaces", namespace)
        check_create(await self._namespace_terminating(namespace), resource_name, name,
                     namespace)

    async def _namespace_terminating(self, namespace: str) -> bool:
        """The NamespaceLifecycle check, on the watch cache as kube's on its informer; etcd
        when this process marked it and the cache has not caught up yet."""
        found = await self.get_recent(NAMESPACES, None, namespace)
        if found is not None and not is_terminating(found) and \
                namespace in self.terminating_namespaces:
            try:
                found = await self.get(NAMESPACES, None, namespace)
            except errors.NotFound:
                found = None
        if found is not None and is_terminating(found):
            self.terminating_namespaces.add(namespace)
            return True
        self.terminating_namespaces.discard(namespace)
        return False

    async def _check_creatable(self, resource: Resource, namespace: str | None, name: str,
                               requires: str | None) -> None:
        """What a create transaction would refuse, checked without writing (dry run)."""
        if requires is not None and await self.storage.get(requires) is None:
            raise errors.not_found("namespaces", namespace or "")
        if await self.storage.get(self.key(resource, namespace, name)) is not None:
            raise already_exists(resource, name)

    async def update(self, resource: Resource, namespace: str | None, name: str,
                     body: dict[str, Any], *, subresource: str | None = None,
                     strict: bool = False, dry_run: bool = False,
                     decoded: bool = False, manager: str | None = None,
                     user: UserInfo | None = None,
                     ) -> tuple[dict[str, Any], list[str], bool]:
        """Replace an object; returns it, the unknown fields dropped, and whether the PUT
        created it (resources whose strategy allows create on update, like leases)."""
        pruned, unknown = (body, []) if decoded else decode(resource, body, strict=strict)
        precondition = (body.get("metadata") or {}).get("resourceVersion") or None
        body_name = object_name(pruned)
        if body_name and body_name != name:
            raise errors.BadRequest(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})")

        def replace(current: dict[str, Any]) -> dict[str, Any]:
            if precondition is None and not resource.allow_unconditional_update:
                raise resource_version_required(resource, name)
            return objects.prepare_for_update(resource, pruned, current, subresource=subresource)

        try:
            updated = await self.guaranteed_update(resource, namespace, name, replace,
                                                   precondition=precondition,
                                                   subresource=subresource, dry_run=dry_run,
                                                   manager=manager, user=user)
        except errors.NotFound:
            if subresource is not None or not resource.allow_create_on_update:
                raise
            meta = {k: v for k, v in (body.get("metadata") or {}).items()
                    if k != "resourceVersion"}
            created, _ = await self.create(resource, namespace,
                                           {**body, "metadata": {**meta, "name": name}},
                                           strict=strict, dry_run=dry_run, decoded=decoded,
                                           manager=manager, user=user)
            return created, unknown, True
        return updated, unknown, False

    async def guaranteed_update(self, resource: Resource, namespace: str | None, name: str,
                                mutate: Mutation, *, precondition: str | None = None,
                                subresource: str | None = None,
                                validate: bool = True, dry_run: bool = False,
                                manager: str | None = None, user: UserInfo | None = None,
                                ) -> dict[str, Any]:
        """Read, mutate, validate, write-if-unchanged; retry on a concurrent write.

        With `precondition` (a resourceVersion the client read) a concurrent write is a
        409 Conflict instead of a retry. With `manager` the change is recorded in
        managedFields as that manager's Update.
        """
        key = self.key(resource, namespace, name)
        # As kube's Cacher.GuaranteedUpdate: the watch cache's copy is the first guess, so
        # that an update costs one etcd transaction, not a read and then a transaction. A
        # guess found stale (by the transaction's revision check, or because it was what
        # a refusal or a no-op was computed from) gives way to a read of etcd.
        kv = None if dry_run else self._cached_kv(resource, key)
        fresh = kv is None
        if kv is None:
            kv = await self._get_kv(resource, namespace, name)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            try:
                if precondition is not None and precondition != str(kv.mod_revision):
                    raise conflict(resource, name)
                new = mutate(kv.value)
                if validate:
                    new = objects.default_object(resource, new, old=kv.value)
                if manager is not None:
                    check_no_causes(resource, name, managed_causes(new))
                    new = managed_fields.record_update(resource, kv.value, new,
                                                       manager=manager, subresource=subresource)
                if new == kv.value:
                    if not fresh:
                        kv, fresh = await self._get_kv(resource, namespace, name), True
                        continue
                    return objects.with_resource_version(kv.value, kv.mod_revision)
                if validate:
                    check_no_causes(resource, name, validation.validate_subresource_update(
                        resource, subresource, new, kv.value))
                    if resource.admit_update_lookup is not None and subresource is None:
                        await resource.admit_update_lookup(new, kv.value, self)
                await self.admit_write(user, "UPDATE", resource, namespace, name, new,
                                       kv.value, subresource)
            except errors.ApiError:
                if fresh:
                    raise
                kv, fresh = await self._get_kv(resource, namespace, name), True
                continue
            reserves = validate and subresource is None
            if dry_run:
                if reserves:
                    await self._reserve(resource, new, kv.value, dry_run=True)
                return objects.with_resource_version(new, kv.mod_revision)
            lease = await self.event_leases.lease() if resource.expires else 0
            removing = (namespace_rules.should_delete_during_update(new, kv.value)
                        if resource.terminates_namespace
                        else deletion.should_delete_during_update(new, kv.value))
            reservation = None
            if reserves and not removing:
                reservation = await self._reserve(resource, new, kv.value, dry_run=False)
            try:
                if removing:
                    _, revision = await self.storage.delete(key,
                                                            expected_revision=kv.mod_revision)
                    if resource.terminates_namespace:
                        self.terminating_namespaces.discard(name)
                    log.info("deleted %s %s/%s: its last finalizer was removed",
                             resource.plural, namespace or "", name)
                    await self._released(resource, kv.value)
                    return objects.with_resource_version(new, revision)
                revision = await self.storage.update(key, new, expected_revision=kv.mod_revision,
                                                     lease=lease)
                await self._commit(reservation)
                return objects.with_resource_version(new, revision)
            except KeyNotFound:
                await self._revert(reservation)
                raise not_found(resource, name) from None
            except RevisionMismatch as e:
                await self._revert(reservation)
                if e.current is None and not fresh:  # gone, or never was: read etcd
                    kv, fresh = await self._get_kv(resource, namespace, name), True
                    continue
                if precondition is not None or e.current is None:
                    raise conflict(resource, name) from None
                kv, fresh = e.current, True
            except BaseException:
                await self._revert(reservation)
                raise
        raise conflict(resource, name)

    async def delete(self, resource: Resource, namespace: str | None, name: str, *,
                     grace_period: int | None = None,
                     preconditions: Mapping[str, Any] | None = None,
                     dry_run: bool = False, user: UserInfo | None = None,
                     subresource: str | None = None, propagation_policy: str | None = None,
                     orphan_dependents: bool | None = None) -> tuple[dict[str, Any], bool]:
        """Delete now, or mark for deletion as the resource's strategy says (graceful
        deletion, finalizers, a Terminating namespace); returns (object, deleted_now).
        `propagation_policy`/`orphan_dependents` (DeleteOptions) set the garbage
        collector's finalizers first (apiserver/resources/deletion.py)."""
        key = self.key(resource, namespace, name)
        if resource.gc_default_warning and deletion.uses_default_policy(propagation_policy,
                                                                       orphan_dependents):
            add_warning(resource.gc_default_warning)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            kv = await self._get_kv(resource, namespace, name)
            check_preconditions(resource, name, kv, preconditions or {})
            current = kv.value
            await self.admit_write(user, "CREATE" if subresource else "DELETE", resource,
                                   namespace, name, None, current, subresource)
            staged = current
            if not resource.terminates_namespace:  # the namespace controller empties those
                staged = deletion.with_deletion_finalizers(
                    current, policy=propagation_policy, orphan_dependents=orphan_dependents,
                    default_policy=resource.gc_policy)
            marked = resource.prepare_for_delete(staged, grace_period)
            if dry_run:
                return objects.with_resource_version(marked or current, kv.mod_revision), \
                    marked is None
            try:
                if marked is not None:
                    if marked is current:
                        self._marked_for_deletion(resource, name)
                        return objects.with_resource_version(current, kv.mod_revision), False
                    revision = await self.storage.update(key, marked,
                                                         expected_revision=kv.mod_revision)
                    self._marked_for_deletion(resource, name)
                    return objects.with_resource_version(marked, revision), False
                last, revision = await self.storage.delete(key, expected_revision=kv.mod_revision)
                await self._released(resource, last.value)
                return objects.with_resource_version(last.value, revision), True
            except KeyNotFound:
                raise not_found(resource, name) from None
            except RevisionMismatch:
                continue
        raise conflict(resource, name)

    async def delete_collection(self, resource: Resource, namespace: str | None,
                                options: ListOptions, *, labels: LabelSelector | None = None,
                                fields: FieldSelector | None = None,
                                grace_period: int | None = None,
                                preconditions: Mapping[str, Any] | None = None,
                                dry_run: bool = False, user: UserInfo | None = None,
                                propagation_policy: str | None = None,
                                orphan_dependents: bool | None = None,
                                ) -> list[dict[str, Any]]:
        """deletecollection: delete every object the LIST with `options` returns (one page
        when it has a limit, as kube does); returns what each delete returned. Objects gone
        in the meantime are skipped."""
        page = await self.list_page(resource, namespace, options, labels=labels, fields=fields)
        done = []
        for item in page.items:
            meta = item.obj.get("metadata") or {}
            try:
                obj, _ = await self.delete(resource, meta.get("namespace"), meta.get("name", ""),
                                           grace_period=grace_period,
                                           preconditions=preconditions, dry_run=dry_run,
                                           user=user, propagation_policy=propagation_policy,
                                           orphan_dependents=orphan_dependents)
            except errors.NotFound:
                continue
            done.append(obj)
        return done

    def _marked_for_deletion(self, resource: Resource, name: str) -> None:
        if resource.terminates_namespace:
            self.terminating_namespaces.add(name)

    async def bind(self, resource: Resource, namespace: str, name: str,
                   binding: dict[str, Any], *, dry_run: bool = False,
                   user: UserInfo | None = None) -> None:
        """The binding subresource (pods/binding): the strategy checks the Binding and says
        what it changes; a binding is not an update, so only its own rules apply."""
        if resource.bind is None:
            raise errors.method_not_allowed()
        await self.admit_write(user, "CREATE", resource, namespace, name, binding, None,
                               "binding")
        await self.guaranteed_update(resource, namespace, name, resource.bind(name, binding),
                                     validate=False, dry_run=dry_run)


def check_preconditions(resource: Resource, name: str, kv: KV,
                        preconditions: Mapping[str, Any]) -> None:
    uid = preconditions.get("uid")
    if uid and uid != (kv.value.get("metadata") or {}).get("uid"):
        raise conflict(resource, name,
                       f"Precondition failed: UID in precondition: {uid}, "
                       f"UID in object meta: {(kv.value.get('metadata') or {}).get('uid')}")
    rv = preconditions.get("resourceVersion")
    if rv and rv != str(kv.mod_revision):
        raise conflict(resource, name,
                       f"Precondition failed: ResourceVersion in precondition: {rv}, "
                       f"ResourceVersion in object meta: {kv.mod_revision}")


_DESCRIBERS: dict[str, Describe] = {}


def describer(resource: Resource) -> Describe:
    """What the watch cache computes once per change of one of `resource`'s objects."""
    describe = _DESCRIBERS.get(resource.plural)
    if describe is None:
        def describe(obj: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
            return ((obj.get("metadata") or {}).get("labels") or {},
                    selectable_fields(resource, obj))

        _DESCRIBERS[resource.plural] = describe
    return describe
