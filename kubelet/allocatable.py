"""The Node's capacity and allocatable (after kubelet's container manager,
`pkg/kubelet/cm/node_container_manager_linux.go`, and cadvisor's machine info).

capacity: the host's CPUs and memory (/proc/meminfo MemTotal), the ephemeral storage of
the filesystem holding the kubelet's root dir, hugepages, and `pods` (`--max-pods`).
`--declared-capacity` (a kubelite extension) replaces any of these, so one machine can
host a "2-cpu" and a "4-cpu" node.

allocatable = capacity - `--system-reserved` - `--kube-reserved` - the hard eviction
thresholds (`memory.available` against memory, `nodefs.available` against
ephemeral-storage; a percentage is of the capacity), never below zero.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_UP, Decimal
from pathlib import Path

from common.quantity import QuantityError, canonical_quantity, parse_quantity

CPU, MEMORY, STORAGE, PODS, PID = "cpu", "memory", "ephemeral-storage", "pods", "pid"

# --system-reserved / --kube-reserved (kube: cpu, memory, ephemeral-storage, pid).
RESERVABLE = (CPU, MEMORY, STORAGE, PID)
# --declared-capacity: what a node reports (hugepages-<size> too).
DECLARABLE = (CPU, MEMORY, STORAGE, PODS)

# kube's Linux default for --eviction-hard (pkg/kubelet/eviction/defaults_linux.go).
DEFAULT_EVICTION_HARD = ("memory.available<100Mi,nodefs.available<10%,"
                         "imagefs.available<15%,nodefs.inodesFree<5%")
EVICTION_SIGNALS = ("memory.available", "nodefs.available", "nodefs.inodesFree",
                    "imagefs.available", "imagefs.inodesFree", "containerfs.available",
                    "containerfs.inodesFree", "pid.available", "allocatableMemory.available")
# The signals that reserve part of a resource from allocatable (hardEvictionReservation).
EVICTION_RESERVES = {"memory.available": MEMORY, "nodefs.available": STORAGE}

_HUGEPAGES = re.compile(r"hugepages-(\d+)kB")


@dataclass(frozen=True)
class Threshold:
    signal: str
    quantity: Decimal | None = None  # an amount...
    percentage: Decimal | None = None  # ...or a fraction (0.1 for 10%) of the capacity


def parse_resource_list(text: str, *, allowed: tuple[str, ...],
                        flag: str) -> dict[str, Decimal]:
    """kube's `cpu=100m,memory=100Mi` (ConfigurationMap); ValueError worded for `flag`."""
    out: dict[str, Decimal] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ValueError(f"invalid {flag} {item!r}: expected resource=quantity")
        if name not in allowed and not name.startswith("hugepages-"):
            raise ValueError(f"invalid {flag}: resource {name!r} is not one of "
                             f"{', '.join(allowed)}")
        try:
            quantity = parse_quantity(value)
        except QuantityError as e:
            raise ValueError(f"invalid {flag} {item!r}: {e}") from None
        if quantity < 0:
            raise ValueError(f"invalid {flag} {item!r}: resource quantity for {name!r} "
                             f"cannot be negative")
        out[name] = quantity
    return out


def parse_eviction_thresholds(text: str) -> list[Threshold]:
    """`--eviction-hard memory.available<100Mi,nodefs.available<10%` (ParseThresholdConfig)."""
    thresholds: list[Threshold] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        signal, sep, value = item.partition("<")
        signal, value = signal.strip(), value.strip()
        if not sep:
            raise ValueError(f"invalid --eviction-hard {item!r}: expected signal<quantity")
        if signal not in EVICTION_SIGNALS:
            raise ValueError(f"invalid --eviction-hard: unsupported eviction signal {signal}")
        if any(t.signal == signal for t in thresholds):
            raise ValueError(f"invalid --eviction-hard: found duplicate eviction threshold "
                             f"for signal {signal}")
        if value.endswith("%"):
            try:
                percent = Decimal(value[:-1])
            except ArithmeticError:
                raise ValueError(f"invalid --eviction-hard {item!r}: bad percentage") from None
            if not 0 <= percent <= 100:
                raise ValueError(f"invalid --eviction-hard {item!r}: eviction percentage "
                                 f"threshold {signal} must be >= 0% and <= 100%")
            thresholds.append(Threshold(signal, percentage=percent / 100))
            continue
        try:
            quantity = parse_quantity(value)
        except QuantityError as e:
            raise ValueError(f"invalid --eviction-hard {item!r}: {e}") from None
        if quantity < 0:
            raise ValueError(f"invalid --eviction-hard {item!r}: eviction threshold {signal} "
                             f"must be positive")
        thresholds.append(Threshold(signal, quantity=quantity))
    return thresholds


# --- reading the host (blocking: call through asyncio.to_thread) -------------------------

def host_memory_bytes(meminfo: str = "/proc/meminfo") -> int:
    for line in Path(meminfo).read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"no MemTotal in {meminfo}")


def filesystem_bytes(path: str) -> int:
    """The size of the filesystem holding `path` (or its nearest existing parent)."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stats = os.statvfs(probe)
    return stats.f_blocks * stats.f_frsize


def host_hugepages(root: str = "/sys/kernel/mm/hugepages") -> dict[str, int]:
    """hugepages-2Mi etc. in bytes, as cadvisor reports them (0 when none are reserved)."""
    out: dict[str, int] = {}
    try:
        entries = os.listdir(root)
    except OSError:
        return out
    for entry in entries:
        match = _HUGEPAGES.fullmatch(entry)
        if not match:
            continue
        size_kib = int(match.group(1))
        try:
            pages = int(Path(root, entry, "nr_hugepages").read_text().strip() or 0)
        except (OSError, ValueError):
            pages = 0
        out[f"hugepages-{binary_bytes(size_kib * 1024)}"] = pages * size_kib * 1024
    return out


def host_capacity(*, root_dir: str, max_pods: int) -> dict[str, Decimal]:
    """What the machine has, as numbers (cpu in cores, the rest in bytes / a count)."""
    capacity = {CPU: Decimal(os.cpu_count() or 1), MEMORY: Decimal(host_memory_bytes()),
                STORAGE: Decimal(filesystem_bytes(root_dir)), PODS: Decimal(max_pods)}
    capacity.update((name, Decimal(value)) for name, value in host_hugepages().items())
    return capacity


# --- the pure arithmetic ---------------------------------------------------------------

def declared(capacity: Mapping[str, Decimal],
             declaration: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """The capacity with the declared figures in place of the host's."""
    return {**capacity, **declaration}


def eviction_reservation(thresholds: list[Threshold],
                         capacity: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """hardEvictionReservation: what the hard thresholds keep back, per resource."""
    reserved: dict[str, Decimal] = {}
    for threshold in thresholds:
        resource = EVICTION_RESERVES.get(threshold.signal)
        if resource is None or resource not in capacity:
            continue
        if threshold.quantity is not None:
            amount = threshold.quantity
        else:
            assert threshold.percentage is not None
            # kube: int64(float64(capacity.Value()) * float64(percentage))
            amount = (capacity[resource] * threshold.percentage).to_integral_value(ROUND_DOWN)
        reserved[resource] = reserved.get(resource, Decimal(0)) + amount
    return reserved


def allocatable(capacity: Mapping[str, Decimal], *, system_reserved: Mapping[str, Decimal],
                kube_reserved: Mapping[str, Decimal],
                eviction_hard: list[Threshold]) -> dict[str, Decimal]:
    """capacity - system-reserved - kube-reserved - hard eviction, at least zero."""
    eviction = eviction_reservation(eviction_hard, capacity)
    out: dict[str, Decimal] = {}
    for name, value in capacity.items():
        left = value - sum((r.get(name, Decimal(0))
                            for r in (system_reserved, kube_reserved, eviction)), Decimal(0))
        out[name] = max(left, Decimal(0))
    return out


def binary_bytes(value: Decimal | int) -> str:
    """A byte count as kube writes a BinarySI quantity: `24684092Ki`, `2Mi`, or plain
    digits when it is not a whole number of KiB."""
    number = int(Decimal(value).to_integral_value(ROUND_UP))
    if number % 1024 == 0 and number >= 1024:
        return canonical_quantity(f"{number // 1024}Ki")
    return str(number)


def quantity_strings(resources: Mapping[str, Decimal]) -> dict[str, str]:
    """The Node's resource list: cpu in cores or millicores, bytes in BinarySI, pods."""
    out: dict[str, str] = {}
    for name in sorted(resources):
        value = resources[name]
        if name == CPU:
            milli = int((value * 1000).to_integral_value(ROUND_DOWN))
            out[name] = canonical_quantity(f"{milli}m")
        elif name == PODS or name == PID:
            out[name] = str(int(value))
        else:
            out[name] = binary_bytes(value)
    return out
