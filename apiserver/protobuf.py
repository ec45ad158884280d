"""Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`).

kubectl's typed clients (`kubectl create namespace`, ...) send protobuf and accept JSON
back, so the apiserver must read it even though it always answers in JSON. The wire
format: the magic `k8s\\0`, then a `runtime.Unknown` message whose `raw` field holds the
object (generated.proto of k8s.io/api). Only the kinds kubectl creates this way are
decoded; anything else is a 415 naming the media types we do read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from common import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Field = tuple[int, int | bytes]


def fields(buf: bytes) -> Iterator[Field]:
    """(field number, value) of each field: ints for varints, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _varint(buf, pos)
            yield number, value
        elif wire_type == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated field")
            yield number, buf[pos:pos + length]
            pos += length
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ValueError("expected a string")
    return value.decode("utf-8")


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("expected a message")
    return value


def _string_map_entry(value: int | bytes) -> tuple[str, str]:
    entry = dict(fields(_message(value)))
    return _text(entry.get(1, b"")), _text(entry.get(2, b""))


def object_meta(raw: bytes) -> dict[str, Any]:
    """The client-settable fields of ObjectMeta (server-set ones are ignored anyway)."""
    meta: dict[str, Any] = {}
    for number, value in fields(raw):
        if number == 1:
            meta["name"] = _text(value)
        elif number == 2:
            meta["generateName"] = _text(value)
        elif number == 3:
            meta["namespace"] = _text(value)
        elif number == 11:
            key, text = _string_map_entry(value)
            meta.setdefault("labels", {})[key] = text
        elif number == 12:
            key, text = _string_map_entry(value)
            meta.setdefault("annotations", {})[key] = text
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(value))
    return meta


def namespace(raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}
    for number, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(_message(value))
        elif number == 2:
            finalizers = [_text(v) for n, v in fields(_message(value)) if n == 1]
            if finalizers:
                obj["spec"] = {"finalizers": finalizers}
    return obj


DECODERS: dict[str, Callable[[bytes], dict[str, Any]]] = {"Namespace": namespace}


def decode(body: bytes, *, accepted: str) -> dict[str, Any]:
    """The object in a protobuf request body, as the JSON-shaped dict the server works on."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest("provided protobuf body does not start with the 'k8s\\x00' "
                                "prefix")
    try:
        unknown = dict(fields(body[len(MAGIC):]))
        type_meta = dict(fields(_message(unknown.get(1, b""))))
        api_version, kind = _text(type_meta.get(1, b"")), _text(type_meta.get(2, b""))
        decoder = DECODERS.get(kind)
        if decoder is None or api_version != "v1":
            raise errors.UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {accepted}")
        return decoder(_message(unknown.get(2, b"")))
    except ValueError as e:
        raise errors.BadRequest(f"error decoding protobuf body: {e}") from None
