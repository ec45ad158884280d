"""The resources kubelite serves: one module each, registered here.

Each module (pods.py, nodes.py, ...) defines its resource as one `Resource` (base.py): the
identity, API group and version and etcd key segment, and the strategy — defaults,
validation, selectable fields, Table columns, names, merge keys, delete rules. Serving a
new resource is one module plus one line in `RESOURCES`. The core group ("") is served
under `/api/v1`, every other group under `/apis/{group}/{version}`. `RESOURCES` holds one
resource per thing stored in etcd (plurals unique); `SERVED` adds the other versions of a
stored resource, served from the same storage with a conversion (events.k8s.io/v1 Events
are core/v1 Events, apiserver/resources/events_v1.py).
"""

from __future__ import annotations

from apiserver.resources.base import Resource, group_version
from apiserver.resources.certificates import CERTIFICATE_SIGNING_REQUESTS
from apiserver.resources.configmaps import CONFIG_MAPS
from apiserver.resources.deployments import DEPLOYMENTS
from apiserver.resources.endpointslices import ENDPOINT_SLICES
from apiserver.resources.events import EVENTS
from apiserver.resources.events_v1 import EVENTS_V1
from apiserver.resources.jobs import JOBS
from apiserver.resources.leases import LEASES
from apiserver.resources.namespaces import NAMESPACES
from apiserver.resources.nodes import NODES
from apiserver.resources.pods import PODS
from apiserver.resources.priorityclasses import PRIORITY_CLASSES
from apiserver.resources.rbac import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
)
from apiserver.resources.replicasets import REPLICA_SETS
from apiserver.resources.reviews import REVIEWS
from apiserver.resources.secrets import SECRETS
from apiserver.resources.serviceaccounts import SERVICE_ACCOUNTS
from apiserver.resources.services import SERVICES
from apiserver.resources.tokens import TOKEN_REVIEWS

__all__ = ["RESOURCES", "SERVED", "Resource", "collection_prefix", "group_version", "groups", "lookup",
           "namespace_key", "object_key"]

RESOURCES: dict[str, Resource] = {resource.plural: resource for resource in (
    PODS,
    NODES,
    EVENTS,
    NAMESPACES,
    LEASES,
    SERVICE_ACCOUNTS,
    ROLES,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    CLUSTER_ROLE_BINDINGS,
    DEPLOYMENTS,
    REPLICA_SETS,
    JOBS,
    CONFIG_MAPS,
    SECRETS,
    PRIORITY_CLASSES,
    SERVICES,
    ENDPOINT_SLICES,
    CERTIFICATE_SIGNING_REQUESTS,
)}

# Every group/version/resource served: the stored ones, their other versions, and the
# create-only reviews that are never stored.
SERVED: tuple[Resource, ...] = (*RESOURCES.values(), EVENTS_V1, *REVIEWS, TOKEN_REVIEWS)

# group/version ("v1", "coordination.k8s.io/v1") -> plural -> Resource
BY_GROUP_VERSION: dict[str, dict[str, Resource]] = {}
for _resource in SERVED:
    BY_GROUP_VERSION.setdefault(_resource.api_version, {})[_resource.plural] = _resource


def lookup(api_version: str, plural: str) -> Resource | None:
    """The resource `plural` of one group/version, or None when it is not served there."""
    return BY_GROUP_VERSION.get(api_version, {}).get(plural)


# kube-apiserver lists groups by priority (kube-aggregator's apiVersionPriorities), highest
# first, then by name; `kubectl api-resources` prints them in that order.
GROUP_PRIORITY = {"apps": 17800, "batch": 17400, "events.k8s.io": 17750, "authentication.k8s.io": 17700,
                  "authorization.k8s.io": 17600, "rbac.authorization.k8s.io": 17000,
                  "coordination.k8s.io": 16500, "scheduling.k8s.io": 16600,
                  "discovery.k8s.io": 16200,
                  "certificates.k8s.io": 17300}


def groups() -> dict[str, list[str]]:
    """Every non-core group served, with its versions (preferred first), in kube's order."""
    found: dict[str, list[str]] = {}
    for resource in SERVED:
        if resource.group and resource.version not in found.setdefault(resource.group, []):
            found[resource.group].append(resource.version)
    return dict(sorted(found.items(), key=lambda item: (-GROUP_PRIORITY.get(item[0], 0),
                                                        item[0])))


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
    return object_key(prefix, NAMESPACES, None, namespace)
