"""`python -m apiserver --etcd-servers http://127.0.0.1:2379 --bind-address 127.0.0.1 --port 8080`.

With `--workers N` (N > 1) this process only supervises: it starts N worker processes of
the same command, each listening on the same port with SO_REUSEPORT (the kernel spreads
new connections over them) and each with its own watch cache. Every worker reads and
writes etcd directly, so what one acknowledges the others serve: a consistent LIST waits
until the worker's cache has caught up with etcd, a GET reads etcd. Worker 0 alone runs
the in-process controllers. When one worker dies the supervisor stops the others and
exits with its status, so that whatever restarts the apiserver restarts all of it.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import signal
import socket
import subprocess
import sys

import uvicorn

from apiserver.app import create_app

log = logging.getLogger("apiserver")


def parse_duration(text: str) -> int:
    """Seconds from `3600`, `1h`, `1h0m0s`, `90s` (kube's duration flags)."""
    if text.isdigit():
        return int(text)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"invalid duration: {text!r}")
    hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="apiserver", description="kubelite apiserver")
    p.add_argument("--etcd-servers", default="http://127.0.0.1:2379",
                   help="comma-separated etcd endpoints")
    p.add_argument("--etcd-prefix", default="/registry", help="key prefix in etcd")
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--event-ttl", type=parse_duration, default=3600,
                   help="how long events are kept (e.g. 1h)")
    p.add_argument("--etcd-compaction-interval", type=parse_duration, default=300,
                   help="how often etcd's history is compacted, keeping one interval "
                        "of it (e.g. 5m; 0 disables)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="serving processes on the one port (default 1)")
    p.add_argument("--authorization-mode", default="AlwaysAllow",
                   help="comma-separated authorizers, in order: AlwaysAllow, Node, RBAC")
    p.add_argument("--log-level", default="info")
    # set by the supervisor for the workers it starts
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    return p


def listen_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def worker_argv(argv: list[str], index: int) -> list[str]:
    """The command line of worker `index`: the supervisor's own, plus its index."""
    return [sys.executable, "-m", "apiserver", *argv, "--worker-index", str(index)]


def supervise(argv: list[str], workers: int) -> int:
    """Run `workers` workers until one exits or we are told to stop; their exit status."""
    children = [subprocess.Popen(worker_argv(argv, i)) for i in range(workers)]
    log.info("apiserver supervising %d workers (pids %s)", workers,
             ", ".join(str(c.pid) for c in children))
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    by_pid = {c.pid: i for i, c in enumerate(children)}
    status = 0
    while any(c.returncode is None for c in children):
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        if pid not in by_pid:
            continue
        child = children[by_pid[pid]]
        child.returncode = os.waitstatus_to_exitcode(wait_status)
        if not stopping:
            log.error("apiserver worker %d exited with %d: stopping the others",
                      by_pid[pid], child.returncode)
            status = child.returncode or 1
            stop(signal.SIGTERM, None)
    return status


def serve(args: argparse.Namespace) -> None:
    worker = args.worker_index
    app = create_app([s for s in args.etcd_servers.split(",") if s],
                     etcd_prefix=args.etcd_prefix, event_ttl=args.event_ttl,
                     compaction_interval=args.etcd_compaction_interval,
                     controllers=worker in (None, 0),
                     authorization_modes=args.authorization_mode.split(","))
    try:
        sock = listen_socket(args.bind_address, args.port, reuse_port=worker is not None)
    except OSError as e:
        log.error("apiserver cannot listen on %s:%d: %s", args.bind_address, args.port, e)
        sys.exit(1)
    # What is loaded by now (FastAPI, pydantic, gRPC: a few hundred thousand objects) lives
    # as long as the process: keep it out of the collector's full passes, each of which
    # otherwise stalls every request for 50+ ms (create p99 75 -> 30 ms under load).
    gc.freeze()
    config = uvicorn.Config(app, log_level=args.log_level.lower(), access_log=False,
                            timeout_graceful_shutdown=3, log_config=None,
                            # clients keep connections (informers, kubectl); closing idle
                            # ones after uvicorn's 5 s default races with their reuse
                            timeout_keep_alive=120)
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    args = parser().parse_args()
    worker = "" if args.worker_index is None else f"[{args.worker_index}]"
    logging.basicConfig(level=args.log_level.upper(),
                        format=f"%(asctime)s %(name)s{worker} %(levelname)s %(message)s")
    if args.workers > 1 and args.worker_index is None:
        sys.exit(supervise(sys.argv[1:], args.workers))
    serve(args)


if __name__ == "__main__":
    main()
