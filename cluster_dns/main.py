"""The cluster DNS watcher: informers on Services and EndpointSlices, one hosts file per
Service in dnsmasq's --hostsdir, the SRV/CNAME records in its --conf-file, and the
`kube-system/kube-dns` Service pointing at it.

This is how kube-dns was built (a watcher feeding dnsmasq): a changed Service is marked
dirty, and after a short debounce its hosts file is rewritten atomically (a dotfile renamed
into place: dnsmasq ignores dotfiles and re-reads the renamed file through inotify); when
the SRV/CNAME text changed too, dnsmasq is restarted, since it reads its options only at
start (at most twice a second: a burst of changes costs two restarts, and the addresses
are served meanwhile). A restart drops the queries that reach it in its few tens of
milliseconds: the clients' resolvers ask again. dnsmasq starts once both informers have listed, so it never answers NXDOMAIN for a
Service that exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster_dns import records
from cluster_dns.dnsmasq import Dnsmasq, DnsmasqConfig
from common import component
from common.client import GROUP_VERSIONS as CLIENT_GROUP_VERSIONS
from common.client import ApiClient
from common.errors import ApiError, Conflict, NotFound
from common.informer import Informer
from common.leaderelection import LeaderElectionConfig, LeaderElector

log = logging.getLogger("cluster_dns")

DEBOUNCE_SECONDS = 0.05
MIN_RESTART_INTERVAL_SECONDS = 0.5
DEFAULT_CLUSTER_IP = "10.96.0.10"
DEFAULT_BIND_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 10055  # kube-dns's metrics/health port
GROUP_VERSIONS = {**CLIENT_GROUP_VERSIONS, "endpointslices": "discovery.k8s.io/v1"}
HOSTS_SUBDIR = "hosts"
CONF_FILE = "records.conf"


@dataclass(frozen=True)
class Options:
    apiserver: str = component.DEFAULT_APISERVER
    kubeconfig: str | None = None
    domain: str = "cluster.local"
    listen_address: str = "172.17.0.1"
    dns_port: int = 53
    cluster_ip: str = DEFAULT_CLUSTER_IP  # the kube-dns Service's; "" keeps no Service
    state_dir: str = ""  # where the hosts files and conf live ("": a new temporary one)
    dnsmasq: str = "/usr/sbin/dnsmasq"
    dnsmasq_user: str = ""
    ttl: int = 5
    bind_address: str = DEFAULT_BIND_ADDRESS
    port: int = DEFAULT_PORT
    leader_elect: bool = False  # one per cluster; `serve` reads these two
    leader_election: LeaderElectionConfig = field(default_factory=lambda: LeaderElectionConfig(
        namespace="kube-system", name="kube-dns"))


def write_atomically(directory: str, name: str, text: str) -> None:
    """Write directory/name so that a reader sees the old or the new text, never half
    (blocking: in a thread)."""
    fd, temporary = tempfile.mkstemp(prefix=".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, 0o644)  # dnsmasq reads as the user it drops to
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def remove_file(directory: str, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, name))


def prepare_state_dir(path: str) -> tuple[str, str]:
    """(the hosts dir, the conf file), emptied, readable by dnsmasq's unprivileged user."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    hosts_dir = os.path.join(path, HOSTS_SUBDIR)
    os.makedirs(hosts_dir, exist_ok=True)
    os.chmod(hosts_dir, 0o755)
    for name in os.listdir(hosts_dir):
        os.unlink(os.path.join(hosts_dir, name))
    return hosts_dir, os.path.join(path, CONF_FILE)


class ClusterDns:
    def __init__(self, api: ApiClient, options: Options) -> None:
        self.api = api
        self.options = options
        self.record_options = records.Options(domain=options.domain)
        self.services = Informer(api, "services", on_add=self._service_changed,
                                 on_update=lambda _old, new: self._service_changed(new),
                                 on_delete=self._service_changed, name="cluster-dns services")
        self.slices = Informer(api, "endpointslices", on_add=self._slice_changed,
                               on_update=self._slice_updated, on_delete=self._slice_changed,
                               name="cluster-dns endpointslices")
        self._slices_by_service: dict[str, dict[str, dict]] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._records: dict[str, records.ServiceRecords] = {}
        self._written: dict[str, str] = {}  # hosts file name -> its text
        self._config_text = ""
        self._restart_pending = False
        self._last_restart = 0.0
        self._kube_dns_dirty = True
        self.dnsmasq: Dnsmasq | None = None
        self.hosts_dir = ""
        self.conf_file = ""
        self.syncs = 0
        self.last_sync_seconds = 0.0

    # -- informer handlers: mark what changed --------------------------------------------------

    def _mark(self, key: str) -> None:
        self._dirty.add(key)
        if key == f"{records.KUBE_DNS_NAMESPACE}/{records.KUBE_DNS_NAME}":
            self._kube_dns_dirty = True
        self._wake.set()

    def _service_changed(self, service: dict) -> None:
        self._mark(records.service_key(service))

    def _slice_changed(self, endpoint_slice: dict) -> None:
        key = records.slice_service_key(endpoint_slice)
        metadata = endpoint_slice.get("metadata") or {}
        slice_key = f"{metadata.get('namespace')}/{metadata.get('name')}"
        for slices in self._slices_by_service.values():
            slices.pop(slice_key, None)
        if key is not None and self.slices.get(slice_key) is not None:
            self._slices_by_service.setdefault(key, {})[slice_key] = endpoint_slice
        if key is not None:
            self._mark(key)

    def _slice_updated(self, old: dict, new: dict) -> None:
        old_key = records.slice_service_key(old)
        if old_key is not None and old_key != records.slice_service_key(new):
            self._mark(old_key)
        self._slice_changed(new)

    # -- the sync ----------------------------------------------------------------------------

    def unsynced_informers(self) -> list[str]:
        return [i.resource for i in (self.services, self.slices) if not i.has_synced]

    async def run(self, *, leading: asyncio.Event | None = None) -> None:
        state_dir = self.options.state_dir or tempfile.mkdtemp(prefix="cluster-dns-")
        self.hosts_dir, self.conf_file = await asyncio.to_thread(prepare_state_dir, state_dir)
        informers = [asyncio.create_task(self.services.run(), name="services informer"),
                     asyncio.create_task(self.slices.run(), name="endpointslices informer")]
        self.dnsmasq = Dnsmasq(DnsmasqConfig(
            listen_address=self.options.listen_address, port=self.options.dns_port,
            domain=self.options.domain, hosts_dir=self.hosts_dir, conf_file=self.conf_file,
            binary=self.options.dnsmasq, ttl=self.options.ttl, user=self.options.dnsmasq_user))
        try:
            await self.services.wait_synced()
            await self.slices.wait_synced()
            await self._sync(start=True)
            await self.dnsmasq.start()
            log.info("serving %d services' records from %s", len(self._records), state_dir)
            while True:
                await self._ensure_kube_dns()
                await self._wake.wait()
                await asyncio.sleep(DEBOUNCE_SECONDS)  # gather a burst into one write
                await self._sync()
        finally:
            for task in informers:
                task.cancel()
            await asyncio.gather(*informers, return_exceptions=True)
            await self.dnsmasq.stop()

    async def _sync(self, *, start: bool = False) -> None:
        self._wake.clear()
        started = time.monotonic()
        dirty = {records.service_key(s) for s in self.services.list()} if start else self._dirty
        self._dirty = set()
        for key in sorted(dirty):
            service = self.services.get(key)
            if service is None:
                self._records.pop(key, None)
            else:
                slices = self._slices_by_service.get(key, {}).values()
                self._records[key] = records.service_records(service, slices,
                                                             self.record_options)
            await self._write_hosts(key)
        config_text = records.config_text(self._records[k] for k in sorted(self._records))
        config_changed = config_text != self._config_text or start
        if config_changed:
            await asyncio.to_thread(write_atomically, os.path.dirname(self.conf_file),
                                    CONF_FILE, config_text)
            self._config_text = config_text
        if config_changed and not start:
            self._restart_pending = True
        restarted = await self._restart_when_due()
        self.syncs += 1
        self.last_sync_seconds = time.monotonic() - started
        if not start and (dirty or restarted):
            log.info("synced %d service(s) in %.1f ms%s", len(dirty),
                     self.last_sync_seconds * 1000,
                     ", dnsmasq restarted for SRV/CNAME changes" if restarted else "")

    async def _restart_when_due(self) -> bool:
        """Restart dnsmasq for a changed conf file, at most once per
        MIN_RESTART_INTERVAL_SECONDS (a burst of Services restarts it twice, not once
        each; their addresses are served meanwhile); whether it restarted now."""
        if not self._restart_pending or self.dnsmasq is None:
            return False
        wait = self._last_restart + MIN_RESTART_INTERVAL_SECONDS - time.monotonic()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self._wake.set)
            return False
        self._restart_pending = False
        await self.dnsmasq.restart()
        self._last_restart = time.monotonic()
        return True

    async def _write_hosts(self, key: str) -> None:
        name = records.hosts_file_name(key)
        service_records = self._records.get(key)
        text = records.hosts_text(service_records) if service_records else ""
        if self._written.get(name, "") == text:
            return
        if text:
            await asyncio.to_thread(write_atomically, self.hosts_dir, name, text)
            self._written[name] = text
        else:
            await asyncio.to_thread(remove_file, self.hosts_dir, name)
            self._written.pop(name, None)

    # -- the kube-dns Service ----------------------------------------------------------------

    async def _ensure_kube_dns(self) -> None:
        """The selector-less kube-system/kube-dns Service and its EndpointSlice at this
        dnsmasq, created or put back as they should be; failures are logged and retried
        on the next change."""
        if not self.options.cluster_ip or not self._kube_dns_dirty:
            return
        self._kube_dns_dirty = False
        service = records.kube_dns_service(self.options.cluster_ip)
        endpoint_slice = records.kube_dns_endpoint_slice(self.options.listen_address,
                                                         self.options.dns_port)
        try:
            await self._ensure("services", service)
            await self._ensure("endpointslices", endpoint_slice)
        except ApiError as e:
            log.warning("could not keep the kube-dns Service and its endpoints: %s", e.message)
            self._kube_dns_dirty = True
            asyncio.get_running_loop().call_later(5.0, self._wake.set)

    async def _ensure(self, resource: str, desired: dict[str, Any]) -> None:
        metadata = desired["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        try:
            actual = await self.api.get(resource, name, namespace=namespace)
        except NotFound:
            try:
                await self.api.create(resource, desired, namespace=namespace)
                log.info("created %s %s/%s", resource, namespace, name)
            except Conflict:
                self._kube_dns_dirty = True  # made meanwhile: look again
            return
        if not records.differs(desired, actual):
            return
        if resource == "services" and (actual.get("spec") or {}).get("clusterIP") not in (
                desired["spec"]["clusterIP"], None, ""):
            log.error("Service %s/%s has clusterIP %s, not %s (immutable): delete it to have "
                      "it made again", namespace, name, actual["spec"]["clusterIP"],
                      desired["spec"]["clusterIP"])
            return
        updated = merged(actual, desired)
        await self.api.update(resource, updated, namespace=namespace)
        log.info("updated %s %s/%s back to what cluster DNS serves", resource, namespace, name)

    # -- the process's endpoint ----------------------------------------------------------

    def metrics_text(self) -> str:
        dnsmasq = self.dnsmasq
        lines = [
            "# HELP cluster_dns_services Services with records.",
            "# TYPE cluster_dns_services gauge",
            f"cluster_dns_services {len(self._records)}",
            "# HELP cluster_dns_syncs_total Writes of changed records.",
            "# TYPE cluster_dns_syncs_total counter",
            f"cluster_dns_syncs_total {self.syncs}",
            "# HELP cluster_dns_dnsmasq_restarts_total dnsmasq restarts for SRV/CNAME changes.",
            "# TYPE cluster_dns_dnsmasq_restarts_total counter",
            f"cluster_dns_dnsmasq_restarts_total {dnsmasq.restarts if dnsmasq else 0}",
            "# HELP cluster_dns_dnsmasq_crashes_total dnsmasq exits nobody asked for.",
            "# TYPE cluster_dns_dnsmasq_crashes_total counter",
            f"cluster_dns_dnsmasq_crashes_total {dnsmasq.crashes if dnsmasq else 0}",
        ]
        return "\n".join(lines) + "\n"


def merged(actual: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """`actual` with `desired`'s fields laid over it (its metadata keeps the server's)."""
    result = dict(actual)
    for key, value in desired.items():
        if isinstance(value, Mapping) and isinstance(actual.get(key), Mapping):
            result[key] = merged(actual[key], value)
        else:
            result[key] = value
    return result


class ClusterDnsProcess:
    """`common.component.serve`'s view of the watcher."""

    def __init__(self, api: ApiClient, options: Options) -> None:
        self.dns = ClusterDns(api, options)
        self.options = options

    def describe(self) -> str:
        return (f"cluster DNS for {self.options.domain} (dnsmasq on "
                f"{self.options.listen_address}:{self.options.dns_port}, kube-dns Service "
                f"{self.options.cluster_ip or 'not kept'})")

    def run(self, *, leading: asyncio.Event | None = None) -> Coroutine[Any, Any, None]:
        return self.dns.run(leading=leading)

    def liveness(self, running: asyncio.Task[None]) -> dict[str, str | None]:
        dnsmasq = self.dns.dnsmasq
        started = self.dns.unsynced_informers() == [] and dnsmasq is not None
        return {"ping": None, "watcher": "stopped" if running.done() else None,
                "dnsmasq": "not running" if started and dnsmasq and not dnsmasq.running
                else None}

    def readiness(self, stopping: asyncio.Event) -> dict[str, str | None]:
        unsynced = self.dns.unsynced_informers()
        dnsmasq = self.dns.dnsmasq
        return {"ping": None,
                "informer-sync": f"not synced yet: {', '.join(unsynced)}" if unsynced else None,
                "dnsmasq": None if dnsmasq is not None and dnsmasq.running else "not running",
                "shutdown": "shutting down" if stopping.is_set() else None}

    def metrics(self, elector: LeaderElector | None) -> str:
        return self.dns.metrics_text()

    def stopping(self) -> str:
        return "shutting down: stopping dnsmasq"

    async def drain(self) -> None:
        return None


async def serve(options: Options) -> None:
    await component.serve(
        options, component.Client(user_agent="kube-dns/kubelite",
                                  group_versions=GROUP_VERSIONS),
        lambda api: ClusterDnsProcess(api, options), log)
