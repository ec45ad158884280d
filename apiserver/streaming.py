"""`pods/exec`, `pods/attach`, `pods/portforward`: checked here, then proxied to the
kubelet of the pod's node as an upgraded connection, as kube-apiserver's
UpgradeAwareHandler does (`pkg/registry/core/pod/rest/subresources.go`).

The request's options are validated first (nothing is dialed for a bad one) and turned
into the kubelet's parameters (`command`, `input`, `output`, `error`, `tty`; `port`), as
kube's streamLocation and streamParams do. A GET (a WebSocket client's handshake) is also
authorized as `create` on the sub-resource, as kube does since it authorizes WebSocket
upgrades with the create permission: reading a pod must not be enough to run in it.

The kubelet is dialed (HTTPS with the apiserver's kubelet client certificate, as for
logs), sent the request with the client's upgrade headers, and its answer read: anything
but `101 Switching Protocols` becomes a Status error; a 101 is written back to the client
as the kubelet sent it (its Sec-WebSocket-Accept answers the client's key), and from then
on the bytes are copied both ways until either side closes. The kubelet speaks WebSocket
and SPDY itself, so the apiserver needs no framing of its own: this is a byte pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from starlette.responses import Response

from apiserver.auth import Attributes, Authorizer, Decision, UserInfo
from apiserver.auth.forbidden import forbidden
from apiserver.logs import CONNECT_TIMEOUT_SECONDS, error_from_kubelet, kubelet_base_url
from apiserver.storage import encode
from common import errors
from common.upgrade import hijacker

log = logging.getLogger("apiserver")

SUBRESOURCES = ("exec", "attach", "portforward")
OPTIONS = {
    "exec": ("command", "container", "stdin", "stdout", "stderr", "tty"),
    "attach": ("container", "stdin", "stdout", "stderr", "tty"),
    "portforward": ("ports",),
}
# PodExecOptions' field -> the kubelet's parameter (api.ExecStdinParam ...)
KUBELET_FLAGS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty"))
# the headers of the client's upgrade the kubelet needs to answer it
UPGRADE_HEADERS = ("upgrade", "sec-websocket-key", "sec-websocket-version",
                   "sec-websocket-protocol", "sec-websocket-extensions",
                   "x-stream-protocol-version")
HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 64 * 1024
COPY_CHUNK = 64 * 1024


def parse_bool(name: str, values: Sequence[str]) -> bool:
    value = values[-1]
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise errors.BadRequest(f'invalid value for query parameter "{name}": "{value}" is '
                            f"not a boolean (true, false, 1 or 0)")


def parse_port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise errors.BadRequest(f'invalid port "{text}": must be an integer between 1 and '
                                f"65535")
    return int(text)


def kubelet_query(subresource: str, values: Mapping[str, Sequence[str]]) -> list[
        tuple[str, str]]:
    """The kubelet's parameters for a request's query, or a BadRequest (unknown
    parameters included: refused, never ignored)."""
    allowed = OPTIONS[subresource]
    for name in values:
        if name not in allowed:
            raise errors.BadRequest(f'unknown query parameter "{name}" for pods/'
                                    f"{subresource} (allowed: {', '.join(allowed)})")
    if subresource == "portforward":
        ports = [parse_port(part) for value in values.get("ports") or ()
                 for part in value.split(",")]
        return [("port", str(port)) for port in ports]
    flags = {field: parse_bool(field, values[field]) for field, _ in KUBELET_FLAGS
             if field in values}
    query = [(kubelet, "1") for field, kubelet in KUBELET_FLAGS if flags.get(field)]
    if not any(flags.get(field) for field in ("stdin", "stdout", "stderr")):
        raise errors.BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    if subresource == "exec":
        command = list(values.get("command") or ())
        if not command:
            raise errors.BadRequest("you must specify at least 1 command")
        query += [("command", part) for part in command]
    return query


def is_upgrade(headers: Mapping[str, str]) -> bool:
    connection = [token.strip().lower() for token in headers.get("connection", "").split(",")]
    return "upgrade" in connection and bool(headers.get("upgrade"))


def kubelet_path(subresource: str, pod: Mapping[str, Any], container: str | None) -> str:
    meta = pod.get("metadata") or {}
    namespace = quote(str(meta.get("namespace") or "default"), safe="")
    name = quote(str(meta.get("name") or ""), safe="")
    if subresource == "portforward":
        return f"/portForward/{namespace}/{name}"
    assert container is not None
    return f"/{subresource}/{namespace}/{name}/{quote(container, safe='')}"


def upstream_request(method: str, host: str, path: str, query: list[tuple[str, str]],
                     headers: Sequence[tuple[str, str]]) -> bytes:
    target = f"{path}?{urlencode(query)}" if query else path
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: Upgrade"]
    lines += [f"{name}: {value}" for name, value in headers
              if name.lower() in UPGRADE_HEADERS and "\r" not in value and "\n" not in value]
    if method == "POST":
        lines.append("Content-Length: 0")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_status_line(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise errors.InternalError(f"the kubelet answered {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def authorize_create(authorizer: Authorizer | None, user: UserInfo, subresource: str,
                           namespace: str, name: str) -> None:
    if authorizer is None:
        return
    attributes = Attributes(user=user, verb="create", resource_request=True, api_version="v1",
                            resource="pods", subresource=subresource, namespace=namespace,
                            name=name)
    decision, reason = await authorizer.authorize(attributes)
    if decision is not Decision.ALLOW:
        raise forbidden(attributes, reason)


async def dial_kubelet(node: Mapping[str, Any], tls: ssl.SSLContext | None) -> tuple[
        str, asyncio.StreamReader, asyncio.StreamWriter]:
    base = urlsplit(kubelet_base_url(node, scheme="https" if tls is not None else "http"))
    host, port = base.hostname or "", base.port or 10250
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls is not None else None,
                limit=1 << 20)
    except (OSError, TimeoutError, ssl.SSLError) as e:
        raise errors.InternalError(f"error dialing backend: dial tcp {base.netloc}: "
                                   f"{e or type(e).__name__}") from e
    return base.netloc, reader, writer


async def connect(method: str, subresource: str, pod: dict[str, Any], container: str | None,
                  node: dict[str, Any], query: list[tuple[str, str]],
                  headers: Sequence[tuple[str, str]], *,
                  tls: ssl.SSLContext | None) -> Response:
    """The upgraded connection to the kubelet (its parameters: `kubelet_query`), as a
    Response that hands it to the client; or an ApiError for the client."""
    netloc, reader, writer = await dial_kubelet(node, tls)
    path = kubelet_path(subresource, pod, container)
    try:
        writer.write(upstream_request(method, netloc, path, query, headers))
        await writer.drain()
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS * 6):
            head = await reader.readuntil(b"\r\n\r\n")
        status, answer = parse_status_line(head[:-4])
        if status != 101:
            length = min(int(answer.get("content-length") or BODY_LIMIT), BODY_LIMIT)
            body = await reader.read(length) if length else b""
            raise error_from_kubelet(status, body)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            TimeoutError) as e:
        writer.close()
        raise errors.InternalError(f"error upgrading connection to the kubelet: "
                                   f"{e or type(e).__name__}") from e
    except BaseException:
        writer.close()
        raise
    meta = pod.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    log.info("%s: %s proxied to the kubelet at %s", where, subresource, netloc)
    return Proxied(head, reader, writer, where=f"{where} {subresource}")


async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(COPY_CHUNK):
            writer.write(data)
            await writer.drain()


class Proxied(Response):
    """The kubelet's 101 and then its bytes, on the client's connection taken over."""

    def __init__(self, head: bytes, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, *, where: str) -> None:
        super().__init__()
        self.head = head
        self.upstream = (reader, writer)
        self.where = where

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        up_reader, up_writer = self.upstream
        hijack = hijacker(scope)
        if hijack is None:  # checked before dialing: only another ASGI server gets here
            up_writer.close()
            await errors_response(errors.BadRequest("Upgrade request required"))(
                scope, receive, send)
            return
        reader, writer = hijack()
        try:
            writer.write(self.head)
            tasks = [asyncio.create_task(copy(reader, up_writer), name="to-kubelet"),
                     asyncio.create_task(copy(up_reader, writer), name="to-client")]
            # either side closing ends the session (Ctrl-C in kubectl, the process exiting)
            _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        finally:
            up_writer.close()
            writer.close()
        log.info("%s: stream closed", self.where)


def errors_response(err: errors.ApiError) -> Response:
    return Response(encode(err.status()), status_code=err.code, media_type="application/json")
