"""port-forward: the kubelet's portforward server (`pkg/kubelet/cri/streaming/portforward`),
connecting to the pod's IP on Docker's bridge (the sandbox owns the pod's network
namespace, so its address is the pod's), or the node's loopback for a hostNetwork pod.

- SPDY (`portforward.k8s.io`), also tunnelled in WebSocket binary messages
  (`SPDY/3.1+portforward.k8s.io`, kubectl 1.37's default; `v2.portforward.k8s.io`, 1.30's
  alpha): the client opens two streams
  per connection, `streamType: error` and `streamType: data`, with the same `requestID`
  and the `port`; the data stream is piped to a new TCP connection to the pod, and a
  failure is written, as text, to the error stream.
- WebSocket channels (`v4.channel.k8s.io`, or no subprotocol; the Python client's
  `portforward()`): the ports come from the query (`port=80`), channel 2i is port i's data
  and 2i+1 its errors, each starting with the port as two little-endian bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubelet.streaming.spdy import SpdySession, Stream
from kubelet.streaming.websocket import WebSocket

log = logging.getLogger("kubelet.streaming")

SPDY_PROTOCOLS = ("portforward.k8s.io",)
# kubectl 1.31+ asks for the first; 1.30's alpha dialer named the tunnel v2.portforward.k8s.io
TUNNEL_PROTOCOLS = ("SPDY/3.1+portforward.k8s.io", "v2.portforward.k8s.io")
CHANNEL_PROTOCOLS = ("v4.channel.k8s.io",)
CONNECT_TIMEOUT_SECONDS = 10.0
PAIR_WAIT_SECONDS = 30.0


class PortError(Exception):
    """A bad port: 400 (or the error stream) with this text."""


def parse_port(text: str) -> int:
    """kubelet's port parsing (uint16, and not 0), with its words."""
    try:
        port = int(text, 10)
        if not text.isdigit() or port > 65535:
            raise ValueError(text)
    except ValueError:
        raise PortError(f'unable to parse "{text}" as a port: strconv.ParseUint: parsing '
                        f'"{text}": invalid syntax') from None
    if port < 1:
        raise PortError(f'port "{text}" must be > 0')
    return port


def parse_query_ports(values: Mapping[str, Sequence[str]]) -> list[int]:
    texts = [part for value in values.get("port") or () for part in value.split(",")]
    if not texts:
        raise PortError('query parameter "port" is required')
    return [parse_port(text) for text in texts]


@dataclass(frozen=True)
class Target:
    namespace: str
    pod: str
    uid: str
    ip: str

    def forwarding_error(self, port: int, error: str) -> str:
        return (f"error forwarding port {port} to pod {self.pod}_{self.namespace}, "
                f"uid {self.uid}: {error}")


async def dial(target: Target, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the pod's port; an OSError worded as Go's dialer otherwise."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            return await asyncio.open_connection(target.ip, port)
    except TimeoutError:
        raise OSError(f"dial tcp4 {target.ip}:{port}: i/o timeout") from None
    except OSError as e:
        reason = os.strerror(e.errno).lower() if e.errno else str(e)
        raise OSError(f"dial tcp4 {target.ip}:{port}: connect: {reason}") from None


# -- SPDY ------------------------------------------------------------------------------

@dataclass
class Pair:
    data: Stream | None = None
    error: Stream | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


async def _pipe_stream(stream: Stream, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await stream.read():
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _pipe_socket(reader: asyncio.StreamReader, stream: Stream) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(32 * 1024):
            await stream.write(data)
    await stream.close()


async def forward_pair(target: Target, pair: Pair) -> None:
    assert pair.data is not None and pair.error is not None
    data, error = pair.data, pair.error
    try:
        port = parse_port(data.header("port"))
        reader, writer = await dial(target, port)
    except (PortError, OSError, TimeoutError) as e:
        text = str(e) or type(e).__name__
        if not isinstance(e, PortError):
            text = target.forwarding_error(
                int(data.header("port")) if data.header("port").isdigit() else 0, text)
        log.info("%s/%s: port-forward: %s", target.namespace, target.pod, text)
        await error.write(text.encode())
        await error.close()
        await data.close()
        return
    log.info("%s/%s: port-forward to %s:%d (request %s)", target.namespace, target.pod,
             target.ip, port, data.header("requestid"))
    try:
        await asyncio.gather(_pipe_stream(data, writer), _pipe_socket(reader, data))
    finally:
        writer.close()
        await error.close()


async def serve_spdy(spdy: SpdySession, target: Target) -> None:
    pairs: dict[str, Pair] = {}
    tasks: set[asyncio.Task] = set()

    def on_stream(stream: Stream) -> None:
        kind = stream.header("streamtype").lower()
        request = stream.header("requestid")
        if kind not in ("data", "error"):
            return
        pair = pairs.setdefault(request, Pair())
        setattr(pair, kind, stream)
        if pair.data is not None and pair.error is not None:
            pairs.pop(request, None)
            task = asyncio.create_task(forward_pair(target, pair), name="port-forward")
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    try:
        await spdy.serve(on_stream)
    finally:
        for task in list(tasks):
            task.cancel()
        await spdy.close()


# -- WebSocket channels ----------------------------------------------------------------

async def serve_channels(socket: WebSocket, target: Target, ports: list[int]) -> None:
    """One connection per requested port, for the life of the WebSocket."""
    writers: dict[int, asyncio.StreamWriter] = {}
    readers: list[asyncio.Task] = []

    async def from_pod(index: int, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(32 * 1024):
                await socket.send(bytes([2 * index]) + data)
        await socket.close()

    for index, port in enumerate(ports):
        prefix = struct.pack("<H", port)
        await socket.send(bytes([2 * index]) + prefix)
        await socket.send(bytes([2 * index + 1]) + prefix)
        try:
            reader, writer = await dial(target, port)
        except (OSError, TimeoutError) as e:
            await socket.send(bytes([2 * index + 1]) + target.forwarding_error(
                port, str(e) or type(e).__name__).encode())
            continue
        writers[index] = writer
        readers.append(asyncio.create_task(from_pod(index, reader)))
    try:
        while (message := await socket.receive()) is not None:
            if len(message) < 1 or message[0] % 2:
                continue
            found = writers.get(message[0] // 2)
            if found is not None and len(message) > 1:
                found.write(message[1:])
                await found.drain()
    finally:
        for task in readers:
            task.cancel()
        for writer in writers.values():
            writer.close()
        await socket.close()
