"""exec and attach: the kubelet's remotecommand server (`pkg/kubelet/cri/streaming/
remotecommand`), on Docker's hijacked exec and attach streams.

Two framings carry the same five streams (stdin, stdout, stderr, error, resize):
- WebSocket, `v5.channel.k8s.io` (kubectl 1.37) .. `v4.channel.k8s.io` (the Python
  client's `stream()`): one binary message per write, its first byte the channel (stdin 0,
  stdout 1, stderr 2, error 3, resize 4); v5 adds `255, channel` to close one (stdin's EOF).
- SPDY/3.1 (`X-Stream-Protocol-Version: v4.channel.k8s.io` .. v2): one stream per kind,
  named by its `streamType` header, opened by the client.

The error stream carries, last, a metav1.Status: Success, or for a non-zero exit kube's
`NonZeroExitCode` with the code in `details.causes` (kubectl prints `command terminated
with exit code 3` and exits 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelet.docker_stream import STDERR, DockerStreamError, DockerStreams, HijackedStream
from kubelet.streaming.spdy import SpdySession, Stream
from kubelet.streaming.websocket import WebSocket

log = logging.getLogger("kubelet.streaming")

STDIN, STDOUT, ERROR, RESIZE, CLOSE = 0, 1, 3, 4, 255
# "": a client that names no subprotocol gets channel.k8s.io (v1), as from the kubelet
WEBSOCKET_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                       "v2.channel.k8s.io", "channel.k8s.io", "")
SPDY_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io",
                  "channel.k8s.io")
STREAM_TYPES = {"stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "error": ERROR,
                "resize": RESIZE}
STREAM_WAIT_SECONDS = 30.0


class OptionsError(Exception):
    """A bad request: the kubelet answers 400 with this text."""


@dataclass(frozen=True)
class Options:
    """kube's remotecommand.Options."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool
    command: tuple[str, ...] = ()


def _flag(values: Mapping[str, Sequence[str]], name: str) -> bool:
    return (list(values.get(name) or [""])[-1]).lower() in ("1", "true")


def parse_options(values: Mapping[str, Sequence[str]], *, exec_: bool) -> Options:
    """kubelet's NewOptions, from the parameters the apiserver sends it (`input`, `output`,
    `error`, `tty` = 1, `command` repeated): stderr is dropped with a TTY (one stream then)."""
    tty, stdin = _flag(values, "tty"), _flag(values, "input")
    stdout, stderr = _flag(values, "output"), _flag(values, "error")
    if tty and stderr:
        stderr = False
    if not (stdin or stdout or stderr):
        raise OptionsError("you must specify at least 1 of stdin, stdout, stderr")
    command = tuple(values.get("command") or ())
    if exec_ and not command:
        raise OptionsError("you must specify at least 1 command")
    return Options(stdin=stdin, stdout=stdout, stderr=stderr, tty=tty, command=command)


def exit_status(code: int | None, command: Sequence[str]) -> dict[str, Any]:
    """What the error stream says at the end (kube's remotecommand v4 status)."""
    if code in (0, None):
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing "
                       f"command [{' '.join(command)}], exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def error_status(message: str) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "message": message,
            "reason": "InternalError", "code": 500}


def parse_sizes(buffer: bytearray) -> list[tuple[int, int]]:
    """(width, height) of each whole JSON TerminalSize at the start of `buffer`."""
    decoder = json.JSONDecoder()
    sizes = []
    text = buffer.decode(errors="replace")
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            break
        at = end
        if isinstance(value, dict):
            width, height = value.get("Width"), value.get("Height")
            if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
                sizes.append((width, height))
    del buffer[:len(text[:at].encode())]
    return sizes


@dataclass
class Session:
    """The streams of one exec/attach, whatever carries them."""

    write: Callable[[int, bytes], Awaitable[None]]  # stdout 1, stderr 2, error 3
    finish: Callable[[], Awaitable[None]]
    # v4 and v5 end with a Status; v1..v3 with an error's text, or nothing on success
    status_json: bool = True
    stdin: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)  # b"": EOF
    resizes: asyncio.Queue[tuple[int, int]] = field(default_factory=asyncio.Queue)
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # the client went away

    async def end(self, status: dict[str, Any]) -> None:
        """The final status on the error stream (unless the client is gone), then close."""
        if not self.gone.is_set():
            if self.status_json:
                await self.write(ERROR, json.dumps(status).encode())
            elif status.get("status") != "Success":
                await self.write(ERROR, str(status.get("message") or "").encode())
        await self.finish()


# -- the two framings ----------------------------------------------------------------

async def websocket_session(socket: WebSocket, protocol: str) -> tuple[Session, asyncio.Task]:
    """A Session on WebSocket channels, and the task reading the client's messages."""

    async def write(channel: int, data: bytes) -> None:
        await socket.send(bytes([channel]) + data)

    async def finish() -> None:
        await socket.close()

    session = Session(write=write, finish=finish,
                      status_json=protocol in ("v5.channel.k8s.io", "v4.channel.k8s.io"))
    resize_buffer = bytearray()

    async def read() -> None:
        while (message := await socket.receive()) is not None:
            if not message:
                continue
            channel, data = message[0], message[1:]
            if channel == STDIN and data:
                session.stdin.put_nowait(data)
            elif channel == RESIZE:
                resize_buffer.extend(data)
                for size in parse_sizes(resize_buffer):
                    session.resizes.put_nowait(size)
            elif channel == CLOSE and data[:1] == bytes([STDIN]) and protocol.startswith("v5"):
                session.stdin.put_nowait(b"")
        session.stdin.put_nowait(b"")
        session.gone.set()

    return session, asyncio.create_task(read(), name="ws-read")


async def spdy_session(spdy: SpdySession, options: Options,
                       protocol: str) -> tuple[Session, asyncio.Task]:
    """A Session on SPDY streams: waits for those the options ask for (and error, and
    resize with a TTY), as the kubelet's waitForStreams does."""
    streams: dict[int, Stream] = {}
    arrived = asyncio.Event()
    wanted = {ERROR} | ({STDIN} if options.stdin else set()) | (
        {STDOUT} if options.stdout else set()) | ({STDERR} if options.stderr else set())
    if options.tty and protocol != "v2.channel.k8s.io":  # v3 added the resize stream
        wanted.add(RESIZE)

    def on_stream(stream: Stream) -> None:
        kind = STREAM_TYPES.get(stream.header("streamtype").lower())
        if kind is not None:
            streams[kind] = stream
        if wanted <= set(streams):
            arrived.set()

    reader = asyncio.create_task(spdy.serve(on_stream), name="spdy-read")
    try:
        async with asyncio.timeout(STREAM_WAIT_SECONDS):
            await arrived.wait()
    except TimeoutError:
        reader.cancel()
        await spdy.close()
        raise OptionsError("timed out waiting for client to create streams") from None

    async def write(channel: int, data: bytes) -> None:
        stream = streams.get(channel)
        if stream is not None:
            await stream.write(data)

    async def finish() -> None:
        for stream in streams.values():
            await stream.close()
        await spdy.close()
        reader.cancel()

    session = Session(write=write, finish=finish, status_json=protocol == "v4.channel.k8s.io")
    reader.add_done_callback(lambda _: session.gone.set())

    async def pump(stream: Stream, into: Callable[[bytes], None]) -> None:
        while data := await stream.read():
            into(data)

    async def inputs() -> None:
        resize_buffer = bytearray()

        def resized(data: bytes) -> None:
            resize_buffer.extend(data)
            for size in parse_sizes(resize_buffer):
                session.resizes.put_nowait(size)

        jobs = []
        if STDIN in streams:
            jobs.append(pump(streams[STDIN], session.stdin.put_nowait))
        if RESIZE in streams:
            jobs.append(pump(streams[RESIZE], resized))
        await asyncio.gather(*jobs)
        session.stdin.put_nowait(b"")

    async def reading() -> None:
        await asyncio.gather(reader, inputs())

    return session, asyncio.create_task(reading(), name="spdy-inputs")


# -- running it ----------------------------------------------------------------------

DRAIN_SECONDS = 1.0

async def _feed_stdin(session: Session, hijacked: HijackedStream, *, close: bool) -> None:
    while data := await session.stdin.get():
        await hijacked.write(data)
    if close:
        hijacked.close_stdin()


async def _resize(session: Session, resize: Callable[[int, int], Awaitable[None]]) -> None:
    while True:
        width, height = await session.resizes.get()
        with contextlib.suppress(DockerStreamError):
            await resize(width, height)


async def _copy_output(session: Session, hijacked: HijackedStream) -> None:
    async for stream, data in hijacked.output():
        await session.write(stream, data)


async def run(session: Session, hijacked: HijackedStream, options: Options,
              resize: Callable[[int, int], Awaitable[None]], *, close_stdin: bool,
              exited: Awaitable[None] | None = None) -> None:
    """Copy stdin in and output out until the process closes its output. `close_stdin`:
    whether the client's end of stdin closes the process's (Docker ends an attach whose
    stdin closes, unless the container's stdin is `stdinOnce`: it then sees the EOF).
    `exited`: done when the process is gone; its output then gets DRAIN_SECONDS to end
    (Docker can keep an attach open that began as the container was exiting)."""
    helpers = [asyncio.create_task(_resize(session, resize), name="resize"),
               asyncio.create_task(session.gone.wait(), name="gone")]
    if options.stdin:
        helpers.append(asyncio.create_task(_feed_stdin(session, hijacked, close=close_stdin),
                                           name="stdin"))
    gone = helpers[1]
    ending = {gone}
    if exited is not None:
        helpers.append(process_exit := asyncio.ensure_future(exited))
        ending.add(process_exit)
    output = asyncio.create_task(_copy_output(session, hijacked), name="output")
    try:
        # a client that goes away ends the session (Docker closes the process's streams)
        done, _ = await asyncio.wait({output, *ending}, return_when=asyncio.FIRST_COMPLETED)
        if output not in done and gone not in done:
            await asyncio.wait({output, gone}, timeout=DRAIN_SECONDS)
        if not output.done():
            output.cancel()
            await asyncio.gather(output, return_exceptions=True)
        else:
            await output
    finally:
        output.cancel()
        for task in helpers:
            task.cancel()
        hijacked.close()


async def serve_exec(session: Session, docker: DockerStreams, container_id: str,
                     options: Options, *, where: str) -> None:
    try:
        exec_id = await docker.create_exec(container_id, options.command, stdin=options.stdin,
                                           stdout=options.stdout, stderr=options.stderr,
                                           tty=options.tty)
        hijacked = await docker.start_exec(exec_id, tty=options.tty)
    except (DockerStreamError, OSError) as e:
        message = e.message if isinstance(e, DockerStreamError) else str(e)
        log.info("%s: exec %s failed: %s", where, list(options.command), message)
        await session.end(error_status(message))
        return
    log.info("%s: exec %s (tty=%s, stdin=%s)", where, list(options.command), options.tty,
             options.stdin)

    async def resize(width: int, height: int) -> None:
        await docker.resize_exec(exec_id, width=width, height=height)

    await run(session, hijacked, options, resize, close_stdin=True)
    if session.gone.is_set():
        log.info("%s: exec %s: the client went away", where, list(options.command))
        await session.finish()
        return
    code = await docker.exec_exit_code(exec_id)
    log.info("%s: exec %s exited with %s", where, list(options.command), code)
    await session.end(exit_status(code, options.command))


async def serve_attach(session: Session, docker: DockerStreams, container_id: str,
                       options: Options, *, where: str, stdin_once: bool) -> None:
    try:
        hijacked = await docker.attach(container_id, stdin=options.stdin,
                                       stdout=options.stdout, stderr=options.stderr,
                                       tty=options.tty)
    except (DockerStreamError, OSError) as e:
        message = e.message if isinstance(e, DockerStreamError) else str(e)
        await session.end(error_status(message))
        return
    log.info("%s: attached (tty=%s, stdin=%s)", where, options.tty, options.stdin)

    async def resize(width: int, height: int) -> None:
        await docker.resize_container(container_id, width=width, height=height)

    await run(session, hijacked, options, resize, close_stdin=stdin_once,
              exited=docker.wait_not_running(container_id))
    log.info("%s: attach ended", where)
    await session.end(exit_status(0, ()))
