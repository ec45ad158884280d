"""Pod creates through the HA control plane's load balancer with 1, 2 and 3 apiservers.

    .venv/bin/python bench/bench_ha.py [--seconds 10] [--connections 64]

Each round starts `hack/up.py --ha --apiservers N` (3 etcd members, haproxy, the
schedulers and controller-managers, one idle node) in a
state directory of its own, gets a ServiceAccount token bound to cluster-admin (wrk
cannot present a client certificate), and drives POST /api/v1/namespaces/default/pods
through haproxy with `wrk` (bench/wrk_create.lua: a unique name per request; the pods
name a node that does not exist, so no kubelet or scheduler works on them). The table
gives each round's creates/s, latency, and the scale-out factor against the 1-apiserver
round of the same run. Needs the machine to itself: the HA control plane binds
127.0.1.N:2379/2380/6443 (tests/test_ha.py uses the same addresses).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_apiserver import WrkResult, cpu_seconds, wrk  # noqa: E402
from common.kubeconfig import ssl_context  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PORT = 16443  # the balancer's, away from a `make up` on 6443


def pod_template(path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "__NAME__"},
        "spec": {"nodeName": "bench-nowhere", "containers": [
            {"name": "main", "image": "kubelite/busybox:1.35", "imagePullPolicy": "Never"}]},
    }, separators=(",", ":")))
    return path


def start(state: Path, apiservers: int) -> subprocess.Popen[bytes]:
    log = open(state.parent / f"up-{apiservers}.log", "wb")  # noqa: SIM115 - lives with it
    process = subprocess.Popen(
        [PYTHON, str(REPO / "hack" / "up.py"), "--ha", "--apiservers", str(apiservers),
         "--state-dir", str(state), "--secure-port", str(PORT), "--nodes", "bench-ha-node",
         "--kubelet-ports", "10290", "--kube-proxy-ports", "0",
         "--kube-proxy-chain-prefixes", "BENCHHA", "--cluster-dns-port", "0",
         "--cluster-dns-listen", "127.0.0.1:15353"],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = (state.parent / f"up-{apiservers}.log").read_text(errors="replace")
        if "kubelite is up" in text:
            return process
        if process.poll() is not None:
            raise RuntimeError(f"hack/up.py exited:\n{text[-3000:]}")
        time.sleep(0.5)
    raise RuntimeError("hack/up.py not up after 180 s")


def admin_token(state: Path) -> str:
    pki = state / "pki"
    context = ssl_context(ca=(pki / "ca.crt").read_bytes(), cert=(pki / "admin.crt").read_bytes(),
                          key=(pki / "admin.key").read_bytes())
    base = f"https://127.0.0.1:{PORT}"
    with httpx.Client(base_url=base, verify=context, timeout=30) as http:
        http.post("/api/v1/namespaces/default/serviceaccounts",
                  json={"metadata": {"name": "bench"}}).raise_for_status()
        http.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json={
            "metadata": {"name": "bench-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "bench",
                          "namespace": "default"}]}).raise_for_status()
        response = http.post("/api/v1/namespaces/default/serviceaccounts/bench/token",
                             json={"spec": {"expirationSeconds": 3600}})
        response.raise_for_status()
        return str(response.json()["status"]["token"])


def stop(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


KINDS = ("apiserver", "etcd", "haproxy", "scheduler", "controller-manager", "wrk")


@dataclass
class Round:
    result: WrkResult
    cpu: dict[str, float]  # CPU seconds during the measured load, by kind of component
    etcd_members: dict[str, float]  # the same for each etcd member

    def ms_per_create(self, kind: str | None = None) -> float:
        """CPU ms per acknowledged create: of one kind, or of everything (None)."""
        creates = max(1, self.result.requests - self.result.non2xx)
        used = sum(self.cpu.values()) if kind is None else self.cpu.get(kind, 0.0)
        return 1000 * used / creates

    def cores(self) -> float:
        return sum(self.cpu.values()) / self.result.seconds


def cpu_by_child(state: Path) -> dict[str, float]:
    """CPU seconds used so far by each of the launcher's children (each its own process
    group), by name: apiserver-1, etcd-2, ..."""
    children = json.loads((state / "up.pid").read_text())["children"]
    return {child["name"]: cpu_seconds(int(child["pid"])) for child in children}


def by_kind(cpu: dict[str, float]) -> dict[str, float]:
    """apiserver-1 and apiserver-2 are both "apiserver"."""
    totals: dict[str, float] = {}
    for name, seconds in cpu.items():
        kind = re.sub(r"-[0-9]+$", "", name)
        totals[kind] = totals.get(kind, 0.0) + seconds
    return totals


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def round_of(apiservers: int, args: argparse.Namespace, tmp: Path) -> Round:
    state = tmp / f"state-{apiservers}"
    process = start(state, apiservers)
    try:
        token = admin_token(state)
        url = f"https://127.0.0.1:{PORT}/api/v1/namespaces/default/pods"
        template = str(pod_template(tmp / "pod.json"))
        headers = (f"Authorization: Bearer {token}",)
        wrk(url, "wrk_create.lua", [template, f"warm{apiservers}"], duration=2,
            connections=args.connections, headers=headers)
        before, wrk_before = cpu_by_child(state), children_cpu()
        result = wrk(url, "wrk_create.lua", [template, f"n{apiservers}"],
                     duration=args.seconds, connections=args.connections, headers=headers)
        after = cpu_by_child(state)
        used = {name: after[name] - before.get(name, 0.0) for name in after}
        cpu = by_kind(used)
        cpu["wrk"] = children_cpu() - wrk_before  # wrk is the only child waited for since
        members = {name: seconds for name, seconds in used.items() if name.startswith("etcd-")}
        return Round(result, cpu, members)
    finally:
        stop(process)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--apiservers", default="1,2,3")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("wrk is not installed: run `make deps`", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    rounds: dict[int, Round] = {}
    for count in (int(n) for n in args.apiservers.split(",")):
        rounds[count] = round_ = round_of(count, args, tmp)
        print(f"{count} apiserver(s): {round_.result.rate:.0f} creates/s "
              f"({round_.result.errors()})", flush=True)
    results = {count: r.result for count, r in rounds.items()}
    base = results[min(results)].rate
    print(f"\npod creates through haproxy, {args.connections} connections, {args.seconds:.0f} s,"
          f" {os.cpu_count()} cores, 3 etcd members")
    print("| apiservers | creates/s | p50 ms | p99 ms | errors | against 1 apiserver |")
    print("|---|---|---|---|---|---|")
    for count, r in results.items():
        print(f"| {count} | {r.rate:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | "
              f"{r.non2xx + r.socket_errors} | {r.rate / base:.2f}× |")
    print("\nCPU per create (ms) by component during the same loads, and the cores busy "
          f"(the machine has {os.cpu_count()})")
    print(f"| apiservers | {' | '.join(KINDS)} | all (with kubelet, DNS) | cores busy |")
    print(f"|---|{'---|' * len(KINDS)}---|---|")
    for count, round_ in rounds.items():
        per = [round_.ms_per_create(kind) for kind in KINDS]
        total = round_.ms_per_create()
        print(f"| {count} | {' | '.join(f'{ms:.2f}' for ms in per)} | {total:.2f} | "
              f"{round_.cores():.2f} |")
    print("\netcd members, CPU per create (ms; the leader is the busiest):")
    for count, round_ in rounds.items():
        creates = max(1, round_.result.requests - round_.result.non2xx)
        members = ", ".join(f"{name} {1000 * seconds / creates:.2f}"
                            for name, seconds in sorted(round_.etcd_members.items()))
        print(f"  {count} apiserver(s): {members}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
