"""The allocation bitmap and the ranges as pure functions (apiserver/allocator.py), and the
repair pass's leak counting (apiserver/controlplane.py)."""

from __future__ import annotations

import base64
import random

import pytest

from apiserver.allocator import Bitmap, IPRange, PortRange, range_offset
from apiserver.controlplane import LEAK_PASSES, LeakTracker


def test_allocate_release_and_count() -> None:
    bitmap = Bitmap(8)
    assert bitmap.allocate(3) and not bitmap.allocate(3)
    assert bitmap.has(3) and not bitmap.has(4)
    assert (bitmap.used(), bitmap.free()) == (1, 7)
    bitmap.release(3)
    assert not bitmap.has(3) and bitmap.used() == 0


def test_snapshot_is_big_int_bytes_big_endian() -> None:
    bitmap = Bitmap(1 << 20)
    for offset in (0, 9, 1000):
        bitmap.allocate(offset)
    raw = base64.b64decode(bitmap.data())
    assert raw == (1 | 1 << 9 | 1 << 1000).to_bytes(126, "big")
    restored = Bitmap.from_data(1 << 20, bitmap.data())
    assert restored.offsets() == [0, 9, 1000]
    assert Bitmap.from_data(8, "").offsets() == []


def test_next_free_prefers_the_upper_band_then_the_lower() -> None:
    rand = random.Random(7)
    bitmap = Bitmap(20)
    taken = []
    for _ in range(16):
        offset = bitmap.next_free(4, rand)
        assert offset is not None and bitmap.allocate(offset)
        taken.append(offset)
    assert sorted(taken) == list(range(4, 20))  # the upper band first, each once
    lower = bitmap.next_free(4, rand)
    assert lower is not None and lower < 4
    for offset in range(4):
        bitmap.allocate(offset)
    assert bitmap.next_free(4, rand) is None


def test_range_offsets_as_kube_calculates_them() -> None:
    assert range_offset(8, minimum=16, maximum=256, step=16) == 0
    assert IPRange.parse("10.96.0.0/12").reserved == 256
    assert IPRange.parse("10.0.0.0/24").reserved == 16
    assert PortRange.parse("30000-32767").reserved == 86


def test_ip_range_offsets_skip_the_network_and_broadcast_addresses() -> None:
    ips = IPRange.parse("10.96.0.0/12")
    assert ips.size == (1 << 20) - 2
    assert ips.ip(0) == "10.96.0.1" and ips.offset("10.96.0.1") == 0
    assert ips.offset("10.96.0.0") is None and ips.offset("10.111.255.255") is None
    assert ips.offset("10.111.255.254") == ips.size - 1
    assert ips.offset("192.168.0.1") is None and ips.offset("nonsense") is None
    assert str(ips.not_in_range("1.2.3.4")) == (
        "the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is "
        "10.96.0.0/12")
    with pytest.raises(ValueError, match="the mask must be >= 12"):
        IPRange.parse("10.0.0.0/8")


def test_port_ranges() -> None:
    ports = PortRange.parse("30000-32767")
    assert (ports.base, ports.size, ports.text) == (30000, 2768, "30000-32767")
    assert PortRange.parse("30000+10").text == "30000-30009"
    assert ports.offset(30000) == 0 and ports.offset(32767) == 2767
    assert ports.offset(29999) is None and ports.offset(32768) is None
    assert str(ports.allocated()) == "provided port is already allocated"
    for bad in ("32767-30000", "0-10", "30000-70000", "x"):
        with pytest.raises(ValueError):
            PortRange.parse(bad)


def test_a_leak_is_freed_only_after_being_seen_on_consecutive_passes() -> None:
    leaks = LeakTracker()
    for _ in range(LEAK_PASSES - 1):
        free_now, counts = leaks.plan(taken={1, 2, 5}, held={1, 2})
        assert free_now == set()
        leaks.commit(counts)
    free_now, counts = leaks.plan(taken={1, 2, 5}, held={1, 2})
    assert free_now == {5}
    # a bit that turns out to be held (its Service was written meanwhile) starts over
    leaks = LeakTracker()
    leaks.commit(leaks.plan(taken={7}, held=set())[1])
    leaks.commit(leaks.plan(taken={7}, held={7})[1])
    assert leaks.seen == {}
