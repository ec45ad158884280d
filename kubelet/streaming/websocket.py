"""WebSocket on a hijacked connection: the server handshake (RFC 6455) and wsproto's
sans-IO framing, as the kubelet's `wsstream` does for exec, attach and port-forward.

`negotiate` picks the subprotocol the way kube's wsstream does: the first one the client
offers (`Sec-WebSocket-Protocol`, in its order) that the server supports.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Mapping, Sequence

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NORMAL_CLOSURE = 1000


def offered_protocols(headers: Mapping[str, str]) -> list[str]:
    return [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")
            if p.strip()]


def negotiate(offered: Sequence[str], supported: Sequence[str]) -> str | None:
    for protocol in offered:
        if protocol in supported:
            return protocol
    return None


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def is_websocket(headers: Mapping[str, str]) -> bool:
    return headers.get("upgrade", "").lower() == "websocket"


def handshake_error(headers: Mapping[str, str]) -> str | None:
    """Why the handshake request is not a valid one, or None."""
    if headers.get("sec-websocket-version", "") != "13":
        return "unsupported WebSocket version (Sec-WebSocket-Version must be 13)"
    key = headers.get("sec-websocket-key", "")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError(key)
    except ValueError:
        return "invalid Sec-WebSocket-Key"
    return None


def switching_response(headers: Mapping[str, str], protocol: str) -> bytes:
    """The handshake's answer; `protocol` "" (none was asked for): no subprotocol header."""
    chosen = f"Sec-WebSocket-Protocol: {protocol}\r\n" if protocol else ""
    return (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept_key(headers['sec-websocket-key'])}\r\n"
            f"{chosen}\r\n").encode("latin-1")


class WebSocket:
    """Messages on an upgraded connection: `receive()` (None once closed), `send()`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.connection = Connection(ConnectionType.SERVER)
        self.messages: list[bytes] = []
        self.partial = bytearray()
        self.closed = False

    async def receive(self) -> bytes | None:
        """The next whole message (text as its UTF-8 bytes); None when the peer closed."""
        while not self.messages:
            if self.closed:
                return None
            data = await self.reader.read(64 * 1024)
            self.connection.receive_data(data or None)
            await self._handle_events()
            if not data:
                self.closed = True
        return self.messages.pop(0)

    async def _handle_events(self) -> None:
        for event in self.connection.events():
            if isinstance(event, BytesMessage | TextMessage):
                data = event.data if isinstance(event, BytesMessage) else event.data.encode()
                self.partial += data
                if event.message_finished:
                    self.messages.append(bytes(self.partial))
                    self.partial.clear()
            elif isinstance(event, Ping):
                await self._write(self.connection.send(event.response()))
            elif isinstance(event, CloseConnection):
                if self.connection.state is ConnectionState.REMOTE_CLOSING:
                    await self._write(self.connection.send(event.response()))
                self.closed = True

    async def send(self, data: bytes) -> None:
        if self.closed or self.connection.state is not ConnectionState.OPEN:
            return
        await self._write(self.connection.send(BytesMessage(data=data)))

    async def _write(self, data: bytes) -> None:
        if self.writer.is_closing():
            return
        self.writer.write(data)
        try:
            await self.writer.drain()
        except ConnectionError:
            self.closed = True

    async def close(self, code: int = NORMAL_CLOSURE, reason: str = "") -> None:
        if self.connection.state is ConnectionState.OPEN:
            await self._write(self.connection.send(CloseConnection(code=code, reason=reason)))
        self.closed = True
        self.writer.close()


class WebSocketBytes:
    """A byte stream carried in binary messages (kubectl's SPDY-over-WebSocket tunnel for
    port-forward): `reader` is fed from the messages, `write`+`drain` send one."""

    def __init__(self, socket: WebSocket) -> None:
        self.socket = socket
        self.reader = asyncio.StreamReader(limit=1 << 20)
        self.pending = bytearray()

    async def pump(self) -> None:
        while (message := await self.socket.receive()) is not None:
            self.reader.feed_data(message)
        self.reader.feed_eof()

    def write(self, data: bytes) -> None:
        self.pending += data

    async def drain(self) -> None:
        if self.pending:
            data, self.pending = bytes(self.pending), bytearray()
            await self.socket.send(data)

    def close(self) -> None:
        self.socket.writer.close()

    def is_closing(self) -> bool:
        return self.socket.writer.is_closing()
