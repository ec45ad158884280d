"""SPDY/3.1 framing, the server's half, as kubectl's spdystream peer expects it.

Frames (draft-mbelshe-httpbis-spdy-00 section 2.2): a control frame is
`1 | version(15) | type(16) | flags(8) | length(24) | data`, a data frame
`0 | stream-id(31) | flags(8) | length(24) | data`. Header blocks (SYN_STREAM, SYN_REPLY,
HEADERS) are `count(32)` then `len(32) name len(32) value` pairs, compressed by one zlib
stream per direction for the whole session, primed with the SPDY/3 dictionary and
sync-flushed after each block. The client opens every stream (SYN_STREAM); the server
answers each with an empty SYN_REPLY, as kube's httpstream/spdy connection does, and ends
its side of a stream with a FIN flag. spdystream does no flow control: WINDOW_UPDATE and
SETTINGS are read and ignored, PING is echoed.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger("kubelet.streaming")

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9)
FLAG_FIN = 0x01
MAX_DATA = 32 * 1024
MAX_FRAME = 0xFFFFFF
RST_CANCEL = 5
U32 = struct.Struct(">I")


def _dictionary() -> bytes:
    """The SPDY/3 header compression dictionary (section 2.6.10.1): length-prefixed
    header names and values, then a run of common strings."""
    words = ("options head post put delete trace accept accept-charset accept-encoding "
             "accept-language accept-ranges age allow authorization cache-control "
             "connection content-base content-encoding content-language content-length "
             "content-location content-md5 content-range content-type date etag expect "
             "expires from host if-match if-modified-since if-none-match if-range "
             "if-unmodified-since last-modified location max-forwards pragma "
             "proxy-authenticate proxy-authorization range referer retry-after server te "
             "trailer transfer-encoding upgrade user-agent vary via warning "
             "www-authenticate method get status").split()
    words += ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive",
              "origin"]
    tail = ("100101201202205206300302303304305306307402405406407408409410411412413414415416"
            "417502504505203 Non-Authoritative Information204 No Content301 Moved "
            "Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 "
            "Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar "
            "Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, "
            "Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
            "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,"
            "deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
    return b"".join(U32.pack(len(w)) + w.encode() for w in words) + tail.encode()


DICTIONARY = _dictionary()


class SpdyError(Exception):
    """A peer that does not speak SPDY/3.1 as expected: the session ends."""


def control_frame(kind: int, payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, data: bytes, flags: int = 0) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data


def encode_headers(headers: dict[str, list[str]]) -> bytes:
    out = [U32.pack(len(headers))]
    for name, values in headers.items():
        value = "\x00".join(values).encode()
        out += [U32.pack(len(name)), name.lower().encode(), U32.pack(len(value)), value]
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, list[str]]:
    try:
        (count,), at = U32.unpack_from(block), 4
        headers: dict[str, list[str]] = {}
        for _ in range(count):
            (size,) = U32.unpack_from(block, at)
            name = block[at + 4:at + 4 + size].decode()
            at += 4 + size
            (size,) = U32.unpack_from(block, at)
            value = block[at + 4:at + 4 + size].decode()
            at += 4 + size
            if at > len(block):
                raise SpdyError("truncated header block")
            headers.setdefault(name.lower(), []).extend(value.split("\x00"))
        return headers
    except (struct.error, UnicodeDecodeError) as e:
        raise SpdyError(f"malformed header block: {e}") from None


class ByteSink(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def is_closing(self) -> bool: ...


@dataclass
class Stream:
    """One client-opened stream: `read()` its data (b"" at its end), `write`/`close` ours."""

    session: SpdySession
    id: int
    headers: dict[str, list[str]]
    incoming: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    remote_closed: bool = False
    local_closed: bool = False

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower()) or [""]
        return values[0]

    async def read(self) -> bytes:
        if self.remote_closed and self.incoming.empty():
            return b""
        return await self.incoming.get()

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), MAX_DATA):
            await self.session.send(data_frame(self.id, data[start:start + MAX_DATA]))

    async def close(self) -> None:
        if not self.local_closed:
            self.local_closed = True
            await self.session.send(data_frame(self.id, b"", FLAG_FIN))

    def _remote_end(self) -> None:
        if not self.remote_closed:
            self.remote_closed = True
            self.incoming.put_nowait(b"")


class SpdySession:
    """The server side of one SPDY/3.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: ByteSink) -> None:
        self.reader = reader
        self.writer = writer
        self.compress = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, 8,
                                         zlib.Z_DEFAULT_STRATEGY, zdict=DICTIONARY)
        self.decompress = zlib.decompressobj(zdict=DICTIONARY)
        self.streams: dict[int, Stream] = {}
        self.closed = False

    async def send(self, frame: bytes) -> None:
        if self.closed or self.writer.is_closing():
            return
        self.writer.write(frame)
        try:
            await self.writer.drain()
        except ConnectionError:
            self.closed = True

    def _header_block(self, headers: dict[str, list[str]]) -> bytes:
        return (self.compress.compress(encode_headers(headers))
                + self.compress.flush(zlib.Z_SYNC_FLUSH))

    def _read_headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            return decode_headers(self.decompress.decompress(block))
        except zlib.error as e:
            raise SpdyError(f"header block does not decompress: {e}") from None

    async def serve(self, on_stream: Callable[[Stream], Awaitable[None] | None]) -> None:
        """Read frames until the peer goes away; `on_stream` for each new stream (after its
        SYN_REPLY is sent)."""
        try:
            while True:
                try:
                    head = await self.reader.readexactly(8)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                first, second = struct.unpack(">II", head)
                flags, length = second >> 24, second & 0xFFFFFF
                payload = await self.reader.readexactly(length) if length else b""
                if first & 0x80000000:
                    await self._control(first, flags, payload, on_stream)
                else:
                    self._data(first & 0x7FFFFFFF, flags, payload)
        except asyncio.IncompleteReadError:
            return
        except SpdyError as e:  # the peer does not speak SPDY/3.1: the session ends
            log.info("SPDY session ended: %s", e)
            await self.close()
        finally:
            for stream in self.streams.values():
                stream._remote_end()

    async def _control(self, first: int, flags: int, payload: bytes,
                       on_stream: Callable[[Stream], Awaitable[None] | None]) -> None:
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("short SYN_STREAM")
            stream_id = U32.unpack_from(payload)[0] & 0x7FFFFFFF
            stream = Stream(self, stream_id, self._read_headers(payload[10:]))
            self.streams[stream_id] = stream
            if flags & FLAG_FIN:
                stream._remote_end()
            await self.send(control_frame(
                SYN_REPLY, U32.pack(stream_id) + self._header_block({})))
            started = on_stream(stream)
            if started is not None:
                await started
        elif kind == RST_STREAM and len(payload) >= 4:
            stream_id = U32.unpack_from(payload)[0] & 0x7FFFFFFF
            if (found := self.streams.get(stream_id)) is not None:
                found._remote_end()
                found.local_closed = True
        elif kind == PING:
            await self.send(control_frame(PING, payload))
        elif kind == GOAWAY:
            raise asyncio.IncompleteReadError(b"", None)
        elif kind == HEADERS and len(payload) >= 4:
            self._read_headers(payload[4:])  # keeps the zlib stream in step
        # SETTINGS, WINDOW_UPDATE, and anything newer: nothing to do

    def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        stream = self.streams.get(stream_id)
        if stream is None or stream.remote_closed:
            return
        if payload:
            stream.incoming.put_nowait(payload)
        if flags & FLAG_FIN:
            stream._remote_end()

    async def reset(self, stream: Stream) -> None:
        stream.local_closed = True
        await self.send(control_frame(RST_STREAM, U32.pack(stream.id) + U32.pack(RST_CANCEL)))

    async def close(self) -> None:
        if not self.closed:
            await self.send(control_frame(GOAWAY, U32.pack(0) + U32.pack(0)))
            self.closed = True
        self.writer.close()
