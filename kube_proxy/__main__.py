"""`python -m kube_proxy --kubeconfig kube-proxy.conf --hostname-override node1`, or
`--cleanup` to remove every rule it made and exit."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import socket

from common import component
from common.flags import add_duration, boolean
from kube_proxy.proxier import (
    DEFAULT_BIND_ADDRESS,
    DEFAULT_PORT,
    GROUP_VERSIONS_PROXY,
    Options,
    Proxier,
)
from kube_proxy.rules import DEFAULT_PREFIX, Config, Names, prefix_errors
from kube_proxy.syncer import cleanup

log = logging.getLogger("kube-proxy")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kube_proxy",
        description="kubelite's kube-proxy: Services and EndpointSlices become iptables "
                    "rules on this node (kube-proxy's iptables mode).")
    component.add_connection_flags(parser, "kube-proxy")
    parser.add_argument("--master", default=None,
                        help="apiserver URL (kube-proxy's name for --apiserver)")
    parser.add_argument("--hostname-override", default=None,
                        help="this node's name, for the Local traffic policies "
                             "(default: the host name)")
    parser.add_argument("--cleanup", action="store_true",
                        help="remove every chain and rule of this instance, then exit")
    parser.add_argument("--iptables-chain-prefix", default=DEFAULT_PREFIX,
                        help="first word of every chain this instance owns, so that several "
                             "proxies share a host (default: %(default)s, kube's)")
    parser.add_argument("--cluster-cidr", default="",
                        help="the pods' range: traffic to a cluster IP from outside it is "
                             "masqueraded (default: none, as kube)")
    parser.add_argument("--masquerade-all", type=boolean, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help="masquerade all traffic to cluster IPs (default: false)")
    parser.add_argument("--iptables-masquerade-bit", type=int, default=14,
                        help="the fwmark bit marking packets to masquerade (default: 14)")
    parser.add_argument("--iptables-localhost-nodeports", type=boolean, nargs="?", const=True,
                        default=True, metavar="BOOL",
                        help="node ports answer on 127.0.0.1 too (sets route_localnet; "
                             "default: true)")
    add_duration(parser, "--iptables-min-sync-period", 1.0,
                 "changes are batched into at most one sync per period")
    add_duration(parser, "--iptables-sync-period", 30.0,
                 "the longest time between two syncs")
    parser.add_argument("--proxy-mode", default="iptables", choices=["iptables"],
                        help="how Services are implemented; iptables only (default)")
    parser.add_argument("--healthz-bind-address",
                        default=f"{DEFAULT_BIND_ADDRESS}:{DEFAULT_PORT}", metavar="IP:PORT",
                        help="where /healthz, /livez, /readyz and /metrics are served, plain "
                             "HTTP (default: %(default)s, kube-proxy's port); port 0 serves "
                             "none")
    component.add_log_level_flag(parser)
    args = parser.parse_args(argv)
    errors = prefix_errors(args.iptables_chain_prefix)
    if args.cluster_cidr:
        try:
            ipaddress.IPv4Network(args.cluster_cidr)
        except ValueError as e:
            errors.append(f"--cluster-cidr {args.cluster_cidr!r}: {e}")
    if not 0 <= args.iptables_masquerade_bit <= 31:
        errors.append("--iptables-masquerade-bit must be within [0, 31]")
    if args.iptables_min_sync_period < 0 or args.iptables_sync_period <= 0:
        errors.append("--iptables-min-sync-period must be >= 0 and --iptables-sync-period > 0")
    try:
        args.bind_address, args.port = healthz_address(args.healthz_bind_address)
    except ValueError as e:
        errors.append(f"--healthz-bind-address {args.healthz_bind_address!r}: {e}")
    if args.master and args.apiserver:
        errors.append("--master and --apiserver name the same thing: give one")
    if errors:
        parser.error("; ".join(errors))
    return args


def healthz_address(value: str) -> tuple[str, int]:
    """kube's IP:PORT flag value: ("127.0.0.1", 10256) from "127.0.0.1:10256"."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("want IP:PORT")
    host = host.strip("[]") or "0.0.0.0"
    ipaddress.ip_address(host)
    return host, int(port)


def config_of(args: argparse.Namespace) -> Config:
    return Config(names=Names(args.iptables_chain_prefix),
                  hostname=args.hostname_override or socket.gethostname(),
                  cluster_cidr=args.cluster_cidr, masquerade_all=args.masquerade_all,
                  masquerade_bit=args.iptables_masquerade_bit,
                  localhost_nodeports=args.iptables_localhost_nodeports)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    component.setup_logging(args.log_level)
    config = config_of(args)
    if args.cleanup:
        asyncio.run(cleanup(config))
        return
    args.apiserver = args.apiserver or args.master
    options = Options(apiserver=component.apiserver_of(args), kubeconfig=args.kubeconfig,
                      config=config, min_sync_period=args.iptables_min_sync_period,
                      sync_period=args.iptables_sync_period,
                      bind_address=args.bind_address, port=args.port)
    asyncio.run(component.serve(
        options, component.Client(user_agent="kube-proxy", group_versions=GROUP_VERSIONS_PROXY),
        lambda api: Proxier(api, options), log))


if __name__ == "__main__":
    main()
