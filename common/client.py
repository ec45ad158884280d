"""An asyncio client for the Kubernetes API kubelite serves, built on httpx.

Resources are named by their plural (`pods`, `leases`); those outside the core group are
addressed under their group's path (`leases` -> `/apis/coordination.k8s.io/v1/...`),
as client-go's RESTMapper would place them.

Every non-2xx answer is raised as the `common.errors` class of its Status reason,
chained from the `httpx.HTTPStatusError`; connection failures surface as the
`httpx.TransportError` subclasses httpx raises. `watch` is an async generator of
`{"type": ..., "object": ...}` events read from the JSON-lines stream.
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import orjson

from common.errors import ApiError, Gone, error_from_status
from common.kubeconfig import Connection, plain
from common.metrics import Counter, Histogram, Metrics

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
# The resources outside the core group: plural -> group/version.
GROUP_VERSIONS: dict[str, str] = {"leases": "coordination.k8s.io/v1"}

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


# client-go's rest_client_request_duration_seconds buckets
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)


def api_prefix(resource: str, group_versions: Mapping[str, str] = GROUP_VERSIONS) -> str:
    """`/api/v1` for the core group, `/apis/{group}/{version}` for the others."""
    group_version = group_versions.get(resource)
    return f"/apis/{group_version}" if group_version else API_PREFIX


def resource_path(resource: str, *, namespace: str | None = None, name: str | None = None,
                  subresource: str | None = None,
                  group_versions: Mapping[str, str] = GROUP_VERSIONS) -> str:
    """The URL path of a collection, an object, or an object's subresource."""
    path = api_prefix(resource, group_versions)
    if namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{resource}"
    if name is not None:
        if not name:
            raise ValueError(f"an object name is required to address {resource}")
        path += f"/{quote(name, safe='')}"
    elif subresource:
        raise ValueError("a subresource needs an object name")
    if subresource:
        path += f"/{subresource}"
    return path


def selector_params(*, label_selector: str | None,
                    field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def watch_params(*, resource_version: str | None, label_selector: str | None,
                 field_selector: str | None, timeout_seconds: int | None,
                 allow_bookmarks: bool) -> dict[str, str]:
    params = {"watch": "true",
              **selector_params(label_selector=label_selector, field_selector=field_selector)}
    if resource_version:
        params["resourceVersion"] = resource_version
    if timeout_seconds is not None:
        params["timeoutSeconds"] = str(timeout_seconds)
    if allow_bookmarks:
        params["allowWatchBookmarks"] = "true"
    return params


def error_from_response(response: httpx.Response, body: bytes) -> ApiError:
    """The ApiError a non-2xx answer stands for, from its Status body when it has one."""
    status: dict[str, Any] = {}
    try:
        decoded = json.loads(body) if body else {}
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            status = decoded
    except ValueError:
        pass
    if not status:
        text = body.decode(errors="replace").strip()
        status = {"message": text or f"the server responded with HTTP {response.status_code}"}
    err = error_from_status(status, code=response.status_code)
    err.headers = dict(response.headers)
    return err


def error_from_watch_event(status: dict[str, Any]) -> ApiError:
    """The ApiError an ERROR watch event carries; code 410 is always Gone."""
    err = error_from_status(status)
    if int(status.get("code") or 0) == 410 and not isinstance(err, Gone):
        return Gone(err.message, details=err.details)
    return err


def raise_for_status(response: httpx.Response, body: bytes) -> None:
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as e:
        raise error_from_response(response, body) from e


def loads(data: str | bytes) -> Any:
    """JSON from the apiserver, with orjson (the informers decode every watch event with
    it). Kubernetes' integers are int64, which orjson decodes exactly."""
    return orjson.loads(data)


def decode_watch_line(line: str) -> dict[str, Any] | None:
    """One watch event from one line of the stream; None for a blank keep-alive line."""
    line = line.strip()
    if not line:
        return None
    event = loads(line)
    if not isinstance(event, dict) or "type" not in event:
        raise ValueError(f"not a watch event: {line[:200]}")
    return event


class ApiClient:
    """The Kubernetes API over HTTP; use as `async with ApiClient(url) as client:`.

    `group_versions` maps the plural of each resource outside the core group to its
    group/version (the default knows what kubelite serves).
    """

    def __init__(self, base_url: str | Connection, *, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 user_agent: str = "kubelite",
                 group_versions: Mapping[str, str] | None = None,
                 max_connections: int | None = None) -> None:
        """`base_url`: a plain URL, or a Connection read from a kubeconfig (its CA, client
        certificate or bearer token). `max_connections`: a pool of that many HTTP/1.1
        connections, all kept alive (for a client writing many objects at once; httpx's
        default keeps 20 of 100 alive, and each of the others is a new connection)."""
        connection = base_url if isinstance(base_url, Connection) else plain(base_url)
        self.connection = connection
        self.base_url = connection.server
        self.timeout = timeout
        self.group_versions = dict(GROUP_VERSIONS if group_versions is None
                                   else group_versions)
        limits = (httpx.Limits(max_connections=100, max_keepalive_connections=20)
                  if max_connections is None else
                  httpx.Limits(max_connections=max_connections,
                               max_keepalive_connections=max_connections))
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport,
            verify=connection.verify, limits=limits,
            headers={"User-Agent": user_agent, "Accept": "application/json",
                     **connection.headers})
        # client-go's rest_client metrics; a component adds them to its /metrics
        self.host = urlsplit(self.base_url).netloc
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"))
        self.rest_durations = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.", ("verb", "host"),
            REST_CLIENT_BUCKETS)

    def add_metrics(self, metrics: Metrics) -> None:
        """Serve this client's rest_client_* metrics on a component's /metrics."""
        metrics.add(self.rest_requests)
        metrics.add(self.rest_durations)

    def measured(self, method: str, code: str, started: float) -> None:
        """One request answered (`code`: its status, or `<error>` when none came)."""
        self.rest_requests.inc((code, method, self.host))
        self.rest_durations.observe(time.perf_counter() - started, (method, self.host))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def path(self, resource: str, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        return resource_path(resource, namespace=namespace, name=name, subresource=subresource,
                             group_versions=self.group_versions)

    async def _request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                       body: Any = None, content_type: str = "application/json") -> dict:
        headers = {}
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        started = time.perf_counter()
        try:
            response = await self._http.request(method, path, params=params, content=content,
                                                headers=headers)
        except httpx.HTTPError:
            self.measured(method, "<error>", started)
            raise
        self.measured(method, str(response.status_code), started)
        log.debug("%s %s -> %d", method, path, response.status_code)
        raise_for_status(response, response.content)
        if not response.content:
            return {}
        decoded = loads(response.content)
        if not isinstance(decoded, dict):
            raise ValueError(f"{method} {path}: expected a JSON object, got {decoded!r:.200}")
        return decoded

    async def get(self, resource: str, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> dict:
        path = self.path(resource, namespace=namespace, name=name, subresource=subresource)
        return await self._request("GET", path)

    async def list(self, resource: str, *, namespace: str | None = None,
                   label_selector: str | None = None,
                   field_selector: str | None = None) -> dict:
        params = selector_params(label_selector=label_selector, field_selector=field_selector)
        return await self._request("GET", self.path(resource, namespace=namespace),
                                   params=params)

    async def create(self, resource: str, obj: dict, *, namespace: str | None = None) -> dict:
        namespace = namespace if namespace is not None else _namespace_of(obj)
        return await self._request("POST", self.path(resource, namespace=namespace),
                                   body=obj)

    async def create_subresource(self, resource: str, name: str, subresource: str, obj: dict,
                                 *, namespace: str | None = None) -> dict:
        """POST to an object's subresource (serviceaccounts/NAME/token, pods/NAME/eviction)."""
        path = self.path(resource, namespace=namespace, name=name, subresource=subresource)
        return await self._request("POST", path, body=obj)

    async def update(self, resource: str, obj: dict, *, namespace: str | None = None,
                     subresource: str | None = None) -> dict:
        namespace = namespace if namespace is not None else _namespace_of(obj)
        name = str((obj.get("metadata") or {}).get("name") or "")
        path = self.path(resource, namespace=namespace, name=name, subresource=subresource)
        return await self._request("PUT", path, body=obj)

    async def update_status(self, resource: str, obj: dict, *,
                            namespace: str | None = None) -> dict:
        return await self.update(resource, obj, namespace=namespace, subresource="status")

    async def patch(self, resource: str, name: str, patch: dict | builtins.list, *,
                    namespace: str | None = None, subresource: str | None = None,
                    patch_type: str = "merge") -> dict:
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}; "
                             f"expected one of {sorted(PATCH_CONTENT_TYPES)}") from None
        path = self.path(resource, namespace=namespace, name=name, subresource=subresource)
        return await self._request("PATCH", path, body=patch, content_type=content_type)

    async def delete(self, resource: str, name: str, *, namespace: str | None = None,
                     grace_period_seconds: int | None = None,
                     preconditions: dict[str, str] | None = None,
                     propagation_policy: str | None = None) -> dict:
        """`preconditions` ({"uid": ...} and/or {"resourceVersion": ...}) make the delete a
        409 Conflict when the object is no longer the one the caller means;
        `propagation_policy` is Foreground, Background or Orphan."""
        # Like kubectl: DeleteOptions in the body; the query parameter too, for servers
        # that only read that one (kube-apiserver accepts both).
        params: dict[str, str] = {}
        body: dict[str, Any] | None = None
        if grace_period_seconds is not None or preconditions or propagation_policy:
            body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            body = {**(body or {}), "propagationPolicy": propagation_policy}
        if grace_period_seconds is not None:
            params["gracePeriodSeconds"] = str(grace_period_seconds)
            body = {**(body or {}), "gracePeriodSeconds": grace_period_seconds}
        if preconditions:
            body = {**(body or {}), "preconditions": dict(preconditions)}
        return await self._request("DELETE", self.path(resource, namespace=namespace, name=name),
                                   params=params, body=body)

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        binding = {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = self.path("pods", namespace=namespace, name=name, subresource="binding")
        await self._request("POST", path, body=binding)

    async def watch(self, resource: str, *, namespace: str | None = None,
                    resource_version: str | None = None, label_selector: str | None = None,
                    field_selector: str | None = None, timeout_seconds: int | None = None,
                    allow_bookmarks: bool = True) -> AsyncGenerator[dict, None]:
        """Events of one watch stream, until the server ends it.

        An ERROR event raises its ApiError (code 410 -> `Gone`: list again). Close the
        generator (`contextlib.aclosing`) to drop the connection early.
        """
        params = watch_params(resource_version=resource_version,
                              label_selector=label_selector, field_selector=field_selector,
                              timeout_seconds=timeout_seconds, allow_bookmarks=allow_bookmarks)
        # A watch is quiet for as long as nothing changes: never cut it on a read timeout.
        timeout = httpx.Timeout(self.timeout, read=None)
        path = self.path(resource, namespace=namespace)
        started = time.perf_counter()
        async with self._http.stream("GET", path, params=params, timeout=timeout) as response:
            self.measured("GET", str(response.status_code), started)
            if response.status_code >= 300:
                raise_for_status(response, await response.aread())
            async for line in response.aiter_lines():
                event = decode_watch_line(line)
                if event is None:
                    continue
                if event["type"] == "ERROR":
                    raise error_from_watch_event(event.get("object") or {})
                yield event


def _namespace_of(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("namespace") or None
