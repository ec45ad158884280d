"""API requests over a lean HTTP/1.1 keep-alive pool: the scheduler's binds and the
controller-manager's object writes.

Per bind, httpx + httpcore + anyio cost the scheduler more CPU than the whole
scheduling cycle (bench/bench_scheduler.py, profiled with py-spy): request and
response models, a pool that polls every idle socket, three layers of streams; the same
pool was most of the controller-manager's CPU when a ReplicaSet wrote hundreds of pods at
once. These requests are small JSON bodies with a JSON answer, so `Pool` writes them
on a kept-alive asyncio stream and reads the answer (Content-Length or chunked), and
`FastApiClient` is `common.client.ApiClient` with its plain requests sent that way (and
JSON by orjson); watches stay on httpx. Failures surface as the same `common.errors`
classes (a non-2xx answer) and `httpx.TransportError` subclasses (the connection), so
callers cannot tell the difference.

An idle connection is reused only while the server keeps it (uvicorn closes one idle
for 5 s: we drop ours after `MAX_IDLE_SECONDS`, or as soon as the server has closed it),
so a request is never written to a dead socket and never needs to be retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import orjson

from common.client import ApiClient, raise_for_status
from common.kubeconfig import Connection, plain

MAX_IDLE_SECONDS = 4.0  # below uvicorn's timeout_keep_alive (5 s)
MAX_IDLE_CONNECTIONS = 32


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes
    keep_alive: bool


def request_head(method: str, target: str, host: str, headers: Mapping[str, str],
                 length: int | None) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(head: bytes) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-cased names) and whether the connection stays open."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    status_text = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or not status_text.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    return int(status_text), headers, keep_alive


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        parts.append((await reader.readexactly(size + 2))[:-2])


async def read_answer(reader: asyncio.StreamReader, method: str) -> Answer:
    status, headers, keep_alive = parse_head(await reader.readuntil(b"\r\n\r\n"))
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body = await read_chunked(reader)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:  # the body ends with the connection
        body, keep_alive = await reader.read(), False
    return Answer(status, headers, body, keep_alive)


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def close(self) -> None:
        self.writer.close()


class Pool:
    """Kept-alive HTTP/1.1 connections to one server; one request per connection at
    a time, as many connections as requests in flight, or at most `max_connections`
    (then requests beyond it wait for a connection)."""

    def __init__(self, connection: Connection, *, headers: Mapping[str, str],
                 timeout: float, max_connections: int | None = None) -> None:
        url = urlsplit(connection.server)
        self.tls = url.scheme == "https"
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if self.tls else 80)
        self.netloc = url.netloc
        self.base_path = url.path.rstrip("/")
        self.ssl_context: ssl.SSLContext | None = None
        if self.tls:
            self.ssl_context = connection.ssl_context or ssl.create_default_context()
        self.headers = dict(headers)
        self.timeout = timeout
        self._idle: list[_Conn] = []
        self._max_idle = max(MAX_IDLE_CONNECTIONS, max_connections or 0)
        self._slots = asyncio.Semaphore(max_connections) if max_connections else None
        self.opened = 0  # connections made so far (for tests)

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: bytes | None = None, content_type: str = "application/json"
                      ) -> Answer:
        if self._slots is None:
            return await self._exchange(method, path, params=params, body=body,
                                        content_type=content_type)
        async with self._slots:
            return await self._exchange(method, path, params=params, body=body,
                                        content_type=content_type)

    async def _exchange(self, method: str, path: str, *, params: Mapping[str, str] | None,
                        body: bytes | None, content_type: str) -> Answer:
        target = self.base_path + path + (f"?{urlencode(params)}" if params else "")
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = content_type
        head = request_head(method, target, self.netloc, headers,
                            len(body) if body is not None else
                            (0 if method in ("POST", "PUT", "PATCH") else None))
        conn = self._take_idle()
        try:
            async with asyncio.timeout(self.timeout):
                if conn is None:
                    conn = await self._connect()
                conn.writer.write(head + body if body is not None else head)
                answer = await read_answer(conn.reader, method)
        except TimeoutError as e:
            self._discard(conn)
            raise httpx.ReadTimeout(f"{method} {path}: no answer in {self.timeout}s") from e
        except asyncio.IncompleteReadError as e:
            self._discard(conn)
            raise httpx.RemoteProtocolError(f"{method} {path}: the server closed the "
                                            "connection mid-answer") from e
        except (asyncio.LimitOverrunError, ValueError) as e:
            self._discard(conn)
            raise httpx.RemoteProtocolError(f"{method} {path}: a malformed answer: {e}") from e
        except OSError as e:
            self._discard(conn)
            kind = httpx.ConnectError if conn is None else httpx.ReadError
            raise kind(f"{method} {path}: {e}") from e
        except BaseException:  # cancelled mid-request: the connection's state is unknown
            self._discard(conn)
            raise
        if answer.keep_alive and len(self._idle) < self._max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
        return answer

    def _take_idle(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < MAX_IDLE_SECONDS and not conn.reader.at_eof():
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ssl_context,
            server_hostname=self.host if self.tls else None)
        self.opened += 1
        return _Conn(reader, writer)

    def _discard(self, conn: _Conn | None) -> None:
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await conn.writer.wait_closed()


class FastApiClient(ApiClient):
    """`ApiClient` whose plain requests go through `Pool` (watches stay on httpx)."""

    def __init__(self, connection: str | Connection, *, timeout: float = 30.0,
                 user_agent: str = "kubelite", group_versions: Mapping[str, str] | None = None,
                 max_connections: int | None = None) -> None:
        super().__init__(connection, timeout=timeout, user_agent=user_agent,
                         group_versions=group_versions)
        conn = connection if isinstance(connection, Connection) else plain(connection)
        self.pool = Pool(conn, timeout=timeout, max_connections=max_connections, headers={
            "User-Agent": user_agent, "Accept": "application/json", **conn.headers})

    async def _request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                       body: Any = None, content_type: str = "application/json") -> dict:
        content = orjson.dumps(body) if body is not None else None
        started = time.perf_counter()
        try:
            answer = await self.pool.request(method, path, params=params, body=content,
                                              content_type=content_type)
        except httpx.HTTPError:
            self.measured(method, "<error>", started)
            raise
        self.measured(method, str(answer.status), started)
        if not 200 <= answer.status < 300:
            response = httpx.Response(answer.status, headers=answer.headers,
                                      content=answer.body,
                                      request=httpx.Request(method, self.base_url + path))
            raise_for_status(response, answer.body)
        if not answer.body:
            return {}
        decoded = orjson.loads(answer.body)
        if not isinstance(decoded, dict):
            raise ValueError(f"{method} {path}: expected a JSON object, got {decoded!r:.200}")
        return decoded

    async def aclose(self) -> None:
        await self.pool.aclose()
        await super().aclose()
