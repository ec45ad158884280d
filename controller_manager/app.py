"""The controller-manager process: leader election, the health/metrics endpoint, and the
controllers `--controllers` asks for, all on one SharedInformerFactory.

As kube-controller-manager: every instance is a candidate for the
`kube-system/kube-controller-manager` Lease; only the leader starts the informers and
the controllers, and a leader that loses the lease exits with status 1 for its
supervisor to restart it as a candidate. SIGTERM stops the controllers and releases the
lease, so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from common import component
from common.client import GROUP_VERSIONS, ApiClient
from common.endpoint import metric_family
from common.event_queue import QueuedRecorder
from common.events import EventRecorder
from common.informer import SharedInformerFactory
from common.leaderelection import LeaderElectionConfig, LeaderElector
from common.workqueue import WorkQueue
from controller_manager import (
    deployment,
    endpointslice,
    garbagecollector,
    job,
    namespace,
    nodelifecycle,
    replicaset,
    tainteviction,
    ttlafterfinished,
)
from controller_manager.controller import QueueController
from controller_manager.podcontrol import IN_FLIGHT
from controller_manager.transport import PooledTransport

log = logging.getLogger("controller_manager")

DEFAULT_PORT = 10257  # kube-controller-manager's (HTTPS there; plain HTTP here)
DEFAULT_BIND_ADDRESS = "127.0.0.1"
LEASE_NAME = "kube-controller-manager"
EVENT_FLUSH_SECONDS = 2.0  # at shutdown, for the Events still queued
# One pooled client, its connections kept alive (a new connection per request is what
# would cost the most), for the watches and the other requests; and a lean pool for the
# pods' writes (controller_manager.transport), as many as PodControl has in flight.
MAX_CONNECTIONS = 48
WRITE_CONNECTIONS = IN_FLIGHT
# The API groups the controllers use beyond the client's defaults.
CONTROLLER_GROUP_VERSIONS = {**GROUP_VERSIONS, "replicasets": "apps/v1",
                             "deployments": "apps/v1", "jobs": "batch/v1",
                             "endpointslices": "discovery.k8s.io/v1"}


@dataclass(frozen=True)
class Options:
    apiserver: str  # a plain-HTTP URL; or, with `kubeconfig`, overriding its server
    kubeconfig: str | None = None
    controllers: tuple[str, ...] = ("*",)
    bind_address: str = DEFAULT_BIND_ADDRESS
    port: int = DEFAULT_PORT
    leader_elect: bool = True
    leader_election: LeaderElectionConfig = field(
        default_factory=lambda: LeaderElectionConfig(name=LEASE_NAME))
    node_lifecycle: nodelifecycle.Config = field(default_factory=nodelifecycle.Config)
    concurrent_syncs: int = 5


# -- which controllers run (pure) --------------------------------------------------------------


@dataclass(frozen=True)
class ControllerSpec:
    name: str
    aliases: tuple[str, ...] = ()
    disabled_by_default: bool = False


CONTROLLERS: tuple[ControllerSpec, ...] = (
    ControllerSpec(nodelifecycle.NAME, aliases=("nodelifecycle",)),
    ControllerSpec(tainteviction.NAME, aliases=("taint-eviction",)),
    ControllerSpec(replicaset.NAME, aliases=("replicaset",)),
    ControllerSpec(deployment.NAME, aliases=("deployment",)),
    ControllerSpec(garbagecollector.NAME, aliases=("garbagecollector",)),
    ControllerSpec(job.NAME, aliases=("job",)),
    ControllerSpec(namespace.NAME, aliases=("namespace",)),
    ControllerSpec(ttlafterfinished.NAME, aliases=("ttl-after-finished",)),
    ControllerSpec(endpointslice.NAME, aliases=("endpointslice",)),
)


# The controllers built alike: (factory, their event recorder, workers).
QUEUE_CONTROLLERS: dict[str, Callable[..., QueueController]] = {
    tainteviction.NAME: tainteviction.TaintEvictionController,
    replicaset.NAME: replicaset.ReplicaSetController,
    deployment.NAME: deployment.DeploymentController,
    job.NAME: job.JobController,
    ttlafterfinished.NAME: ttlafterfinished.TTLAfterFinishedController,
    endpointslice.NAME: endpointslice.EndpointSliceController,
}
# The event source of the controllers whose recorder is not named as the controller.
EVENT_COMPONENTS: dict[str, str] = {endpointslice.NAME: endpointslice.EVENT_COMPONENT}


def canonical(name: str, specs: Iterable[ControllerSpec]) -> str | None:
    for spec in specs:
        if name == spec.name or name in spec.aliases:
            return spec.name
    return None


def controller_flag_errors(requested: Sequence[str],
                           specs: Sequence[ControllerSpec] = CONTROLLERS) -> list[str]:
    """kube's validation of --controllers, in its words."""
    errors = []
    for entry in requested:
        name = entry[1:] if entry.startswith("-") else entry
        if entry != "*" and canonical(name, specs) is None:
            errors.append(f'"{entry}" is not in the list of known controllers')
    return errors


def is_enabled(spec: ControllerSpec, requested: Sequence[str]) -> bool:
    """IsControllerEnabled: the first entry naming it (or its alias) decides; else `*`
    enables every controller that is not disabled by default."""
    names = {spec.name, *spec.aliases}
    star = False
    for entry in requested:
        if entry in names:
            return True
        if entry.startswith("-") and entry[1:] in names:
            return False
        star = star or entry == "*"
    return star and not spec.disabled_by_default


def enabled_controllers(requested: Sequence[str],
                        specs: Sequence[ControllerSpec] = CONTROLLERS) -> list[str]:
    return [spec.name for spec in specs if is_enabled(spec, requested)]


# -- the process ---------------------------------------------------------------------------------


Runner = Callable[[], Coroutine[Any, Any, None]]


class ControllerManager:
    def __init__(self, client: ApiClient, options: Options) -> None:
        self.client = client
        self.options = options
        # The pods' creates and deletes on a lean pool of their own (watches stay on
        # `client`); the controllers get it through the factory's `writer`.
        self.writer = ApiClient(
            client.connection, user_agent="kube-controller-manager",
            group_versions=CONTROLLER_GROUP_VERSIONS,
            transport=PooledTransport(client.connection.server, size=WRITE_CONNECTIONS,
                                      ssl_context=client.connection.ssl_context))
        self.factory = SharedInformerFactory(client)
        self.enabled = enabled_controllers(options.controllers)
        self.queues: list[WorkQueue] = []
        self.recorders: list[QueuedRecorder] = []
        self.started = False

    def build(self) -> dict[str, Runner]:
        """Each enabled controller, wired to the factory (informers not started yet)."""
        runners: dict[str, Runner] = {}
        workers = self.options.concurrent_syncs
        for name in self.enabled:
            queued: QueueController | garbagecollector.GarbageCollector | \
                namespace.NamespaceController
            if name == nodelifecycle.NAME:
                runners[name] = nodelifecycle.NodeLifecycleController(
                    self.factory, self.recorder("node-controller"),
                    self.options.node_lifecycle).run
                continue
            if name in QUEUE_CONTROLLERS:
                queued = QUEUE_CONTROLLERS[name](self.factory,
                                                 self.recorder(EVENT_COMPONENTS.get(name, name)),
                                                 workers=workers, writer=self.writer)
            elif name == garbagecollector.NAME:
                queued = garbagecollector.GarbageCollector(self.factory, workers=workers)
            else:
                queued = namespace.NamespaceController(self.factory, workers=workers)
            self.queues.append(queued.queue)
            runners[name] = queued.run
        return runners

    def recorder(self, component: str) -> EventRecorder:
        recorder = QueuedRecorder(self.client, component=component)
        self.recorders.append(recorder)
        return recorder

    async def run(self, *, leading: asyncio.Event | None = None) -> None:
        if leading is not None:
            await leading.wait()
        runners = self.build()
        self.factory.start()
        self.started = True
        log.info("started %d controller(s): %s", len(runners), ", ".join(runners) or "none")
        try:
            await self.factory.wait_for_cache_sync()
            log.info("caches synced: %s", ", ".join(i.name for i in self.factory.informers))
            await asyncio.gather(*(runner() for runner in runners.values()))
        finally:
            await self.factory.shutdown()
            # what the controllers recorded last is written, as the broadcaster's Shutdown
            await asyncio.gather(*(r.close(seconds=EVENT_FLUSH_SECONDS) for r in self.recorders))
            await self.writer.aclose()

    def describe(self) -> str:
        return f"kube-controller-manager with controllers {','.join(self.enabled) or 'none'}"

    def liveness(self, running: asyncio.Task[None]) -> dict[str, str | None]:
        return {"ping": None, "controllers": "stopped" if running.done() else None}

    def stopping(self) -> str:
        return "shutting down"

    async def drain(self) -> None:
        """Nothing to finish: the controllers stopped with the main task."""

    def readiness(self, stopping: asyncio.Event) -> dict[str, str | None]:
        unsynced = self.factory.unsynced() if self.started else []
        return {"ping": None,
                "informer-sync": f"not synced yet: {', '.join(unsynced)}" if unsynced else None,
                "shutdown": "shutting down" if stopping.is_set() else None}

    def metrics(self, elector: LeaderElector | None) -> str:
        lines: list[str] = []
        if elector is not None:
            lines += metric_family(
                "leader_election_master_status", "gauge",
                "Gauge of if the reporting system is master of the relevant lease, 0 "
                "indicates backup, 1 indicates master.",
                [({"name": LEASE_NAME}, int(elector.leading.is_set()))])
        lines += metric_family("workqueue_depth", "gauge", "Current depth of workqueue",
                               [({"name": q.name}, len(q)) for q in self.queues])
        lines += metric_family("workqueue_adds_total", "counter",
                               "Total number of adds handled by workqueue",
                               [({"name": q.name}, q.adds) for q in self.queues])
        lines += metric_family("workqueue_retries_total", "counter",
                               "Total number of retries handled by workqueue",
                               [({"name": q.name}, q.retries) for q in self.queues])
        return "\n".join(lines) + "\n"


async def serve(options: Options) -> None:
    """Run until SIGTERM/SIGINT (then release the lease) or until leadership is lost."""
    await component.serve(
        options, component.Client(user_agent="kube-controller-manager",
                                   group_versions=CONTROLLER_GROUP_VERSIONS,
                                   max_connections=MAX_CONNECTIONS),
        lambda client: ControllerManager(client, options), log)


__all__ = ["ControllerManager", "Options", "serve"]
