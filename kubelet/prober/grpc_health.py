"""The grpc probe: one `grpc.health.v1.Health/Check` call to the pod, as kube's
`pkg/probe/grpc` makes it (plaintext, user agent kube-probe, the probe's timeout for the
connection and the call together), with kube's wording for each failure.

The two messages are tiny protobufs, encoded here rather than generated:
HealthCheckRequest {string service = 1;} and HealthCheckResponse {ServingStatus status = 1;}.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from types import ModuleType

CHECK = "/grpc.health.v1.Health/Check"
USER_AGENT = "kube-probe/1.37"
SERVING = 1
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode_request(service: str) -> bytes:
    """HealthCheckRequest: field 1 (length-delimited) when the service is not empty."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def decode_status(message: bytes) -> int:
    """HealthCheckResponse's status (field 1, varint; 0 UNKNOWN when absent). Fields this
    does not know are skipped, as protobuf readers do."""
    status, i = 0, 0

    def varint() -> int:
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= len(message):
                raise ValueError("truncated HealthCheckResponse")
            byte = message[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(message):
        tag = varint()
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value = varint()
            if field == 1:
                status = value
        elif wire == 2:
            length = varint()  # not `i += varint()`: that adds to i as it was before the read
            i += length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unreadable HealthCheckResponse (wire type {wire})")
    if i > len(message):
        raise ValueError("truncated HealthCheckResponse")
    return status


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, str(status))


def go_code(name: str) -> str:
    """grpc's code as Go prints it: DEADLINE_EXCEEDED -> DeadlineExceeded."""
    return "".join(part.capitalize() for part in name.split("_"))


def outcome(status: int) -> tuple[bool, str]:
    if status != SERVING:
        return False, f'service unhealthy (responded with "{status_name(status)}")'
    return True, "service healthy"


_grpc: ModuleType | None = None


async def grpc_module() -> ModuleType:
    """grpcio, imported on a thread the first time a grpc probe runs: only kubelets that
    run one load it, and its import (a fifth of a second) does not stall the event loop."""
    global _grpc
    if _grpc is None:
        _grpc = await asyncio.to_thread(importlib.import_module, "grpc")
    return _grpc


async def check(host: str, port: int, service: str, timeout: float) -> tuple[bool, str]:
    """(success, output) of one health check of `service` at host:port."""
    grpc = await grpc_module()

    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(
            address, options=[("grpc.primary_user_agent", USER_AGENT)]) as channel:
        try:
            async with asyncio.timeout(timeout):
                await channel.channel_ready()
        except TimeoutError:
            return False, (f'timeout: failed to connect service "{address}" within '
                           f"{timeout:g}s: context deadline exceeded")
        call = channel.unary_unary(CHECK, request_serializer=encode_request,
                                   response_deserializer=decode_status)
        try:
            status = await call(service, timeout=max(deadline - time.monotonic(), 0.001))
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return False, ("error: this server does not implement the grpc health "
                               f"protocol (grpc.health.v1.Health): {e.details()}")
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"timeout: health rpc did not complete within {timeout:g}s"
            return False, (f"error: health rpc probe failed: rpc error: code = "
                           f"{go_code(code.name)} desc = {e.details()}")
    return outcome(status)
