"""The kubelet's streaming endpoints: `/exec/{ns}/{pod}/{container}`,
`/attach/{ns}/{pod}/{container}` and `/portForward/{ns}/{pod}` (GET or POST, upgraded to
WebSocket or SPDY/3.1), behind the kubelet's authentication and authorization filter like
every other path (kubelet/auth.py: they are `nodes/proxy`).

A request is checked first (options, pod, container, protocol): a bad one gets a
plain-text 4xx as the kubelet answers, and nothing reaches Docker. Only then is the
connection taken over (common/upgrade.py's hijack), `101 Switching Protocols` written,
and the session run on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from common.upgrade import hijacker
from kubelet.docker_stream import DockerStreams
from kubelet.runtime import Runtime, pod_ref
from kubelet.streaming import portforward, remotecommand
from kubelet.streaming.spdy import SpdySession
from kubelet.streaming.websocket import (
    WebSocket,
    WebSocketBytes,
    handshake_error,
    is_websocket,
    negotiate,
    offered_protocols,
    switching_response,
)

log = logging.getLogger("kubelet.streaming")

PodLookup = Callable[[str, str], dict | None]
Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SPDY = "spdy/3.1"


class StreamRequestError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


class Upgraded(Response):
    """Takes the connection over: writes the 101, then runs the session on it."""

    def __init__(self, head: bytes, session: Session, where: str) -> None:
        super().__init__()
        self.head = head
        self.session = session
        self.where = where

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        hijack = hijacker(scope)
        if hijack is None:
            await PlainTextResponse("Upgrade request required", 400)(scope, receive, send)
            return
        reader, writer = hijack()
        try:
            writer.write(self.head)
            await writer.drain()
            await self.session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            log.info("%s: stream ended: %s", self.where, e or type(e).__name__)
        finally:
            writer.close()


def query_values(request: Request) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        values.setdefault(name, []).append(value)
    return values


def headers_of(request: Request) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


def spdy_response(protocol: str) -> bytes:
    return (f"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
            f"X-Stream-Protocol-Version: {protocol}\r\n\r\n").encode("latin-1")


def choose_protocol(request: Request, *, websocket: Sequence[str],
                    spdy: Sequence[str]) -> tuple[str, str]:
    """("websocket" | "spdy", the subprotocol), or a StreamRequestError worded as kube's
    wsstream and httpstream handshakes."""
    headers = headers_of(request)
    if is_websocket(headers):
        if (problem := handshake_error(headers)) is not None:
            raise StreamRequestError(400, problem)
        offered = offered_protocols(headers)
        chosen = negotiate(offered, websocket) if offered else ""
        if chosen is None or (chosen == "" and "" not in websocket):
            raise StreamRequestError(
                400, f"requested protocol(s) are not supported: {offered}; supports "
                     f"{list(websocket)}")
        return "websocket", chosen
    if headers.get("upgrade", "").lower() == SPDY and \
            "upgrade" in headers.get("connection", "").lower():
        offered = [p.strip() for value in request.headers.getlist("x-stream-protocol-version")
                   for p in value.split(",") if p.strip()]
        chosen = negotiate(offered, spdy)
        if chosen is None:
            raise StreamRequestError(
                403, f"unable to upgrade: unable to negotiate protocol: client supports "
                     f"{offered}, server supports {list(spdy)}")
        return "spdy", chosen
    raise StreamRequestError(400, "Upgrade request required")


def streaming_routes(*, runtime: Runtime, get_pod: PodLookup,
                     docker: DockerStreams) -> dict[str, Callable[[Request], Awaitable[Response]]]:
    """The three endpoints' handlers, by route path."""

    def lookup(namespace: str, pod_name: str) -> dict:
        pod = get_pod(namespace, pod_name)
        if pod is None:
            raise StreamRequestError(404, f'pod "{pod_name}" does not exist')
        return pod

    async def running_container(pod: Mapping[str, Any], container: str) -> tuple[str, bool]:
        """(its runtime id, its spec's stdinOnce)."""
        spec = pod.get("spec") or {}
        specs = {c.get("name"): c for key in ("containers", "initContainers",
                                              "ephemeralContainers")
                 for c in spec.get(key) or []}
        pod_name = (pod.get("metadata") or {}).get("name", "")
        if container not in specs:
            raise StreamRequestError(404, f'container "{container}" not found in pod '
                                          f'"{pod_name}"')
        observation = await runtime.observe_pod(pod_ref(pod).uid)
        latest = observation.latest(container)
        if latest is None or latest.state != "running":
            raise StreamRequestError(
                400, f'container "{container}" in pod "{pod_name}" is not running')
        return latest.id, bool(specs[container].get("stdinOnce"))

    async def remote_command(request: Request, *, attach: bool) -> Response:
        namespace, pod_name = request.path_params["namespace"], request.path_params["pod"]
        container = request.path_params["container"]
        where = f"{namespace}/{pod_name}/{container}"
        try:
            options = remotecommand.parse_options(query_values(request), exec_=not attach)
        except remotecommand.OptionsError as e:
            return PlainTextResponse(str(e), 400)
        try:
            kind, protocol = choose_protocol(request, websocket=remotecommand.WEBSOCKET_PROTOCOLS,
                                             spdy=remotecommand.SPDY_PROTOCOLS)
            container_id, stdin_once = await running_container(lookup(namespace, pod_name),
                                                               container)
        except StreamRequestError as e:
            return PlainTextResponse(e.message, e.status_code)
        headers = headers_of(request)

        async def serve(session: remotecommand.Session) -> None:
            if attach:
                await remotecommand.serve_attach(session, docker, container_id, options,
                                                 where=where, stdin_once=stdin_once)
            else:
                await remotecommand.serve_exec(session, docker, container_id, options,
                                               where=where)

        async def over_websocket(reader: asyncio.StreamReader,
                                 writer: asyncio.StreamWriter) -> None:
            socket = WebSocket(reader, writer)
            session, reading = await remotecommand.websocket_session(socket, protocol)
            try:
                await serve(session)
            finally:
                reading.cancel()

        async def over_spdy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            spdy = SpdySession(reader, writer)
            try:
                session, reading = await remotecommand.spdy_session(spdy, options, protocol)
            except remotecommand.OptionsError as e:
                log.info("%s: %s", where, e)
                return
            try:
                await serve(session)
            finally:
                reading.cancel()

        log.info("%s: %s over %s (%s)", where, "attach" if attach else "exec", kind,
                 protocol or "no subprotocol")
        if kind == "websocket":
            return Upgraded(switching_response(headers, protocol), over_websocket, where)
        return Upgraded(spdy_response(protocol), over_spdy, where)

    async def exec_(request: Request) -> Response:
        return await remote_command(request, attach=False)

    async def attach(request: Request) -> Response:
        return await remote_command(request, attach=True)

    async def port_forward(request: Request) -> Response:
        namespace, pod_name = request.path_params["namespace"], request.path_params["pod"]
        where = f"{namespace}/{pod_name}"
        try:
            kind, protocol = choose_protocol(
                request, websocket=(*portforward.TUNNEL_PROTOCOLS,
                                    *portforward.CHANNEL_PROTOCOLS, ""),
                spdy=portforward.SPDY_PROTOCOLS)
            pod = lookup(namespace, pod_name)
            observation = await runtime.observe_pod(pod_ref(pod).uid)
            sandbox = observation.latest_sandbox()
            if sandbox is None or sandbox.state != "running":
                raise StreamRequestError(400, f'pod "{pod_name}" is not running')
            ip = "127.0.0.1" if sandbox.host_network else sandbox.ip
            if not ip:
                raise StreamRequestError(400, f'pod "{pod_name}" has no IP address')
            ports: list[int] = []
            if kind == "websocket" and protocol not in portforward.TUNNEL_PROTOCOLS:
                ports = portforward.parse_query_ports(query_values(request))
        except StreamRequestError as e:
            return PlainTextResponse(e.message, e.status_code)
        except portforward.PortError as e:
            return PlainTextResponse(str(e), 400)
        target = portforward.Target(namespace, pod_name, pod_ref(pod).uid, ip)
        headers = headers_of(request)
        log.info("%s: port-forward over %s (%s)", where, kind, protocol or "no subprotocol")

        async def tunnelled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            carried = WebSocketBytes(WebSocket(reader, writer))
            pump = asyncio.create_task(carried.pump(), name="ws-tunnel")
            try:
                await portforward.serve_spdy(SpdySession(carried.reader, carried), target)
            finally:
                pump.cancel()

        async def channels(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await portforward.serve_channels(WebSocket(reader, writer), target, ports)

        async def over_spdy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await portforward.serve_spdy(SpdySession(reader, writer), target)

        if kind == "spdy":
            return Upgraded(spdy_response(protocol), over_spdy, where)
        return Upgraded(switching_response(headers, protocol), tunnelled if protocol in portforward.TUNNEL_PROTOCOLS
                        else channels, where)

    return {"/exec/{namespace}/{pod}/{container}": exec_,
            "/attach/{namespace}/{pod}/{container}": attach,
            "/portForward/{namespace}/{pod}": port_forward}
