"""etcd compaction on kube-apiserver's schedule (`--etcd-compaction-interval`, default 5m).

Every interval, compact etcd to the revision recorded at the previous tick: the history
of the last interval is always kept, for watchers and paged LISTs to resume from; older
revisions are gone, and a watch or LIST from one is 410 Expired.

Several apiservers over one etcd compact once per interval between them, as kube's
(`storage/etcd3/compact.go`): the key `compact_rev_key` is a lease whose version is the
logical compaction time. A tick writes the revision it is about to compact to there, in
a transaction on the version it last saw; the one apiserver whose transaction succeeds
compacts, the others learn the new version (and what was compacted) and try again next
tick. When that one apiserver stops, another takes over within two intervals.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from apiserver.storage import Compacted, Storage, StorageError

log = logging.getLogger("apiserver.compactor")

COMPACT_REV_KEY = "compact_rev_key"  # kube's key, outside every --etcd-prefix
DEFAULT_INTERVAL = 300.0


@dataclass(frozen=True, slots=True)
class Tick:
    """What a compactor knows between ticks."""

    version: int = 0  # compact_rev_key's version: the logical time of the last compaction
    revision: int = 0  # the revision recorded at the last tick: the next one compacts to it
    compacted: int = 0  # the newest revision known to be compacted to (0: none known)


async def tick(storage: Storage, last: Tick) -> Tick:
    """One compaction round (kube's compact()): take the lease by writing the revision we
    are about to compact to, then compact to it; a lost lease means another apiserver did
    it. The first round of a compactor records a revision without compacting anything."""
    taken, current, version, value = await storage.swap_version(
        COMPACT_REV_KEY, last.version, str(last.revision).encode())
    if not taken:
        compacted = int(value) if value.isdigit() else last.compacted
        return Tick(version, current, compacted)
    if last.revision == 0:
        return Tick(version, current, last.compacted)
    try:
        await storage.compact(last.revision)
    except Compacted:
        pass  # etcd was compacted past it already (by hand, or by etcd itself)
    except StorageError as e:
        # the lease is ours all the same: the next tick compacts to the newer revision
        log.warning("etcd compaction to revision %d failed: %s", last.revision, e)
        return Tick(version, current, last.compacted)
    log.info("compacted etcd to revision %d (the next compaction is to %d)", last.revision,
             current)
    return Tick(version, current, last.revision)


class Compactor:
    """The compaction loop of one apiserver; `interval` 0 disables it."""

    def __init__(self, storage: Storage, interval: float) -> None:
        self.storage = storage
        self.interval = interval
        self.state = Tick()
        self._task: asyncio.Task[None] | None = None

    @property
    def compacted_revision(self) -> int:
        return self.state.compacted

    def start(self) -> None:
        if self.interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="etcd compactor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.state = await tick(self.storage, self.state)
            except StorageError as e:
                # kube keeps what it knew and tries again after the next interval
                log.warning("etcd compaction failed: %s", e)
