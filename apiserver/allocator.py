"""ClusterIP and NodePort allocation, kept in etcd as kube-apiserver keeps it.

kube-apiserver (pkg/registry/core/service/ipallocator, portallocator, and
pkg/registry/core/service/allocator) holds each range as one bitmap — bit i set means
offset i is taken — and stores it as a RangeAllocation object (`range`, and `data`: the
bitmap as big.Int.Bytes(), big-endian, base64 in JSON) at `/registry/ranges/serviceips`
and `/registry/ranges/servicenodeports`. Every allocation and release is a read of that
key and a compare-and-swap write on its mod_revision, retried when another writer got
there first: so concurrent creates, from one apiserver or several on one etcd, never get
the same IP or port, and a restart finds everything where it was.

`Bitmap` and the ranges are pure (offsets in, offsets out); `RangeAllocator` is the thin
etcd shell. Dynamic allocation is kube's random scan with an offset: it starts in the
upper part of the range and only falls back to the lower band, which is left to the
addresses users ask for (calculateRangeOffset).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import logging
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from apiserver.storage import KV, KeyExists, KeyNotFound, RevisionMismatch, Storage
from common.timestamps import rfc3339

log = logging.getLogger("apiserver")

T = TypeVar("T")
_NONZERO_BYTE = re.compile(rb"[^\x00]")
MAX_ATTEMPTS = 100
DEFAULT_SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/12"
DEFAULT_SERVICE_NODE_PORT_RANGE = "30000-32767"
SERVICE_IPS_KEY = "ranges/serviceips"
NODE_PORTS_KEY = "ranges/servicenodeports"


# --- errors, with ipallocator's and portallocator's words -------------------------------------

class AllocationError(Exception):
    pass


class Allocated(AllocationError):
    pass


class NotInRange(AllocationError):
    pass


class Full(AllocationError):
    def __init__(self) -> None:
        super().__init__("range is full")


# --- the bitmap -------------------------------------------------------------------------------

@dataclass(slots=True)
class Bitmap:
    """AllocationBitmap: `size` offsets, bit i of `bits` set when offset i is taken."""

    size: int
    bits: int = 0

    def has(self, offset: int) -> bool:
        return bool(self.bits >> offset & 1)

    def allocate(self, offset: int) -> bool:
        """Take `offset`; False when it was taken already."""
        if self.has(offset):
            return False
        self.bits |= 1 << offset
        return True

    def release(self, offset: int) -> None:
        self.bits &= ~(1 << offset)

    def used(self) -> int:
        return self.bits.bit_count()

    def free(self) -> int:
        return self.size - self.used()

    def offsets(self) -> list[int]:
        """Every taken offset, ascending: a scan of the bitmap's bytes that skips the zero
        ones at C speed (a /12 range is a million bits)."""
        raw = self.bits.to_bytes((self.bits.bit_length() + 7) // 8, "little")
        found: list[int] = []
        for match in _NONZERO_BYTE.finditer(raw):
            index, byte = match.start(), raw[match.start()]
            found.extend(index * 8 + bit for bit in range(8) if byte >> bit & 1)
        return found

    def next_free(self, reserved: int, rand: random.Random) -> int | None:
        """randomScanStrategyWithOffset: a free offset from a random start in
        [reserved, size), scanning up and wrapping; then the lower band [0, reserved)."""
        for low, high in ((reserved, self.size), (0, reserved)):
            if high <= low:
                continue
            start = rand.randrange(low, high)
            for offset in (*range(start, high), *range(low, start)):
                if not self.has(offset):
                    return offset
        return None

    def data(self) -> str:
        """Snapshot: big.Int.Bytes() of the bitmap, base64 as JSON carries []byte."""
        raw = self.bits.to_bytes((self.bits.bit_length() + 7) // 8, "big")
        return base64.b64encode(raw).decode()

    @classmethod
    def from_data(cls, size: int, data: str) -> Bitmap:
        bits = int.from_bytes(base64.b64decode(data or ""), "big")
        return cls(size, bits & ((1 << size) - 1))


def range_offset(size: int, *, minimum: int, maximum: int, step: int) -> int:
    """calculateRangeOffset: how much of the start of a range dynamic allocation leaves to
    requested values (none for small ranges)."""
    if size < minimum:
        return 0
    return max(minimum, min(size // step, maximum))


# --- the ranges -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class IPRange:
    """--service-cluster-ip-range: offset 0 is the first address after the network's own
    (kube never hands out the network address, nor an IPv4 range's broadcast address)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    @classmethod
    def parse(cls, text: str) -> IPRange:
        network = ipaddress.ip_network(text, strict=False)
        if network.version == 4 and network.prefixlen < 12:
            raise ValueError(f"the service cluster IP range {text} is too large; for 32-bit "
                             f"addresses, the mask must be >= 12")
        if network.num_addresses < 4:
            raise ValueError(f"the service cluster IP range {text} is too small")
        return cls(network)

    @property
    def text(self) -> str:
        return str(self.network)

    @property
    def size(self) -> int:
        total = self.network.num_addresses - 1
        if self.network.version == 4:
            total -= 1
        return min(total, 1 << 16 if self.network.version == 6 else total)

    @property
    def reserved(self) -> int:
        return range_offset(self.size, minimum=16, maximum=256, step=16)

    def offset(self, ip: str) -> int | None:
        """The offset of `ip`, None when it is outside the range."""
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return None
        offset = int(address) - int(self.network.network_address) - 1
        return offset if address in self.network and 0 <= offset < self.size else None

    def ip(self, offset: int) -> str:
        return str(self.network.network_address + offset + 1)

    def not_in_range(self, ip: str) -> NotInRange:
        return NotInRange(f"the provided IP ({ip}) is not in the valid range. The range of "
                          f"valid IPs is {self.text}")

    def allocated(self) -> Allocated:
        return Allocated("provided IP is already allocated")


@dataclass(frozen=True, slots=True)
class PortRange:
    """--service-node-port-range: `30000-32767`, or `30000+2768` (base and size)."""

    base: int
    size: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        if "+" in text:
            first, count = text.split("+", 1)
            base, size = int(first), int(count)
        else:
            first, _, last = text.partition("-")
            base, size = int(first), int(last or first) - int(first) + 1
        if size < 1 or base < 1 or base + size - 1 > 65535:
            raise ValueError(f"invalid port range {text!r}")
        return cls(base, size)

    @property
    def text(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"

    @property
    def reserved(self) -> int:
        return range_offset(self.size, minimum=16, maximum=128, step=32)

    def offset(self, port: int) -> int | None:
        offset = port - self.base
        return offset if 0 <= offset < self.size else None

    def port(self, offset: int) -> int:
        return self.base + offset

    def not_in_range(self, port: int) -> NotInRange:
        return NotInRange(f"provided port is not in the valid range. The range of valid ports "
                          f"is {self.text}")

    def allocated(self) -> Allocated:
        return Allocated("provided port is already allocated")


# --- the etcd shell ---------------------------------------------------------------------------

def range_allocation(range_text: str, bitmap: Bitmap, created: str | None) -> dict[str, Any]:
    """The RangeAllocation object kube stores for a range."""
    return {"kind": "RangeAllocation", "apiVersion": "v1",
            "metadata": {"creationTimestamp": created or rfc3339()},
            "range": range_text, "data": bitmap.data()}


class RangeAllocator:
    """One range's bitmap in etcd; every change a compare-and-swap, retried on a race."""

    def __init__(self, storage: Storage, key: str, range_text: str, size: int, reserved: int,
                 *, rand: random.Random | None = None) -> None:
        self.storage = storage
        self.key = key
        self.range_text = range_text
        self.size = size
        self.reserved = reserved
        self.rand = rand or random.Random()
        self._lock = asyncio.Lock()
        # the last version of the key this process read or wrote: (KV or None when absent,)
        self._last: tuple[KV | None] | None = None

    async def snapshot(self) -> Bitmap:
        bitmap, _, _ = self._decode(await self.storage.get(self.key))
        return bitmap

    def _decode(self, kv: KV | None) -> tuple[Bitmap, int, str | None]:
        """(bitmap, mod_revision or 0 when absent, its creationTimestamp)."""
        if kv is None:
            return Bitmap(self.size), 0, None
        stored = kv.value
        created = (stored.get("metadata") or {}).get("creationTimestamp")
        if stored.get("range") != self.range_text:
            # the flag changed: the repair pass rebuilds it from the Services
            log.warning("allocation range at %s is %s, not %s: starting from an empty bitmap",
                        self.key, stored.get("range"), self.range_text)
            return Bitmap(self.size), kv.mod_revision, created
        return Bitmap.from_data(self.size, str(stored.get("data") or "")), kv.mod_revision, \
            created

    async def change(self, mutate: Callable[[Bitmap], T]) -> T:
        """`mutate` the bitmap (raising leaves etcd unchanged) and write it back if nobody
        wrote in between; again on what they wrote when somebody did. One change at a time
        in this process (kube's allocator holds a lock too), so only other apiservers race
        it; the last version written is kept, so an uncontended change is one transaction.
        A refusal or a no-op is only ever decided on a version just read from etcd."""
        async with self._lock:
            for attempt in range(MAX_ATTEMPTS):
                fresh = self._last is None
                if self._last is None:
                    self._last = (await self.storage.get(self.key),)
                bitmap, revision, created = self._decode(self._last[0])
                before = bitmap.bits
                try:
                    result = mutate(bitmap)
                except AllocationError:
                    if fresh:
                        raise
                    self._last = None
                    continue
                if bitmap.bits == before and revision:
                    if fresh:
                        return result
                    self._last = None
                    continue
                value = range_allocation(self.range_text, bitmap, created)
                try:
                    if revision:
                        written = await self.storage.update(self.key, value,
                                                            expected_revision=revision)
                    else:
                        written = await self.storage.create(self.key, value)
                except RevisionMismatch as e:
                    self._last = (e.current,) if e.current is not None else None
                    await asyncio.sleep(self.rand.uniform(0, 0.002 * min(attempt + 1, 20)))
                    continue
                except (KeyExists, KeyNotFound):
                    self._last = None
                    continue
                except BaseException:
                    self._last = None
                    raise
                self._last = (KV(self.key, value, written, 0),)
                return result
        raise AllocationError(f"too many concurrent changes to {self.key}")

    async def allocate(self, offset: int, taken: Callable[[], AllocationError]) -> None:
        def take(bitmap: Bitmap) -> None:
            if not bitmap.allocate(offset):
                raise taken()
        await self.change(take)

    async def allocate_next(self) -> int:
        def take(bitmap: Bitmap) -> int:
            offset = bitmap.next_free(self.reserved, self.rand)
            if offset is None:
                raise Full()
            bitmap.allocate(offset)
            return offset
        return await self.change(take)

    async def release(self, offsets: Iterable[int]) -> None:
        wanted = [o for o in offsets if 0 <= o < self.size]
        if not wanted:
            return

        def give_back(bitmap: Bitmap) -> None:
            for offset in wanted:
                bitmap.release(offset)
        await self.change(give_back)


class IPAllocator:
    """The ClusterIP range: IPs in, IPs out."""

    def __init__(self, storage: Storage, prefix: str, ip_range: IPRange) -> None:
        self.range = ip_range
        self.store = RangeAllocator(storage, f"{prefix}/{SERVICE_IPS_KEY}", ip_range.text,
                                    ip_range.size, ip_range.reserved)

    async def allocate(self, ip: str) -> None:
        offset = self.range.offset(ip)
        if offset is None:
            raise self.range.not_in_range(ip)
        await self.store.allocate(offset, self.range.allocated)

    async def allocate_next(self) -> str:
        return self.range.ip(await self.store.allocate_next())

    async def release(self, ips: Iterable[str]) -> None:
        offsets = [self.range.offset(ip) for ip in ips]
        await self.store.release(o for o in offsets if o is not None)

    async def allocated(self) -> list[str]:
        return [self.range.ip(o) for o in (await self.store.snapshot()).offsets()]


class PortAllocator:
    """The NodePort range: ports in, ports out."""

    def __init__(self, storage: Storage, prefix: str, port_range: PortRange) -> None:
        self.range = port_range
        self.store = RangeAllocator(storage, f"{prefix}/{NODE_PORTS_KEY}", port_range.text,
                                    port_range.size, port_range.reserved)

    async def allocate(self, port: int) -> None:
        offset = self.range.offset(port)
        if offset is None:
            raise self.range.not_in_range(port)
        await self.store.allocate(offset, self.range.allocated)

    async def allocate_next(self) -> int:
        return self.range.port(await self.store.allocate_next())

    async def release(self, ports: Iterable[int]) -> None:
        offsets = [self.range.offset(port) for port in ports]
        await self.store.release(o for o in offsets if o is not None)

    async def allocated(self) -> list[int]:
        return [self.range.port(o) for o in (await self.store.snapshot()).offsets()]


@dataclass
class ServiceRanges:
    """The two ranges Services allocate from (set on the registry by create_app)."""

    ips: IPAllocator
    ports: PortAllocator

    @classmethod
    def create(cls, storage: Storage, prefix: str, *, cluster_ip_range: str,
               node_port_range: str) -> ServiceRanges:
        return cls(IPAllocator(storage, prefix, IPRange.parse(cluster_ip_range)),
                   PortAllocator(storage, prefix, PortRange.parse(node_port_range)))


@dataclass
class Reservation:
    """What one write took from the ranges and what it lets go: `revert` gives back what
    it took (the write failed), `commit` what the old object held and the new one does not
    (the write succeeded)."""

    ranges: ServiceRanges | None = None
    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    freed_ips: list[str] = field(default_factory=list)
    freed_ports: list[int] = field(default_factory=list)

    async def commit(self) -> None:
        if self.ranges is not None:
            await self.ranges.ips.release(self.freed_ips)
            await self.ranges.ports.release(self.freed_ports)

    async def revert(self) -> None:
        if self.ranges is not None:
            await self.ranges.ips.release(self.ips)
            await self.ranges.ports.release(self.ports)
