"""The node IPAM controller (pkg/controller/nodeipam, its range allocator): with
`--allocate-node-cidrs` and `--cluster-cidr`, every Node gets a pod subnet of its own,
`--node-cidr-mask-size` bits long, in `spec.podCIDR` and `spec.podCIDRs`, which a CNI
plugin (flannel's `--kube-subnet-mgr`, for one) builds the pod network from. A node's
subnet is freed when the node is deleted; the subnets nodes already have are taken first,
after a restart or a change of leader, so that no two nodes ever share one. When the range
is full, the node gets kube's `CIDRNotAvailable` event and is tried again later."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.client import ApiClient
from common.errors import ApiError, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from controller_manager.controller import QueueController
from controller_manager.nodelifecycle import node_reference

log = logging.getLogger("controller_manager.nodeipam")

NAME = "node-ipam-controller"
EVENT_COMPONENT = "cidrAllocator"
DEFAULT_MASK_SIZE = 24  # kube's --node-cidr-mask-size for IPv4
MAX_MASK_DIFFERENCE = 16  # kube's cidrset refuses more than 2^16 subnets
RETRY_SECONDS = 5.0  # a node the full range could not serve is tried again after this
Object = dict[str, Any]


@dataclass(frozen=True)
class Config:
    """--cluster-cidr and --node-cidr-mask-size; None: --allocate-node-cidrs is off."""

    cluster_cidr: ipaddress.IPv4Network | None = None
    mask_size: int = DEFAULT_MASK_SIZE


def config_errors(allocate: bool, cluster_cidr: str, mask_size: int | None) -> list[str]:
    """kube-controller-manager's checks of the IPAM flags, in its words where it has them;
    `mask_size` None: not given. The flags that would do nothing without
    --allocate-node-cidrs are refused, not ignored."""
    if not allocate:
        if cluster_cidr or mask_size is not None:
            return ["--cluster-cidr and --node-cidr-mask-size are used only with "
                    "--allocate-node-cidrs"]
        return []
    mask_size = DEFAULT_MASK_SIZE if mask_size is None else mask_size
    if not cluster_cidr:
        return ["--cluster-cidr is required when --allocate-node-cidrs is true"]
    try:
        network = ipaddress.ip_network(cluster_cidr, strict=True)
    except ValueError as e:
        return [f"--cluster-cidr {cluster_cidr!r}: {e}"]
    if not isinstance(network, ipaddress.IPv4Network):
        return ["--cluster-cidr: only IPv4 is supported"]
    if mask_size < network.prefixlen or mask_size > 32:
        return [f"--node-cidr-mask-size {mask_size}: must be between the cluster CIDR's "
                f"mask ({network.prefixlen}) and 32"]
    if mask_size - network.prefixlen > MAX_MASK_DIFFERENCE:
        return [f"--node-cidr-mask-size {mask_size} is too big for --cluster-cidr "
                f"{cluster_cidr}: at most {MAX_MASK_DIFFERENCE} bits more than its mask"]
    return []


# -- the allocator (pure) ----------------------------------------------------------------


class RangeAllocator:
    """kube's cidrset: the cluster CIDR cut into subnets of `mask_size` bits, handed out
    from a rotating next candidate, so that a freed subnet is not the very next one given."""

    def __init__(self, cluster: ipaddress.IPv4Network, mask_size: int) -> None:
        self.cluster = cluster
        self.mask_size = mask_size
        self.count = 1 << (mask_size - cluster.prefixlen)
        self.step = 1 << (32 - mask_size)
        self.used: set[int] = set()
        self.next_candidate = 0

    def subnet(self, index: int) -> str:
        base = int(self.cluster.network_address) + index * self.step
        return f"{ipaddress.IPv4Address(base)}/{self.mask_size}"

    def index_of(self, cidr: str) -> int | None:
        """The subnet's index when `cidr` is one of ours (inside the range, our size)."""
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            return None
        if (not isinstance(network, ipaddress.IPv4Network)
                or network.prefixlen != self.mask_size or not network.subnet_of(self.cluster)):
            return None
        return (int(network.network_address) - int(self.cluster.network_address)) // self.step

    def occupy(self, cidr: str) -> bool:
        """Mark a subnet a node already has; False when it is not one of ours."""
        index = self.index_of(cidr)
        if index is None:
            return False
        self.used.add(index)
        return True

    def allocate(self) -> str | None:
        """The next free subnet, None when every one is taken."""
        for offset in range(self.count):
            index = (self.next_candidate + offset) % self.count
            if index not in self.used:
                self.used.add(index)
                self.next_candidate = (index + 1) % self.count
                return self.subnet(index)
        return None

    def release(self, cidr: str) -> None:
        index = self.index_of(cidr)
        if index is not None:
            self.used.discard(index)


def node_cidrs(node: Mapping[str, Any]) -> list[str]:
    spec = node.get("spec") or {}
    return list(spec.get("podCIDRs") or ([spec["podCIDR"]] if spec.get("podCIDR") else []))


# -- the controller ------------------------------------------------------------------------


class NodeIpamController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder,
                 config: Config, *, workers: int = 1, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        assert config.cluster_cidr is not None
        self.allocator = RangeAllocator(config.cluster_cidr, config.mask_size)
        self.nodes = factory.informer("nodes")
        self.nodes.add_event_handler(on_add=self._changed,
                                     on_update=lambda _old, new: self._changed(new),
                                     on_delete=self._deleted, name=f"{NAME} nodes")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.nodes]

    async def run(self) -> None:
        """Every subnet the synced store's nodes have is taken before the first sync (the
        handlers may still be delivering them), then the workers give out the rest."""
        await self.nodes.wait_synced()
        for node in self.nodes.list():
            for cidr in node_cidrs(node):
                self.allocator.occupy(cidr)
        log.info("%s: %d of %d subnets of %s in use", NAME, len(self.allocator.used),
                 self.allocator.count, self.allocator.cluster)
        await super().run()

    def _changed(self, node: Object) -> None:
        cidrs = node_cidrs(node)
        for cidr in cidrs:
            self.allocator.occupy(cidr)
        if not cidrs:
            self.queue.add(node["metadata"]["name"])

    def _deleted(self, node: Object) -> None:
        for cidr in node_cidrs(node):
            self.allocator.release(cidr)
            log.info("node %s deleted: subnet %s released", node["metadata"]["name"], cidr)

    async def sync(self, key: str) -> None:
        node = self.nodes.get(key)
        if node is None or node_cidrs(node):
            return
        cidr = self.allocator.allocate()
        if cidr is None:
            log.warning("node %s: no subnet of %s left (%d in use)", key,
                        self.allocator.cluster, len(self.allocator.used))
            await self.recorder.event(node_reference(node), "Normal", "CIDRNotAvailable",
                                      f"Node {key} status is now: CIDRNotAvailable")
            self.queue.add_after(key, RETRY_SECONDS)
            return
        try:
            await self.writer.patch("nodes", key, {"spec": {"podCIDR": cidr,
                                                            "podCIDRs": [cidr]}})
        except NotFound:
            self.allocator.release(cidr)
            return
        except ApiError as e:
            self.allocator.release(cidr)
            log.warning("node %s: setting podCIDR %s failed: %s", key, cidr, e)
            self.queue.add_after(key, RETRY_SECONDS)
            return
        except BaseException:
            self.allocator.release(cidr)  # not written: the queue's back-off retries
            raise
        log.info("node %s: podCIDR %s", key, cidr)
