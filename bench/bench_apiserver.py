"""The apiserver's figures from issue 9, each against a baseline measured in the same run.

    .venv/bin/python bench/bench_apiserver.py [--duration 10] [--pods 10000]
        [--only creates|list|watch] [--apiserver-args '--workers 2'] [--profile DIR]

It starts its own etcd (temporary data dir, free ports), apiserver and, for the creates,
bench/bare_endpoint.py, all on 127.0.0.1, and stops them and removes the directory at the
end, on failure or on Ctrl-C. Load comes from outside Python: `wrk` (Debian package) with
bench/wrk_create.lua, which gives each POST a unique name (<prefix>-<thread>-<counter>)
and prints a WRK_RESULT line (requests, non-2xx, latency percentiles) from done().

- list: --pods pods are written straight to etcd in the apiserver's own stored form (a
  pod created through the apiserver, copied with new names and uids), in their own
  namespace. Timed: LIST of them as JSON and as a Table (Accept: ...;as=Table;...), with
  wrk (1 connection, a few seconds; best and median) or, when one LIST takes over a
  second, a few sequential requests; `?limit=500` pages, the first one and one deep in
  (reached through the continue tokens) - or "paging not supported" when the answer has
  no metadata.continue; a raw etcd range read of the same keys (the storage's floor); and
  the apiserver's RSS (VmRSS of its process group) after those LISTs.
- creates: --duration seconds each, --connections (32) connections, after a short warmup:
  (a) POST /api/v1/namespaces/default/pods of a small nginx pod through the apiserver,
  (b) the same bodies to the bare endpoint (FastAPI + one etcd put, the apiserver's
  uvicorn settings), (c) raw etcd puts of the stored pod's size from --raw-procs
  processes of 32 concurrent gRPC puts each (bench/etcd_clients.py), so that the client
  is not the bottleneck. Rates, ratios apiserver/bare and apiserver/raw, create p99;
  non-2xx answers are errors.
- watch: --watchers (100) watch streams on a namespace's pods from the LIST's
  resourceVersion, spread over --watch-procs processes (bench/watch_clients.py: raw
  sockets, a bytes search for the pod name, no JSON parsing), while wrk creates pods
  there at --watch-rate (500/s, paced by delay() in the Lua script). A raw etcd watch in
  another process (bench/etcd_clients.py watch) stamps when each key reached etcd's
  watchers; lag = time a watcher read the ADDED line - that time, both on this machine's
  monotonic clock. A watcher process using ~all of a core is reported as CPU-bound.

It ends with one table: figure, measured, target, pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aetcd import rpc

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
from tests.support import PYTHON, ApiServer, Etcd, Process, free_port, wait_http_ok  # noqa: E402

SECTIONS = ("list", "creates", "watch")
PODS = "/api/v1/namespaces/{ns}/pods"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"
LIST_NS, WATCH_NS = "bench-list", "bench-watch"


def pod_body(name: str) -> dict[str, Any]:
    """A small realistic pod: the seeds' nginx pod (examples/nginx/nodename.yaml)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.15",
                                     "ports": [{"containerPort": 80}]}]}}


# -- results ---------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    measured: str
    target: str = ""
    ok: bool | None = None  # None: no target, or nothing to judge


def judged(name: str, value: float | None, limit: float, *, unit: str, fmt: str,
           at_least: bool = False, note: str = "") -> Figure:
    sign = ">=" if at_least else "<="
    target = f"{sign} {limit:{fmt}}{unit}"
    if value is None:
        return Figure(name, note or "not measured", target, None)
    ok = value >= limit if at_least else value <= limit
    return Figure(name, f"{value:{fmt}}{unit}" + (f" ({note})" if note else ""), target, ok)


def print_table(figures: list[Figure]) -> None:
    rows = [("figure", "measured", "target", "pass/fail")]
    rows += [(f.name, f.measured, f.target,
              "" if f.ok is None and not f.target else
              "n/a" if f.ok is None else "PASS" if f.ok else "FAIL") for f in figures]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    print()
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


# -- processes -------------------------------------------------------------------------


class Helper:
    """A bench/*.py helper process speaking lines on stdin/stdout, in its own group."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name = name
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([PYTHON, *args], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, cwd=BENCH,
                                         start_new_session=True)
        self.log = log

    def readline(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line:
            raise RuntimeError(f"{self.name}: no answer within {timeout}s:\n"
                               f"{self.log.read_text(errors='replace')[-3000:]}")
        return line.strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def result(self, command: str | None, timeout: float) -> dict[str, Any]:
        """Send the last command (if any), then read the JSON line the helper ends with."""
        if command is not None:
            with contextlib.suppress(BrokenPipeError):  # it died: its log says why
                self.send(command)
        out, _ = self.proc.communicate(timeout=timeout)
        lines = out.decode().strip().splitlines()
        if not lines:
            raise RuntimeError(f"{self.name} printed nothing:\n"
                               f"{self.log.read_text(errors='replace')[-3000:]}")
        parsed: dict[str, Any] = json.loads(lines[-1])
        return parsed

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@dataclass
class Cluster:
    tmp: Path
    etcd: Etcd
    api: ApiServer
    cleanup: contextlib.ExitStack

    def helper(self, name: str, args: list[str]) -> Helper:
        helper = Helper(name, args, self.tmp / f"{name}.log")
        self.cleanup.callback(helper.stop)
        return helper


@contextlib.contextmanager
def cluster(apiserver_args: list[str]) -> Iterator[Cluster]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-apiserver-")))
        etcd = Etcd(tmp)
        stack.callback(etcd.stop)
        etcd.start()
        # the development port (every request system:masters), as the scheduler's and the
        # controller-manager's benches use: wrk cannot present a client certificate, and the
        # baselines it is compared with (raw etcd, a bare FastAPI endpoint) authenticate nothing
        api = ApiServer(etcd, tmp, extra_args=apiserver_args, plain=True)
        stack.callback(api.stop)
        api.start()
        yield Cluster(tmp, etcd, api, stack)


def start_bare(c: Cluster) -> tuple[str, int]:
    port = free_port()
    bare = Process("bare", [PYTHON, str(BENCH / "bare_endpoint.py"), "--etcd-port",
                            str(c.etcd.client_port), "--port", str(port)], c.tmp / "bare.log")
    c.cleanup.callback(bare.stop)
    bare.start()
    wait_http_ok(f"http://127.0.0.1:{port}/docs", process=bare)
    return f"http://127.0.0.1:{port}", bare.pid


def group_pids(pgid: int) -> list[int]:
    """The processes of a process group (a server and any worker processes it forked)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry.name)) == pgid:
                    pids.append(int(entry.name))
    return pids


def rss_mb(pgid: int) -> float:
    """VmRSS of a process group, in MB."""
    total_kb = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024


def cpu_seconds(pgid: int) -> float:
    """User + system CPU time used so far by a process group."""
    ticks = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def cpu_usage(pgid: int) -> Iterator[list[float]]:
    """Yields a list that holds, at the end of the block, the group's CPU time / wall time
    (1.0 = one core busy)."""
    usage: list[float] = []
    cpu, wall = cpu_seconds(pgid), time.monotonic()
    yield usage
    usage.append((cpu_seconds(pgid) - cpu) / (time.monotonic() - wall))


# -- wrk -------------------------------------------------------------------------------


@dataclass
class WrkResult:
    requests: int
    seconds: float
    non2xx: int
    socket_errors: int
    min_ms: float
    p50_ms: float
    p99_ms: float
    first_error: str

    @property
    def rate(self) -> float:
        return (self.requests - self.non2xx) / self.seconds

    def errors(self) -> str:
        text = f"{self.non2xx} non-2xx, {self.socket_errors} socket errors/timeouts"
        return text + (f" (first: {self.first_error[:160]})" if self.first_error else "")


def wrk(url: str, script: str, script_args: list[str], *, duration: float,
        connections: int = 32, threads: int = 2, timeout: str = "10s",
        headers: tuple[str, ...] = ()) -> WrkResult:
    args = ["wrk", f"-t{min(threads, connections)}", f"-c{connections}",
            f"-d{max(1, round(duration))}s", f"--timeout={timeout}", "-s", str(BENCH / script)]
    for header in headers:
        args += ["-H", header]
    out = subprocess.run([*args, url, "--", *script_args], capture_output=True, text=True,
                         timeout=duration + 120, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRK_RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result ({out.returncode}):\n{out.stdout}{out.stderr}")
    r = json.loads(line.removeprefix("WRK_RESULT "))
    return WrkResult(
        requests=r["requests"], seconds=r["duration_us"] / 1e6, non2xx=r["non2xx"],
        socket_errors=r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"],
        min_ms=r["min_us"] / 1000, p50_ms=r["p50_us"] / 1000, p99_ms=r["p99_us"] / 1000,
        first_error=r["first_error"])


def create_load(c: Cluster, url: str, prefix: str, args: argparse.Namespace, *,
                duration: float, per_thread_rate: float = 0.0,
                connections: int | None = None, threads: int = 2) -> WrkResult:
    template = c.tmp / "pod-template.json"
    if not template.exists():
        template.write_text(json.dumps(pod_body("__NAME__"), separators=(",", ":")))
    return wrk(url, "wrk_create.lua", [str(template), prefix, str(per_thread_rate)],
               duration=duration, connections=connections or args.connections, threads=threads)


# -- etcd helpers ----------------------------------------------------------------------


def stored_value(c: Cluster, prefix: str) -> bytes:
    """The value of the first key under `prefix` in etcd."""
    async def get() -> bytes:
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        async with rpc.insecure_channel(f"127.0.0.1:{c.etcd.client_port}") as ch:
            resp = await rpc.KVStub(ch).Range(rpc.RangeRequest(
                key=prefix.encode(), range_end=end.encode(), limit=1))
            if not resp.kvs:
                raise RuntimeError(f"nothing under {prefix} in etcd")
            return bytes(resp.kvs[0].value)
    return asyncio.run(get())


def fill_pods(c: Cluster, namespace: str, template: dict[str, Any], count: int) -> float:
    """Write `count` copies of a stored pod (new name and uid) straight to etcd; seconds."""
    async def fill() -> None:
        async with rpc.insecure_channel(f"127.0.0.1:{c.etcd.client_port}") as ch:
            kv = rpc.KVStub(ch)
            names = iter(range(1, count))

            async def worker() -> None:
                for i in names:
                    name = f"list-{i:05d}"
                    obj = {**template, "metadata": {**template["metadata"], "name": name,
                                                    "uid": str(uuid.uuid4())}}
                    await kv.Put(rpc.PutRequest(
                        key=f"/registry/pods/{namespace}/{name}".encode(),
                        value=json.dumps(obj, separators=(",", ":")).encode()))
            await asyncio.gather(*(worker() for _ in range(64)))
    started = time.monotonic()
    asyncio.run(fill())
    return time.monotonic() - started


def etcd_range_seconds(c: Cluster, prefix: str, repeat: int = 3) -> tuple[float, int]:
    """Best time of a range read of every key under `prefix` (gRPC, values as bytes)."""
    async def read() -> tuple[float, int]:
        async with rpc.insecure_channel(
                f"127.0.0.1:{c.etcd.client_port}",
                options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)]) as ch:
            kv, best, count = rpc.KVStub(ch), float("inf"), 0
            end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
            for _ in range(repeat):
                t0 = time.perf_counter()
                resp = await kv.Range(rpc.RangeRequest(key=prefix.encode(),
                                                       range_end=end.encode()))
                best, count = min(best, time.perf_counter() - t0), len(resp.kvs)
            return best, count
    return asyncio.run(read())


# -- section: list ---------------------------------------------------------------------


def create_namespace(http: httpx.Client, name: str) -> None:
    r = http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name}})
    if r.status_code not in (201, 409):
        raise RuntimeError(f"creating namespace {name}: {r.status_code} {r.text[:300]}")


def timed_get(http: httpx.Client, path: str, headers: dict[str, str] | None = None,
              params: dict[str, str | int] | None = None) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    r = http.get(path, headers=headers, params=params)  # the whole body is read; not parsed
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    return elapsed, r


def time_list(c: Cluster, http: httpx.Client, label: str, accept: str,
              seconds: float) -> tuple[float, float, str]:
    """(best, median) seconds of one LIST of LIST_NS, and how it was timed."""
    path = PODS.format(ns=LIST_NS)
    probe, _ = timed_get(http, path, {"Accept": accept})
    if probe < 1.0:
        r = wrk(c.api.url + path, "wrk_get.lua", [], duration=seconds, connections=1,
                threads=1, timeout="60s", headers=(f"Accept: {accept}",))
        if r.requests and not r.non2xx:
            print(f"  LIST {label}: {r.requests} requests in {r.seconds:.1f}s (wrk, 1 conn): "
                  f"best {r.min_ms:.0f} ms, median {r.p50_ms:.0f} ms")
            return r.min_ms / 1000, r.p50_ms / 1000, "wrk"
    times = [probe] + [timed_get(http, path, {"Accept": accept})[0] for _ in range(2)]
    print(f"  LIST {label}: {len(times)} sequential requests (httpx): "
          + ", ".join(f"{t:.2f}s" for t in times))
    return min(times), statistics.median(times), "httpx"


def page(http: httpx.Client, token: str | None = None) -> tuple[float, str | None, int]:
    """One `limit=500` page of LIST_NS: (seconds, the next continue token, items)."""
    params: dict[str, str | int] = {"limit": 500}
    if token:
        params["continue"] = token
    elapsed, r = timed_get(http, PODS.format(ns=LIST_NS), params=params)
    body = r.json()
    return elapsed, body.get("metadata", {}).get("continue") or None, len(body.get("items", []))


def time_pages(http: httpx.Client, pods: int) -> dict[str, float] | None:
    """Median seconds of a 500-item page: the first, and one deep in (reached through the
    continue tokens); None when the apiserver does not page."""
    _, token, items = page(http)
    if token is None:
        print(f"  paging not supported (limit=500 answered {items} items without "
              "metadata.continue)")
        return None
    result = {"first": statistics.median(page(http)[0] for _ in range(7))}
    deep_offset, offset, walk = max(500, (pods - 1000) // 500 * 500), 500, []
    try:
        while offset < deep_offset and token:
            elapsed, token, _ = page(http, token)
            walk.append(elapsed)
            offset += 500
        if token:
            result["deep"] = statistics.median(page(http, token)[0] for _ in range(7))
            result["deep_offset"] = offset
            # a write to pods anywhere: the token's revision is no longer the cache's, so
            # the same page is now read from etcd at that revision
            http.post(PODS.format(ns="default"), json=pod_body("list-moved-on")).raise_for_status()
            result["deep_etcd"] = statistics.median(page(http, token)[0] for _ in range(7))
    except httpx.HTTPStatusError as e:
        print(f"  paging failed at offset {offset}: {e.response.status_code} "
              f"{e.response.text[:200]}")
    print(f"  500-item pages: first {result['first'] * 1000:.1f} ms (median of 7)"
          + (f", offset {offset} {result['deep'] * 1000:.1f} ms (from the cache), "
             f"{result['deep_etcd'] * 1000:.1f} ms after a write (from etcd)"
             if "deep" in result else f", no page past offset {offset}")
          + f", slowest page on the way {max(walk, default=0) * 1000:.1f} ms")
    return result


def page_figures(pages: dict[str, float] | None) -> list[Figure]:
    if pages is None:
        return [judged("LIST limit=500, a page", None, 30, unit=" ms", fmt=".1f",
                       note="paging not supported")]
    first, deep = pages["first"] * 1000, pages.get("deep")
    return [
        judged("LIST limit=500, first page (median)", first, 30, unit=" ms", fmt=".1f"),
        judged(f"LIST limit=500, page at offset {pages.get('deep_offset', 0):.0f} (median)",
               None if deep is None else deep * 1000, 30, unit=" ms", fmt=".1f",
               note="no deep page" if deep is None else ""),
        judged("  the same page after a write (etcd)",
               None if deep is None else pages["deep_etcd"] * 1000, 30, unit=" ms", fmt=".1f",
               note="no deep page" if deep is None else ""),
    ]


def section_list(c: Cluster, args: argparse.Namespace) -> list[Figure]:
    print(f"== list: {args.pods} pods in namespace {LIST_NS}")
    with httpx.Client(base_url=c.api.url, timeout=120) as http:
        create_namespace(http, LIST_NS)
        r = http.post(PODS.format(ns=LIST_NS), json=pod_body("list-00000"))
        r.raise_for_status()
        template = json.loads(stored_value(c, f"/registry/pods/{LIST_NS}/list-00000"))
        took = fill_pods(c, LIST_NS, template, args.pods)
        print(f"  filled etcd with {args.pods} pods in {took:.1f}s")
        _, r = timed_get(http, PODS.format(ns=LIST_NS))
        count, size = len(r.json()["items"]), len(r.content)
        print(f"  LIST answers {count} items, {size / 1e6:.1f} MB of JSON")
        raw, keys = etcd_range_seconds(c, f"/registry/pods/{LIST_NS}/")
        print(f"  raw etcd range of the {keys} keys (gRPC, undecoded): best {raw * 1000:.0f} ms")
        best, median, how = time_list(c, http, "JSON", "application/json", args.list_seconds)
        tbest, tmedian, thow = time_list(c, http, "Table", TABLE_ACCEPT, args.list_seconds)
        pages = time_pages(http, args.pods)
    rss = rss_mb(c.api.process.pid)
    print(f"  apiserver RSS after the LISTs: {rss:.0f} MB")
    figures = [
        judged(f"LIST {count} pods, JSON (median)", median, 0.2, unit=" s", fmt=".3f",
               note=f"best {best:.3f} s, {how}"),
        judged(f"LIST {count} pods, Table (median)", tmedian, 0.2, unit=" s", fmt=".3f",
               note=f"best {tbest:.3f} s, {thow}"),
        Figure("  baseline: raw etcd range of them", f"{raw:.3f} s"),
    ]
    figures += page_figures(pages)
    figures.append(judged(f"apiserver RSS, {count} pods after LIST", rss, 300, unit=" MB",
                          fmt=".0f"))
    return figures


# -- section: creates ------------------------------------------------------------------


def raw_puts(c: Cluster, args: argparse.Namespace, value_size: int) -> dict[str, float]:
    start_at = time.monotonic() + 2.0  # every process connected and warmed up by then
    helpers = [c.helper(f"etcd-put-{i}", [
        "etcd_clients.py", "put", "--endpoint", c.etcd.endpoint, "--prefix", f"/bench/raw/{i}/",
        "--value-size", str(value_size), "--concurrency", "32", "--start-at", str(start_at),
        "--duration", str(args.duration)]) for i in range(args.raw_procs)]
    results = [h.result(None, timeout=args.duration + 60) for h in helpers]
    puts = sum(r["puts"] for r in results)
    seconds = max(r["seconds"] for r in results)
    p99 = max(r["p99_ms"] for r in results)
    cpu = ", ".join(f"{r['cpu']:.0%}" for r in results)
    print(f"  raw etcd puts: {puts} in {seconds:.1f}s from {len(results)} processes x 32 "
          f"concurrent = {puts / seconds:.0f}/s, p99 {p99:.1f} ms (client CPU: {cpu})")
    return {"rate": puts / seconds, "p99_ms": p99}


PY_SPY = str(Path(sys.executable).with_name("py-spy")) \
    if Path(sys.executable).with_name("py-spy").exists() else "py-spy"
# Where a frame's time is counted, by the file it runs in (first match wins).
PROFILE_BUCKETS = [
    ("asyncio event loop, uvloop, selectors", ("asyncio/", "uvloop", "selectors.py")),
    ("HTTP server (uvicorn, httptools)", ("uvicorn/", "httptools")),
    ("ASGI request/response (starlette)", ("starlette/",)),
    ("etcd client (aetcd, gRPC, protobuf)", ("aetcd/", "grpc/", "google/protobuf")),
    ("JSON (orjson)", ("orjson",)),
    ("kubelite apiserver", ("apiserver/",)),
    ("kubelite common", ("common/",)),
]


def profile_summary(collapsed: str) -> list[tuple[str, float]]:
    """Share of samples by the innermost frame's bucket, from py-spy's collapsed stacks
    (`frame;frame;... count` lines; frames look like `name (path:line)`)."""
    counts: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        total += int(count)
        bucket = "other (stdlib, idle)"
        for frame in reversed(frames):  # innermost first: the first frame we can place
            found = next((name for name, marks in PROFILE_BUCKETS
                          if any(m in frame for m in marks)), None)
            if found:
                bucket = found
                break
        counts[bucket] = counts.get(bucket, 0) + int(count)
    return sorted(((b, n / total) for b, n in counts.items()), key=lambda x: -x[1]) if total \
        else []


def self_time(collapsed: str) -> list[tuple[str, float]]:
    """Share of samples by innermost frame (time spent in the function itself, or in C
    code it called: py-spy shows no native frames)."""
    counts: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            frame = stack.rsplit(";", 1)[-1]
            counts[frame] = counts.get(frame, 0) + int(count)
            total += int(count)
    return sorted(((f, n / total) for f, n in counts.items()), key=lambda x: -x[1]) \
        if total else []


@contextlib.contextmanager
def profiled(c: Cluster, args: argparse.Namespace) -> Iterator[None]:
    """With --profile DIR: py-spy samples every apiserver process while the block runs,
    writes its collapsed stacks (and a flame graph) there and prints where the time went."""
    if not args.profile:
        yield
        return
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    spies = []
    for pid in group_pids(c.api.process.pid):
        for fmt, suffix in (("raw", "txt"), ("flamegraph", "svg")):
            spies.append((pid, suffix, subprocess.Popen(
                [PY_SPY, "record", "--nonblocking", "--rate", "250", "-p", str(pid),
                 "--duration", str(int(args.duration)), "--format", fmt,
                 "-o", str(out / f"creates-{pid}.{suffix}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    yield
    for _, _, spy in spies:
        spy.wait(timeout=args.duration + 30)
    for pid, suffix, _ in spies:
        path = out / f"creates-{pid}.{suffix}"
        if suffix == "txt" and path.exists() and path.stat().st_size:
            shares = profile_summary(path.read_text())
            print(f"  profile of apiserver pid {pid} ({path}):")
            for bucket, share in shares:
                print(f"    {share:6.1%}  {bucket}")
            print("    busiest functions (own time):")
            for frame, share in self_time(path.read_text())[:12]:
                print(f"    {share:6.1%}  {frame}")


def section_creates(c: Cluster, args: argparse.Namespace) -> list[Figure]:
    print(f"== creates: {args.duration:g}s each, {args.connections} connections")
    api_url = c.api.url + PODS.format(ns="default")
    bare_url, bare_pid = start_bare(c)
    bare_url += "/pods"
    if args.warmup > 0:
        create_load(c, api_url, "warm", args, duration=args.warmup)
        create_load(c, bare_url, "warm", args, duration=args.warmup)
    with cpu_usage(c.api.process.pid) as api_cpu, profiled(c, args):
        api = create_load(c, api_url, "p", args, duration=args.duration)
    print(f"  apiserver: {api.requests} POSTs in {api.seconds:.1f}s = {api.rate:.0f} creates/s, "
          f"p50 {api.p50_ms:.1f} ms, p99 {api.p99_ms:.1f} ms; {api.errors()}; "
          f"apiserver CPU {api_cpu[0]:.0%}")
    with cpu_usage(bare_pid) as bare_cpu:
        bare = create_load(c, bare_url, "b", args, duration=args.duration)
    print(f"  bare endpoint: {bare.requests} POSTs in {bare.seconds:.1f}s = {bare.rate:.0f}/s, "
          f"p50 {bare.p50_ms:.1f} ms, p99 {bare.p99_ms:.1f} ms; {bare.errors()}; "
          f"its CPU {bare_cpu[0]:.0%}")
    value = stored_value(c, "/registry/pods/default/p-")
    print(f"  a stored pod is {len(value)} bytes in etcd")
    raw = raw_puts(c, args, len(value))
    errors = api.non2xx + api.socket_errors
    return [
        Figure("apiserver creates/s", f"{api.rate:.0f}/s"),
        Figure("  bare FastAPI+etcd POSTs/s", f"{bare.rate:.0f}/s"),
        Figure("  raw etcd puts/s", f"{raw['rate']:.0f}/s"),
        judged("creates / bare endpoint", api.rate / bare.rate, 0.9, unit="", fmt=".2f",
               at_least=True),
        judged("creates / raw etcd puts", api.rate / raw["rate"], 0.35, unit="", fmt=".2f",
               at_least=True),
        judged(f"create p99 at {args.connections} connections", api.p99_ms, 50, unit=" ms",
               fmt=".1f", note=f"p50 {api.p50_ms:.1f} ms"),
        judged("create errors (non-2xx, socket)", errors, 0, unit="", fmt="d"),
    ]


# -- section: watch --------------------------------------------------------------------


def start_watchers(c: Cluster, args: argparse.Namespace, revision: str) -> list[Helper]:
    path = (PODS.format(ns=WATCH_NS)
            + f"?watch=true&resourceVersion={revision}&timeoutSeconds=600")
    per = [args.watchers // args.watch_procs + (i < args.watchers % args.watch_procs)
           for i in range(args.watch_procs)]
    helpers = [c.helper(f"watchers-{i}", [
        "watch_clients.py", "--port", str(c.api.port), "--path", path, "--watchers", str(n),
        "--marker", "lag-"]) for i, n in enumerate(per) if n]
    for h in helpers:
        if (line := h.readline(timeout=60)) != "ready":
            raise RuntimeError(f"{h.name}: {line}")
    return helpers


def lag_stats(reference: dict[str, float], watchers: list[dict[str, float]],
              ) -> tuple[list[float], int]:
    lags, missing = [], 0
    for seen in watchers:
        for name, t in reference.items():
            if name in seen:
                lags.append(seen[name] - t)
            else:
                missing += 1
    return lags, missing


def section_watch(c: Cluster, args: argparse.Namespace) -> list[Figure]:
    print(f"== watch: {args.watchers} watchers in {args.watch_procs} processes, creates at "
          f"{args.watch_rate}/s for {args.watch_duration:g}s")
    with httpx.Client(base_url=c.api.url, timeout=60) as http:
        create_namespace(http, WATCH_NS)
        revision = http.get(PODS.format(ns=WATCH_NS)).json()["metadata"]["resourceVersion"]
    reference = c.helper("etcd-watch", [
        "etcd_clients.py", "watch", "--endpoint", c.etcd.endpoint,
        "--prefix", f"/registry/pods/{WATCH_NS}/", "--revision", str(int(revision) + 1)])
    if (line := reference.readline(timeout=30)) != "ready":
        raise RuntimeError(f"etcd watch: {line}")
    watchers = start_watchers(c, args, revision)
    for h in watchers:
        h.send("mark")
    threads = 2
    with cpu_usage(c.api.process.pid) as api_cpu:
        load = create_load(c, c.api.url + PODS.format(ns=WATCH_NS), "lag", args,
                           duration=args.watch_duration,
                           per_thread_rate=args.watch_rate / threads,
                           connections=args.connections, threads=threads)
    print(f"  created {load.requests - load.non2xx} pods in {load.seconds:.1f}s = "
          f"{load.rate:.0f}/s (p99 {load.p99_ms:.1f} ms); {load.errors()}; "
          f"apiserver CPU {api_cpu[0]:.0%}")
    time.sleep(1.0)  # creates in flight when wrk stopped (it does not count them) land
    seen_ref = reference.result("stop", timeout=30)["seen"]
    results = [h.result(f"expect {len(seen_ref)}", timeout=60) for h in watchers]
    lags, missing = lag_stats(seen_ref, [w for r in results for w in r["watchers"]])
    busy = [r["cpu"] for r in results]
    cpu_bound = [f"watchers-{i}" for i, b in enumerate(busy) if b > 0.8]
    errors = [e for r in results for e in r["errors"]]
    print(f"  etcd watch saw {len(seen_ref)} keys; watchers read {len(lags)} ADDED lines, "
          f"{missing} missing; watcher processes' CPU during the load: "
          + ", ".join(f"{b:.0%}" for b in busy)
          + (f" - CPU-BOUND: {', '.join(cpu_bound)}" if cpu_bound else " (not CPU-bound)"))
    if errors:
        print(f"  watch stream errors: {errors[:3]}")
    if not lags:
        return [judged("watch lag p99", None, 50, unit=" ms", fmt=".1f", note="no events")]
    p50, p99 = percentile(lags, 50) * 1000, percentile(lags, 99) * 1000
    print(f"  delivery lag: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(lags) * 1000:.1f} ms")
    note = f"p50 {p50:.1f} ms, at {load.rate:.0f} creates/s"
    if missing:
        note += f", {missing} not delivered"
    if cpu_bound:
        note += ", a watcher process was CPU-bound"
    return [judged(f"watch lag p99, {args.watchers} watchers", p99, 50, unit=" ms", fmt=".1f",
                   note=note)]


# -- main ------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds of each create load (apiserver, bare endpoint, raw etcd)")
    p.add_argument("--pods", type=int, default=10_000, help="pods stored for the LIST figures")
    p.add_argument("--only", choices=SECTIONS, action="append",
                   help="run only this section (repeatable)")
    p.add_argument("--apiserver-args", default="",
                   help="extra apiserver arguments, e.g. '--workers 2'")
    p.add_argument("--profile", metavar="DIR", default="",
                   help="sample the apiserver with py-spy during the creates, into DIR")
    p.add_argument("--connections", "--concurrency", type=int, default=32,
                   help="wrk connections for the creates")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured creates")
    p.add_argument("--raw-procs", type=int, default=2,
                   help="processes of 32 concurrent raw etcd puts")
    p.add_argument("--list-seconds", type=float, default=3.0, help="seconds of wrk per LIST")
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--watch-procs", type=int, default=4)
    p.add_argument("--watch-rate", type=float, default=500.0, help="pod creates/s while watched")
    p.add_argument("--watch-duration", type=float, default=10.0)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk (hack/install-deps.sh does)")
    # clean up (the `with` blocks below) on Ctrl-C and on SIGTERM, even when started with
    # SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sections = [s for s in SECTIONS if not args.only or s in args.only]
    runners = {"list": section_list, "creates": section_creates, "watch": section_watch}
    figures: list[Figure] = []
    started = time.monotonic()
    with cluster(shlex.split(args.apiserver_args)) as c:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"etcd {c.etcd.endpoint}, apiserver {c.api.url} (pid {c.api.process.pid}), "
              f"{os.cpu_count()} CPUs (load average {load}), load on 127.0.0.1")
        for section in sections:
            figures += runners[section](c, args)
    print_table(figures)
    print(f"\n({time.monotonic() - started:.0f}s)")


if __name__ == "__main__":
    main()
