"""`python -m apiserver --etcd-servers http://127.0.0.1:2379 --bind-address 127.0.0.1 --port 8080`."""

from __future__ import annotations

import argparse
import gc
import logging
import re

import uvicorn

from apiserver.app import create_app


def parse_duration(text: str) -> int:
    """Seconds from `3600`, `1h`, `1h0m0s`, `90s` (kube's duration flags)."""
    if text.isdigit():
        return int(text)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"invalid duration: {text!r}")
    hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def main() -> None:
    parser = argparse.ArgumentParser(prog="apiserver", description="kubelite apiserver")
    parser.add_argument("--etcd-servers", default="http://127.0.0.1:2379",
                        help="comma-separated etcd endpoints")
    parser.add_argument("--etcd-prefix", default="/registry", help="key prefix in etcd")
    parser.add_argument("--bind-address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--event-ttl", type=parse_duration, default=3600,
                        help="how long events are kept (e.g. 1h)")
    parser.add_argument("--etcd-compaction-interval", type=parse_duration, default=300,
                        help="how often etcd's history is compacted, keeping one interval "
                             "of it (e.g. 5m; 0 disables)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = create_app([s for s in args.etcd_servers.split(",") if s],
                     etcd_prefix=args.etcd_prefix, event_ttl=args.event_ttl,
                     compaction_interval=args.etcd_compaction_interval)
    # What is loaded by now (FastAPI, pydantic, gRPC: a few hundred thousand objects) lives
    # as long as the process: keep it out of the collector's full passes, each of which
    # otherwise stalls every request for 50+ ms (create p99 75 -> 30 ms under load).
    gc.freeze()
    uvicorn.run(app, host=args.bind_address, port=args.port, log_level=args.log_level.lower(),
                access_log=False, timeout_graceful_shutdown=3, log_config=None,
                # clients keep connections (informers, kubectl); closing idle ones after
                # uvicorn's 5 s default races with their reuse (a ReadError on the client)
                timeout_keep_alive=120)


if __name__ == "__main__":
    main()
