"""Applying rules: the state between syncs, and one sync (kube's syncProxyRules shell).

A full sync reads our chains and jump rules back with iptables-save, rewrites every own
chain, deletes the own chains no longer wanted and makes each jump rule from a built-in
chain exist exactly once (so a restart after kill -9 reconciles, duplicating nothing).
A partial sync rewrites only the chains whose rules differ from what the last sync
wrote, and deletes the ones gone: one endpoint change rewrites its service's chain and
its endpoint's chain, not the thousands of others. kube tracks which services changed
to pick the chains to write; comparing the rules themselves picks the same chains (and
skips a service whose change does not change its rules). A failed restore makes the
next sync a full one.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kube_proxy import iptables
from kube_proxy.conntrack import stale_entries
from kube_proxy.model import Endpoint, ServicePort, ServicePortName
from kube_proxy.rules import (
    Config,
    RuleCache,
    Tables,
    build_tables,
    cleanup_text,
    count_rules,
    restore_text,
)

log = logging.getLogger("kube-proxy")


@dataclass(frozen=True)
class SyncResult:
    full: bool
    seconds: float
    restore_bytes: int
    rules: dict[str, int]  # table -> rules we own
    stale_conntrack: int


@dataclass
class Syncer:
    config: Config
    applied: Tables | None = None  # what the last successful sync wrote
    cache: RuleCache = field(default_factory=RuleCache)
    ports: tuple[ServicePort, ...] = ()
    endpoints: dict[ServicePortName, tuple[Endpoint, ...]] = field(default_factory=dict)

    @property
    def needs_full_sync(self) -> bool:
        return self.applied is None

    async def sync(self, ports: list[ServicePort],
                   endpoints: dict[ServicePortName, tuple[Endpoint, ...]], *,
                   full: bool = False) -> SyncResult:
        started = time.monotonic()
        full = full or self.applied is None
        desired = build_tables(ports, endpoints, self.config, self.cache)
        existing = await iptables.existing(self.config.names) if full else None
        text = restore_text(desired, self.config, applied=self.applied, existing=existing)
        try:
            await iptables.restore(text)
        except Exception:
            self.applied = None  # the next sync is a full one
            raise
        self.applied = desired
        stale = stale_entries(self.ports, self.endpoints, ports, endpoints)
        for args in stale:
            await iptables.conntrack_delete(args)
        self.ports, self.endpoints = tuple(ports), dict(endpoints)
        result = SyncResult(full=full, seconds=time.monotonic() - started,
                            restore_bytes=len(text), rules=count_rules(desired),
                            stale_conntrack=len(stale))
        log.info("%s sync: %d service ports, %d nat and %d filter rules, %d bytes to "
                 "iptables-restore, %d stale UDP conntrack filters, in %.3f s",
                 "full" if full else "partial", len(ports), result.rules.get("nat", 0),
                 result.rules.get("filter", 0), len(text), len(stale), result.seconds)
        return result


async def cleanup(config: Config) -> int:
    """Remove every chain and jump rule of this instance (`--cleanup`); how many chains."""
    existing = await iptables.existing(config.names)
    await iptables.restore(cleanup_text(existing))
    removed = sum(len(c) for c in existing.chains.values())
    log.info("cleanup: removed %d chains and %d jump rules of %s", removed,
             sum(len(j) for j in existing.jumps.values()), config.names.prefix)
    return removed
