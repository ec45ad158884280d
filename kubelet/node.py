"""The kubelet's Node: register (or adopt) it, keep its status fresh with a heartbeat, and
renew its Lease.

Pure builders make the Node and Lease objects and the Node's conditions; `NodeAgent` and
`NodeLease` do the API calls. Labels set on the Node by others (`kubectl label`) are kept:
registration only adds the kubelet's own labels on top of what is there.

The node lease is what the kubelet's lease controller keeps: a coordination.k8s.io/v1
Lease named after the node in `kube-node-lease`, held by the node, owned by the Node, its
renewTime renewed every quarter of its duration (10 s of 40 s) with an update carrying
the resourceVersion it read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from common.backoff import Backoff
from common.errors import AlreadyExists, ApiError, Conflict, NotFound
from common.models import format_micro_time
from common.timestamps import rfc3339
from kubelet.runtime import Runtime, RuntimeVersion

# kubelet's registerWithAPIServer: 100 ms, doubling, at most 7 s between attempts
REGISTER_BACKOFF_START = 0.1
REGISTER_BACKOFF_MAX = 7.0

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.37.0+kubelite"
HEARTBEAT_SECONDS = 10.0
MAX_PODS = 110
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_LEASE_DURATION_SECONDS = 40
NODE_LEASE_RENEW_FRACTION = 0.25  # the kubelet renews every quarter of the duration
MAX_LEASE_UPDATE_RETRIES = 5

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le",
         "s390x": "s390x"}


@dataclass
class NodeConfig:
    node_name: str
    node_ip: str
    port: int
    labels: dict[str, str] = field(default_factory=dict)
    max_pods: int = MAX_PODS
    # What main computed (kubelet.allocatable); without them, the runtime's CPUs and memory.
    capacity: dict[str, str] | None = None
    allocatable: dict[str, str] | None = None


def parse_node_labels(text: str) -> dict[str, str]:
    """`--node-labels k=v,k2=v2` (a value may be empty: `k=`)."""
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"invalid node label {item!r}: expected key=value")
        labels[key.strip()] = value.strip()
    return labels


def go_arch(machine: str) -> str:
    return _ARCH.get(machine, machine)


def default_labels(node_name: str, *, os_name: str, arch: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": node_name, "kubernetes.io/os": os_name,
            "kubernetes.io/arch": arch, "beta.kubernetes.io/os": os_name,
            "beta.kubernetes.io/arch": arch}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def node_info(runtime: RuntimeVersion) -> dict[str, str]:
    return {
        "machineID": _read("/etc/machine-id"),
        "systemUUID": _read("/sys/class/dmi/id/product_uuid"),
        "bootID": _read("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": runtime.kernel_version or platform.release(),
        "osImage": runtime.os or platform.platform(),
        "containerRuntimeVersion": f"docker://{runtime.version}",
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": runtime.operating_system or "linux",
        "architecture": go_arch(runtime.architecture or platform.machine()),
    }


def resources_of(runtime: RuntimeVersion, *, max_pods: int) -> dict[str, str]:
    cpus = runtime.cpus or os.cpu_count() or 1
    memory_kib = (runtime.memory_bytes or 0) // 1024
    return {"cpu": str(cpus), "memory": f"{memory_kib}Ki", "pods": str(max_pods)}


def _condition(type_: str, status: str, reason: str, message: str, *,
               old: Mapping[str, Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    previous = old.get(type_) or {}
    stamp = rfc3339(now)
    transition = (previous.get("lastTransitionTime") if previous.get("status") == status
                  else None) or stamp
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": stamp, "lastTransitionTime": transition}


def node_conditions(*, runtime_ok: bool, runtime_error: str = "",
                    old: Sequence[Mapping[str, Any]] | None = None,
                    now: datetime) -> list[dict[str, Any]]:
    by_type = {str(c.get("type")): c for c in old or []}
    if runtime_ok:
        ready = ("True", "KubeletReady", "kubelet is posting ready status")
    else:
        ready = ("False", "KubeletNotReady",
                 f"container runtime is down: {runtime_error or 'docker is not answering'}")
    return [
        _condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                   "kubelet has sufficient memory available", old=by_type, now=now),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                   "kubelet has no disk pressure", old=by_type, now=now),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID",
                   "kubelet has sufficient PID available", old=by_type, now=now),
        _condition("Ready", *ready, old=by_type, now=now),
    ]


def node_status(config: NodeConfig, runtime: RuntimeVersion | None, *, runtime_ok: bool,
                runtime_error: str = "", old: Mapping[str, Any] | None = None,
                now: datetime) -> dict[str, Any]:
    old = old or {}
    status: dict[str, Any] = {
        "conditions": node_conditions(runtime_ok=runtime_ok, runtime_error=runtime_error,
                                      old=list(old.get("conditions") or []), now=now),
        "addresses": [{"type": "InternalIP", "address": config.node_ip},
                      {"type": "Hostname", "address": config.node_name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
    }
    if runtime is not None:
        capacity = config.capacity or resources_of(runtime, max_pods=config.max_pods)
        status.update(capacity=dict(capacity),
                      allocatable=dict(config.allocatable or capacity),
                      nodeInfo=node_info(runtime))
    else:
        for key in ("capacity", "allocatable", "nodeInfo"):
            if key in old:
                status[key] = old[key]
    return status


def node_object(config: NodeConfig, runtime: RuntimeVersion, *, now: datetime) -> dict[str, Any]:
    os_name = runtime.operating_system or "linux"
    arch = go_arch(runtime.architecture or platform.machine())
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": {**default_labels(config.node_name, os_name=os_name, arch=arch),
                       **config.labels},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": node_status(config, runtime, runtime_ok=True, now=now),
    }


def merged_labels(existing: Mapping[str, str] | None, ours: Mapping[str, str]) -> dict[str, str]:
    """The existing labels (anyone's) with ours set on top."""
    return {**(existing or {}), **ours}


class NodeAgent:
    """Registers the Node and posts its status every HEARTBEAT_SECONDS."""

    def __init__(self, *, client: Any, runtime: Runtime, config: NodeConfig,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS) -> None:
        self.client = client
        self.runtime = runtime
        self.config = config
        self.heartbeat_seconds = heartbeat_seconds
        self.runtime_version: RuntimeVersion | None = None
        self.runtime_ok = False

    async def _probe_runtime(self) -> str:
        """Ask Docker how it is; returns an error text, empty when it answers."""
        try:
            if not await self.runtime.ping():
                raise RuntimeError("docker is not answering on its socket")
            if self.runtime_version is None:
                self.runtime_version = await self.runtime.version()
        except Exception as e:
            if self.runtime_ok:
                log.warning("node %s: container runtime is down: %s", self.config.node_name, e)
            self.runtime_ok = False
            return str(e) or type(e).__name__
        if not self.runtime_ok:
            log.info("node %s: container runtime docker://%s is up", self.config.node_name,
                     self.runtime_version.version if self.runtime_version else "?")
        self.runtime_ok = True
        return ""

    async def register(self) -> dict[str, Any]:
        """Register until it works, as the kubelet does: an apiserver that is restarting
        (a dropped connection, a 5xx) is waited for with back-off, 100 ms doubling to 7 s."""
        backoff = Backoff(initial=REGISTER_BACKOFF_START, cap=REGISTER_BACKOFF_MAX)
        while True:
            try:
                return await self._register_once()
            except (httpx.TransportError, ApiError) as e:
                if isinstance(e, ApiError) and e.code < 500:
                    raise
                delay = backoff.next()
                log.warning("node %s: unable to register with the apiserver (%s: %s); retrying "
                            "in %.1fs", self.config.node_name, type(e).__name__, e, delay)
            await asyncio.sleep(delay)

    async def _register_once(self) -> dict[str, Any]:
        """Create the Node, or adopt the existing one (keeping labels others added)."""
        while (error := await self._probe_runtime()) or self.runtime_version is None:
            log.warning("node %s: waiting for docker before registering: %s",
                        self.config.node_name, error)
            await asyncio.sleep(2)
        node = node_object(self.config, self.runtime_version, now=datetime.now(UTC))
        try:
            created = await self.client.create("nodes", node)
            log.info("node %s: registered", self.config.node_name)
            return dict(created)
        except AlreadyExists:
            pass
        existing = await self.client.get("nodes", self.config.node_name)
        labels = merged_labels((existing.get("metadata") or {}).get("labels"),
                               node["metadata"]["labels"])
        if labels != (existing.get("metadata") or {}).get("labels"):
            existing = await self.client.patch("nodes", self.config.node_name,
                                               {"metadata": {"labels": labels}})
        await self.post_status(old=existing.get("status") or {})
        log.info("node %s: adopted the existing Node", self.config.node_name)
        return dict(existing)

    async def post_status(self, *, old: Mapping[str, Any] | None = None) -> None:
        error = await self._probe_runtime()
        if old is None:
            old = (await self.client.get("nodes", self.config.node_name)).get("status") or {}
        status = node_status(self.config, self.runtime_version, runtime_ok=not error,
                             runtime_error=error, old=old, now=datetime.now(UTC))
        await self.client.patch("nodes", self.config.node_name, {"status": status},
                                subresource="status")

    async def heartbeat_forever(self) -> None:
        old: Mapping[str, Any] | None = None
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.post_status(old=old)
                old = None  # read it again next time: someone else may have changed it
            except NotFound:
                log.warning("node %s: the Node is gone, registering again",
                            self.config.node_name)
                try:
                    await self.register()
                except (ApiError, httpx.HTTPError) as e:
                    log.warning("node %s: registering failed: %s", self.config.node_name, e)
            except (ApiError, httpx.HTTPError, Conflict) as e:
                log.warning("node %s: heartbeat failed: %s", self.config.node_name, e)


# --- the node lease ------------------------------------------------------------------------

def node_owner_reference(node: Mapping[str, Any]) -> dict[str, Any]:
    """The ownerReference the kubelet puts on its lease (setNodeOwnerFunc)."""
    meta = node.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Node", "name": meta.get("name"), "uid": meta.get("uid")}


def node_lease(node_name: str, *, duration_seconds: int) -> dict[str, Any]:
    """A new node lease, before its renewTime and owner are set."""
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node_name, "namespace": NODE_LEASE_NAMESPACE},
        "spec": {"holderIdentity": node_name, "leaseDurationSeconds": duration_seconds},
    }


def renewed_lease(base: Mapping[str, Any], *, node_name: str, duration_seconds: int,
                  now: datetime, owner: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`base` (resourceVersion included) held by this node and renewed at `now`.

    The owner is only set on a lease that has none, as the kubelet does; holder and
    duration are always the kubelet's own (kube keeps what it adopted, which only matters
    when someone else wrote them).
    """
    spec = {**(base.get("spec") or {}), "holderIdentity": node_name,
            "leaseDurationSeconds": duration_seconds, "renewTime": format_micro_time(now)}
    meta = dict(base.get("metadata") or {})
    if not meta.get("ownerReferences") and owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return {**base, "metadata": meta, "spec": spec}


class NodeLease:
    """The kubelet's node lease controller: create or adopt the lease, then renew it."""

    def __init__(self, *, client: Any, node_name: str,
                 duration_seconds: int = NODE_LEASE_DURATION_SECONDS,
                 renew_seconds: float | None = None) -> None:
        self.client = client
        self.node_name = node_name
        self.duration_seconds = duration_seconds
        self.renew_seconds = (renew_seconds if renew_seconds is not None
                              else duration_seconds * NODE_LEASE_RENEW_FRACTION)
        self.latest: dict[str, Any] | None = None  # the lease as the last write returned it

    async def _owner(self, lease: Mapping[str, Any]) -> dict[str, Any] | None:
        """The Node's reference when the lease has no owner yet (None if unknown)."""
        if (lease.get("metadata") or {}).get("ownerReferences"):
            return None
        try:
            node = await self.client.get("nodes", self.node_name)
        except (ApiError, httpx.HTTPError) as e:
            log.warning("node %s: cannot set the node lease's owner: %s", self.node_name, e)
            return None
        return node_owner_reference(node)

    async def _renewed(self, base: Mapping[str, Any]) -> dict[str, Any]:
        return renewed_lease(base, node_name=self.node_name,
                             duration_seconds=self.duration_seconds, now=datetime.now(UTC),
                             owner=await self._owner(base))

    async def ensure(self) -> tuple[dict[str, Any] | None, bool]:
        """(the lease, whether it was just created); None when the Node cannot be read yet
        (the lease is created with its owner, or not at all)."""
        try:
            return dict(await self.client.get("leases", self.node_name,
                                              namespace=NODE_LEASE_NAMESPACE)), False
        except NotFound:
            pass
        new = node_lease(self.node_name, duration_seconds=self.duration_seconds)
        owner = await self._owner(new)
        if owner is None:
            return None, False
        lease = renewed_lease(new, node_name=self.node_name,
                              duration_seconds=self.duration_seconds, now=datetime.now(UTC),
                              owner=owner)
        try:
            created = await self.client.create("leases", lease)
        except AlreadyExists:  # another writer was first: adopt it next time
            return None, False
        log.info("node %s: created the node lease", self.node_name)
        return dict(created), True

    async def update(self, base: Mapping[str, Any]) -> None:
        """PUT the renewed lease with base's resourceVersion; on 409 read it again and retry."""
        for attempt in range(MAX_LEASE_UPDATE_RETRIES):
            try:
                self.latest = dict(await self.client.update("leases", await self._renewed(base)))
                return
            except Conflict:
                if attempt == MAX_LEASE_UPDATE_RETRIES - 1:
                    raise
                fresh, _ = await self.ensure()
                if fresh is None:
                    raise
                base = fresh

    async def sync(self) -> None:
        """One renewal: from the last written lease when there is one, else read (or create)
        it first; an update that fails falls back to reading it."""
        if self.latest is not None:
            try:
                await self.update(self.latest)
                return
            except (ApiError, httpx.HTTPError) as e:
                log.info("node %s: renewing the node lease from the last one failed (%s); "
                         "reading it again", self.node_name, e)
        lease, created = await self.ensure()
        self.latest = lease
        if lease is not None and not created:
            await self.update(lease)

    async def run_forever(self) -> None:
        while True:
            try:
                await self.sync()
            except (ApiError, httpx.HTTPError) as e:
                log.warning("node %s: renewing the node lease failed: %s", self.node_name, e)
            await asyncio.sleep(self.renew_seconds)
