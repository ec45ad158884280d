"""The HTTP face of the apiserver: one route serves every resource of every group.

`/api/v1/...` (the core group) and `/apis/{group}/{version}/...` (every other group)
go to the same dispatcher. A request is parsed into a `Target` (resource, namespace,
name, subresource), its body decoded (JSON or YAML, size- and type-checked), handed to
the `Registry` verb, and the answer rendered as JSON, as a Table when kubectl asks for
one, or as a watch stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from apiserver import discovery, listing, objects, openapi, patch, protobuf, schema, tables
from apiserver.listing import ListPage, check_watch_options, parse_list_options
from apiserver.namespace_controller import NamespaceController
from apiserver.registry import Registry, status_details
from apiserver.resources import Resource, group_version, lookup
from apiserver.resources.nodes import NODES
from apiserver.selectors import parse_field_selector, parse_label_selector
from apiserver.storage import Storage, Unavailable, encode
from apiserver.watch import WatchRequest, open_watch, watch_lines
from common import errors

log = logging.getLogger("apiserver")

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's limit for a request body
DEFAULT_WATCH_TIMEOUT = 1800  # kube's --min-request-timeout
JSON_TYPES = ("application/json", "")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}
ACCEPTED_BODY_TYPES = "application/json, application/yaml"
SUCCESS_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "code": 201}


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
        raise errors.NotFound("the server could not find the requested resource")
    resource = lookup(api_version, parts[0])
    if resource is None or (namespace is not None and not resource.namespaced):
        raise errors.NotFound("the server could not find the requested resource")
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else None
    if name is not None and resource.namespaced and namespace is None:
        raise errors.NotFound("the server could not find the requested resource")
    if subresource is not None and subresource not in resource.subresources:
        raise errors.NotFound("the server could not find the requested resource")
    return Target(resource, namespace, name, subresource)


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None,
                  ) -> Response:
    return Response(encode(obj), status_code=status, media_type="application/json",
                    headers=headers)


def status_response(err: errors.ApiError) -> Response:
    return json_response(err.status(), err.code, headers=err.headers or None)


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise errors.RequestEntityTooLarge("the server has received a request that is too large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise errors.RequestEntityTooLarge(
                "the server has received a request that is too large")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_document(raw: bytes, kind: str) -> Any:
    if kind == "yaml":
        try:
            return yaml.safe_load(raw.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise errors.BadRequest(f"error decoding YAML: {e}") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # the stdlib's message is the one clients know; it also reads 65-bit integers
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise errors.BadRequest(f"couldn't get version/kind; json parse error: {e}") from None


async def decode_object(request: Request, resource: Resource, *, kind: str | None = None,
                        ) -> dict[str, Any]:
    """The request body as an object of `kind` (JSON, YAML, or protobuf for the kinds
    kubectl's typed clients send that way)."""
    content_type = media_type(request)
    if content_type not in JSON_TYPES + YAML_TYPES + (protobuf.MEDIA_TYPE,):
        raise errors.UnsupportedMediaType(
            f'the body of the request was in an unknown format - accepted media types include: '
            f'{ACCEPTED_BODY_TYPES}')
    raw = await read_body(request)
    if not raw.strip():
        raise errors.BadRequest("the body of the request was empty")
    if content_type == protobuf.MEDIA_TYPE:
        body: Any = protobuf.decode(raw, accepted=ACCEPTED_BODY_TYPES)
    else:
        body = parse_document(raw, "yaml" if content_type in YAML_TYPES else "json")
    expected_kind = kind or resource.kind
    version = resource.version
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body of the request is not a {expected_kind} object")
    body_kind, api_version = body.get("kind"), body.get("apiVersion")
    if body_kind not in (None, "", expected_kind):
        raise errors.BadRequest(f'{expected_kind} in version "{version}" cannot be handled as '
                                f'a {expected_kind}: kind "{body_kind}" does not match '
                                f'"{expected_kind}"')
    if api_version not in (None, "", resource.api_version):
        raise errors.BadRequest(f'the API version in the data ({api_version}) does not match '
                                f'the expected API version ({resource.api_version})')
    if not isinstance(body.get("metadata", {}), dict):
        raise errors.BadRequest(f'{expected_kind} in version "{version}" cannot be handled as '
                                f'a {expected_kind}: metadata must be an object')
    return body


def check_body_namespace(body: dict[str, Any], namespace: str | None) -> None:
    body_ns = (body.get("metadata") or {}).get("namespace")
    if namespace is not None and body_ns and body_ns != namespace:
        raise errors.BadRequest("the namespace of the provided object does not match the "
                                "namespace sent on the request")


def field_validation(request: Request) -> str:
    """The fieldValidation query parameter: Strict, Warn (the default) or Ignore."""
    mode = request.query_params.get("fieldValidation", "Warn")
    if mode not in ("Strict", "Warn", "Ignore"):
        raise errors.BadRequest(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", '
                                f'got "{mode}"')
    return mode


def unknown_field_outcome(request: Request, unknown: list[str]) -> dict[str, str]:
    """The Warning header of fieldValidation=Warn (Strict refused them before writing)."""
    if not unknown:
        return {}
    if field_validation(request) == "Warn":
        return {"Warning": ", ".join(
            '299 - "' + f'unknown field "{p}"'.replace('"', '\\"') + '"' for p in unknown)}
    return {}


def dry_run_requested(request: Request, from_body: Any = None) -> bool:
    """`?dryRun=All` (or DeleteOptions.dryRun): run every check, write nothing."""
    values = list(request.query_params.getlist("dryRun"))
    if isinstance(from_body, list):
        values += [str(v) for v in from_body]
    for value in values:
        if value != "All":
            raise errors.invalid("DryRun", "", [{
                "reason": "FieldValueNotSupported",
                "message": f'Unsupported value: "{value}": supported values: "All"',
                "field": "dryRun"}])
    return bool(values)


def query_bool(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("true", "1")


def query_int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        return int(str(value))
    except ValueError:
        raise errors.BadRequest(f'invalid value for {name}: "{value}"') from None


class ApiServer:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def serve(self, request: Request, api_version: str, path: str) -> Response:
        try:
            target = parse_target(api_version, path)
        except errors.ApiError as e:
            return status_response(e)
        return await self.answer(request, target)

    async def answer(self, request: Request, target: Target) -> Response:
        """The response to one request: every failure is a Status."""
        try:
            return await self.dispatch(request, target)
        except errors.ApiError as e:
            return status_response(e)
        except Unavailable as e:
            log.warning("%s %s: %s", request.method, request.url.path, e)
            return status_response(errors.ServiceUnavailable(
                f"storage is unavailable: {e}", headers={"Retry-After": "1"}))
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return status_response(errors.InternalError(
                "an error on the server prevented the request from succeeding"))

    async def dispatch(self, request: Request, target: Target) -> Response:
        method = request.method
        if target.name is None:
            if method == "GET":
                return await self.list_or_watch(request, target)
            if method == "POST":
                return await self.create(request, target)
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
        elif target.subresource == "status":
            if method == "GET":
                return json_response(await self.registry.get(
                    target.resource, target.namespace, target.name))
            if method == "PUT":
                return await self.update(request, target)
            if method == "PATCH":
                return await self.patch(request, target)
        elif target.subresource == "binding" and method == "POST":
            return await self.bind(request, target)
        elif target.subresource == "log" and method == "GET":
            return await self.pod_log(request, target)
        raise errors.MethodNotAllowed("the server does not allow this method on the requested "
                                      "resource")

    # -- reads -------------------------------------------------------------------------

    def render(self, request: Request, target: Target, obj: dict[str, Any]) -> Response:
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
        if query_bool(request, "watch"):
            return await self.watch(request, target, labels, fields)
        options = parse_list_options(request.query_params)
        page = await self.registry.list_page(target.resource, target.namespace, options,
                                             labels=labels, fields=fields)
        if tables.wants_table(request.headers.get("accept")):
            table = tables.to_table(
                target.resource, [item.obj for item in page.items],
                resource_version=str(page.revision),
                include_object=request.query_params.get("includeObject", "Metadata"),
                continue_token=page.continue_token or None)
            if page.remaining is not None:
                table["metadata"]["remainingItemCount"] = page.remaining
            return json_response(table)
        return Response(list_body(target.resource, page), media_type="application/json")

    async def watch(self, request: Request, target: Target, labels: Any, fields: Any,
                    ) -> Response:
        timeout = query_int(request, "timeoutSeconds")
        watch_request = WatchRequest(
            resource=target.resource, namespace=target.namespace,
            resource_version=request.query_params.get("resourceVersion"),
            labels=labels, fields=fields,
            timeout_seconds=float(timeout) if timeout and timeout > 0 else DEFAULT_WATCH_TIMEOUT,
            bookmarks=query_bool(request, "allowWatchBookmarks"),
            send_initial_events=query_bool(request, "sendInitialEvents"))
        check_watch_options(request.query_params,
                            send_initial_events=watch_request.send_initial_events,
                            bookmarks=watch_request.bookmarks)
        events = await open_watch(self.registry, watch_request)
        render = None
        if tables.wants_table(request.headers.get("accept")):
            render = table_event_renderer(target.resource,
                                          request.query_params.get("includeObject", "Metadata"))
        return StreamingResponse(
            watch_lines(events, timeout=watch_request.timeout_seconds, render=render),
            media_type="application/json", headers={"Transfer-Encoding": "chunked"})

    # -- writes ------------------------------------------------------------------------

    async def create(self, request: Request, target: Target) -> Response:
        strict = field_validation(request) == "Strict"
        body = await decode_object(request, target.resource)
        check_body_namespace(body, target.namespace)
        dry_run = dry_run_requested(request)
        obj, unknown = await self.registry.create(target.resource, target.namespace, body,
                                                  strict=strict, dry_run=dry_run)
        headers = unknown_field_outcome(request, unknown)
        if not dry_run:
            log.info("created %s %s", target.resource.plural, describe(obj))
        return json_response(obj, 201, headers)

    async def update(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        strict = field_validation(request) == "Strict"
        body = await decode_object(request, target.resource)
        check_body_namespace(body, target.namespace)
        obj, unknown, created = await self.registry.update(target.resource, target.namespace,
                                                           target.name, body, strict=strict,
                                                           subresource=target.subresource,
                                                           dry_run=dry_run_requested(request))
        headers = unknown_field_outcome(request, unknown)
        if created:
            log.info("created %s %s", target.resource.plural, describe(obj))
        return json_response(obj, 201 if created else 200, headers)

    async def patch(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        patch_type = PATCH_TYPES.get(media_type(request))
        if patch_type is None:
            raise errors.UnsupportedMediaType(
                f'the body of the request was in an unknown format - accepted media types '
                f'include: {", ".join(PATCH_TYPES)}')
        document = parse_document(await read_body(request), "json")
        resource = target.resource
        precondition = None
        if isinstance(document, dict):
            precondition = (document.get("metadata") or {}).get("resourceVersion") or None

        def apply(current: dict[str, Any]) -> dict[str, Any]:
            if patch_type == "merge":
                patched = patch.apply_merge_patch(current, document)
            elif patch_type == "json":
                patched = patch.apply_json_patch(current, document)
            else:
                patched = patch.apply_strategic_merge_patch(current, document,
                                                            merge_keys=resource.merge_keys)
            pruned, _ = schema.decode(resource.model, patched)
            return objects.prepare_for_update(resource, pruned, current,
                                              subresource=target.subresource)

        obj = await self.registry.guaranteed_update(resource, target.namespace, target.name,
                                                    apply, precondition=precondition,
                                                    subresource=target.subresource,
                                                    dry_run=dry_run_requested(request))
        return json_response(obj)

    async def delete(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        options: dict[str, Any] = {}
        if media_type(request) in JSON_TYPES + YAML_TYPES:
            raw = await read_body(request)
            if raw.strip():
                parsed = parse_document(raw, "yaml" if media_type(request) in YAML_TYPES
                                        else "json")
                if not isinstance(parsed, dict):
                    raise errors.BadRequest("DeleteOptions must be an object")
                options = parsed
        grace = query_int(request, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int(options["gracePeriodSeconds"])
        dry_run = dry_run_requested(request, options.get("dryRun"))
        obj, deleted = await self.registry.delete(
            target.resource, target.namespace, target.name, grace_period=grace,
            preconditions=options.get("preconditions"), dry_run=dry_run)
        log.info("%s%s %s %s", "dry run: " if dry_run else "",
                 "deleted" if deleted else "marked for deletion", target.resource.plural,
                 describe(obj))
        if target.resource.returns_deleted_object or not deleted:
            return json_response(obj)
        details = {**status_details(target.resource, target.name),
                   "uid": obj["metadata"].get("uid")}
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "details": details})

    async def bind(self, request: Request, target: Target) -> Response:
        assert target.name is not None and target.namespace is not None
        binding = await decode_object(request, target.resource, kind="Binding")
        body_name = (binding.get("metadata") or {}).get("name")
        if body_name and body_name != target.name:
            raise errors.BadRequest(f"the name of the object ({body_name}) does not match the "
                                    f"name on the URL ({target.name})")
        await self.registry.bind(target.resource, target.namespace, target.name, binding)
        log.info("bound pod %s/%s to %s", target.namespace, target.name,
                 (binding.get("target") or {}).get("name"))
        return json_response(SUCCESS_CREATED, 201)

    async def pod_log(self, request: Request, target: Target) -> Response:
        assert target.name is not None
        from apiserver.logs import proxy_pod_log

        pod = await self.registry.get(target.resource, target.namespace, target.name)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise errors.BadRequest(f"pod {target.name} does not have a host assigned")
        node = await self.registry.get(NODES, None, node_name)
        return await proxy_pod_log(pod, node, dict(request.query_params))


def list_body(resource: Resource, page: ListPage) -> bytes:
    """A List of the page's objects, joined from each one's JSON (encoded once, cached)."""
    meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    head = (b'{"kind":"' + resource.list_kind.encode() + b'","apiVersion":"'
            + resource.api_version.encode() + b'","metadata":' + encode(meta) + b',"items":[')
    return head + b",".join(item.json for item in page.items) + b"]}"


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def table_event_renderer(resource: Resource, include_object: str) -> Any:
    first = True

    def render(event: dict[str, Any]) -> dict[str, Any]:
        nonlocal first
        if event["type"] in ("ERROR", "BOOKMARK"):
            return event
        obj = event["object"]
        table = tables.to_table(resource, [obj],
                                resource_version=obj["metadata"].get("resourceVersion", ""),
                                include_object=include_object,
                                include_column_definitions=first)
        first = False
        return {"type": event["type"], "object": table}

    return render


def render_metrics(registry: Registry) -> str:
    """A few Prometheus gauges: who is watching, and what that costs us."""
    lines = ["# HELP apiserver_registered_watchers Watchers served from the watch cache.",
             "# TYPE apiserver_registered_watchers gauge"]
    for prefix, count in sorted(registry.cacher.watcher_count().items()):
        resource = prefix.rstrip("/").rsplit("/", 1)[-1]
        lines.append(f'apiserver_registered_watchers{{resource="{resource}"}} {count}')
    lines += ["# HELP kubelite_apiserver_etcd_watches etcd watch streams open.",
              "# TYPE kubelite_apiserver_etcd_watches gauge",
              f"kubelite_apiserver_etcd_watches {registry.storage.open_watches}",
              "# HELP kubelite_apiserver_list_pages_total LIST pages served, by source.",
              "# TYPE kubelite_apiserver_list_pages_total counter",
              *(f'kubelite_apiserver_list_pages_total{{source="{source}"}} '
                f'{listing.SERVED[source]}' for source in ("cache", "etcd")),
              "# HELP kubelite_apiserver_tasks asyncio tasks alive.",
              "# TYPE kubelite_apiserver_tasks gauge",
              f"kubelite_apiserver_tasks {len(asyncio.all_tasks())}"]
    return "\n".join(lines) + "\n"


def create_app(etcd_servers: list[str], *, etcd_prefix: str = "/registry",
               event_ttl: int = 3600) -> ResourceFront:
    storage = Storage(etcd_servers)
    registry = Registry(storage, prefix=etcd_prefix, event_ttl=event_ttl)
    server = ApiServer(registry)
    namespaces = NamespaceController(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await storage.start()
        registry.start_caches()
        namespaces.start()
        log.info("apiserver using etcd at %s (prefix %s)", storage.target, etcd_prefix)
        yield
        await namespaces.stop()
        await registry.cacher.stop()
        await storage.close()

    app = FastAPI(title="kubelite apiserver", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.registry = registry

    @app.exception_handler(errors.ApiError)
    async def api_error(request: Request, exc: errors.ApiError) -> Response:
        return status_response(exc)

    async def handle_core(request: Request, path: str) -> Response:
        return await server.serve(request, "v1", path)

    async def handle_group(request: Request, group: str, version: str, path: str) -> Response:
        return await server.serve(request, group_version(group, version), path)

    verbs = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app.include_router(discovery.router)  # before the catch-alls below
    app.include_router(openapi.router)
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
    async def metrics() -> Response:
        return PlainTextResponse(render_metrics(registry), media_type="text/plain; version=0.0.4")

    return ResourceFront(server, app)


API_VERBS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


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

    def __init__(self, server: ApiServer, app: FastAPI) -> None:
        self.server = server
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in API_VERBS:
            found = api_path(scope["path"])
            if found is not None:
                try:
                    target = parse_target(*found)
                except errors.NotFound:
                    target = None  # not ours (services), or FastAPI's 404
                if target is not None:
                    request = Request(scope, receive)
                    response = await self.server.answer(request, target)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
