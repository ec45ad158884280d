"""A lean httpx transport for the controllers' object writes: a pool of persistent
HTTP/1.1 connections, one request at a time on each, answers read by Content-Length (or
chunked), no per-request bookkeeping beyond taking an idle connection and giving it back.

httpcore's pool, which the default transport uses, scans every connection on every
request (and asks the kernel whether each idle socket is readable), which made it most of
the controller-manager's CPU when a ReplicaSet writes hundreds of pods at once. This one
is for short request/response exchanges only (create, delete, update): watches and other
streams stay on the default transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

# uvicorn closes a connection idle for 5 s (its timeout_keep_alive): never reuse one
# that has been idle nearly that long, or the request may meet a closing socket.
MAX_IDLE_SECONDS = 3.0
MAX_HEADER_BYTES = 64 * 1024


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


def parse_head(head: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The status code and header fields of a response head (its status line first)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.1 status line: {lines[0][:100]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header line: {line[:100]!r}")
        headers.append((name.strip(), value.strip()))
    return int(parts[1]), headers


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


class PooledTransport(httpx.AsyncBaseTransport):
    """Up to `size` keep-alive connections to the one server of `base_url`."""

    def __init__(self, base_url: str, *, size: int = 32,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        url = urlsplit(base_url)
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.ssl_context = (ssl_context or ssl.create_default_context()) if self.tls else None
        self.size = size
        self._idle: deque[Conn] = deque()
        self._slots = asyncio.Semaphore(size)
        self.opened = 0  # connections made so far (for /metrics and tests)

    async def _connect(self) -> Conn:
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context, limit=MAX_HEADER_BYTES,
                server_hostname=self.host if self.tls else None)
        except OSError as e:
            raise httpx.ConnectError(str(e)) from e
        self.opened += 1
        return Conn(reader, writer)

    def _take_idle(self) -> Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the warmest
            if now - conn.idle_since < MAX_IDLE_SECONDS and not conn.reader.at_eof():
                return conn
            conn.close()
        return None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        lines = [f"{request.method} {request.url.raw_path.decode('ascii')} HTTP/1.1"]
        for name, value in request.headers.items():
            if name.lower() not in ("accept-encoding", "connection", "content-length"):
                lines.append(f"{name}: {value}")
        lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        async with self._slots:
            conn = self._take_idle() or await self._connect()
            try:
                conn.writer.write(head + body)
                await conn.writer.drain()
                raw = await conn.reader.readuntil(b"\r\n\r\n")
                status, headers = parse_head(raw[:-4])
                if header(headers, b"transfer-encoding") == b"chunked":
                    content = await read_chunked(conn.reader)
                else:
                    length = header(headers, b"content-length")
                    content = (await conn.reader.readexactly(int(length))
                               if length is not None else await conn.reader.read())
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ValueError) as e:
                conn.close()
                raise httpx.ReadError(f"{type(e).__name__}: {e}", request=request) from e
            except BaseException:
                conn.close()  # cancelled mid-exchange: the connection is in no known state
                raise
            if (header(headers, b"connection") or b"").lower() == b"close" or \
                    header(headers, b"content-length") is None and \
                    header(headers, b"transfer-encoding") is None:
                conn.close()
            else:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()
