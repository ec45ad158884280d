"""`python -m controller_manager --kubeconfig controller-manager.conf [--apiserver URL]`"""

from __future__ import annotations

import argparse
import asyncio
import logging

from common.flags import boolean
from common.leaderelection import LeaderElectionConfig, timing_errors
from controller_manager.app import (
    CONTROLLERS,
    DEFAULT_BIND_ADDRESS,
    DEFAULT_PORT,
    LEASE_NAME,
    Options,
    controller_flag_errors,
    serve,
)
from controller_manager.nodelifecycle import Config as NodeLifecycleConfig
from scheduler.__main__ import duration

DEFAULT_APISERVER = "http://127.0.0.1:8080"


def controller_list(text: str) -> list[str]:
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m controller_manager",
        description="kubelite's controller-manager: the controllers that turn desired "
                    "state into objects (kube-controller-manager's flags).")
    parser.add_argument("--apiserver", default=None,
                        help=f"apiserver URL (default: the kubeconfig's server, else "
                             f"{DEFAULT_APISERVER})")
    parser.add_argument("--kubeconfig", default=None,
                        help="a kubeconfig: the apiserver, its CA, the controller-manager's "
                             "credentials")
    known = ", ".join(spec.name for spec in CONTROLLERS)
    parser.add_argument("--controllers", type=controller_list, default=["*"],
                        metavar="LIST",
                        help="'*' enables all on-by-default controllers, 'foo' enables foo, "
                             f"'-foo' disables foo (default: *). Known: {known}")
    parser.add_argument("--concurrent-syncs", type=int, default=5,
                        help="workers per queue-driven controller (default: %(default)s)")
    parser.add_argument("--node-monitor-period", type=duration, default=5.0,
                        metavar="DURATION",
                        help="how often node health is checked (default: 5s)")
    parser.add_argument("--node-monitor-grace-period", type=duration, default=40.0,
                        metavar="DURATION",
                        help="a node not heard from for this long goes Ready=Unknown "
                             "(default: 40s)")
    parser.add_argument("--node-startup-grace-period", type=duration, default=60.0,
                        metavar="DURATION",
                        help="the same for a node that never posted a Ready condition "
                             "(default: 60s)")
    parser.add_argument("--bind-address", default=DEFAULT_BIND_ADDRESS,
                        help="address of the /healthz, /livez, /readyz and /metrics endpoint "
                             "(default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="its port, plain HTTP (default: %(default)s, "
                             "kube-controller-manager's); 0 serves none")
    election = parser.add_argument_group("leader election (kube-controller-manager's flags)")
    election.add_argument("--leader-elect", type=boolean, nargs="?", const=True, default=True,
                          metavar="BOOL",
                          help="only the holder of the Lease runs controllers (default: true)")
    election.add_argument("--leader-elect-lease-duration", type=duration, default=15.0,
                          metavar="DURATION", help="(default: 15s)")
    election.add_argument("--leader-elect-renew-deadline", type=duration, default=10.0,
                          metavar="DURATION", help="(default: 10s)")
    election.add_argument("--leader-elect-retry-period", type=duration, default=2.0,
                          metavar="DURATION", help="(default: 2s)")
    election.add_argument("--leader-elect-resource-namespace", default="kube-system",
                          help="namespace of the Lease (default: %(default)s)")
    election.add_argument("--leader-elect-resource-name", default=LEASE_NAME,
                          help="name of the Lease (default: %(default)s)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    errors = controller_flag_errors(args.controllers)
    if args.leader_elect:
        errors += timing_errors(args.leader_elect_lease_duration,
                                args.leader_elect_renew_deadline,
                                args.leader_elect_retry_period)
    if args.concurrent_syncs < 1:
        errors.append("--concurrent-syncs must be at least 1")
    if errors:
        parser.error("; ".join(errors))
    return args


def options_from(args: argparse.Namespace) -> Options:
    apiserver = args.apiserver or ("" if args.kubeconfig else DEFAULT_APISERVER)
    return Options(
        apiserver=apiserver, kubeconfig=args.kubeconfig, controllers=tuple(args.controllers),
        bind_address=args.bind_address, port=args.port, leader_elect=args.leader_elect,
        leader_election=LeaderElectionConfig(
            namespace=args.leader_elect_resource_namespace,
            name=args.leader_elect_resource_name,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period),
        node_lifecycle=NodeLifecycleConfig(
            monitor_period=args.node_monitor_period,
            grace_period=args.node_monitor_grace_period,
            startup_grace_period=args.node_startup_grace_period),
        concurrent_syncs=args.concurrent_syncs)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(serve(options_from(args)))


if __name__ == "__main__":
    main()
