"""Pod creates per second through the apiserver vs raw etcd puts of the same size.

Both measured in the same run, against the same freshly started etcd, with the same
concurrency. Prints both rates and their ratio (apiserver / raw etcd).

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
from tests.support import ApiServer, Etcd  # noqa: E402


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

            client = aetcd.Client(host="127.0.0.1", port=etcd.client_port)
            async with client:
                async def put(i: int) -> None:
                    await client.put(f"/bench/raw/{i}".encode(), value)

                raw_rate = await run_concurrently(pods, concurrency, put)
        finally:
            server.stop()
            etcd.stop()
    print(f"pods={pods} concurrency={concurrency} object_bytes={len(value)}")
    print(f"apiserver pod creates/s: {api_rate:8.1f}")
    print(f"raw etcd puts/s:         {raw_rate:8.1f}")
    print(f"ratio apiserver/raw:     {api_rate / raw_rate:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(bench(args.pods, args.concurrency))


if __name__ == "__main__":
    main()
