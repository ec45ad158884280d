"""How long kube-proxy's syncs take, next to iptables-restore loading the same rules.

`--services` Services (default 1,000) with `--endpoints` endpoints each (default 10),
synthetic (no apiserver: this times the proxier, not the watch), on this host's real
iptables under a unique chain prefix and service range; everything is removed after.
Per round, in the same run:

1. baseline: `iptables-restore --noflush` alone loading the text a full sync writes,
   on a host without our chains (the floor any iptables proxier pays);
2. full sync: a fresh Syncer (as after a restart): rules built from the objects,
   iptables-save read back, the same restore;
3. one endpoint change: one Service's endpoint replaced, the partial sync that follows
   (its rules rebuilt, only its chains restored);

and prints the medians over `--rounds` and the ratios to the baseline.

    .venv/bin/python -m bench.bench_kube_proxy [--services 1000] [--endpoints 10] [--rounds 3]

Needs root (iptables). Shares the machine's cores with whatever else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kube_proxy import iptables  # noqa: E402
from kube_proxy.model import Endpoint, ServicePort, ServicePortName  # noqa: E402
from kube_proxy.rules import Config, Existing, Names, build_tables, restore_text  # noqa: E402
from kube_proxy.syncer import Syncer, cleanup  # noqa: E402


def workload(services: int, endpoints: int, net: int
             ) -> tuple[list[ServicePort], dict[ServicePortName, tuple[Endpoint, ...]]]:
    ports: list[ServicePort] = []
    eps: dict[ServicePortName, tuple[Endpoint, ...]] = {}
    for i in range(services):
        name = ServicePortName("bench", f"svc-{i}", "http", "TCP")
        ports.append(ServicePort(name=name, cluster_ip=f"10.{net}.{i // 250}.{i % 250 + 1}",
                                 port=80))
        eps[name] = tuple(sorted((Endpoint(f"10.199.{(i * endpoints + j) // 250 % 250}."
                                           f"{(i * endpoints + j) % 250 + 1}", 8080)
                                  for j in range(endpoints)), key=str))
    return ports, eps


async def timed(coroutine: object) -> float:
    started = time.perf_counter()
    await coroutine  # type: ignore[misc]
    return time.perf_counter() - started


async def one_round(config: Config, services: int, endpoints: int, net: int
                    ) -> tuple[float, float, float, int, int]:
    ports, eps = workload(services, endpoints, net)
    text = restore_text(build_tables(ports, eps, config), config, existing=Existing())
    await cleanup(config)
    restore_seconds = await timed(iptables.restore(text))
    await cleanup(config)
    syncer = Syncer(config)
    full = await syncer.sync(ports, eps)
    changed = ports[services // 2].name
    eps[changed] = (*eps[changed][1:], Endpoint("10.198.0.1", 8080))
    partial = await syncer.sync(ports, eps)
    assert full.full and not partial.full
    return restore_seconds, full.seconds, partial.seconds, len(text), partial.restore_bytes


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_kube_proxy")
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    prefix = "B" + "".join(random.choice(string.ascii_uppercase) for _ in range(5))
    config = Config(names=Names(prefix), localhost_nodeports=False)
    net = random.randrange(200, 250)
    results = []
    try:
        for _ in range(args.rounds):
            results.append(await one_round(config, args.services, args.endpoints, net))
    finally:
        await cleanup(config)
    restore = statistics.median(r[0] for r in results)
    full = statistics.median(r[1] for r in results)
    partial = statistics.median(r[2] for r in results)
    print(f"{args.services} services x {args.endpoints} endpoints, {args.rounds} rounds "
          f"(median), chains {prefix}-*")
    print(f"  iptables-restore alone, full text ({results[0][3]:,} bytes): {restore:8.3f} s")
    print(f"  full sync (build + iptables-save + restore):       {full:8.3f} s   "
          f"{full / restore:5.2f}x restore")
    print(f"  one endpoint change (partial sync, {results[0][4]:,} bytes):  {partial:8.3f} s   "
          f"{partial / restore:5.2f}x restore")


if __name__ == "__main__":
    asyncio.run(main())
