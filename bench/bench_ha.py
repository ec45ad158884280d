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
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_apiserver import WrkResult, wrk  # noqa: E402
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


def round_of(apiservers: int, args: argparse.Namespace, tmp: Path) -> WrkResult:
    state = tmp / f"state-{apiservers}"
    process = start(state, apiservers)
    try:
        token = admin_token(state)
        url = f"https://127.0.0.1:{PORT}/api/v1/namespaces/default/pods"
        template = str(pod_template(tmp / "pod.json"))
        headers = (f"Authorization: Bearer {token}",)
        wrk(url, "wrk_create.lua", [template, f"warm{apiservers}"], duration=2,
            connections=args.connections, headers=headers)
        return wrk(url, "wrk_create.lua", [template, f"n{apiservers}"], duration=args.seconds,
                   connections=args.connections, headers=headers)
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
    results: dict[int, WrkResult] = {}
    for count in (int(n) for n in args.apiservers.split(",")):
        results[count] = result = round_of(count, args, tmp)
        print(f"{count} apiserver(s): {result.rate:.0f} creates/s ({result.errors()})",
              flush=True)
    base = results[min(results)].rate
    print(f"\npod creates through haproxy, {args.connections} connections, {args.seconds:.0f} s,"
          f" {os.cpu_count()} cores, 3 etcd members")
    print("| apiservers | creates/s | p50 ms | p99 ms | errors | against 1 apiserver |")
    print("|---|---|---|---|---|---|")
    for count, r in results.items():
        print(f"| {count} | {r.rate:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | "
              f"{r.non2xx + r.socket_errors} | {r.rate / base:.2f}× |")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
