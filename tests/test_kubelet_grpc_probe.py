"""The grpc probe (issue 14, "Probes and lifecycle"): HealthCheckRequest/Response encoded
by hand, then one `grpc.health.v1.Health/Check` against real grpc servers on loopback, each
outcome in kube's words (`pkg/probe/grpc/grpc.go`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from kubelet.prober import grpc_health


@pytest.mark.parametrize(("service", "encoded"), [
    ("", b""), ("web", b"\x0a\x03web"), ("x" * 200, b"\x0a\xc8\x01" + b"x" * 200)])
def test_requests_are_encoded_as_protobuf(service: str, encoded: bytes) -> None:
    assert grpc_health.encode_request(service) == encoded


@pytest.mark.parametrize(("message", "status"), [
    (b"", 0), (b"\x08\x01", 1), (b"\x08\x02", 2), (b"\x08\x03", 3),
    # fields it does not know are skipped, whatever their wire type
    (b"\x12\x02hi\x08\x01", 1), (b"\x18\x96\x01\x08\x02", 2), (b"\x21" + bytes(8) + b"\x08\x01", 1),
    (b"\x2d" + bytes(4) + b"\x08\x02", 2)])
def test_responses_are_decoded(message: bytes, status: int) -> None:
    assert grpc_health.decode_status(message) == status


@pytest.mark.parametrize("message", [b"\x08", b"\x12\x05hi", b"\x0b\x01"])
def test_unreadable_responses_are_refused(message: bytes) -> None:
    with pytest.raises(ValueError, match="HealthCheckResponse"):
        grpc_health.decode_status(message)


def test_status_names_and_codes_as_kube_prints_them() -> None:
    assert grpc_health.outcome(1) == (True, "service healthy")
    assert grpc_health.outcome(2) == (
        False, 'service unhealthy (responded with "NOT_SERVING")')
    assert grpc_health.outcome(7) == (False, 'service unhealthy (responded with "7")')
    assert grpc_health.go_code("DEADLINE_EXCEEDED") == "DeadlineExceeded"
    assert grpc_health.go_code("NOT_FOUND") == "NotFound"


# --- real grpc servers on loopback ---------------------------------------------------------

Handler = Callable[[bytes, Any], Any]


async def serving(request: bytes, context: Any) -> bytes:
    service = request[2:].decode()
    if service == "unknown":
        await context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
    if service == "slow":
        await asyncio.sleep(3)
    return b"\x08\x02" if service == "down" else b"\x08\x01"


Start = Callable[[str, dict[str, Handler]], Awaitable[int]]


@pytest.fixture
async def server() -> AsyncIterator[Start]:
    """Starts grpc servers with the given methods of one service; returns their port."""
    started: list[Any] = []

    async def start(service: str, methods: dict[str, Handler]) -> int:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            service, {name: grpc.unary_unary_rpc_method_handler(handler)
                      for name, handler in methods.items()})])
        port = server.add_insecure_port("127.0.0.1:0")
        started.append(server)
        await server.start()
        return port

    yield start
    await asyncio.gather(*(s.stop(0) for s in started))


async def check(port: int, service: str = "") -> tuple[bool, str]:
    return await grpc_health.check("127.0.0.1", port, service, 1)


async def test_each_outcome_in_kubes_words(server: Start) -> None:
    port = await server("grpc.health.v1.Health", {"Check": serving})
    other = await server("example.Echo", {"Echo": serving})
    assert await check(port) == (True, "service healthy")
    assert await check(port, "down") == (
        False, 'service unhealthy (responded with "NOT_SERVING")')
    assert await check(port, "unknown") == (
        False, "error: health rpc probe failed: rpc error: code = NotFound "
               "desc = unknown service")
    assert await check(port, "slow") == (
        False, "timeout: health rpc did not complete within 1s")
    ok, message = await check(other)
    assert not ok and message.startswith(
        "error: this server does not implement the grpc health protocol "
        "(grpc.health.v1.Health): "), message


async def test_nothing_listening_is_a_connect_timeout() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert await check(port) == (
        False, f'timeout: failed to connect service "127.0.0.1:{port}" within 1s: '
               "context deadline exceeded")
