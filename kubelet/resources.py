"""Kubernetes resource quantities ("500m", "64Mi") as the numbers Docker takes, and the
cgroup values the kubelet derives from a container's requests and limits (after
`pkg/kubelet/cm/helpers_linux.go` and `kuberuntime_container_linux.go`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from common.quantity import QuantityError, parse_quantity

# cm/helpers_linux.go
MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100_000  # µs: the CFS period the kubelet uses (cpuCFSQuotaPeriod, 100ms)
MIN_QUOTA_PERIOD = 1000  # µs


def nano_cpus(value: str | int | float) -> int:
    """CPU quantity as Docker's NanoCpus ("500m" -> 500_000_000)."""
    return int(parse_quantity(str(value)) * Decimal(10) ** 9)


def memory_bytes(value: str | int | float) -> int:
    """Memory quantity in bytes, rounded up ("64Mi" -> 67108864)."""
    quantity = parse_quantity(str(value))
    whole = int(quantity)
    return whole + (1 if quantity > whole else 0)


def milli_cpu(value: str | int | float) -> int:
    """Quantity.MilliValue(): "250m" -> 250, "1" -> 1000, "0.1m" -> 1 (rounded up)."""
    return math.ceil(parse_quantity(str(value)) * MILLI_CPU_TO_CPU)


def milli_cpu_to_shares(milli: int) -> int:
    """MilliCPUToShares: cpu.shares for a cpu request (2 when there is none)."""
    if milli == 0:
        return MIN_SHARES
    shares = milli * SHARES_PER_CPU // MILLI_CPU_TO_CPU
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def milli_cpu_to_quota(milli: int, period: int = QUOTA_PERIOD) -> int:
    """MilliCPUToQuota: the CFS quota (µs per period) for a cpu limit; 0 means none."""
    if milli == 0:
        return 0
    return max(milli * period // MILLI_CPU_TO_CPU, MIN_QUOTA_PERIOD)


def _quantity(resources: Mapping[str, Any], name: str) -> Any:
    value = resources.get(name)
    if value is None:
        return None
    try:
        parse_quantity(str(value))
    except QuantityError:
        return None  # the apiserver validated it; a bad one counts as unset
    return value


def container_resources(container: Mapping[str, Any]) -> dict[str, int]:
    """Docker HostConfig resources for a container, as kube's
    generateLinuxContainerResources sets the cgroup: CpuShares from the cpu request (the
    limit when only that is set), CpuQuota/CpuPeriod from the cpu limit, Memory from the
    memory limit (without swap: kube's NoSwap)."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    cpu_request, cpu_limit = _quantity(requests, "cpu"), _quantity(limits, "cpu")
    memory_limit = _quantity(limits, "memory")
    request_milli = milli_cpu(cpu_request) if cpu_request is not None else 0
    limit_milli = milli_cpu(cpu_limit) if cpu_limit is not None else 0
    out = {"CpuShares": milli_cpu_to_shares(request_milli if request_milli or not limit_milli
                                            else limit_milli)}
    if limit_milli:
        out["CpuQuota"] = milli_cpu_to_quota(limit_milli)
        out["CpuPeriod"] = QUOTA_PERIOD
    if memory_limit is not None and memory_bytes(memory_limit) > 0:
        out["Memory"] = out["MemorySwap"] = memory_bytes(memory_limit)
    return out
