"""`--authorization-mode=Node`: kube's NodeAuthorizer (plugin/pkg/auth/authorizer/node).

A kubelet (user `system:node:NAME` in group `system:nodes`) is allowed the static NodeRules
(bootstrappolicy.NodeRules: read nodes and pods, write its Node and pods' status, events,
...), its own Lease in kube-node-lease, a get of a pod only when the pod is bound to it,
and secrets/configmaps/... only through a pod bound to it. With kube 1.32+'s
AuthorizeNodeWithSelectors (on by default) pods and nodes are decided here alone, not by
the static rules: a node lists and watches pods only with `fieldSelector=spec.nodeName=NAME`
(or one pod by name that is bound to it), and reads only its own Node (a get of NAME, a
list/watch with `metadata.name=NAME`). Secrets and ConfigMaps are read (get, or a list/watch
of one object by `metadata.name=X`, as kube's kubelet watches them), PersistentVolumeClaims
got and ServiceAccount tokens created only when a pod bound to the node references them
(kube's graph.go edges, from `common.pod_refs`): the `Graph` answers that from the pod watch
cache. What a node may change in the objects it may write is NodeRestriction admission's
(apiserver/auth/admission.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.auth import Attributes, Decision, UserInfo
from apiserver.auth.rbac import rules_allow
from common.pod_refs import PodReferences, pod_references

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
NODE_LEASE_NAMESPACE = "kube-node-lease"
READ = ["get", "list", "watch"]
MEMO_LIMIT = 50_000  # pods whose references the graph remembers
# resources kube authorizes through the graph of what a node's pods reference
GRAPH_RESOURCES = frozenset({
    ("", "secrets"), ("", "configmaps"), ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"), ("storage.k8s.io", "volumeattachments"),
    ("", "serviceaccounts"), ("resource.k8s.io", "resourceclaims"),
})


def rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, list[str]]:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources}


# bootstrappolicy.NodeRules (the ones for kinds outside the graph)
NODE_RULES = [
    rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
    rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews",
                                                "localsubjectaccessreviews"]),
    rule(READ, [""], ["services"]),
    rule(["create", "get", "list", "watch"], [""], ["nodes"]),
    rule(["update", "patch"], [""], ["nodes/status"]),
    rule(["update", "patch"], [""], ["nodes"]),
    rule(["create", "update", "patch"], [""], ["events"]),
    rule(READ, [""], ["pods"]),
    rule(["create", "delete"], [""], ["pods"]),
    rule(["update", "patch"], [""], ["pods/status"]),
    rule(["create"], [""], ["pods/eviction"]),
    rule(["get"], [""], ["endpoints"]),
    rule(["create", "get", "list", "watch"], ["certificates.k8s.io"],
         ["certificatesigningrequests"]),
    rule(["get", "create", "update", "patch", "delete"], ["coordination.k8s.io"], ["leases"]),
    rule(["get", "create", "update", "patch", "delete"], ["storage.k8s.io"], ["csinodes"]),
    rule(READ, ["storage.k8s.io"], ["csidrivers"]),
    rule(READ, ["node.k8s.io"], ["runtimeclasses"]),
]


# (namespace, name) -> the spec.nodeName of that pod ("" unbound), None when there is none
PodNode = Callable[[str, str], str | None]
# (node, resource, namespace, name) -> whether a pod bound to the node references the object
Graph = Callable[[str, str, str, str], bool]


def node_identity(user: UserInfo) -> tuple[str, bool]:
    """NodeIdentity: (node name, whether the user is a node)."""
    if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return "", False
    return user.name[len(NODE_USER_PREFIX):], True


def authorize_lease(node: str, attributes: Attributes) -> tuple[Decision, str]:
    if attributes.verb not in ("get", "create", "update", "patch", "delete"):
        return Decision.NO_OPINION, "can only get, create, update, patch, or delete a node lease"
    if attributes.namespace != NODE_LEASE_NAMESPACE:
        return (Decision.NO_OPINION,
                f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
    # on create the name is not known yet: NodeRestriction checks it
    if attributes.verb != "create" and attributes.name != node:
        return (Decision.NO_OPINION,
                "can only access node lease with the same name as the requesting node")
    return Decision.ALLOW, ""


def no_relationship(node: str) -> tuple[Decision, str]:
    return Decision.NO_OPINION, f"no relationship found between node '{node}' and this object"


def has_node_name_selector(attributes: Attributes, node: str) -> bool:
    return ("spec.nodeName", "=", node) in attributes.field_selector


def pod_on_node(node: str, attributes: Attributes, pod_node: PodNode | None,
                ) -> tuple[Decision, str]:
    """A named pod, allowed when it is bound to the node (kube's graph edge pod -> node);
    without a `pod_node` lookup, as the static rules allow a get."""
    if pod_node is None:
        return Decision.ALLOW, ""
    if pod_node(attributes.namespace, attributes.name) == node:
        return Decision.ALLOW, ""
    return no_relationship(node)


def authorize_pod(node: str, attributes: Attributes, pod_node: PodNode | None,
                  ) -> tuple[Decision, str]:
    """NodeAuthorizer.authorizePod (AuthorizeNodeWithSelectors)."""
    verb, sub = attributes.verb, attributes.subresource
    if sub == "":
        if verb == "get":
            return pod_on_node(node, attributes, pod_node)
        if verb in ("list", "watch"):
            if has_node_name_selector(attributes, node):
                return Decision.ALLOW, ""
            if attributes.name:  # one pod by metadata.name: the graph decides
                return pod_on_node(node, attributes, pod_node)
            return (Decision.NO_OPINION,
                    "can only list/watch pods with spec.nodeName field selector")
        if verb in ("create", "delete"):  # mirror pods; NodeRestriction narrows them
            return Decision.ALLOW, ""
    elif sub == "status" and verb in ("update", "patch"):
        return Decision.ALLOW, ""
    elif sub == "eviction" and verb == "create":
        return Decision.ALLOW, ""
    return Decision.NO_OPINION, ""


def authorize_node(node: str, attributes: Attributes) -> tuple[Decision, str]:
    """NodeAuthorizer.authorizeNode (AuthorizeNodeWithSelectors): any Node write is
    NodeRestriction's to narrow; reads only of its own Node, by name or
    `metadata.name=NAME` (which the request info turns into the name)."""
    verb, sub = attributes.verb, attributes.subresource
    if sub == "":
        if verb in ("create", "update", "patch"):
            return Decision.ALLOW, ""
        if verb in ("get", "list", "watch"):
            if attributes.name == node:
                return Decision.ALLOW, ""
            if attributes.name == "":
                return (Decision.NO_OPINION,
                        f"node '{node}' cannot read all nodes, only its own Node object")
            return (Decision.NO_OPINION,
                    f"node '{node}' cannot read '{attributes.name}', only its own Node object")
    elif sub == "status" and verb in ("update", "patch"):
        return Decision.ALLOW, ""
    return Decision.NO_OPINION, ""


def related(node: str, attributes: Attributes, graph: Graph | None) -> tuple[Decision, str]:
    """NodeAuthorizer.authorize: a named object with a path to the node in the graph."""
    if not attributes.name:
        return Decision.NO_OPINION, "No Object name found"
    if graph is not None and graph(node, attributes.resource, attributes.namespace,
                                   attributes.name):
        return Decision.ALLOW, ""
    return no_relationship(node)


def authorize_read_namespaced(node: str, attributes: Attributes, graph: Graph | None,
                              ) -> tuple[Decision, str]:
    """authorizeReadNamespacedObject (secrets, configmaps): get, or a list/watch of one
    object (`metadata.name=X`), of what a pod of the node references."""
    if attributes.verb not in READ:
        return Decision.NO_OPINION, "can only read resources of this type"
    if attributes.subresource:
        return Decision.NO_OPINION, "cannot read subresource"
    if not attributes.namespace:
        return Decision.NO_OPINION, "can only read namespaced object of this type"
    return related(node, attributes, graph)


def authorize_get(node: str, attributes: Attributes, graph: Graph | None,
                  ) -> tuple[Decision, str]:
    """authorizeGet (persistentvolumeclaims, persistentvolumes, ...)."""
    if attributes.verb != "get":
        return Decision.NO_OPINION, "can only get individual resources of this type"
    if attributes.subresource:
        return Decision.NO_OPINION, "cannot get subresource"
    return related(node, attributes, graph)


def authorize_create_token(node: str, attributes: Attributes, graph: Graph | None,
                           ) -> tuple[Decision, str]:
    """authorizeCreateToken: a token of a service account a pod of the node runs as."""
    if attributes.verb != "create" or not attributes.name:
        return Decision.NO_OPINION, "can only create tokens for individual service accounts"
    if attributes.subresource != "token":
        return Decision.NO_OPINION, "can only create token subresource of serviceaccount"
    return related(node, attributes, graph)


def authorize_graph(node: str, attributes: Attributes, graph: Graph | None,
                    ) -> tuple[Decision, str]:
    resource = attributes.resource
    if attributes.api_group == "" and resource in ("secrets", "configmaps"):
        return authorize_read_namespaced(node, attributes, graph)
    if attributes.api_group == "" and resource == "serviceaccounts":
        return authorize_create_token(node, attributes, graph)
    if (attributes.api_group == "" and resource == "persistentvolumeclaims"
            and attributes.subresource == "status"):
        if attributes.verb not in ("update", "patch"):
            return Decision.NO_OPINION, "can only get/update/patch this type"
        return related(node, attributes, graph)
    # persistentvolumes, volumeattachments, resourceclaims: no edges in kubelite's graph
    return authorize_get(node, attributes, graph)


def node_decision(attributes: Attributes, pod_node: PodNode | None = None,
                  graph: Graph | None = None) -> tuple[Decision, str]:
    """`pod_node`: where the pods are bound, for a get of one pod (kube's graph edge from a
    pod to its node); None: pods are read as the static NodeRules allow. `graph`: what
    the pods bound to a node reference; None: nothing."""
    node, is_node = node_identity(attributes.user)
    if not is_node:
        return Decision.NO_OPINION, ""
    if not node:
        return Decision.NO_OPINION, f'unknown node for user "{attributes.user.name}"'
    if attributes.resource_request:
        kind = (attributes.api_group, attributes.resource)
        if kind == ("coordination.k8s.io", "leases"):
            return authorize_lease(node, attributes)
        if kind in GRAPH_RESOURCES:
            return authorize_graph(node, attributes, graph)
        if kind == ("", "pods"):
            return authorize_pod(node, attributes, pod_node)
        if kind == ("", "nodes"):
            return authorize_node(node, attributes)
    if rules_allow(attributes, NODE_RULES):
        return Decision.ALLOW, ""
    return Decision.NO_OPINION, ""


class NodeAuthorizer:
    def __init__(self, pod_node: PodNode | None = None, graph: Graph | None = None) -> None:
        self.pod_node = pod_node
        self.graph = graph

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return node_decision(attributes, self.pod_node, self.graph)


def cached_pod_node(registry: Any) -> PodNode:
    """Where a pod is bound, from the registry's pod watch cache (its selectable fields)."""
    from apiserver.resources.pods import PODS

    def pod_node(namespace: str, name: str) -> str | None:
        item = registry.cache(PODS).get(registry.key(PODS, namespace, name))
        return None if item is None else item.fields.get("spec.nodeName", "")

    return pod_node


def cached_graph(registry: Any) -> Graph:
    """Whether a pod bound to the node references the object, from the pod watch cache:
    the node's pods (its spec.nodeName index) of that namespace, each decoded
    once per resourceVersion (kube keeps the edges in a graph updated by an informer;
    the cache is already that informer)."""
    from apiserver.resources.pods import PODS

    memo: dict[str, tuple[int, PodReferences]] = {}

    def references(key: str, revision: int, item: Any) -> PodReferences:
        known = memo.get(key)
        if known is not None and known[0] == revision:
            return known[1]
        refs = pod_references(item.obj)
        if len(memo) > MEMO_LIMIT:
            memo.clear()
        memo[key] = (revision, refs)
        return refs

    def graph(node: str, resource: str, namespace: str, name: str) -> bool:
        cache = registry.cache(PODS)
        prefix = registry.key(PODS, namespace, "")
        for item in cache.with_field("spec.nodeName", node):
            if not item.key.startswith(prefix):
                continue
            if name in references(item.key, item.revision, item).names(resource):
                return True
        return False

    return graph
