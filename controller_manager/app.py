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
from common.event_queue import QueuedRecorder
from common.events import EventRecorder
from common.http_pool import FastApiClient
from common.informer import SharedInformerFactory
from common.leaderelection import LeaderElectionConfig, LeaderElector
from common.metrics import Histogram, Merged, Metrics
from common.workqueue import DURATION_BUCKETS, QUEUE_DURATION, WORK_DURATION, WorkQueue
from controller_manager import (
    bootstrap,
    certificates,
    deployment,
    endpointslice,
    garbagecollector,
    job,
    namespace,
    nodeipam,
    nodelifecycle,
    replicaset,
    tainteviction,
    ttlafterfinished,
)
from controller_manager.controller import QueueController
from controller_manager.podcontrol import IN_FLIGHT

log = logging.getLogger("controller_manager")

DEFAULT_PORT = 10257  # kube-controller-manager's (HTTPS there; plain HTTP here)
DEFAULT_BIND_ADDRESS = "127.0.0.1"
LEASE_NAME = "kube-controller-manager"
EVENT_FLUSH_SECONDS = 2.0  # at shutdown, for the Events still queued
# One pooled client, its connections kept alive (a new connection per request is what
# would cost the most), for the watches and the other requests; and a lean pool for the
# pods' writes (common.http_pool), as many as PodControl has in flight.
MAX_CONNECTIONS = 48
WRITE_CONNECTIONS = IN_FLIGHT
# The API groups the controllers use beyond the client's defaults.
CONTROLLER_GROUP_VERSIONS = {**GROUP_VERSIONS, "replicasets": "apps/v1",
                             "deployments": "apps/v1", "jobs": "batch/v1",
                             "endpointslices": "discovery.k8s.io/v1",
                             **certificates.CSR_GROUP_VERSIONS}


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
    # --cluster-signing-cert-file and --cluster-signing-key-file, loaded: what csrsigning
    # signs with (None: it does not run)
    signing_ca: certificates.SigningCA | None = None
    # --allocate-node-cidrs, --cluster-cidr, --node-cidr-mask-size (None: nodeipam idle)
    node_ipam: nodeipam.Config = field(default_factory=nodeipam.Config)


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
    ControllerSpec(nodeipam.NAME, aliases=("nodeipam",)),
    ControllerSpec(certificates.APPROVING, aliases=("csrapproving",)),
    ControllerSpec(certificates.SIGNING, aliases=("csrsigning",)),
    ControllerSpec(certificates.CLEANER, aliases=("csrcleaner",)),
    ControllerSpec(bootstrap.SIGNER, aliases=("bootstrap-signer",), disabled_by_default=True),
    ControllerSpec(bootstrap.CLEANER, aliases=("token-cleaner",), disabled_by_default=True),
)


# The controllers built alike: (factory, their event recorder, workers).
QUEUE_CONTROLLERS: dict[str, Callable[..., QueueController]] = {
    tainteviction.NAME: tainteviction.TaintEvictionController,
    replicaset.NAME: replicaset.ReplicaSetController,
    deployment.NAME: deployment.DeploymentController,
    job.NAME: job.JobController,
    ttlafterfinished.NAME: ttlafterfinished.TTLAfterFinishedController,
    endpointslice.NAME: endpointslice.EndpointSliceController,
    certificates.APPROVING: certificates.CSRApprovingController,
    certificates.CLEANER: certificates.CSRCleanerController,
    bootstrap.SIGNER: bootstrap.BootstrapSignerController,
    bootstrap.CLEANER: bootstrap.TokenCleanerController,
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
        self.writer = FastApiClient(
            client.connection, user_agent="kube-controller-manager",
            group_versions=CONTROLLER_GROUP_VERSIONS, max_connections=WRITE_CONNECTIONS)
        # its requests counted with the watches' in one set of rest_client metrics
        self.writer.rest_requests = client.rest_requests
        self.writer.rest_durations = client.rest_durations
        self.factory = SharedInformerFactory(client)
        self.enabled = enabled_controllers(options.controllers)
        self.queues: list[WorkQueue] = []
        self.recorders: list[QueuedRecorder] = []
        self.elector: LeaderElector | None = None  # what /metrics reports on
        self.prometheus = self.register_metrics()
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
            if name == nodeipam.NAME:
                if self.options.node_ipam.cluster_cidr is None:
                    log.info("%s: not started: --allocate-node-cidrs is false", name)
                    continue
                queued = nodeipam.NodeIpamController(
                    self.factory, self.recorder(nodeipam.EVENT_COMPONENT),
                    self.options.node_ipam, writer=self.writer)
            elif name == certificates.SIGNING:
                if self.options.signing_ca is None:
                    log.info("%s: not started: no --cluster-signing-cert-file and "
                             "--cluster-signing-key-file", name)
                    continue
                queued = certificates.CSRSigningController(
                    self.factory, self.recorder(name), ca=self.options.signing_ca,
                    workers=workers, writer=self.writer)
            elif name in QUEUE_CONTROLLERS:
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

    def metrics(self, elector: LeaderElector | None) -> bytes:
        self.elector = elector
        return self.prometheus.render()

    def register_metrics(self) -> Metrics:
        """client-go's workqueue metrics for every controller's queue, leader election's
        gauge, and the client's rest_client metrics."""
        m = Metrics()
        m.gauge("leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 "
                "indicates backup, 1 indicates master. 'name' is the string used to "
                "identify the lease.", ("name",),
                lambda: [] if self.elector is None else [
                    ((LEASE_NAME,), int(self.elector.leading.is_set()))])
        m.gauge("workqueue_depth", "Current depth of workqueue", ("name",),
                lambda: [((q.name,), len(q)) for q in self.queues])
        m.counter_func("workqueue_adds_total", "Total number of adds handled by workqueue",
                       ("name",), lambda: [((q.name,), q.adds) for q in self.queues])
        m.counter_func("workqueue_retries_total", "Total number of retries handled by "
                       "workqueue", ("name",), lambda: [((q.name,), q.retries)
                                                        for q in self.queues])
        m.add(Merged(Histogram(*QUEUE_DURATION, ("name",), DURATION_BUCKETS),
                     lambda: [q.queue_duration for q in self.queues]))
        m.add(Merged(Histogram(*WORK_DURATION, ("name",), DURATION_BUCKETS),
                     lambda: [q.work_duration for q in self.queues]))
        m.gauge("workqueue_unfinished_work_seconds",
                "How many seconds of work has done that is in progress and hasn't been "
                "observed by work_duration. Large values indicate stuck threads. One can "
                "deduce the number of stuck threads by observing the rate at which this "
                "increases.", ("name",),
                lambda: [((q.name,), q.unfinished_work()) for q in self.queues])
        m.gauge("workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been "
                "running.", ("name",),
                lambda: [((q.name,), q.longest_running()) for q in self.queues])
        self.client.add_metrics(m)
        return m


async def serve(options: Options) -> None:
    """Run until SIGTERM/SIGINT (then release the lease) or until leadership is lost."""
    await component.serve(
        options, component.Client(user_agent="kube-controller-manager",
                                   group_versions=CONTROLLER_GROUP_VERSIONS,
                                   max_connections=MAX_CONNECTIONS),
        lambda client: ControllerManager(client, options), log)


__all__ = ["ControllerManager", "Options", "serve"]
