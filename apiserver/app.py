"""The HTTP face of the apiserver: one route serves every resource of every group.

`/api/v1/...` (the core group) and `/apis/{group}/{version}/...` (every other group)
go to the same dispatcher. A request is parsed into a `Target` (resource, namespace,
name, subresource), its body decoded (JSON or YAML, size- and type-checked), handed to
the `Registry` verb, and the answer rendered as JSON, as a Table when kubectl asks for
one, or as a watch stream.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from apiserver import (
    dashboard,
    discovery,
    managed_fields,
    objects,
    openapi,
    openapi_v2,
    options,
    patch,
    schema,
    streaming,
    tables,
    warning,
)
from apiserver.auth import Authorizer, UserInfo, request_user
from apiserver.auth.admission import Write, node_token_restriction, write_checks
from apiserver.auth.admission import forbidden as admission_forbidden
from apiserver.auth.authn import AuthenticationFailed, with_authenticated
from apiserver.auth.bootstrap import reconcile as reconcile_bootstrap_policy
from apiserver.auth.modes import build_authorizer
from apiserver.auth.node import node_identity
from apiserver.auth.serviceaccount import InvalidToken, ServiceAccountTokens
from apiserver.compactor import DEFAULT_INTERVAL as DEFAULT_COMPACTION_INTERVAL
from apiserver.compactor import Compactor
from apiserver.controlplane import ServiceControlPlane, ServiceOptions
from apiserver.decode import (
    check_type_meta,
    decode_object,
    decode_optional_object,
    media_type,
    parse_body,
    read_body,
    unsupported_media_type,
)
from apiserver.listing import ListPage, check_watch_options, parse_list_options
from apiserver.logs import choose_container
from apiserver.metrics import LONG_RUNNING, ApiserverMetrics, is_watch, request_scope, request_verb
from apiserver.registry import Registry, conflict, status_details
from apiserver.registry import decode as registry_decode
from apiserver.resources import Resource, group_version, lookup, workloads
from apiserver.resources.base import Caller
from apiserver.resources.namespaces import ensure_default_namespaces
from apiserver.resources.nodes import NODES
from apiserver.resources.pods import PODS
from apiserver.resources.priorityclasses import ensure_system_priority_classes
from apiserver.resources.secrets import SECRETS
from apiserver.resources.serviceaccounts import SERVICE_ACCOUNTS
from apiserver.resources.tokens import TokenReviewer, token_request
from apiserver.rootca_publisher import RootCAPublisher
from apiserver.selectors import parse_field_selector, parse_label_selector
from apiserver.serviceaccount_controller import ServiceAccountsController
from apiserver.storage import EtcdTLS, Storage, TooLarge, Unavailable, encode, uses_tls
from apiserver.watch import WatchRequest, open_watch, watch_lines
from common import errors
from common.bootstraptoken import SYSTEM_NAMESPACE as BOOTSTRAP_NAMESPACE
from common.bootstraptoken import authenticate as authenticate_bootstrap_token
from common.bootstraptoken import parse_token as parse_bootstrap_token
from common.bootstraptoken import secret_name as bootstrap_secret_name
from common.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from common.models import Binding, Scale, TokenRequest
from common.upgrade import hijacker

log = logging.getLogger("apiserver")

DEFAULT_WATCH_TIMEOUT = 1800  # kube's --min-request-timeout
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
SUCCESS_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "code": 201}
# DeleteOptions is served in every group version and in meta.k8s.io/v1
DELETE_OPTIONS_VERSIONS = ("v1", "meta.k8s.io/v1")


@dataclass(frozen=True, slots=True)
class Target:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_target(api_version: str, path: str) -> Target:
    """("v1", `namespaces/default/pods/web/status`) -> Target(pods, default, web, status).

    `api_version` is the group/version the path was under: "v1" for `/api/v1`,
    "coordination.k8s.io/v1" for `/apis/coordination.k8s.io/v1`.
    """
    parts = [p for p in path.strip("/").split("/") if p]
    namespace: str | None = None
    if (len(parts) >= 3 and parts[0] == "namespaces" and parts[2] not in ("status", "finalize")):
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise errors.path_not_found()
    resource = lookup(api_version, parts[0])
    if resource is None or (namespace is not None and not resource.namespaced):
        raise errors.path_not_found()
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else None
    if name is not None and resource.namespaced and namespace is None:
        raise errors.path_not_found()
    if subresource is not None and subresource not in resource.subresources:
        raise errors.path_not_found()
    return Target(resource, namespace, name, subresource)


def present(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object as the client's group/version has it (converted when the resource is
    served in another version than it is stored in, like events.k8s.io/v1 Events)."""
    return obj if resource.from_storage is None else resource.from_storage(obj)


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None,
                  warnings: list[str] | None = None) -> Response:
    response = Response(encode(obj), status_code=status, media_type="application/json",
                        headers=headers)
    for text in warnings or ():
        response.raw_headers.append((b"warning", warning_header(text)))
    return response


def status_response(err: errors.ApiError) -> Response:
    return json_response(err.status(), err.code, headers=err.headers or None)


def internal_error() -> errors.InternalError:
    """What an unexpected exception answers (logged with its traceback by the catcher)."""
    return errors.InternalError("an error on the server prevented the request from succeeding")


def warning_header(text: str) -> bytes:
    """One `Warning: 299 - "text"` value as kube writes it: quotes and backslashes escaped,
    control characters (a newline, a NUL) as spaces, anything else as UTF-8; it cannot fail,
    whatever a client put in a field name."""
    quoted = "".join("\\" + c if c in '"\\' else (" " if ord(c) < 0x20 or ord(c) == 0x7F else c)
                     for c in text)
    return f'299 - "{quoted}"'.encode("utf-8", "replace")


def unknown_field_warnings(query: Any, unknown: list[str]) -> list[str]:
    """The warnings of fieldValidation=Warn (Strict refused unknown fields before writing)."""
    if not unknown or options.field_validation(query) != "Warn":
        return []
    return [f'unknown field "{path}"' for path in unknown]


def check_body_namespace(body: dict[str, Any], namespace: str | None) -> None:
    body_ns = (body.get("metadata") or {}).get("namespace")
    if namespace is not None and body_ns and body_ns != namespace:
        raise errors.BadRequest("the namespace of the provided object does not match the "
                                "namespace sent on the request")


def check_patched_identity(resource: Resource, patched: Any, target: Target) -> None:
    """A patch may not rename, move or retype its object (kube's checkName and decoder)."""
    if not isinstance(patched, dict):
        raise errors.BadRequest(f"the patched object is not a {resource.kind} object")
    check_type_meta(patched, resource.kind, resource.api_version)
    meta = patched.get("metadata") or {}
    name = meta.get("name")
    if name != target.name:
        raise errors.BadRequest(f"the name of the object ({name}) does not match the name on "
                                f"the URL ({target.name})")
    namespace = meta.get("namespace")
    if resource.namespaced and namespace not in (None, "", target.namespace):
        raise errors.BadRequest("the namespace of the provided object does not match the "
                                "namespace sent on the request")


def field_manager(request: Request) -> str:
    """Whom a write's managedFields entry names (`fieldManager`, else the user agent)."""
    return managed_fields.manager_name(request.query_params, request.headers.get("user-agent"))


def applied_config(resource: Resource, document: Any, target: Target, *,
                   strict: bool) -> tuple[dict[str, Any], list[str]]:
    """An apply body as the configuration it is: an object of the URL's kind, version,
    name and namespace, decoded (unknown fields dropped, or a 400 with Strict), in the
    stored form, without managedFields; and the unknown fields dropped."""
    if not isinstance(document, dict):
        raise errors.BadRequest(f"the body of an apply patch must be a {resource.kind} object")
    check_type_meta(document, resource.kind, resource.api_version)
    if not document.get("kind") or not document.get("apiVersion"):
        raise errors.BadRequest("apiVersion and kind must be set in an apply configuration")
    check_patched_identity(resource, document, target)
    config, unknown = registry_decode(resource, document, strict=strict)
    meta = config.get("metadata") or {}
    if "managedFields" in meta:
        raise errors.BadRequest("metadata.managedFields must be nil")
    return config, unknown


class ApiServer:
    def __init__(self, registry: Registry,
                 service_accounts: ServiceAccountTokens | None = None) -> None:
        self.registry = registry
        self.service_accounts = service_accounts
        # TokenReview's: the secure port's authenticator, set once it is built
        self.review_token: TokenReviewer | None = None
        # how it calls kubelets (--kubelet-client-certificate ...): None, plain HTTP
        self.kubelet_tls: ssl.SSLContext | None = None
        self.metrics: ApiserverMetrics | None = None  # set by create_app

    async def serve(self, request: Request, api_version: str, path: str) -> Response:
        try:
            target = parse_target(api_version, path)
        except errors.ApiError as e:
            return status_response(e)
        return await self.answer(request, target)

    async def answer(self, request: Request, target: Target) -> Response:
        """The response to one request: every failure is a Status."""
        with warning.recording() as warnings:
            response = await self.answer_recorded(request, target)
        for text in warnings:
            response.raw_headers.append((b"warning", warning_header(text)))
        return response

    async def answer_recorded(self, request: Request, target: Target) -> Response:
        try:
            return await self.dispatch(request, target)
        except errors.ApiError as e:
            return status_response(e)
        except TooLarge as e:
            return status_response(errors.RequestEntityTooLarge(
                f"Request entity too large: {e}"))
        except Unavailable as e:
            log.warning("%s %s: %s", request.method, request.url.path, e)
            return status_response(errors.ServiceUnavailable(
                f"storage is unavailable: {e}", headers={"Retry-After": "1"}))
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return status_response(internal_error())

    async def dispatch(self, request: Request, target: Target) -> Response:
        method = request.method
        if target.resource.review is not None:
            if target.name is None and method == "POST" and (
                    target.namespace or not target.resource.namespaced):
                return await self.review(request, target)
            raise errors.method_not_allowed()
        if target.name is None:
            if method == "GET":
                return await self.list_or_watch(request, target)
            # a namespaced resource's cluster-wide collection is for reading only
            if method == "POST" and (target.namespace or not target.resource.namespaced):
                return await self.create(request, target)
            if method == "DELETE" and target.resource.delete_collection and (
                    target.namespace is not None or not target.resource.namespaced):
                return await self.delete_collection(request, target)
        elif target.subresource is None:
            if method == "GET":
                return self.render(request, target, await self.registry.get(
                    target.resource, target.namespace, target.name))
            if method == "PUT":
                return await self.update(request, target)
            if method == "PATCH":
                return await self.patch(request, target)
            if method == "DELETE":
                return await self.delete(request, target)
        elif target.subresource == "finalize" and method != "PUT":
            raise errors.method_not_allowed()  # namespaces/finalize: update only, as kube
        elif target.subresource == "status" or \
                target.subresource in target.resource.subresource_updates:
            if method == "GET":
                return json_response(present(target.resource, await self.registry.get(
                    target.resource, target.namespace, target.name)))
            if method == "PUT":
                return await self.update(request, target)
            if method == "PATCH":
                return await self.patch(request, target)
        elif target.subresource == "binding" and method == "POST":
            return await self.bind(request, target)
        elif target.subresource == "token" and method == "POST":
            return await self.token(request, target)
        elif target.subresource == "log" and method == "GET":
            return await self.pod_log(request, target)
        elif target.subresource == "eviction" and method == "POST":
            return await self.evict(request, target)
        elif target.subresource in streaming.SUBRESOURCES and method in ("GET", "POST"):
            return await self.stream(request, target)
        elif target.subresource == "scale" and method in ("GET", "PUT", "PATCH"):
            return await self.scale(request, target)
        raise errors.method_not_allowed()

    # -- reads -------------------------------------------------------------------------

    def render(self, request: Request, target: Target, obj: dict[str, Any]) -> Response:
        obj = present(target.resource, obj)
        if tables.wants_table(request.headers.get("accept")):
            return json_response(tables.to_table(
                target.resource, [obj],
                resource_version=obj["metadata"].get("resourceVersion", ""),
                include_object=request.query_params.get("includeObject", "Metadata")))
        return json_response(obj)

    def selectors(self, request: Request, resource: Resource) -> tuple[Any, Any]:
        label_text = request.query_params.get("labelSelector", "")
        field_text = request.query_params.get("fieldSelector", "")
        labels = parse_label_selector(label_text) if label_text else None
        fields = parse_field_selector(field_text, resource) if field_text else None
        return labels, fields

    async def list_or_watch(self, request: Request, target: Target) -> Response:
        labels, fields = self.selectors(request, target.resource)
        if options.query_bool(request.query_params, "watch"):
            return await self.watch(request, target, labels, fields)
        list_options = parse_list_options(request.query_params)
        page = await self.registry.list_page(target.resource, target.namespace, list_options,
                                             labels=labels, fields=fields)
        if tables.wants_table(request.headers.get("accept")):
            table = tables.to_table(
                target.resource, [present(target.resource, item.obj) for item in page.items],
                resource_version=str(page.revision),
                include_object=request.query_params.get("includeObject", "Metadata"),
                continue_token=page.continue_token or None)
            if page.remaining is not None:
                table["metadata"]["remainingItemCount"] = page.remaining
            return json_response(table)
        return Response(list_body(target.resource, page), media_type="application/json")

    async def watch(self, request: Request, target: Target, labels: Any, fields: Any,
                    ) -> Response:
        timeout = options.query_int(request.query_params, "timeoutSeconds")
        watch_request = WatchRequest(
            resource=target.resource, namespace=target.namespace,
            resource_version=request.query_params.get("resourceVersion"),
            labels=labels, fields=fields,
            timeout_seconds=float(timeout) if timeout and timeout > 0 else DEFAULT_WATCH_TIMEOUT,
            bookmarks=options.query_bool(request.query_params, "allowWatchBookmarks"),
            send_initial_events=options.query_bool(request.query_params, "sendInitialEvents"))
        check_watch_options(request.query_params,
                            send_initial_events=watch_request.send_initial_events,
                            bookmarks=watch_request.bookmarks)
        events = await open_watch(self.registry, watch_request)
        render = None
        if tables.wants_table(request.headers.get("accept")):
            render = table_event_renderer(target.resource,
                                          request.query_params.get("includeObject", "Metadata"))
        elif target.resource.from_storage is not None:
            render = converted_event_renderer(target.resource)
        sent = None if self.metrics is None else self.metrics.count_watch_event(target.resource)
        return StreamingResponse(
            watch_lines(events, timeout=watch_request.timeout_seconds, render=render,
                        sent=sent),
            media_type="application/json", headers={"Transfer-Encoding": "chunked"})

    # -- writes ------------------------------------------------------------------------

    async def decode(self, request: Request, target: Target,
                     ) -> tuple[dict[str, Any], list[str], bool]:
        """(the body decoded as the resource's kind, the warnings to send, dry run?): all
        of it decided before anything is written."""
        query = request.query_params
        strict = options.field_validation(query) == "Strict"
        dry_run = options.dry_run(query)
        resource = target.resource
        body = await decode_object(request, resource.kind, resource.api_version)
        check_body_namespace(body, target.namespace)
        pruned, unknown = registry_decode(resource, body, strict=strict)
        return pruned, unknown_field_warnings(query, unknown), dry_run

    async def review(self, request: Request, target: Target) -> Response:
        """POST to a review resource: answered, never stored."""
        assert target.resource.review is not None
        body, warnings, _ = await self.decode(request, target)
        caller = Caller(user=request_user(request.scope), authorizer=self.registry.authorizer,
                        namespace=target.namespace, review_token=self.review_token)
        return json_response(await target.resource.review(body, caller), 201, warnings=warnings)

    async def create(self, request: Request, target: Target) -> Response:
        managed_fields.check_field_manager(request.query_params, "CreateOptions")
        body, warnings, dry_run = await self.decode(request, target)
        obj, _ = await self.registry.create(target.resource, target.namespace, body,
                                            dry_run=dry_run, decoded=True,
                                            manager=field_manager(request),
                                            user=request_user(request.scope))
        if not dry_run:
            log.info("created %s %s", target.resource.plural, describe(obj))
        return json_response(present(target.resource, obj), 201, warnings=warnings)

    async def update(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        managed_fields.check_field_manager(request.query_params, "UpdateOptions")
        body, warnings, dry_run = await self.decode(request, target)
        obj, _, created = await self.registry.update(target.resource, target.namespace,
                                                     target.name, body, decoded=True,
                                                     subresource=target.subresource,
                                                     dry_run=dry_run,
                                                     manager=field_manager(request),
                                                     user=request_user(request.scope))
        if created and not dry_run:
            log.info("created %s %s", target.resource.plural, describe(obj))
        return json_response(present(target.resource, obj), 201 if created else 200,
                             warnings=warnings)

    async def patch(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        patch_type = PATCH_TYPES.get(media_type(request))
        if patch_type is None:
            raise unsupported_media_type(", ".join(PATCH_TYPES))
        managed_fields.check_patch_options(request.query_params, apply=patch_type == "apply")
        if patch_type == "apply":
            return await self.apply(request, target)
        dry_run = options.dry_run(request.query_params)
        options.field_validation(request.query_params)
        document = await parse_body(await read_body(request), "json")
        resource = target.resource
        precondition = None
        if isinstance(document, dict):
            meta = document.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("resourceVersion"), str):
                precondition = meta["resourceVersion"] or None

        def apply(current: dict[str, Any]) -> dict[str, Any]:
            served = present(resource, current)  # patched as the client sees it
            if patch_type == "merge":
                patched = patch.apply_merge_patch(served, document)
            elif patch_type == "json":
                patched = patch.apply_json_patch(served, document)
            else:
                patched = patch.apply_strategic_merge_patch(served, document,
                                                            merge_keys=resource.merge_keys)
            check_patched_identity(resource, patched, target)
            pruned, _ = schema.decode(resource.model, patched)
            if resource.to_storage is not None:
                pruned = resource.to_storage(pruned)
            return objects.prepare_for_update(resource, pruned, current,
                                              subresource=target.subresource)

        obj = await self.registry.guaranteed_update(resource, target.namespace, target.name,
                                                    apply, precondition=precondition,
                                                    subresource=target.subresource,
                                                    dry_run=dry_run,
                                                    manager=field_manager(request),
                                                    user=request_user(request.scope))
        return json_response(present(resource, obj))

    async def apply(self, request: Request, target: Target) -> Response:
        """Server-side apply (`application/apply-patch+yaml`): the body is the manager's
        configuration, merged into the object, or creating it when there is none."""
        assert target.name is not None
        query = request.query_params
        dry_run = options.dry_run(query)
        strict = options.field_validation(query) == "Strict"
        manager = query["fieldManager"]
        force = options.query_bool(query, "force")
        resource = target.resource
        document = await parse_body(await read_body(request), "yaml")
        config, unknown = applied_config(resource, document, target, strict=strict)
        warnings = unknown_field_warnings(query, unknown)

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            merged = managed_fields.record_apply(resource, current, config, manager=manager,
                                                 subresource=target.subresource, force=force)
            schema.drop_empty(resource.model, merged)  # what pruning emptied, as Go omits it
            # what pruning removed and has a default gets it back before the spec is
            # compared (a re-apply that drops a defaulted field bumps no generation)
            merged = objects.default_object(resource, merged, old=current)
            updated = objects.prepare_for_update(resource, merged, current,
                                                 subresource=target.subresource)
            return managed_fields.with_managed(updated, managed_fields.managed_of(merged) or [])

        for _ in range(2):
            try:
                obj = await self.registry.guaranteed_update(
                    resource, target.namespace, target.name, mutate,
                    subresource=target.subresource, dry_run=dry_run,
                    user=request_user(request.scope))
                return json_response(present(resource, obj), warnings=warnings)
            except errors.NotFound:
                if target.subresource is not None:
                    raise
            new = managed_fields.record_apply(resource, None, config, manager=manager,
                                              subresource=None, force=force)
            try:
                obj, _ = await self.registry.create(resource, target.namespace, new,
                                                    dry_run=dry_run, decoded=True,
                                                    user=request_user(request.scope))
            except errors.AlreadyExists:
                continue  # created meanwhile: apply to it
            if not dry_run:
                log.info("created %s %s (apply by %s)", resource.plural, describe(obj), manager)
            return json_response(present(resource, obj), 201, warnings=warnings)
        raise conflict(resource, target.name)

    async def delete(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        body = await decode_optional_object(request, "DeleteOptions",
                                            target.resource.api_version,
                                            accept_api_versions=DELETE_OPTIONS_VERSIONS)
        delete_options = options.delete_options(request.query_params, body)
        obj, deleted = await self.registry.delete(
            target.resource, target.namespace, target.name,
            grace_period=delete_options.grace_period_seconds,
            preconditions=delete_options.preconditions, dry_run=delete_options.dry_run,
            user=request_user(request.scope), propagation_policy=delete_options.propagation_policy,
            orphan_dependents=delete_options.orphan_dependents)
        log.info("%s%s %s %s", "dry run: " if delete_options.dry_run else "",
                 "deleted" if deleted else "marked for deletion", target.resource.plural,
                 describe(obj))
        if target.resource.returns_deleted_object or not deleted:
            return json_response(present(target.resource, obj))
        details = {**status_details(target.resource, target.name),
                   "uid": obj["metadata"].get("uid")}
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "details": details})

    async def delete_collection(self, request: Request, target: Target) -> Response:
        resource = target.resource
        labels, fields = self.selectors(request, resource)
        list_options = parse_list_options(request.query_params)
        body = await decode_optional_object(request, "DeleteOptions", resource.api_version,
                                            accept_api_versions=DELETE_OPTIONS_VERSIONS)
        delete_options = options.delete_options(request.query_params, body)
        done = await self.registry.delete_collection(
            resource, target.namespace, list_options, labels=labels, fields=fields,
            grace_period=delete_options.grace_period_seconds,
            preconditions=delete_options.preconditions, dry_run=delete_options.dry_run,
            user=request_user(request.scope), propagation_policy=delete_options.propagation_policy,
            orphan_dependents=delete_options.orphan_dependents)
        selected = " ".join(f"{k}={request.query_params[k]}" for k in
                            ("labelSelector", "fieldSelector") if request.query_params.get(k))
        log.info("%sdeletecollection %s%s%s: %d object(s)",
                 "dry run: " if delete_options.dry_run else "", resource.plural,
                 f" in {target.namespace}" if target.namespace else "",
                 f" ({selected})" if selected else "", len(done))
        return json_response({"kind": resource.list_kind, "apiVersion": resource.api_version,
                              "metadata": {},
                              "items": [present(resource, obj) for obj in done]})

    async def bind(self, request: Request, target: Target) -> Response:
        assert target.name is not None and target.namespace is not None
        dry_run = options.dry_run(request.query_params)
        body = await decode_object(request, "Binding", "v1")
        binding, _ = schema.decode(Binding, body)
        body_name = (binding.get("metadata") or {}).get("name")
        if body_name and body_name != target.name:
            raise errors.BadRequest(f"the name of the object ({body_name}) does not match the "
                                    f"name on the URL ({target.name})")
        await self.registry.bind(target.resource, target.namespace, target.name, binding,
                                 dry_run=dry_run, user=request_user(request.scope))
        if not dry_run:
            log.info("bound pod %s/%s to %s", target.namespace, target.name,
                     (binding.get("target") or {}).get("name"))
        return json_response(SUCCESS_CREATED, 201)

    async def token(self, request: Request, target: Target) -> Response:
        """POST serviceaccounts/{name}/token (TokenRequest, `kubectl create token`)."""
        assert target.name is not None and target.namespace is not None
        if self.service_accounts is None or self.service_accounts.signing_key is None:
            raise errors.NotFound("the server could not find the requested resource")
        body = await decode_object(request, "TokenRequest", "authentication.k8s.io/v1")
        token_request_body, _ = schema.decode(TokenRequest, body)
        namespace = target.namespace
        sa = await self.registry.get(SERVICE_ACCOUNTS, namespace, target.name)

        pods: dict[str, dict[str, Any]] = {}

        async def get_pod(name: str) -> dict[str, Any]:  # read once: by the check and the mint
            if name not in pods:
                pods[name] = await self.registry.get(PODS, namespace, name)
            return pods[name]

        user = request_user(request.scope)
        node, is_node = node_identity(user)
        if is_node:  # NodeRestriction: only tokens bound to a pod of its own
            write = Write(user, "CREATE", "", "serviceaccounts", "token", namespace,
                          target.name, token_request_body, None)
            if not node:
                raise admission_forbidden(write, f"could not determine node from user "
                                                 f"{user.name!r}")
            ref = (token_request_body.get("spec") or {}).get("boundObjectRef") or {}
            pod = await get_pod(str(ref["name"])) if ref.get("name") else {}
            why = node_token_restriction(node, token_request_body, pod)
            if why is not None:
                raise admission_forbidden(write, why)
        answer = await token_request(self.service_accounts, sa, token_request_body, get_pod,
                                     int(time.time()))
        log.info("issued a token for serviceaccount %s/%s", namespace, target.name)
        return json_response(answer, 201)

    async def evict(self, request: Request, target: Target) -> Response:
        """POST pods/{name}/eviction (policy/v1 Eviction, what `kubectl drain` sends). No
        PodDisruptionBudget exists here, so an eviction is the pod's delete with the
        Eviction's DeleteOptions, dryRun included, as kube's eviction REST does for a pod no
        budget covers."""
        assert target.name is not None
        body = await decode_object(request, "Eviction", "policy/v1",
                                   accept_api_versions=("policy/v1beta1",))
        check_body_namespace(body, target.namespace)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name != target.name:
            raise errors.BadRequest("name in URL does not match name in Eviction object")
        delete_body = body.get("deleteOptions")
        if delete_body is not None and not isinstance(delete_body, dict):
            raise errors.BadRequest("deleteOptions of an Eviction must be an object")
        delete_options = options.delete_options(request.query_params, delete_body)
        obj, deleted = await self.registry.delete(
            target.resource, target.namespace, target.name,
            grace_period=delete_options.grace_period_seconds,
            preconditions=delete_options.preconditions, dry_run=delete_options.dry_run,
            user=request_user(request.scope), subresource="eviction")
        log.info("%sevicted pod %s (%s)", "dry run: " if delete_options.dry_run else "",
                 describe(obj), "deleted" if deleted else "marked for deletion")
        return json_response(SUCCESS_CREATED, 201)

    async def scale(self, request: Request, target: Target) -> Response:
        """GET/PUT/PATCH .../{name}/scale: the object's spec.replicas as an autoscaling/v1
        Scale (`kubectl scale` patches it); a write changes spec.replicas and nothing else,
        through the resource's own update validation, as kube's ScaleREST does."""
        assert target.name is not None
        resource, name = target.resource, target.name
        if request.method == "GET":
            return json_response(workloads.scale_of(
                await self.registry.get(resource, target.namespace, name)))
        dry_run = options.dry_run(request.query_params)
        change, precondition = await self.scale_change(request, target)

        def mutate(current: dict[str, Any]) -> dict[str, Any]:
            scale = change(workloads.scale_of(present(resource, current)))
            causes = workloads.validate_scale(scale)
            if causes:
                raise errors.invalid("Scale.autoscaling", name, causes, group="autoscaling")
            replicas = (scale.get("spec") or {}).get("replicas") or 0
            return objects.prepare_for_update(resource, workloads.with_replicas(current, replicas),
                                              current, subresource=None)

        obj = await self.registry.guaranteed_update(
            resource, target.namespace, name, mutate, precondition=precondition,
            subresource="scale", dry_run=dry_run, manager=field_manager(request),
            user=request_user(request.scope))
        if not dry_run:
            log.info("scaled %s %s to %s", resource.plural, describe(obj),
                     (obj.get("spec") or {}).get("replicas"))
        return json_response(workloads.scale_of(obj))

    async def scale_change(self, request: Request, target: Target,
                           ) -> tuple[Callable[[dict[str, Any]], dict[str, Any]], str | None]:
        """(the stored object's Scale -> the Scale the request makes of it, the
        resourceVersion the client named): a PUT's body, or a patch applied to the Scale."""
        if request.method == "PUT":
            body = await decode_object(request, "Scale", workloads.SCALE_GROUP_VERSION)
            check_body_namespace(body, target.namespace)
            sent, _ = schema.decode(Scale, body)
            body_name = (sent.get("metadata") or {}).get("name")
            if body_name and body_name != target.name:
                raise errors.BadRequest(f"the name of the object ({body_name}) does not match "
                                        f"the name on the URL ({target.name})")
            return (lambda current: sent), (sent.get("metadata") or {}).get(
                "resourceVersion") or None
        patch_type = PATCH_TYPES.get(media_type(request))
        if patch_type is None or patch_type == "apply":
            raise unsupported_media_type(", ".join(t for t, kind in PATCH_TYPES.items()
                                                   if kind != "apply"))
        document = await parse_body(await read_body(request), "json")
        precondition = None
        if isinstance(document, dict) and isinstance(document.get("metadata"), dict):
            precondition = document["metadata"].get("resourceVersion") or None

        def patched(current: dict[str, Any]) -> dict[str, Any]:
            if patch_type == "json":
                out = patch.apply_json_patch(current, document)
            else:  # a Scale has no lists: strategic merge is a merge patch
                out = patch.apply_merge_patch(current, document)
            if not isinstance(out, dict):
                raise errors.BadRequest("the patched object is not a Scale object")
            return schema.decode(Scale, out)[0]

        return patched, precondition if isinstance(precondition, str) else None

    async def pod_log(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        from apiserver.logs import proxy_pod_log

        pod = await self.registry.get(target.resource, target.namespace, target.name)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise errors.BadRequest(f"pod {target.name} does not have a host assigned")
        node = await self.registry.get(NODES, None, node_name)
        return await proxy_pod_log(pod, node, dict(request.query_params), tls=self.kubelet_tls)

    async def stream(self, request: Request, target: Target) -> Response:
        """exec, attach, portforward: proxied to the kubelet (apiserver/streaming.py), in
        kube's order: options, pod, container and host, then the upgrade itself."""
        assert target.name is not None and target.subresource is not None
        if request.method == "GET":
            await streaming.authorize_create(self.registry.authorizer,
                                             request_user(request.scope), target.subresource,
                                             target.namespace or "", target.name)
        values: dict[str, list[str]] = {}
        for key, value in request.query_params.multi_items():
            values.setdefault(key, []).append(value)
        query = streaming.kubelet_query(target.subresource, values)
        pod = await self.registry.get(target.resource, target.namespace, target.name)
        container = None
        if target.subresource != "portforward":
            container = choose_container(pod, values.get("container", [""])[-1] or None)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise errors.BadRequest(f"pod {target.name} does not have a host assigned")
        if not streaming.is_upgrade({k.lower(): v for k, v in request.headers.items()}) \
                or hijacker(request.scope) is None:
            raise errors.BadRequest("Upgrade request required")
        node = await self.registry.get(NODES, None, node_name)
        return await streaming.connect(request.method, target.subresource, pod, container,
                                       node, query, request.headers.items(),
                                       tls=self.kubelet_tls)


def list_body(resource: Resource, page: ListPage) -> bytes:
    """A List of the page's objects, joined from each one's JSON (encoded once, cached)."""
    meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    head = (b'{"kind":"' + resource.list_kind.encode() + b'","apiVersion":"'
            + resource.api_version.encode() + b'","metadata":' + encode(meta) + b',"items":[')
    if resource.from_storage is None:
        return head + b",".join(item.json for item in page.items) + b"]}"
    convert = resource.from_storage  # another version than stored: each item converted
    return head + b",".join(encode(convert(item.obj)) for item in page.items) + b"]}"


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def converted_event_renderer(resource: Resource) -> Any:
    """Watch events of a resource served in another version than stored, converted."""
    def render(event: dict[str, Any]) -> dict[str, Any]:
        if event["type"] in ("ERROR", "BOOKMARK"):
            return event
        return {"type": event["type"], "object": present(resource, event["object"])}

    return render


def table_event_renderer(resource: Resource, include_object: str) -> Any:
    first = True

    def render(event: dict[str, Any]) -> dict[str, Any]:
        nonlocal first
        if event["type"] in ("ERROR", "BOOKMARK"):
            return event
        obj = present(resource, event["object"])
        table = tables.to_table(resource, [obj],
                                resource_version=obj["metadata"].get("resourceVersion", ""),
                                include_object=include_object,
                                include_column_definitions=first)
        first = False
        return {"type": event["type"], "object": table}

    return render


def create_app(etcd_servers: list[str], *, etcd_prefix: str = "/registry",
               event_ttl: int = 3600,
               compaction_interval: float = DEFAULT_COMPACTION_INTERVAL,
               controllers: bool = True,
               authorization_modes: Sequence[str] = ("AlwaysAllow",),
               service_accounts: ServiceAccountTokens | None = None,
               etcd_tls: EtcdTLS | None = None,
               services: ServiceOptions | None = None,
               root_ca: str | None = None) -> ResourceFront:
    """The apiserver's ASGI app. `etcd_tls`: the CA and client certificate for `https://`
    etcd servers (--etcd-cafile, --etcd-certfile, --etcd-keyfile). `controllers`: whether this process also runs the
    in-process controllers (the built-in namespaces, each namespace's default ServiceAccount);
    with --workers only worker 0 does. Every
    process compacts: like kube's apiservers, they agree on etcd who does it each interval.
    `authorization_modes`: --authorization-mode, the authorizers of the secure port
    (`front.authorizer`). `service_accounts`: the ServiceAccount token keys and issuer
    (TokenRequest; the secure port authenticates with `front.service_account_user`).
    `services`: the Service ranges and the kubernetes Service (apiserver/controlplane.py).
    `root_ca`: the CA bundle (PEM) published in every namespace as `kube-root-ca.crt`
    (--root-ca-file); pods get their `kube-api-access-*` volume when tokens can be signed."""
    storage = Storage(etcd_servers, etcd_tls)
    compactor = Compactor(storage, compaction_interval)
    registry = Registry(storage, prefix=etcd_prefix, event_ttl=event_ttl)
    registry.authorizer = authorizer = build_authorizer(authorization_modes, registry)
    registry.write_checks = write_checks(registry, authorizer)
    server = ApiServer(registry, service_accounts)
    server.metrics = metrics = ApiserverMetrics(registry)
    service_accounts_controller = ServiceAccountsController(registry)
    registry.mount_service_account_tokens = (service_accounts is not None
                                             and service_accounts.signing_key is not None)
    root_ca_publisher = RootCAPublisher(registry, root_ca) if root_ca else None
    services = services or ServiceOptions()
    registry.allocations = services.ranges(registry)
    service_control_plane = ServiceControlPlane(
        registry, registry.allocations, secure_port=services.secure_port,
        advertise_address=services.advertise_address, repair_interval=services.repair_interval)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await storage.start()
        registry.start_caches()
        if controllers:
            await reconcile_bootstrap_policy(registry)
            await ensure_system_priority_classes(registry)
            default_namespaces = asyncio.create_task(ensure_default_namespaces(registry),
                                                     name="default namespaces")
            service_accounts_controller.start()
            if root_ca_publisher is not None:
                root_ca_publisher.start()
            await service_control_plane.start()
        compactor.start()
        log.info("apiserver using etcd at %s over %s (prefix %s)", storage.target,
                 "TLS" if uses_tls(etcd_servers) else "plaintext", etcd_prefix)
        yield
        await compactor.stop()
        await service_accounts_controller.stop()
        if root_ca_publisher is not None:
            await root_ca_publisher.stop()
        await service_control_plane.stop()
        if controllers:
            default_namespaces.cancel()
            await asyncio.gather(default_namespaces, return_exceptions=True)
        await registry.cacher.stop()
        await storage.close()

    app = FastAPI(title="kubelite apiserver", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None, redirect_slashes=False)
    app.state.registry = registry

    @app.exception_handler(errors.ApiError)
    async def api_error(request: Request, exc: errors.ApiError) -> Response:
        return status_response(exc)

    # What the router itself refuses (no route: 404, a route without the method: 405) is a
    # Status too, as kube's go-restful ServiceErrorHandler answers, never FastAPI's JSON.
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return status_response(errors.generic_server_response(exc.status_code))

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> Response:
        return status_response(errors.generic_server_response(400))

    # Anything else any route raises (Starlette's ServerErrorMiddleware calls this, sends
    # what it returns, then re-raises for ResourceFront, which knows it was answered).
    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        request.scope[ANSWERED] = exc
        return status_response(internal_error())

    async def handle_core(request: Request, path: str) -> Response:
        return await server.serve(request, "v1", path)

    async def handle_group(request: Request, group: str, version: str, path: str) -> Response:
        return await server.serve(request, group_version(group, version), path)

    verbs = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app.include_router(discovery.router)  # before the catch-alls below
    app.include_router(openapi.router)
    app.include_router(openapi_v2.router)
    app.include_router(dashboard.router)
    app.add_api_route("/api/v1/{path:path}", handle_core, methods=verbs,
                      include_in_schema=False)
    app.add_api_route("/apis/{group}/{version}/{path:path}", handle_group, methods=verbs,
                      include_in_schema=False)

    @app.get("/healthz", include_in_schema=False)
    @app.get("/livez", include_in_schema=False)
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        try:
            await storage.revision()
        except Unavailable as e:
            return PlainTextResponse(f"[-]etcd failed: {e}\nreadyz check failed", 503)
        return PlainTextResponse("ok")

    @app.get("/metrics", include_in_schema=False)
    async def metrics_page() -> Response:
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    return ResourceFront(server, app, authorizer)


API_VERBS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
ANSWERED = "kubelite.answered"  # scope key: the exception a 500 Status was already sent for


def header(scope: Any, name: bytes) -> str:
    """One request header from the ASGI scope (its name lower-case), "" when absent."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def api_path(path: str) -> tuple[str, str] | None:
    """(group/version, the rest) of a resource URL: `/api/v1/namespaces/default/pods` ->
    ("v1", "namespaces/default/pods"); `/apis/coordination.k8s.io/v1/leases` ->
    ("coordination.k8s.io/v1", "leases"); None for anything else."""
    if path.startswith("/api/v1/"):
        rest = path[len("/api/v1/"):]
        return ("v1", rest) if rest else None
    if path.startswith("/apis/"):
        parts = path[len("/apis/"):].split("/", 2)
        if len(parts) == 3 and parts[0] and parts[1] and parts[2]:
            return group_version(parts[0], parts[1]), parts[2]
    return None


class ResourceFront:
    """The ASGI app: requests for served resources go straight to the dispatcher (FastAPI's
    routing, dependency and middleware work per request cost more than the rest of a
    create); everything else (discovery, OpenAPI, health, lifespan) goes to FastAPI."""

    def __init__(self, server: ApiServer, app: FastAPI, authorizer: Authorizer) -> None:
        self.server = server
        self.app = app
        self.authorizer = authorizer

    async def service_account_user(self, token: str, audiences: Sequence[str] = ()) -> tuple[
            UserInfo, list[str]]:
        """The ServiceAccount a token is for, while it and its bound pod exist unchanged
        (kube's legacy and bound token validators); AuthenticationFailed otherwise."""
        tokens = self.server.service_accounts
        if tokens is None:
            raise AuthenticationFailed("service account tokens are not configured")
        registry = self.server.registry

        def uid_of(resource: Resource) -> Callable[[str, str], Awaitable[str | None]]:
            async def lookup(namespace: str, name: str) -> str | None:
                obj = await registry.get_recent(resource, namespace, name)
                return None if obj is None else str(obj["metadata"].get("uid", ""))
            return lookup

        try:
            return await tokens.authenticate(
                token, now=int(time.time()), service_account_uid=uid_of(SERVICE_ACCOUNTS),
                pod_uid=uid_of(PODS), audiences=audiences)
        except InvalidToken as e:
            raise AuthenticationFailed(str(e)) from None

    async def bootstrap_token_user(self, token: str, audiences: Sequence[str] = ()) -> tuple[
            UserInfo, list[str]]:
        """The user of a bootstrap token (`system:bootstrap:ID`, common/bootstraptoken.py),
        while its kube-system Secret vouches for it; AuthenticationFailed otherwise."""
        parsed = parse_bootstrap_token(token)
        if parsed is None:
            raise AuthenticationFailed("not a bootstrap token")
        secret = await self.server.registry.get_recent(
            SECRETS, BOOTSTRAP_NAMESPACE, bootstrap_secret_name(parsed.id))
        user = authenticate_bootstrap_token(token, secret, datetime.now(UTC))
        if user is None:
            raise AuthenticationFailed(f"bootstrap token {parsed.id!r} is not valid")
        return with_authenticated(UserInfo(user.name, groups=user.groups)), list(audiences)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.route(scope, receive, tracked_send)
        except Exception as exc:
            if scope.get(ANSWERED) is exc:
                return  # logged, and answered with a 500 Status
            log.error("%s %s failed", scope["method"], scope["path"], exc_info=exc)
            if not started:  # else a stream broke off: the client sees it end
                await status_response(internal_error())(scope, receive, send)

    async def route(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] in API_VERBS:
            found = api_path(scope["path"])
            if found is not None:
                try:
                    target = parse_target(*found)
                except errors.NotFound:
                    target = None  # not ours: FastAPI's 404
                if target is not None:
                    await self.answer_measured(scope, receive, send, target)
                    return
        await self.app(scope, receive, send)

    async def answer_measured(self, scope: Any, receive: Any, send: Any, target: Target,
                              ) -> None:
        """Answer a resource request, counted and timed as kube's endpoint metrics do."""
        metrics = self.server.metrics
        if metrics is None:
            await (await self.server.answer(Request(scope, receive), target))(
                scope, receive, send)
            return
        started = time.perf_counter()
        method: str = scope["method"]
        query: bytes = scope["query_string"]
        verb = request_verb(
            method, named=target.name is not None, subresource=target.subresource,
            watch=method == "GET" and target.name is None and is_watch(query),
            content_type=header(scope, b"content-type") if method == "PATCH" else "",
            collection_delete=target.name is None)
        subresource = target.subresource or ""
        where = request_scope(target.namespace, target.name)
        long_running = verb in LONG_RUNNING
        code = 500
        metrics.started(verb)
        if long_running:
            metrics.long_running(verb, target.resource, subresource, where, 1)
        try:
            response = await self.server.answer(Request(scope, receive), target)
            code = response.status_code
            await response(scope, receive, send)
        finally:
            if long_running:
                metrics.long_running(verb, target.resource, subresource, where, -1)
            metrics.finished(verb, "All" if b"dryRun=" in query else "", target.resource,
                             subresource, where, code, time.perf_counter() - started)
