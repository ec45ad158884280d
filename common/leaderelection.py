"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's `leaderelection` does it.

Every candidate reads the lease every retry period and claims it when it is absent,
released (no holder), expired (renewTime + leaseDurationSeconds < now) or already its
own. A claim is a create, or an update carrying the resourceVersion it read: when two
candidates race, the apiserver answers the second with 409 Conflict and it tries again
later. The leader renews renewTime every retry period; when it could not renew for the
renew deadline (or sees another holder), it has lost the lease. On a graceful stop it
releases the lease (client-go's ReleaseOnCancel) so another candidate takes over at once
instead of after the lease expires.

The decisions are pure functions of the lease and the clock (`may_acquire`,
`claimed_lease`, `released_lease`, `renew_deadline_passed`); `LeaderElector` is the thin
async loop around them. One deliberate difference from client-go: a leader that reads
the lease held by someone else gives up at once rather than at its renew deadline.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from common.errors import AlreadyExists, ApiError, Conflict, NotFound
from common.models import MicroTimeError, format_micro_time, parse_micro_time

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go's: candidates retry every retry_period * (1 + 0..1.2)
DEFAULT_NAMESPACE = "kube-system"
DEFAULT_NAME = "kube-scheduler"


def default_identity() -> str:
    """`<hostname>_<uuid4>`, as kube-scheduler names itself."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str = DEFAULT_NAMESPACE
    name: str = DEFAULT_NAME
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0  # seconds a lease stays valid after its renewTime
    renew_deadline: float = 10.0  # a leader that could not renew for this long stops leading
    retry_period: float = 2.0  # between two attempts to acquire or renew

    @property
    def lease_key(self) -> str:
        return f"{self.namespace}/{self.name}"


def timing_errors(lease_duration: float, renew_deadline: float,
                  retry_period: float) -> list[str]:
    """client-go's NewLeaderElector checks, in its words (empty when the timing is sound)."""
    errors = []
    if lease_duration < 1:
        errors.append("leaseDuration must be at least 1s")
    if lease_duration <= renew_deadline:
        errors.append("leaseDuration must be greater than renewDeadline")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        errors.append("renewDeadline must be greater than retryPeriod*JitterFactor")
    if retry_period <= 0:
        errors.append("retryPeriod must be greater than zero")
    return errors


# -- pure decisions --------------------------------------------------------------------------


def _time(spec: Mapping[str, Any], key: str) -> datetime | None:
    value = spec.get(key)
    if not isinstance(value, str):
        return None
    try:
        return parse_micro_time(value)
    except MicroTimeError:
        return None


def holder_of(lease: Mapping[str, Any] | None) -> str:
    """The lease's holderIdentity; "" when absent or released."""
    if lease is None:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def expires_at(lease: Mapping[str, Any]) -> datetime | None:
    """renewTime + leaseDurationSeconds; None when the lease lacks either."""
    spec = lease.get("spec") or {}
    renewed = _time(spec, "renewTime")
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        return None
    return renewed + timedelta(seconds=duration)


def is_expired(lease: Mapping[str, Any], now: datetime) -> bool:
    expiry = expires_at(lease)
    return expiry is None or expiry < now


def may_acquire(lease: Mapping[str, Any] | None, identity: str, now: datetime) -> bool:
    """Whether `identity` may claim the lease at `now`: it is absent, released, expired,
    or already ours."""
    holder = holder_of(lease)
    return lease is None or not holder or holder == identity or is_expired(lease, now)


def claimed_lease(lease: Mapping[str, Any] | None, *, namespace: str, name: str,
                  identity: str, duration_seconds: int, now: datetime) -> dict[str, Any]:
    """The lease to write to hold it from `now` (call only when `may_acquire`).

    Renewing our own lease moves renewTime only; taking it over from anyone else (a
    released lease included, as client-go counts it) sets acquireTime and counts one more
    leaseTransition. A new lease starts at 0 transitions. The resourceVersion read stays
    in the body: it is the update's precondition.
    """
    stamp = format_micro_time(now)
    if lease is None:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"holderIdentity": identity, "leaseDurationSeconds": duration_seconds,
                         "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}}
    spec = dict(lease.get("spec") or {})
    transitions = int(spec.get("leaseTransitions") or 0)
    if holder_of(lease) != identity:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = transitions + 1
    else:
        spec.setdefault("acquireTime", stamp)
        spec["leaseTransitions"] = transitions
    spec.update(holderIdentity=identity, leaseDurationSeconds=duration_seconds,
                renewTime=stamp)
    return {**lease, "spec": spec}


def released_lease(lease: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The lease given up, as client-go's release writes it: no holder, a 1 s duration,
    both times `now`, the transitions kept."""
    stamp = format_micro_time(now)
    spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
            "acquireTime": stamp, "renewTime": stamp}
    return {**lease, "spec": spec}


def renew_deadline_passed(last_renewed: float, now: float, renew_deadline: float) -> bool:
    """Whether a leader that last renewed at `last_renewed` (monotonic) has lost the lease."""
    return now - last_renewed >= renew_deadline


def jittered(period: float, rng: random.Random) -> float:
    return period * (1 + rng.random() * JITTER_FACTOR)


# -- the loop ---------------------------------------------------------------------------------


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Acquire the lease, then renew it; `leading` is set while this candidate leads.

    `run()` returns when leadership is lost (cancel it to stop); `release()` gives a held
    lease up. `client` is a `common.client.ApiClient`.
    """

    def __init__(self, client: Any, config: LeaderElectionConfig, *,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        errors = timing_errors(config.lease_duration, config.renew_deadline,
                               config.retry_period)
        if errors:
            raise ValueError("; ".join(errors))
        self.client = client
        self.config = config
        self.clock = clock
        self.leading = asyncio.Event()
        self.latest: dict[str, Any] | None = None  # the lease as our last write returned it
        self.rng = random.Random()
        self.observed_holder = ""  # the holderIdentity our last read saw
        self._waiting_for = ""  # the holder we last said we wait for

    @property
    def duration_seconds(self) -> int:
        return int(self.config.lease_duration)  # client-go truncates to whole seconds too

    async def _read(self) -> dict[str, Any] | None:
        try:
            return dict(await self.client.get("leases", self.config.name,
                                              namespace=self.config.namespace))
        except NotFound:
            return None

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: read the lease, claim it when we may. False when someone else holds
        it, won the race to write it, or the apiserver could not be reached."""
        cfg = self.config
        try:
            lease = await self._read()
            self.observed_holder = holder_of(lease)
            now = self.clock()
            if not may_acquire(lease, cfg.identity, now):
                assert lease is not None
                self._note_other_holder(lease, now)
                return False
            claim = claimed_lease(lease, namespace=cfg.namespace, name=cfg.name,
                                  identity=cfg.identity, duration_seconds=self.duration_seconds,
                                  now=now)
            written = (await self.client.create("leases", claim) if lease is None
                       else await self.client.update("leases", claim))
        except (Conflict, AlreadyExists):
            log.debug("lease %s: another candidate wrote it first", cfg.lease_key)
            return False
        except (ApiError, httpx.HTTPError) as e:
            log.warning("lease %s: cannot acquire or renew: %s: %s", cfg.lease_key,
                        type(e).__name__, e)
            return False
        self.latest = dict(written)
        self.observed_holder = cfg.identity
        self._waiting_for = ""
        return True

    def _note_other_holder(self, lease: Mapping[str, Any], now: datetime) -> None:
        holder = holder_of(lease)
        if self.leading.is_set() or holder == self._waiting_for:
            return
        self._waiting_for = holder
        expiry = expires_at(lease)
        left = f", valid for {(expiry - now).total_seconds():.1f}s more" if expiry else ""
        log.info("lease %s is held by %s%s: waiting to acquire it", self.config.lease_key,
                 holder, left)

    async def _attempt(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning("lease %s: no answer within %.1fs", self.config.lease_key, timeout)
            return False

    async def acquire(self) -> None:
        """Try every retry period (jittered) until we hold the lease."""
        cfg = self.config
        while True:
            if await self._attempt(cfg.renew_deadline):
                break
            await asyncio.sleep(jittered(cfg.retry_period, self.rng))
        self.leading.set()
        log.info("lease %s acquired: %s is the leader", cfg.lease_key, cfg.identity)

    async def renew(self) -> None:
        """Renew every retry period; return when the renew deadline passed without a
        renewal, or when someone else holds the lease."""
        cfg = self.config
        last_renewed = time.monotonic()
        while True:
            await asyncio.sleep(cfg.retry_period)
            left = cfg.renew_deadline - (time.monotonic() - last_renewed)
            if left > 0 and await self._attempt(left):
                last_renewed = time.monotonic()
                continue
            holder = self.observed_holder
            if holder and holder != cfg.identity:
                log.error("lease %s: now held by %s", cfg.lease_key, holder)
                return
            if renew_deadline_passed(last_renewed, time.monotonic(), cfg.renew_deadline):
                log.error("lease %s: not renewed for %.1fs (renew deadline)", cfg.lease_key,
                          time.monotonic() - last_renewed)
                return

    async def run(self) -> None:
        """Acquire, then renew until leadership is lost; then return."""
        await self.acquire()
        try:
            await self.renew()
        finally:
            self.leading.clear()

    async def release(self) -> None:
        """Give the lease up if we hold it (a graceful stop), so another candidate takes over
        at once. Best effort: a failure only means the others wait for it to expire."""
        if self.latest is None or holder_of(self.latest) != self.config.identity:
            return
        self.leading.clear()
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self._write_release(self.latest)
        except (ApiError, httpx.HTTPError, TimeoutError) as e:
            log.warning("lease %s: could not release it: %s: %s", self.config.lease_key,
                        type(e).__name__, e)
            return
        self.latest = None
        log.info("lease %s released", self.config.lease_key)

    async def _write_release(self, lease: dict[str, Any]) -> None:
        """Write the released lease; on a 409 (a renewal cancelled by the stop may have
        committed after `latest` was read) read it again and retry while we still hold it."""
        try:
            await self.client.update("leases", released_lease(lease, self.clock()))
        except Conflict:
            current = await self._read()
            if current is None or holder_of(current) != self.config.identity:
                return
            await self.client.update("leases", released_lease(current, self.clock()))
