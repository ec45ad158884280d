"""Admission that depends on who writes: the RBAC escalation check, NodeRestriction and
Pod Security (its checks in apiserver/auth/podsecurity.py).

The registry calls `Registry.admit_write` with a `Write` (who, which verb, the object before
and after) for every create, update, delete and binding that came from a client, after the
object was validated and before anything is written; each check refuses with a 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.x509.oid import NameOID

from apiserver.auth import Attributes, Authorizer, UserInfo
from apiserver.auth.escalation import (
    bind_attributes,
    confirm_no_escalation,
    escalate_attributes,
    escalation_allowed,
    may,
)
from apiserver.auth.node import node_identity
from apiserver.auth.podsecurity import (
    PRIVILEGED,
    decide,
    existing_pod_warnings,
    policy_from_labels,
)
from apiserver.warning import add_warning
from common import errors
from common.csr import parse_request

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Write:
    """kube's admission.Attributes, for what these checks look at."""

    user: UserInfo
    operation: str  # CREATE UPDATE DELETE
    group: str
    resource: str  # plural
    subresource: str
    namespace: str
    name: str
    obj: Object | None  # the new object (None on delete)
    old: Object | None  # the stored one (None on create)


WriteCheck = Callable[[Write], Awaitable[None]]


def forbidden(write: Write, why: str) -> errors.Forbidden:
    """errors.NewForbidden(GroupResource, name, err)."""
    resource = f"{write.resource}.{write.group}" if write.group else write.resource
    details: dict[str, Any] = {"name": write.name}
    if write.group:
        details["group"] = write.group
    details["kind"] = write.resource
    if write.name:
        return errors.Forbidden(f'{resource} "{write.name}" is forbidden: {why}', details=details)
    return errors.Forbidden(f"{resource} is forbidden: {why}", details=details)


# --- the escalation check -------------------------------------------------------------------

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_RESOURCES = ("roles", "clusterroles")
BINDING_RESOURCES = ("rolebindings", "clusterrolebindings")
GC_FIELDS = ("ownerReferences", "finalizers", "managedFields", "resourceVersion")


def only_gc_fields_change(new: Object, old: Object) -> bool:
    """IsOnlyMutatingGCFields (managedFields and resourceVersion are the server's)."""
    def strip(obj: Object) -> Object:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in GC_FIELDS}
        return {**obj, "metadata": meta}

    return strip(new) == strip(old)


class EscalationCheck:
    """role/policybased and rolebinding/policybased (and their cluster twins)."""

    def __init__(self, authorizer: Authorizer, rules_for: Callable[
            [UserInfo, str], Awaitable[tuple[list[Any], list[str]]]],
                 role_rules: Callable[[Mapping[str, Any], str],
                                      Awaitable[tuple[list[Any], str | None]]]) -> None:
        self.authorizer = authorizer
        self.rules_for = rules_for
        self.role_rules = role_rules

    async def __call__(self, write: Write) -> None:
        if write.group != RBAC_GROUP or write.operation == "DELETE" or write.obj is None:
            return
        if write.old is not None and only_gc_fields_change(write.obj, write.old):
            return
        if escalation_allowed(write.user):
            return
        if write.resource in ROLE_RESOURCES:
            await self.check_role(write, write.obj)
        elif write.resource in BINDING_RESOURCES:
            await self.check_binding(write, write.obj)

    async def check_role(self, write: Write, role: Object) -> None:
        if await may(self.authorizer, escalate_attributes(write.user, write.resource,
                                                          write.namespace, write.name)):
            return
        await self.confirm(write, list(role.get("rules") or []))

    async def check_binding(self, write: Write, binding: Object) -> None:
        role_ref = binding.get("roleRef") or {}
        if await may(self.authorizer, bind_attributes(write.user, role_ref, write.namespace)):
            return
        rules, error = await self.role_rules(role_ref, write.namespace)
        if error:
            raise forbidden(write, error)
        await self.confirm(write, rules)

    async def confirm(self, write: Write, wanted: list[Any]) -> None:
        owned, resolution_errors = await self.rules_for(write.user, write.namespace)
        why = confirm_no_escalation(write.user, owned, wanted, resolution_errors)
        if why is not None:
            raise forbidden(write, why)


# --- NodeRestriction --------------------------------------------------------------------------

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_RESTRICTION_DOMAIN = "node-restriction.kubernetes.io"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# kubeletapis: the kubernetes.io labels a kubelet may set on its own Node
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_domain(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


def is_kubelet_label(label: str) -> bool:
    if label in KUBELET_LABELS:
        return True
    domain = label.split("/", 1)[0] if "/" in label else ""
    return any(_in_domain(domain, ns) for ns in KUBELET_LABEL_NAMESPACES)


def forbidden_node_labels(modified: set[str]) -> list[str]:
    """getForbiddenLabels: node-restriction.kubernetes.io labels, and the kubernetes.io and
    k8s.io ones that are not the kubelet's."""
    found = set()
    for label in modified:
        domain = label.split("/", 1)[0] if "/" in label else ""
        if _in_domain(domain, NODE_RESTRICTION_DOMAIN):
            found.add(label)
        kubernetes = _in_domain(domain, "kubernetes.io") or _in_domain(domain, "k8s.io")
        if kubernetes and not is_kubelet_label(label):
            found.add(label)
    return sorted(found)


def modified_labels(new: Mapping[str, str], old: Mapping[str, str]) -> set[str]:
    return {k for k in set(new) | set(old) if new.get(k) != old.get(k)}


def _labels(obj: Object | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _node_name_of(pod: Object | None) -> str:
    return ((pod or {}).get("spec") or {}).get("nodeName") or ""


def node_restriction(write: Write) -> str | None:
    """NodeRestriction (plugin/pkg/admission/noderestriction): why a node may not make this
    write, or None. Only nodes (system:node:NAME in system:nodes) are restricted."""
    node, is_node = node_identity(write.user)
    if not is_node:
        return None
    if not node:
        return f"could not determine node from user {write.user.name!r}"
    if write.group == "" and write.resource == "pods":
        return _admit_pod(node, write)
    if write.group == "" and write.resource == "nodes":
        return _admit_node(node, write)
    if write.group == "coordination.k8s.io" and write.resource == "leases":
        return _admit_lease(node, write)
    return None


def _admit_pod(node: str, write: Write) -> str | None:
    if write.subresource == "":
        if write.operation == "CREATE":
            pod = write.obj or {}
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            if MIRROR_POD_ANNOTATION not in annotations:
                return (f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node '
                        f'"{node}" can only create mirror pods')
            if _node_name_of(pod) != node:
                return f'node "{node}" can only create pods with spec.nodeName set to itself'
            return None
        if write.operation == "DELETE":
            if _node_name_of(write.old) != node:
                return f'node "{node}" can only delete pods with spec.nodeName set to itself'
            return None
        return (f'unexpected operation "{write.operation}", node "{node}" can only create and '
                f"delete mirror pods")
    if write.subresource == "status":
        if _node_name_of(write.old) != node:
            return (f'node "{node}" can only update pod status for pods with spec.nodeName set '
                    f"to itself")
        return None
    if write.subresource == "eviction":
        if _node_name_of(write.old) != node:
            return f"node {node} can only evict pods with spec.nodeName set to itself"
        return None
    return (f'unexpected pod subresource "{write.subresource}", only \'status\' and '
            f"'eviction' are allowed")


def _admit_node(node: str, write: Write) -> str | None:
    if write.name != node:
        return f'node "{node}" is not allowed to modify node "{write.name}"'
    if write.operation == "CREATE":
        labels = forbidden_node_labels(modified_labels(_labels(write.obj), {}))
        if labels:
            return f'node "{node}" is not allowed to set the following labels: {", ".join(labels)}'
    if write.operation == "UPDATE" and write.obj is not None and write.old is not None:
        if ((write.obj.get("spec") or {}).get("taints") or []) != \
                ((write.old.get("spec") or {}).get("taints") or []):
            return f'node "{node}" is not allowed to modify taints'
        labels = forbidden_node_labels(modified_labels(_labels(write.obj), _labels(write.old)))
        if labels:
            return f"is not allowed to modify labels: {', '.join(labels)}"
    return None


def _admit_lease(node: str, write: Write) -> str | None:
    if write.namespace != NODE_LEASE_NAMESPACE:
        return f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
    if write.name != node:
        return "can only access node lease with the same name as the requesting node"
    return None


def node_token_restriction(node: str, request: Object, pod: Object) -> str | None:
    """admitServiceAccount: a node's TokenRequest must be bound to a pod (by name and uid)
    scheduled on that node; why not, or None. The caller has read the named pod."""
    ref = (request.get("spec") or {}).get("boundObjectRef") or {}
    if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        return "node requested token not bound to a pod"
    if not ref.get("uid"):
        return "node requested token with a pod binding without a uid"
    if ref["uid"] != (pod.get("metadata") or {}).get("uid"):
        return (f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                "in record. The object might have been deleted and then recreated")
    if _node_name_of(pod) != node:
        return "node requested token bound to a pod scheduled on a different node"
    return None


async def node_restriction_check(write: Write) -> None:
    why = node_restriction(write)
    if why is not None:
        raise forbidden(write, why)


# --- CertificateApproval, CertificateSigning, CertificateSubjectRestriction ------------------

CERTIFICATES_GROUP = "certificates.k8s.io"


def signer_attributes(user: UserInfo, verb: str, signer: str, *, wildcard: bool) -> Any:
    """certificates.IsAuthorizedForSignerName's two questions: `verb` on the signer itself,
    or on `domain/*`."""
    name = signer.split("/", 1)[0] + "/*" if wildcard else signer
    return Attributes(user=user, verb=verb, resource_request=True,
                      api_group=CERTIFICATES_GROUP, api_version="*", resource="signers",
                      name=name)


def request_groups(csr: Object) -> list[str]:
    request = parse_request(csr.get("spec") or {})
    if request is None:
        return []
    return [str(a.value) for a in request.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME)]


class CertificateChecks:
    """Approving a CSR needs `approve` on its signer (certificates.k8s.io `signers`), issuing
    its certificate needs `sign`; and no client certificate of the apiserver's signer is
    for system:masters (kube's three admission plugins of plugin/pkg/admission/certificates)."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    async def __call__(self, write: Write) -> None:
        if write.group != CERTIFICATES_GROUP or write.resource != "certificatesigningrequests" \
                or write.obj is None:
            return
        signer = str((write.obj.get("spec") or {}).get("signerName") or "")
        if write.operation == "CREATE":
            if signer == "kubernetes.io/kube-apiserver-client" and \
                    MASTERS_GROUP in request_groups(write.obj):
                raise forbidden(write, "use of kubernetes.io/kube-apiserver-client signer "
                                       "with system:masters group is not allowed")
            return
        if write.operation != "UPDATE" or write.old is None:
            return
        if write.subresource == "approval":
            await self.require(write, "approve", signer)
        elif write.subresource == "status":
            before = (write.old.get("status") or {}).get("certificate")
            if (write.obj.get("status") or {}).get("certificate") != before:
                await self.require(write, "sign", signer)

    async def require(self, write: Write, verb: str, signer: str) -> None:
        for wildcard in (False, True):
            if await may(self.authorizer, signer_attributes(write.user, verb, signer,
                                                            wildcard=wildcard)):
                return
        doing = "approve" if verb == "approve" else "sign"
        raise forbidden(write, f'user not permitted to {doing} requests with signerName '
                               f'"{signer}"')


MASTERS_GROUP = "system:masters"


# --- PodSecurity ------------------------------------------------------------------------------

NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str] | None]]


def pod_security_applies(write: Write) -> bool:
    """Pods on create, and the ephemeral containers added to one (not status, not binding)."""
    if write.group != "" or write.resource != "pods" or write.obj is None:
        return False
    if write.operation == "CREATE":
        return write.subresource == ""
    return write.operation == "UPDATE" and write.subresource == "ephemeralcontainers"


class PodSecurityCheck:
    """The PodSecurity admission plugin over the namespace's labels."""

    def __init__(self, namespace_labels: NamespaceLabels) -> None:
        self.namespace_labels = namespace_labels

    async def __call__(self, write: Write) -> None:
        if not pod_security_applies(write):
            return
        labels = await self.namespace_labels(write.namespace)
        if labels is None:
            return  # no such namespace: the create itself answers 404
        policy, _ = policy_from_labels(labels, write.namespace)
        decision = decide(policy, write.obj or {})
        if decision.denied is not None:
            raise forbidden(write, decision.denied)
        for text in decision.warnings:
            add_warning(text)


NamespacePods = Callable[[str], Awaitable[list[Object]]]


class PodSecurityNamespaceCheck:
    """PodSecurity on a namespace update: a tightened `enforce` warns about the pods it
    would now refuse (they keep running)."""

    def __init__(self, namespace_pods: NamespacePods) -> None:
        self.namespace_pods = namespace_pods

    async def __call__(self, write: Write) -> None:
        if write.group != "" or write.resource != "namespaces" or write.subresource or \
                write.operation != "UPDATE" or write.obj is None or write.old is None:
            return
        new, errs = policy_from_labels(_labels(write.obj), write.name)
        old, _ = policy_from_labels(_labels(write.old), write.name)
        if errs or new.enforce == old.enforce or new.enforce.level == PRIVILEGED:
            return
        pods = await self.namespace_pods(write.name)
        for text in existing_pod_warnings(write.name, new.enforce, pods):
            add_warning(text)


def namespace_pods_of(registry: Any) -> NamespacePods:
    from apiserver.resources.pods import PODS

    async def pods(namespace: str) -> list[Object]:
        found, _ = await registry.list_objects(PODS, namespace)
        return list(found)

    return pods


def namespace_labels_of(registry: Any) -> NamespaceLabels:
    from apiserver.resources.namespaces import NAMESPACES

    async def labels(namespace: str) -> Mapping[str, str] | None:
        # from etcd, not registry.get_recent: a label set a moment before is enforced
        try:
            found = await registry.get(NAMESPACES, None, namespace)
        except errors.NotFound:
            return None
        return dict((found.get("metadata") or {}).get("labels") or {})

    return labels


def write_checks(registry: Any, authorizer: Authorizer) -> list[WriteCheck]:
    """The checks every client write goes through: RBAC's escalation check (over the
    registry's RBAC caches), NodeRestriction and PodSecurity."""
    from apiserver.auth.rbac import cached_policy

    policy = cached_policy(registry)
    return [EscalationCheck(authorizer, policy.rules_for, policy.role_rules),
            node_restriction_check, CertificateChecks(authorizer), PodSecurityCheck(namespace_labels_of(registry)),
            PodSecurityNamespaceCheck(namespace_pods_of(registry))]
