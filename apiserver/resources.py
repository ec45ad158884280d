"""The resources kubelite serves, and where each one lives in etcd."""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


RESOURCES: dict[str, Resource] = {
    "pods": Resource("pods", "Pod", True, "pods",
                     frozenset({"status", "binding", "log"}), returns_deleted_object=True),
    "nodes": Resource("nodes", "Node", False, "minions", frozenset({"status"}),
                      keeps_status_on_create=True),
    "events": Resource("events", "Event", True, "events", keeps_status_on_create=True),
    "namespaces": Resource("namespaces", "Namespace", False, "namespaces",
                           frozenset({"status"}), returns_deleted_object=True),
}

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


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
