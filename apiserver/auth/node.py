"""`--authorization-mode=Node`: kube's NodeAuthorizer (plugin/pkg/auth/authorizer/node).

A kubelet (user `system:node:NAME` in group `system:nodes`) is allowed the static NodeRules
(bootstrappolicy.NodeRules: read nodes and pods, write its Node and pods' status, events,
...), its own Lease in kube-node-lease, a get of a pod only when the pod is bound to it,
and secrets/configmaps/... only through a pod bound to it. With kube 1.32+'s
AuthorizeNodeWithSelectors (on by default) pods and nodes are decided here alone, not by
the static rules: a node lists and watches pods only with `fieldSelector=spec.nodeName=NAME`
(or one pod by name that is bound to it), and reads only its own Node (a get of NAME, a
list/watch with `metadata.name=NAME`). kubelite serves none of the referenced kinds yet, so
a request for one is left to the next authorizer (as kube does without a graph edge). What a node may change in the
objects it may write is NodeRestriction admission's (apiserver/auth/admission.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.auth import Attributes, Decision, UserInfo
from apiserver.auth.rbac import rules_allow

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
NODE_LEASE_NAMESPACE = "kube-node-lease"
READ = ["get", "list", "watch"]
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


def node_decision(attributes: Attributes, pod_node: PodNode | None = None,
                  ) -> tuple[Decision, str]:
    """`pod_node`: where the pods are bound, for a get of one pod (kube's graph edge from a
    pod to its node); None: pods are read as the static NodeRules allow."""
    node, is_node = node_identity(attributes.user)
    if not is_node:
        return Decision.NO_OPINION, ""
    if not node:
        return Decision.NO_OPINION, f'unknown node for user "{attributes.user.name}"'
    if attributes.resource_request:
        kind = (attributes.api_group, attributes.resource)
        if kind == ("coordination.k8s.io", "leases"):
            return authorize_lease(node, attributes)
        if kind in GRAPH_RESOURCES and attributes.subresource == "":
            return no_relationship(node)
        if kind == ("", "pods"):
            return authorize_pod(node, attributes, pod_node)
        if kind == ("", "nodes"):
            return authorize_node(node, attributes)
    if rules_allow(attributes, NODE_RULES):
        return Decision.ALLOW, ""
    return Decision.NO_OPINION, ""


class NodeAuthorizer:
    def __init__(self, pod_node: PodNode | None = None) -> None:
        self.pod_node = pod_node

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return node_decision(attributes, self.pod_node)


def cached_pod_node(registry: Any) -> PodNode:
    """Where a pod is bound, from the registry's pod watch cache (its selectable fields)."""
    from apiserver.resources.pods import PODS

    def pod_node(namespace: str, name: str) -> str | None:
        item = registry.cache(PODS).get(registry.key(PODS, namespace, name))
        return None if item is None else item.fields.get("spec.nodeName", "")

    return pod_node
