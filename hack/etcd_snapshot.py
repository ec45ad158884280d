"""`make backup` / `make restore`: an etcd snapshot of the cluster, and the cluster back from one.

    .venv/bin/python hack/etcd_snapshot.py save [FILE]      # default: <state-dir>/backups/...
    .venv/bin/python hack/etcd_snapshot.py restore FILE

Both wrap Debian's etcdctl (etcd-client, etcd 3.4), with the `make up` cluster's endpoint
and TLS as defaults (hack/up.py: https://127.0.0.1:2379, certificates of <state-dir>/pki/etcd's
CA): `save` is `etcdctl snapshot save` followed by `snapshot status`, and prints the
revision, the keys and the size it saved.

`restore` is kube's "Restoring an etcd cluster": it refuses to run while the cluster's etcd
answers (stop the whole cluster first: kube stops every apiserver before a restore), runs
`etcdctl snapshot restore` into a fresh data directory next to the old one, moves the old
one aside (<data-dir>.before-restore-<time>, never deleted) and the new one into its place.

Restoring moves etcd's revision back, below resourceVersions that every informer has
seen: a watch from one of them would wait for revisions that now belong to other writes
and miss what happened in between. etcd 3.6 restores with `etcdutl snapshot restore
--bump-revision N --mark-compacted` for Kubernetes; etcd 3.4 has neither, so `restore`
does the same by hand: it starts the restored etcd on a private loopback port, writes
until its revision is past the old data directory's (plus BUMP_MARGIN, as the old data's
last writes may not be in its db file yet), and compacts there. Every resourceVersion a
client holds is then compacted away: its watch gets 410 Gone and it lists again, as after
any compaction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from apiserver.storage import Storage, StorageError  # noqa: E402

DEFAULT_STATE_DIR = REPO / ".kubelite"
DEFAULT_ENDPOINT = "https://127.0.0.1:2379"
DEFAULT_PEER_URL = "https://127.0.0.1:2380"
DEFAULT_NAME = "kubelite"  # hack/up.py's --name and --initial-cluster
CLUSTER_TOKEN = "kubelite"  # --initial-cluster-token: the same for every restored member
# Revisions written past the old data's last one: its db file may lag its write-ahead log
# by up to one backend batch (etcd 3.4 commits every 100 ms or 10,000 writes).
BUMP_MARGIN = 10_000
BUMP_CONCURRENCY = 64
# The key the bump writes (outside /registry/, so no resource lists or watches it).
BUMP_KEY = "/kubelite/restore"
ETCDCTL_TIMEOUT = 120.0


class UserError(Exception):
    """A problem the user can fix; its message is the one line we print."""


@dataclass(frozen=True)
class Connection:
    """How etcdctl reaches the cluster's etcd."""

    endpoint: str
    cacert: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    @property
    def secure(self) -> bool:
        return urlsplit(self.endpoint).scheme == "https"

    def etcdctl_flags(self) -> list[str]:
        flags = ["--endpoints", self.endpoint]
        if self.secure:
            for flag, path in (("--cacert", self.cacert), ("--cert", self.cert),
                               ("--key", self.key)):
                if path is not None:
                    flags += [flag, str(path)]
        return flags

    def missing_files(self) -> list[Path]:
        if not self.secure:
            return []
        return [p for p in (self.cacert, self.cert, self.key) if p is not None and not p.exists()]


@dataclass(frozen=True)
class Member:
    """One etcd member to restore: its name, data directory and peer URL."""

    name: str
    data_dir: Path
    peer_url: str


def initial_cluster(members: Sequence[Member]) -> str:
    return ",".join(f"{m.name}={m.peer_url}" for m in members)


def ha_members(state_dir: Path, count: int) -> list[Member]:
    """`make up-ha`'s members (hack/up.py --ha): etcd-N on 127.0.1.N, data in <state>/etcd-N."""
    return [Member(f"etcd-{i}", state_dir / f"etcd-{i}", f"https://127.0.1.{i}:2380")
            for i in range(1, count + 1)]


def ha_endpoints(count: int) -> list[str]:
    return [f"https://127.0.1.{i}:2379" for i in range(1, count + 1)]


@dataclass(frozen=True)
class SnapshotStatus:
    """`etcdctl snapshot status -w json`."""

    revision: int
    keys: int
    size: int
    hash: int


def parse_status(text: str) -> SnapshotStatus:
    data = json.loads(text)
    return SnapshotStatus(revision=int(data["revision"]), keys=int(data["totalKey"]),
                          size=int(data["totalSize"]), hash=int(data["hash"]))


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname or "127.0.0.1", parts.port or 2379


def stamp(now: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def default_snapshot(state_dir: Path, now: float) -> Path:
    return state_dir / "backups" / f"etcd-snapshot-{stamp(now)}.db"


def aside_path(data_dir: Path, now: float) -> Path:
    """Where the old data directory goes: next to it, never over anything."""
    candidate = data_dir.with_name(f"{data_dir.name}.before-restore-{stamp(now)}")
    number = 1
    while candidate.exists():
        number += 1
        candidate = data_dir.with_name(f"{data_dir.name}.before-restore-{stamp(now)}-{number}")
    return candidate


def bump_target(snapshot_revision: int, old_revision: int | None) -> int | None:
    """The revision the restored etcd must reach before anyone uses it (None: no bump,
    nothing newer than the snapshot was ever served from this data directory)."""
    if old_revision is None or old_revision < snapshot_revision:
        return None
    return old_revision + BUMP_MARGIN


def refusal(*, etcd_answers: bool, endpoint: str, launcher_pid: int | None) -> str | None:
    """Why restore must not run now, or None. Restoring under a running etcd (or a running
    `make up`, which would restart nothing and keep serving the old data) is what kube's
    docs forbid: stop every apiserver and etcd first."""
    if launcher_pid is not None:
        return (f"kubelite is running (make up, pid {launcher_pid}): stop it first (Ctrl-C in "
                "its terminal or `make down`), then restore")
    if etcd_answers:
        return (f"etcd is running on {endpoint}: stop it (and every apiserver) first, "
                "then restore")
    return None


# --- I/O ------------------------------------------------------------------------------


def etcdctl_binary() -> str:
    found = shutil.which("etcdctl")
    if not found:
        raise UserError("etcdctl is not installed: run `make deps` (apt-get install etcd-client)")
    return found


def run_etcdctl(args: Sequence[str], *, timeout: float = ETCDCTL_TIMEOUT) -> str:
    """etcdctl's stdout; its log lines (stderr) only in the one-line error."""
    command = [etcdctl_binary(), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "ETCDCTL_API": "3"})
    except subprocess.TimeoutExpired:
        raise UserError(f"etcdctl {args[0]} {args[1]} did not finish in {timeout:.0f}s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise UserError(f"etcdctl {' '.join(args[:2])} failed: "
                        f"{lines[-1] if lines else f'exit code {done.returncode}'}")
    return done.stdout


def snapshot_status(path: Path) -> SnapshotStatus:
    return parse_status(run_etcdctl(["snapshot", "status", str(path), "-w", "json"]))


def port_answers(url: str) -> bool:
    host, port = host_port(url)
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def running_launcher(state_dir: Path) -> int | None:
    """The pid of a `make up` still running on this state directory (its up.pid)."""
    try:
        pid = int(json.loads((state_dir / "up.pid").read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if any(arg.endswith(b"up.py") for arg in cmdline) else None


def etcd_healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def save(connection: Connection, path: Path) -> SnapshotStatus:
    missing = connection.missing_files()
    if missing:
        raise UserError(f"{missing[0]} is missing: is this the cluster's state directory "
                        "(--state-dir), or give --cacert/--cert/--key")
    if not port_answers(connection.endpoint):
        raise UserError(f"no etcd answers on {connection.endpoint}: start the cluster "
                        "(make up) or give --endpoints")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_etcdctl([*connection.etcdctl_flags(), "snapshot", "save", str(path)])
    return snapshot_status(path)


async def bump_and_compact(endpoint: str, target: int) -> int:
    """Write BUMP_KEY until etcd's revision reaches `target`, then compact there."""
    storage = Storage([endpoint])
    await storage.start()
    try:
        revision = await storage.revision()
        while revision < target:
            batch = min(BUMP_CONCURRENCY, target - revision)
            written = await asyncio.gather(*(storage.bump_revision(BUMP_KEY)
                                             for _ in range(batch)))
            revision = max(written)
        await storage.compact(revision)
        return revision
    finally:
        await storage.close()


def start_private_etcd(data_dir: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The restored member on loopback ports of its own, plain HTTP, for the bump only."""
    client = f"http://127.0.0.1:{free_loopback_port()}"
    peer = f"http://127.0.0.1:{free_loopback_port()}"
    etcd = shutil.which("etcd") or "/usr/bin/etcd"
    log = open(workdir / "etcd.log", "wb")  # noqa: SIM115 - the child's
    process = subprocess.Popen(
        [etcd, "--data-dir", str(data_dir), "--name", "restore", "--listen-client-urls", client,
         "--advertise-client-urls", client, "--listen-peer-urls", peer, "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, "ETCD_UNSUPPORTED_ARCH": "arm64"}, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while not etcd_healthy(client):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            tail = (workdir / "etcd.log").read_text(errors="replace").strip().splitlines()
            raise UserError("the restored etcd did not start: "
                            f"{tail[-1] if tail else 'no output'}")
        time.sleep(0.1)
    return process, client


def bump(data_dir: Path, target: int) -> int:
    with tempfile.TemporaryDirectory(prefix="kubelite-restore-") as workdir:
        process, client = start_private_etcd(data_dir, Path(workdir))
        try:
            return asyncio.run(bump_and_compact(client, target))
        except StorageError as e:
            raise UserError(f"could not move the restored etcd's revision forward: {e}") from None
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass(frozen=True)
class Restored:
    snapshot: SnapshotStatus
    old_revision: int | None
    aside: list[Path]  # the old data directories, moved aside
    revision: int  # where the restored etcd starts


def restore_member(source: Path, member: Member, members: Sequence[Member], into: Path, *,
                   from_data_dir: bool) -> None:
    """`etcdctl snapshot restore` of one member: its name and peer URL in a cluster of
    `members`. A db file taken from a data directory has no snapshot hash to check."""
    run_etcdctl(["snapshot", "restore", str(source), "--data-dir", str(into),
                 "--name", member.name, "--initial-cluster", initial_cluster(members),
                 "--initial-cluster-token", CLUSTER_TOKEN,
                 "--initial-advertise-peer-urls", member.peer_url,
                 *(["--skip-hash-check"] if from_data_dir else [])])


def restore(snapshot: Path, *, members: Sequence[Member], endpoints: Sequence[str],
            state_dir: Path, now: float) -> Restored:
    """Every member's data directory from `snapshot`, moved into place only once all are
    made. When a member's old data had served revisions past the snapshot's, the
    snapshot is first restored alone in a staging directory, its revision moved past
    them and compacted there (bump), and every member is restored from that db: the
    members of a cluster must start from the same data."""
    answering = next((url for url in endpoints if port_answers(url)), None)
    reason = refusal(etcd_answers=answering is not None, endpoint=answering or "",
                     launcher_pid=running_launcher(state_dir))
    if reason:
        raise UserError(reason)
    if not snapshot.is_file():
        raise UserError(f"{snapshot}: no such snapshot file")
    status = snapshot_status(snapshot)
    old_revisions = [snapshot_status(db).revision for m in members
                     if (db := m.data_dir / "member" / "snap" / "db").is_file()]
    old_revision = max(old_revisions) if old_revisions else None
    fresh = {m.name: m.data_dir.with_name(f"{m.data_dir.name}.restoring-{stamp(now)}")
             for m in members}
    for path in fresh.values():
        if path.exists():
            raise UserError(f"{path} exists (an interrupted restore?): move it away, then "
                            "again")
    revision = status.revision
    target = bump_target(status.revision, old_revision)
    staging = Path(tempfile.mkdtemp(prefix="kubelite-restore-"))
    try:
        source, from_data_dir = snapshot, False
        if target is not None:
            alone = Member("restore", staging / "etcd", "http://127.0.0.1:2380")
            restore_member(snapshot, alone, [alone], alone.data_dir, from_data_dir=False)
            revision = bump(alone.data_dir, target)
            source, from_data_dir = alone.data_dir / "member" / "snap" / "db", True
        for member in members:
            restore_member(source, member, members, fresh[member.name],
                           from_data_dir=from_data_dir)
    except BaseException:
        for path in fresh.values():  # ours, half made; the old data is untouched
            shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    aside = []
    for member in members:
        if member.data_dir.exists():
            aside.append(aside_path(member.data_dir, now))
            member.data_dir.rename(aside[-1])
        fresh[member.name].rename(member.data_dir)
    return Restored(status, old_revision, aside, revision)


# --- command line ---------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hack/etcd_snapshot.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["save", "restore"])
    parser.add_argument("snapshot", nargs="?", type=Path,
                        help="the snapshot file (save: default <state-dir>/backups/"
                             "etcd-snapshot-<UTC time>.db; restore: required)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                        help="the `make up` cluster's state (default: %(default)s)")
    parser.add_argument("--endpoints", default=DEFAULT_ENDPOINT,
                        help="etcd's client URL (default: %(default)s)")
    parser.add_argument("--cacert", type=Path, help="default: <state-dir>/pki/etcd/ca.crt")
    parser.add_argument("--cert", type=Path,
                        help="default: <state-dir>/pki/apiserver-etcd-client.crt")
    parser.add_argument("--key", type=Path,
                        help="default: <state-dir>/pki/apiserver-etcd-client.key")
    parser.add_argument("--data-dir", type=Path, help="restore: etcd's data directory "
                                                      "(default: <state-dir>/etcd)")
    parser.add_argument("--name", default=DEFAULT_NAME,
                        help="restore: the member's name (default: %(default)s)")
    parser.add_argument("--initial-advertise-peer-urls", dest="peer_url",
                        default=DEFAULT_PEER_URL,
                        help="restore: the member's peer URL (default: %(default)s)")
    parser.add_argument("--ha", action="store_true",
                        help="the `make up-ha` cluster: save from the first member that "
                             "answers (https://127.0.1.N:2379), restore every member "
                             "(<state-dir>/etcd-N, peer https://127.0.1.N:2380)")
    parser.add_argument("--etcd-members", type=int, default=None,
                        help="with --ha: how many members (default: 3)")
    args = parser.parse_args(argv)
    single_only = [flag for flag, given in (
        ("--endpoints", args.endpoints != DEFAULT_ENDPOINT), ("--data-dir", args.data_dir),
        ("--name", args.name != DEFAULT_NAME),
        ("--initial-advertise-peer-urls", args.peer_url != DEFAULT_PEER_URL)) if given]
    if args.ha and single_only:
        parser.error(f"{', '.join(single_only)}: not with --ha, whose members are "
                     "<state-dir>/etcd-N on 127.0.1.N")
    if not args.ha and args.etcd_members is not None:
        parser.error("--etcd-members goes with --ha")
    if args.etcd_members is None:
        args.etcd_members = 3
    elif args.etcd_members < 1:
        parser.error("--etcd-members must be at least 1")
    if args.command == "restore" and args.snapshot is None:
        parser.error("restore needs the snapshot file: hack/etcd_snapshot.py restore FILE "
                     "(make restore SNAPSHOT=FILE)")
    return args


def connection_of(args: argparse.Namespace) -> Connection:
    pki = args.state_dir / "pki"
    endpoint = args.endpoints
    if args.ha:
        endpoints = ha_endpoints(args.etcd_members)
        endpoint = next((url for url in endpoints if port_answers(url)), endpoints[0])
    return Connection(endpoint=endpoint,
                      cacert=args.cacert or pki / "etcd" / "ca.crt",
                      cert=args.cert or pki / "apiserver-etcd-client.crt",
                      key=args.key or pki / "apiserver-etcd-client.key")


def describe_restore(result: Restored, snapshot: Path, data_dirs: Sequence[Path], *,
                     ha: bool = False) -> list[str]:
    restored = ", ".join(str(d) for d in data_dirs)
    lines = [f"restored {restored} from {snapshot}: revision {result.snapshot.revision}, "
             f"{result.snapshot.keys} keys"]
    for aside in result.aside:
        lines.append(f"the old data directory (revision {result.old_revision}) is now "
                     f"{aside}")
    if result.revision != result.snapshot.revision:
        lines.append(f"revision moved forward to {result.revision} and compacted there, so "
                     "every client relists (etcdutl's --bump-revision --mark-compacted)")
    else:
        lines.append("no older data directory: the revision stays where the snapshot has it; "
                     "restart the scheduler, controller-manager and kubelets too")
    lines.append("start the cluster again: "
                 f"{'make up-ha' if ha else 'make up'} (etcd, then the apiserver, then the rest)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    connection = connection_of(args)
    now = time.time()
    try:
        if args.command == "save":
            path = args.snapshot or default_snapshot(args.state_dir, now)
            status = save(connection, path)
            print(f"saved {path}: revision {status.revision}, {status.keys} keys, "
                  f"{status.size} bytes (hash {status.hash:08x})", flush=True)
            return 0
        if args.ha:
            members = ha_members(args.state_dir, args.etcd_members)
            endpoints = ha_endpoints(args.etcd_members)
        else:
            members = [Member(args.name, args.data_dir or args.state_dir / "etcd",
                              args.peer_url)]
            endpoints = [connection.endpoint]
        result = restore(args.snapshot, members=members, endpoints=endpoints,
                         state_dir=args.state_dir, now=now)
        for line in describe_restore(result, args.snapshot, [m.data_dir for m in members],
                                     ha=args.ha):
            print(line, flush=True)
        return 0
    except UserError as e:
        print(f"etcd_snapshot: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
