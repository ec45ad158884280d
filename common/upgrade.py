"""Taking over a connection after `101 Switching Protocols`, for exec, attach and port-forward.

uvicorn speaks WebSocket upgrades through ASGI only, and answers any other upgrade
(`Upgrade: SPDY/3.1`, which kubectl uses with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false and
older kubectls always) with a warning and a dropped body. The streaming sub-resources need
the raw byte stream for both: kube-apiserver's UpgradeAwareHandler hijacks the connection
and copies bytes, and the kubelet's streaming server runs SPDY or WebSocket framing on it.

The least invasive sound way found: a small subclass of uvicorn's own httptools protocol
(`HijackMixin`). An upgrade request (of any kind) stays an ordinary ASGI `http` request, so
the same authentication, authorization and routing code sees it as any other request; the
protocol adds one ASGI scope extension, `scope["extensions"]["kubelite.hijack"]`, a
function the app calls once it has decided to switch protocols. It hands the app the
connection as an asyncio (StreamReader, StreamWriter) pair (any bytes the client sent after
its headers first), and marks uvicorn's request cycle finished, so uvicorn neither writes a
response nor closes the connection for it. An app that does not call it answers normally
(a Status error): the connection is then closed after that response, since the client
asked for another protocol on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from common.tls import TLSHttpToolsProtocol

HIJACK = "kubelite.hijack"
READ_LIMIT = 1 << 20

Hijack = Callable[[], tuple[asyncio.StreamReader, asyncio.StreamWriter]]


def hijacker(scope: Mapping[str, Any]) -> Hijack | None:
    """The scope's hijack function: None when the server cannot hand the connection over
    (a request without an Upgrade header, or another ASGI server)."""
    found = (scope.get("extensions") or {}).get(HIJACK)
    return found if callable(found) else None


class HijackMixin:
    """uvicorn's httptools protocol, with upgrade requests handed to the app as HTTP
    requests that can take the connection over."""

    _early: bytes | None = None

    def data_received(self, data: bytes) -> None:
        proto: Any = self
        if self._early is not None:  # upgrading: bytes for whoever takes the connection
            self._early += data
            return
        proto._unset_keepalive_if_required()
        try:
            proto.parser.feed_data(data)
        except httptools.HttpParserError:
            proto.logger.warning("Invalid HTTP request received.")
            proto.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade as e:
            offset = e.args[0] if e.args and isinstance(e.args[0], int) else len(data)
            self._early = data[offset:]

    def _should_upgrade(self) -> bool:
        return False  # never uvicorn's WebSocket protocol: the app decides, below

    def on_headers_complete(self) -> None:
        proto: Any = self
        super().on_headers_complete()  # type: ignore[misc]
        if proto._get_upgrade() is None or proto.cycle is None:
            return
        proto.cycle.keep_alive = False  # answered without switching: closed after it
        extensions = proto.scope.setdefault("extensions", {})
        extensions[HIJACK] = self._hijack

    def _hijack(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        proto: Any = self
        cycle = proto.cycle
        cycle.disconnected = True  # uvicorn writes nothing more for this request
        cycle.response_started = True
        proto.connections.discard(proto)
        proto._unset_keepalive_if_required()
        transport: asyncio.Transport = proto.transport
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._early:
            reader.feed_data(self._early)
        self._early = b""
        transport.resume_reading()
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


class HijackHttpToolsProtocol(HijackMixin, HttpToolsProtocol):
    """The plain-HTTP port's protocol."""


class HijackTLSHttpToolsProtocol(HijackMixin, TLSHttpToolsProtocol):
    """The HTTPS port's protocol (client certificates in the scope, as TLSHttpToolsProtocol)."""
