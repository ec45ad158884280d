"""Protobuf request bodies, as kubectl's typed clients send them (`kubectl create namespace`)."""

from __future__ import annotations

import pytest

from apiserver import protobuf
from common import errors


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return protobuf.MAGIC + field(1, type_meta) + field(2, raw) + field(4, b"application/vnd.kubernetes.protobuf")


def test_namespace_with_labels_and_finalizers() -> None:
    meta = (field(1, b"demo") + field(11, field(1, b"team") + field(2, b"a"))
            + field(12, field(1, b"note") + field(2, b"x")))
    spec = field(1, b"kubernetes")
    body = unknown("v1", "Namespace", field(1, meta) + field(2, spec))
    assert protobuf.decode(body, accepted="application/json") == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "demo", "labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {"finalizers": ["kubernetes"]}}


def test_kinds_without_a_decoder_are_415() -> None:
    with pytest.raises(errors.UnsupportedMediaType):
        protobuf.decode(unknown("v1", "ConfigMap", b""), accepted="application/json")


@pytest.mark.parametrize("body", [b"{}", protobuf.MAGIC + b"\x0a\x05ab", protobuf.MAGIC + b"\x0a"])
def test_malformed_bodies_are_400(body: bytes) -> None:
    with pytest.raises(errors.BadRequest):
        protobuf.decode(body, accepted="application/json")
