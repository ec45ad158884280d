"""The lean HTTP pool (common.http_pool) of the scheduler's binds and the
controller-manager's writes: its framing, against a socket server with canned answers,
then real writes through it to the secure apiserver (TLS, client certificate)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from common.errors import AlreadyExists, NotFound
from common.http_pool import FastApiClient, parse_head, read_answer, read_chunked
from tests.support import ApiServer, unique


def answer(status: int, body: dict[str, Any], *, chunked: bool = False,
           close: bool = False) -> bytes:
    data = json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", "content-type: application/json"]
    if close:
        head.append("connection: close")
    if chunked:
        head.append("transfer-encoding: chunked")
        payload = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n"
                           for part in (data[:5], data[5:])) + b"0\r\n\r\n"
    else:
        head.append(f"content-length: {len(data)}")
        payload = data
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


@asynccontextmanager
async def server(reply: Callable[[bytes], bytes | None]) -> AsyncIterator[tuple[str, dict]]:
    """A loopback HTTP server answering each request with `reply(request head + body)`
    (None: close the connection without answering); stats count connections."""
    stats: dict[str, Any] = {"connections": 0, "requests": []}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                stats["requests"].append(head + body)
                out = reply(head + body)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if b"connection: close" in out:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", stats
    finally:
        srv.close()
        await srv.wait_closed()


def test_parse_head_reads_status_headers_and_keep_alive() -> None:
    status, headers, keep = parse_head(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n"
                                       b"Connection: close")
    assert (status, headers["content-length"], keep) == (201, "2", False)
    assert parse_head(b"HTTP/1.1 200 OK\r\nx: y")[2] is True
    assert parse_head(b"HTTP/1.0 200 OK")[2] is False
    with pytest.raises(httpx.RemoteProtocolError):
        parse_head(b"SSH-2.0-OpenSSH")


async def test_read_answer_decodes_chunked_and_sized_bodies() -> None:
    for chunked in (False, True):
        reader = asyncio.StreamReader()
        reader.feed_data(answer(200, {"kind": "Pod"}, chunked=chunked))
        got = await read_answer(reader, "GET")
        assert (got.status, json.loads(got.body)) == (200, {"kind": "Pod"})


async def test_a_chunked_body_is_read_to_its_last_chunk_past_extensions_and_trailers() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"4\r\n{\"a\"\r\n3;ext=1\r\n:1}\r\n0\r\nTrailer: x\r\n\r\nNEXT")
    assert await read_chunked(reader) == b'{"a":1}'
    assert await reader.readexactly(4) == b"NEXT"  # the next response stays unread


async def test_requests_share_one_kept_alive_connection_and_errors_are_api_errors() -> None:
    def reply(request: bytes) -> bytes:
        if b"/missing" in request:
            return answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404,
                                "message": 'pods "missing" not found'})
        return answer(201, {"kind": "Binding", "echo": request.decode().split(" ")[1]},
                      chunked=b"chunk" in request)

    async with server(reply) as (url, stats), FastApiClient(url) as client:
        await client.bind("default", "web-1", "node-a")
        created = await client.create("pods", {"metadata": {"name": "chunk"}},
                                      namespace="default")
        assert created["echo"] == "/api/v1/namespaces/default/pods"
        with pytest.raises(NotFound, match='pods "missing" not found'):
            await client.get("pods", "missing", namespace="default")
        assert stats["connections"] == 1  # one at a time: the same connection each time
        bind = stats["requests"][0].decode()
        assert bind.startswith("POST /api/v1/namespaces/default/pods/web-1/binding HTTP/1.1")
        assert json.loads(bind.split("\r\n\r\n", 1)[1])["target"]["name"] == "node-a"


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    async with server(lambda _: answer(200, {"ok": True}, close=True)) as (url, stats), \
            FastApiClient(url) as client:
        for _ in range(3):
            assert await client.get("pods", "p", namespace="default") == {"ok": True}
        assert stats["connections"] == 3


async def test_a_connection_dropped_mid_request_is_a_transport_error() -> None:
    async with server(lambda _: None) as (url, _stats), FastApiClient(url) as client:
        with pytest.raises(httpx.TransportError):
            await client.bind("default", "web-1", "node-a")




async def test_concurrent_writes_to_the_apiserver_stay_within_max_connections(
        apiserver: ApiServer) -> None:
    prefix = unique("pooled")
    async with FastApiClient(apiserver.connection(), max_connections=4) as client:
        names = [f"{prefix}-{i}" for i in range(60)]
        await asyncio.gather(*(client.create("configmaps", {
            "metadata": {"name": name}, "data": {"i": name}}, namespace="default")
            for name in names))
        assert client.pool.opened <= 4  # 60 requests, at most 4 at once, on kept connections
        got = await client.get("configmaps", names[7], namespace="default")
        assert got["data"] == {"i": names[7]}
        with pytest.raises(AlreadyExists):
            await client.create("configmaps", {"metadata": {"name": names[0]}},
                                namespace="default")
        with pytest.raises(NotFound):
            await client.get("configmaps", f"{prefix}-missing", namespace="default")
        await asyncio.gather(*(client.delete("configmaps", name, namespace="default")
                               for name in names))
        with pytest.raises(NotFound):
            await client.get("configmaps", names[0], namespace="default")
        assert client.pool.opened <= 4
