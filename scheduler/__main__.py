"""`python -m scheduler --apiserver http://127.0.0.1:8080` or `--kubeconfig scheduler.conf`"""

from __future__ import annotations

import argparse
import asyncio

from common import component
from scheduler.main import DEFAULT_SCHEDULER_NAME, Options, serve
from scheduler.server import DEFAULT_BIND_ADDRESS, DEFAULT_PORT


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scheduler",
                                     description="kubelite's scheduler: binds unbound pods "
                                                 "to nodes, and says why when it cannot.")
    component.add_connection_flags(parser, "scheduler")
    parser.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                        help="schedule pods whose spec.schedulerName is this "
                             "(default: %(default)s)")
    parser.add_argument("--parallelism", type=int, default=8,
                        help="binds in flight at once (default: %(default)s)")
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=0,
                        help="stop filtering after this %% of nodes were found feasible; "
                             "0 = kube's adaptive default")
    component.add_endpoint_flags(parser, bind_address=DEFAULT_BIND_ADDRESS, port=DEFAULT_PORT,
                                 kube_name="kube-scheduler")
    component.add_leader_election_flags(parser, lease_name="kube-scheduler",
                                        kube_name="kube-scheduler")
    component.add_log_level_flag(parser)
    args = parser.parse_args(argv)
    errors = component.leader_election_errors(args)
    if errors:
        parser.error("; ".join(errors))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    component.setup_logging(args.log_level)
    options = Options(apiserver=component.apiserver_of(args), kubeconfig=args.kubeconfig,
                      scheduler_name=args.scheduler_name,
                      parallelism=args.parallelism,
                      percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
                      bind_address=args.bind_address, port=args.port,
                      leader_elect=args.leader_elect,
                      leader_election=component.leader_election_config(args))
    asyncio.run(serve(options))


if __name__ == "__main__":
    main()
