"""The streaming decisions and framings, without processes: option parsing (apiserver and
kubelet), SPDY frames and header blocks, WebSocket handshakes, Docker's multiplexed
frames, exit statuses. Tables in the style of kube's `*_test.go`."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import zlib
from typing import Any

import pytest
from starlette.requests import Request

from apiserver import streaming
from common import errors
from kubelet.docker_stream import hijack_request, split_frames
from kubelet.streaming import portforward, remotecommand, spdy
from kubelet.streaming.handlers import StreamRequestError, choose_protocol
from kubelet.streaming.websocket import accept_key, handshake_error, negotiate

# -- the apiserver: PodExecOptions / PodPortForwardOptions -> the kubelet's parameters ----


@pytest.mark.parametrize(("subresource", "query", "expected"), [
    ("exec", {"command": ["echo", "hi"], "stdout": ["true"]},
     [("output", "1"), ("command", "echo"), ("command", "hi")]),
    ("exec", {"command": ["sh"], "stdin": ["1"], "stdout": ["true"], "stderr": ["false"],
              "tty": ["True"], "container": ["main"]},
     [("input", "1"), ("output", "1"), ("tty", "1"), ("command", "sh")]),
    ("attach", {"stdin": ["true"], "stdout": ["true"], "stderr": ["true"]},
     [("input", "1"), ("output", "1"), ("error", "1")]),
    ("portforward", {"ports": ["80", "8080,9090"]},
     [("port", "80"), ("port", "8080"), ("port", "9090")]),
    ("portforward", {}, []),  # SPDY and the tunnel name their ports per stream
])
def test_kubelet_query(subresource: str, query: dict[str, list[str]],
                       expected: list[tuple[str, str]]) -> None:
    assert streaming.kubelet_query(subresource, query) == expected


@pytest.mark.parametrize(("subresource", "query", "message"), [
    ("exec", {"command": ["ls"]}, "you must specify at least 1 of stdin, stdout, stderr"),
    ("exec", {"stdout": ["true"]}, "you must specify at least 1 command"),
    ("exec", {"command": ["ls"], "stdout": ["yes"]},
     'invalid value for query parameter "stdout": "yes" is not a boolean'),
    ("exec", {"command": ["ls"], "stdout": ["true"], "ports": ["80"]},
     'unknown query parameter "ports" for pods/exec'),
    ("attach", {"command": ["ls"], "stdout": ["true"]},
     'unknown query parameter "command" for pods/attach'),
    ("portforward", {"ports": ["http"]}, 'invalid port "http"'),
    ("portforward", {"ports": ["0"]}, 'invalid port "0"'),
    ("portforward", {"ports": ["65536"]}, 'invalid port "65536"'),
    ("portforward", {"ports": ["-1"]}, 'invalid port "-1"'),
    ("portforward", {"port": ["80"]}, 'unknown query parameter "port"'),
])
def test_kubelet_query_refuses(subresource: str, query: dict[str, list[str]],
                               message: str) -> None:
    with pytest.raises(errors.BadRequest) as raised:
        streaming.kubelet_query(subresource, query)
    assert raised.value.message.startswith(message), raised.value.message


def test_upstream_request_carries_only_the_upgrade_headers_and_quoted_paths() -> None:
    pod = {"metadata": {"name": "web", "namespace": "default"}}
    path = streaming.kubelet_path("exec", pod, "a/../b")
    assert path == "/exec/default/web/a%2F..%2Fb"
    request = streaming.upstream_request(
        "GET", "127.0.0.1:10250", path, [("command", "sh -c 'x'"), ("output", "1")],
        [("Upgrade", "websocket"), ("Authorization", "Bearer secret"),
         ("Sec-WebSocket-Protocol", "v5.channel.k8s.io"), ("X-Evil", "1"),
         ("Sec-WebSocket-Key", "a\r\nX-Injected: 1")]).decode()
    assert request.startswith("GET /exec/default/web/a%2F..%2Fb?command=sh+-c+%27x%27"
                              "&output=1 HTTP/1.1\r\n")
    assert "Authorization" not in request and "X-Evil" not in request
    assert "X-Injected" not in request
    assert "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n" in request


@pytest.mark.parametrize(("headers", "upgrade"), [
    ({"connection": "Upgrade", "upgrade": "SPDY/3.1"}, True),
    ({"connection": "keep-alive, Upgrade", "upgrade": "websocket"}, True),
    ({"connection": "keep-alive", "upgrade": "websocket"}, False),
    ({"connection": "Upgrade"}, False),
    ({}, False),
])
def test_is_upgrade(headers: dict[str, str], upgrade: bool) -> None:
    assert streaming.is_upgrade(headers) is upgrade


# -- the kubelet: remotecommand options, statuses, resizes -------------------------------

@pytest.mark.parametrize(("query", "exec_", "expected"), [
    ({"command": ["ls"], "output": ["1"]}, True,
     remotecommand.Options(stdin=False, stdout=True, stderr=False, tty=False,
                           command=("ls",))),
    # a TTY is one stream: stderr is dropped, as the kubelet does
    ({"command": ["sh"], "input": ["1"], "output": ["1"], "error": ["1"], "tty": ["1"]}, True,
     remotecommand.Options(stdin=True, stdout=True, stderr=False, tty=True, command=("sh",))),
    ({"input": ["1"], "output": ["1"]}, False,
     remotecommand.Options(stdin=True, stdout=True, stderr=False, tty=False)),
])
def test_parse_options(query: dict[str, list[str]], exec_: bool,
                       expected: remotecommand.Options) -> None:
    assert remotecommand.parse_options(query, exec_=exec_) == expected


@pytest.mark.parametrize(("query", "message"), [
    ({"command": ["ls"]}, "you must specify at least 1 of stdin, stdout, stderr"),
    ({"output": ["1"]}, "you must specify at least 1 command"),
])
def test_parse_options_refuses(query: dict[str, list[str]], message: str) -> None:
    with pytest.raises(remotecommand.OptionsError, match=message):
        remotecommand.parse_options(query, exec_=True)


def test_exit_statuses_are_kubes() -> None:
    assert remotecommand.exit_status(0, ["true"]) == {"metadata": {}, "status": "Success"}
    assert remotecommand.exit_status(3, ["sh", "-c", "exit 3"]) == {
        "metadata": {}, "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command "
                   "[sh -c exit 3], exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}


@pytest.mark.parametrize(("data", "sizes", "rest"), [
    (b'{"Width":80,"Height":24}\n', [(80, 24)], b""),
    (b'{"Width":80,"Height":24}\n{"Width":100,"Height":40}\n', [(80, 24), (100, 40)], b""),
    (b'{"Width":80,"Height":24}\n{"Width":1', [(80, 24)], b'{"Width":1'),
    (b'{"Width":0,"Height":24}', [], b""),  # not a size: skipped
])
def test_parse_sizes(data: bytes, sizes: list[tuple[int, int]], rest: bytes) -> None:
    buffer = bytearray(data)
    assert remotecommand.parse_sizes(buffer) == sizes
    assert bytes(buffer).strip() == rest


@pytest.mark.parametrize(("text", "port", "message"), [
    ("80", 80, None),
    ("65535", 65535, None),
    ("0", None, 'port "0" must be > 0'),
    ("65536", None, 'unable to parse "65536" as a port'),
    ("http", None, 'unable to parse "http" as a port'),
    ("+80", None, 'unable to parse "+80" as a port'),
])
def test_parse_port(text: str, port: int | None, message: str | None) -> None:
    if message is None:
        assert portforward.parse_port(text) == port
    else:
        with pytest.raises(portforward.PortError, match=re.escape(message)):
            portforward.parse_port(text)


# -- Docker ------------------------------------------------------------------------------

def test_docker_frames_split_on_their_headers() -> None:
    buffer = bytearray(struct.pack(">BxxxI", 1, 3) + b"out" + struct.pack(">BxxxI", 2, 3)
                       + b"err" + struct.pack(">BxxxI", 1, 5) + b"par")
    assert split_frames(buffer) == [(1, b"out"), (2, b"err")]
    assert bytes(buffer) == struct.pack(">BxxxI", 1, 5) + b"par"


def test_hijack_request_keeps_the_command_inside_json() -> None:
    request = hijack_request("/exec/abc/start", {"Cmd": ['x"\r\n\r\nGET /', "y"]})
    head, _, body = request.partition(b"\r\n\r\n")
    assert json.loads(body) == {"Cmd": ['x"\r\n\r\nGET /', "y"]}
    assert b"Upgrade: tcp" in head and f"Content-Length: {len(body)}".encode() in head


# -- WebSocket ---------------------------------------------------------------------------

def test_accept_key_is_rfc_6455s() -> None:
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize(("offered", "chosen"), [
    (["v5.channel.k8s.io", "v4.channel.k8s.io"], "v5.channel.k8s.io"),
    (["v4.channel.k8s.io"], "v4.channel.k8s.io"),
    (["base64.channel.k8s.io"], None),
])
def test_negotiate_takes_the_clients_first_supported(offered: list[str],
                                                     chosen: str | None) -> None:
    assert negotiate(offered, remotecommand.WEBSOCKET_PROTOCOLS) == chosen


@pytest.mark.parametrize(("headers", "problem"), [
    ({"sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}, None),
    ({"sec-websocket-version": "8", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="},
     "unsupported WebSocket version"),
    ({"sec-websocket-version": "13", "sec-websocket-key": "short"}, "invalid Sec-WebSocket-Key"),
])
def test_handshake_error(headers: dict[str, str], problem: str | None) -> None:
    found = handshake_error(headers)
    assert (found is None) if problem is None else (found or "").startswith(problem)


# -- SPDY --------------------------------------------------------------------------------

def test_spdy_dictionary_is_the_specs() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_spdy_header_blocks_round_trip() -> None:
    headers = {"streamtype": ["data"], "port": ["80"], "multi": ["a", "b"]}
    assert spdy.decode_headers(spdy.encode_headers(headers)) == headers


@pytest.mark.parametrize("block", [b"\x00\x00", b"\x00\x00\x00\x01\x00\x00\x00\x09ab"])
def test_spdy_malformed_header_blocks_are_refused(block: bytes) -> None:
    with pytest.raises(spdy.SpdyError):
        spdy.decode_headers(block)


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def client_syn_stream(compress: Any, stream_id: int, headers: dict[str, list[str]],
                      flags: int = 0) -> bytes:
    block = compress.compress(spdy.encode_headers(headers)) + compress.flush(zlib.Z_SYNC_FLUSH)
    return spdy.control_frame(spdy.SYN_STREAM, struct.pack(">IIH", stream_id, 0, 0) + block,
                              flags)


async def test_spdy_session_replies_to_streams_and_carries_their_data() -> None:
    reader = asyncio.StreamReader()
    sink = Sink()
    session = spdy.SpdySession(reader, sink)
    compress = zlib.compressobj(zdict=spdy.DICTIONARY)
    reader.feed_data(client_syn_stream(compress, 1, {"streamtype": ["stdin"]}))
    reader.feed_data(client_syn_stream(compress, 3, {"streamtype": ["error"]}))
    reader.feed_data(spdy.data_frame(1, b"hello"))
    reader.feed_data(spdy.data_frame(1, b"", spdy.FLAG_FIN))
    reader.feed_data(spdy.control_frame(spdy.PING, struct.pack(">I", 7)))
    reader.feed_eof()
    seen: list[spdy.Stream] = []
    await session.serve(seen.append)
    assert [(s.id, s.header("streamType")) for s in seen] == [(1, "stdin"), (3, "error")]
    assert [await seen[0].read(), await seen[0].read()] == [b"hello", b""]
    # two SYN_REPLYs (empty header blocks) and the PING echoed
    frames, data = [], bytes(sink.data)
    while data:
        first, second = struct.unpack(">II", data[:8])
        length = second & 0xFFFFFF
        frames.append((first & 0xFFFF, data[8:8 + length]))
        data = data[8 + length:]
    assert [kind for kind, _ in frames] == [spdy.SYN_REPLY, spdy.SYN_REPLY, spdy.PING]
    decompress = zlib.decompressobj(zdict=spdy.DICTIONARY)
    assert spdy.decode_headers(decompress.decompress(frames[0][1][4:])) == {}
    assert frames[2][1] == struct.pack(">I", 7)


# -- the kubelet's protocol negotiation ------------------------------------------------

def request_with(headers: list[tuple[str, str]]) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/exec/ns/pod/c",
                    "query_string": b"", "headers": [(k.lower().encode(), v.encode())
                                                     for k, v in headers]})


WS = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
      ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
SPDY_UPGRADE = [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1")]


@pytest.mark.parametrize(("headers", "chosen"), [
    ([*WS, ("Sec-WebSocket-Protocol", "v5.channel.k8s.io, v4.channel.k8s.io")],
     ("websocket", "v5.channel.k8s.io")),
    ([*WS, ("Sec-WebSocket-Protocol", "v4.channel.k8s.io")], ("websocket", "v4.channel.k8s.io")),
    (WS, ("websocket", "")),  # none named: v1's channels
    ([*SPDY_UPGRADE, ("X-Stream-Protocol-Version", "v5.channel.k8s.io"),
      ("X-Stream-Protocol-Version", "v4.channel.k8s.io")], ("spdy", "v4.channel.k8s.io")),
])
def test_choose_protocol(headers: list[tuple[str, str]], chosen: tuple[str, str]) -> None:
    assert choose_protocol(request_with(headers), websocket=remotecommand.WEBSOCKET_PROTOCOLS,
                           spdy=remotecommand.SPDY_PROTOCOLS) == chosen


@pytest.mark.parametrize(("headers", "code", "message"), [
    ([*WS, ("Sec-WebSocket-Protocol", "base64.channel.k8s.io")], 400,
     "requested protocol(s) are not supported: ['base64.channel.k8s.io']"),
    ([*WS[:3], ("Sec-WebSocket-Key", "x"), ("Sec-WebSocket-Protocol", "v5.channel.k8s.io")],
     400, "invalid Sec-WebSocket-Key"),
    ([*SPDY_UPGRADE, ("X-Stream-Protocol-Version", "v9.channel.k8s.io")], 403,
     "unable to upgrade: unable to negotiate protocol: client supports "
     "['v9.channel.k8s.io']"),
    ([], 400, "Upgrade request required"),
])
def test_choose_protocol_refuses(headers: list[tuple[str, str]], code: int,
                                 message: str) -> None:
    with pytest.raises(StreamRequestError) as raised:
        choose_protocol(request_with(headers), websocket=remotecommand.WEBSOCKET_PROTOCOLS,
                        spdy=remotecommand.SPDY_PROTOCOLS)
    assert raised.value.status_code == code
    assert raised.value.message.startswith(message), raised.value.message


async def test_a_peer_that_does_not_speak_spdy_3_ends_the_session() -> None:
    reader = asyncio.StreamReader()
    sink = Sink()
    reader.feed_data(struct.pack(">HHI", 0x8000 | 2, spdy.PING, 4) + b"\0\0\0\1")  # SPDY/2
    seen: list[spdy.Stream] = []
    await spdy.SpdySession(reader, sink).serve(seen.append)
    assert seen == [] and sink.closed
    first, _ = struct.unpack(">II", bytes(sink.data[:8]))
    assert first & 0xFFFF == spdy.GOAWAY
