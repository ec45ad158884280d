"""`python -m cluster_dns --kubeconfig kube-dns.conf --cluster-domain cluster.local
--listen 172.17.0.1:53`: Services' DNS records, served by a supervised dnsmasq."""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import ipaddress
import json
import logging
import socket
import struct

from cluster_dns.dnsmasq import DnsmasqFailed
from cluster_dns.main import DEFAULT_BIND_ADDRESS, DEFAULT_CLUSTER_IP, DEFAULT_PORT, Options, serve
from common import component

log = logging.getLogger("cluster_dns")

DOCKER_SOCKET = "/var/run/docker.sock"
SIOCGIFADDR = 0x8915


def listen_address(text: str) -> tuple[str, int]:
    """`--listen`: ADDRESS[:PORT] (IPv6 in brackets), the port 53 by default; an empty
    address is Docker's bridge gateway, found at start."""
    host, port = text, 53
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = int(rest.removeprefix(":"))
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = int(port_text)
    if host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{host!r} is not an IP address") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port {port} is out of range")
    return host, port


def docker_bridge_gateway(docker_socket: str) -> str:
    """The gateway of Docker's default bridge network (docker0's address): where pods on
    that bridge reach the host."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(docker_socket)
        sock.sendall(b"GET /networks/bridge HTTP/1.0\r\nHost: docker\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not head.split(b" ")[1:2] == [b"200"]:
        raise RuntimeError(f"Docker answered {head.splitlines()[0].decode()!r} for its "
                           f"bridge network")
    network = json.loads(body)
    for config in (network.get("IPAM") or {}).get("Config") or []:
        if config.get("Gateway"):
            return str(config["Gateway"])
    # The default bridge often lists only its subnet: the gateway is its interface's address.
    interface = (network.get("Options") or {}).get("com.docker.network.bridge.name") or "docker0"
    return interface_ipv4(str(interface))


def interface_ipv4(name: str) -> str:
    """An interface's IPv4 address (SIOCGIFADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("256s", name.encode()[:15])
        try:
            reply = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
        except OSError as e:
            raise RuntimeError(f"interface {name} has no IPv4 address: {e}") from e
    return socket.inet_ntoa(reply[20:24])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cluster_dns",
                                     description="kubelite's cluster DNS: Services and "
                                                 "EndpointSlices as dnsmasq's records.")
    component.add_connection_flags(parser, "kube-dns")
    parser.add_argument("--master", default=None, help="the apiserver's URL (kube-dns's "
                                                       "name for --apiserver)")
    parser.add_argument("--cluster-domain", default="cluster.local",
                        help="the zone served (default: %(default)s)")
    parser.add_argument("--listen", type=listen_address, default=("", 53),
                        metavar="ADDRESS[:PORT]",
                        help="where dnsmasq answers (default: Docker's bridge gateway, "
                             "port 53)")
    parser.add_argument("--docker-socket", default=DOCKER_SOCKET,
                        help="to find the bridge gateway (default: %(default)s)")
    parser.add_argument("--cluster-ip", default=DEFAULT_CLUSTER_IP,
                        help="the kube-dns Service's clusterIP (default: %(default)s); "
                             "\"\" keeps no Service")
    parser.add_argument("--state-dir", default="",
                        help="dnsmasq's hosts files and records (default: a new temporary "
                             "directory)")
    parser.add_argument("--dnsmasq", default="/usr/sbin/dnsmasq", help="dnsmasq's path")
    parser.add_argument("--dnsmasq-user", default="",
                        help="the user dnsmasq drops to (default: its own, nobody)")
    parser.add_argument("--ttl", type=int, default=5,
                        help="the records' TTL in seconds (default: %(default)s)")
    component.add_endpoint_flags(parser, bind_address=DEFAULT_BIND_ADDRESS, port=DEFAULT_PORT,
                                 kube_name="kube-dns")
    component.add_log_level_flag(parser)
    args = parser.parse_args(argv)
    if args.cluster_ip:
        try:
            ipaddress.ip_address(args.cluster_ip)
        except ValueError:
            parser.error(f"--cluster-ip: {args.cluster_ip!r} is not an IP address")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    component.setup_logging(args.log_level)
    host, port = args.listen
    if not host:
        host = docker_bridge_gateway(args.docker_socket)
        log.info("listening on Docker's bridge gateway %s", host)
    apiserver = args.apiserver or args.master
    options = Options(apiserver=str(apiserver or ("" if args.kubeconfig
                                                  else component.DEFAULT_APISERVER)),
                      kubeconfig=args.kubeconfig, domain=args.cluster_domain.strip("."),
                      listen_address=host, dns_port=port, cluster_ip=args.cluster_ip,
                      state_dir=args.state_dir, dnsmasq=args.dnsmasq,
                      dnsmasq_user=args.dnsmasq_user, ttl=args.ttl,
                      bind_address=args.bind_address, port=args.port)
    try:
        asyncio.run(serve(options))
    except DnsmasqFailed as e:
        log.error("%s", e)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
