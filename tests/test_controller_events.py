"""The controllers' event spam filter (client-go's EventSourceObjectSpamFilter)."""

from __future__ import annotations

from controller_manager.events import SPAM_BURST, SpamFilter, spam_key


def test_a_burst_of_25_then_one_per_five_minutes() -> None:
    spam = SpamFilter()
    allowed = [spam.allow("rs-a", 0.0) for _ in range(SPAM_BURST + 5)]
    assert allowed == [True] * SPAM_BURST + [False] * 5
    assert not spam.allow("rs-a", 299.0)
    assert spam.allow("rs-a", 301.0)
    assert not spam.allow("rs-a", 302.0)
    assert spam.allow("rs-b", 302.0)  # each object has its own bucket


def test_the_key_is_the_source_and_the_object_not_the_reason() -> None:
    source = {"component": "replicaset-controller"}
    rs = {"kind": "ReplicaSet", "namespace": "default", "name": "web", "uid": "u",
          "apiVersion": "apps/v1"}
    assert spam_key(source, rs) == spam_key(source, dict(rs))
    assert spam_key(source, rs) != spam_key(source, {**rs, "name": "other"})
    assert spam_key(source, rs) != spam_key({"component": "deployment-controller"}, rs)
