"""Pod startup latency (create -> Ready, as a watch sees it) next to the same containers
started with plain Docker Engine API calls, and the cost of the timeline recording.

In one run, against one freshly started etcd + apiserver + kubelet on the local dockerd:

1. baseline, like with like: a pod is a sandbox plus its container, so per "pod" the
   bench creates and starts a pause container (bridge network, shareable IPC, as the
   kubelet's sandbox) and then creates and starts the app container joined to its
   network and IPC namespaces (`NetworkMode: container:ID`), same images and command,
   over the Docker Engine API on the unix socket; `--pods` of them one after the other,
   then all at once (asyncio.gather); latency = first call sent -> last start answered;
2. plain pods (`nodeName` set): one after the other, then all at once;
3. full pods, all at once: a readiness probe (tcpSocket, periodSeconds 1), a configMap volume
   and an emptyDir volume mounted in the container;
4. recording on/off: two clusters A and B run side by side on the same etcd and dockerd,
   each an apiserver + kubelet with a node of its own, one started with
   KUBELITE_TIMELINE=off (no `timeline.kubelite.io/*` annotations, no Event eventTime);
   `--rounds` rounds each run the full burst once on both, in ABBA order (on-off,
   off-on, ...) so that a drift of the machine's load hits both alike, half of them with
   A recording and B not, then (both restarted) the other half the other way round: an
   A/A run (`--control`) showed one of two identical clusters ahead by as much as the
   recording was thought to cost, and this crossover cancels that edge. Throughput = pods
   / (first create sent -> last pod Ready); each round's cost is 1 - on/off; printed: every
   round, each phase's median, and their mean (the estimate), with A's own edge;
5. the recording's work, measured directly (`bench/recording_work.py`): on one machine
   at a load average of 10 the crossover of 4 cannot resolve 5%, so the bench also times,
   in this process and in CPU time, what the recording adds to each call and to the
   bytes encoded and decoded (a pod and its Events as a recorded burst left them, with
   and without the recording's fields), multiplies by the requests and watch events the
   apiserver served per pod in the bursts (its /metrics), and prints that as a share of
   the apiserver's and the kubelet's measured CPU per pod: an upper bound on the share
   of throughput the recording can take.

Pod latency = POST sent -> first watch event with the pod's Ready condition True. Prints
p50/p99 of each and the ratios pod / baseline.

    .venv/bin/python bench/bench_pod_startup.py [--pods 50] [--rounds 8] [--recording-only]
        [--recording-pods full|plain] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import recording_work  # noqa: E402
from bench.bench_apiserver import cpu_seconds  # noqa: E402
from common.client import ApiClient  # noqa: E402
from common.timeline import RECORDING_ENV  # noqa: E402
from tests.docker_support import (  # noqa: E402
    BUSYBOX_IMAGE,
    DOCKER_SOCKET,
    PAUSE_IMAGE,
    KubeletProcess,
    containers_with_labels,
    docker_api,
    ensure_docker,
    remove_node_containers,
)
from tests.support import ApiServer, Etcd  # noqa: E402

# httpd (busybox's, in the background) is what the readiness probe connects to; the same
# command everywhere, the baseline included.
PORT = 8080
COMMAND = ["sh", "-c", f"trap 'exit 0' TERM; httpd -p {PORT} -h /; while true; do sleep 1; done"]
CONFIG_MAP = "bench-config"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> str:
    return (f"p50 {percentile(values, 0.5) * 1000:7.1f} ms   "
            f"p99 {percentile(values, 0.99) * 1000:7.1f} ms   "
            f"mean {statistics.mean(values) * 1000:7.1f} ms")


def ratio(pods: list[float], base: list[float]) -> str:
    return (f"p50 {percentile(pods, 0.5) / percentile(base, 0.5):.2f}x  "
            f"p99 {percentile(pods, 0.99) / percentile(base, 0.99):.2f}x")


# --- baseline: the same two containers per pod, straight to the Docker Engine API -----------

async def docker_call(api: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    response = await api.request(method, path, **kwargs)
    if response.status_code >= 400:
        raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
    return response.json() if response.content else None


async def docker_pod(api: httpx.AsyncClient, name: str, label: str) -> float:
    """Sandbox then app container, as the kubelet starts a one-container pod."""
    labels = {"kubelite.bench": label}
    started = time.perf_counter()
    sandbox = await docker_call(api, "POST", "/containers/create", params={"name": f"{name}-pause"},
                                json={"Image": PAUSE_IMAGE, "Labels": labels,
                                      "HostConfig": {"NetworkMode": "bridge",
                                                     "IpcMode": "shareable"}})
    await docker_call(api, "POST", f"/containers/{sandbox['Id']}/start")
    shared = f"container:{sandbox['Id']}"
    app = await docker_call(api, "POST", "/containers/create", params={"name": f"{name}-app"},
                            json={"Image": BUSYBOX_IMAGE, "Cmd": COMMAND, "Labels": labels,
                                  "HostConfig": {"NetworkMode": shared, "IpcMode": shared}})
    await docker_call(api, "POST", f"/containers/{app['Id']}/start")
    return time.perf_counter() - started


def remove_labelled(label: str) -> None:
    with docker_api() as api:
        for container in containers_with_labels({"kubelite.bench": label}):
            api.delete(f"/containers/{container['Id']}", params={"force": "true"})


async def docker_pod_latencies(count: int, label: str, *, burst: bool) -> list[float]:
    names = [f"{label}-{'burst' if burst else 'seq'}-{i}" for i in range(count)]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
    try:
        async with httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=DOCKER_SOCKET, limits=limits),
                base_url="http://docker", timeout=120) as api:
            if burst:
                return list(await asyncio.gather(*(docker_pod(api, n, label) for n in names)))
            return [await docker_pod(api, n, label) for n in names]
    finally:
        await asyncio.to_thread(remove_labelled, label)


# --- pods --------------------------------------------------------------------------------

def plain_pod(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "app", "image": BUSYBOX_IMAGE, "command": COMMAND}]}}


def full_pod(name: str, node: str) -> dict[str, Any]:
    """With probes and volumes in place: a TCP readiness probe every second, a configMap
    volume and an emptyDir. (An exec probe is 50 `docker exec`s a second at 50 pods: on a
    loaded 2-core machine those take longer than the probe's 1 s timeout and flap.)"""
    pod = plain_pod(name, node)
    pod["spec"]["volumes"] = [{"name": "config", "configMap": {"name": CONFIG_MAP}},
                              {"name": "scratch", "emptyDir": {}}]
    pod["spec"]["containers"][0].update({
        "volumeMounts": [{"name": "config", "mountPath": "/config"},
                         {"name": "scratch", "mountPath": "/scratch"}],
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1}})
    return pod


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class ReadyWatcher:
    """Records when each pod is first seen Ready on one watch stream."""

    def __init__(self, client: ApiClient, node: str) -> None:
        self.client = client
        self.node = node
        self.ready_at: dict[str, float] = {}
        self.last: dict[str, dict[str, Any]] = {}  # each pod as its latest event showed it
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()

    async def run(self) -> None:
        selector = f"spec.nodeName={self.node}"
        listed = await self.client.list("pods", namespace="default", field_selector=selector)
        version = listed["metadata"]["resourceVersion"]
        self.ready.set()
        async for event in self.client.watch("pods", namespace="default",
                                             resource_version=version, field_selector=selector):
            pod = event.get("object") or {}
            name = (pod.get("metadata") or {}).get("name", "")
            if name:
                self.last[name] = pod
            if name and name not in self.ready_at and is_ready(pod):
                self.ready_at[name] = time.perf_counter()
                self.changed.set()

    async def wait_for(self, names: list[str], timeout: float = 300) -> None:
        async with asyncio.timeout(timeout):
            while not all(n in self.ready_at for n in names):
                self.changed.clear()
                await self.changed.wait()


Manifest = Callable[[str, str], dict[str, Any]]


async def pod_run(client: ApiClient, watcher: ReadyWatcher, node: str, prefix: str,
                  count: int, manifest: Manifest, *, burst: bool) -> tuple[list[float], float]:
    """Latencies create -> Ready, and the burst's throughput (pods/s, first create sent
    -> last Ready); the pods are deleted and gone on return."""
    names = [f"{prefix}-{i}" for i in range(count)]
    created_at: dict[str, float] = {}

    async def create(name: str) -> None:
        created_at[name] = time.perf_counter()
        await client.create("pods", manifest(name, node), namespace="default")

    if burst:
        await asyncio.gather(*(create(n) for n in names))
        await watcher.wait_for(names)
    else:
        for name in names:
            await create(name)
            await watcher.wait_for([name])
    latencies = [watcher.ready_at[n] - created_at[n] for n in names]
    throughput = count / (max(watcher.ready_at[n] for n in names) - min(created_at.values()))
    await asyncio.gather(*(client.delete("pods", n, namespace="default") for n in names))

    async def all_gone() -> None:
        while True:
            listed = await client.list("pods", namespace="default",
                                       field_selector=f"spec.nodeName={node}")
            if not listed["items"]:
                return
            await asyncio.sleep(0.5)

    await asyncio.wait_for(all_gone(), 300)
    return latencies, throughput


class Cluster:
    """An apiserver + kubelet on the shared etcd, the recording on or off in both."""

    def __init__(self, etcd: Etcd, workdir: Path, node: str, *, recording: bool) -> None:
        env = {} if recording else {RECORDING_ENV: "off"}
        tag = "on" if recording else "off"
        workdir = workdir / f"recording-{tag}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.server = ApiServer(etcd, workdir)
        self.server.process.env = {**(self.server.process.env or {}), **env}
        self.kubelet = KubeletProcess(self.server, workdir, node_name=node)
        self.kubelet.process.env = {**(self.kubelet.process.env or {}), **env}
        self.node = node

    def start(self) -> Cluster:
        self.server.start()
        self.kubelet.start()
        return self

    def stop(self) -> None:
        self.kubelet.stop()
        self.server.stop()


@contextlib.asynccontextmanager
async def connected(cluster: Cluster, count: int) -> Any:
    async with ApiClient(cluster.server.connection(), max_connections=count + 10) as client:
        async def node_ready() -> None:
            while True:
                with contextlib.suppress(Exception):
                    node = await client.get("nodes", cluster.node)
                    if any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (node.get("status") or {}).get("conditions") or []):
                        return
                await asyncio.sleep(0.2)

        await asyncio.wait_for(node_ready(), 60)
        with contextlib.suppress(Exception):
            await client.create("configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CONFIG_MAP, "namespace": "default"},
                "data": {"greeting": "hello"}}, namespace="default")
        watcher = ReadyWatcher(client, cluster.node)
        task = asyncio.create_task(watcher.run())
        await watcher.ready.wait()
        try:
            yield client, watcher
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@contextlib.asynccontextmanager
async def profiled(kubelet: KubeletProcess, path: str | None) -> Any:
    """py-spy's on-CPU samples of the kubelet while the block runs, as collapsed stacks."""
    if path is None:
        yield
        return
    assert kubelet.process.proc is not None
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorder = await asyncio.create_subprocess_exec(
        py_spy, "record", "--pid", str(kubelet.process.proc.pid), "--format", "raw",
        "--rate", "100", "--output", path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    await asyncio.sleep(1)  # attached
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        _, stderr = await recorder.communicate()
        print(f"kubelet profile in {path} ({stderr.decode(errors='replace').strip()[-200:]})")


# --recording-pods: what part 4 bursts (its name in the report, its manifest)
RECORDING_PODS: dict[str, tuple[str, Manifest]] = {"full": ("probe+volumes", full_pod),
                                                   "plain": ("plain", plain_pod)}


@dataclass(frozen=True)
class Burst:
    rate: float  # pods/s
    apiserver_cpu_ms: float  # CPU of the cluster's apiserver per pod
    kubelet_cpu_ms: float
    traffic: recording_work.Traffic | None = None  # what the apiserver served per pod

    @property
    def cpu_ms(self) -> float:
        """CPU of the cluster's apiserver and kubelet, per pod."""
        return self.apiserver_cpu_ms + self.kubelet_cpu_ms


# A pod as its last watch event showed it, and its Events: the objects the recording
# writes to, as one burst with the recording on left them.
Sample = tuple[dict[str, Any], list[dict[str, Any]]]


Round = tuple[str, Burst, Burst]  # phase, recording on, recording off


def crossover(costs: list[tuple[str, float]]) -> tuple[dict[str, list[float]], float | None,
                                                       float | None]:
    """(phase, cost) pairs -> the costs by phase, the crossover estimate (the mean of the
    two phases' medians, in which one cluster's edge over the other cancels) and that
    edge itself (None with fewer than two phases)."""
    by_phase: dict[str, list[float]] = {}
    for phase, cost in costs:
        by_phase.setdefault(phase, []).append(cost)
    medians = [statistics.median(c) for c in by_phase.values()]
    if len(medians) != 2:
        return by_phase, None, None
    return by_phase, (medians[0] + medians[1]) / 2, (medians[1] - medians[0]) / 2


def recording_cost_report(count: int, rounds: list[Round], kind: str = "probe+volumes"
                          ) -> list[str]:
    """The recording's cost from paired rounds, measured two ways: throughput (1 - on/off,
    what the target is about, but the shared cores' load swings it by +-20% from round
    to round) and CPU time per pod of the apiserver and kubelet (on/off - 1, which that
    load does not stretch). Each round, each phase's median, the crossover estimate."""
    lines = [f"  recording on/off, {count} {kind} pods at once, {len(rounds)} rounds "
             "(ABBA order in each phase):"]
    for i, (phase, on, off) in enumerate(rounds):
        lines.append(f"    round {i + 1} ({phase}): pods/s on {on.rate:6.2f} off {off.rate:6.2f}"
                     f" cost {(1 - on.rate / off.rate) * 100:+6.1f}%   CPU ms/pod on "
                     f"{on.cpu_ms:6.1f} off {off.cpu_ms:6.1f} cost "
                     f"{(on.cpu_ms / off.cpu_ms - 1) * 100:+6.1f}%")
    measures = {
        "throughput": [(p, 1 - on.rate / off.rate) for p, on, off in rounds],
        "CPU per pod": [(p, on.cpu_ms / off.cpu_ms - 1) for p, on, off in rounds]}
    for measure, costs in measures.items():
        by_phase, estimate, edge = crossover(costs)
        for phase, values in by_phase.items():
            lines.append(f"    {measure}, {phase}: median cost "
                         f"{statistics.median(values) * 100:+.1f}% (spread "
                         f"{min(values) * 100:+.1f}%..{max(values) * 100:+.1f}%)")
        if estimate is not None and edge is not None:
            lines.append(f"    {measure}: recording costs {estimate * 100:+.1f}% (crossover); "
                         f"cluster A's own edge over B {edge * 100:+.1f}%")
    lines.append(f"    medians: on {statistics.median(r[1].rate for r in rounds):.2f} pods/s "
                 f"{statistics.median(r[1].cpu_ms for r in rounds):.1f} CPU ms/pod, off "
                 f"{statistics.median(r[2].rate for r in rounds):.2f} pods/s "
                 f"{statistics.median(r[2].cpu_ms for r in rounds):.1f} CPU ms/pod")
    return lines


async def full_burst(client: ApiClient, watcher: ReadyWatcher, cluster: Cluster, prefix: str,
                     count: int, manifest: Manifest = full_pod) -> Burst:
    """One burst of `count` probe+volumes pods on `cluster` (created, Ready, deleted, gone):
    its throughput, what its apiserver and kubelet spent on it, in CPU time, which
    the other cluster's work on the shared cores does not stretch as it stretches time,
    and the requests and watch events the apiserver served for it."""
    pids = (cluster.server.process.pid, cluster.kubelet.process.pid)
    metrics_before = await scrape(cluster)
    before = [cpu_seconds(pid) for pid in pids]
    _, rate = await pod_run(client, watcher, cluster.node, prefix.lower(), count, manifest,
                            burst=True)
    apiserver_ms, kubelet_ms = (1000 * (cpu_seconds(pid) - was) / count
                                for pid, was in zip(pids, before, strict=True))
    served = recording_work.traffic(metrics_before, await scrape(cluster), count)
    return Burst(rate, apiserver_ms, kubelet_ms, served)


async def scrape(cluster: Cluster) -> recording_work.Samples:
    async with cluster.server.client() as http:
        return recording_work.parse_samples((await http.get("/metrics")).text)


async def recorded_sample(client: ApiClient, watcher: ReadyWatcher, prefix: str) -> Sample:
    """The first pod of a burst named `prefix` and its Events (they outlive the pod)."""
    name = f"{prefix.lower()}-0"
    events = await client.list("events", namespace="default",
                               field_selector=f"involvedObject.name={name}")
    return watcher.last[name], list(events["items"])


async def recording_rounds(etcd: Etcd, workdir: Path, node: str, count: int,
                           rounds: int, *, control: bool = False,
                           manifest: Manifest = full_pod) -> tuple[list[Round], Sample]:
    """(phase, on, off) bursts of `rounds` paired bursts on two clusters A and B
    running side by side: in the first phase A records and B does not, in the second
    (both restarted) the other way round, so that whatever makes one of them faster (an
    A/A run showed one side ahead by as much as the recording was thought to cost) counts
    once for and once against the recording. A warm-up burst on each cluster starts each
    phase. `control`: both record in both phases (an A/A run). Also returns the sample of
    the last recording burst."""
    rates: list[Round] = []
    sample: Sample | None = None
    per_phase = max(1, rounds // 2)
    for phase, a_records in (("A on, B off", True), ("A off, B on", False)):
        sides = {"A": a_records or control, "B": (not a_records) or control}
        clusters = {side: Cluster(etcd, workdir / f"{phase[:1]}{len(rates)}-{side}",
                                  f"{node}-{side.lower()}", recording=recording)
                    for side, recording in sides.items()}
        recording_side = "A" if a_records else "B"
        other_side = "B" if a_records else "A"
        try:
            for cluster in clusters.values():
                cluster.start()
            async with connected(clusters[recording_side], count) as on, \
                    connected(clusters[other_side], count) as off:
                pairs = {True: (on[0], on[1], clusters[recording_side]),
                         False: (off[0], off[1], clusters[other_side])}
                for recording in (True, False):
                    await full_burst(*pairs[recording], f"warm-{len(rates)}-{recording}", count,
                                     manifest)
                for r in range(per_phase):
                    measured: dict[bool, Burst] = {}
                    for recording in ((True, False) if r % 2 == 0 else (False, True)):
                        prefix = f"rec-{len(rates)}-{recording}"
                        measured[recording] = await full_burst(*pairs[recording], prefix,
                                                               count, manifest)
                        if recording:
                            sample = await recorded_sample(*pairs[True][:2], prefix)
                    rates.append((phase, measured[True], measured[False]))
                    on, off = measured[True], measured[False]
                    print(f"  {phase}, round {r + 1}/{per_phase}: on {on.rate:.2f} "
                          f"off {off.rate:.2f} pods/s, {on.cpu_ms:.1f} / {off.cpu_ms:.1f} "
                          "CPU ms per pod", flush=True)
        except (httpx.HTTPError, TimeoutError) as e:
            for cluster in clusters.values():
                print(f"--- {cluster.node} kubelet log tail ---\n{cluster.kubelet.log()[-3000:]}")
            print(f"benchmark failed: {e!r}")
            raise
        finally:
            for cluster in clusters.values():
                cluster.stop()
                remove_node_containers(cluster.node)
    assert sample is not None
    return rates, sample


def recording_work_report(rounds: list[Round], sample: Sample) -> list[str]:
    """The recording's own work per pod (bench/recording_work.py): the calls and bytes of
    the sample timed in this process, counted by the recording bursts' median traffic,
    against their median CPU per pod."""
    on = [r[1] for r in rounds]
    served = [b.traffic for b in on if b.traffic is not None]
    traffic = recording_work.Traffic(*(
        statistics.median(getattr(t, f.name) for t in served)
        for f in dataclasses.fields(recording_work.Traffic)))
    pod, events = sample
    event = max(events, key=lambda e: len(orjson.dumps(e))
                - len(orjson.dumps(recording_work.strip_recording(e))))
    calls = recording_work.calls_cost(pod, event)
    pod_codec, event_codec = recording_work.codec_cost(pod), recording_work.codec_cost(event)
    work = recording_work.recording_work(traffic, calls, pod_codec, event_codec)
    return recording_work.report(
        work, traffic, calls, pod_codec, event_codec,
        apiserver_cpu_ms=statistics.median(b.apiserver_cpu_ms for b in on),
        kubelet_cpu_ms=statistics.median(b.kubelet_cpu_ms for b in on))


async def bench(count: int, rounds: int, profile: str | None, recording_only: bool,
                control: bool = False, recording_pods: str = "full") -> None:
    ensure_docker()
    label = f"bench-{int(time.time())}"
    node = f"bench-node-{int(time.time())}"
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        etcd = Etcd(Path(tmp)).start()
        try:
            if not recording_only:
                lines = await startup_latencies(etcd, Path(tmp), node, label, count, profile)
            rates, sample = await recording_rounds(etcd, Path(tmp), node, count, rounds,
                                           control=control,
                                           manifest=RECORDING_PODS[recording_pods][1])
        finally:
            etcd.stop()
    print(f"pod startup, {count} pods, images {PAUSE_IMAGE} + {BUSYBOX_IMAGE}")
    if control:
        lines.append("  CONTROL RUN: both sides record; 'off' is a second recording cluster")
    for line in lines + recording_cost_report(count, rates, RECORDING_PODS[recording_pods][0]):
        print(line)
    for line in recording_work_report(rates, sample):
        print(line)


async def startup_latencies(etcd: Etcd, workdir: Path, node: str, label: str, count: int,
                            profile: str | None) -> list[str]:
    """Parts 1-3: the Docker API baseline, plain pods and full pods, as report lines."""
    base_seq = await docker_pod_latencies(count, label, burst=False)
    base_burst = await docker_pod_latencies(count, label, burst=True)
    cluster = Cluster(etcd, workdir, node, recording=True)
    try:
        cluster.start()
        async with connected(cluster, count) as (client, watcher):
            seq, _ = await pod_run(client, watcher, node, "seq", count, plain_pod, burst=False)
            plain, _ = await pod_run(client, watcher, node, "plain", count, plain_pod,
                                     burst=True)
            async with profiled(cluster.kubelet, profile):
                full, _ = await pod_run(client, watcher, node, "full", count, full_pod,
                                        burst=True)
    except (httpx.HTTPError, TimeoutError) as e:
        print(f"benchmark failed: {e!r}\n--- kubelet log tail ---\n{cluster.kubelet.log()[-3000:]}")
        raise
    finally:
        cluster.stop()
        remove_node_containers(node)
    return [
        f"  one at a time: docker API sandbox+app  {summary(base_seq)}",
        f"  one at a time: plain pod               {summary(seq)}",
        f"  {count} at once:   docker API sandbox+app  {summary(base_burst)}",
        f"  {count} at once:   plain pod               {summary(plain)}",
        f"  {count} at once:   probe+volumes pod       {summary(full)}",
        f"  ratio plain pod / docker API, one at a time: {ratio(seq, base_seq)}",
        f"  ratio plain pod / docker API, {count} at once:   {ratio(plain, base_burst)}",
        f"  ratio probe+volumes pod / docker API, {count} at once: {ratio(full, base_burst)}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=8,
                        help="paired recording on/off bursts (ABBA order), half with each "
                             "cluster recording")
    parser.add_argument("--recording-only", action="store_true",
                        help="only part 4, the recording's cost")
    parser.add_argument("--recording-pods", choices=sorted(RECORDING_PODS), default="full",
                        help="part 4's pods: full (a probe and volumes, the default) or plain "
                             "(no probe: the CPU per pod is not stretched by probes running "
                             "for as long as a burst lasts)")
    parser.add_argument("--control", action="store_true",
                        help="part 4 as an A/A run: both clusters record (the setup's own "
                             "difference between its two sides)")
    parser.add_argument("--profile", metavar="FILE",
                        help="py-spy record the kubelet during the first probe+volumes burst "
                             "into FILE (collapsed stacks; py-spy must be on PATH or in the "
                             "venv)")
    args = parser.parse_args()
    asyncio.run(bench(args.pods, args.rounds, args.profile, args.recording_only, args.control,
                      args.recording_pods))


if __name__ == "__main__":
    main()
