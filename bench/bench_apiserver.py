"""Pod creates per second through the apiserver, against two baselines in the same run.

- raw etcd puts (aetcd) of the stored pod's size: the floor of the storage itself;
- a bare FastAPI endpoint that writes the body to etcd (bench/bare_endpoint.py): what
  kubelite's target compares with ("as cheap as a bare FastAPI endpoint").

Same freshly started etcd, same client, same concurrency. Prints the rates and the ratios.

    .venv/bin/python bench/bench_apiserver.py [--pods 2000] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aetcd
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support import PYTHON, ApiServer, Etcd, Process, free_port, wait_http_ok  # noqa: E402


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]}}


async def run_concurrently(count: int, concurrency: int, work: Any) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await work(queue.get_nowait())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def bench(pods: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        etcd = Etcd(Path(tmp)).start()
        server = ApiServer(etcd, Path(tmp)).start()
        try:
            # the stored size of a created pod, for a like-for-like raw put
            async with httpx.AsyncClient(base_url=server.url, timeout=60,
                                         limits=httpx.Limits(max_connections=concurrency)) as http:
                sample = (await http.post("/api/v1/namespaces/default/pods",
                                          json=pod("size-sample"))).json()
                value = json.dumps(sample).encode()

                async def create(i: int) -> None:
                    r = await http.post("/api/v1/namespaces/default/pods", json=pod(f"p-{i}"))
                    r.raise_for_status()

                api_rate = await run_concurrently(pods, concurrency, create)

            port = free_port()
            bare = Process("bare", [PYTHON, str(Path(__file__).parent / "bare_endpoint.py"),
                                    "--etcd-port", str(etcd.client_port), "--port", str(port)],
                           Path(tmp) / "bare.log").start()
            try:
                wait_http_ok(f"http://127.0.0.1:{port}/docs", process=bare)
                async with httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", timeout=60,
                        limits=httpx.Limits(max_connections=concurrency)) as http:
                    async def bare_create(i: int) -> None:
                        r = await http.post("/pods", json=pod(f"b-{i}"))
                        r.raise_for_status()

                    bare_rate = await run_concurrently(pods, concurrency, bare_create)
            finally:
                bare.stop()

            client = aetcd.Client(host="127.0.0.1", port=etcd.client_port)
            async with client:
                async def put(i: int) -> None:
                    await client.put(f"/bench/raw/{i}".encode(), value)

                raw_rate = await run_concurrently(pods, concurrency, put)
        finally:
            server.stop()
            etcd.stop()
    print(f"pods={pods} concurrency={concurrency} object_bytes={len(value)}")
    print(f"apiserver pod creates/s:    {api_rate:8.1f}")
    print(f"bare FastAPI+etcd posts/s:  {bare_rate:8.1f}")
    print(f"raw etcd puts/s:            {raw_rate:8.1f}")
    print(f"ratio apiserver/bare:       {api_rate / bare_rate:8.3f}")
    print(f"ratio apiserver/raw:        {api_rate / raw_rate:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(bench(args.pods, args.concurrency))


if __name__ == "__main__":
    main()
