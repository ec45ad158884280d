"""Docker's hijacked streams: exec (create, start, inspect, resize) and attach.

`POST /exec/{id}/start` and `POST /containers/{id}/attach` with `Connection: Upgrade`,
`Upgrade: tcp` answer `101 UPGRADED` and then carry the process's stdin one way and its
output the other: raw for a TTY, else stdout/stderr multiplexed in frames of an 8-byte
header (stream 1|2, three zero bytes, a big-endian uint32 size) and the payload. Closing
our write side (a half-close) closes the process's stdin.

Every user string reaches Docker only as a JSON value (the command, one argv item each)
or as one percent-quoted path segment (container and exec ids): none can change which
endpoint is called or what the call means. The few lines of unix-socket plumbing are
this module's own (kubelet/docker.py is the pod runtime's client).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from kubelet.docker import DEFAULT_SOCKET

FRAME_HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2
HEAD_LIMIT = 64 * 1024


class DockerStreamError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def segment(value: str) -> str:
    """One path segment, whatever the string holds."""
    return quote(value, safe="")


def hijack_request(path: str, body: Mapping[str, Any] | None) -> bytes:
    payload = json.dumps(body or {}).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
            f"Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: {len(payload)}\r\n\r\n")
    return head.encode("ascii") + payload


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise DockerStreamError(500, f"malformed answer from Docker: {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def split_frames(buffer: bytearray) -> list[tuple[int, bytes]]:
    """Complete multiplexed frames at the start of `buffer` (removed from it)."""
    frames = []
    while len(buffer) >= FRAME_HEADER.size:
        stream, size = FRAME_HEADER.unpack_from(buffer)
        if len(buffer) < FRAME_HEADER.size + size:
            break
        frames.append((stream, bytes(buffer[FRAME_HEADER.size:FRAME_HEADER.size + size])))
        del buffer[:FRAME_HEADER.size + size]
    return frames


@dataclass
class HijackedStream:
    """A started exec or attach: `output()` yields (1|2, bytes); `write`/`close_stdin`."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    tty: bool

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        buffer = bytearray()
        while True:
            chunk = await self.reader.read(32 * 1024)
            if not chunk:
                return
            if self.tty:
                yield STDOUT, chunk
                continue
            buffer += chunk
            for stream, data in split_frames(buffer):
                yield (STDERR if stream == STDERR else STDOUT), data

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def close_stdin(self) -> None:
        if not self.writer.is_closing() and self.writer.can_write_eof():
            self.writer.write_eof()

    def close(self) -> None:
        self.writer.close()


class DockerStreams:
    """The Docker calls streaming needs, on the daemon's unix socket."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET) -> None:
        self.socket_path = socket_path

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=self.socket_path),
                                 base_url="http://docker", timeout=30.0)

    async def _json(self, method: str, path: str, body: Any = None,
                    params: Mapping[str, str] | None = None) -> Any:
        async with self._client() as client:
            response = await client.request(method, path, json=body, params=params)
        if response.status_code >= 400:
            try:
                message = str(response.json().get("message"))
            except ValueError:
                message = response.text
            raise DockerStreamError(response.status_code, message)
        return response.json() if response.content else None

    async def create_exec(self, container_id: str, command: Sequence[str], *, stdin: bool,
                          stdout: bool, stderr: bool, tty: bool) -> str:
        answer = await self._json("POST", f"/containers/{segment(container_id)}/exec", {
            "AttachStdin": stdin, "AttachStdout": stdout, "AttachStderr": stderr,
            "Tty": tty, "Cmd": list(command)})
        return str(answer["Id"])

    async def start_exec(self, exec_id: str, *, tty: bool) -> HijackedStream:
        return await self._hijack(f"/exec/{segment(exec_id)}/start",
                                  {"Detach": False, "Tty": tty}, tty=tty)

    async def attach(self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool,
                     tty: bool) -> HijackedStream:
        query = urlencode({"stream": "1", "stdin": int(stdin), "stdout": int(stdout),
                           "stderr": int(stderr)})
        return await self._hijack(f"/containers/{segment(container_id)}/attach?{query}",
                                  None, tty=tty)

    async def wait_not_running(self, container_id: str) -> None:
        """Until the container is not running (at once when it is not, or is gone)."""
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=self.socket_path),
                                     base_url="http://docker", timeout=None) as client:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"/containers/{segment(container_id)}/wait",
                                  params={"condition": "not-running"})

    async def exec_exit_code(self, exec_id: str) -> int | None:
        for _ in range(50):  # the stream can end a moment before Docker records the exit
            answer = await self._json("GET", f"/exec/{segment(exec_id)}/json")
            if not answer.get("Running"):
                code = answer.get("ExitCode")
                return code if isinstance(code, int) else None
            await asyncio.sleep(0.02)
        return None

    async def resize_exec(self, exec_id: str, *, width: int, height: int) -> None:
        await self._json("POST", f"/exec/{segment(exec_id)}/resize",
                         params={"h": str(height), "w": str(width)})

    async def resize_container(self, container_id: str, *, width: int, height: int) -> None:
        await self._json("POST", f"/containers/{segment(container_id)}/resize",
                         params={"h": str(height), "w": str(width)})

    async def _hijack(self, path: str, body: Mapping[str, Any] | None, *,
                      tty: bool) -> HijackedStream:
        reader, writer = await asyncio.open_unix_connection(self.socket_path, limit=1 << 20)
        try:
            writer.write(hijack_request(path, body))
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > HEAD_LIMIT:
                raise DockerStreamError(500, "Docker's answer has too long a head")
            status, headers = parse_head(head[:-4])
            if status not in (101, 200):
                length = int(headers.get("content-length") or 0)
                text = (await reader.readexactly(length)).decode(errors="replace") \
                    if length else ""
                try:
                    text = str(json.loads(text).get("message"))
                except (ValueError, AttributeError):
                    pass
                raise DockerStreamError(status, text.strip() or f"Docker answered {status}")
        except BaseException:
            writer.close()
            raise
        return HijackedStream(reader, writer, tty)
