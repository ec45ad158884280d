"""The process shell kube's control-plane components share (the scheduler and the
controller-manager here): their common flags, and `serve`, which runs a component until
SIGTERM/SIGINT or until it loses its leader election.

`serve` binds the health/metrics port first (a port in use stops the process before
anything), connects to the apiserver, campaigns for the Lease when `--leader-elect`,
runs the component, serves its endpoint, and on a stop signal reports not-ready, stops
the component, lets it drain, and releases the Lease so that a standby takes over at
once. A lost election exits with status 1 at once, for the supervisor to restart the
process as a candidate (as kube's components do).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from common.client import ApiClient
from common.endpoint import Endpoints, open_endpoint, serving
from common.flags import add_duration, boolean
from common.kubeconfig import Connection, connection
from common.leaderelection import LeaderElectionConfig, LeaderElector, timing_errors

DEFAULT_APISERVER = "http://127.0.0.1:8080"


# -- flags ---------------------------------------------------------------------------------------


def add_connection_flags(parser: argparse.ArgumentParser, component: str) -> None:
    parser.add_argument("--apiserver", default=None,
                        help=f"apiserver URL (default: the kubeconfig's server, else "
                             f"{DEFAULT_APISERVER})")
    parser.add_argument("--kubeconfig", default=None,
                        help=f"a kubeconfig: the apiserver, its CA, the {component}'s "
                             f"credentials")


def add_endpoint_flags(parser: argparse.ArgumentParser, *, bind_address: str, port: int,
                       kube_name: str) -> None:
    parser.add_argument("--bind-address", default=bind_address,
                        help="address of the /healthz, /livez, /readyz and /metrics endpoint "
                             "(default: %(default)s)")
    parser.add_argument("--port", type=int, default=port,
                        help=f"its port, plain HTTP (default: %(default)s, {kube_name}'s); "
                             f"0 serves none")


def add_leader_election_flags(parser: argparse.ArgumentParser, *, lease_name: str,
                              kube_name: str) -> None:
    election = parser.add_argument_group(f"leader election ({kube_name}'s flags)")
    election.add_argument("--leader-elect", type=boolean, nargs="?", const=True, default=True,
                          metavar="BOOL",
                          help="only the holder of the Lease works; others wait to take "
                               "over (default: true)")
    add_duration(election, "--leader-elect-lease-duration", 15.0,
                 "how long a lease stays valid after its last renewal")
    add_duration(election, "--leader-elect-renew-deadline", 10.0,
                 "the leader stops when it could not renew for this long")
    add_duration(election, "--leader-elect-retry-period", 2.0,
                 "between two attempts to acquire or renew")
    election.add_argument("--leader-elect-resource-namespace", default="kube-system",
                          help="namespace of the Lease (default: %(default)s)")
    election.add_argument("--leader-elect-resource-name", default=lease_name,
                          help="name of the Lease (default: %(default)s)")


def add_log_level_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])


def leader_election_errors(args: argparse.Namespace) -> list[str]:
    if not args.leader_elect:
        return []
    return timing_errors(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                         args.leader_elect_retry_period)


def leader_election_config(args: argparse.Namespace) -> LeaderElectionConfig:
    return LeaderElectionConfig(namespace=args.leader_elect_resource_namespace,
                                name=args.leader_elect_resource_name,
                                lease_duration=args.leader_elect_lease_duration,
                                renew_deadline=args.leader_elect_renew_deadline,
                                retry_period=args.leader_elect_retry_period)


def apiserver_of(args: argparse.Namespace) -> str:
    """`--apiserver`; else "" (the kubeconfig's server) with a kubeconfig; else the
    insecure local default."""
    return str(args.apiserver or ("" if args.kubeconfig else DEFAULT_APISERVER))


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)


# -- the process ---------------------------------------------------------------------------------


class ProcessOptions(Protocol):
    """The options `serve` reads (both components' frozen Options have them)."""

    @property
    def apiserver(self) -> str: ...  # a URL; or "" for the kubeconfig's server
    @property
    def kubeconfig(self) -> str | None: ...
    @property
    def bind_address(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def leader_elect(self) -> bool: ...
    @property
    def leader_election(self) -> LeaderElectionConfig: ...


class Component(Protocol):
    """What `serve` runs."""

    def describe(self) -> str: ...  # for the startup line: "kube-scheduler with ..."
    def run(self, *, leading: asyncio.Event | None = None
            ) -> Coroutine[Any, Any, None]: ...
    def liveness(self, running: asyncio.Task[None]) -> Mapping[str, str | None]: ...
    def readiness(self, stopping: asyncio.Event) -> Mapping[str, str | None]: ...
    def metrics(self, elector: LeaderElector | None) -> bytes: ...  # the /metrics page
    def stopping(self) -> str: ...  # the "shutting down" line
    async def drain(self) -> None: ...  # after the main task stopped on a stop signal


@dataclass(frozen=True)
class Client:
    user_agent: str
    group_versions: Mapping[str, str] | None = None
    max_connections: int | None = None  # ApiClient's: a pool kept alive, for many writes
    # another ApiClient (the scheduler's FastApiClient), made from the connection
    make_api: Callable[[Connection, str], ApiClient] | None = None


async def serve(options: ProcessOptions, client: Client,
                make: Callable[[ApiClient], Component], log: logging.Logger) -> None:
    """Run the component until SIGTERM/SIGINT (then drain, release the lease) or until
    leadership is lost (then exit with status 1)."""
    sock = open_endpoint(options.bind_address, options.port, log)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    conn = connection(kubeconfig=options.kubeconfig, server=options.apiserver or None)
    api_client = (client.make_api(conn, client.user_agent) if client.make_api is not None
                  else ApiClient(conn, user_agent=client.user_agent,
                                 group_versions=client.group_versions,
                                 max_connections=client.max_connections))
    async with api_client as api:
        component = make(api)
        elector = (LeaderElector(api, options.leader_election) if options.leader_elect
                   else None)
        log.info("starting %s against %s; %s", component.describe(), conn.server,
                 f"leader election on lease {options.leader_election.lease_key} as "
                 f"{options.leader_election.identity}" if elector else "no leader election")
        running = asyncio.create_task(
            component.run(leading=elector.leading if elector else None),
            name=client.user_agent)
        endpoints = Endpoints(live=lambda: component.liveness(running),
                              ready=lambda: component.readiness(stop),
                              metrics=lambda: component.metrics(elector))
        async with serving(sock, endpoints, log):
            lost = await run_until_stopped(running, stop, elector, log=log,
                                           stopping=component.stopping,
                                           drain=component.drain)
    if lost:
        log.error("leader election lost: exiting, to be restarted as a candidate")
        raise SystemExit(1)
    log.info("stopped")


async def cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def run_until_stopped(running: asyncio.Task[None], stop: asyncio.Event,
                            elector: LeaderElector | None, *, log: logging.Logger,
                            stopping: Callable[[], str] = lambda: "shutting down",
                            drain: Callable[[], Awaitable[None]] | None = None) -> bool:
    """Run until a stop signal (then stop `running`, drain, release the lease) or until
    `running` ends or leadership is lost (then stop at once); True when it was lost. A
    crash of `running` propagates."""
    stop_signal = asyncio.create_task(stop.wait(), name="stop signal")
    electing = (asyncio.create_task(elector.run(), name="leader election") if elector
                else None)
    waits = {running, stop_signal} | ({electing} if electing else set())
    done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    if stop_signal not in done:
        for task in waits - done:
            await cancelled(task)
        for task in done:
            task.result()  # a crash: let it propagate
        return electing in done  # the election ended: leadership lost
    log.info("%s", stopping())
    await cancelled(running)
    if drain is not None:
        await drain()
    if elector is not None and electing is not None:
        await cancelled(electing)
        await elector.release()
    return False
