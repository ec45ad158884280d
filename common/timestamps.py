"""Kubernetes' timestamps: metav1.Time is RFC 3339 in UTC, to the second, with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime | None = None) -> str:
    """`2026-11-29T18:25:14Z` for `moment` (default: now)."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
