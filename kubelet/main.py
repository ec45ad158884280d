"""The kubelet process: node registration and lease, pod informer, pod workers, PLEG relist,
HTTP server.

    python -m kubelet --kubeconfig kubelet.conf --node-name node1 \
        [--node-labels k=v,k2=v2] [--node-ip IP] [--docker-socket /var/run/docker.sock] \
        [--port 10250] [--address 127.0.0.1] [--pod-infra-container-image IMAGE]

(`--apiserver http://127.0.0.1:8080` instead of `--kubeconfig`: a plain-HTTP port.)

SIGTERM/SIGINT stop the kubelet and leave its pods running, as the real kubelet does;
the next kubelet on the node adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

import uvicorn

from common.client import ApiClient
from common.events import EventRecorder
from common.informer import Informer
from common.kubeconfig import connection
from kubelet.docker import DEFAULT_SOCKET, DockerClient, DockerRuntime
from kubelet.node import (
    NODE_LEASE_DURATION_SECONDS,
    NodeAgent,
    NodeConfig,
    NodeLease,
    parse_node_labels,
)
from kubelet.pleg import Pleg
from kubelet.pod_workers import KubeletConfig, PodWorkers
from kubelet.runtime import ContainerSummary
from kubelet.server import make_app

log = logging.getLogger("kubelet")

DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


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
    parser.add_argument("--resync-seconds", type=float, default=10.0)
    parser.add_argument("--heartbeat-seconds", type=float, default=10.0)
    parser.add_argument("--node-lease-duration-seconds", type=positive_int,
                        default=NODE_LEASE_DURATION_SECONDS,
                        help="the node lease's leaseDurationSeconds; it is renewed every "
                             "quarter of it (the KubeletConfiguration field of that name)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    if not args.apiserver and not args.kubeconfig:
        parser.error("give --kubeconfig (or --apiserver for a plain-HTTP port)")
    return args


async def run(args: argparse.Namespace) -> None:
    node_name: str = args.node_name
    docker = DockerClient(args.docker_socket)
    runtime = DockerRuntime(docker, node_name=node_name,
                            sandbox_image=args.pod_infra_container_image)
    api = ApiClient(connection(kubeconfig=args.kubeconfig, server=args.apiserver),
                    user_agent=f"kubelet/{node_name}")
    recorder = EventRecorder(api, component="kubelet", host=node_name)
    workers = PodWorkers(runtime=runtime, api=api, recorder=recorder,
                         config=KubeletConfig(node_name=node_name, node_ip=args.node_ip,
                                              resync_seconds=args.resync_seconds))
    informer = Informer(api, "pods", field_selector=f"spec.nodeName={node_name}",
                        on_add=workers.update, on_update=lambda _old, new: workers.update(new),
                        on_delete=workers.forget, name=f"kubelet {node_name} pods")
    agent = NodeAgent(client=api, runtime=runtime,
                      config=NodeConfig(node_name=node_name, node_ip=args.node_ip,
                                        port=args.port,
                                        labels=parse_node_labels(args.node_labels)),
                      heartbeat_seconds=args.heartbeat_seconds)
    lease = NodeLease(client=api, node_name=node_name,
                      duration_seconds=args.node_lease_duration_seconds)
    pleg = Pleg(runtime, workers.cache, on_change=workers.poke)

    async def cleanup_orphans(summaries: list[ContainerSummary]) -> None:
        # Only once the informer knows every pod: before, every container looks orphaned.
        if informer.has_synced:
            await workers.cleanup_orphans(summaries)

    server = uvicorn.Server(uvicorn.Config(
        make_app(runtime=runtime, get_pod=workers.get_pod), host=args.address, port=args.port,
        log_level="warning", lifespan="off", access_log=False))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    server_task = asyncio.create_task(server.serve(), name="kubelet-server")
    tasks: list[asyncio.Task[None]] = []
    try:
        registration = asyncio.create_task(agent.register(), name="register")
        stopped = asyncio.create_task(stop.wait(), name="stop")
        await asyncio.wait({registration, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if registration.done():
            registration.result()
            log.info("kubelet %s: serving on %s:%d, node IP %s, sandbox image %s", node_name,
                     args.address, args.port, args.node_ip, args.pod_infra_container_image)
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
        server.should_exit = True
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await server_task
        await api.aclose()
        await docker.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(run(args))
