"""The scheduler's fast paths: its lean HTTP pool (scheduler.http) against a real
socket server with canned answers, and its event queue (scheduler.events)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from common.errors import NotFound
from scheduler.events import EventQueue, SpamFilter
from scheduler.http import FastApiClient, parse_head, read_answer


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


def test_spam_filter_allows_a_burst_per_object_then_one_per_five_minutes() -> None:
    now = [0.0]
    spam = SpamFilter(clock=lambda: now[0])
    pod = {"kind": "Pod", "metadata": {"namespace": "default", "name": "web", "uid": "1"}}
    other = {"kind": "Pod", "metadata": {"namespace": "default", "name": "db", "uid": "2"}}
    assert all(spam.allow(pod) for _ in range(25))
    assert not spam.allow(pod)
    assert spam.allow(other)  # each object has its own bucket
    now[0] = 299.0
    assert not spam.allow(pod)
    now[0] = 301.0
    assert spam.allow(pod) and not spam.allow(pod)


class SlowRecorder:
    def __init__(self) -> None:
        self.written: list[str] = []
        self.stamped: list[float] = []
        self.gate = asyncio.Event()

    async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                    at: float, action: str | None = None,
                    annotations: dict[str, str] | None = None) -> None:
        await self.gate.wait()
        self.written.append(message)
        self.stamped.append(at)


async def test_event_queue_never_waits_drops_when_full_and_writes_the_rest_on_close() -> None:
    recorder = SlowRecorder()
    events = EventQueue(recorder, maxsize=3)  # type: ignore[arg-type]
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "uid": str(i)}} for i in range(6)]
    emitted = time.time()
    for i, pod in enumerate(pods):
        events.emit(pod, "Normal", "Scheduled", f"m{i}")  # returns at once
    assert events.dropped == 3 and len(events) == 3  # the writer has not run yet
    await asyncio.sleep(0)  # it takes m0 and waits on the gate: nothing else waits
    assert recorder.written == []
    recorder.gate.set()
    await events.close(seconds=5)
    assert recorder.written == ["m0", "m1", "m2"]
    # each Event's time is when it was emitted, not when the writer got to it
    assert all(emitted <= at <= emitted + 1 for at in recorder.stamped)
