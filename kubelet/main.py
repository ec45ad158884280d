"""The kubelet process: node registration and lease, pod informer, pod workers, PLEG relist,
HTTP server.

    python -m kubelet --kubeconfig kubelet.conf --node-name node1 \
        [--node-labels k=v,k2=v2] [--node-ip IP] [--docker-socket /var/run/docker.sock] \
        [--port 10250] [--address 127.0.0.1] [--pod-infra-container-image IMAGE] \
        [--max-pods 110] [--root-dir DIR] [--system-reserved cpu=100m,memory=100Mi] \
        [--kube-reserved ...] [--eviction-hard memory.available<100Mi,...] \
        [--declared-capacity cpu=2,memory=4Gi] \
        [--tls-cert-file F --tls-private-key-file F] [--client-ca-file F] \
        [--authentication-token-webhook] [--authorization-mode Webhook] [--anonymous-auth=false]

(`--apiserver http://127.0.0.1:8080` instead of `--kubeconfig`: a plain-HTTP port.)

The kubelet's port serves HTTPS with `--tls-cert-file`/`--tls-private-key-file`, else plain
HTTP. Who may call it is kubelet/auth.py's (kube's defaults: anonymous allowed,
AlwaysAllow; kubeadm's, which `hack/up.py --secure` passes: `--anonymous-auth=false
--client-ca-file --authentication-token-webhook --authorization-mode Webhook`).

SIGTERM/SIGINT stop the kubelet and leave its pods running, as the real kubelet does;
the next kubelet on the node adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from common.authn import load_ca_bundle
from common.bootstraptoken import parse_token
from common.client import GROUP_VERSIONS, ApiClient
from common.events import EventRecorder
from common.flags import boolean
from common.http_pool import FastApiClient
from common.informer import Informer
from common.kubeconfig import connection
from common.tls import server_context
from common.upgrade import HijackHttpToolsProtocol, HijackTLSHttpToolsProtocol
from kubelet.allocatable import (
    DECLARABLE,
    DEFAULT_EVICTION_HARD,
    MEMORY,
    RESERVABLE,
    Threshold,
    allocatable,
    declared,
    host_capacity,
    parse_eviction_thresholds,
    parse_resource_list,
    quantity_strings,
)
from kubelet.auth import MODES as AUTHZ_MODES
from kubelet.auth import REVIEW_GROUP_VERSIONS, KubeletAuth, webhook_reviewers, with_auth
from kubelet.bootstrap import (
    BootstrapError,
    ensure_client_certificate,
    ensure_serving_certificate,
    join,
    parse_hashes,
)
from kubelet.dns import DnsSettings
from kubelet.docker import DEFAULT_SOCKET, DockerClient, DockerRuntime
from kubelet.docker_stream import DockerStreams
from kubelet.metrics import KubeletMetrics
from kubelet.node import (
    MAX_PODS,
    NODE_LEASE_DURATION_SECONDS,
    NodeAgent,
    NodeConfig,
    NodeLease,
    parse_node_labels,
)
from kubelet.objects import ObjectManager, ServiceLister
from kubelet.pleg import Pleg
from kubelet.pod_workers import PodWorkers
from kubelet.runtime import ContainerSummary
from kubelet.server import make_app
from kubelet.status_manager import StatusManager
from kubelet.sync import KubeletConfig
from kubelet.token_manager import TokenManager
from kubelet.volumes import VolumeManager

log = logging.getLogger("kubelet")

DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_ROOT_DIR = "/var/lib/kubelet"


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def ip_list(text: str) -> tuple[str, ...]:
    """`--cluster-dns`: comma-separated IP addresses."""
    addresses = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            addresses.append(str(ipaddress.ip_address(item)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a valid IP address") from None
    return tuple(addresses)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kubelet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apiserver", help="the apiserver's URL (overrides the kubeconfig's)")
    parser.add_argument("--kubeconfig",
                        help="a kubeconfig: the apiserver, its CA, the node's credentials "
                             "(system:node:NAME)")
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--node-labels", default="", help="k=v,k2=v2 added to the Node")
    parser.add_argument("--node-ip", default="127.0.0.1",
                        help="the address the Node advertises (InternalIP)")
    parser.add_argument("--docker-socket", default=DEFAULT_SOCKET)
    parser.add_argument("--port", type=int, default=10250, help="the kubelet's HTTP port")
    parser.add_argument("--address", default="127.0.0.1", help="the address to serve on")
    parser.add_argument("--pod-infra-container-image", default=DEFAULT_SANDBOX_IMAGE,
                        help="the pod sandbox image (kubelite/pause:3.10 when offline)")
    parser.add_argument("--cluster-dns", type=ip_list, default=(), metavar="IP[,IP]",
                        help="the DNS servers of pods with dnsPolicy ClusterFirst (kube-dns's "
                             "Service IP); none: they fall back to Default")
    parser.add_argument("--cluster-domain", default="",
                        help="the cluster's DNS domain (e.g. cluster.local): ClusterFirst "
                             "pods search <ns>.svc.DOMAIN svc.DOMAIN DOMAIN")
    parser.add_argument("--resolv-conf", default="/etc/resolv.conf",
                        help="the resolver config pods' DNS is based on; \"\" for none "
                             "(default: %(default)s)")
    parser.add_argument("--resync-seconds", type=float, default=10.0)
    parser.add_argument("--heartbeat-seconds", type=float, default=10.0)
    parser.add_argument("--node-lease-duration-seconds", type=positive_int,
                        default=NODE_LEASE_DURATION_SECONDS,
                        help="the node lease's leaseDurationSeconds; it is renewed every "
                             "quarter of it (the KubeletConfiguration field of that name)")
    add_resource_flags(parser)
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    add_auth_flags(parser)
    add_join_flags(parser)
    args = parser.parse_args(argv)
    if args.token or args.server or args.discovery_token_ca_cert_hash:
        if not (args.token and args.server and args.discovery_token_ca_cert_hash):
            parser.error("--server, --token and --discovery-token-ca-cert-hash go together")
        if parse_token(args.token) is None:
            parser.error(f'--token: the token "{args.token}" was not of the form '
                         '"[a-z0-9]{6}.[a-z0-9]{16}"')
        try:
            args.pinned_hashes = parse_hashes(args.discovery_token_ca_cert_hash)
        except ValueError as e:
            parser.error(f"--discovery-token-ca-cert-hash: {e}")
        if args.bootstrap_kubeconfig:
            parser.error("--bootstrap-kubeconfig is what --token writes: give one of them")
        joining_defaults(args)
    elif args.bootstrap_kubeconfig and not args.kubeconfig:
        parser.error("--bootstrap-kubeconfig needs --kubeconfig: where the credentials it "
                     "obtains are written")
    if not args.apiserver and not args.kubeconfig:
        parser.error("give --kubeconfig (or --apiserver for a plain-HTTP port), or join with "
                     "--server, --token and --discovery-token-ca-cert-hash")
    if args.rotate_server_certificates and args.tls_cert_file:
        parser.error("--rotate-server-certificates requests the serving certificate: leave "
                     "out --tls-cert-file")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        parser.error("--tls-cert-file and --tls-private-key-file go together")
    if args.client_ca_file and not (args.tls_cert_file or args.rotate_server_certificates):
        parser.error("--client-ca-file needs --tls-cert-file (client certificates need TLS)")
    return args


def resource_list(allowed: tuple[str, ...], flag: str) -> Callable[[str], dict[str, Decimal]]:
    def parse(text: str) -> dict[str, Decimal]:
        try:
            return parse_resource_list(text, allowed=allowed, flag=flag)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def eviction_thresholds(text: str) -> list[Threshold]:
    try:
        return parse_eviction_thresholds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_resource_flags(parser: argparse.ArgumentParser) -> None:
    """What the Node reports as capacity and allocatable (kube's flags, kube's syntax)."""
    parser.add_argument("--max-pods", type=positive_int, default=MAX_PODS,
                        help=f"the Node's pods capacity (default {MAX_PODS})")
    parser.add_argument("--root-dir", default=DEFAULT_ROOT_DIR,
                        help="the kubelet's directory: its filesystem is the node's "
                             f"ephemeral-storage (default {DEFAULT_ROOT_DIR})")
    parser.add_argument("--system-reserved", default={}, metavar="cpu=100m,memory=100Mi",
                        type=resource_list(RESERVABLE, "--system-reserved"),
                        help="kept back from allocatable for the OS (cpu, memory, "
                             "ephemeral-storage, pid)")
    parser.add_argument("--kube-reserved", default={}, metavar="cpu=100m,memory=100Mi",
                        type=resource_list(RESERVABLE, "--kube-reserved"),
                        help="kept back from allocatable for Kubernetes' own daemons")
    parser.add_argument("--eviction-hard", default=DEFAULT_EVICTION_HARD,
                        type=eviction_thresholds, metavar="SIGNAL<QUANTITY,...",
                        help="hard eviction thresholds; memory.available and nodefs.available "
                             f"are kept back from allocatable (default "
                             f"{DEFAULT_EVICTION_HARD.replace('%', '%%')})")
    parser.add_argument("--declared-capacity", default={}, metavar="cpu=2,memory=4Gi",
                        type=resource_list(DECLARABLE, "--declared-capacity"),
                        help="kubelite extension (not a kube flag): report this capacity "
                             "instead of the host's, per resource given (cpu, memory, "
                             "ephemeral-storage, pods, hugepages-*), so that one machine "
                             "can host a 2-cpu and a 4-cpu node; reservations and eviction "
                             "thresholds apply to it as to the host's")


def node_resources(args: argparse.Namespace) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """(capacity, allocatable), reading the host (blocking: run it in a thread)."""
    host = host_capacity(root_dir=args.root_dir, max_pods=args.max_pods)
    capacity = declared(host, args.declared_capacity)
    return capacity, allocatable(capacity, system_reserved=args.system_reserved,
                                 kube_reserved=args.kube_reserved,
                                 eviction_hard=args.eviction_hard)


def add_auth_flags(parser: argparse.ArgumentParser) -> None:
    """kube's kubelet flags for its port (KubeletConfiguration's authentication and
    authorization), with kube's defaults."""
    parser.add_argument("--tls-cert-file",
                        help="the serving certificate (PEM); without it the port is plain HTTP")
    parser.add_argument("--tls-private-key-file", help="its key (PEM)")
    parser.add_argument("--client-ca-file",
                        help="CA bundle: client certificates it signed authenticate (CN user, "
                             "O groups)")
    parser.add_argument("--authentication-token-webhook", type=boolean, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help="bearer tokens are checked with a TokenReview (default false)")
    parser.add_argument("--anonymous-auth", type=boolean, nargs="?", const=True, default=True,
                        metavar="BOOL",
                        help="requests with no credentials are system:anonymous (default "
                             "true); false: they get 401")
    parser.add_argument("--authorization-mode", choices=AUTHZ_MODES, default="AlwaysAllow",
                        help="Webhook: a SubjectAccessReview per request (default "
                             "AlwaysAllow)")


def add_join_flags(parser: argparse.ArgumentParser) -> None:
    """Joining a cluster: kubeadm join's token discovery, and kube's kubelet TLS bootstrap."""
    parser.add_argument("--server", help="join: the apiserver (or its load balancer) URL, "
                                         "as kubeadm join's API server endpoint")
    parser.add_argument("--token", help="join: a bootstrap token (ID.SECRET)")
    parser.add_argument("--discovery-token-ca-cert-hash", metavar="sha256:HEX[,...]",
                        help="join: the cluster CA's public key hash, as `kubeadm token "
                             "create --print-join-command` prints it")
    parser.add_argument("--discovery-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="join: how long discovery is retried (default 300)")
    parser.add_argument("--bootstrap-kubeconfig",
                        help="a kubeconfig with a bootstrap token: the client certificate is "
                             "requested with it when --kubeconfig has none (kube's TLS "
                             "bootstrap)")
    parser.add_argument("--cert-dir", help="where bootstrapped certificates go (default "
                                           "ROOT-DIR/pki)")
    parser.add_argument("--rotate-server-certificates", type=boolean, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help="request the serving certificate from the cluster "
                             "(kubernetes.io/kubelet-serving; an administrator approves it); "
                             "the port opens once it is issued")


def joining_defaults(args: argparse.Namespace) -> None:
    """What kubeadm join sets up for the kubelet: its files under the root dir, the cluster
    CA for client certificates, its port closed to anonymous callers and authorized by the
    apiserver (kubeadm's KubeletConfiguration), a serving certificate from the cluster."""
    root = Path(args.root_dir)
    args.kubeconfig = args.kubeconfig or str(root / "kubelet.conf")
    args.client_ca_file = args.client_ca_file or str(cert_dir(args) / "ca.crt")
    args.anonymous_auth = False
    args.authentication_token_webhook = True
    args.authorization_mode = "Webhook"
    if not args.tls_cert_file:
        args.rotate_server_certificates = True


def cert_dir(args: argparse.Namespace) -> Path:
    return Path(args.cert_dir or os.path.join(args.root_dir, "pki"))


async def bootstrap_credentials(args: argparse.Namespace) -> None:
    """Join (discovery, then the TLS bootstrap) or bootstrap from --bootstrap-kubeconfig;
    afterwards --kubeconfig holds the node's own client certificate."""
    kubeconfig = Path(args.kubeconfig)
    token = parse_token(args.token or "")
    if token is not None:
        args.bootstrap_kubeconfig = str(await join(
            server=args.server, token=token, pinned=args.pinned_hashes,
            node=args.node_name, root_dir=Path(args.root_dir), cert_dir=cert_dir(args),
            kubeconfig=kubeconfig, timeout=args.discovery_timeout))
    await ensure_client_certificate(node=args.node_name, kubeconfig=kubeconfig,
                                    bootstrap=Path(args.bootstrap_kubeconfig),
                                    cert_dir=cert_dir(args))


class StartupError(Exception):
    """A flag's file the kubelet cannot use: one line for the log, then exit 1."""


def _read(flag: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise StartupError(f"{flag} {path}: {e.strerror or e}") from None


def check_credentials(args: argparse.Namespace) -> None:
    """Load every credential the flags name, as the kubelet will, so that an unreadable
    or broken one ends it at once with a clear line (kube's kubelet fails to start on
    them too) rather than a traceback from inside the event loop."""
    if args.kubeconfig:
        _read("--kubeconfig", args.kubeconfig)
        try:
            connection(kubeconfig=args.kubeconfig, server=args.apiserver)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise StartupError(f"--kubeconfig {args.kubeconfig}: {e}") from None
    if args.client_ca_file:
        try:
            load_ca_bundle(_read("--client-ca-file", args.client_ca_file))
        except ValueError:
            raise StartupError(f"--client-ca-file {args.client_ca_file}: "
                               f"no PEM certificate in it") from None
    if args.tls_cert_file:
        cert, key = args.tls_cert_file, args.tls_private_key_file
        try:
            x509.load_pem_x509_certificate(_read("--tls-cert-file", cert))
        except ValueError:
            raise StartupError(f"--tls-cert-file {cert}: not a PEM certificate") from None
        try:
            serialization.load_pem_private_key(_read("--tls-private-key-file", key), None)
        except (ValueError, TypeError):
            raise StartupError(f"--tls-private-key-file {key}: not a PEM private key "
                               f"(unencrypted)") from None
        try:
            server_context(cert, key, args.client_ca_file)
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            raise StartupError(f"--tls-private-key-file {key} is not the key of "
                               f"--tls-cert-file {cert} ({getattr(e, 'reason', None) or e})",
                               ) from None


def kubelet_auth(args: argparse.Namespace, api: ApiClient) -> KubeletAuth:
    cas = load_ca_bundle(Path(args.client_ca_file).read_bytes()) if args.client_ca_file else ()
    review_token, review_access = webhook_reviewers(api, args.node_name)
    return KubeletAuth(node_name=args.node_name, client_cas=cas, anonymous=args.anonymous_auth,
                       review_token=review_token if args.authentication_token_webhook else None,
                       review_access=(review_access if args.authorization_mode == "Webhook"
                                      else None))


def server_config(args: argparse.Namespace, app: Any) -> uvicorn.Config:
    """uvicorn's config for the kubelet's port: HTTPS when given a serving certificate."""
    # exec, attach and port-forward take their connection over (common/upgrade.py)
    tls: dict[str, Any] = {"http": HijackHttpToolsProtocol}
    if args.tls_cert_file:
        context = server_context(args.tls_cert_file, args.tls_private_key_file,
                                 args.client_ca_file)
        tls = {"http": HijackTLSHttpToolsProtocol,
               "ssl_context_factory": lambda _config, _default: context}
    # open exec/attach/port-forward sessions (and logs -f) get 3 s at shutdown, as the
    # apiserver's requests do, instead of holding the kubelet up for as long as they last
    return uvicorn.Config(app, host=args.address, port=args.port, log_level="warning",
                          lifespan="off", access_log=False, timeout_graceful_shutdown=3,
                          **tls)


async def run(args: argparse.Namespace) -> None:
    node_name: str = args.node_name
    capacity, node_allocatable = await asyncio.to_thread(node_resources, args)
    log.info("kubelet %s: capacity %s, allocatable %s", node_name,
             quantity_strings(capacity), quantity_strings(node_allocatable))
    docker = DockerClient(args.docker_socket)
    docker.runtime_metrics = metrics = KubeletMetrics()
    runtime = DockerRuntime(docker, node_name=node_name,
                            sandbox_image=args.pod_infra_container_image,
                            memory_capacity=int(capacity[MEMORY]),
                            pods_dir=os.path.join(args.root_dir, "pods"),
                            node_ip=args.node_ip, allocatable=node_allocatable)
    # status writes, Events and reads on the lean pool, as the scheduler's binds
    api = FastApiClient(connection(kubeconfig=args.kubeconfig, server=args.apiserver),
                        user_agent=f"kubelet/{node_name}",
                        group_versions={**GROUP_VERSIONS, **REVIEW_GROUP_VERSIONS})
    api.add_metrics(metrics.metrics)
    recorder = EventRecorder(api, component="kubelet", host=node_name)
    status = StatusManager(api)
    services = ServiceLister(api)
    objects = ObjectManager(api, services=services)
    tokens = TokenManager(lambda namespace, name, request: api.create_subresource(
        "serviceaccounts", name, "token", request, namespace=namespace))
    volumes = VolumeManager(os.path.join(args.root_dir, "pods"), objects, node_name=node_name,
                            allocatable=node_allocatable, tokens=tokens)
    workers = PodWorkers(runtime=runtime, api=api, recorder=recorder, status=status,
                         config=KubeletConfig(node_name=node_name, node_ip=args.node_ip,
                                              resync_seconds=args.resync_seconds,
                                              dns=DnsSettings(
                                                  cluster_dns=args.cluster_dns,
                                                  cluster_domain=args.cluster_domain,
                                                  resolver_config=args.resolv_conf)),
                         objects=objects, volumes=volumes, metrics=metrics)
    objects.on_change = workers.poke_all  # a changed ConfigMap/Secret: refresh its pods
    informer = Informer(api, "pods", field_selector=f"spec.nodeName={node_name}",
                        on_add=workers.update, on_update=lambda _old, new: workers.update(new),
                        on_delete=workers.forget, name=f"kubelet {node_name} pods")
    agent = NodeAgent(client=api, runtime=runtime,
                      config=NodeConfig(node_name=node_name, node_ip=args.node_ip,
                                        port=args.port,
                                        labels=parse_node_labels(args.node_labels),
                                        max_pods=args.max_pods,
                                        capacity=quantity_strings(capacity),
                                        allocatable=quantity_strings(node_allocatable)),
                      heartbeat_seconds=args.heartbeat_seconds)
    lease = NodeLease(client=api, node_name=node_name,
                      duration_seconds=args.node_lease_duration_seconds)
    pleg = Pleg(runtime, workers.cache, on_change=workers.poke)
    pleg.relist_duration = metrics.pleg_relist
    metrics.register(pleg.relisted)

    async def cleanup_orphans(summaries: list[ContainerSummary]) -> None:
        # Only once the informer knows every pod: before, every container looks orphaned.
        if informer.has_synced:
            await workers.cleanup_orphans(summaries)

    app = with_auth(make_app(runtime=runtime, get_pod=workers.get_pod,
                             docker=DockerStreams(args.docker_socket), metrics=metrics.render),
                    kubelet_auth(args, api))
    servers: list[uvicorn.Server] = []

    async def serve_port() -> None:
        if args.rotate_server_certificates:
            pem = await ensure_serving_certificate(
                node=node_name, kubeconfig=Path(args.kubeconfig), cert_dir=cert_dir(args),
                addresses=(args.node_ip,))
            args.tls_cert_file = args.tls_private_key_file = str(pem)
            log.info("kubelet %s: serving HTTPS on %s:%d with the issued certificate",
                     node_name, args.address, args.port)
        servers.append(uvicorn.Server(server_config(args, app)))
        await servers[0].serve()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    server_task = asyncio.create_task(serve_port(), name="kubelet-server")
    tasks: list[asyncio.Task[None]] = []
    try:
        registration = asyncio.create_task(agent.register(), name="register")
        stopped = asyncio.create_task(stop.wait(), name="stop")
        await asyncio.wait({registration, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if registration.done():
            registration.result()
            log.info("kubelet %s: serving %s on %s:%d (authorization %s), node IP %s, "
                     "sandbox image %s, cluster DNS %s (domain %s)", node_name,
                     "HTTPS" if args.tls_cert_file else
                     "HTTPS (once its serving certificate is issued)"
                     if args.rotate_server_certificates else "HTTP", args.address, args.port,
                     args.authorization_mode, args.node_ip, args.pod_infra_container_image,
                     ",".join(args.cluster_dns) or "none", args.cluster_domain or "none")
            services.start()
            tasks = [
                asyncio.create_task(informer.run(), name="pod-informer"),
                asyncio.create_task(agent.heartbeat_forever(), name="heartbeat"),
                asyncio.create_task(lease.run_forever(), name="node-lease"),
                asyncio.create_task(pleg.run(after_relist=cleanup_orphans), name="pleg"),
            ]
            await stop.wait()
        else:
            registration.cancel()
        log.info("kubelet %s: shutting down; pods keep running", node_name)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await workers.stop()
        await objects.stop()
        for server in servers:
            server.should_exit = True
        if not servers:
            server_task.cancel()  # still waiting for its serving certificate
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await asyncio.gather(server_task, return_exceptions=True)
        await api.aclose()
        await docker.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.bootstrap_kubeconfig or args.token:
        try:
            asyncio.run(bootstrap_credentials(args))
        except BootstrapError as e:
            log.error("kubelet %s cannot join: %s", args.node_name, e)
            sys.exit(1)
    try:
        check_credentials(args)
    except StartupError as e:
        log.error("kubelet %s cannot start: %s", args.node_name, e)
        sys.exit(1)
    asyncio.run(run(args))
