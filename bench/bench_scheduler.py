"""How fast the scheduler binds pods, next to the apiserver's own binding rate.

For each node count (100 and 1000 by default) a fresh etcd + apiserver is started,
the nodes are registered (Ready), and then, in the same run:

1. baseline: `--pods` unscheduled pods are bound by direct POSTs of Bindings at the
   scheduler's concurrency (round-robin over the nodes): the apiserver's binding rate;
2. baseline + event: the same, each bind followed by an Event POST, which is the
   API work the scheduler does per pod (bind, then the `Scheduled` event);
3. scheduler: `--pods` pods are created for a scheduler that is not running yet, then
   `python -m scheduler` starts; pods/s is measured from its first bind to its last,
   as seen by a watch.

    .venv/bin/python -m bench.bench_scheduler [--nodes 100,1000] [--pods 5000] \
        [--shape plain|anti-affinity|spread]

`--shape` gives the scheduler's pods (not the baseline's) scheduler_perf's shapes:
`anti-affinity` (SchedulingPodAntiAffinity: every pod labelled color=green with required
anti-affinity to color=green on the hostname, so at most one per node: use --pods <=
--nodes) or `spread` (SchedulingTopologySpreading: color=blue pods spread with maxSkew 5
over the nodes' 3 zones, DoNotSchedule).

Everything shares the machine's cores (etcd, apiserver, scheduler and this client).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common.client import ApiClient  # noqa: E402
from tests.support import PYTHON, ApiServer, Etcd, Process  # noqa: E402

CREATE_CONCURRENCY = 32
T = TypeVar("T")


@dataclass(frozen=True)
class Round:
    nodes: int
    pods: int
    bind_rate: float
    bind_and_event_rate: float
    scheduler_rate: float
    scheduler_seconds: float


async def in_parallel(work: Callable[[T], Awaitable[Any]], items: Iterable[T],
                      concurrency: int) -> None:
    """`work(item)` for every item, at most `concurrency` at once (a pool of workers)."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            await work(item)
    await asyncio.gather(*(worker() for _ in range(concurrency)))


def node_body(name: str, zone: int = 0) -> dict[str, Any]:
    labels = {"bench": "yes", "kubernetes.io/hostname": name,
              "topology.kubernetes.io/zone": f"zone-{zone % 3}"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady"}]}}


SHAPES: dict[str, tuple[dict[str, str], dict[str, Any]]] = {  # labels, spec fields
    "plain": ({}, {}),
    "anti-affinity": ({"color": "green"}, {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"color": "green"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}),
    "spread": ({"color": "blue"}, {"topologySpreadConstraints": [{
        "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}}}]}),
}


def pod_body(name: str, scheduler_name: str, shape: str = "plain") -> dict[str, Any]:
    labels, spec = SHAPES[shape]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"schedulerName": scheduler_name,
                     "containers": [{"name": "app", "image": "busybox:1.36"}], **spec}}


def event_body(pod: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{pod}.bench", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod,
                               "apiVersion": "v1"},
            "reason": "Scheduled", "type": "Normal",
            "message": f"Successfully assigned default/{pod} to {node}",
            "source": {"component": "bench"}, "count": 1}


async def register_nodes(client: ApiClient, count: int) -> list[str]:
    names = [f"node-{i:05d}" for i in range(count)]
    await in_parallel(lambda i: client.create("nodes", node_body(names[i], i)), range(count),
                      CREATE_CONCURRENCY)
    return names


async def create_pods(client: ApiClient, prefix: str, count: int,
                      scheduler_name: str, shape: str = "plain") -> list[str]:
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    await in_parallel(lambda n: client.create("pods", pod_body(n, scheduler_name, shape),
                                              namespace="default"), names, CREATE_CONCURRENCY)
    return names


async def direct_binding_rate(client: ApiClient, pods: list[str], nodes: list[str], *,
                              concurrency: int, with_event: bool) -> float:
    async def bind(numbered: tuple[int, str]) -> None:
        i, pod = numbered
        node = nodes[i % len(nodes)]
        await client.bind("default", pod, node)
        if with_event:
            await client.create("events", event_body(pod, node), namespace="default")

    started = time.monotonic()
    await in_parallel(bind, enumerate(pods), concurrency)
    return len(pods) / (time.monotonic() - started)


async def watch_binds(client: ApiClient, scheduler_name: str, expected: int,
                      resource_version: str, bound_at: list[float]) -> None:
    """Append the time of each bind of this scheduler's pods until `expected` are bound."""
    seen: set[str] = set()
    stream = client.watch("pods", namespace="default", resource_version=resource_version,
                          field_selector=f"spec.schedulerName={scheduler_name}")
    async with contextlib.aclosing(stream):
        async for event in stream:
            pod = event.get("object") or {}
            name = str((pod.get("metadata") or {}).get("name"))
            if (pod.get("spec") or {}).get("nodeName") and name not in seen:
                seen.add(name)
                bound_at.append(time.monotonic())
                if len(seen) >= expected:
                    return


async def scheduler_rate(client: ApiClient, server: ApiServer, workdir: Path, *, pods: int,
                         parallelism: int, shape: str = "plain") -> tuple[float, float]:
    name = "bench-scheduler"
    await create_pods(client, "sched", pods, name, shape)
    listed = await client.list("pods", namespace="default", field_selector="metadata.name=none")
    bound_at: list[float] = []
    watcher = asyncio.create_task(watch_binds(client, name, pods,
                                              listed["metadata"]["resourceVersion"], bound_at))
    scheduler = Process("scheduler", [
        PYTHON, "-m", "scheduler", "--apiserver", server.url, "--scheduler-name", name,
        "--parallelism", str(parallelism), "--log-level", "warning",
        "--port", "0",  # no health/metrics endpoint: nothing to collide with
    ], workdir / "scheduler.log").start()
    started = time.monotonic()
    try:
        await asyncio.wait_for(watcher, timeout=max(600, pods / 5))
    finally:
        scheduler.stop()
    first, last = bound_at[0], bound_at[-1]
    return (len(bound_at) - 1) / (last - first), last - started


async def run_round(nodes: int, pods: int, parallelism: int, shape: str = "plain") -> Round:
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        workdir = Path(tmp)
        etcd = Etcd(workdir).start()
        server = ApiServer(etcd, workdir).start()
        try:
            async with ApiClient(server.url, timeout=60) as client:
                print(f"[{nodes} nodes] registering nodes", flush=True)
                node_names = await register_nodes(client, nodes)
                print(f"[{nodes} nodes] baseline: {pods} direct bindings", flush=True)
                baseline_pods = await create_pods(client, "direct", pods, "nobody")
                bind_rate = await direct_binding_rate(client, baseline_pods, node_names,
                                                      concurrency=parallelism, with_event=False)
                print(f"[{nodes} nodes] baseline: {pods} direct bindings + events", flush=True)
                event_pods = await create_pods(client, "direct-ev", pods, "nobody")
                bind_event_rate = await direct_binding_rate(client, event_pods, node_names,
                                                            concurrency=parallelism,
                                                            with_event=True)
                print(f"[{nodes} nodes] scheduler: {pods} {shape} pods", flush=True)
                rate, seconds = await scheduler_rate(client, server, workdir, pods=pods,
                                                     parallelism=parallelism, shape=shape)
        finally:
            server.stop()
            etcd.stop()
    return Round(nodes, pods, bind_rate, bind_event_rate, rate, seconds)


def report(rounds: list[Round], parallelism: int) -> str:
    lines = [f"scheduler throughput vs the apiserver's binding rate "
             f"(concurrency {parallelism}, same run)",
             f"{'nodes':>6} {'pods':>6} {'bind/s':>8} {'bind+event/s':>13} "
             f"{'scheduler pods/s':>17} {'ratio vs bind':>14} {'ratio vs bind+event':>20}"]
    for r in rounds:
        lines.append(f"{r.nodes:>6} {r.pods:>6} {r.bind_rate:>8.0f} {r.bind_and_event_rate:>13.0f} "
                     f"{r.scheduler_rate:>17.0f} {r.scheduler_rate / r.bind_rate:>14.2f} "
                     f"{r.scheduler_rate / r.bind_and_event_rate:>20.2f}")
    return "\n".join(lines)


async def main_async(node_counts: list[int], pods: int, parallelism: int,
                     shape: str = "plain") -> None:
    rounds = [await run_round(n, pods, parallelism, shape) for n in node_counts]
    print(f"pod shape: {shape}")
    print(report(rounds, parallelism))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,1000", help="comma-separated node counts")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--parallelism", type=int, default=8,
                        help="scheduler --parallelism and the baseline's concurrency")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="plain",
                        help="the scheduler's pods: scheduler_perf's shapes (see above)")
    args = parser.parse_args()
    asyncio.run(main_async([int(n) for n in args.nodes.split(",")], args.pods,
                           args.parallelism, args.shape))


if __name__ == "__main__":
    main()
