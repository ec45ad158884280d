"""The one back-off of the code base: capped exponential delays, after client-go's
`util/flowcontrol.Backoff`, `wait.Backoff` and the work queue's
`ItemExponentialFailureRateLimiter`.

- `exponential(failures, initial=, cap=)`: the pure arithmetic; 0 failures is no delay,
  the first failure waits `initial`, each further one doubles it, up to `cap`.
- `Backoff`: one retry loop's delay (a watch reconnecting, a registration retried):
  `next()` gives the delay to sleep and doubles it, `reset()` after a success.
- `KeyedBackoff`: one delay per key (a crashing container, an image pull, a work queue
  item), on a caller-given clock so that tests need no sleeping; a key quiet for twice
  the cap starts over at `initial` (flowcontrol.Backoff's garbage rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# 2**32 doublings overflow nothing and reach any cap: a bound on the exponent only.
_MAX_EXPONENT = 32


def exponential(failures: int, *, initial: float, cap: float, factor: float = 2.0) -> float:
    """The delay after `failures` consecutive failures: 0, initial, initial*factor, ... cap."""
    if failures <= 0:
        return 0.0
    return min(initial * factor ** min(failures - 1, _MAX_EXPONENT), cap)


@dataclass
class Backoff:
    """One loop's capped exponential back-off: initial, doubling, up to cap; reset on success."""

    initial: float
    cap: float
    failures: int = field(default=0, init=False)

    def next(self) -> float:
        """Count one more failure; the delay to wait before the next attempt."""
        self.failures += 1
        return exponential(self.failures, initial=self.initial, cap=self.cap)

    def reset(self) -> None:
        self.failures = 0


@dataclass
class KeyedEntry:
    delay: float
    last_update: float


@dataclass
class KeyedBackoff:
    """A delay per key, as client-go's flowcontrol.Backoff (the kubelet's crash and pull
    back-off). Times are plain floats (seconds on any clock)."""

    initial: float
    maximum: float
    entries: dict[str, KeyedEntry] = field(default_factory=dict)

    def _expired(self, entry: KeyedEntry, at: float) -> bool:
        return at - entry.last_update > 2 * self.maximum

    def next(self, key: str, at: float) -> None:
        """Record a failure at `at`: the first one (or after a long quiet) starts at `initial`."""
        entry = self.entries.get(key)
        if entry is None or self._expired(entry, at):
            self.entries[key] = KeyedEntry(self.initial, at)
        else:
            entry.delay = min(entry.delay * 2, self.maximum)
            entry.last_update = at

    def delay(self, key: str) -> float:
        entry = self.entries.get(key)
        return entry.delay if entry else 0.0

    def in_backoff_since(self, key: str, since: float, now: float) -> bool:
        """Whether `now` is within the current delay counted from `since` (a crash's end)."""
        entry = self.entries.get(key)
        if entry is None or self._expired(entry, now):
            return False
        return now - since < entry.delay

    def in_backoff_since_update(self, key: str, now: float) -> bool:
        """Whether `now` is within the current delay counted from the last failure."""
        entry = self.entries.get(key)
        if entry is None or self._expired(entry, now):
            return False
        return now - entry.last_update < entry.delay

    def forget(self, key: str) -> None:
        self.entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> None:
        for key in [k for k in self.entries if k.startswith(prefix)]:
            del self.entries[key]


@dataclass
class ItemBackoff:
    """The work queue's per-item rate limiter (ItemExponentialFailureRateLimiter): each
    `when(key)` counts a requeue and returns base * 2**(requeues-1), capped; `forget`
    after a successful sync. client-go's controller defaults: 5 ms up to 1000 s."""

    base: float = 0.005
    cap: float = 1000.0
    requeues: dict[str, int] = field(default_factory=dict)

    def when(self, key: str) -> float:
        self.requeues[key] = self.requeues.get(key, 0) + 1
        return exponential(self.requeues[key], initial=self.base, cap=self.cap)

    def num_requeues(self, key: str) -> int:
        return self.requeues.get(key, 0)

    def forget(self, key: str) -> None:
        self.requeues.pop(key, None)
