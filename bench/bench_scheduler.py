"""How fast the scheduler binds pods, next to the apiserver's own binding rate.

For each node count (100 and 1000 by default) a fresh etcd + apiserver is started,
the nodes are registered (Ready), and then, in the same run:

1. baseline: `--pods` unscheduled pods are bound by direct POSTs of Bindings at the
   scheduler's concurrency (round-robin over the nodes), driven by `wrk`
   (bench/wrk_bind.lua): the apiserver's binding rate;
2. baseline + event: the same, each bind followed by an Event POST, which is the
   API work the scheduler does per pod (bind, then the `Scheduled` event);
3. scheduler: `--pods` pods are created for a scheduler that is not running yet, then
   `python -m scheduler` starts; pods/s is measured from its first bind to its last,
   as seen by a watch.

The baselines' load comes from wrk, not from Python on the same cores (DESIGN.md):
an httpx client saturates before the apiserver does. `--python-baseline` adds the
same two baselines driven by this process's ApiClient, to show the difference.

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
import json
import shutil
import signal
import subprocess
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
BENCH = Path(__file__).resolve().parent
T = TypeVar("T")


@dataclass(frozen=True)
class Round:
    nodes: int
    pods: int
    bind_rate: float
    bind_and_event_rate: float
    scheduler_rate: float
    scheduler_seconds: float
    # The same baselines driven by the Python client (--python-baseline), else None.
    python_bind_rate: float | None = None
    python_bind_and_event_rate: float | None = None
    scheduled_events: int = 0  # the scheduler's Scheduled events that were written


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


def wrk_binding_rate(url: str, prefix: str, pods: int, nodes: int, *, connections: int,
                     with_event: bool) -> float:
    """Pods/s of wrk binding `prefix-00000..` (and writing their events): from the first
    thread's first request to the last thread's last answer (bench/wrk_bind.lua)."""
    threads = min(2, connections)
    args = ["wrk", f"-t{threads}", f"-c{connections}", "-d3600s", "--timeout=60s",
            "-s", str(BENCH / "wrk_bind.lua"), url, "--", prefix, str(pods), str(nodes),
            "1" if with_event else "0", str(threads)]
    results: list[dict[str, Any]] = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as wrk:
        assert wrk.stdout is not None
        output = []
        for line in wrk.stdout:
            output.append(line)
            if line.startswith("WRK_THREAD "):
                results.append(json.loads(line.removeprefix("WRK_THREAD ")))
                if len(results) == threads:
                    wrk.send_signal(signal.SIGINT)  # wrk runs for -d unless interrupted
        wrk.wait()
    if len(results) < threads:
        raise RuntimeError(f"wrk ended before its threads were done:\n{''.join(output)}")
    failed = sum(int(r["non2xx"]) for r in results)
    if failed:
        first = next(r["first_error"] for r in results if r["first_error"])
        raise RuntimeError(f"wrk: {failed} non-2xx answers, the first: {first}")
    seconds = max(r["finished"] for r in results) - min(r["started"] for r in results)
    return pods / seconds


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
        scheduler.stop()  # SIGTERM: it writes the events still queued (5 s at most)
    first, last = bound_at[0], bound_at[-1]
    return (len(bound_at) - 1) / (last - first), last - started


async def scheduled_events(client: ApiClient, component: str) -> int:
    """The `Scheduled` events `component` wrote (its queue drops some when full, as
    kube's broadcaster does: reported next to the rate)."""
    events = (await client.list("events", namespace="default")).get("items") or []
    return sum(1 for e in events if e.get("reason") == "Scheduled"
               and (e.get("source") or {}).get("component") == component)


async def run_round(nodes: int, pods: int, parallelism: int, shape: str = "plain", *,
                    python_baseline: bool = False) -> Round:
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        workdir = Path(tmp)
        etcd = Etcd(workdir).start()
        # The plain development port: authentication is not what this measures, and wrk
        # (the baselines' load) speaks plain HTTP without client certificates.
        server = ApiServer(etcd, workdir, plain=True).start()
        python: list[float] = []
        try:
            async with ApiClient(server.url, timeout=60) as client:
                print(f"[{nodes} nodes] registering nodes", flush=True)
                node_names = await register_nodes(client, nodes)
                rates = []
                for prefix, with_event in (("direct", False), ("direct-ev", True)):
                    what = "direct bindings" + (" + events" if with_event else "")
                    print(f"[{nodes} nodes] baseline (wrk): {pods} {what}", flush=True)
                    await create_pods(client, prefix, pods, "nobody")
                    rates.append(await asyncio.to_thread(
                        wrk_binding_rate, server.url, prefix, pods, nodes,
                        connections=parallelism, with_event=with_event))
                    if python_baseline:
                        print(f"[{nodes} nodes] baseline (Python client): {pods} {what}",
                              flush=True)
                        created = await create_pods(client, f"py-{prefix}", pods, "nobody")
                        python.append(await direct_binding_rate(
                            client, created, node_names, concurrency=parallelism,
                            with_event=with_event))
                print(f"[{nodes} nodes] scheduler: {pods} {shape} pods", flush=True)
                rate, seconds = await scheduler_rate(client, server, workdir, pods=pods,
                                                     parallelism=parallelism, shape=shape)
                events = await scheduled_events(client, "bench-scheduler")
        finally:
            server.stop()
            etcd.stop()
    return Round(nodes, pods, rates[0], rates[1], rate, seconds,
                 python_bind_rate=python[0] if python else None,
                 python_bind_and_event_rate=python[1] if python else None,
                 scheduled_events=events)


def report(rounds: list[Round], parallelism: int) -> str:
    lines = [f"scheduler throughput vs the apiserver's binding rate "
             f"(concurrency {parallelism}, same run; baselines driven by wrk)",
             f"{'nodes':>6} {'pods':>6} {'bind/s':>8} {'bind+event/s':>13} "
             f"{'scheduler pods/s':>17} {'ratio vs bind':>14} {'ratio vs bind+event':>20}"]
    for r in rounds:
        lines.append(f"{r.nodes:>6} {r.pods:>6} {r.bind_rate:>8.0f} {r.bind_and_event_rate:>13.0f} "
                     f"{r.scheduler_rate:>17.0f} {r.scheduler_rate / r.bind_rate:>14.2f} "
                     f"{r.scheduler_rate / r.bind_and_event_rate:>20.2f}")
    for r in rounds:
        lines.append(f"[{r.nodes} nodes] the scheduler's Scheduled events written: "
                     f"{r.scheduled_events} of {r.pods} (off the bind path: a bounded queue, "
                     "dropped when full, as kube's broadcaster)")
    for r in rounds:
        if r.python_bind_rate is not None and r.python_bind_and_event_rate is not None:
            lines.append(f"[{r.nodes} nodes] the same baselines from the Python client: "
                         f"{r.python_bind_rate:.0f} bind/s "
                         f"({r.python_bind_rate / r.bind_rate:.2f} of wrk's), "
                         f"{r.python_bind_and_event_rate:.0f} bind+event/s "
                         f"({r.python_bind_and_event_rate / r.bind_and_event_rate:.2f} of wrk's)")
    return "\n".join(lines)


async def main_async(node_counts: list[int], pods: int, parallelism: int,
                     shape: str = "plain", *, python_baseline: bool = False) -> None:
    rounds = [await run_round(n, pods, parallelism, shape, python_baseline=python_baseline)
              for n in node_counts]
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
    parser.add_argument("--python-baseline", action="store_true",
                        help="also drive the baselines from the Python client (slow): how "
                             "much a Python load generator would under-measure them")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk (hack/install-deps.sh does)")
    asyncio.run(main_async([int(n) for n in args.nodes.split(",")], args.pods,
                           args.parallelism, args.shape, python_baseline=args.python_baseline))


if __name__ == "__main__":
    main()
