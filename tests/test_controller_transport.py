"""The controller-manager's lean write transport: its HTTP/1.1 framing (pure), then real
requests through it to the secure apiserver (TLS, client certificate), as the
ReplicaSet and Job controllers send theirs."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from common.client import ApiClient
from common.errors import AlreadyExists, NotFound
from controller_manager.transport import PooledTransport, parse_head, read_chunked
from tests.support import ApiServer, unique


def test_a_response_head_is_its_status_and_fields() -> None:
    status, headers = parse_head(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                                 b"Content-Length: 2")
    assert status == 201
    assert headers == [(b"content-type", b"application/json"), (b"Content-Length", b"2")]
    with pytest.raises(httpx.RemoteProtocolError):
        parse_head(b"SPDY/3 200 OK")
    with pytest.raises(httpx.RemoteProtocolError):
        parse_head(b"HTTP/1.1 200 OK\r\nno colon here")


async def test_a_chunked_body_is_read_to_its_last_chunk() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"4\r\n{\"a\"\r\n3;ext=1\r\n:1}\r\n0\r\nTrailer: x\r\n\r\nNEXT")
    assert await read_chunked(reader) == b'{"a":1}'
    assert await reader.readexactly(4) == b"NEXT"  # the next response stays unread


async def test_writes_through_the_pool_reuse_its_connections_and_keep_kube_s_errors(
        apiserver: ApiServer) -> None:
    connection = apiserver.connection()
    transport = PooledTransport(connection.server, size=4, ssl_context=connection.ssl_context)
    prefix = unique("pooled")
    async with ApiClient(connection, transport=transport) as client:
        names = [f"{prefix}-{i}" for i in range(60)]
        await asyncio.gather(*(client.create("configmaps", {
            "metadata": {"name": name}, "data": {"i": name}}, namespace="default")
            for name in names))
        assert transport.opened <= 4  # 60 requests, at most 4 at once, on kept connections
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
        assert transport.opened <= 4
