"""What kube-apiserver keeps in order itself about Services, started with the app.

- The repair of the allocation ranges (kube's ipallocator and portallocator repair
  controllers): at start and every interval, each range's bitmap is rebuilt from the
  Services. What a Service holds is marked at once; a bit no Service holds is a leak
  (a create that allocated and then failed without giving it back, an apiserver killed in
  between) and is freed only once it has been seen leaked on LEAK_PASSES passes in a row,
  as kube waits numRepairsBeforeLeakCleanup passes: an allocation in flight on another
  apiserver (taken, its Service not written yet) is never freed under it.
- The `kubernetes` Service in `default` (kube's controlplane kubernetesservice controller,
  every 10 s): ClusterIP the first address of the range, port `https` 443 to the
  apiserver's secure port, labels component=apiserver and provider=kubernetes; and its
  EndpointSlice, which the apiservers write themselves as kube's `lease` endpoint
  reconciler does: each keeps `<prefix>/masterleases/<advertise address>` alive under an
  etcd lease of MASTER_LEASE_TTL seconds, and the EndpointSlice lists every address with
  a live lease, so an apiserver that dies drops out of it within the TTL (one that stops
  removes its own at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any

from apiserver import objects
from apiserver.allocator import (
    DEFAULT_SERVICE_CLUSTER_IP_RANGE,
    DEFAULT_SERVICE_NODE_PORT_RANGE,
    RangeAllocator,
    ServiceRanges,
)
from apiserver.registry import Registry
from apiserver.resources import namespace_key
from apiserver.resources.endpointslices import ENDPOINT_SLICES, LABEL_SERVICE_NAME
from apiserver.resources.services import (
    SERVICES,
    allocated_cluster_ip,
    allocated_node_ports,
)
from apiserver.storage import KeyExists, RequiredKeyMissing, RevisionMismatch
from common import errors

log = logging.getLogger("apiserver")

LEAK_PASSES = 3
DEFAULT_REPAIR_INTERVAL = 180.0  # kube's repair controllers run every 3 minutes
KUBERNETES_SERVICE_INTERVAL = 10.0  # kube's kubernetesservice controller's EndpointInterval
MASTER_LEASE_TTL = 15  # kube's masterEndpointReconcileTTL
KUBERNETES = "kubernetes"
DEFAULT_NAMESPACE = "default"
MANAGER = "kube-apiserver"


@dataclass
class LeakTracker:
    """How many passes in a row each offset of one range was seen taken but unheld."""

    seen: dict[int, int] = field(default_factory=dict)

    def plan(self, taken: set[int], held: set[int]) -> tuple[set[int], dict[int, int]]:
        """(offsets to free now, the counts after this pass) — pure; `commit` keeps them."""
        leaked = taken - held
        counts = {offset: self.seen.get(offset, 0) + 1 for offset in leaked}
        return {offset for offset, count in counts.items() if count >= LEAK_PASSES}, counts

    def commit(self, counts: dict[int, int]) -> None:
        self.seen = counts


async def repair_range(store: RangeAllocator, held: set[int], leaks: LeakTracker,
                       name: str) -> tuple[int, int]:
    """One pass over one range: mark every held offset, free the leaks seen often enough;
    (newly marked, freed)."""
    outcome: dict[str, Any] = {}

    def rebuild(bitmap: Any) -> None:
        taken = set(bitmap.offsets())
        free_now, counts = leaks.plan(taken, held)
        marked = 0
        for offset in held:
            if 0 <= offset < bitmap.size and bitmap.allocate(offset):
                marked += 1
        for offset in free_now:
            bitmap.release(offset)
        outcome.update(marked=marked, freed=len(free_now),
                       counts={o: c for o, c in counts.items() if o not in free_now})

    await store.change(rebuild)
    leaks.commit(outcome["counts"])
    if outcome["marked"] or outcome["freed"]:
        log.info("repaired the %s range: %d held but unmarked, %d leaked freed", name,
                 outcome["marked"], outcome["freed"])
    return outcome["marked"], outcome["freed"]


@dataclass
class Repair:
    """The ClusterIP and NodePort repair passes of one apiserver."""

    registry: Registry
    ranges: ServiceRanges
    ip_leaks: LeakTracker = field(default_factory=LeakTracker)
    port_leaks: LeakTracker = field(default_factory=LeakTracker)

    async def run_once(self) -> None:
        services, _ = await self.registry.list_objects(SERVICES, None)
        held_ips: set[int] = set()
        held_ports: set[int] = set()
        for service in services:
            meta = service.get("metadata") or {}
            who = f"{meta.get('namespace')}/{meta.get('name')}"
            ip = allocated_cluster_ip(service)
            if ip is not None:
                offset = self.ranges.ips.range.offset(ip)
                if offset is None:
                    log.warning("Service %s: ClusterIP %s is not within the range %s", who, ip,
                                self.ranges.ips.range.text)
                elif offset in held_ips:
                    log.warning("Service %s: ClusterIP %s is held by another Service too",
                                who, ip)
                else:
                    held_ips.add(offset)
            for port in allocated_node_ports(service):
                offset = self.ranges.ports.range.offset(port)
                if offset is None:
                    log.warning("Service %s: NodePort %d is not within the range %s", who, port,
                                self.ranges.ports.range.text)
                else:
                    held_ports.add(offset)
        await repair_range(self.ranges.ips.store, held_ips, self.ip_leaks, "ClusterIP")
        await repair_range(self.ranges.ports.store, held_ports, self.port_leaks, "NodePort")

    async def run(self, interval: float) -> None:
        while True:
            try:
                await self.run_once()
            except Exception as e:  # etcd away: the next pass tries again
                log.warning("Service allocation repair failed: %s", e)
            await asyncio.sleep(interval)


# --- the kubernetes Service and its EndpointSlice ----------------------------------------------

def kubernetes_service(cluster_ip: str, secure_port: int) -> dict[str, Any]:
    """What kube's kubernetesservice controller creates (CreateOrUpdateMasterServiceIfNeeded)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": KUBERNETES, "namespace": DEFAULT_NAMESPACE,
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "sessionAffinity": "None",
                     "ports": [{"name": "https", "protocol": "TCP", "port": 443,
                                "targetPort": secure_port}]}}


def kubernetes_endpoint_slice(addresses: list[str], secure_port: int) -> dict[str, Any]:
    """What kube's endpoint reconciler writes for the apiservers: one endpoint per
    apiserver address, sorted (as kube sorts the lease IPs)."""
    ordered = sorted(set(addresses), key=ipaddress.ip_address)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": KUBERNETES, "namespace": DEFAULT_NAMESPACE,
                         "labels": {LABEL_SERVICE_NAME: KUBERNETES}},
            "addressType": "IPv6" if ordered and ":" in ordered[0] else "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}
                          for address in ordered],
            "ports": [{"name": "https", "port": secure_port, "protocol": "TCP"}]}


def master_lease_key(prefix: str, address: str = "") -> str:
    return f"{prefix}/masterleases/{address}"


def master_lease(address: str) -> dict[str, Any]:
    """What kube stores under /masterleases/<ip>: an Endpoints naming the address."""
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": address},
            "subsets": [{"addresses": [{"ip": address}]}]}


async def renew_master_lease(registry: Registry, address: str,
                             lease: int) -> tuple[int, list[str]]:
    """This apiserver's lease on its address, for another MASTER_LEASE_TTL seconds: the
    etcd lease id, and every live apiserver's address. A live lease is only kept alive,
    which writes nothing (etcd's revision, every client's resourceVersion, stays put); a
    gone one, or a key someone removed, is granted and written again."""
    alive = bool(lease) and await registry.storage.keep_alive(lease) > 0
    addresses = await live_master_addresses(registry)
    if alive and address in addresses:
        return lease, addresses
    lease = await registry.storage.grant_lease(MASTER_LEASE_TTL)
    await registry.storage.put(master_lease_key(registry.prefix, address),
                               master_lease(address), lease=lease)
    return lease, addresses if address in addresses else [*addresses, address]


async def live_master_addresses(registry: Registry) -> list[str]:
    kvs, _ = await registry.storage.list_prefix(master_lease_key(registry.prefix))
    return [kv.key.rsplit("/", 1)[-1] for kv in kvs]


def service_needs_update(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """kube reconciles the ports and the type of an existing kubernetes Service (it never
    moves its ClusterIP)."""
    have, want = stored.get("spec") or {}, wanted["spec"]
    ports = [{k: p.get(k) for k in ("name", "protocol", "port", "targetPort")}
             for p in have.get("ports") or []]
    return ports != want["ports"] or have.get("type") != want["type"]


async def reconcile_kubernetes_service(registry: Registry, ranges: ServiceRanges,
                                       secure_port: int) -> None:
    wanted = kubernetes_service(ranges.ips.range.ip(0), secure_port)
    try:
        stored = await registry.get(SERVICES, DEFAULT_NAMESPACE, KUBERNETES)
    except errors.NotFound:
        stored = None
    if stored is None:
        try:
            await registry.create(SERVICES, DEFAULT_NAMESPACE, wanted, manager=MANAGER)
            log.info("created Service default/kubernetes at %s:443", wanted["spec"]["clusterIP"])
        except errors.AlreadyExists:
            pass
        except errors.Invalid as e:  # the IP is taken (the range changed): kube logs it
            log.error("cannot create Service default/kubernetes: %s", e.message)
        return
    if service_needs_update(stored, wanted):
        def fix(current: dict[str, Any]) -> dict[str, Any]:
            spec = dict(current.get("spec") or {})
            spec["ports"], spec["type"] = wanted["spec"]["ports"], wanted["spec"]["type"]
            return {**current, "spec": spec}
        await registry.guaranteed_update(SERVICES, DEFAULT_NAMESPACE, KUBERNETES, fix,
                                         manager=MANAGER)
        log.info("updated Service default/kubernetes to port 443 -> %d", secure_port)


async def reconcile_kubernetes_endpoint_slice(registry: Registry, addresses: list[str],
                                              secure_port: int) -> None:
    """The apiservers' EndpointSlice, written to etcd directly: their addresses are where
    this control plane listens, loopback by default (DESIGN: control-plane traffic stays on
    loopback), which the EndpointSlice validation rightly refuses from clients."""
    wanted = kubernetes_endpoint_slice(addresses, secure_port)
    shown = ", ".join(f"{e['addresses'][0]}:{secure_port}" for e in wanted["endpoints"])
    key = registry.key(ENDPOINT_SLICES, DEFAULT_NAMESPACE, KUBERNETES)
    for _ in range(5):
        kv = await registry.storage.get(key)
        if kv is None:
            obj = objects.default_object(ENDPOINT_SLICES, objects.prepare_for_create(
                ENDPOINT_SLICES, wanted, namespace=DEFAULT_NAMESPACE))
            try:
                await registry.storage.create(
                    key, obj, requires=namespace_key(registry.prefix, DEFAULT_NAMESPACE))
            except KeyExists:
                continue
            except RequiredKeyMissing:
                raise errors.not_found("namespaces", DEFAULT_NAMESPACE) from None
            log.info("created EndpointSlice default/kubernetes: %s", shown)
            return
        current = kv.value
        if all(current.get(k) == wanted[k] for k in ("addressType", "endpoints", "ports")):
            return
        updated = {**current, **{k: wanted[k] for k in ("addressType", "endpoints", "ports")}}
        updated = objects.default_object(ENDPOINT_SLICES, updated, old=current)
        try:
            await registry.storage.update(key, updated, expected_revision=kv.mod_revision)
        except RevisionMismatch:
            continue
        log.info("updated EndpointSlice default/kubernetes: %s", shown)
        return


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """The apiserver's Service flags: --service-cluster-ip-range, --service-node-port-range,
    --advertise-address, the secure port the kubernetes Service points at (0: none), and
    how often the allocation repair runs (kubelite's --service-repair-interval)."""

    cluster_ip_range: str = DEFAULT_SERVICE_CLUSTER_IP_RANGE
    node_port_range: str = DEFAULT_SERVICE_NODE_PORT_RANGE
    advertise_address: str = "127.0.0.1"
    secure_port: int = 0
    repair_interval: float = DEFAULT_REPAIR_INTERVAL

    def ranges(self, registry: Registry) -> ServiceRanges:
        return ServiceRanges.create(registry.storage, registry.prefix,
                                    cluster_ip_range=self.cluster_ip_range,
                                    node_port_range=self.node_port_range)


@dataclass
class ServiceControlPlane:
    """The repair loop and the kubernetes Service reconciler of one apiserver."""

    registry: Registry
    ranges: ServiceRanges
    secure_port: int = 0
    advertise_address: str = "127.0.0.1"
    repair_interval: float = DEFAULT_REPAIR_INTERVAL
    _task: asyncio.Task[None] | None = None
    _master_lease: int = 0

    async def start(self) -> None:
        """Repair once, reconcile the kubernetes Service (which needs `default`), then keep
        repairing in the background."""
        self._task = asyncio.create_task(self._run(), name="service control plane")

    async def _run(self) -> None:
        repair = Repair(self.registry, self.ranges)
        await self._until_ok(repair.run_once, "Service allocation repair")
        loops = [self._repair_after(repair)]
        if self.secure_port:
            loops.append(self._keep_kubernetes_service())
        await asyncio.gather(*loops)

    async def _repair_after(self, repair: Repair) -> None:
        await asyncio.sleep(self.repair_interval)
        await repair.run(self.repair_interval)

    async def _keep_kubernetes_service(self) -> None:
        """Reconciled at start and then every KUBERNETES_SERVICE_INTERVAL, as kube's
        controller does: deleted or changed, it comes back."""
        while True:
            await self._until_ok(self._reconcile_kubernetes, "the kubernetes Service")
            await asyncio.sleep(KUBERNETES_SERVICE_INTERVAL)

    async def _reconcile_kubernetes(self) -> None:
        await reconcile_kubernetes_service(self.registry, self.ranges, self.secure_port)
        self._master_lease, addresses = await renew_master_lease(
            self.registry, self.advertise_address, self._master_lease)
        await reconcile_kubernetes_endpoint_slice(self.registry, addresses, self.secure_port)

    async def _remove_own_endpoint(self) -> None:
        """kube's RemoveEndpoints at shutdown: the others need not wait for the TTL."""
        await self.registry.storage.delete_key(
            master_lease_key(self.registry.prefix, self.advertise_address))
        others = [a for a in await live_master_addresses(self.registry)
                  if a != self.advertise_address]
        if others:
            await reconcile_kubernetes_endpoint_slice(self.registry, others, self.secure_port)

    @staticmethod
    async def _until_ok(step: Any, what: str) -> None:
        delay = 0.2
        while True:
            try:
                await step()
                return
            except (errors.NotFound, errors.ServiceUnavailable, OSError) as e:
                log.info("%s: waiting (%s)", what, e)
            except Exception as e:
                log.warning("%s failed, retrying: %s", what, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.secure_port:
            try:
                async with asyncio.timeout(3):
                    await self._remove_own_endpoint()
            except Exception as e:  # etcd gone: the lease expires by itself
                log.info("could not remove this apiserver's endpoint: %s", e)
