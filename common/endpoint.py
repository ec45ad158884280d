"""A component's HTTP endpoint, as kube-scheduler's and kube-controller-manager's: health
checks and metrics.

    GET /healthz, /livez   200 `ok` while the component's main task runs
    GET /readyz            200 once its informers have synced, 503 before (and while
                           shutting down); `?verbose` lists every check
    GET /metrics           Prometheus text

Plain HTTP (kube serves HTTPS on those ports); `--port 0` turns it off. It shares the
component's event loop: a loop too busy to answer is what a liveness probe should notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from common.metrics import CONTENT_TYPE

Checks = Callable[[], Mapping[str, str | None]]


# -- what it says (pure) -----------------------------------------------------------------------


def health_report(endpoint: str, checks: Mapping[str, str | None], *,
                  verbose: bool) -> tuple[int, str]:
    """HTTP status and body of /healthz, /livez or /readyz, worded as kube's.

    `checks` maps each check's name to None when it passes, else to why it fails.
    A failure answers 503 and names every check; success answers `ok`, or the list of
    checks when `?verbose` was asked for.
    """
    failed = any(reason is not None for reason in checks.values())
    if not failed and not verbose:
        return 200, "ok"
    lines = [f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}"
             for name, reason in checks.items()]
    lines.append(f"{endpoint} check {'failed' if failed else 'passed'}")
    return (503 if failed else 200), "\n".join(lines) + "\n"


# -- the server ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoints:
    """What the endpoint asks the component, at each request."""

    live: Checks  # check name -> None when it passes, else why it fails
    ready: Checks
    metrics: Callable[[], bytes]  # the Prometheus text page


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


def open_endpoint(bind_address: str, port: int, log: logging.Logger) -> socket.socket | None:
    """Bind the endpoint's port first, so that a port in use stops us before anything
    (exit status 1); None for port 0."""
    if port == 0:
        return None
    try:
        return listen(bind_address, port)
    except OSError as e:
        log.error("cannot serve /healthz and /metrics on %s:%d (%s): choose another --port, "
                  "or --port 0 for none", bind_address, port,
                  os.strerror(e.errno) if e.errno else e)
        raise SystemExit(1) from e


class HttpServer(uvicorn.Server):
    """uvicorn, minus its signal handlers: the component's own SIGTERM handling decides
    when to stop it (`should_exit`), after /readyz has reported the shutdown."""

    def __init__(self, app: Starlette) -> None:
        super().__init__(uvicorn.Config(app, log_level="warning", access_log=False,
                                        lifespan="off"))

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(sock: socket.socket | None, endpoints: Endpoints,
                  log: logging.Logger) -> AsyncIterator[None]:
    """Serve the endpoints on `sock` (None: serve nothing) for the `async with` body,
    logging under the component's own logger."""
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
