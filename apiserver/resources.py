"""The resources kubelite serves, their API group and version, and where each lives in etcd.

The core group ("") is served under `/api/v1`, every other group under
`/apis/{group}/{version}`; one `Resource` entry is all it takes to serve a new one
(plus its model, validation and printer). Plurals are unique across groups, so the
per-resource tables (models, validation, Tables, selectors) are keyed by plural.
"""

from __future__ import annotations

from dataclasses import dataclass

COORDINATION_GROUP = "coordination.k8s.io"


@dataclass(frozen=True, slots=True)
class Resource:
    plural: str
    kind: str
    namespaced: bool
    storage_name: str  # the etcd key segment (kube-apiserver keeps nodes under "minions")
    subresources: frozenset[str] = frozenset()
    # Deleting returns the object (pods) instead of a Success Status (most others).
    returns_deleted_object: bool = False
    # The status a client sends on create is kept (nodes register with their status).
    keeps_status_on_create: bool = False
    group: str = ""  # "" is the core (legacy) group
    version: str = "v1"
    # metadata.generation is set on create and bumped when the spec changes.
    tracks_generation: bool = True
    # The strategy's AllowCreateOnUpdate: a PUT of a missing object creates it.
    allow_create_on_update: bool = False
    # The strategy's AllowUnconditionalUpdate: a PUT may leave out metadata.resourceVersion.
    allow_unconditional_update: bool = True

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def api_version(self) -> str:
        """What objects carry in `apiVersion`: `v1`, `coordination.k8s.io/v1`."""
        return group_version(self.group, self.version)

    @property
    def qualified(self) -> str:
        """schema.GroupResource.String(): `pods`, `leases.coordination.k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """schema.GroupKind.String(): `Pod`, `Lease.coordination.k8s.io`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def path_prefix(self) -> str:
        """Where the resource's URLs start: `/api/v1`, `/apis/coordination.k8s.io/v1`."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


RESOURCES: dict[str, Resource] = {
    "pods": Resource("pods", "Pod", True, "pods",
                     frozenset({"status", "binding", "log"}), returns_deleted_object=True),
    "nodes": Resource("nodes", "Node", False, "minions", frozenset({"status"}),
                      keeps_status_on_create=True),
    "events": Resource("events", "Event", True, "events", keeps_status_on_create=True),
    "namespaces": Resource("namespaces", "Namespace", False, "namespaces",
                           frozenset({"status"}), returns_deleted_object=True),
    "leases": Resource("leases", "Lease", True, "leases", group=COORDINATION_GROUP,
                       tracks_generation=False, allow_create_on_update=True,
                       allow_unconditional_update=False),
}

# group/version ("v1", "coordination.k8s.io/v1") -> plural -> Resource
BY_GROUP_VERSION: dict[str, dict[str, Resource]] = {}
for _resource in RESOURCES.values():
    BY_GROUP_VERSION.setdefault(_resource.api_version, {})[_resource.plural] = _resource

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def lookup(api_version: str, plural: str) -> Resource | None:
    """The resource `plural` of one group/version, or None when it is not served there."""
    return BY_GROUP_VERSION.get(api_version, {}).get(plural)


def groups() -> dict[str, list[str]]:
    """Every non-core group served, with its versions (preferred first), sorted by name."""
    found: dict[str, list[str]] = {}
    for resource in RESOURCES.values():
        if resource.group and resource.version not in found.setdefault(resource.group, []):
            found[resource.group].append(resource.version)
    return dict(sorted(found.items()))


def object_key(prefix: str, resource: Resource, namespace: str | None, name: str) -> str:
    if resource.namespaced:
        return f"{prefix}/{resource.storage_name}/{namespace}/{name}"
    return f"{prefix}/{resource.storage_name}/{name}"


def collection_prefix(prefix: str, resource: Resource, namespace: str | None) -> str:
    """The key prefix of a list or watch: one namespace, or every namespace."""
    if resource.namespaced and namespace:
        return f"{prefix}/{resource.storage_name}/{namespace}/"
    return f"{prefix}/{resource.storage_name}/"


def namespace_key(prefix: str, namespace: str) -> str:
    return object_key(prefix, RESOURCES["namespaces"], None, namespace)
