"""LIST: which resourceVersion a list is read at, where it is served from, and its pages.

kube-apiserver's semantics (API concepts, "Semantics for get and list"):

| request                                   | read at                 | served from             |
|-------------------------------------------|-------------------------|-------------------------|
| no resourceVersion                        | now (consistent)        | cache once it caught up |
|                                           |                         | to etcd's revision, else|
|                                           |                         | etcd                    |
| `resourceVersion=0`                       | any                     | cache                   |
| `resourceVersion=N` (NotOlderThan, or     | N or newer              | cache once it reached N |
| legacy without `limit`)                   |                         |                         |
| `resourceVersion=N&resourceVersionMatch=` | exactly N               | etcd at revision N      |
| `Exact`, or legacy with `limit`           |                         | (cache if unchanged and |
|                                           |                         | not compacted)          |
| `continue=TOKEN`                          | the first page's        | cache if the resource is|
|                                           | revision                | unchanged since, else   |
|                                           |                         | etcd at that revision   |

`limit` pages cost O(limit) wherever they are served: an etcd range with a limit from
the continue key, or the cache's sorted keys. A continue token is kube's: base64url of
`{"v":"meta.k8s.io/v1","rv":REVISION,"start":"KEY-AFTER-THE-LAST\\u0000"}` with the key
relative to the list's prefix. When etcd has compacted the token's revision, the answer
is 410 with a token that continues at the latest revision, as kube's.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from apiserver.cacher import CachedObject, Describe, ResourceCache, cached_object, is_selected
from apiserver.options import query_int
from apiserver.selectors import FieldSelector, LabelSelector
from apiserver.storage import Compacted, FutureRevision, Storage
from common import errors

EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"
CONTINUE_VERSION = "meta.k8s.io/v1"
# How long a LIST waits for the cache to catch up before it reads etcd (consistent reads)
# or answers 504 (a resourceVersion etcd has not reached): kube's blockTimeout.
CONSISTENT_WAIT = 1.0
NOT_OLDER_THAN_WAIT = 3.0
# With a selector, etcd is read in chunks of at least this many keys to fill a page.
MIN_CHUNK = 500

# Pages served, by where they came from ("cache", "etcd"), for /metrics.
SERVED: Counter[str] = Counter()

EXPIRED = "The resourceVersion for the provided list is too old."
CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent "
                    "list result. You can start a new list without the continue parameter.")
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list.")


@dataclass(frozen=True, slots=True)
class ListOptions:
    resource_version: str = ""  # "": consistent, "0": any, "N"
    match: str = ""  # "", "Exact", "NotOlderThan"
    limit: int = 0  # 0: everything
    continue_token: str = ""


def parse_list_options(query: Mapping[str, str]) -> ListOptions:
    """The ListOptions of a LIST's query, checked as kube's ValidateListOptions does."""
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    token = query.get("continue", "")
    limit = max(query_int(query, "limit") or 0, 0)  # kube treats a negative limit as none
    query_int(query, "timeoutSeconds")  # unused by a LIST, but it must be an integer
    causes = []
    if match:
        if not rv:
            causes.append(_forbidden("resourceVersionMatch is forbidden unless "
                                     "resourceVersion is provided"))
        if token:
            causes.append(_forbidden("resourceVersionMatch is forbidden when continue is "
                                     "provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append({"reason": "FieldValueNotSupported", "field": "resourceVersionMatch",
                           "message": f'Unsupported value: "{match}": supported values: '
                                      f'"Exact", "NotOlderThan", ""'})
        if match == EXACT and rv == "0":
            causes.append(_forbidden('resourceVersionMatch "exact" is forbidden for '
                                     'resourceVersion "0"'))
    if "sendInitialEvents" in query:
        causes.append({"reason": "FieldValueForbidden", "field": "sendInitialEvents",
                       "message": "Forbidden: sendInitialEvents is forbidden for list"})
    if causes:
        raise invalid_list_options(causes)
    if token and rv:
        raise errors.BadRequest("specifying resource version is not allowed when using continue")
    if rv and rv != "0":
        parse_revision(rv)
    return ListOptions(rv, match, limit, token)


def check_watch_options(query: Mapping[str, str], *, send_initial_events: bool,
                        bookmarks: bool) -> None:
    """What kube's validateWatchOptions refuses of the options kubelite reads."""
    causes = []
    match = query.get("resourceVersionMatch", "")
    if match:
        if not send_initial_events:
            causes.append(_forbidden("resourceVersionMatch is forbidden for watch unless "
                                     "sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            causes.append({"reason": "FieldValueNotSupported", "field": "resourceVersionMatch",
                           "message": f'Unsupported value: "{match}": supported values: '
                                      f'"NotOlderThan"'})
    if send_initial_events and not bookmarks:
        causes.append({"reason": "FieldValueForbidden", "field": "allowWatchBookmarks",
                       "message": "Forbidden: sendInitialEvents requires setting "
                                  "allowWatchBookmarks to true"})
    if causes:
        raise invalid_list_options(causes)
    query_int(query, "limit")  # unused by a watch, but decoded (an int64) as kube decodes it
    rv = query.get("resourceVersion", "")
    if rv:
        parse_revision(rv)


def invalid_list_options(causes: list[dict[str, str]]) -> errors.Invalid:
    err = errors.invalid("ListOptions.meta.k8s.io", "", causes, group="meta.k8s.io")
    err.details["kind"] = "ListOptions"
    return err


def _forbidden(message: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
            "message": f"Forbidden: {message}"}


MAX_RESOURCE_VERSION = 2**64 - 1  # kube parses one as a uint64 (strconv.ParseUint)


def parse_revision(text: str) -> int:
    try:
        revision = int(text)
    except ValueError:
        revision = -1
    if not 0 <= revision <= MAX_RESOURCE_VERSION or not text.isdigit():
        raise errors.BadRequest(f'invalid resource version "{text}"') from None
    return revision


def encode_continue(key: str, key_prefix: str, revision: int) -> str:
    """The token of the page that starts at `key` (storage.EncodeContinue)."""
    start = key.removeprefix(key_prefix)
    token = json.dumps({"v": CONTINUE_VERSION, "rv": revision, "start": start},
                       separators=(",", ":"))
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def decode_continue(token: str, key_prefix: str) -> tuple[str, int]:
    """(the key to start at, the revision to read at; -1: the latest) of a continue token.

    The start key is cleaned as kube does, so a token cannot range outside the prefix.
    """
    def invalid(detail: str) -> errors.BadRequest:
        return errors.BadRequest(f"invalid continue token: continue key is not valid: {detail}")

    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise invalid(str(e)) from None
    if not isinstance(decoded, dict) or decoded.get("v") != CONTINUE_VERSION:
        version = decoded.get("v") if isinstance(decoded, dict) else None
        raise invalid(f"server does not recognize this encoded version {version}")
    revision, start = decoded.get("rv"), decoded.get("start")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision == 0:
        raise invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise invalid("encoded start key empty (version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    # path.Clean keeps the trailing NUL of a "next key"; a changed key climbed out
    if _clean(key) != key:
        raise invalid(start)
    return key_prefix + key[1:], revision


def _clean(path: str) -> str:
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


@dataclass(frozen=True, slots=True)
class ListPage:
    items: list[CachedObject]
    revision: int
    continue_token: str = ""
    remaining: int | None = None  # remainingItemCount: only without selectors


@dataclass(frozen=True, slots=True)
class ListQuery:
    """One LIST: its prefix (a namespace or the whole resource), selectors, options."""

    key_prefix: str
    options: ListOptions
    labels: LabelSelector | None = None
    fields: FieldSelector | None = None
    # The one key a `metadata.name=` field selector leaves (within one namespace).
    exact_key: str | None = None

    @property
    def selects(self) -> bool:
        return bool(self.labels is not None and self.labels.requirements) or bool(
            self.fields is not None and self.fields.requirements)

    def selected(self, item: CachedObject) -> bool:
        return is_selected(item, self.labels, self.fields)


def too_large_resource_version(requested: int, current: int) -> errors.Timeout:
    """kube's NewTooLargeResourceVersionError."""
    return errors.Timeout(
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details={"causes": [{"reason": "ResourceVersionTooLarge",
                             "message": "Too large resource version"}],
                 "retryAfterSeconds": 1})


async def list_page(storage: Storage, cache: ResourceCache, query: ListQuery) -> ListPage:
    """One page of a LIST, from the cache when it can answer as etcd would."""
    options, describe = query.options, cache.describe
    if options.continue_token:
        start, revision = decode_continue(options.continue_token, query.key_prefix)
        if revision < 0:  # continue at the latest revision (after a 410)
            return await _latest(storage, cache, query, start=start)
        if cache.unchanged_between(revision) and not await storage.is_compacted(revision):
            return _from_cache(cache, query, start=start, revision=revision)
        return await _from_etcd(storage, query, describe, start=start, revision=revision,
                                paging=True, token=options.continue_token)
    rv = options.resource_version
    if options.match == EXACT or (not options.match and options.limit and rv not in ("", "0")):
        revision = parse_revision(rv)
        if cache.unchanged_between(revision) and not await storage.is_compacted(revision):
            return _from_cache(cache, query, start=None, revision=revision)
        return await _from_etcd(storage, query, describe, start=None, revision=revision,
                                paging=False)
    if rv == "":
        return await _latest(storage, cache, query, start=None)
    if rv == "0":
        if cache.ready:
            return _from_cache(cache, query, start=None, revision=cache.revision)
        return await _from_etcd(storage, query, describe, start=None, revision=0, paging=False)
    wanted = parse_revision(rv)
    if await cache.wait_fresh(wanted, NOT_OLDER_THAN_WAIT):
        return _from_cache(cache, query, start=None, revision=cache.revision)
    page = await _from_etcd(storage, query, describe, start=None, revision=0, paging=False)
    if page.revision < wanted:
        raise too_large_resource_version(wanted, page.revision)
    return page


async def _latest(storage: Storage, cache: ResourceCache, query: ListQuery, *,
                  start: str | None) -> ListPage:
    """A consistent read: etcd's current revision, from the cache once it has caught up."""
    current = await storage.revision()
    if await cache.wait_fresh(current, CONSISTENT_WAIT):
        return _from_cache(cache, query, start=start, revision=cache.revision)
    return await _from_etcd(storage, query, cache.describe, start=start, revision=0,
                            paging=False)


def _from_cache(cache: ResourceCache, query: ListQuery, *, start: str | None,
                revision: int) -> ListPage:
    SERVED["cache"] += 1
    if query.exact_key is not None and start is None:
        item = cache.get(query.exact_key)  # a lookup, not a scan
        items = [item] if item is not None and query.selected(item) else []
        return ListPage(items, revision)
    page = cache.page(query.key_prefix, start=start, limit=query.options.limit,
                      selected=query.selected if query.selects else None)
    if not (query.options.limit and page.more and page.items):
        return ListPage(page.items, revision)
    token = encode_continue(page.items[-1].key + "\0", query.key_prefix, revision)
    return ListPage(page.items, revision, token, None if query.selects else page.remaining)


async def _from_etcd(storage: Storage, query: ListQuery, describe: Describe, *,
                     start: str | None, revision: int, paging: bool,
                     token: str = "") -> ListPage:
    """A page read from etcd at `revision` (0: now), in chunks until it is full."""
    SERVED["etcd"] += 1
    limit = query.options.limit
    prefix = query.key_prefix
    if query.exact_key is not None and start is None:
        prefix = query.exact_key  # the name's key and longer ones, which the selector drops
    items: list[CachedObject] = []
    count = None
    while True:
        chunk = max(limit - len(items), MIN_CHUNK) if (limit and query.selects) else limit
        try:
            result = await storage.range(prefix, start=start, limit=chunk, revision=revision)
        except Compacted:
            raise _expired(query, token, start) if paging else errors.Gone(EXPIRED) from None
        except FutureRevision:
            current = await storage.revision()
            raise too_large_resource_version(revision, current) from None
        revision = revision or result.revision
        count = result.count if count is None else count
        for kv in result.kvs:
            item = cached_object(kv, describe)
            if not query.selects or query.selected(item):
                items.append(item)
        last = result.kvs[-1].key if result.kvs else None
        full = bool(limit) and len(items) >= limit
        if not result.more or last is None or full or not limit:
            break
        start = last + "\0"
    more = bool(limit) and (len(items) > limit or result.more)
    if limit:
        items = items[:limit]
    if not (more and items):
        return ListPage(items, revision)
    next_token = encode_continue(items[-1].key + "\0", query.key_prefix, revision)
    remaining = None if query.selects else max(count - len(items), 0)
    return ListPage(items, revision, next_token, remaining)


def _expired(query: ListQuery, token: str, start: str | None) -> errors.Gone:
    """The 410 for a continue token whose revision is compacted: it carries a token that
    continues at the latest revision (handleCompactedErrorForPaging)."""
    if not token or start is None:
        return errors.Gone(CONTINUE_EXPIRED)
    err = errors.Gone(INCONSISTENT_CONTINUE)
    err.list_meta = {"continue": encode_continue(start, query.key_prefix, -1)}
    return err
