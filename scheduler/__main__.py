"""`python -m scheduler --apiserver http://127.0.0.1:8080` or `--kubeconfig scheduler.conf`"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re

from common.flags import boolean
from common.leaderelection import LeaderElectionConfig, timing_errors
from scheduler.main import DEFAULT_SCHEDULER_NAME, Options, serve
from scheduler.server import DEFAULT_BIND_ADDRESS, DEFAULT_PORT

DEFAULT_APISERVER = "http://127.0.0.1:8080"
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds of a Go-style duration flag: `15s`, `1.5s`, `500ms`, `1m`, or bare seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d*)?)(ms|s|m|h)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 15s, 500ms)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scheduler",
                                     description="kubelite's scheduler: binds unbound pods "
                                                 "to nodes, and says why when it cannot.")
    parser.add_argument("--apiserver", default=None,
                        help=f"apiserver URL (default: the kubeconfig's server, else "
                             f"{DEFAULT_APISERVER})")
    parser.add_argument("--kubeconfig", default=None,
                        help="a kubeconfig: the apiserver, its CA, the scheduler's "
                             "credentials (kube-scheduler's flag)")
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
    election = parser.add_argument_group("leader election (kube-scheduler's flags)")
    election.add_argument("--leader-elect", type=boolean, nargs="?", const=True, default=True,
                          metavar="BOOL",
                          help="only the holder of a Lease schedules; others wait to take "
                               "over (default: true)")
    election.add_argument("--leader-elect-lease-duration", type=duration, default=15.0,
                          metavar="DURATION",
                          help="how long a lease stays valid after its last renewal "
                               "(default: 15s)")
    election.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0,
                          metavar="DURATION",
                          help="the leader stops when it could not renew for this long "
                               "(default: 10s)")
    election.add_argument("--leader-elect-retry-period", type=duration, default=2.0,
                          metavar="DURATION",
                          help="between two attempts to acquire or renew (default: 2s)")
    election.add_argument("--leader-elect-resource-namespace", default="kube-system",
                          help="namespace of the Lease (default: %(default)s)")
    election.add_argument("--leader-elect-resource-name", default="kube-scheduler",
                          help="name of the Lease (default: %(default)s)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    errors = timing_errors(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                           args.leader_elect_retry_period)
    if args.leader_elect and errors:
        parser.error("; ".join(errors))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    apiserver = args.apiserver or ("" if args.kubeconfig else DEFAULT_APISERVER)
    options = Options(apiserver=apiserver, kubeconfig=args.kubeconfig,
                      scheduler_name=args.scheduler_name,
                      parallelism=args.parallelism,
                      percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
                      bind_address=args.bind_address, port=args.port,
                      leader_elect=args.leader_elect,
                      leader_election=LeaderElectionConfig(
                          namespace=args.leader_elect_resource_namespace,
                          name=args.leader_elect_resource_name,
                          lease_duration=args.leader_elect_lease_duration,
                          renew_deadline=args.leader_elect_renew_deadline,
                          retry_period=args.leader_elect_retry_period))
    asyncio.run(serve(options))


if __name__ == "__main__":
    main()
