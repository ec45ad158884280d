"""common.backoff: the one capped exponential back-off (table tests)."""

from __future__ import annotations

import pytest

from common.backoff import Backoff, ItemBackoff, KeyedBackoff, exponential


@pytest.mark.parametrize(("failures", "initial", "cap", "want"), [
    (0, 1.0, 60.0, 0.0),
    (-1, 1.0, 60.0, 0.0),
    (1, 1.0, 60.0, 1.0),
    (2, 1.0, 60.0, 2.0),
    (6, 1.0, 60.0, 32.0),
    (7, 1.0, 60.0, 60.0),
    (10_000, 0.005, 1000.0, 1000.0),  # no overflow
])
def test_exponential(failures: int, initial: float, cap: float, want: float) -> None:
    assert exponential(failures, initial=initial, cap=cap) == want


def test_backoff_doubles_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial=0.1, cap=0.5)
    assert [backoff.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.next() == 0.1


def test_keyed_backoff_is_per_key_and_expires_after_twice_the_maximum() -> None:
    backoff = KeyedBackoff(initial=10, maximum=300)
    backoff.next("a", at=0)
    backoff.next("a", at=1)
    backoff.next("b", at=1)
    assert (backoff.delay("a"), backoff.delay("b"), backoff.delay("c")) == (20, 10, 0)
    assert backoff.in_backoff_since_update("a", now=20)
    assert not backoff.in_backoff_since_update("a", now=22)
    backoff.next("a", at=1 + 601)  # quiet for more than 2 * 300 s: starts over
    assert backoff.delay("a") == 10
    backoff.forget("a")
    assert backoff.delay("a") == 0


def test_item_backoff_counts_requeues_until_forgotten() -> None:
    limiter = ItemBackoff(base=0.005, cap=1.0)
    assert [limiter.when("k") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert limiter.num_requeues("k") == 3
    assert limiter.when("other") == 0.005
    limiter.forget("k")
    assert (limiter.num_requeues("k"), limiter.when("k")) == (0, 0.005)
