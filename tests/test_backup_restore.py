"""Backup and restore (hack/etcd_snapshot.py, `make backup` / `make restore`).

End to end on real processes: pods and a Deployment run on a kubelet on Docker; a snapshot
is saved; the pods are deleted (the ReplicaSet makes new ones) and a pod that the snapshot
does not have is created; etcd and the apiserver stop, the snapshot is restored, they start
again. The scheduler, the controller-manager and the kubelet keep running through it all
(kube's docs advise restarting them; kubelite's must not need it): the snapshot's pods are
back and Running with exactly one sandbox and one container each, what came after the
snapshot is gone from the API and from Docker, and the ReplicaSet holds its count.

And the tool's pure parts: arguments, defaults, the refusal while etcd is up.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hack import etcd_snapshot
from tests.cm_support import ControllerManagerProcess
from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    node_containers,
    remove_node_containers,
)
from tests.support import (
    PYTHON,
    REPO,
    ApiServer,
    Etcd,
    Kubectl,
    SchedulerProcess,
    eventually,
    unique,
)

TOOL = str(REPO / "hack" / "etcd_snapshot.py")


# --- the tool's pure parts --------------------------------------------------------------


def test_restore_needs_a_snapshot_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        etcd_snapshot.parse_args(["restore"])
    assert exited.value.code == 2
    assert "restore needs the snapshot file" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "error"), [
    (["restore", "s.db", "--ha", "--data-dir", "/tmp/d", "--name", "x"],
     "--data-dir, --name: not with --ha"),
    (["save", "--ha", "--endpoints", "https://127.0.0.1:1"], "--endpoints: not with --ha"),
    (["save", "--etcd-members", "5"], "--etcd-members goes with --ha"),
    (["save", "--ha", "--etcd-members", "0"], "--etcd-members must be at least 1"),
])
def test_flags_that_would_be_ignored_are_refused(argv: list[str], error: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        etcd_snapshot.parse_args(argv)
    assert exited.value.code == 2
    assert error in capsys.readouterr().err


def test_defaults_are_the_make_up_cluster(tmp_path: Path) -> None:
    args = etcd_snapshot.parse_args(["save", "--state-dir", str(tmp_path)])
    assert args.snapshot is None
    connection = etcd_snapshot.connection_of(args)
    assert connection.endpoint == "https://127.0.0.1:2379"
    assert connection.etcdctl_flags() == [
        "--endpoints", "https://127.0.0.1:2379",
        "--cacert", str(tmp_path / "pki" / "etcd" / "ca.crt"),
        "--cert", str(tmp_path / "pki" / "apiserver-etcd-client.crt"),
        "--key", str(tmp_path / "pki" / "apiserver-etcd-client.key")]
    assert connection.missing_files()[0] == tmp_path / "pki" / "etcd" / "ca.crt"
    assert etcd_snapshot.default_snapshot(tmp_path, 0.0) == (
        tmp_path / "backups" / "etcd-snapshot-19700101T000000Z.db")


def test_plain_http_etcd_gets_no_tls_flags(tmp_path: Path) -> None:
    args = etcd_snapshot.parse_args(["save", "s.db", "--endpoints", "http://127.0.0.1:4001",
                                     "--state-dir", str(tmp_path)])
    connection = etcd_snapshot.connection_of(args)
    assert connection.etcdctl_flags() == ["--endpoints", "http://127.0.0.1:4001"]
    assert connection.missing_files() == []


def test_refusal_while_anything_runs() -> None:
    assert etcd_snapshot.refusal(etcd_answers=False, endpoint="e", launcher_pid=None) is None
    assert "etcd is running on https://x:1" in str(etcd_snapshot.refusal(
        etcd_answers=True, endpoint="https://x:1", launcher_pid=None))
    assert "pid 42" in str(etcd_snapshot.refusal(etcd_answers=True, endpoint="e",
                                                 launcher_pid=42))


def test_restore_refuses_while_etcd_answers(tmp_path: Path) -> None:
    """A listening etcd port: one line on stderr, exit code 1, nothing touched."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        data_dir = tmp_path / "etcd"
        data_dir.mkdir()
        done = subprocess.run(
            [PYTHON, TOOL, "restore", str(tmp_path / "s.db"), "--state-dir", str(tmp_path),
             "--endpoints", f"http://127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"etcd_snapshot: etcd is running on http://127.0.0.1:{port}: stop it (and every "
        "apiserver) first, then restore"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["etcd"]


def test_bump_target_goes_past_everything_served() -> None:
    assert etcd_snapshot.bump_target(100, None) is None  # nothing was ever served here
    assert etcd_snapshot.bump_target(100, 250) == 250 + etcd_snapshot.BUMP_MARGIN
    assert etcd_snapshot.bump_target(100, 100) == 100 + etcd_snapshot.BUMP_MARGIN


def test_the_old_data_is_moved_aside_never_over_anything(tmp_path: Path) -> None:
    data_dir = tmp_path / "etcd"
    first = etcd_snapshot.aside_path(data_dir, 0.0)
    assert first.name == "etcd.before-restore-19700101T000000Z"
    first.mkdir()
    second = etcd_snapshot.aside_path(data_dir, 0.0)
    assert second.name == "etcd.before-restore-19700101T000000Z-2"


def test_status_of_etcdctl_json() -> None:
    status = etcd_snapshot.parse_status(
        '{"hash":3448797162,"revision":4,"totalKey":7,"totalSize":20480}')
    assert status == etcd_snapshot.SnapshotStatus(revision=4, keys=7, size=20480,
                                                  hash=3448797162)


# --- end to end -------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, TOOL, *args], capture_output=True, text=True, timeout=180)


def moved_aside(workdir: Path) -> list[Path]:
    return [p for p in workdir.iterdir() if p.name.startswith("etcd-data.before-restore-")]


async def pods(apiserver: ApiServer) -> dict[str, dict[str, Any]]:
    async with apiserver.client() as api:
        answer = await api.get("/api/v1/namespaces/default/pods")
    answer.raise_for_status()
    return {p["metadata"]["name"]: p for p in answer.json()["items"]}


def running_containers(node: str, uid: str) -> list[dict[str, Any]]:
    return [c for c in node_containers(node, **{"io.kubernetes.pod.uid": uid})
            if c["State"] == "running"]


def containers_of(node: str, uid: str) -> list[dict[str, Any]]:
    return node_containers(node, **{"io.kubernetes.pod.uid": uid})


def one_container_set(node: str, pod: dict[str, Any]) -> bool:
    """The pod's sandbox and its one container running, nothing else of it running, and its
    status names that very container (the kubelet reported what Docker runs now)."""
    running = running_containers(node, pod["metadata"]["uid"])
    kinds = sorted(c["Labels"].get("io.kubernetes.docker.type", "") for c in running)
    if kinds != ["container", "podsandbox"]:
        return False
    container = next(c for c in running if c["Labels"]["io.kubernetes.docker.type"] == "container")
    statuses = pod["status"].get("containerStatuses") or []
    return (pod["status"].get("phase") == "Running" and len(statuses) == 1
            and statuses[0].get("containerID") == f"docker://{container['Id']}")


@pytest.fixture
def cluster(workdir: Path) -> Iterator[tuple[Etcd, ApiServer, Kubectl, str, list[Any]]]:
    ensure_docker()
    node = unique("restore-node")
    etcd = Etcd(workdir).start()
    apiserver = ApiServer(etcd, workdir).start()
    others: list[Any] = [
        SchedulerProcess(apiserver, workdir, port=0, leader_elect=False).start(),
        ControllerManagerProcess(apiserver, workdir,
                                 extra_args=("--leader-elect=false",)).start(),
        KubeletProcess(apiserver, workdir, node_name=node).start(),
    ]
    try:
        yield etcd, apiserver, Kubectl(apiserver, workdir / "kubectl"), node, others
    finally:
        for process in reversed(others):
            process.stop()
        apiserver.stop()
        etcd.stop()
        remove_node_containers(node)


async def test_restore_brings_back_the_snapshot_and_the_kubelet_reconciles(
        workdir: Path, cluster: tuple[Etcd, ApiServer, Kubectl, str, list[Any]]) -> None:
    etcd, apiserver, kubectl, node, others = cluster
    kept = [unique("kept"), unique("kept")]
    for name in kept:
        kubectl.apply_pod(name, {"nodeSelector": {"kubernetes.io/hostname": node},
                                 "terminationGracePeriodSeconds": 1, "containers": [
                                     {"name": "app", "image": "kubelite/busybox:1.35",
                                      "command": ["sleep", "3600"]}]})
    deployment = unique("web")
    kubectl("create", "deployment", deployment, "--image=kubelite/busybox:1.35",
            "--replicas=2", "--", "sleep", "3600")
    kubectl.run("rollout", "status", f"deployment/{deployment}", "--timeout=120s")

    async def all_running() -> dict[str, dict[str, Any]] | None:
        now = await pods(apiserver)
        ours = {n: p for n, p in now.items() if n in kept or n.startswith(deployment)}
        return ours if len(ours) == 4 and all(
            one_container_set(node, p) for p in ours.values()) else None
    before = await eventually(all_running, timeout=120, what="4 pods Running")

    snapshot = workdir / "backups" / "before.db"
    saved = run_tool("save", str(snapshot), "--endpoints", etcd.endpoint,
                     "--state-dir", str(workdir))
    assert saved.returncode == 0, saved.stderr
    line, = saved.stdout.splitlines()
    assert line.startswith(f"saved {snapshot}: revision ") and " keys, " in line, line
    assert snapshot.stat().st_size > 0

    # After the snapshot: every pod deleted (the ReplicaSet replaces its two), one new pod.
    kubectl("delete", "pod", *before, "--wait=true", "--timeout=120s")
    after = unique("after")
    kubectl.apply_pod(after, {"nodeSelector": {"kubernetes.io/hostname": node},
                              "terminationGracePeriodSeconds": 1, "containers": [
                                  {"name": "app", "image": "kubelite/busybox:1.35",
                                   "command": ["sleep", "3600"]}]})

    async def changed() -> dict[str, dict[str, Any]] | None:
        now = await pods(apiserver)
        if set(now) & set(before):
            return None
        new = {n: p for n, p in now.items() if n == after or n.startswith(deployment)}
        if len(new) != 3 or not all(one_container_set(node, p) for p in new.values()):
            return None
        gone = [p["metadata"]["uid"] for p in before.values()]
        return new if not any(containers_of(node, uid) for uid in gone) else None
    post_snapshot = await eventually(changed, timeout=120,
                                     what="the deleted pods' containers gone, 3 new pods")

    # Restore refuses while etcd runs: one line, and nothing moved.
    refused = run_tool("restore", str(snapshot), "--endpoints", etcd.endpoint,
                       "--state-dir", str(workdir), "--data-dir", str(workdir / "etcd-data"))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (f"etcd_snapshot: etcd is running on {etcd.endpoint}: "
                                      "stop it (and every apiserver) first, then restore")

    # kube's order: stop the apiservers, restore etcd, start etcd and then the apiservers.
    apiserver.stop()
    etcd.stop()
    peer = f"http://127.0.0.1:{etcd.peer_port}"
    restored = run_tool("restore", str(snapshot), "--endpoints", etcd.endpoint,
                        "--state-dir", str(workdir), "--data-dir", str(workdir / "etcd-data"),
                        "--name", "default", "--initial-advertise-peer-urls", peer)
    assert restored.returncode == 0, restored.stderr
    out = restored.stdout.splitlines()
    assert out[0].startswith(f"restored {workdir / 'etcd-data'} from {snapshot}: revision ")
    aside = moved_aside(workdir)
    assert len(aside) == 1 and (aside[0] / "member" / "snap" / "db").is_file()
    assert f"is now {aside[0]}" in out[1]
    assert out[2].startswith("revision moved forward to ") and "compacted" in out[2]
    etcd.start()
    apiserver.start()

    async def converged() -> bool:
        now = await pods(apiserver)
        ours = {n for n in now if n in kept or n == after or n.startswith(deployment)}
        if ours != set(before):
            return False
        if any(not one_container_set(node, now[n]) for n in before):
            return False
        return not any(containers_of(node, p["metadata"]["uid"])
                       for p in post_snapshot.values())
    await eventually(converged, timeout=180, interval=1,
                     what="the snapshot's pods Running, the later pods gone from Docker")
    now = await pods(apiserver)
    assert {n: p["metadata"]["uid"] for n, p in now.items() if n in before} == {
        n: p["metadata"]["uid"] for n, p in before.items()}

    rs = json.loads(kubectl("get", "rs", "-l", f"app={deployment}", "-o", "json"))["items"]
    assert len(rs) == 1
    assert rs[0]["spec"]["replicas"] == 2
    assert rs[0]["status"].get("replicas") == 2
    # Nobody was restarted: each informer's watch found its resourceVersion compacted
    # (410 Gone) and it listed again.
    for process in others:
        assert process.process.alive(), process.process.log()[-3000:]
        assert "expired (too old resource version: " in process.process.log()



def test_without_the_old_data_the_revision_stays_and_restore_says_so(tmp_path: Path) -> None:
    """The old data directory lost with the disk: nothing says how far clients got, so the
    revision stays at the snapshot's (kube's answer then: restart every component), and
    the restored etcd holds what the snapshot held, not what came after."""
    etcd = Etcd(tmp_path).start()
    try:
        with httpx.Client(base_url=etcd.endpoint, timeout=10) as api:
            put(api, "/kubelite-test/kept")
            snapshot = tmp_path / "s.db"
            saved = run_tool("save", str(snapshot), "--endpoints", etcd.endpoint,
                             "--state-dir", str(tmp_path))
            assert saved.returncode == 0, saved.stderr
            snapshot_revision = int(saved.stdout.split("revision ")[1].split(",")[0])
            for i in range(20):
                put(api, f"/kubelite-test/lost-{i}")
        etcd.stop()
        shutil.rmtree(tmp_path / "etcd-data")
        restored = run_tool("restore", str(snapshot), "--endpoints", etcd.endpoint,
                            "--state-dir", str(tmp_path), "--data-dir",
                            str(tmp_path / "etcd-data"), "--name", "default",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd.peer_port}")
        assert restored.returncode == 0, restored.stderr
        assert restored.stdout.splitlines() == [
            f"restored {tmp_path / 'etcd-data'} from {snapshot}: revision {snapshot_revision}, "
            f"{saved.stdout.split(', ')[1]}",
            "no older data directory: the revision stays where the snapshot has it; restart "
            "the scheduler, controller-manager and kubelets too",
            "start the cluster again: make up (etcd, then the apiserver, then the rest)"]
        etcd.start()
        with httpx.Client(base_url=etcd.endpoint, timeout=10) as api:
            answer = api.post("/v3/kv/range", json={
                "key": b64("/kubelite-test/"), "range_end": b64("/kubelite-test0")}).json()
        assert [base64.b64decode(kv["key"]).decode() for kv in answer["kvs"]] == [
            "/kubelite-test/kept"]
        assert int(answer["header"]["revision"]) == snapshot_revision
    finally:
        etcd.stop()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def put(api: httpx.Client, key: str) -> None:
    api.post("/v3/kv/put", json={"key": b64(key), "value": b64("{}")}).raise_for_status()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
