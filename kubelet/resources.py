"""Kubernetes resource quantities ("500m", "64Mi") as the numbers Docker takes."""

from __future__ import annotations

from decimal import Decimal

from common.quantity import parse_quantity


def nano_cpus(value: str | int | float) -> int:
    """CPU quantity as Docker's NanoCpus ("500m" -> 500_000_000)."""
    return int(parse_quantity(str(value)) * Decimal(10) ** 9)


def memory_bytes(value: str | int | float) -> int:
    """Memory quantity in bytes, rounded up ("64Mi" -> 67108864)."""
    quantity = parse_quantity(str(value))
    whole = int(quantity)
    return whole + (1 if quantity > whole else 0)
