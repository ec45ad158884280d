"""The kubelet's own HTTP server: `/healthz`, `/containerLogs/{namespace}/{pod}/{container}`,
and the streaming endpoints `/exec`, `/attach` and `/portForward` (kubelet/streaming/).

Errors are plain text with the kubelet's status codes and wording; the apiserver's log
proxy (`apiserver/logs.py`) turns them into Status objects.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from common.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kubelet.docker_stream import DockerStreams
from kubelet.runtime import ContainerInfo, Runtime, pod_ref
from kubelet.streaming.handlers import streaming_routes

log = logging.getLogger(__name__)

PodLookup = Callable[[str, str], dict | None]


class LogRequestError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass(frozen=True)
class LogOptions:
    follow: bool = False
    tail_lines: int | None = None
    timestamps: bool = False
    previous: bool = False
    since_seconds: int | None = None
    limit_bytes: int | None = None


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1", "yes")


def _non_negative(params: dict[str, str], name: str, *, positive: bool = False) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise LogRequestError(400, f"invalid {name}: {raw!r} is not an integer") from None
    if value < 0 or (positive and value == 0):
        raise LogRequestError(400, f"invalid {name}: must be {'greater than' if positive else 'at least'} 0")
    return value


def parse_log_options(params: dict[str, str]) -> LogOptions:
    return LogOptions(follow=_flag(params.get("follow")),
                      tail_lines=_non_negative(params, "tailLines"),
                      timestamps=_flag(params.get("timestamps")),
                      previous=_flag(params.get("previous")),
                      since_seconds=_non_negative(params, "sinceSeconds", positive=True),
                      limit_bytes=_non_negative(params, "limitBytes", positive=True))


def pick_log_container(instances: list[ContainerInfo], *, pod_name: str, container: str,
                       previous: bool) -> ContainerInfo:
    """The instance whose log to read (newest first), worded like kubelet's
    validateContainerLogStatus when there is none."""
    if previous:
        if len(instances) < 2:
            raise LogRequestError(
                400, f'previous terminated container "{container}" in pod "{pod_name}" '
                     f"not found")
        return instances[1]
    if not instances or instances[0].state == "created":
        raise LogRequestError(
            400, f'container "{container}" in pod "{pod_name}" is waiting to start: '
                 f"ContainerCreating")
    return instances[0]


async def limited(chunks: AsyncIterator[bytes], limit: int | None) -> AsyncIterator[bytes]:
    sent = 0
    async for chunk in chunks:
        if limit is not None:
            chunk = chunk[:limit - sent]
        sent += len(chunk)
        if chunk:
            yield chunk
        if limit is not None and sent >= limit:
            return


def make_app(*, runtime: Runtime, get_pod: PodLookup,
             docker: DockerStreams | None = None,
             metrics: Callable[[], bytes] | None = None) -> Starlette:
    """`docker`: the exec/attach streams (the default socket when not given); `metrics`:
    the /metrics page."""
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def metrics_page(request: Request) -> Response:
        if metrics is None:
            return PlainTextResponse("404 page not found", status_code=404)
        return Response(metrics(), media_type=METRICS_CONTENT_TYPE)

    async def container_logs(request: Request) -> Response:
        namespace = request.path_params["namespace"]
        pod_name = request.path_params["pod"]
        container = request.path_params["container"]
        try:
            options = parse_log_options(dict(request.query_params))
            pod = get_pod(namespace, pod_name)
            if pod is None:
                raise LogRequestError(404, f'pod "{pod_name}" does not exist')
            spec = pod.get("spec") or {}
            names = [c.get("name") for key in ("containers", "initContainers",
                                               "ephemeralContainers")
                     for c in spec.get(key) or []]
            if container not in names:
                raise LogRequestError(404, f'container "{container}" not found in pod '
                                           f'"{pod_name}"')
            observation = await runtime.observe_pod(pod_ref(pod).uid)
            chosen = pick_log_container(observation.containers_named(container),
                                        pod_name=pod_name, container=container,
                                        previous=options.previous)
        except LogRequestError as e:
            return PlainTextResponse(e.message, status_code=e.status_code)
        log.info("%s/%s: logs of %s (%s, follow=%s)", namespace, pod_name, container,
                 chosen.id[:12], options.follow)
        chunks = runtime.container_logs(chosen.id, follow=options.follow,
                                        tail_lines=options.tail_lines,
                                        timestamps=options.timestamps,
                                        since_seconds=options.since_seconds)
        body = limited(chunks, options.limit_bytes)
        if options.follow:
            return StreamingResponse(body, media_type="text/plain")
        data = b"".join([chunk async for chunk in body])
        return Response(data, media_type="text/plain")

    streams = streaming_routes(runtime=runtime, get_pod=get_pod,
                               docker=docker if docker is not None else DockerStreams())
    return Starlette(routes=[
        Route("/healthz", healthz),
        Route("/metrics", metrics_page),
        Route("/containerLogs/{namespace}/{pod}/{container}", container_logs),
        *(Route(path, handler, methods=["GET", "POST"]) for path, handler in streams.items()),
    ])
