"""`GET /openapi/v2`: the one Swagger 2.0 document of every group version, as kube serves it.

It is made from the OpenAPI v3 documents (apiserver/openapi.py), so both describe the same
models under the same names (`io.k8s.api.core.v1.Pod`): definitions instead of
components.schemas, `$ref`s to `#/definitions/...` (kube-openapi's v2 puts a reference
straight in a property, without v3's `allOf` wrapper), parameters with their type inline,
a `body` parameter instead of a requestBody, and consumes/produces/schemes on every
operation. The x-kubernetes-action and x-kubernetes-group-version-kind extensions stay.

Two encodings: JSON, and the protobuf of gnostic's openapi_v2.Document, which is the only
one client-go's discovery client reads (`OpenAPISchema()`: kubectl explain
--output plaintext-openapiv2, older kubectls' explain and validation). The encoder below
writes the part of OpenAPIv2.proto this document uses; vendor extensions are YAML text
(JSON is YAML) inside an `Any`, as gnostic stores them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from fastapi import APIRouter, Request, Response

from apiserver.discovery import GIT_VERSION, JSON
from apiserver.openapi import META_SCHEMA_PREFIX, openapi_v3_document, served_group_versions
from common import errors

# What client-go asks for (the older, "@" name, which Go's mime parser refuses as a
# Content-Type), and the name kube answers both with.
PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
PROTOBUF_TYPES = (PROTOBUF, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
V3_REF, V2_REF = "#/components/schemas/", "#/definitions/"
PATCH_SCHEMA = META_SCHEMA_PREFIX + "Patch"
PRODUCES = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
WATCH_PRODUCES = [*PRODUCES, "application/json;stream=watch",
                  "application/vnd.kubernetes.protobuf;stream=watch"]
METHODS = ("get", "put", "post", "delete", "options", "head", "patch")


# --- v3 -> Swagger 2.0 --------------------------------------------------------------------------

def v2_schema(node: Any) -> Any:
    """A v3 schema in Swagger 2.0's terms: `#/definitions/` references, no `allOf` wrapper
    around a lone reference."""
    if isinstance(node, list):
        return [v2_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and set(all_of[0]) == {"$ref"}:
        rest = {key: value for key, value in node.items() if key != "allOf"}
        return v2_schema({**rest, "$ref": all_of[0]["$ref"]})
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            out[key] = str(value).replace(V3_REF, V2_REF)
        elif key == "properties":
            out[key] = {name: v2_schema(prop) for name, prop in value.items()}
        else:
            out[key] = v2_schema(value)
    return out


def v2_parameter(param: dict[str, Any]) -> dict[str, Any]:
    """A query or path parameter: its schema's type inline."""
    out: dict[str, Any] = {key: param[key] for key in ("description", "in", "name", "required")
                           if key in param}
    out.update(param.get("schema") or {})
    return out


def v2_operation(method: str, operation: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": operation.get("description", ""),
                           "consumes": ["*/*"], "produces": PRODUCES, "schemes": ["https"],
                           "tags": operation["tags"], "operationId": operation["operationId"]}
    params = [v2_parameter(p) for p in operation.get("parameters", [])]
    body = operation.get("requestBody")
    if body is not None:
        content = body["content"]
        if method == "patch":
            # kube's swagger lists the apply patch last
            out["consumes"] = sorted(content, key=lambda t: t == "application/apply-patch+yaml")
            schema: dict[str, Any] = {"$ref": V2_REF + PATCH_SCHEMA}
        else:
            schema = v2_schema(content[JSON]["schema"])
        params.insert(0, {"name": "body", "in": "body", "required": True, "schema": schema})
    if operation.get("x-kubernetes-action") == "list":
        out["produces"] = WATCH_PRODUCES
    out["parameters"] = params
    out["responses"] = {
        code: {"description": response["description"],
               "schema": v2_schema(response["content"][JSON]["schema"])}
        for code, response in operation["responses"].items()}
    out.update({key: value for key, value in operation.items() if key.startswith("x-")})
    return out


def v2_path_item(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {method: v2_operation(method, item[method])
                           for method in METHODS if method in item}
    if "parameters" in item:
        out["parameters"] = [v2_parameter(p) for p in item["parameters"]]
    return out


PATCH_DEFINITION = {
    "description": "Patch is provided to give a concrete name and type to the Kubernetes "
                   "PATCH request body.",
    "type": "object",
}


@cache
def swagger_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {PATCH_SCHEMA: PATCH_DEFINITION}
    for gv in served_group_versions():
        document = json.loads(openapi_v3_document(gv))
        for path, item in document["paths"].items():
            paths[path] = v2_path_item(item)
        for name, schema in document["components"]["schemas"].items():
            definitions[name] = v2_schema(schema)
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": GIT_VERSION},
            "paths": dict(sorted(paths.items())),
            "definitions": dict(sorted(definitions.items()))}


@cache
def swagger_json() -> bytes:
    return json.dumps(swagger_document(), separators=(",", ":")).encode()


@cache
def swagger_protobuf() -> bytes:
    return encode_document(swagger_document())


@cache
def swagger_etag() -> str:
    return '"' + hashlib.sha512(swagger_json()).hexdigest().upper() + '"'


# --- protobuf (gnostic's OpenAPIv2.proto) --------------------------------------------------------

def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as two's complement, ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _message(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _message(number, text.encode()) if text else b""


def _strings(number: int, texts: Iterable[str]) -> bytes:
    return b"".join(_message(number, text.encode()) for text in texts)


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _double(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:
    """openapi_v2.Any: the value as YAML text (field 2)."""
    return _string(2, json.dumps(value, separators=(",", ":")))


def _named(number: int, name: str, value: bytes) -> bytes:
    """A Named* message (name = 1, value = 2) as field `number` of its parent."""
    return _message(number, _string(1, name) + _message(2, value))


def _extensions(number: int, node: dict[str, Any]) -> bytes:
    return b"".join(_named(number, key, _any(value)) for key, value in node.items()
                    if key.startswith("x-"))


def _additional_properties(value: Any) -> bytes:
    """AdditionalPropertiesItem: a schema (1) or a boolean (2, written even when false: it
    is a oneof)."""
    if isinstance(value, dict):
        return _message(1, encode_schema(value))
    return _varint(2 << 3) + (b"\x01" if value else b"\x00")


# Schema fields: JSON key -> writer of that field.
SchemaWriter = Callable[[Any], bytes]
SCHEMA_FIELDS: dict[str, SchemaWriter] = {
    "$ref": lambda v: _string(1, v),
    "format": lambda v: _string(2, v),
    "title": lambda v: _string(3, v),
    "description": lambda v: _string(4, v),
    "default": lambda v: _message(5, _any(v)),
    "multipleOf": lambda v: _double(6, v),
    "maximum": lambda v: _double(7, v),
    "exclusiveMaximum": lambda v: _bool(8, v),
    "minimum": lambda v: _double(9, v),
    "exclusiveMinimum": lambda v: _bool(10, v),
    "maxLength": lambda v: _int(11, v),
    "minLength": lambda v: _int(12, v),
    "pattern": lambda v: _string(13, v),
    "maxItems": lambda v: _int(14, v),
    "minItems": lambda v: _int(15, v),
    "uniqueItems": lambda v: _bool(16, v),
    "maxProperties": lambda v: _int(17, v),
    "minProperties": lambda v: _int(18, v),
    "required": lambda v: _strings(19, v),
    "enum": lambda v: b"".join(_message(20, _any(item)) for item in v),
    "additionalProperties": lambda v: _message(21, _additional_properties(v)),
    "type": lambda v: _message(22, _strings(1, [v] if isinstance(v, str) else v)),
    "items": lambda v: _message(23, b"".join(_message(1, encode_schema(item))
                                             for item in (v if isinstance(v, list) else [v]))),
    "allOf": lambda v: b"".join(_message(24, encode_schema(item)) for item in v),
    "properties": lambda v: _message(25, b"".join(_named(1, name, encode_schema(prop))
                                                  for name, prop in v.items())),
    "readOnly": lambda v: _bool(27, v),
    "example": lambda v: _message(30, _any(v)),
}


def encode_schema(schema: dict[str, Any]) -> bytes:
    out = b"".join(SCHEMA_FIELDS[key](value) for key, value in schema.items()
                   if key in SCHEMA_FIELDS)
    return out + _extensions(31, schema)


def encode_parameter(param: dict[str, Any]) -> bytes:
    """A ParametersItem: a Parameter, either a BodyParameter or a query/path one."""
    if param["in"] == "body":
        body = (_string(1, param.get("description", "")) + _string(2, param["name"])
                + _string(3, "body") + _bool(4, param.get("required", False))
                + _message(5, encode_schema(param["schema"])))
        return _message(1, _message(1, body))
    common = (_bool(1, param.get("required", False)) + _string(2, param["in"])
              + _string(3, param.get("description", "")) + _string(4, param["name"]))
    if param["in"] == "path":  # PathParameterSubSchema: type 5, format 6, uniqueItems 19
        sub = 4
        rest = (_string(5, param.get("type", "")) + _string(6, param.get("format", ""))
                + _bool(19, param.get("uniqueItems", False)))
    else:  # QueryParameterSubSchema: type 6, format 7, uniqueItems 20
        sub = 3
        rest = (_string(6, param.get("type", "")) + _string(7, param.get("format", ""))
                + _bool(20, param.get("uniqueItems", False)))
    return _message(1, _message(2, _message(sub, common + rest)))


def encode_operation(operation: dict[str, Any]) -> bytes:
    responses = b"".join(
        _named(1, code, _message(1, _string(1, response["description"])
                                 + _message(2, _message(1, encode_schema(response["schema"])))))
        for code, response in operation["responses"].items())
    return (_strings(1, operation["tags"]) + _string(3, operation.get("description", ""))
            + _string(5, operation["operationId"]) + _strings(6, operation["produces"])
            + _strings(7, operation["consumes"])
            + b"".join(_message(8, encode_parameter(p)) for p in operation["parameters"])
            + _message(9, responses) + _strings(10, operation["schemes"])
            + _extensions(13, operation))


def encode_path_item(item: dict[str, Any]) -> bytes:
    out = b"".join(_message(number, encode_operation(item[method]))
                   for number, method in enumerate(METHODS, start=2) if method in item)
    return out + b"".join(_message(9, encode_parameter(p)) for p in item.get("parameters", []))


def encode_document(document: dict[str, Any]) -> bytes:
    info = document["info"]
    paths = b"".join(_named(2, path, encode_path_item(item))
                     for path, item in document["paths"].items())
    definitions = b"".join(_named(1, name, encode_schema(schema))
                           for name, schema in document["definitions"].items())
    return (_string(1, document["swagger"])
            + _message(2, _string(1, info["title"]) + _string(2, info["version"]))
            + _message(8, paths) + _message(9, definitions))


# --- the route ------------------------------------------------------------------------------------

def negotiate(accept: str | None) -> str | None:
    """JSON or the protobuf, whichever the client lists first; None when it takes neither."""
    if not accept:
        return JSON
    for clause in accept.split(","):
        media_type = clause.split(";")[0].strip().lower()
        if media_type in PROTOBUF_TYPES:
            return PROTOBUF
        if media_type in (JSON, "application/*", "*/*"):
            return JSON
    return None


router = APIRouter()


@router.get("/openapi/v2")
async def get_openapi_v2(request: Request) -> Response:
    media_type = negotiate(request.headers.get("accept"))
    if media_type is None:
        error = errors.NotAcceptable(f"only the following media types are accepted: {JSON}, "
                                     f"{PROTOBUF}", details={})
        return Response(json.dumps(error.status()), status_code=error.code, media_type=JSON)
    headers = {"Etag": swagger_etag(), "Vary": "Accept"}
    if swagger_etag() in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    body = swagger_protobuf() if media_type == PROTOBUF else swagger_json()
    return Response(body, media_type=media_type, headers=headers)
