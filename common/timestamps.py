"""Kubernetes' timestamps: metav1.Time is RFC 3339 in UTC, to the second, with a `Z`;
metav1.MicroTime (Events' eventTime, Leases) has exactly six fractional digits."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_last_second = -1
_last_text = ""


def rfc3339(moment: datetime | None = None) -> str:
    """`2026-11-29T18:25:14Z` for `moment` (default: now)."""
    if moment is not None:
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _now()


def _now() -> str:
    # Every write stamps one or more times (creation, managedFields): format each second
    # once, not per call (strftime was 3-4% of a create's CPU).
    global _last_second, _last_text
    second = int(time.time())
    if second != _last_second:
        _last_text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        _last_second = second
    return _last_text


_micro_second = -1
_micro_prefix = ""


def micro_time(unix_seconds: float | None = None) -> str:
    """`2026-11-29T18:25:14.123456Z` for `unix_seconds` (default: now), as MicroTime.

    Every pod create stamps one: the second's text is formatted once, as in rfc3339."""
    global _micro_second, _micro_prefix
    micros = round((time.time() if unix_seconds is None else unix_seconds) * 1_000_000)
    second, micro = divmod(micros, 1_000_000)
    if second != _micro_second:
        _micro_prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _micro_second = second
    return f"{_micro_prefix}.{micro:06d}Z"
