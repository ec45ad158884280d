"""Objects in etcd, the way kube-apiserver's `storage/etcd3` keeps them.

- An object is stored as JSON under `<prefix>/<resource>/[<namespace>/]<name>`.
- `resourceVersion` is the key's etcd `mod_revision`: set when the object is read,
  never stored inside the value.
- Create is a transaction on `create_revision == 0`; update and delete are
  transactions on `mod_revision == <the revision the caller read>`.
- A watch is one etcd watch stream (gRPC) from a revision; compaction ends it with
  `Compacted`, and progress requests give the revision everything up to which was sent
  (the apiserver turns those into BOOKMARK events).

We speak etcd's gRPC API through the stubs `aetcd` ships (`aetcd.rpc`), because its
high-level client hides the transaction's header revision and its shared watch
stream makes cancellation and compaction hard to reason about.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import grpc
import orjson
from aetcd import rpc

if TYPE_CHECKING:
    from common.metrics import Histogram

log = logging.getLogger("apiserver.storage")

MAX_REVISION = 2**63 - 1  # etcd's revisions are int64

# Every etcd call answers (or fails) within this many seconds, so that a request
# against a dead etcd becomes a 503 instead of a hang.
CALL_TIMEOUT = 1.5
# How long etcd's answer that it still holds a revision is taken as true for later ones
# (compaction runs every few minutes; a watch from a revision compacted within this time
# is replayed from the cache's window, as kube's cacher always does).
COMPACTION_ANSWER_TTL = 1.0

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


class StorageError(Exception):
    pass


class Unavailable(StorageError):
    """etcd did not answer in time or is unreachable."""


class TooLarge(StorageError):
    """etcd refused a write larger than its --max-request-bytes."""


class KeyExists(StorageError):
    pass


class KeyNotFound(StorageError):
    pass


class RequiredKeyMissing(StorageError):
    """A create that needs another key (the namespace) found it absent."""


class RevisionMismatch(StorageError):
    def __init__(self, current: KV | None) -> None:
        super().__init__("revision mismatch")
        self.current = current


class FutureRevision(StorageError):
    """A read at a revision etcd has not reached yet."""

    def __init__(self, requested: int) -> None:
        super().__init__(f"revision {requested} is in the future")
        self.requested = requested


class Compacted(StorageError):
    def __init__(self, requested: int, compact_revision: int) -> None:
        super().__init__(f"revision {requested} compacted (oldest {compact_revision})")
        self.requested = requested
        self.compact_revision = compact_revision


@dataclass(frozen=True, slots=True)
class KV:
    key: str
    value: dict[str, Any]
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class RangeResult:
    """One etcd range read: the objects, the revision it was read at, whether keys past
    the limit remain, and how many keys the whole range held (etcd's `count`)."""

    kvs: list[KV]
    revision: int
    more: bool
    count: int


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # "PUT" | "DELETE"
    key: str
    value: dict[str, Any] | None  # the new value (None for DELETE)
    prev: dict[str, Any] | None  # the value before (None when created or compacted away)
    revision: int  # the event's mod_revision (the delete's revision for DELETE)
    created: bool  # PUT that created the key


@dataclass(frozen=True, slots=True)
class Progress:
    """Every change up to `revision` has been delivered on this watch."""

    revision: int


def encode(obj: Any) -> bytes:
    """Compact JSON; the stdlib for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def decode(raw: bytes) -> dict[str, Any]:
    try:
        value: dict[str, Any] = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = json.loads(raw)
    return value


def prefix_range_end(prefix: bytes) -> bytes:
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def grpc_target(endpoints: Sequence[str]) -> str:
    """`http://127.0.0.1:2379,http://127.0.0.1:22379` -> a gRPC target over all of them."""
    hosts = []
    for endpoint in endpoints:
        parsed = urlparse(endpoint if "//" in endpoint else f"http://{endpoint}")
        hosts.append(f"{parsed.hostname}:{parsed.port or 2379}")
    if len(hosts) == 1:
        return hosts[0]
    return "ipv4:" + ",".join(hosts)


def uses_tls(endpoints: Sequence[str]) -> bool:
    """Whether the endpoints are `https://` (TLS) or `http://` / bare `host:port` (plain);
    a mix is refused, as one gRPC channel is either."""
    schemes = {urlparse(e).scheme if "//" in e else "http" for e in endpoints}
    unknown = schemes - {"http", "https"}
    if unknown:
        raise ValueError(f"etcd endpoints: unknown scheme(s) {', '.join(sorted(unknown))} "
                         f"(use http:// or https://)")
    if len(schemes) > 1:
        raise ValueError("etcd endpoints mix http:// and https://")
    return schemes == {"https"}


@dataclass(frozen=True, slots=True)
class EtcdTLS:
    """kube-apiserver's --etcd-cafile, --etcd-certfile, --etcd-keyfile, read (PEM): the CA
    that signed etcd's serving certificate (None: the system's roots) and the client
    certificate etcd's --client-cert-auth asks for."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None

    @classmethod
    def load(cls, cafile: str | None, certfile: str | None,
             keyfile: str | None) -> EtcdTLS:
        """The files read; ValueError naming the flag of a file that is missing, unreadable
        or not PEM, or a certificate without its key."""
        if bool(certfile) != bool(keyfile):
            raise ValueError("--etcd-certfile and --etcd-keyfile go together")
        return cls(ca=_read_pem("--etcd-cafile", cafile, "CERTIFICATE"),
                   cert=_read_pem("--etcd-certfile", certfile, "CERTIFICATE"),
                   key=_read_pem("--etcd-keyfile", keyfile, "PRIVATE KEY"))

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca,
                                            private_key=self.key,
                                            certificate_chain=self.cert)


def _read_pem(flag: str, path: str | None, kind: str) -> bytes | None:
    if not path:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{flag} {path}: {e.strerror or e}") from e
    if b"-----BEGIN " not in data or kind.encode() not in data:
        raise ValueError(f"{flag} {path}: not a PEM {kind.lower()}")
    return data


def open_channel(endpoints: Sequence[str], tls: EtcdTLS | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """One gRPC channel to etcd: TLS for `https://` endpoints (with `tls`'s CA and client
    certificate), plaintext for `http://` or bare `host:port`."""
    target = grpc_target(endpoints)
    if not uses_tls(endpoints):
        return rpc.insecure_channel(target, options=list(options))
    extra: list[tuple[str, Any]] = []
    if len(endpoints) > 1:  # an ipv4: target has no one host name to verify: the first's
        extra.append(("grpc.ssl_target_name_override", urlparse(endpoints[0]).hostname))
    return rpc.secure_channel(target, (tls or EtcdTLS()).credentials(),
                              options=[*options, *extra])


def _kv(raw: Any) -> KV:
    return KV(raw.key.decode(), decode(raw.value), raw.mod_revision, raw.create_revision)


def is_too_large(code: grpc.StatusCode, details: str) -> bool:
    """Whether etcd (or gRPC on either side) refused a request for its size: etcd's
    --max-request-bytes ("etcdserver: request is too large", INVALID_ARGUMENT) or, past
    etcd's gRPC message limit (--max-request-bytes + 512 KiB, 2 MiB by default), gRPC's
    "received message larger than max" / "Sent message larger than max" (RESOURCE_EXHAUSTED).
    Neither gets better by retrying: a 413, never a 503."""
    text = details.lower()
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return "too large" in text
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return "too large" in text or "larger than max" in text
    return False


def _unavailable(e: BaseException) -> Unavailable:
    if isinstance(e, grpc.aio.AioRpcError):
        return Unavailable(f"etcd: {e.code().name}: {e.details()}")
    return Unavailable(f"etcd: {type(e).__name__}")


class Storage:
    def __init__(self, endpoints: Sequence[str], tls: EtcdTLS | None = None) -> None:
        self.endpoints = list(endpoints)
        self.target = grpc_target(endpoints)
        self.tls = tls
        uses_tls(endpoints)  # a bad scheme fails here, not at the first request
        self._channel: grpc.aio.Channel | None = None
        self._kv: Any = None
        self._lease: Any = None
        self._watch: Any = None
        self.open_watches = 0  # etcd watch streams open right now (for /metrics)
        # etcd_request_duration_seconds{operation,type}, when apiserver.metrics set it: the
        # type is the resource of a key's first segment after the prefix (key_offset long),
        # by its storage name (`minions` -> `nodes`)
        self.request_duration: Histogram | None = None
        self.key_offset = 0
        self.types: dict[str, str] = {}
        # what is_compacted learned: etcd compacted everything below _compacted_below; it
        # still held _kept[0] (and so every later revision) at monotonic time _kept[1]
        self._compacted_below = 0
        self._kept: tuple[int, float] | None = None

    async def start(self) -> None:
        self._channel = open_channel(self.endpoints, self.tls, _CHANNEL_OPTIONS)
        self._kv = rpc.KVStub(self._channel)
        self._lease = rpc.LeaseStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _call(self, method: Any, request: Any, operation: str = "", key: str = "",
                    ) -> Any:
        started = time.perf_counter()
        try:
            return await method(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.OUT_OF_RANGE:
                revision = int(getattr(request, "revision", 0) or 0)
                if "compacted" in (e.details() or ""):
                    raise Compacted(revision, 0) from e
                if "future" in (e.details() or ""):
                    raise FutureRevision(revision) from e
            if is_too_large(e.code(), e.details() or ""):
                raise TooLarge(e.details()) from e
            raise _unavailable(e) from e
        except TimeoutError as e:
            raise _unavailable(e) from e
        finally:
            if self.request_duration is not None and operation:
                segment = key[self.key_offset:].partition("/")[0]
                self.request_duration.observe(time.perf_counter() - started,
                                              (operation, self.types.get(segment, segment)))

    # -- reads -------------------------------------------------------------------------

    async def get(self, key: str) -> KV | None:
        resp = await self._call(self._kv.Range, rpc.RangeRequest(key=key.encode()), "get",
                                key)
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def list_prefix(self, prefix: str) -> tuple[list[KV], int]:
        """Every object under a prefix, and the etcd revision the read happened at."""
        raw = prefix.encode()
        resp = await self._call(
            self._kv.Range, rpc.RangeRequest(key=raw, range_end=prefix_range_end(raw)), "list",
            prefix)
        return [_kv(kv) for kv in resp.kvs], int(resp.header.revision)

    async def range(self, prefix: str, *, start: str | None = None, limit: int = 0,
                    revision: int = 0) -> RangeResult:
        """The keys under `prefix` from `start` (inclusive; default: the prefix itself), at
        most `limit` of them (0: all), as of `revision` (0: now). Costs O(limit) in etcd.

        Raises Compacted or FutureRevision for a revision etcd no longer or not yet has.
        """
        if revision > MAX_REVISION:  # no etcd gets there: later than any it has
            raise FutureRevision(revision)
        end = prefix_range_end(prefix.encode())
        resp = await self._call(self._kv.Range, rpc.RangeRequest(
            key=(start or prefix).encode(), range_end=end, limit=limit, revision=revision),
            "list", prefix)
        return RangeResult([_kv(kv) for kv in resp.kvs], int(resp.header.revision),
                           bool(resp.more), int(resp.count))

    async def revision(self) -> int:
        resp = await self._call(self._kv.Range, rpc.RangeRequest(key=b"\0", count_only=True))
        return int(resp.header.revision)

    # -- writes ------------------------------------------------------------------------

    async def _txn(self, compare: list[Any], success: list[Any], failure: list[Any],
                   operation: str, key: str) -> Any:
        request = rpc.TxnRequest(compare=compare, success=success, failure=failure)
        return await self._call(self._kv.Txn, request, operation, key)

    async def create(self, key: str, obj: dict[str, Any], *, lease: int = 0,
                     requires: str | None = None) -> int:
        """Store `obj` if `key` is absent (and `requires` present); return the new revision."""
        raw = key.encode()
        compare = [rpc.Compare(key=raw, target=rpc.Compare.CREATE,
                               result=rpc.Compare.EQUAL, create_revision=0)]
        failure = [rpc.RequestOp(request_range=rpc.RangeRequest(key=raw, count_only=True))]
        if requires is not None:
            compare.append(rpc.Compare(key=requires.encode(), target=rpc.Compare.CREATE,
                                       result=rpc.Compare.GREATER, create_revision=0))
            failure.append(rpc.RequestOp(
                request_range=rpc.RangeRequest(key=requires.encode(), count_only=True)))
        put = rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=encode(obj), lease=lease))
        resp = await self._txn(compare, [put], failure, "create", key)
        if resp.succeeded:
            return int(resp.header.revision)
        if requires is not None and resp.responses[1].response_range.count == 0:
            raise RequiredKeyMissing(requires)
        raise KeyExists(key)

    async def update(self, key: str, obj: dict[str, Any], *, expected_revision: int,
                     lease: int = 0) -> int:
        """Replace `key` if it is still at `expected_revision`; return the new revision."""
        raw = key.encode()
        compare = [rpc.Compare(key=raw, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL,
                               mod_revision=expected_revision)]
        put = rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=encode(obj), lease=lease))
        get = rpc.RequestOp(request_range=rpc.RangeRequest(key=raw))
        resp = await self._txn(compare, [put], [get], "update", key)
        if resp.succeeded:
            return int(resp.header.revision)
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            raise KeyNotFound(key)
        raise RevisionMismatch(_kv(kvs[0]))

    async def delete(self, key: str, *, expected_revision: int) -> tuple[KV, int]:
        """Delete `key` if it is still at `expected_revision`; return (last state, revision)."""
        raw = key.encode()
        compare = [rpc.Compare(key=raw, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL,
                               mod_revision=expected_revision)]
        delete = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=raw, prev_kv=True))
        get = rpc.RequestOp(request_range=rpc.RangeRequest(key=raw))
        resp = await self._txn(compare, [delete], [get], "delete", key)
        if resp.succeeded:
            prev = resp.responses[0].response_delete_range.prev_kvs
            if not prev:
                raise KeyNotFound(key)
            return _kv(prev[0]), int(resp.header.revision)
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            raise KeyNotFound(key)
        raise RevisionMismatch(_kv(kvs[0]))

    async def put(self, key: str, obj: dict[str, Any], *, lease: int = 0) -> int:
        """Store `obj` whatever is there (for keys only one writer owns); the new revision."""
        request = rpc.PutRequest(key=key.encode(), value=encode(obj), lease=lease)
        resp = await self._call(self._kv.Put, request, "update", key)
        return int(resp.header.revision)

    async def delete_key(self, key: str) -> None:
        """Remove `key` whatever its revision (for keys only one writer owns)."""
        await self._call(self._kv.DeleteRange, rpc.DeleteRangeRequest(key=key.encode()),
                         "delete", key)

    async def grant_lease(self, ttl: int) -> int:
        resp = await self._call(self._lease.LeaseGrant, rpc.LeaseGrantRequest(TTL=ttl))
        return int(resp.ID)

    async def keep_alive(self, lease: int) -> int:
        """Renew `lease` once (no write: etcd's revision stays); its new TTL, 0 when it is
        gone (expired or revoked)."""
        async def one() -> AsyncIterator[Any]:
            yield rpc.LeaseKeepAliveRequest(ID=lease)

        if self._lease is None:
            raise Unavailable("etcd: not connected")
        call = self._lease.LeaseKeepAlive(one())
        try:
            async with asyncio.timeout(5):
                resp = await call.read()
        except (grpc.aio.AioRpcError, TimeoutError) as e:
            raise _unavailable(e) from e
        finally:
            call.cancel()
        return 0 if resp is grpc.aio.EOF else int(resp.TTL)

    async def compact(self, revision: int) -> None:
        """Drop the history before `revision` (kube's compactor does not wait for the
        physical compaction, which may take longer than a call may)."""
        await self._call(self._kv.Compact, rpc.CompactionRequest(revision=revision))
        self._compacted_below = max(self._compacted_below, revision)
        self._kept = None

    async def swap_version(self, key: str, expected_version: int, value: bytes,
                           ) -> tuple[bool, int, int, bytes]:
        """Put `value` at `key` if the key's version (how many times it was written since
        it was created; 0: absent) is `expected_version`. Returns (whether it was put,
        the revision after the transaction, the key's version, the key's value)."""
        raw = key.encode()
        compare = [rpc.Compare(key=raw, target=rpc.Compare.VERSION, result=rpc.Compare.EQUAL,
                               version=expected_version)]
        put = rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=value))
        get = rpc.RequestOp(request_range=rpc.RangeRequest(key=raw))
        resp = await self._txn(compare, [put], [get], "update", key)
        revision = int(resp.header.revision)
        if resp.succeeded:
            return True, revision, expected_version + 1, value
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            return False, revision, 0, b""
        return False, revision, int(kvs[0].version), bytes(kvs[0].value)

    async def is_compacted(self, revision: int) -> bool:
        """Whether etcd has compacted the history at `revision` away. Asked of etcd at most
        once per COMPACTION_ANSWER_TTL for revisions at or after one it still held (every
        watch from a resourceVersion asks), and never again below a known compaction."""
        if revision < self._compacted_below:
            return True
        if revision > MAX_REVISION:  # later than any etcd has: not compacted, in the future
            return False
        now = asyncio.get_running_loop().time()
        if self._kept and revision >= self._kept[0] and now - self._kept[1] < \
                COMPACTION_ANSWER_TTL:
            return False
        try:
            await self._call(self._kv.Range, rpc.RangeRequest(key=b"\0", count_only=True,
                                                              revision=revision))
        except Compacted as e:
            # a range names only the revision it asked for: that one and all before it are gone
            self._compacted_below = max(self._compacted_below, e.compact_revision,
                                        e.requested + 1)
            return True
        except FutureRevision:
            return False
        self._kept = (revision, now)
        return False

    # -- watch -------------------------------------------------------------------------

    async def bump_revision(self, key: str) -> int:
        """Write `key` (an empty object); returns the revision of the write. The watch cache writes
        its marker key so to know when it has caught up (see apiserver/cacher.py)."""
        resp = await self._call(self._kv.Put, rpc.PutRequest(key=key.encode(), value=b"{}"))
        return int(resp.header.revision)

    def watch(self, prefix: str, start_revision: int, *, prev_kv: bool = True,
              from_key: str | None = None) -> EtcdWatch:
        """A watch of `prefix` from `start_revision`; `prev_kv=False` when the caller
        keeps the previous values itself (the watch cache), which spares etcd and us;
        `from_key` (below the prefix) widens the range down to that key."""
        if self._watch is None:
            raise Unavailable("storage not started")
        return EtcdWatch(self, self._watch, prefix, start_revision, prev_kv=prev_kv,
                         from_key=from_key)


class EtcdWatch:
    """One etcd watch stream over a key prefix, from a revision (inclusive).

    Iterate `batches()`; call `request_progress()` to get a `Progress` once every change
    up to etcd's current revision has been delivered; `close()` cancels the stream.
    """

    def __init__(self, storage: Storage, stub: Any, prefix: str, start_revision: int, *,
                 prev_kv: bool = True, from_key: str | None = None) -> None:
        self._storage = storage
        self._prev_kv = prev_kv
        self._stub = stub
        self._prefix = prefix.encode()
        self._from = (from_key or prefix).encode()
        self._start = start_revision
        self._requests: asyncio.Queue[Any] = asyncio.Queue()
        self._call: Any = None

    async def _request_stream(self) -> AsyncIterator[Any]:
        yield rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=self._from, range_end=prefix_range_end(self._prefix),
            start_revision=self._start, prev_kv=self._prev_kv,
        ))
        while True:
            request = await self._requests.get()
            if request is None:
                return
            yield request

    def request_progress(self) -> None:
        self._requests.put_nowait(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))

    async def batches(self) -> AsyncIterator[list[WatchEvent] | Progress]:
        self._call = self._stub.Watch(self._request_stream())
        self._storage.open_watches += 1
        try:
            async for resp in self._call:
                if resp.compact_revision:
                    raise Compacted(self._start - 1, int(resp.compact_revision))
                if resp.canceled:
                    raise Unavailable(f"etcd canceled the watch: {resp.cancel_reason}")
                if resp.created:
                    continue
                if not resp.events:
                    yield Progress(int(resp.header.revision))
                    continue
                yield [_watch_event(e) for e in resp.events]
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                return
            raise _unavailable(e) from e
        finally:
            self._storage.open_watches -= 1
            self.close()

    def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
        self._requests.put_nowait(None)


def _watch_event(e: Any) -> WatchEvent:
    prev = decode(e.prev_kv.value) if e.HasField("prev_kv") and e.prev_kv.value else None
    if e.type == rpc.Event.EventType.DELETE:
        return WatchEvent("DELETE", e.kv.key.decode(), None, prev, int(e.kv.mod_revision), False)
    return WatchEvent("PUT", e.kv.key.decode(), decode(e.kv.value), prev,
                      int(e.kv.mod_revision), e.kv.create_revision == e.kv.mod_revision)
