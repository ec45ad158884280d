"""The kube-proxy process: informers on Services and EndpointSlices in, iptables out.

Every informer event only marks the state dirty. The sync loop (kube's
BoundedFrequencyRunner) syncs at most once per `min_sync_period` (changes arriving
meanwhile are batched into the next sync), at least once per `sync_period`, and does a
full sync at start, after a failure and every FULL_SYNC_PERIOD; the others are partial
(kube_proxy.syncer). On SIGTERM the rules stay, as kube-proxy leaves them: traffic keeps
flowing while the proxy restarts; `--cleanup` removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.client import GROUP_VERSIONS, ApiClient
from common.informer import SharedInformerFactory
from common.leaderelection import LeaderElectionConfig, LeaderElector
from common.metrics import Metrics, exponential_buckets
from kube_proxy import iptables
from kube_proxy.model import PROXYABLE_SELECTOR, endpoints_map, service_ports, trigger_time
from kube_proxy.rules import Config
from kube_proxy.syncer import Syncer, SyncResult

log = logging.getLogger("kube-proxy")

DEFAULT_BIND_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 10256  # kube-proxy's healthz port
FULL_SYNC_PERIOD = 3600.0  # kube's proxyutil.FullSyncPeriod
# kube's: 0.25 s steps to 0.5, 1 s steps to 59, 5 s steps to 115, 30 s steps to 300.
NETWORK_PROGRAMMING_BUCKETS = (
    [0.25, 0.5] + [float(s) for s in range(1, 60)] + [float(s) for s in range(60, 120, 5)]
    + [float(s) for s in range(120, 330, 30)])
GROUP_VERSIONS_PROXY = {**GROUP_VERSIONS, "endpointslices": "discovery.k8s.io/v1"}


@dataclass(frozen=True)
class Options:
    apiserver: str
    kubeconfig: str | None = None
    config: Config = field(default_factory=Config)
    min_sync_period: float = 1.0  # kube's --iptables-min-sync-period
    sync_period: float = 30.0  # kube's --iptables-sync-period
    bind_address: str = DEFAULT_BIND_ADDRESS
    port: int = DEFAULT_PORT
    leader_elect: bool = False  # one kube-proxy per node: no election
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)


@dataclass(frozen=True)
class Schedule:
    """When the loop syncs next (pure): after `min_sync_period` since the last sync start
    when something changed, else at the periodic deadline."""

    min_sync_period: float
    sync_period: float

    def delay(self, *, now: float, last_sync: float, dirty: bool) -> float:
        if dirty:
            return max(0.0, last_sync + self.min_sync_period - now)
        return max(0.0, last_sync + self.sync_period - now)


class Proxier:
    def __init__(self, client: ApiClient, options: Options) -> None:
        self.options = options
        self.syncer = Syncer(options.config)
        self.informers = SharedInformerFactory(client)
        self.services = self.informers.informer("services", label_selector=PROXYABLE_SELECTOR,
                                                name="services")
        self.slices = self.informers.informer("endpointslices",
                                              label_selector=PROXYABLE_SELECTOR,
                                              name="endpointslices")
        self.changed = asyncio.Event()
        self.started_at = time.time()
        self.trigger_times: list[float] = []  # of slice changes not yet in the rules
        self.services.add_event_handler(on_add=lambda _obj: self.changed.set(),
                                        on_update=lambda _old, _new: self.changed.set(),
                                        on_delete=lambda _obj: self.changed.set(),
                                        name="kube-proxy")
        self.slices.add_event_handler(on_add=self._slice_changed,
                                      on_update=lambda _old, new: self._slice_changed(new),
                                      on_delete=lambda _obj: self.changed.set(),
                                      name="kube-proxy")
        self.synced = asyncio.Event()
        self.last: SyncResult | None = None
        self.last_full_sync = 0.0
        self.last_sync_wall = 0.0
        self.dirty_since: float | None = None
        self.syncs = {"full": 0, "partial": 0}
        self.failures = 0
        self.prometheus = self._metrics()

    def describe(self) -> str:
        config = self.options.config
        return (f"kube-proxy (iptables) for node {config.hostname or '(no hostname)'}, "
                f"chains {config.names.prefix}-*")

    async def run(self, *, leading: asyncio.Event | None = None) -> None:
        if self.options.config.localhost_nodeports:
            iptables.enable_route_localnet()
        self.informers.start()
        try:
            await self.informers.wait_for_cache_sync()
            await self._loop()
        finally:
            await self.informers.shutdown()

    async def _loop(self) -> None:
        schedule = Schedule(self.options.min_sync_period, self.options.sync_period)
        last_sync = -float("inf")
        while True:
            now = time.monotonic()
            full = (self.syncer.needs_full_sync
                    or now - self.last_full_sync >= FULL_SYNC_PERIOD)
            if self.synced.is_set() and not full:
                dirty = self.changed.is_set()
                delay = schedule.delay(now=now, last_sync=last_sync, dirty=dirty)
                if delay > 0:
                    if dirty:
                        await asyncio.sleep(delay)
                    else:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(delay):
                                await self.changed.wait()
                        continue
            self.changed.clear()
            last_sync = time.monotonic()
            await self._sync_once(full=full)

    def _slice_changed(self, endpoint_slice: Mapping[str, Any]) -> None:
        at = trigger_time(endpoint_slice)
        if at is not None and at > self.started_at:  # as kube: none from before its start
            self.trigger_times.append(at)
        self.changed.set()

    async def _sync_once(self, *, full: bool) -> None:
        ports = [p for s in self.services.list() for p in service_ports(s)]
        endpoints = endpoints_map(self.slices.list())
        triggers, self.trigger_times = self.trigger_times, []
        try:
            result = await self.syncer.sync(ports, endpoints, full=full)
        except Exception as e:  # a failed sync is retried (fully) at the next period
            self.failures += 1
            self.trigger_times = triggers + self.trigger_times
            self.changed.set()
            log.error("sync failed, retrying with a full sync: %s", e)
            await asyncio.sleep(self.options.min_sync_period)
            return
        self.last = result
        done = time.time()
        for at in triggers:
            self.network_programming_seconds.observe(done - at)
        self.syncs["full" if result.full else "partial"] += 1
        self.sync_seconds.observe(result.seconds)
        (self.full_sync_seconds if result.full else self.partial_sync_seconds).observe(
            result.seconds)
        if result.full:
            self.last_full_sync = time.monotonic()
        self.last_sync_wall = time.time()
        self.synced.set()

    # -- the endpoint ------------------------------------------------------------------------

    def liveness(self, running: asyncio.Task[None]) -> Mapping[str, str | None]:
        return {"ping": None, "proxier": "stopped" if running.done() else None}

    def readiness(self, stopping: asyncio.Event) -> Mapping[str, str | None]:
        unsynced = self.informers.unsynced()
        return {"ping": None,
                "informer-sync": f"not synced yet: {', '.join(unsynced)}" if unsynced else None,
                "rules": None if self.synced.is_set() else "no sync done yet",
                "shutdown": "shutting down" if stopping.is_set() else None}

    def _metrics(self) -> Metrics:
        """kube-proxy's sync metrics (pkg/proxy/metrics), kube's names and buckets."""
        found = Metrics()
        buckets = exponential_buckets(0.001, 2, 15)
        self.sync_seconds = found.histogram(
            "kubeproxy_sync_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds", buckets=buckets)
        self.full_sync_seconds = found.histogram(
            "kubeproxy_sync_full_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for full resyncs", buckets=buckets)
        self.partial_sync_seconds = found.histogram(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for partial resyncs", buckets=buckets)
        self.network_programming_seconds = found.histogram(
            "kubeproxy_network_programming_duration_seconds",
            "In Cluster Network Programming Latency in seconds",
            buckets=NETWORK_PROGRAMMING_BUCKETS)
        found.counter_func("kubeproxy_sync_proxy_rules_total",
                           "Syncs of the proxy rules, by kind (full or partial).", ("kind",),
                           lambda: [((kind,), n) for kind, n in self.syncs.items()])
        found.gauge("kubeproxy_sync_proxy_rules_iptables_total",
                    "Total number of iptables rules owned by kube-proxy", ("table",),
                    lambda: [((t,), n) for t, n in
                             (self.last.rules if self.last else {}).items()])
        found.counter_func("kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
                           "Cumulative proxy iptables restore failures", (),
                           lambda: [((), self.failures)])
        found.gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                    "The last time proxy rules were successfully synced", (),
                    lambda: [((), self.last_sync_wall)])
        return found

    def metrics(self, elector: LeaderElector | None) -> bytes:
        return self.prometheus.render()

    def stopping(self) -> str:
        return "shutting down; the iptables rules stay (kube-proxy --cleanup removes them)"

    async def drain(self) -> None:
        """Nothing to finish: rules stay in place."""
