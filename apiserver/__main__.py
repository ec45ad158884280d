"""`python -m apiserver --etcd-servers http://127.0.0.1:2379 --bind-address 127.0.0.1 --port 8080`.

With `--secure-port 6443 --tls-cert-file ... --tls-private-key-file ... --client-ca-file
... [--token-auth-file ...] [--authorization-mode ...]` it also serves HTTPS, where every
request is authenticated and authorized (apiserver.auth). The plain `--port` is kube's old
insecure port: unauthenticated, every request as system:unsecured (system:masters); it
says so at startup. `--port 0` turns it off.

With `--etcd-servers https://...` it speaks TLS to etcd, verifying etcd's certificate
against `--etcd-cafile` and presenting `--etcd-certfile`/`--etcd-keyfile` (etcd's
--client-cert-auth); `http://` (or a bare host:port) stays plaintext.

With `--workers N` (N > 1) this process only supervises: it starts N worker processes of
the same command, each listening on the same port with SO_REUSEPORT (the kernel spreads
new connections over them) and each with its own watch cache. Every worker reads and
writes etcd directly, so what one acknowledges the others serve: a consistent LIST waits
until the worker's cache has caught up with etcd, a GET reads etcd. Worker 0 alone runs
the in-process controllers. When one worker dies the supervisor stops the others and
exits with its status, so that whatever restarts the apiserver restarts all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from apiserver.allocator import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    IPRange,
    PortRange,
)
from apiserver.app import create_app
from apiserver.auth.authn import UNSECURED, Authenticator, load_ca_bundle, parse_token_file
from apiserver.auth.filters import Secured, Unsecured
from apiserver.auth.modes import MODES
from apiserver.auth.serviceaccount import (
    DEFAULT_ISSUER,
    ServiceAccountTokens,
    load_public_keys,
    load_signing_key,
)
from apiserver.controlplane import ServiceOptions
from apiserver.storage import EtcdTLS, uses_tls
from apiserver.tls import server_context
from common.flags import boolean
from common.kubeconfig import ssl_context
from common.upgrade import HijackHttpToolsProtocol, HijackTLSHttpToolsProtocol

log = logging.getLogger("apiserver")


def parse_duration(text: str) -> int:
    """Seconds from `3600`, `1h`, `1h0m0s`, `90s` (kube's duration flags)."""
    if text.isdigit():
        return int(text)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"invalid duration: {text!r}")
    hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="apiserver", description="kubelite apiserver")
    p.add_argument("--etcd-servers", default="http://127.0.0.1:2379",
                   help="comma-separated etcd endpoints")
    p.add_argument("--etcd-prefix", default="/registry", help="key prefix in etcd")
    p.add_argument("--etcd-cafile",
                   help="the CA (PEM) that signed the https:// etcd servers' certificate")
    p.add_argument("--etcd-certfile",
                   help="the client certificate (PEM) presented to https:// etcd servers")
    p.add_argument("--etcd-keyfile", help="its key (PEM)")
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080,
                   help="the plain-HTTP port, unauthenticated, for development (0: off)")
    p.add_argument("--secure-port", type=int, default=0,
                   help="the HTTPS port, authenticated and authorized (0: off)")
    p.add_argument("--tls-cert-file", help="the serving certificate (PEM)")
    p.add_argument("--tls-private-key-file", help="its key (PEM)")
    p.add_argument("--client-ca-file",
                   help="CA bundle: client certificates it signed authenticate (CN user, O "
                        "groups)")
    p.add_argument("--root-ca-file",
                   help="the CA bundle (PEM) published in every namespace's kube-root-ca.crt "
                        "ConfigMap, which pods trust the apiserver with (default: "
                        "--client-ca-file)")
    p.add_argument("--token-auth-file",
                   help='bearer tokens, CSV lines: token,user,uid,"group1,group2"')
    p.add_argument("--anonymous-auth", type=boolean, nargs="?", const=True, default=True,
                   metavar="BOOL",
                   help="requests with no credentials are system:anonymous (default true)")
    p.add_argument("--enable-bootstrap-token-auth", type=boolean, nargs="?", const=True,
                   default=False, metavar="BOOL",
                   help="bootstrap tokens (kube-system Secrets of type "
                        "bootstrap.kubernetes.io/token) authenticate, for nodes that join "
                        "(default false)")
    p.add_argument("--authorization-mode", type=comma_list, default=("AlwaysAllow",),
                   help=f"comma-separated, in order, of {', '.join(MODES)} "
                        f"(default AlwaysAllow)")
    p.add_argument("--service-account-key-file", action="append", default=[],
                   help="PEM keys (public, or private for their public half) that verify "
                        "ServiceAccount tokens; repeatable (default: the signing key's)")
    p.add_argument("--service-account-signing-key-file",
                   help="the private key (PEM) that signs ServiceAccount tokens (TokenRequest)")
    p.add_argument("--service-account-issuer", default=DEFAULT_ISSUER,
                   help=f"the `iss` of the tokens it issues and accepts (default "
                        f"{DEFAULT_ISSUER})")
    p.add_argument("--api-audiences", type=comma_list, default=(),
                   help="comma-separated audiences a token must have one of (default: the "
                        "issuer)")
    p.add_argument("--service-account-max-token-expiration", type=parse_duration, default=0,
                   help="the longest a TokenRequest's token may live (e.g. 48h; 0: no cap)")
    p.add_argument("--kubelet-client-certificate",
                   help="the client certificate (PEM) it presents to kubelets; with it "
                        "kubelets are called over HTTPS")
    p.add_argument("--kubelet-client-key", help="its key (PEM)")
    p.add_argument("--kubelet-certificate-authority",
                   help="the CA (PEM) kubelets' serving certificates are verified against "
                        "(HTTPS too; without it they are not verified, as kube does)")
    p.add_argument("--event-ttl", type=parse_duration, default=3600,
                   help="how long events are kept (e.g. 1h)")
    p.add_argument("--etcd-compaction-interval", type=parse_duration, default=300,
                   help="how often etcd's history is compacted, keeping one interval "
                        "of it (e.g. 5m; 0 disables)")
    p.add_argument("--service-cluster-ip-range", type=cluster_ip_range,
                   default=DEFAULT_SERVICE_CLUSTER_IP_RANGE,
                   help=f"the CIDR Services' ClusterIPs are allocated from (default "
                        f"{DEFAULT_SERVICE_CLUSTER_IP_RANGE}); its first address is the "
                        f"kubernetes Service's")
    p.add_argument("--service-node-port-range", type=node_port_range,
                   default=DEFAULT_SERVICE_NODE_PORT_RANGE,
                   help=f"the ports NodePort Services are given, 'a-b' or 'base+size' "
                        f"(default {DEFAULT_SERVICE_NODE_PORT_RANGE})")
    p.add_argument("--advertise-address", type=ip_address, default="127.0.0.1",
                   help="the address the kubernetes Service's EndpointSlice gives for this "
                        "apiserver (default 127.0.0.1)")
    p.add_argument("--service-repair-interval", type=parse_duration, default=180,
                   help="how often the ClusterIP and NodePort allocations are checked "
                        "against the Services, a leak freed after 3 passes (default 3m, "
                        "kube's)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="serving processes on the one port (default 1)")
    p.add_argument("--log-level", default="info")
    # set by the supervisor for the workers it starts
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    return p


def cluster_ip_range(text: str) -> str:
    try:
        return IPRange.parse(text).text
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def node_port_range(text: str) -> str:
    try:
        return PortRange.parse(text).text
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port range {text!r}: 'a-b' or "
                                         f"'base+size'") from None


def ip_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IP address: {text!r}") from None


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    unknown = [m for m in args.authorization_mode if m not in MODES]
    if unknown or not args.authorization_mode:
        p.error(f"--authorization-mode: unknown mode(s) {', '.join(unknown) or '(none)'}; "
                f"use {', '.join(MODES)}")
    if args.secure_port and not (args.tls_cert_file and args.tls_private_key_file):
        p.error("--secure-port needs --tls-cert-file and --tls-private-key-file")
    if bool(args.kubelet_client_certificate) != bool(args.kubelet_client_key):
        p.error("--kubelet-client-certificate and --kubelet-client-key go together")
    if not args.port and not args.secure_port:
        p.error("nothing to serve: --port and --secure-port are both 0")


def etcd_servers(args: argparse.Namespace) -> list[str]:
    return [s.strip() for s in args.etcd_servers.split(",") if s.strip()]


def etcd_tls(args: argparse.Namespace) -> EtcdTLS | None:
    """The etcd client TLS of the flags (None for http:// servers); a clear one-line exit
    when a file is unusable."""
    files = (args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile)
    try:
        secure = uses_tls(etcd_servers(args))
    except ValueError as e:
        log.error("apiserver: --etcd-servers: %s", e)
        sys.exit(1)
    if not secure:
        if any(files):
            log.warning("--etcd-cafile/--etcd-certfile/--etcd-keyfile are ignored: "
                        "--etcd-servers %s is not https://", args.etcd_servers)
        return None
    try:
        return EtcdTLS.load(*files)
    except ValueError as e:
        log.error("apiserver cannot load its etcd client credentials: %s", e)
        sys.exit(1)


def service_account_tokens(args: argparse.Namespace) -> ServiceAccountTokens | None:
    """The ServiceAccount token keys of the flags; None when none is given."""
    key_files = args.service_account_key_file or (
        [args.service_account_signing_key_file] if args.service_account_signing_key_file
        else [])
    if not key_files:
        return None
    try:
        keys = tuple(k for f in key_files for k in load_public_keys(Path(f).read_bytes()))
        signing = (load_signing_key(Path(args.service_account_signing_key_file).read_bytes())
                   if args.service_account_signing_key_file else None)
    except (OSError, ValueError) as e:
        log.error("apiserver cannot load its service account keys: %s", e)
        sys.exit(1)
    return ServiceAccountTokens(keys=keys, issuer=args.service_account_issuer,
                                api_audiences=tuple(args.api_audiences), signing_key=signing,
                                max_expiration=args.service_account_max_token_expiration)


def root_ca(args: argparse.Namespace) -> str | None:
    """The PEM published as kube-root-ca.crt; a clear one-line exit when unreadable."""
    path = args.root_ca_file or args.client_ca_file
    if not path:
        return None
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        log.error("apiserver cannot read its root CA %s: %s", path, e)
        sys.exit(1)


def authenticator(args: argparse.Namespace, front: Any = None) -> Authenticator:
    """The authenticator of the flags; a clear one-line exit when a file is unusable."""
    try:
        cas = (load_ca_bundle(Path(args.client_ca_file).read_bytes()) if args.client_ca_file
               else ())
        tokens = None
        if args.token_auth_file:
            tokens = parse_token_file(Path(args.token_auth_file).read_text(),
                                      source=args.token_auth_file)
    except (OSError, ValueError) as e:
        log.error("apiserver cannot load its credentials: %s", e)
        sys.exit(1)
    service_accounts = (front.service_account_user
                        if front is not None and front.server.service_accounts else None)
    bootstrap = (front.bootstrap_token_user
                 if front is not None and args.enable_bootstrap_token_auth else None)
    return Authenticator(client_cas=cas, tokens=tokens, anonymous=args.anonymous_auth,
                         service_account_tokens=service_accounts, bootstrap_tokens=bootstrap)


def kubelet_client_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """How it calls kubelets: None (plain HTTP) unless a kubelet client flag is given."""
    if not (args.kubelet_client_certificate or args.kubelet_certificate_authority):
        return None
    try:
        read = lambda name: Path(name).read_bytes() if name else None  # noqa: E731
        return ssl_context(ca=read(args.kubelet_certificate_authority),
                           cert=read(args.kubelet_client_certificate),
                           key=read(args.kubelet_client_key),
                           insecure=not args.kubelet_certificate_authority)
    except (OSError, ssl.SSLError, ValueError) as e:
        log.error("apiserver cannot load its kubelet client certificate: %s", e)
        sys.exit(1)


def listen_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def worker_argv(argv: list[str], index: int) -> list[str]:
    """The command line of worker `index`: the supervisor's own, plus its index."""
    return [sys.executable, "-m", "apiserver", *argv, "--worker-index", str(index)]


def supervise(argv: list[str], workers: int) -> int:
    """Run `workers` workers until one exits or we are told to stop; their exit status."""
    children = [subprocess.Popen(worker_argv(argv, i)) for i in range(workers)]
    log.info("apiserver supervising %d workers (pids %s)", workers,
             ", ".join(str(c.pid) for c in children))
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    by_pid = {c.pid: i for i, c in enumerate(children)}
    status = 0
    while any(c.returncode is None for c in children):
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        if pid not in by_pid:
            continue
        child = children[by_pid[pid]]
        child.returncode = os.waitstatus_to_exitcode(wait_status)
        if not stopping:
            log.error("apiserver worker %d exited with %d: stopping the others",
                      by_pid[pid], child.returncode)
            status = child.returncode or 1
            stop(signal.SIGTERM, None)
    return status


class SecondaryServer(uvicorn.Server):
    """A server beside the first in one loop: the first owns the signals and the lifespan."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def server_config(app: Any, args: argparse.Namespace, **extra: Any) -> uvicorn.Config:
    return uvicorn.Config(app, log_level=args.log_level.lower(), access_log=False,
                          timeout_graceful_shutdown=3, log_config=None,
                          # clients keep connections (informers, kubectl); closing idle
                          # ones after uvicorn's 5 s default races with their reuse
                          timeout_keep_alive=120, **extra)


async def serve_both(first: uvicorn.Server, first_sock: socket.socket,
                     second: uvicorn.Server, second_sock: socket.socket) -> None:
    """Two servers of one app: the second starts once the first's lifespan has (storage
    up), and stops when the first does."""
    stop_first = first.handle_exit

    def stop_both(sig: int, frame: FrameType | None) -> None:
        second.should_exit = True
        stop_first(sig, frame)

    first.handle_exit = stop_both  # type: ignore[method-assign]
    main = asyncio.create_task(first.serve(sockets=[first_sock]))
    while not first.started and not main.done():  # noqa: ASYNC110 - uvicorn has a flag only
        await asyncio.sleep(0.02)
    if main.done():
        await main
        return
    other = asyncio.create_task(second.serve(sockets=[second_sock]))
    await main
    second.should_exit = True
    await other


def open_socket(args: argparse.Namespace, port: int) -> socket.socket:
    try:
        return listen_socket(args.bind_address, port, reuse_port=args.worker_index is not None)
    except OSError as e:
        log.error("apiserver cannot listen on %s:%d: %s", args.bind_address, port, e)
        sys.exit(1)


def serve(args: argparse.Namespace) -> None:
    worker = args.worker_index
    front = create_app(etcd_servers(args), etcd_tls=etcd_tls(args),
                       etcd_prefix=args.etcd_prefix, event_ttl=args.event_ttl,
                       compaction_interval=args.etcd_compaction_interval,
                       controllers=worker in (None, 0),
                       authorization_modes=args.authorization_mode,
                       service_accounts=service_account_tokens(args),
                       services=ServiceOptions(
                           cluster_ip_range=args.service_cluster_ip_range,
                           node_port_range=args.service_node_port_range,
                           advertise_address=args.advertise_address,
                           secure_port=args.secure_port,
                           repair_interval=args.service_repair_interval),
                       root_ca=root_ca(args))
    front.server.kubelet_tls = kubelet_client_context(args)
    plain = open_socket(args, args.port) if args.port else None
    secure = open_socket(args, args.secure_port) if args.secure_port else None
    if plain is not None and worker in (None, 0):
        log.warning("serving plain HTTP on %s:%d WITHOUT authentication or authorization "
                    "(every request is %s in %s, as kube's old insecure port): for "
                    "development only", args.bind_address, args.port, UNSECURED.name,
                    UNSECURED.groups[0])
    # exec, attach and portforward take their connection over (common/upgrade.py)
    plain_config = (server_config(Unsecured(front, UNSECURED), args,
                                  http=HijackHttpToolsProtocol)
                    if plain is not None else None)
    secure_config = None
    if secure is not None:
        try:
            context = server_context(args.tls_cert_file, args.tls_private_key_file,
                                     args.client_ca_file)
        except (OSError, ssl.SSLError) as e:
            log.error("apiserver cannot load its serving certificate: %s", e)
            sys.exit(1)
        authn = authenticator(args, front)
        front.server.review_token = authn.authenticate_token
        secure_config = server_config(
            Secured(front, authn, front.authorizer), args,
            http=HijackTLSHttpToolsProtocol, ssl_context_factory=lambda _config, _default: context,
            # the lifespan (etcd, caches, controllers) runs once, with the first server
            lifespan="on" if plain is None else "off")
        if worker in (None, 0):
            log.info("serving HTTPS on %s:%d (authorization: %s)", args.bind_address,
                     args.secure_port, ",".join(args.authorization_mode))
    # What is loaded by now (FastAPI, pydantic, gRPC: a few hundred thousand objects) lives
    # as long as the process: keep it out of the collector's full passes, each of which
    # otherwise stalls every request for 50+ ms (create p99 75 -> 30 ms under load).
    gc.freeze()
    if plain_config is not None and secure_config is not None:
        assert plain is not None and secure is not None
        first = uvicorn.Server(plain_config)
        with asyncio.Runner(loop_factory=plain_config.get_loop_factory()) as runner:
            runner.run(serve_both(first, plain, SecondaryServer(secure_config), secure))
        return
    config, sock = ((plain_config, plain) if plain_config is not None
                    else (secure_config, secure))
    assert config is not None and sock is not None
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    p = parser()
    args = p.parse_args()
    check_args(p, args)
    worker = "" if args.worker_index is None else f"[{args.worker_index}]"
    logging.basicConfig(level=args.log_level.upper(),
                        format=f"%(asctime)s %(name)s{worker} %(levelname)s %(message)s")
    if args.workers > 1 and args.worker_index is None:
        etcd_tls(args)  # unusable files end the supervisor, not N workers
        sys.exit(supervise(sys.argv[1:], args.workers))
    serve(args)


if __name__ == "__main__":
    main()
