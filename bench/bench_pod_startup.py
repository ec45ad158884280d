"""Pod startup latency (create -> Running, as a watch sees it) next to a plain `docker run`.

In one run, against one freshly started etcd + apiserver + kubelet on the local dockerd:

1. baseline: `--pods` times `docker run -d` of the same image and command, one after
   the other, then all at once; latency = the CLI call (it returns once the container
   has started);
2. pods: `--pods` pods with `nodeName` set, one after the other, then all at once;
   latency = POST sent -> first watch event with phase Running and every container
   ready.

Prints p50/p99 of each and the ratios pod/docker-run. A pod is a sandbox plus its
container (two containers to Docker), the baseline is one.

    .venv/bin/python bench/bench_pod_startup.py [--pods 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common.client import ApiClient  # noqa: E402
from tests.docker_support import (  # noqa: E402
    BUSYBOX_IMAGE,
    KubeletProcess,
    containers_with_labels,
    docker_api,
    ensure_docker,
    remove_node_containers,
)
from tests.support import ApiServer, Etcd  # noqa: E402

COMMAND = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> str:
    return (f"p50 {percentile(values, 0.5) * 1000:7.1f} ms   "
            f"p99 {percentile(values, 0.99) * 1000:7.1f} ms   "
            f"mean {statistics.mean(values) * 1000:7.1f} ms")


async def docker_run(name: str, label: str) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        "docker", "run", "-d", "--label", f"kubelite.bench={label}", "--name", name,
        BUSYBOX_IMAGE, *COMMAND, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, stderr = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"docker run failed: {stderr.decode(errors='replace')}")
    return time.perf_counter() - started


def remove_labelled(label: str) -> None:
    with docker_api() as api:
        for container in containers_with_labels({"kubelite.bench": label}):
            api.delete(f"/containers/{container['Id']}", params={"force": "true"})


async def docker_run_latencies(count: int, label: str, *, burst: bool) -> list[float]:
    names = [f"{label}-{'burst' if burst else 'seq'}-{i}" for i in range(count)]
    try:
        if burst:
            return list(await asyncio.gather(*(docker_run(n, label) for n in names)))
        return [await docker_run(n, label) for n in names]
    finally:
        await asyncio.to_thread(remove_labelled, label)


def pod_manifest(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "app", "image": BUSYBOX_IMAGE, "command": COMMAND}]}}


def is_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(
        s.get("ready") for s in statuses)


class RunningWatcher:
    """Records when each pod is first seen Running on one watch stream."""

    def __init__(self, client: ApiClient, node: str) -> None:
        self.client = client
        self.node = node
        self.running_at: dict[str, float] = {}
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()

    async def run(self) -> None:
        listed = await self.client.list("pods", namespace="default",
                                        field_selector=f"spec.nodeName={self.node}")
        version = listed["metadata"]["resourceVersion"]
        self.ready.set()
        async for event in self.client.watch("pods", namespace="default",
                                             resource_version=version,
                                             field_selector=f"spec.nodeName={self.node}"):
            pod = event.get("object") or {}
            name = (pod.get("metadata") or {}).get("name", "")
            if name and name not in self.running_at and is_running(pod):
                self.running_at[name] = time.perf_counter()
                self.changed.set()

    async def wait_for(self, names: list[str], timeout: float = 300) -> None:
        async with asyncio.timeout(timeout):
            while not all(n in self.running_at for n in names):
                self.changed.clear()
                await self.changed.wait()


async def pod_latencies(client: ApiClient, watcher: RunningWatcher, node: str, prefix: str,
                        count: int, *, burst: bool) -> list[float]:
    names = [f"{prefix}-{i}" for i in range(count)]
    created_at: dict[str, float] = {}

    async def create(name: str) -> None:
        created_at[name] = time.perf_counter()
        await client.create("pods", pod_manifest(name, node), namespace="default")

    if burst:
        await asyncio.gather(*(create(n) for n in names))
        await watcher.wait_for(names)
    else:
        for name in names:
            await create(name)
            await watcher.wait_for([name])
    latencies = [watcher.running_at[n] - created_at[n] for n in names]
    await asyncio.gather(*(client.delete("pods", n, namespace="default") for n in names))

    async def all_gone() -> None:
        while True:
            listed = await client.list("pods", namespace="default",
                                       field_selector=f"spec.nodeName={node}")
            if not listed["items"]:
                return
            await asyncio.sleep(0.5)

    await asyncio.wait_for(all_gone(), 300)
    return latencies


async def bench(count: int) -> None:
    ensure_docker()
    label = f"bench-{int(time.time())}"
    node = f"bench-node-{int(time.time())}"
    baseline = await docker_run_latencies(count, label, burst=False)
    baseline_burst = await docker_run_latencies(count, label, burst=True)
    with tempfile.TemporaryDirectory() as tmp:
        etcd = Etcd(Path(tmp)).start()
        server = ApiServer(etcd, Path(tmp)).start()
        kubelet = KubeletProcess(server, Path(tmp), node_name=node).start()
        watch_task: asyncio.Task[None] | None = None
        try:
            async with ApiClient(server.url) as client:
                async def node_registered() -> None:
                    while True:
                        with contextlib.suppress(Exception):
                            await client.get("nodes", node)
                            return
                        await asyncio.sleep(0.2)

                await asyncio.wait_for(node_registered(), 60)
                watcher = RunningWatcher(client, node)
                watch_task = asyncio.create_task(watcher.run())
                await watcher.ready.wait()
                sequential = await pod_latencies(client, watcher, node, "seq", count,
                                                 burst=False)
                burst = await pod_latencies(client, watcher, node, "burst", count, burst=True)
        except (httpx.HTTPError, TimeoutError) as e:
            print(f"benchmark failed: {e}\n--- kubelet log tail ---\n{kubelet.log()[-3000:]}")
            raise
        finally:
            if watch_task is not None:
                watch_task.cancel()
                with contextlib.suppress(BaseException):
                    await watch_task
            kubelet.stop()
            server.stop()
            etcd.stop()
            remove_node_containers(node)

    print(f"pod startup, {count} pods, image {BUSYBOX_IMAGE}")
    print(f"  one at a time: docker run -d  {summary(baseline)}")
    print(f"  one at a time: pod            {summary(sequential)}")
    print(f"  {count} at once:   docker run -d  {summary(baseline_burst)}")
    print(f"  {count} at once:   pod            {summary(burst)}")
    for what, pods, runs in (("one at a time", sequential, baseline),
                             (f"{count} at once", burst, baseline_burst)):
        print(f"  ratio pod / docker run, {what}: "
              f"p50 {percentile(pods, 0.5) / percentile(runs, 0.5):.2f}x  "
              f"p99 {percentile(pods, 0.99) / percentile(runs, 0.99):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(bench(args.pods))


if __name__ == "__main__":
    main()
