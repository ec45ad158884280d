"""How fast the controller-manager turns a Deployment's scale into bound pods, next to the
apiserver's own create rate measured in the same run.

    .venv/bin/python bench/bench_controller_manager.py [--pods 1000] [--nodes 10] \
        [--baseline-seconds 10] [--connections 32]

One fresh etcd + apiserver (the plain development port: authentication is not what this
measures, and wrk speaks plain HTTP), `--nodes` fake API-only Nodes (Ready, no kubelet),
then, in the same run:

1. baseline: `wrk` (bench/wrk_create.lua, `--connections` connections) POSTs pods of the
   Deployment's template (with a schedulerName no scheduler serves, so nothing binds
   them) for `--baseline-seconds`: the apiserver's create rate, pods/s;
2. the scheduler and the controller-manager (`python -m scheduler`, `python -m
   controller_manager`, both unelected; no node lifecycle controllers, which would taint
   the heartbeat-less nodes) start; a Deployment of 0 replicas is created and,
   once its ReplicaSet exists, scaled to `--pods` through the scale sub-resource; a watch
   on the namespace's pods times the moment the last of them exists and is bound.

Printed: the baseline rate, the time to all pods created and bound, the resulting pods/s
and its ratio to the baseline (target >= 0.7), and the controller-manager's part alone
(all pods created, bound or not) with its own ratio, and each component's CPU time per
pod (/proc: what it costs, however busy the shared cores are with other work), with the
baseline's apiserver and etcd CPU per create and the API requests per pod by verb. Every
process shares the machine's cores, so the rate can be no more than the cores divided by
the CPU all components spend per pod: that ceiling is printed next to the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_apiserver import cpu_seconds, wrk  # noqa: E402
from bench.bench_scheduler import in_parallel, node_body  # noqa: E402
from common.client import ApiClient  # noqa: E402
from controller_manager.app import CONTROLLER_GROUP_VERSIONS  # noqa: E402
from tests.support import PYTHON, ApiServer, Etcd, Process, free_port  # noqa: E402

NAMESPACE = "bench-cm"
BASELINE_NAMESPACE = "bench-cm-baseline"
TARGET = 0.7
LABELS = {"app": "bench-web"}


def pod_spec(scheduler_name: str = "default-scheduler") -> dict[str, Any]:
    return {"schedulerName": scheduler_name,
            "containers": [{"name": "web", "image": "kubelite/busybox:1.35",
                            "command": ["httpd", "-f"]}]}


def deployment_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": 0, "selector": {"matchLabels": LABELS},
                     "template": {"metadata": {"labels": LABELS}, "spec": pod_spec()}}}


def baseline_template(path: Path) -> Path:
    """The pod the ReplicaSet would create, for wrk (its name a placeholder), left
    unscheduled (no scheduler serves `bench-nobody`)."""
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "__NAME__", "labels": LABELS},
            "spec": pod_spec("bench-nobody")}
    path.write_text(json.dumps(body, separators=(",", ":")))
    return path


async def watch_created_and_bound(client: ApiClient, expected: int, resource_version: str,
                                  marks: dict[str, float]) -> None:
    """Until `expected` pods exist in the namespace and all are bound; `marks` gets the
    time the last one was created ("created") and bound ("bound")."""
    created: set[str] = set()
    bound: set[str] = set()
    stream = client.watch("pods", namespace=NAMESPACE, resource_version=resource_version)
    async with contextlib.aclosing(stream):
        async for event in stream:
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            pod = event.get("object") or {}
            name = str((pod.get("metadata") or {}).get("name"))
            created.add(name)
            if len(created) == expected and "created" not in marks:
                marks["created"] = time.monotonic()
            if (pod.get("spec") or {}).get("nodeName"):
                bound.add(name)
            if len(bound) >= expected:
                marks["bound"] = time.monotonic()
                return


async def request_counts(url: str) -> dict[str, float]:
    """apiserver_request_total by "verb resource[/subresource]", from /metrics."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        key = f"{labels.get('verb')} {labels.get('resource')}"
        if labels.get("subresource"):
            key += f"/{labels['subresource']}"
        counts[key] = counts.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return counts


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-cm-") as tmp:
        workdir = Path(tmp)
        etcd = Etcd(workdir).start()
        server = ApiServer(etcd, workdir, plain=True).start()
        helpers: list[Process] = []
        try:
            async with ApiClient(server.url, timeout=60,
                                 group_versions=CONTROLLER_GROUP_VERSIONS) as client:
                for ns in (NAMESPACE, BASELINE_NAMESPACE):
                    await client.create("namespaces", {"metadata": {"name": ns}})
                names = [f"node-{i:04d}" for i in range(args.nodes)]
                await in_parallel(lambda i: client.create("nodes", node_body(names[i], i)),
                                  range(args.nodes), 16)
                print(f"{args.nodes} API-only nodes registered", flush=True)

                core = {"apiserver": server.process.pid, "etcd": etcd.process.pid}
                core_before = {n: cpu_seconds(pid) for n, pid in core.items()}
                result = wrk(f"{server.url}/api/v1/namespaces/{BASELINE_NAMESPACE}/pods",
                             "wrk_create.lua",
                             [str(baseline_template(workdir / "pod.json")), "base", "0"],
                             duration=args.baseline_seconds, connections=args.connections)
                if result.non2xx or result.socket_errors:
                    print(f"baseline errors: {result.errors()}", flush=True)
                baseline = result.rate
                baseline_cpu = {n: cpu_seconds(pid) - core_before[n] for n, pid in core.items()}
                baseline_pods = result.requests - result.non2xx
                print(f"baseline: the apiserver created {result.requests - result.non2xx} "
                      f"pods in {result.seconds:.1f}s with wrk: {baseline:.0f} pods/s",
                      flush=True)

                helpers.append(Process("scheduler", [
                    PYTHON, "-m", "scheduler", "--apiserver", server.url, "--port", "0",
                    "--leader-elect=false", "--log-level", "warning",
                ], workdir / "scheduler.log").start())
                helpers.append(Process("controller-manager", [
                    PYTHON, "-m", "controller_manager", "--apiserver", server.url,
                    "--port", str(free_port()), "--leader-elect=false", "--log-level",
                    "warning", "--concurrent-syncs", str(args.concurrent_syncs),
                    # the fake nodes send no heartbeats: their lifecycle is not measured
                    "--controllers=*,-node-lifecycle-controller,-taint-eviction-controller",
                ], workdir / "controller-manager.log").start())

                name = "bench-web"
                await client.create("deployments", deployment_body(name), namespace=NAMESPACE)
                rs_name = ""
                deadline = time.monotonic() + 60
                while not rs_name:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the Deployment's ReplicaSet did not appear")
                    rss = await client.list("replicasets", namespace=NAMESPACE)
                    rs_name = next((r["metadata"]["name"] for r in rss["items"]), "")
                    await asyncio.sleep(0.2)
                print(f"replica set {rs_name} exists; scaling the Deployment to {args.pods}",
                      flush=True)
                listed = await client.list("pods", namespace=NAMESPACE)
                marks: dict[str, float] = {}
                watcher = asyncio.create_task(watch_created_and_bound(
                    client, args.pods, listed["metadata"]["resourceVersion"], marks))
                started = time.monotonic()
                cpu_before = {h.name: cpu_seconds(h.pid) for h in helpers}
                cpu_before.update({n: cpu_seconds(pid) for n, pid in core.items()})
                requests_before = await request_counts(server.url)
                await client.patch("deployments", name, {"spec": {"replicas": args.pods}},
                                   namespace=NAMESPACE, subresource="scale")
                async with asyncio.timeout(max(600, args.pods)):
                    await watcher
                cpu = {h.name: cpu_seconds(h.pid) - cpu_before[h.name] for h in helpers}
                cpu.update({n: cpu_seconds(pid) - cpu_before[n] for n, pid in core.items()})
                requests = await request_counts(server.url)
        finally:
            for helper in reversed(helpers):
                helper.stop()
            server.stop()
            etcd.stop()
    created_s = marks["created"] - started
    bound_s = marks["bound"] - started
    rate = args.pods / bound_s
    ratio = rate / baseline
    print()
    print(f"{'figure':<46} {'measured':>12}")
    print(f"{'apiserver create rate (wrk, pods/s)':<46} {baseline:>12.0f}")
    print(f"{f'time to {args.pods} pods created (s)':<46} {created_s:>12.2f}")
    print(f"{f'time to {args.pods} pods created and bound (s)':<46} {bound_s:>12.2f}")
    created_rate = args.pods / created_s
    print(f"{'controller-manager alone: created (pods/s)':<46} {created_rate:>12.0f}")
    print(f"{'  its ratio to the create rate':<46} {created_rate / baseline:>12.2f}")
    for name, seconds in baseline_cpu.items():
        print(f"{f'baseline: {name} CPU per create (ms)':<46} "
              f"{1000 * seconds / max(1, baseline_pods):>12.2f}")
    for helper, seconds in cpu.items():
        print(f"{f'{helper} CPU per pod (ms)':<46} {1000 * seconds / args.pods:>12.2f}")
    print("API requests per pod while scaling (verb resource/subresource):")
    for key, count in sorted(requests.items(), key=lambda kv: -kv[1]):
        if (delta := count - requests_before.get(key, 0)) >= args.pods / 100:
            print(f"  {key:<44} {delta / args.pods:>12.2f}")
    total_ms = 1000 * sum(cpu.values()) / args.pods
    cores = os.cpu_count() or 1
    ceiling = cores / (total_ms / 1000)
    print(f"{'all components: CPU per pod (ms)':<46} {total_ms:>12.2f}")
    print(f"{f'CPU-bound ceiling on {cores} cores (pods/s)':<46} {ceiling:>12.0f}")
    print(f"{'  its ratio to the create rate':<46} {ceiling / baseline:>12.2f}")
    print(f"{'controller-manager + scheduler (pods/s)':<46} {rate:>12.0f}")
    print(f"{'ratio to the create rate (target >= 0.7)':<46} {ratio:>12.2f}  "
          f"{'pass' if ratio >= TARGET else 'FAIL'}")
    return 0 if ratio >= TARGET else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--concurrent-syncs", type=int, default=5)
    args = parser.parse_args()
    raise SystemExit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
