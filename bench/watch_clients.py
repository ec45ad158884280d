"""Many Kubernetes watch streams in one process, cheap enough not to be the bottleneck.

    python bench/watch_clients.py --port 8080 --path '/api/v1/namespaces/ns/pods?watch=true&...' \
        --watchers 25 --marker lag-

Each watcher is a raw HTTP/1.1 connection (asyncio streams, chunked decoding by hand).
The pod name is found in each line with a bytes search for `"name":"<marker>` - no
JSON parsing - and the first time.monotonic() a watcher read it is kept (one clock for
every process of the machine, like etcd_clients.py's reference watch).

Prints "ready" once every stream answered 200. Then on stdin: "mark" when the load
starts; "expect N" when it ended, to wait (at most 15 s) until every watcher saw N names;
or "stop". It then prints one JSON line: {"watchers": [{name: t}, ...], "cpu": process
CPU time / wall time from "mark" to the end of the load (near 1.0: this process was the
bottleneck), "errors": [...]}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

from etcd_clients import stdin_lines


class Watcher:
    def __init__(self, marker: bytes) -> None:
        self.needle = b'"name":"' + marker
        self.seen: dict[str, float] = {}
        self.error: str | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.expected: int | None = None
        self.complete = asyncio.Event()  # saw `expected` names

    async def open(self, port: int, path: str) -> asyncio.StreamReader:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Accept: application/json\r\n\r\n".encode())
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"watch answered {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        self.writer = writer
        return reader

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Chunked body -> lines -> the first time each marked name shows up."""
        pending = b""
        try:
            while size_line := await reader.readline():
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    return
                data = await reader.readexactly(size + 2)
                t = time.monotonic()
                pending += data[:-2]
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self.note(line, t)
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            self.error = f"{type(e).__name__}: {e}"

    def note(self, line: bytes, t: float) -> None:
        start = line.find(self.needle)
        if start < 0:
            return
        start += 8  # len('"name":"')
        name = line[start:line.index(b'"', start)].decode()
        self.seen.setdefault(name, t)
        if self.expected is not None and len(self.seen) >= self.expected:
            self.complete.set()


async def wait_for_count(watchers: list[Watcher], expected: int, timeout: float) -> None:
    for w in watchers:
        w.expected = expected
        if len(w.seen) >= expected:
            w.complete.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(w.complete.wait() for w in watchers)), timeout)


async def run(port: int, path: str, count: int, marker: str) -> dict[str, Any]:
    watchers = [Watcher(marker.encode()) for _ in range(count)]
    readers = await asyncio.gather(*(w.open(port, path) for w in watchers))
    tasks = [asyncio.create_task(w.read(r)) for w, r in zip(watchers, readers, strict=True)]
    print("ready", flush=True)
    wall, cpu = time.monotonic(), time.process_time()
    busy = 0.0
    async for line in stdin_lines():
        if line == "mark":  # the load starts
            wall, cpu = time.monotonic(), time.process_time()
            continue
        busy = (time.process_time() - cpu) / max(1e-9, time.monotonic() - wall)
        if line.startswith("expect "):
            await wait_for_count(watchers, int(line.split()[1]), timeout=15)
        break
    for task in tasks:
        task.cancel()
    for w in watchers:
        if w.writer is not None:
            w.writer.close()
    return {"watchers": [w.seen for w in watchers], "cpu": busy,
            "errors": [w.error for w in watchers if w.error]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--watchers", type=int, default=25)
    parser.add_argument("--marker", default="lag-")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.port, args.path, args.watchers, args.marker))),
          flush=True)


if __name__ == "__main__":
    main()
