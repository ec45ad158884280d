"""`python -m controller_manager --kubeconfig controller-manager.conf [--apiserver URL]`"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import sys
from pathlib import Path

import uvloop

from common import component
from common.flags import add_duration, boolean
from controller_manager import nodeipam
from controller_manager.app import (
    CONTROLLERS,
    DEFAULT_BIND_ADDRESS,
    DEFAULT_PORT,
    LEASE_NAME,
    Options,
    controller_flag_errors,
    serve,
)
from controller_manager.certificates import SigningCA
from controller_manager.nodelifecycle import Config as NodeLifecycleConfig


def controller_list(text: str) -> list[str]:
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m controller_manager",
        description="kubelite's controller-manager: the controllers that turn desired "
                    "state into objects (kube-controller-manager's flags).")
    component.add_connection_flags(parser, "controller-manager")
    known = ", ".join(spec.name for spec in CONTROLLERS)
    parser.add_argument("--controllers", type=controller_list, default=["*"],
                        metavar="LIST",
                        help="'*' enables all on-by-default controllers, 'foo' enables foo, "
                             f"'-foo' disables foo (default: *). Known: {known}")
    parser.add_argument("--concurrent-syncs", type=int, default=5,
                        help="workers per queue-driven controller (default: %(default)s)")
    add_duration(parser, "--node-monitor-period", 5.0, "how often node health is checked")
    add_duration(parser, "--node-monitor-grace-period", 40.0,
                 "a node not heard from for this long goes Ready=Unknown")
    add_duration(parser, "--node-startup-grace-period", 60.0,
                 "the same for a node that never posted a Ready condition")
    parser.add_argument("--cluster-signing-cert-file",
                        help="the CA certificate (PEM) csrsigning issues certificates with")
    parser.add_argument("--cluster-signing-key-file", help="its private key (PEM)")
    add_duration(parser, "--cluster-signing-duration", 365 * 24 * 3600.0,
                 "the longest a signed certificate is valid for")
    parser.add_argument("--allocate-node-cidrs", type=boolean, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help="give every node a pod subnet of --cluster-cidr in "
                             "spec.podCIDR (node-ipam-controller; default: false)")
    parser.add_argument("--cluster-cidr", default="",
                        help="the pods' address range, e.g. 10.244.0.0/16")
    parser.add_argument("--node-cidr-mask-size", type=int, default=None,
                        help=f"each node's subnet size (default: {nodeipam.DEFAULT_MASK_SIZE})")
    component.add_endpoint_flags(parser, bind_address=DEFAULT_BIND_ADDRESS, port=DEFAULT_PORT,
                                 kube_name="kube-controller-manager")
    component.add_leader_election_flags(parser, lease_name=LEASE_NAME,
                                        kube_name="kube-controller-manager")
    component.add_log_level_flag(parser)
    args = parser.parse_args(argv)
    errors = controller_flag_errors(args.controllers) + component.leader_election_errors(args)
    if bool(args.cluster_signing_cert_file) != bool(args.cluster_signing_key_file):
        errors.append("--cluster-signing-cert-file and --cluster-signing-key-file go together")
    errors += nodeipam.config_errors(args.allocate_node_cidrs, args.cluster_cidr,
                                     args.node_cidr_mask_size)
    if args.concurrent_syncs < 1:
        errors.append("--concurrent-syncs must be at least 1")
    if errors:
        parser.error("; ".join(errors))
    return args


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        apiserver=component.apiserver_of(args), kubeconfig=args.kubeconfig, controllers=tuple(args.controllers),
        bind_address=args.bind_address, port=args.port, leader_elect=args.leader_elect,
        leader_election=component.leader_election_config(args),
        node_lifecycle=NodeLifecycleConfig(
            monitor_period=args.node_monitor_period,
            grace_period=args.node_monitor_grace_period,
            startup_grace_period=args.node_startup_grace_period),
        concurrent_syncs=args.concurrent_syncs, signing_ca=signing_ca(args),
        node_ipam=nodeipam.Config(
            cluster_cidr=ipaddress.IPv4Network(args.cluster_cidr)
            if args.allocate_node_cidrs else None,
            mask_size=args.node_cidr_mask_size or nodeipam.DEFAULT_MASK_SIZE))


def signing_ca(args: argparse.Namespace) -> SigningCA | None:
    """The CA of --cluster-signing-*-file; a clear exit when it cannot be loaded."""
    if not args.cluster_signing_cert_file:
        return None
    try:
        return SigningCA.load(Path(args.cluster_signing_cert_file).read_bytes(),
                              Path(args.cluster_signing_key_file).read_bytes(),
                              datetime.timedelta(seconds=args.cluster_signing_duration))
    except (OSError, ValueError, TypeError) as e:
        sys.exit(f"controller-manager cannot load its signing CA: {e}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    component.setup_logging(args.log_level)
    # uvloop, as the apiserver's uvicorn: the controllers' HTTP and watch traffic is
    # the event loop's work.
    uvloop.run(serve(options_from(args)))


if __name__ == "__main__":
    main()
