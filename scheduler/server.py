"""The scheduler's HTTP endpoint, as kube-scheduler's: health checks and metrics.

    GET /healthz, /livez   200 `ok` while the scheduling loop runs
    GET /readyz            200 once the informers have synced, 503 before (and while
                           shutting down); `?verbose` lists every check
    GET /metrics           Prometheus text (see `scheduler.metrics`)

Plain HTTP on 127.0.0.1:10259 by default (kube-scheduler serves HTTPS on that port);
`--port 0` turns it off. It shares the scheduler's event loop: a loop too busy to
answer is what a liveness probe should notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from scheduler.metrics import CONTENT_TYPE, health_report

log = logging.getLogger("scheduler")

DEFAULT_PORT = 10259
DEFAULT_BIND_ADDRESS = "127.0.0.1"

Checks = Callable[[], Mapping[str, str | None]]


@dataclass(frozen=True)
class Endpoints:
    """What the endpoint asks the scheduler, at each request."""

    live: Checks  # check name -> None when it passes, else why it fails
    ready: Checks
    metrics: Callable[[], str]


def health_route(endpoint: str, checks: Checks) -> Route:
    async def respond(request: Request) -> Response:
        status, body = health_report(endpoint, checks(),
                                     verbose="verbose" in request.query_params)
        return PlainTextResponse(body, status_code=status)
    return Route(f"/{endpoint}", respond)


def make_app(endpoints: Endpoints) -> Starlette:
    async def metrics(request: Request) -> Response:
        return Response(endpoints.metrics(), media_type=CONTENT_TYPE)

    return Starlette(routes=[
        health_route("healthz", endpoints.live), health_route("livez", endpoints.live),
        health_route("readyz", endpoints.ready), Route("/metrics", metrics),
    ])


def listen(bind_address: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts: a port in use fails at once."""
    family = socket.AF_INET6 if ":" in bind_address else socket.AF_INET
    return socket.create_server((bind_address, port), family=family)


class HttpServer(uvicorn.Server):
    """uvicorn, minus its signal handlers: the scheduler's own SIGTERM handling decides
    when to stop it (`should_exit`), after /readyz has reported the shutdown."""

    def __init__(self, app: Starlette) -> None:
        super().__init__(uvicorn.Config(app, log_level="warning", access_log=False,
                                        lifespan="off"))

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(sock: socket.socket | None, endpoints: Endpoints) -> AsyncIterator[None]:
    """Serve the endpoints on `sock` (None: serve nothing) for the `async with` body."""
    if sock is None:
        yield
        return
    server = HttpServer(make_app(endpoints))
    task = asyncio.create_task(server.serve(sockets=[sock]), name="http endpoint")
    host, port = sock.getsockname()[:2]
    log.info("serving /healthz, /livez, /readyz and /metrics on %s:%d", host, port)
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.wait({task}, timeout=5)
