"""`make up`: a whole kubelite cluster in the foreground, like `k3s server`.

    .venv/bin/python hack/up.py [--state-dir .kubelite] [--port 8080] [--nodes node1,node2] ...
    .venv/bin/python hack/up.py down [--state-dir .kubelite]

`up` (the default) runs etcd (data in <state-dir>/etcd), the apiserver, the scheduler (its
/healthz, /readyz and /metrics on --scheduler-port), the controller-manager (the same on
--controller-manager-port), the cluster DNS (dnsmasq fed from the API, answering on
--cluster-dns-listen, Docker's bridge gateway by default, behind the kube-dns Service's
--cluster-dns IP), one kube-proxy per node (each with its own iptables chains,
--kube-proxy-chain-prefixes, its endpoint on --kube-proxy-ports) and one kubelet per node
(pods resolve names through --cluster-dns in --cluster-domain) as child processes, each in
its own session so that Ctrl-C reaches this launcher only, which then stops them in order:
kubelets, kube-proxies, cluster DNS, controller-manager, scheduler, apiserver, etcd; then
the kube-proxies' rules are removed (`kube_proxy --cleanup`), so that a stopped cluster
leaves nothing in the host's iptables.
Each child logs to <state-dir>/logs/<component>.log; the console shows the lines worth
seeing, one per event, prefixed with the component. <state-dir>/kubeconfig points kubectl
at the apiserver (context `kubernetes-admin@kubernetes`, as kubeadm names it; `kubelite`
with --no-secure).

Secure by default, as k3s is: it first creates the cluster PKI under <state-dir>/pki
(common.pki, kubeadm's layout; kept across runs), serves the apiserver only on HTTPS
(--secure-port, client certificates verified against the cluster CA, --authorization-mode),
gives the scheduler, the controller-manager and each kubelet its own kubeconfig
(system:kube-scheduler, system:kube-controller-manager, system:node:NAME), and writes <state-dir>/kubeconfig with the CA and the admin certificate
(kubernetes-admin in system:masters), so kubectl works unchanged. etcd then serves TLS
on 127.0.0.1 and lets in only certificates of its own CA (<state-dir>/pki/etcd/ca.crt):
the apiserver's apiserver-etcd-client (--etcd-cafile/--etcd-certfile/--etcd-keyfile) and
the launcher's health check (etcd/healthcheck-client), as kubeadm sets it up.
`--no-secure` is the development mode: plain HTTP on --port, loopback only, every request
a superuser.

`down` stops a running `up` (its pid file is <state-dir>/up.pid), force-removes every
container the cluster's kubelets made, found by the kubelite labels of its nodes, and
removes its kube-proxies' iptables chains.

It installs nothing: `make up` first creates the venv, installs etcd and Docker when
missing, starts dockerd and builds the local images. Problems it can foresee (a port in
use, no Docker daemon, no etcd, a missing image) end it with one line saying what to do.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlparse

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pod_containers import (  # noqa: E402
    DEFAULT_DOCKER_SOCKET,
    DockerUnavailable,
    docker_answers,
    image_exists,
    remove_pod_containers,
)
from up_console import ConsoleFilter, format_own_line  # noqa: E402

from common import pki  # noqa: E402
from common.kubeconfig import ssl_context  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
LOCALHOST = "127.0.0.1"
DEFAULT_PAUSE_IMAGE = "kubelite/pause:3.10"
# The flag that moves each port (hack/up.py --help).
PORT_FLAGS = {"apiserver": "--port N", "etcd client": "--etcd-port N",
              "etcd peer": "--etcd-peer-port N", "scheduler": "--scheduler-port N",
              "controller-manager": "--controller-manager-port N",
              "cluster-dns": "--cluster-dns-port N",
              "kube-proxy": "--kube-proxy-ports N1,N2",
              "kubelet": "--kubelet-ports N1,N2"}
STOP_TIMEOUT_SECONDS = {"kubelet": 20.0, "kube-proxy": 10.0, "cluster-dns": 10.0,
                        "scheduler": 10.0, "controller-manager": 10.0,
                        "load-balancer": 5.0, "apiserver": 10.0, "etcd": 15.0}
# --ha: the members a dead one of which is started again, as the kubelet restarts
# kubeadm's static pods (everything else dying still ends the cluster)
RESTARTED_KINDS = ("etcd", "apiserver", "load-balancer", "scheduler", "controller-manager")
RESTART_DELAY_SECONDS = 1.0
CRASH_LOOP_RESTARTS = 5  # more restarts of one member than this within CRASH_LOOP_WINDOW
CRASH_LOOP_WINDOW = 60.0  # seconds: it is broken, not killed; the cluster stops
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
DEFAULT_CLUSTER_DNS = "10.96.0.10"  # the kube-dns Service's cluster IP, as kubeadm's
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_CHAIN_PREFIX = "KUBE"  # the first node's kube-proxy: kube's own chain names


class UserError(Exception):
    """A problem the user can fix; its message is the one line we print."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived while we were waiting for something."""


# --- what to run (pure) ----------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    state_dir: Path
    port: int = 8080
    etcd_port: int = 2379
    etcd_peer_port: int = 2380
    scheduler_port: int = 10259  # its health and metrics endpoint; 0: none
    controller_manager_port: int = 10257  # the same for the controller-manager
    nodes: tuple[str, ...] = ("node1", "node2")
    kubelet_ports: tuple[int, ...] = (10250, 10251)
    kube_proxy_ports: tuple[int, ...] = ()  # each one's endpoint (0: none); default: 10256, ...
    kube_proxy_chain_prefixes: tuple[str, ...] = ()  # default: chain_prefixes(len(nodes))
    cluster_dns_port: int = 10055  # the cluster DNS's endpoint (kube-dns's); 0: none
    cluster_dns_listen: str = ""  # where dnsmasq answers; "": Docker's bridge gateway, :53
    cluster_dns: str = DEFAULT_CLUSTER_DNS
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    service_cluster_ip_range: str = ""  # "": the apiserver's default, 10.96.0.0/12
    pause_image: str = DEFAULT_PAUSE_IMAGE
    docker_socket: str = DEFAULT_DOCKER_SOCKET
    startup_timeout: float = 90.0
    secure: bool = True  # HTTPS, certificates and authorization (--no-secure: plain HTTP)
    secure_port: int = 6443
    authorization_mode: str = "AlwaysAllow"
    # --ha: a control plane of several "machines", each a loopback address of its own
    # (control_plane_address) with the standard ports, behind haproxy on 127.0.0.1
    ha: bool = False
    etcd_members: int = 3
    apiservers: int = 2
    schedulers: int = 2
    controller_managers: int = 2
    kubelet_args: tuple[str, ...] = ()  # --kubelet-arg KEY=VALUE: --KEY=VALUE to every kubelet
    pod_network_cidr: str = ""  # kubeadm's --pod-network-cidr: each node a podCIDR of it

    @property
    def apiserver_url(self) -> str:
        if self.secure:
            return f"https://{LOCALHOST}:{self.secure_port}"
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def control_plane_addresses(self) -> tuple[str, ...]:
        """--ha: every control-plane machine's address, one per etcd member or apiserver."""
        count = max(self.etcd_members, self.apiservers, self.schedulers,
                    self.controller_managers)
        return tuple(control_plane_address(i) for i in range(1, count + 1)) if self.ha else ()

    def etcd_member_urls(self) -> list[tuple[str, str, str]]:
        """--ha: each etcd member's (name, client URL, peer URL)."""
        return [(f"etcd-{i}", f"https://{control_plane_address(i)}:{ETCD_CLIENT_PORT}",
                 f"https://{control_plane_address(i)}:{ETCD_PEER_PORT}")
                for i in range(1, self.etcd_members + 1)]

    @property
    def haproxy_config(self) -> Path:
        return self.state_dir / "haproxy.cfg"

    @property
    def etcd_url(self) -> str:
        scheme = "https" if self.secure else "http"  # TLS and client certificates if secure
        return f"{scheme}://{LOCALHOST}:{self.etcd_port}"

    @property
    def etcd_peer_url(self) -> str:
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{LOCALHOST}:{self.etcd_peer_port}"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "up.pid"

    @property
    def cluster_file(self) -> Path:
        return self.state_dir / "cluster.json"

    @property
    def proxy_ports(self) -> tuple[int, ...]:
        """kube-proxy's 10256 for the first node, 10258, 10260, ... for the others (10257 is
        the controller-manager's)."""
        return self.kube_proxy_ports or tuple(10256 + 2 * i for i in range(len(self.nodes)))

    @property
    def chain_prefixes(self) -> tuple[str, ...]:
        return self.kube_proxy_chain_prefixes or chain_prefixes(len(self.nodes))


def control_plane_address(index: int) -> str:
    """--ha: control-plane machine `index` (1, 2, ...): 127.0.1.1, 127.0.1.2, ... Each
    runs its etcd member, apiserver, scheduler and controller-manager on the ports a
    machine of its own would, as kubeadm's stacked-etcd control-plane nodes do."""
    return f"127.0.1.{index}"


def chain_prefixes(count: int) -> tuple[str, ...]:
    """Each node's kube-proxy owns chains of its own on the shared host: KUBE (kube's
    names) for the first, KUBE2, KUBE3, ... for the others."""
    return tuple(DEFAULT_CHAIN_PREFIX if i == 0 else f"{DEFAULT_CHAIN_PREFIX}{i + 1}"
                 for i in range(count))


@dataclass(frozen=True)
class Component:
    name: str
    kind: str  # etcd | apiserver | scheduler | controller-manager | cluster-dns | kube-proxy
    #            | kubelet
    args: tuple[str, ...]
    health_url: str | None = None
    ports: tuple[tuple[str, int], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    address: str = LOCALHOST  # where its ports are
    # components of one nonempty batch start together before any is waited for (etcd's
    # members: none is healthy before a quorum of them runs)
    batch: str = ""


def etcd_binary() -> str:
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    if not found:
        raise UserError("etcd is not installed: run `make deps` (apt-get install etcd-server)")
    return found


def etcd_environment() -> tuple[tuple[str, str], ...]:
    """etcd 3.4 refuses to start on arm64 unless told that it is fine."""
    machine = platform.machine()
    return (("ETCD_UNSUPPORTED_ARCH", "arm64"),) if machine in ("aarch64", "arm64") else ()


def plan(options: Options, *, etcd: str = "etcd") -> list[Component]:
    """The components in start order (they stop in the reverse order)."""
    components = control_plane(options, etcd=etcd) if options.ha else [
        *single_control_plane(options, etcd=etcd)]
    components.append(cluster_dns_component(options))
    components += [kube_proxy_component(options, node, port, prefix) for node, port, prefix
                   in zip(options.nodes, options.proxy_ports, options.chain_prefixes,
                          strict=True)]
    for node, port in zip(options.nodes, options.kubelet_ports, strict=True):
        components.append(Component(f"kubelet-{node}", "kubelet", (
            PYTHON, "-m", "kubelet", *connect_args(options, f"kubelet-{node}.conf"),
            "--node-name", node, "--node-ip", LOCALHOST,
            "--address", LOCALHOST, "--port", str(port),
            "--docker-socket", options.docker_socket,
            "--pod-infra-container-image", options.pause_image,
            "--cluster-dns", options.cluster_dns, "--cluster-domain", options.cluster_domain,
            *kubelet_tls_args(options, node),
            *(f"--{arg}" for arg in options.kubelet_args),
        ), health_url=f"{'https' if options.secure else 'http'}://{LOCALHOST}:{port}/healthz",
            ports=((f"kubelet {node}", port),)))
    return components


def single_control_plane(options: Options, *, etcd: str) -> list[Component]:
    """One etcd, apiserver, scheduler and controller-manager on 127.0.0.1."""
    peer = options.etcd_peer_url
    return [
        Component("etcd", "etcd", (
            etcd, "--name", "kubelite", "--data-dir", str(options.state_dir / "etcd"),
            "--listen-client-urls", options.etcd_url,
            "--advertise-client-urls", options.etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"kubelite={peer}",
            "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
            *etcd_tls_args(options),
        ), health_url=f"{options.etcd_url}/health",
            ports=(("etcd client", options.etcd_port), ("etcd peer", options.etcd_peer_port)),
            env=etcd_environment()),
        apiserver_component(options),
        scheduler_component(options),
        controller_manager_component(options),
    ]


def control_plane(options: Options, *, etcd: str) -> list[Component]:
    """--ha: the etcd members (peer TLS), the apiservers, haproxy in front of them, and
    the schedulers and controller-managers, leader-elected; every client goes through
    haproxy (options.apiserver_url)."""
    members = options.etcd_member_urls()
    initial_cluster = ",".join(f"{name}={peer}" for name, _, peer in members)
    components = [Component(name, "etcd", (
        etcd, "--name", name, "--data-dir", str(options.state_dir / name),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial_cluster, "--initial-cluster-state", "new",
        "--initial-cluster-token", "kubelite",
        # error: etcd 3.4 warns of every peer stream it opens or loses, a member's restart
        # fills screens of them
        "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error",
        *etcd_tls_args(options),
    ), health_url=f"{client}/health", ports=(("etcd client", ETCD_CLIENT_PORT),
                                              ("etcd peer", ETCD_PEER_PORT)),
        env=etcd_environment(), address=control_plane_address(i), batch="etcd")
        for i, (name, client, peer) in enumerate(members, start=1)]
    clients = [client for _, client, _ in members]
    for i in range(1, options.apiservers + 1):
        address = control_plane_address(i)
        # its own machine's member first: gRPC's pick_first uses it while it answers
        ordered = sorted(clients, key=lambda url: urlparse(url).hostname != address)
        components.append(apiserver_component(options, index=i, etcd_servers=ordered))
    components.append(Component("haproxy", "load-balancer", (
        haproxy_binary(), "-db", "-f", str(options.haproxy_config),
    ), health_url=f"{options.apiserver_url}/readyz",
        ports=(("apiserver load balancer", options.secure_port),)))
    components += [scheduler_component(options, index=i)
                   for i in range(1, options.schedulers + 1)]
    components += [controller_manager_component(options, index=i)
                   for i in range(1, options.controller_managers + 1)]
    return components


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy"
                                        if os.path.exists("/usr/sbin/haproxy") else None)
    if not found:
        raise UserError("haproxy is not installed: run `make deps` (apt-get install haproxy)")
    return found


def haproxy_config_text(options: Options) -> str:
    """haproxy in front of the apiservers as kubeadm's HA guide sets it up: TCP
    passthrough (clients keep their certificates end to end), each apiserver
    health-checked on /readyz over TLS every second, out after 2 failures (and its open
    connections, watches among them, closed so that their clients reconnect to another),
    back after 2 successes; tunnels stay open for long watches."""
    servers = "\n".join(
        f"    server apiserver-{i} {control_plane_address(i)}:{options.secure_port} check"
        for i in range(1, options.apiservers + 1))
    return f"""# written by hack/up.py --ha; rewritten at every start
global
    log stderr format raw local0 info
    maxconn 4000

defaults
    log global
    mode tcp
    option tcplog
    option dontlognull
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout check 2s

frontend apiserver
    bind {LOCALHOST}:{options.secure_port}
    default_backend apiservers

backend apiservers
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 1s fall 2 rise 2 check-ssl verify none on-marked-down shutdown-sessions
{servers}
"""


def cluster_dns_component(options: Options) -> Component:
    """The cluster DNS (cluster_dns): dnsmasq, supervised and fed from the API, answering
    on --cluster-dns-listen; it keeps the kube-dns Service at --cluster-dns pointing there,
    which the kube-proxies route. Ready when its informers have synced."""
    port = options.cluster_dns_port
    return Component("cluster-dns", "cluster-dns", (
        PYTHON, "-m", "cluster_dns", *connect_args(options, "kube-dns.conf"),
        "--cluster-domain", options.cluster_domain, "--cluster-ip", options.cluster_dns,
        *(("--listen", options.cluster_dns_listen) if options.cluster_dns_listen else ()),
        "--docker-socket", options.docker_socket,
        "--bind-address", LOCALHOST, "--port", str(port),
    ), health_url=f"http://{LOCALHOST}:{port}/readyz" if port else None,
        ports=(("cluster-dns", port),) if port else ())


def kube_proxy_component(options: Options, node: str, port: int, prefix: str) -> Component:
    """A node's kube-proxy (iptables mode), owning the chains that start with `prefix`."""
    return Component(f"kube-proxy-{node}", "kube-proxy", (
        PYTHON, "-m", "kube_proxy", *connect_args(options, "kube-proxy.conf"),
        "--hostname-override", node, "--iptables-chain-prefix", prefix,
        "--healthz-bind-address", f"{LOCALHOST}:{port}",
    ), health_url=f"http://{LOCALHOST}:{port}/readyz" if port else None,
        ports=((f"kube-proxy {node}", port),) if port else ())


def kube_proxy_cleanup_args(prefix: str) -> tuple[str, ...]:
    return (PYTHON, "-m", "kube_proxy", "--cleanup", "--iptables-chain-prefix", prefix)


def etcd_tls_args(options: Options) -> tuple[str, ...]:
    """With --secure, etcd as kubeadm's etcd.yaml runs it: TLS for clients and the peer,
    and only certificates of its own CA (etcd/ca.crt) get in, the apiserver's
    apiserver-etcd-client among them; the cluster CA's (admin's too) do not."""
    if not options.secure:
        return ()
    certs = options.pki_dir / "etcd"
    return ("--cert-file", str(certs / "server.crt"), "--key-file", str(certs / "server.key"),
            "--client-cert-auth", "--trusted-ca-file", str(certs / "ca.crt"),
            "--peer-cert-file", str(certs / "peer.crt"),
            "--peer-key-file", str(certs / "peer.key"),
            "--peer-client-cert-auth", "--peer-trusted-ca-file", str(certs / "ca.crt"))


def etcd_health_verify(options: Options) -> ssl.SSLContext | bool:
    """What the launcher's etcd health check presents: etcd/healthcheck-client when secure
    (kubeadm's name for that certificate)."""
    if not options.secure:
        return True
    certs = options.pki_dir / "etcd"
    return ssl_context(ca=(certs / "ca.crt").read_bytes(),
                       cert=(certs / "healthcheck-client.crt").read_bytes(),
                       key=(certs / "healthcheck-client.key").read_bytes())


def apiserver_component(options: Options, *, index: int = 0,
                        etcd_servers: Sequence[str] = ()) -> Component:
    """The apiserver: plain HTTP by default; with --secure, HTTPS only. --ha's apiserver
    `index` listens and advertises (the kubernetes Service's endpoints) on its machine's
    address."""
    services = (("--service-cluster-ip-range", options.service_cluster_ip_range)
                if options.service_cluster_ip_range else ())
    name = f"apiserver-{index}" if index else "apiserver"
    address = control_plane_address(index) if index else LOCALHOST
    etcd_url = ",".join(etcd_servers) or options.etcd_url
    if not options.secure:
        return Component("apiserver", "apiserver", (
            PYTHON, "-m", "apiserver", "--etcd-servers", options.etcd_url,
            "--bind-address", LOCALHOST, "--port", str(options.port), *services,
        ), health_url=f"{options.apiserver_url}/readyz", ports=(("apiserver", options.port),))
    certs = options.pki_dir
    return Component(name, "apiserver", (
        PYTHON, "-m", "apiserver", "--etcd-servers", etcd_url,
        "--bind-address", address, "--advertise-address", address,
        "--port", "0", "--secure-port", str(options.secure_port),
        "--tls-cert-file", str(certs / "apiserver.crt"),
        "--tls-private-key-file", str(certs / "apiserver.key"),
        "--client-ca-file", str(certs / "ca.crt"),
        "--service-account-key-file", str(certs / "sa.pub"),
        "--service-account-signing-key-file", str(certs / "sa.key"),
        "--authorization-mode", options.authorization_mode,
        "--etcd-cafile", str(certs / "etcd" / "ca.crt"),
        "--etcd-certfile", str(certs / "apiserver-etcd-client.crt"),
        "--etcd-keyfile", str(certs / "apiserver-etcd-client.key"),
        "--kubelet-client-certificate", str(certs / "apiserver-kubelet-client.crt"),
        "--kubelet-client-key", str(certs / "apiserver-kubelet-client.key"),
        "--kubelet-certificate-authority", str(certs / "ca.crt"),
        "--enable-bootstrap-token-auth", *services,
    ), health_url=f"https://{address}:{options.secure_port}/readyz",
        ports=(("apiserver", options.secure_port),), address=address)


def kubelet_tls_args(options: Options, node: str) -> tuple[str, ...]:
    """With --secure, the kubelet's port as kubeadm sets it: HTTPS, no anonymous callers,
    certificates and tokens authenticated, SubjectAccessReviews to the apiserver."""
    if not options.secure:
        return ()
    certs = options.pki_dir
    return ("--tls-cert-file", str(certs / f"kubelet-{node}.crt"),
            "--tls-private-key-file", str(certs / f"kubelet-{node}.key"),
            "--client-ca-file", str(certs / "ca.crt"), "--anonymous-auth=false",
            "--authentication-token-webhook", "--authorization-mode", "Webhook")


def connect_args(options: Options, kubeconfig: str) -> tuple[str, ...]:
    """How a component finds the apiserver: its own kubeconfig when secure."""
    if options.secure:
        return ("--kubeconfig", str(options.pki_dir / kubeconfig))
    return ("--apiserver", options.apiserver_url)


def health_verify(options: Options) -> ssl.SSLContext | bool:
    """What the launcher's own health checks present: the admin certificate when secure."""
    if not options.secure:
        return True
    certs = options.pki_dir
    return ssl_context(ca=(certs / "ca.crt").read_bytes(),
                       cert=(certs / "admin.crt").read_bytes(),
                       key=(certs / "admin.key").read_bytes())


def write_secure_files(options: Options) -> None:
    """The PKI (what is missing of it), each component's kubeconfig, and the user's."""
    pki.init(options.pki_dir, options.nodes, extra_sans=options.control_plane_addresses,
             etcd_extra_sans=options.control_plane_addresses)
    pki.write_kubeconfigs(options.pki_dir, options.pki_dir, options.nodes,
                          server=options.apiserver_url)
    config = pki.kubeconfig_for(options.pki_dir, "admin", server=options.apiserver_url,
                                user="kubernetes-admin", namespace="default")
    pki.write_kubeconfig(options.kubeconfig, config)


def scheduler_component(options: Options, *, index: int = 0) -> Component:
    """The scheduler; ready when its /readyz says its informers have synced.

    One scheduler, so no leader election (as k3s runs a single server): a lease it could
    lose during an apiserver restart would only stop it for nothing. --ha's schedulers
    (`index` 1, 2, ...) elect a leader on kube-system/kube-scheduler.
    """
    port = options.scheduler_port
    address = control_plane_address(index) if index else LOCALHOST
    return Component(f"scheduler-{index}" if index else "scheduler", "scheduler", (
        PYTHON, "-m", "scheduler", *connect_args(options, "scheduler.conf"),
        f"--leader-elect={'true' if index else 'false'}",
        "--bind-address", address, "--port", str(port),
    ), health_url=f"http://{address}:{port}/readyz" if port else None,
        ports=(("scheduler", port),) if port else (), address=address)


def controller_manager_component(options: Options, *, index: int = 0) -> Component:
    """The controller-manager (node lifecycle, taint eviction, ...); ready when its
    /readyz says so. One instance, so no leader election, as for the scheduler; --ha's
    (`index` 1, 2, ...) elect a leader on kube-system/kube-controller-manager."""
    port = options.controller_manager_port
    address = control_plane_address(index) if index else LOCALHOST
    # as kubeadm runs it: the bootstrap-token controllers on, and the cluster CA signing
    # the certificates of nodes that join
    joining = (("--controllers", "*,bootstrapsigner,tokencleaner",
                "--cluster-signing-cert-file", str(options.pki_dir / "ca.crt"),
                "--cluster-signing-key-file", str(options.pki_dir / "ca.key"))
               if options.secure else ())
    name = f"controller-manager-{index}" if index else "controller-manager"
    # as kubeadm's --pod-network-cidr sets it: node-ipam-controller gives each node a subnet
    ipam = (("--allocate-node-cidrs", "--cluster-cidr", options.pod_network_cidr)
            if options.pod_network_cidr else ())
    return Component(name, "controller-manager", (
        PYTHON, "-m", "controller_manager", *connect_args(options, "controller-manager.conf"),
        f"--leader-elect={'true' if index else 'false'}", "--bind-address", address,
        "--port", str(port), *joining, *ipam,
    ), health_url=f"http://{address}:{port}/readyz" if port else None,
        ports=(("controller-manager", port),) if port else (), address=address)


def kubeconfig_text(server: str) -> str:
    """A kubeconfig with one cluster, user and context named `kubelite` (no auth)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
        "users": [{"name": "kubelite", "user": {}}],
        "contexts": [{"name": "kubelite",
                      "context": {"cluster": "kubelite", "user": "kubelite",
                                  "namespace": "default"}}],
        "current-context": "kubelite",
    }, indent=2) + "\n"


def shown_path(path: Path) -> str:
    """A path as the user would type it from the repository root."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def topology_lines(options: Options) -> list[str]:
    """--ha: where each member of the control plane listens."""
    if not options.ha:
        return []
    apiservers = ", ".join(control_plane_address(i) for i in range(1, options.apiservers + 1))
    return [f"control plane: etcd {', '.join(u for _, u, _ in options.etcd_member_urls())}",
            f"  apiservers {apiservers} (:{options.secure_port}) behind haproxy "
            f"{options.apiserver_url}; {options.schedulers} schedulers, "
            f"{options.controller_managers} controller-managers, leader-elected", ""]


def control_plane_only_steps(options: Options, kubectl: str) -> str:
    """--nodes '': a control plane that waits for nodes to join (README "Nodes that join")."""
    join = (f"  .venv/bin/python -m common.bootstraptoken --kubeconfig "
            f"{shown_path(options.kubeconfig)} create --print-join-command  # a node joins"
            if options.secure else "  (nodes join a --secure cluster only)")
    return "\n".join([
        *topology_lines(options),
        f"kubelite is up: apiserver {options.apiserver_url}, no nodes yet. In another terminal:",
        "",
        f"  export KUBECONFIG={options.kubeconfig.resolve()}",
        join,
        f"  {kubectl} get nodes -o wide",
        "",
        f"Logs: {shown_path(options.logs_dir)}/<component>.log. "
        "Stop: Ctrl-C here, or `make down`.",
    ])


def next_steps(options: Options) -> str:
    kubectl = shown_path(REPO / ".venv" / "bin" / "kubectl")
    examples = shown_path(REPO / "examples")
    if not options.nodes:
        return control_plane_only_steps(options, kubectl)
    first, *rest = options.nodes
    second = rest[0] if rest else first
    certs = shown_path(options.pki_dir)
    curl = (f"  curl -s --cacert {certs}/ca.crt --cert {certs}/admin.crt --key "
            f"{certs}/admin.key {options.apiserver_url}/api/v1/namespaces/default/pods"
            if options.secure else
            f"  curl -s {options.apiserver_url}/api/v1/namespaces/default/pods")
    topology = topology_lines(options)
    return "\n".join([
        *topology,
        f"kubelite is up: apiserver {options.apiserver_url}, "
        f"nodes {', '.join(options.nodes)}. In another terminal:",
        "",
        f"  export KUBECONFIG={options.kubeconfig.resolve()}",
        f"  {kubectl} get nodes -o wide",
        f"  {kubectl} create -f {examples}/nodename.yaml      # nodeName: {first}",
        f"  {kubectl} label nodes {first} shuai=a && {kubectl} label nodes {second} shuai=b",
        f"  {kubectl} apply -f {examples}/nodeSelector.yaml  # nodeSelector shuai=b",
        f"  {kubectl} get pods -o wide && {kubectl} describe pod pod-selector",
        f"  {kubectl} timeline pod/pod-selector            # the pod's flow, measured",
        f"  {kubectl} apply -f {examples}/web-service.yaml  # a Deployment behind a Service",
        f"  {kubectl} run -it --rm client --image kubelite/busybox:1.35 --restart=Never "
        "-- wget -qO- web",
        curl,
        f"  {kubectl} proxy --port 8001 &                  # the dashboard, as you: "
        "http://127.0.0.1:8001/dashboard/",
        *([f"  .venv/bin/python -m common.bootstraptoken --kubeconfig "
           f"{shown_path(options.kubeconfig)} create --print-join-command  # a node joins"]
          if options.secure else []),
        "",
        f"Logs: {shown_path(options.logs_dir)}/<component>.log. "
        "Stop: Ctrl-C here, or `make down` (which also removes the pods' containers).",
    ])


# --- checks before starting ------------------------------------------------------------


def port_is_free(port: int, address: str = LOCALHOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def running_launcher(options: Options) -> int | None:
    """The pid of an `up` still running on this state directory, if any."""
    state = read_json(options.pid_file)
    if not state or not isinstance(state.get("pid"), int):
        return None
    pid = int(state["pid"])  # type: ignore[call-overload]
    alive = process_alive(pid) and any(arg.endswith("up.py") for arg in command_line(pid))
    return pid if alive else None


def port_flag(options: Options, what: str) -> str:
    if what in ("apiserver", "load-balancer") and options.secure:
        return "--secure-port N"
    return PORT_FLAGS.get(what, "--state-dir DIR")


def preflight(options: Options) -> str:
    """Everything we can check before starting a process; returns the etcd binary."""
    if len(options.nodes) != len(options.kubelet_ports):
        raise UserError(f"{len(options.nodes)} node(s) but {len(options.kubelet_ports)} "
                        "kubelet port(s): give one --kubelet-ports entry per --nodes entry")
    if len(options.nodes) != len(options.proxy_ports):
        raise UserError(f"{len(options.nodes)} node(s) but {len(options.proxy_ports)} "
                        "kube-proxy port(s): give one --kube-proxy-ports entry per --nodes "
                        "entry")
    if len(options.nodes) != len(options.chain_prefixes):
        raise UserError(f"{len(options.nodes)} node(s) but {len(options.chain_prefixes)} "
                        "chain prefix(es): give one --kube-proxy-chain-prefixes entry per "
                        "--nodes entry")
    if len(set(options.chain_prefixes)) != len(options.chain_prefixes):
        raise UserError("--kube-proxy-chain-prefixes: each node's kube-proxy needs chains of "
                        "its own (the prefixes must differ)")
    pid = running_launcher(options)
    if pid is not None:
        raise UserError(f"kubelite is already running here (pid {pid}): "
                        "stop it with Ctrl-C in its terminal or `make down`")
    if options.ha and not options.secure:
        raise UserError("--ha needs --secure: etcd's members and the load balancer's "
                        "backends speak TLS")
    if options.ha and min(options.etcd_members, options.apiservers, options.schedulers,
                          options.controller_managers) < 1:
        raise UserError("--ha needs at least one of each: --etcd-members, --apiservers, "
                        "--schedulers, --controller-managers")
    etcd = etcd_binary()
    if not docker_answers(options.docker_socket):
        raise UserError(f"no Docker daemon answers on {options.docker_socket}: "
                        "run `make docker-ready` (or `bash hack/ensure-docker.sh`), then again")
    if not image_exists(options.docker_socket, options.pause_image):
        raise UserError(f"the pod sandbox image {options.pause_image} is missing: "
                        "run `bash hack/build-images.sh` (`make up` does), then again")
    for component in plan(options, etcd=etcd):
        for what, port in component.ports:
            if not port_is_free(port, component.address):
                raise UserError(
                    f"port {port} ({what}) on {component.address} is already in use: stop "
                    f"what holds "
                    f"it (`ss -ltnp 'sport = :{port}'`; another kubelite? `make down` or "
                    f"`docker compose down`) or choose another: make up UP_ARGS='"
                    f"{port_flag(options, component.kind if component.kind != 'etcd' else what)}'")
    return etcd


# --- running the children --------------------------------------------------------------


@dataclass
class Child:
    component: Component
    process: subprocess.Popen[bytes]
    log_path: Path
    offset: int = 0
    partial: bytes = b""
    console: ConsoleFilter = field(default_factory=ConsoleFilter)

    @property
    def name(self) -> str:
        return self.component.name

    def new_lines(self) -> Iterator[str]:
        """The complete lines appended to the log since the last call."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            yield line.decode(errors="replace").rstrip("\r")

    def last_lines(self, count: int) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-count:]
        except OSError:
            return []


class Cluster:
    """The children of one `up`, started in order and stopped in the reverse order."""

    def __init__(self, options: Options, components: list[Component],
                 out: Callable[[str], None]) -> None:
        self.options = options
        self.components = components
        self.children: list[Child] = []
        self.out = out
        self.stop_requested = False
        self.width = max(len(c.name) for c in components)
        self.restarts: dict[str, list[float]] = {}  # --ha: when each member was restarted
        self.died_at: dict[str, float] = {}

    def say(self, message: str) -> None:
        self.out(format_own_line(message, width=self.width))

    def request_stop(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stop_requested:
            self.out("")
            self.say(f"{signal.Signals(signum).name}: stopping the cluster")
        self.stop_requested = True

    def start(self, component: Component) -> Child:
        log_path = self.options.logs_dir / f"{component.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                component.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1", **dict(component.env)},
                start_new_session=True)  # Ctrl-C reaches us only; we stop them in order
        child = Child(component, process, log_path, offset=offset)
        same = [i for i, c in enumerate(self.children) if c.name == component.name]
        if same:  # a restart takes the dead one's place (and so its place in the stop order)
            self.children[same[0]] = child
        else:
            self.children.append(child)
        self.write_pid_file()
        return child

    def write_pid_file(self) -> None:
        self.options.pid_file.write_text(json.dumps({
            "pid": os.getpid(),
            "children": [{"name": c.name, "pid": c.process.pid, "args": list(c.component.args)}
                         for c in self.children],
        }) + "\n")

    def pump_logs(self) -> None:
        for child in self.children:
            for line in child.new_lines():
                shown = child.console.format(child.name, line, width=self.width)
                if shown is not None:
                    self.out(shown)

    def check(self) -> None:
        """Pump the logs; raise when a stop was asked for or a child died (--ha: a
        control-plane member that died is started again, unless it keeps dying)."""
        self.pump_logs()
        if self.stop_requested:
            raise Interrupted
        for child in [c for c in self.children if c.process.poll() is not None]:
            if not self.restart_if_replicated(child):
                lines = "\n".join(f"    {line}" for line in child.last_lines(15))
                raise UserError(f"{child.name} {describe_exit(child.process.returncode)}; "
                                f"the end of {shown_path(child.log_path)}:\n{lines}")

    def restart_if_replicated(self, child: Child) -> bool:
        """--ha: whether `child` is (or will shortly be) started again."""
        if not self.options.ha or child.component.kind not in RESTARTED_KINDS:
            return False
        now = time.monotonic()
        if child.name not in self.died_at:
            self.died_at[child.name] = now
            self.say(f"{child.name} {describe_exit(child.process.returncode)}: starting it "
                     f"again in {RESTART_DELAY_SECONDS:.0f}s")
        if now - self.died_at[child.name] < RESTART_DELAY_SECONDS:
            return True
        recent = [t for t in self.restarts.get(child.name, []) if now - t < CRASH_LOOP_WINDOW]
        if len(recent) >= CRASH_LOOP_RESTARTS:
            return False
        self.restarts[child.name] = [*recent, now]
        del self.died_at[child.name]
        self.start(child.component)
        self.say(f"started {child.name} again")
        return True

    def wait_until(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.options.startup_timeout
        while True:
            self.check()
            if ready():
                return
            if time.monotonic() > deadline:
                raise UserError(f"{what} was not ready after {self.options.startup_timeout:.0f}s:"
                                f" see {shown_path(self.options.logs_dir)}/")
            time.sleep(0.2)

    def start_all(self) -> None:
        for batch in start_batches(self.components):
            for component in batch:
                self.say(f"starting {component.name}")
                self.start(component)
            for component in batch:
                if component.health_url:
                    self.wait_until(f"{component.name} ({component.health_url})",
                                    functools.partial(http_ok, component.health_url,
                                                      self.health_check_verify(component)))
                if component.kind == ("load-balancer" if self.options.ha else "apiserver") \
                        and self.options.secure:
                    self.say(publish_cluster_info(self.options))
        nodes = self.options.nodes
        verify = health_verify(self.options)
        self.wait_until("the nodes", lambda: all(
            node_ready(self.options.apiserver_url, node, verify) for node in nodes))
        self.pump_logs()
        self.say(f"nodes {', '.join(nodes)} are Ready")

    def health_check_verify(self, component: Component) -> ssl.SSLContext | bool:
        if component.kind in ("apiserver", "load-balancer", "kubelet"):
            return health_verify(self.options)
        return etcd_health_verify(self.options) if component.kind == "etcd" else True

    def run_until_stopped(self) -> None:
        while True:
            self.check()
            time.sleep(0.2)

    def stop_all(self) -> None:
        """Kubelets (together), then scheduler, apiserver and etcd, each given time to exit."""
        for group in stop_groups(self.children):
            for child in group:
                if child.process.poll() is None:
                    self.say(f"stopping {child.name}")
                    signal_group(child.process.pid, signal.SIGTERM)
            for child in group:
                timeout = STOP_TIMEOUT_SECONDS.get(child.component.kind, 10.0)
                try:
                    child.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.say(f"{child.name} did not stop within {timeout:.0f}s: killing it")
                    signal_group(child.process.pid, signal.SIGKILL)
                    child.process.wait()
            self.pump_logs()
        if any(c.component.kind == "kube-proxy" for c in self.children):
            for prefix in self.options.chain_prefixes:
                self.say(remove_proxy_rules(prefix))
        self.options.pid_file.unlink(missing_ok=True)


def publish_cluster_info(options: Options) -> str:
    """kubeadm init's bootstrap-token phase: kube-public/cluster-info (the server and CA a
    joining node verifies with its token) and the RBAC that lets tokens join."""
    done = subprocess.run(
        [PYTHON, "-m", "common.bootstraptoken", "--kubeconfig", str(options.kubeconfig),
         "setup", "--server", options.apiserver_url, "--ca", str(options.pki_dir / "ca.crt")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"could not publish cluster-info: {last}")
    return done.stdout.strip()


def remove_proxy_rules(prefix: str) -> str:
    """`kube_proxy --cleanup`: the chains of one kube-proxy, and the jumps to them, gone
    from the host's iptables; what happened, in one line."""
    try:
        done = subprocess.run(kube_proxy_cleanup_args(prefix), cwd=REPO, capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not remove the {prefix}-* iptables chains: {e}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"could not remove the {prefix}-* iptables chains: {last}"
    return f"removed the {prefix}-* iptables chains"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


def start_batches(components: list[Component]) -> list[list[Component]]:
    """Start order in batches: consecutive components of one nonempty `batch` together,
    every other component alone."""
    batches: list[list[Component]] = []
    for component in components:
        if batches and component.batch and batches[-1][-1].batch == component.batch:
            batches[-1].append(component)
        else:
            batches.append([component])
    return batches


def stop_groups(children: list[Child]) -> list[list[Child]]:
    """Reverse start order, with every kubelet in one group, then every kube-proxy in one,
    then (--ha) the members of each other kind together (each kind stops side by side)."""
    groups: list[list[Child]] = []
    for kind in ("kubelet", "kube-proxy"):
        group = [c for c in children if c.component.kind == kind]
        if group:
            groups.append(group)
    for child in reversed(children):
        if child.component.kind in ("kubelet", "kube-proxy"):
            continue
        if groups and groups[-1][-1].component.kind == child.component.kind:
            groups[-1].append(child)
        else:
            groups.append([child])
    return groups


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def http_ok(url: str, verify: ssl.SSLContext | bool = True) -> bool:
    try:
        return httpx.get(url, timeout=2, verify=verify).status_code == 200
    except httpx.HTTPError:
        return False


def node_ready(apiserver: str, node: str, verify: ssl.SSLContext | bool = True) -> bool:
    try:
        response = httpx.get(f"{apiserver}/api/v1/nodes/{node}", timeout=2, verify=verify)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    conditions = (response.json().get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def print_to_console(line: str) -> None:
    """print(), surviving a console that went away (`make up | head`): the cluster runs on."""
    try:
        print(line, flush=True)
    except (BrokenPipeError, OSError):
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the run


def up(options: Options) -> int:
    etcd = preflight(options)
    options.logs_dir.mkdir(parents=True, exist_ok=True)  # and the state directory
    if options.secure:
        write_secure_files(options)
        if options.ha:
            options.haproxy_config.write_text(haproxy_config_text(options))
    else:
        options.kubeconfig.write_text(kubeconfig_text(options.apiserver_url))
    options.cluster_file.write_text(json.dumps({
        "nodes": list(options.nodes), "docker_socket": options.docker_socket,
        "apiserver": options.apiserver_url,
        "chain_prefixes": list(options.chain_prefixes)}) + "\n")
    cluster = Cluster(options, plan(options, etcd=etcd), out=print_to_console)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, cluster.request_stop)
    code = 0
    try:
        cluster.start_all()
        print_to_console("\n" + next_steps(options) + "\n")
        cluster.run_until_stopped()
    except Interrupted:
        pass
    except UserError as e:
        cluster.say(str(e))
        code = 1
    finally:
        cluster.stop_all()
    cluster.say("stopped" if code == 0 else "stopped after an error")
    return code


# --- down --------------------------------------------------------------------------------


def stop_launcher(options: Options, say: Callable[[str], None]) -> None:
    """SIGTERM a running `up` and wait for it; kill leftover children of a dead one."""
    state = read_json(options.pid_file) or {}
    pid = running_launcher(options)
    if pid is not None:
        say(f"stopping kubelite (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + sum(STOP_TIMEOUT_SECONDS.values()) + 10
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    children = state.get("children")
    for child in reversed(children if isinstance(children, list) else []):
        child_pid = int(child.get("pid") or 0)
        # Only what `up` started: a reused pid would run another command line.
        if child_pid and process_alive(child_pid) and command_line(child_pid)[:len(
                child.get("args") or [])] == child.get("args"):
            say(f"stopping leftover {child.get('name')} (pid {child_pid})")
            stop_leftover(child_pid, timeout=10.0)
    options.pid_file.unlink(missing_ok=True)


def stop_leftover(pid: int, *, timeout: float) -> None:
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            signal_group(pid, signal.SIGKILL)
            return
        time.sleep(0.1)


def down(options: Options) -> int:
    def say(message: str) -> None:
        print(f"kubelite: {message}", flush=True)

    stop_launcher(options, say)
    saved = read_json(options.cluster_file) or {}
    saved_nodes = saved.get("nodes")
    nodes = ([str(n) for n in saved_nodes] if isinstance(saved_nodes, list)
             else list(options.nodes))
    socket_path = str(saved.get("docker_socket") or options.docker_socket)
    try:
        removed = remove_pod_containers(socket_path, nodes)
    except DockerUnavailable as e:
        say(f"{e}: the pods' containers could not be removed (start dockerd and run again)")
        return 1
    say(f"removed {len(removed)} pod container(s) of nodes {', '.join(nodes)}"
        + (f": {', '.join(sorted(removed))}" if removed else ""))
    saved_prefixes = saved.get("chain_prefixes")
    for prefix in ([str(p) for p in saved_prefixes] if isinstance(saved_prefixes, list)
                   else list(options.chain_prefixes)):
        say(remove_proxy_rules(prefix))
    return 0


# --- command line ------------------------------------------------------------------------


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def port_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(item) for item in comma_list(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a list of ports: {text!r}") from e


def parse_args(argv: list[str] | None = None) -> tuple[str, Options]:
    parser = argparse.ArgumentParser(prog="hack/up.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", choices=["up", "down"], default="up")
    parser.add_argument("--state-dir", type=Path, default=REPO / ".kubelite",
                        help="etcd data, logs, kubeconfig, pid file (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8080,
                        help="the apiserver's plain-HTTP port with --no-secure "
                             "(default: %(default)s)")
    parser.add_argument("--etcd-port", type=int, default=2379)
    parser.add_argument("--etcd-peer-port", type=int, default=2380)
    parser.add_argument("--scheduler-port", type=int, default=10259,
                        help="the scheduler's /healthz, /readyz and /metrics "
                             "(default: %(default)s; 0: none)")
    parser.add_argument("--controller-manager-port", type=int, default=10257,
                        help="the controller-manager's /healthz, /readyz and /metrics "
                             "(default: %(default)s; 0: none)")
    parser.add_argument("--nodes", type=comma_list, default=("node1", "node2"),
                        help="node names, one kubelet each (default: node1,node2)")
    parser.add_argument("--kubelet-ports", type=port_list, default=(10250, 10251),
                        help="one port per node (default: 10250,10251)")
    parser.add_argument("--kube-proxy-ports", type=port_list, default=(),
                        help="each node's kube-proxy's /healthz, /readyz and /metrics, one "
                             "port per node (default: 10256,10258,...; 0: none)")
    parser.add_argument("--kube-proxy-chain-prefixes", type=comma_list, default=(),
                        help="the first word of each node's kube-proxy's iptables chains, one "
                             "per node (default: KUBE, KUBE2, ...)")
    parser.add_argument("--cluster-dns-port", type=int, default=10055,
                        help="the cluster DNS's /healthz, /readyz and /metrics "
                             "(default: %(default)s; 0: none)")
    parser.add_argument("--cluster-dns-listen", default="", metavar="ADDRESS[:PORT]",
                        help="where the cluster DNS server answers (default: Docker's bridge "
                             "gateway, port 53)")
    parser.add_argument("--cluster-dns", default=DEFAULT_CLUSTER_DNS,
                        help="the kube-dns Service's cluster IP, the pods' nameserver "
                             "(default: %(default)s)")
    parser.add_argument("--cluster-domain", default=DEFAULT_CLUSTER_DOMAIN,
                        help="the cluster's DNS domain (default: %(default)s)")
    parser.add_argument("--service-cluster-ip-range", default="", metavar="CIDR",
                        help="the Services' cluster IPs (default: the apiserver's, "
                             "10.96.0.0/12); --cluster-dns must be inside it")
    parser.add_argument("--pause-image", default=DEFAULT_PAUSE_IMAGE,
                        help="pod sandbox image (default: %(default)s, built locally)")
    parser.add_argument("--docker-socket", default=DEFAULT_DOCKER_SOCKET)
    parser.add_argument("--startup-timeout", type=float, default=90.0,
                        help="seconds each component may take to become ready")
    parser.add_argument("--secure", action=argparse.BooleanOptionalAction, default=True,
                        help="HTTPS with the cluster PKI in <state-dir>/pki, each component "
                             "with its own certificate (the default); --no-secure: plain "
                             "HTTP on --port, unauthenticated, for development")
    parser.add_argument("--secure-port", type=int, default=6443,
                        help="the apiserver's HTTPS port (default: %(default)s)")
    parser.add_argument("--authorization-mode", default="Node,RBAC",
                        help="the apiserver's --authorization-mode with --secure "
                             "(default: %(default)s)")
    ha = parser.add_argument_group(
        "HA control plane (--ha)",
        "control-plane machine N is the loopback address 127.0.1.N, running etcd member "
        "etcd-N (2379, peers 2380), apiserver-N (--secure-port), scheduler-N and "
        "controller-manager-N (their ports above), as N machines would; haproxy on "
        "127.0.0.1:--secure-port balances the apiservers, and every client goes through "
        "it. A member that dies is started again.")
    ha.add_argument("--ha", action="store_true", help="run the control plane highly available")
    ha.add_argument("--etcd-members", type=int, default=3, help="(default: %(default)s)")
    ha.add_argument("--apiservers", type=int, default=2, help="(default: %(default)s)")
    ha.add_argument("--schedulers", type=int, default=2, help="(default: %(default)s)")
    ha.add_argument("--controller-managers", type=int, default=2,
                    help="(default: %(default)s)")
    parser.add_argument("--pod-network-cidr", default="", metavar="CIDR",
                        help="as kubeadm's: every node gets a pod subnet (spec.podCIDR, /24) "
                             "of this range from the controller-manager, for a CNI plugin")
    parser.add_argument("--kubelet-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a flag for every kubelet, as k3s's --kubelet-arg: "
                             "max-pods=160 runs them with --max-pods=160 (repeatable)")
    args = parser.parse_args(argv)
    return args.command, Options(
        state_dir=args.state_dir.resolve(), port=args.port, etcd_port=args.etcd_port,
        etcd_peer_port=args.etcd_peer_port, scheduler_port=args.scheduler_port,
        controller_manager_port=args.controller_manager_port,
        nodes=args.nodes, kubelet_ports=args.kubelet_ports,
        kube_proxy_ports=args.kube_proxy_ports,
        kube_proxy_chain_prefixes=args.kube_proxy_chain_prefixes,
        cluster_dns_port=args.cluster_dns_port, cluster_dns_listen=args.cluster_dns_listen,
        cluster_dns=args.cluster_dns, cluster_domain=args.cluster_domain,
        service_cluster_ip_range=args.service_cluster_ip_range, pause_image=args.pause_image, docker_socket=args.docker_socket,
        startup_timeout=args.startup_timeout, secure=args.secure,
        secure_port=args.secure_port, authorization_mode=args.authorization_mode,
        ha=args.ha, etcd_members=args.etcd_members, apiservers=args.apiservers,
        schedulers=args.schedulers, controller_managers=args.controller_managers,
        kubelet_args=tuple(arg.removeprefix("--") for arg in args.kubelet_arg),
        pod_network_cidr=args.pod_network_cidr)


def main(argv: list[str] | None = None) -> int:
    command, options = parse_args(argv)
    try:
        return down(options) if command == "down" else up(options)
    except UserError as e:
        print(f"kubelite: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
