"""`python -m scheduler --apiserver http://127.0.0.1:8080`"""

from __future__ import annotations

import argparse
import asyncio
import logging

from scheduler.main import DEFAULT_SCHEDULER_NAME, Options, serve
from scheduler.server import DEFAULT_BIND_ADDRESS, DEFAULT_PORT


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scheduler",
                                     description="kubelite's scheduler: binds unbound pods "
                                                 "to nodes, and says why when it cannot.")
    parser.add_argument("--apiserver", default="http://127.0.0.1:8080",
                        help="apiserver URL (default: %(default)s)")
    parser.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                        help="schedule pods whose spec.schedulerName is this "
                             "(default: %(default)s)")
    parser.add_argument("--parallelism", type=int, default=8,
                        help="binds in flight at once (default: %(default)s)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=0,
                        help="stop filtering after this %% of nodes were found feasible; "
                             "0 = kube's adaptive default")
    parser.add_argument("--bind-address", default=DEFAULT_BIND_ADDRESS,
                        help="address of the /healthz, /livez, /readyz and /metrics endpoint "
                             "(default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="its port, plain HTTP (default: %(default)s, kube-scheduler's); "
                             "0 serves none")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    options = Options(apiserver=args.apiserver, scheduler_name=args.scheduler_name,
                      parallelism=args.parallelism,
                      percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
                      bind_address=args.bind_address, port=args.port)
    asyncio.run(serve(options))


if __name__ == "__main__":
    main()
