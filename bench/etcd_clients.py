"""etcd clients for bench/bench_apiserver.py, each run as its own process.

    python bench/etcd_clients.py put --endpoint http://127.0.0.1:2379 --prefix /bench/raw/0/ \
        --value-size 900 --concurrency 32 --start-at MONOTONIC --duration 10
    python bench/etcd_clients.py watch --endpoint ... --prefix /registry/pods/ns/ --revision N

`put`: `concurrency` concurrent Put calls (aetcd's gRPC stubs, one channel) of unique keys
from `start-at` (a time.monotonic() value, so that several processes start together) for
`duration` seconds; prints one JSON line: {"puts", "seconds", "p50_ms", "p99_ms", "cpu"}.

`watch`: the reference clock of the watch-lag figure. One etcd watch on `prefix` from
`revision`; prints "ready" once etcd created it, records time.monotonic() (one clock for
every process of the machine) when each key is first seen, and on "stop" (a line on
stdin) prints {"seen": {name: t}} with name the key's last segment.

An `https://` endpoint is dialled over TLS with `--cacert`, `--cert` and `--key` (etcdctl's
names), for an etcd with --client-cert-auth (`hack/up.py --secure`'s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aetcd import rpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from apiserver.storage import EtcdTLS, open_channel  # noqa: E402

# the client certificate of https:// endpoints (--cacert, --cert, --key)
_tls: EtcdTLS | None = None


def channel(endpoint: str) -> Any:
    """Plaintext for http://, TLS with the flags' certificates for https://."""
    return open_channel([endpoint], _tls)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


async def put_load(endpoint: str, prefix: str, value_size: int, concurrency: int,
                   start_at: float, duration: float) -> dict[str, Any]:
    value = b"x" * value_size
    async with channel(endpoint) as ch:
        kv = rpc.KVStub(ch)
        await kv.Put(rpc.PutRequest(key=f"{prefix}warmup".encode(), value=value))
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        started = time.monotonic()
        cpu_started = time.process_time()
        deadline = started + duration
        latencies: list[float] = []
        counter = iter(range(10**9))

        async def worker() -> None:
            while (t0 := time.monotonic()) < deadline:
                key = f"{prefix}{next(counter)}".encode()
                await kv.Put(rpc.PutRequest(key=key, value=value))
                latencies.append(time.monotonic() - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.monotonic() - started
        cpu = time.process_time() - cpu_started
    latencies.sort()
    return {"puts": len(latencies), "seconds": seconds, "cpu": cpu / seconds,
            "p50_ms": percentile(latencies, 50) * 1000, "p99_ms": percentile(latencies, 99) * 1000}


async def stdin_lines() -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        yield line.decode().strip()


async def wait_for_stop() -> None:
    async for line in stdin_lines():
        if line == "stop":
            return


async def watch_reference(endpoint: str, prefix: str, revision: int) -> dict[str, float]:
    seen: dict[str, float] = {}
    raw = prefix.encode()
    range_end = raw[:-1] + bytes([raw[-1] + 1])
    created = asyncio.Event()

    async def requests() -> AsyncIterator[Any]:
        yield rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=raw, range_end=range_end, start_revision=revision))
        await asyncio.Event().wait()  # keep the stream open

    async def consume(stub: Any) -> None:
        async for resp in stub.Watch(requests()):
            t = time.monotonic()
            if resp.created:
                created.set()
            for event in resp.events:
                name = event.kv.key.decode().rsplit("/", 1)[-1]
                seen.setdefault(name, t)

    async with channel(endpoint) as ch:
        task = asyncio.create_task(consume(rpc.WatchStub(ch)))
        await created.wait()
        print("ready", flush=True)
        await wait_for_stop()
        task.cancel()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    put = sub.add_parser("put")
    put.add_argument("--endpoint", required=True)
    put.add_argument("--prefix", required=True)
    put.add_argument("--value-size", type=int, required=True)
    put.add_argument("--concurrency", type=int, default=32)
    put.add_argument("--start-at", type=float, default=0.0)
    put.add_argument("--duration", type=float, default=10.0)
    watch = sub.add_parser("watch")
    watch.add_argument("--endpoint", required=True)
    watch.add_argument("--prefix", required=True)
    watch.add_argument("--revision", type=int, required=True)
    for command in (put, watch):
        command.add_argument("--cacert", help="the CA of an https:// etcd (PEM)")
        command.add_argument("--cert", help="the client certificate it accepts (PEM)")
        command.add_argument("--key", help="its key (PEM)")
    args = parser.parse_args()
    global _tls
    _tls = EtcdTLS.load(args.cacert, args.cert, args.key)
    if args.command == "put":
        result: dict[str, Any] = asyncio.run(put_load(
            args.endpoint, args.prefix, args.value_size, args.concurrency, args.start_at,
            args.duration))
    else:
        result = {"seen": asyncio.run(watch_reference(args.endpoint, args.prefix,
                                                      args.revision))}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
