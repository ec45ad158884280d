"""The OpenAPI v3 documents kube-openapi would write for what kubelite serves.

`GET /openapi/v3` is the index, `GET /openapi/v3/api/v1` and
`GET /openapi/v3/apis/{group}/{version}` one document per group version: the paths of every
resource and the schemas of its kind, from the pydantic models of common.models. kubectl
learns from the PATCH operations' `fieldValidation` parameter that the server validates
fields itself (`kubectl create` then sends `?fieldValidation=Strict` instead of validating
against a downloaded schema). `/openapi/v2`, the one Swagger 2.0 document older clients
read, is made from these documents (apiserver/openapi_v2.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic.json_schema import models_json_schema

from apiserver.discovery import (
    GIT_VERSION,
    JSON,
    STATUS_VERBS,
    ResourceInfo,
    json_response,
    not_found_response,
    response_kind,
    served_resources,
)
from apiserver.resources import SERVED, Resource, groups
from common.models import DeleteOptions as DeleteOptionsModel
from common.models import KubeModel, Scale


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
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_CONTENT_TYPES = (APPLY_PATCH, "application/json-patch+json",
                       "application/merge-patch+json")
FORCE = _query("force", "Force is going to \"force\" Apply requests. It means user will "
               "re-acquire conflicting fields owned by other people. Force flag must be unset "
               "for non-apply patch requests.", "boolean")
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
    return {"$ref": f"#/components/schemas/{schema_name(gv, kind)}"}


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
        "x-kubernetes-group-version-kind": response_kind(info.kind, gv.group, gv.version),
    }
    return operation


def _patch(gv: GroupVersion, info: ResourceInfo, kind: str, sub: str = "") -> dict[str, Any]:
    operation = _operation(gv, "patch", info, kind, "patch",
                           [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE], sub)
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
    if info.verbs == ("create",):  # a review: POST on the collection only
        return {collection: {
            "post": {**_operation(gv, "create", info, info.kind, "post", write_params),
                     "requestBody": _json_body(gv, info.kind)},
            "parameters": _path_params(info, named=False)}}
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
    if "deletecollection" in info.verbs:
        delete_collection = _operation(gv, "delete", info, list_kind, "deletecollection",
                                       DELETE_PARAMS + LIST_PARAMS)
        scope = "Namespaced" if info.namespaced else ""
        delete_collection["operationId"] = (f"delete{gv.operation_prefix}Collection{scope}"
                                            f"{info.kind}")
        paths[collection]["delete"] = delete_collection
    for sub in info.subresources:
        # status, ephemeralcontainers, scale (an autoscaling/v1 Scale): get, replace, patch
        if sub.verbs == STATUS_VERBS:
            paths[f"{item}/{sub.name}"] = {
                "get": _operation(gv, "read", info, sub.kind, "get", [], sub.name),
                "put": {**_operation(gv, "replace", info, sub.kind, "put", write_params,
                                     sub.name),
                        "requestBody": _json_body(gv, sub.kind)},
                "patch": _patch(gv, info, sub.kind, sub.name),
                "parameters": _path_params(info, named=True),
            }
        elif sub.name in CONNECT_PARAMS:  # exec, attach, portforward: GET and POST
            paths[f"{item}/{sub.name}"] = _connect_path(gv, info, sub.name, sub.kind)
        elif sub.name == "eviction":
            paths[f"{item}/{sub.name}"] = eviction_path(gv, info)
    return paths


# kube's PodExecOptions, PodAttachOptions and PodPortForwardOptions, as query parameters
CONNECT_PARAMS: dict[str, list[dict[str, Any]]] = {
    "exec": [
        {**_query("command", "Command is the remote command to execute. argv array. Not "
                  "executed within a shell."), "schema": {"type": "array",
                                                           "items": {"type": "string"}}},
        _query("container", "Container in which to execute the command. Defaults to only "
               "container if there is only one container in the pod."),
        _query("stderr", "Redirect the standard error stream of the pod for this call.",
               "boolean"),
        _query("stdin", "Redirect the standard input stream of the pod for this call. "
               "Defaults to false.", "boolean"),
        _query("stdout", "Redirect the standard output stream of the pod for this call.",
               "boolean"),
        _query("tty", "TTY if true indicates that a tty will be allocated for the exec "
               "call. Defaults to false.", "boolean")],
    "attach": [
        _query("container", "The container in which to execute the command. Defaults to "
               "only container if there is only one container in the pod."),
        _query("stderr", "Stderr if true indicates that stderr is to be redirected for the "
               "attach call. Defaults to true.", "boolean"),
        _query("stdin", "Stdin if true, redirects the standard input stream of the pod for "
               "this call. Defaults to false.", "boolean"),
        _query("stdout", "Stdout if true indicates that stdout is to be redirected for the "
               "attach call. Defaults to true.", "boolean"),
        _query("tty", "TTY if true indicates that a tty will be allocated for the attach "
               "call. This is passed through the container runtime so the tty is allocated "
               "on the worker node by the container runtime. Defaults to false.", "boolean")],
    "portforward": [
        {**_query("ports", "List of ports to forward Required when using WebSockets"),
         "schema": {"type": "integer", "uniqueItems": True}}],
}


def _connect_path(gv: GroupVersion, info: ResourceInfo, sub: str, kind: str) -> dict[str, Any]:
    """A connect sub-resource's path item, as kube-openapi describes one: GET and POST,
    the options as query parameters, a string answer (the upgraded stream)."""
    def operation(method: str) -> dict[str, Any]:
        return {"tags": [gv.tag],
                "operationId": f"connect{gv.operation_prefix}{method}Namespaced{info.kind}"
                               f"{sub.capitalize()}",
                "parameters": CONNECT_PARAMS[sub],
                "responses": {"200": {"description": "OK",
                                      "content": {JSON: {"schema": {"type": "string"}}}}},
                "x-kubernetes-action": "connect",
                "x-kubernetes-group-version-kind": response_kind(kind, gv.group, gv.version)}

    params = [p for p in _path_params(info, named=True) if p is not PRETTY]
    return {"get": operation("Get"), "post": operation("Post"), "parameters": params}


# --- pods/eviction (policy/v1 Eviction, in the core group's document as kube has it) ---------

EVICTION_SCHEMA = "io.k8s.api.policy.v1.Eviction"
EVICTION_REF = {"$ref": f"#/components/schemas/{EVICTION_SCHEMA}"}


def eviction_path(gv: GroupVersion, info: ResourceInfo) -> dict[str, Any]:
    """`POST .../pods/{name}/eviction`: createCoreV1NamespacedPodEviction, an Eviction in
    and out, the operation's kind policy/v1 Eviction."""
    operation = _operation(gv, "create", info, "Eviction", "post",
                           [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION], "eviction")
    content = {JSON: {"schema": EVICTION_REF}}
    operation["description"] = f"create eviction of a {info.kind}"
    operation["requestBody"] = {"content": content, "required": True}
    operation["responses"] = {code: {"description": text, "content": content}
                              for code, text in (("200", "OK"), ("201", "Created"),
                                                 ("202", "Accepted"))}
    operation["x-kubernetes-group-version-kind"] = response_kind("Eviction", "policy", "v1")
    params = [_path_param("name", "name of the Eviction")]
    if info.namespaced:
        params.append(_path_param("namespace", "object name and auth scope, such as for "
                                  "teams and projects"))
    return {"post": operation, "parameters": [*params, PRETTY]}


def eviction_schema() -> dict[str, Any]:
    meta = f"#/components/schemas/{META_SCHEMA_PREFIX}"
    return {
        "description": "Eviction evicts a pod from its node subject to certain policies and "
                       "safety constraints. This is a subresource of Pod.  A request to "
                       "cause such an eviction is created by POSTing to .../pods/<pod "
                       "name>/evictions.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "deleteOptions": {"allOf": [{"$ref": f"{meta}DeleteOptions"}],
                              "description": "DeleteOptions may be provided"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": f"{meta}ObjectMeta"}], "default": {},
                         "description": "ObjectMeta describes the pod that is being "
                                        "evicted."},
        },
        "x-kubernetes-group-version-kind": [response_kind("Eviction", "policy", "v1")],
    }


def has_eviction(gv: GroupVersion) -> bool:
    return any(sub.name == "eviction" for info in served_resources(gv.group, gv.version)
               for sub in info.subresources)


META_DESCRIPTIONS = {
    "ObjectMeta": "ObjectMeta is metadata that all persisted resources must have, which "
                  "includes all objects users must create.",
}
META_TYPES = ("ObjectMeta", "OwnerReference", "DeleteOptions", "Preconditions")


def served(gv: GroupVersion) -> list[Resource]:
    """The resources of one group version, by name."""
    return sorted((resource for resource in SERVED
                   if (resource.group, resource.version) == (gv.group, gv.version)),
                  key=lambda resource: resource.plural)


def descriptions(gv: GroupVersion) -> dict[str, str]:
    """Model name -> the description kube-openapi gives it, for one group version."""
    found = dict(META_DESCRIPTIONS)
    for resource in served(gv):
        found.update(resource.descriptions)
    return found


# Types of the core group that other groups' kinds embed (events.k8s.io/v1's `regarding`):
# kube names them after the Go package they are declared in, whoever uses them.
CORE_TYPES = ("ObjectReference", "EventSource")
CORE_SCHEMA_PREFIX = "io.k8s.api.core.v1."


# The scale subresource's kind: kube names it after autoscaling/v1 in apps/v1's document.
AUTOSCALING_TYPES = ("Scale", "ScaleSpec", "ScaleStatus")
AUTOSCALING_SCHEMA_PREFIX = "io.k8s.api.autoscaling.v1."


def schema_name(gv: GroupVersion, model: str) -> str:
    if model in META_TYPES:
        return META_SCHEMA_PREFIX + model
    if model in AUTOSCALING_TYPES:
        return AUTOSCALING_SCHEMA_PREFIX + model
    return (CORE_SCHEMA_PREFIX if model in CORE_TYPES else gv.schema_prefix) + model


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
        "x-kubernetes-group-version-kind": [response_kind(f"{kind}List", gv.group,
                                                           gv.version)],
    }


def schemas(gv: GroupVersion) -> dict[str, Any]:
    """components.schemas: the kinds of one group version, as common.models describes them."""
    served_models: list[type[KubeModel]] = [resource.model for resource in served(gv)]
    scaled = any("scale" in resource.subresources for resource in served(gv))
    if scaled:
        served_models.append(Scale)
    evictions = has_eviction(gv)
    if evictions:  # an Eviction's deleteOptions
        served_models.append(DeleteOptionsModel)
    known = descriptions(gv)
    _, document = models_json_schema([(model, "validation") for model in served_models],
                                     by_alias=True, ref_template="#/components/schemas/{model}")
    result: dict[str, Any] = {}
    for model, schema in document["$defs"].items():
        converted = kube_schema(schema, gv)
        if model in known:
            converted["description"] = known[model]
        result[schema_name(gv, model)] = converted
    for resource in served(gv):
        kind = resource.model.__name__
        result[schema_name(gv, kind)]["x-kubernetes-group-version-kind"] = [
            response_kind(kind, gv.group, gv.version)]
        if resource.review is None:  # reviews are never listed
            result[schema_name(gv, f"{kind}List")] = _list_schema(gv, kind)
    if scaled:
        result[schema_name(gv, "Scale")]["x-kubernetes-group-version-kind"] = [
            response_kind("Scale", "autoscaling", "v1")]
    if evictions:
        result[EVICTION_SCHEMA] = eviction_schema()
    return result


@cache
def openapi_v3_document(gv: GroupVersion) -> bytes:
    paths: dict[str, Any] = {}
    for info in served_resources(gv.group, gv.version):
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


@router.get("/openapi/v3")
async def get_openapi_v3() -> Response:
    return json_response(openapi_v3_index())


def _openapi_v3(request: Request, gv: GroupVersion) -> Response:
    if gv not in served_group_versions():
        return not_found_response()
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


