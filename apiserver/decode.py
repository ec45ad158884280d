"""Reading request bodies: one path, with limits, for every verb and body type.

Every body the apiserver reads (an object to create or replace, a patch, DeleteOptions,
a Binding) comes through here: its size is capped while it streams in, its media type
must be one the server reads (a body it cannot read is refused, never ignored), and the
parsed document must stay within a nesting depth and a node count, YAML aliases
included, before anything walks it. What fails is a Status error; nothing that comes
after decoding (validation, storage) ever sees a document it cannot afford to walk.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
import yaml
from starlette.requests import Request

from apiserver import protobuf
from common import errors

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's limit for a request body
# Far deeper than any object kube serves (a pod's affinity terms are ~12 levels), far
# shallower than Python's recursion limit, which every later walk relies on.
MAX_DEPTH = 100
# Values (scalars, lists, maps) in one document, counted as if YAML aliases were expanded:
# a 3 MiB JSON body of small objects holds a few hundred thousand.
MAX_NODES = 1_000_000
MAX_YAML_ALIASES = 1_000
# Parse JSON bodies at least this large (and all YAML) in a thread, so the event loop
# keeps serving others.
THREAD_PARSE_BYTES = 256 * 1024

JSON_TYPES = ("application/json", "")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
OBJECT_TYPES = JSON_TYPES + YAML_TYPES + (protobuf.MEDIA_TYPE,)
ACCEPTED_BODY_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def unsupported_media_type(accepted: str = ACCEPTED_BODY_TYPES) -> errors.UnsupportedMediaType:
    return errors.UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{accepted}")


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def too_large() -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(
        f"the server has received a request that is too large: limit is {MAX_BODY_BYTES}")


# -- documents ---------------------------------------------------------------------------


class _BoundedYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing documents that alias more than MAX_YAML_ALIASES times
    (a few hundred bytes of aliases can expand to billions of nodes) or nest deeper than
    MAX_DEPTH: it stops there, in the scanner too, which costs O(flow depth) per token and
    reads up to 1,024 characters ahead (100,000 nested `[` took seconds)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:  # noqa: N803 - PyYAML's
        if self.flow_level >= MAX_DEPTH:
            raise yaml.YAMLError(f"the document is nested too deeply: more than {MAX_DEPTH} "
                                 f"levels")
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise yaml.YAMLError(
                    f"document contains excessive aliasing (more than {MAX_YAML_ALIASES})")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.YAMLError(f"the document is nested too deeply: more than "
                                     f"{MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _load_yaml(raw: bytes) -> Any:
    """The document, refused before it is constructed when its aliases expand too far:
    composing is linear in the body, and so is measuring the composed graph."""
    loader = _BoundedYamlLoader(raw.decode("utf-8"))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_yaml_expansion(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def allowed_alias_ratio(decodes: int) -> float:
    """go-yaml's allowedAliasRatio (kube reads YAML with it): up to 99% of the values of a
    document of 400,000 may come from aliases, scaling down to 10% at 4,000,000."""
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * (decodes - low) / (high - low)


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def yaml_expansion(root: yaml.Node) -> tuple[int, int, int]:
    """(values once aliases are expanded, distinct values, depth) of a composed YAML
    graph, in one pass over its distinct nodes (each alias is a shared node). A node
    that contains itself (`&a [*a]`) expands without end: its depth is MAX_DEPTH + 1."""
    expanded: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            children = _yaml_children(node)
            expanded[key] = 1 + sum(expanded[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            continue
        if key in expanded:
            continue
        if key in on_path:
            return MAX_NODES + 1, len(expanded), MAX_DEPTH + 1
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _yaml_children(node)
                     if id(child) not in expanded)
    return expanded[id(root)], len(expanded), depth[id(root)]


def check_yaml_expansion(root: yaml.Node, what: str = "the request body") -> None:
    """BadRequest for a YAML graph whose aliases expand past the document limits, or that
    is mostly aliases, as go-yaml refuses it ("excessive aliasing": more than 100 aliased
    values, more than 1,000 in all, and more aliased than allowed_alias_ratio)."""
    total, distinct, levels = yaml_expansion(root)
    if levels > MAX_DEPTH:
        raise errors.BadRequest(f"error decoding YAML: {what} is nested too deeply: more "
                                f"than {MAX_DEPTH} levels")
    aliased = total - distinct
    if aliased > 100 and total > 1000 and aliased / total > allowed_alias_ratio(total):
        raise errors.BadRequest("error decoding YAML: document contains excessive aliasing")
    if total > MAX_NODES:
        raise errors.BadRequest(f"{what} has too many values: more than {MAX_NODES}")


def check_shape(document: Any, what: str = "the request body") -> None:
    """BadRequest when `document` nests deeper than MAX_DEPTH or holds more than MAX_NODES
    values. Iterative, and it stops at the first limit it crosses, so it costs at most
    MAX_NODES steps whatever the document (shared YAML aliases are counted each time)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise errors.BadRequest(f"{what} has too many values: more than {MAX_NODES}")
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise errors.BadRequest(f"{what} is nested too deeply: more than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def parse_document(raw: bytes, kind: str) -> Any:
    """A JSON or YAML document within the limits (BadRequest otherwise)."""
    if kind == "yaml":
        try:
            document = _load_yaml(raw)
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise errors.BadRequest(f"error decoding YAML: {e}") from None
        except RecursionError:
            raise errors.BadRequest(f"error decoding YAML: the document is nested too deeply: "
                                    f"more than {MAX_DEPTH} levels") from None
    else:
        document = _load_json(raw)
    check_shape(document)
    return document


def _load_json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # the stdlib's message is the one clients know; it also reads 65-bit integers
    try:
        return json.loads(raw)
    except RecursionError:
        raise errors.BadRequest(f"couldn't get version/kind; json parse error: the document is "
                                f"nested too deeply: more than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.BadRequest(f"couldn't get version/kind; json parse error: {e}") from None


async def parse_body(raw: bytes, kind: str) -> Any:
    """parse_document, in a worker thread for a large body or any YAML (PyYAML's pure
    Python reader costs a millisecond per few KiB: the loop keeps serving meanwhile)."""
    if kind == "yaml" or len(raw) >= THREAD_PARSE_BYTES:
        return await asyncio.to_thread(parse_document, raw, kind)
    return parse_document(raw, kind)


# -- objects -----------------------------------------------------------------------------


def check_type_meta(body: dict[str, Any], kind: str, api_version: str, *,
                    accept_api_versions: tuple[str, ...] = ()) -> None:
    """The checks kube's decoder makes of a body's kind and apiVersion, and that metadata
    is an object."""
    version = api_version.rpartition("/")[2]
    body_kind, body_version = body.get("kind"), body.get("apiVersion")
    if body_kind not in (None, "", kind):
        raise errors.BadRequest(f'{kind} in version "{version}" cannot be handled as a {kind}: '
                                f'kind "{body_kind}" does not match "{kind}"')
    if body_version not in (None, "", api_version, *accept_api_versions):
        raise errors.BadRequest(f"the API version in the data ({body_version}) does not match "
                                f"the expected API version ({api_version})")
    if not isinstance(body.get("metadata", {}), dict | None):
        raise errors.BadRequest(f'{kind} in version "{version}" cannot be handled as a {kind}: '
                                f"metadata must be an object")


async def decode_object(request: Request, kind: str, api_version: str, *,
                        accept_api_versions: tuple[str, ...] = ()) -> dict[str, Any]:
    """The request body as an object of `kind` (JSON, YAML, or protobuf)."""
    content_type = media_type(request)
    if content_type not in OBJECT_TYPES:
        raise unsupported_media_type()
    raw = await read_body(request)
    if not raw.strip():
        raise errors.BadRequest("the body of the request was empty")
    return await _parse_object(raw, content_type, kind, api_version, accept_api_versions)


async def decode_optional_object(request: Request, kind: str, api_version: str, *,
                                 accept_api_versions: tuple[str, ...] = (),
                                 ) -> dict[str, Any] | None:
    """A body that may be absent (DeleteOptions): None for none; a body that is there
    must be readable, whatever type it claims to be."""
    raw = await read_body(request)
    if not raw.strip():
        return None
    content_type = media_type(request)
    if content_type not in OBJECT_TYPES:
        raise unsupported_media_type()
    return await _parse_object(raw, content_type, kind, api_version, accept_api_versions)


async def _parse_object(raw: bytes, content_type: str, kind: str, api_version: str,
                        accept_api_versions: tuple[str, ...]) -> dict[str, Any]:
    if content_type == protobuf.MEDIA_TYPE:
        body: Any = protobuf.decode(raw, accepted=ACCEPTED_BODY_TYPES)
        check_shape(body)
    else:
        body = await parse_body(raw, "yaml" if content_type in YAML_TYPES else "json")
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body of the request is not a {kind} object")
    check_type_meta(body, kind, api_version, accept_api_versions=accept_api_versions)
    return body
