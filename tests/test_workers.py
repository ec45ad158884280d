"""`apiserver --workers 2`: two serving processes on one port, one cluster to every client.

Each worker has its own watch cache; what one acknowledges, a consistent read through the
other must show, and a watch through one sees writes made through the other. A worker
that dies takes the whole apiserver down (its supervisor exits), never half of it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support import ApiServer, Etcd, unique


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}]}}


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def established_connections(pid: int, port: int) -> int:
    """TCP connections of process `pid` accepted on `port` (from /proc, no tools needed)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


@pytest.fixture
def workers_apiserver(etcd: Etcd, tmp_path: Path) -> Iterator[ApiServer]:
    server = ApiServer(etcd, tmp_path, name="apiserver-workers", extra_args=[
        "--workers", "2", "--etcd-prefix", f"/{unique('workers')}"]).start()
    yield server
    server.stop()


async def test_two_workers_serve_one_consistent_cluster(workers_apiserver: ApiServer) -> None:
    url = f"{workers_apiserver.url}/api/v1/namespaces/default/pods"
    workers = children(workers_apiserver.process.pid)
    assert len(workers) == 2
    # many connections, kept open: the kernel spreads them over both workers
    clients = [workers_apiserver.client() for _ in range(16)]
    try:
        async with asyncio.timeout(60):
            while True:  # both workers up and serving namespaces (worker 0 creates them)
                answers = await asyncio.gather(*(c.get(url) for c in clients))
                if all(r.status_code == 200 for r in answers):
                    break
                await asyncio.sleep(0.2)
        per_worker = [established_connections(w, workers_apiserver.port) for w in workers]
        assert all(n > 0 for n in per_worker), per_worker

        watch = await clients[0].send(clients[0].build_request(
            "GET", url, params={"watch": "true", "resourceVersion": answers[0].json()[
                "metadata"]["resourceVersion"]}), stream=True)
        names = [f"p{i}" for i in range(16)]
        created = await asyncio.gather(*(c.post(url, json=pod(n))
                                         for c, n in zip(clients, names, strict=True)))
        assert [r.status_code for r in created] == [201] * 16
        newest = max(int(r.json()["metadata"]["resourceVersion"]) for r in created)

        # read your writes on every connection: a consistent LIST waits for the cache
        for listed in await asyncio.gather(*(c.get(url) for c in clients)):
            assert sorted(p["metadata"]["name"] for p in listed.json()["items"]) == sorted(names)
            assert int(listed.json()["metadata"]["resourceVersion"]) >= newest

        seen: set[str] = set()
        async with asyncio.timeout(30):
            async for line in watch.aiter_lines():
                event = orjson.loads(line)
                assert event["type"] == "ADDED"
                seen.add(event["object"]["metadata"]["name"])
                if seen == set(names):
                    break
        await watch.aclose()
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


def test_a_dead_worker_stops_the_whole_apiserver(workers_apiserver: ApiServer) -> None:
    workers = children(workers_apiserver.process.pid)
    os.kill(workers[1], signal.SIGKILL)
    assert workers_apiserver.process.proc is not None
    assert workers_apiserver.process.proc.wait(timeout=30) != 0
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}/stat") or _is_zombie(pid)
    assert "worker 1 exited with -9: stopping the others" in workers_apiserver.process.log()


def test_sigterm_stops_every_worker(workers_apiserver: ApiServer) -> None:
    workers = children(workers_apiserver.process.pid)
    assert workers_apiserver.process.proc is not None
    os.kill(workers_apiserver.process.pid, signal.SIGTERM)  # the supervisor alone, as systemd would
    assert workers_apiserver.process.proc.wait(timeout=30) == 0
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}/stat") or _is_zombie(pid)


def test_workers_must_be_a_positive_number(etcd: Etcd) -> None:
    result = subprocess.run([sys.executable, "-m", "apiserver", "--workers", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--workers: must be a whole number of at least 1" in result.stderr


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True
