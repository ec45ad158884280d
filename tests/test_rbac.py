"""RBAC without a server: rule matching, the policy's bindings, the escalation check, the
Node authorizer, NodeRestriction, bootstrap reconciliation and the RBAC kinds' validation.
Expectations are kube's (plugin/pkg/auth/authorizer/rbac, pkg/registry/rbac/validation,
plugin/pkg/auth/authorizer/node, plugin/pkg/admission/noderestriction)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth import Attributes, Decision, UserInfo
from apiserver.auth.admission import Write, forbidden_node_labels, node_restriction
from apiserver.auth.bootstrap import (
    AUTOUPDATE,
    cluster_role_bindings,
    cluster_roles,
    reconcile_binding,
    reconcile_role,
)
from apiserver.auth.escalation import compact_string, confirm_no_escalation, covers
from apiserver.auth.node import node_decision
from apiserver.auth.rbac import Policy, rule_allows
from apiserver.auth.requestinfo import field_requirements, request_attributes
from apiserver.resources.rbac import (
    binding_cells,
    validate_binding,
    validate_cluster_role,
    validate_role,
)

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))


def res(verb: str, resource: str, *, group: str = "", sub: str = "", ns: str = "",
        name: str = "", user: UserInfo = ALICE) -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=True, api_group=group,
                      resource=resource, subresource=sub, namespace=ns, name=name)


def url(verb: str, path: str, user: UserInfo = ALICE) -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=False, path=path)


@pytest.mark.parametrize(("rule", "attributes", "allowed"), [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("get", "pods"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("list", "pods"), False),
    ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}, res("delete", "pods"), True),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["leases"]},
     res("get", "leases", group="coordination.k8s.io"), True),
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, res("get", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}, res("get", "nodes"), True),
    # a resource does not grant its subresources, nor the reverse
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
     res("get", "pods", sub="log"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]},
     res("get", "pods", sub="log"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, res("get", "pods"), False),
    ({"verbs": ["update"], "apiGroups": [""], "resources": ["*/status"]},
     res("update", "nodes", sub="status"), True),
    ({"verbs": ["update"], "apiGroups": [""], "resources": ["*/status"]},
     res("update", "nodes"), False),
    ({"verbs": ["update"], "apiGroups": [""], "resources": ["*/status"]},
     res("update", "pods", sub="xstatus"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     res("get", "pods", name="web"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     res("get", "pods", name="db"), False),
    # a list has no name: resourceNames never allow it
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     res("list", "pods"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, url("get", "/healthz"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, url("get", "/healthz/etcd"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, url("get", "/apis/apps/v1"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, url("get", "/apis"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["*"]}, url("get", "/anything"), True),
    ({"verbs": ["post"], "nonResourceURLs": ["*"]}, url("get", "/version"), False),
    # resource rules never match a non-resource request, nor the reverse
    ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, url("get", "/version"), False),
    ({"verbs": ["*"], "nonResourceURLs": ["*"]}, res("get", "pods"), False),
])
def test_rule_allows(rule: dict[str, Any], attributes: Attributes, allowed: bool) -> None:
    assert rule_allows(attributes, rule) is allowed


def role(name: str, rules: list[dict[str, Any]], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "rules": rules}


def binding(name: str, kind: str, role_name: str, subjects: list[dict[str, str]],
            namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                                          "name": role_name}, "subjects": subjects}


READ_PODS = [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]


def policy() -> Policy:
    return Policy.build(
        roles=[role("pod-reader", READ_PODS, "team")],
        cluster_roles=[role("reader", READ_PODS)],
        role_bindings=[
            binding("alice-reads", "Role", "pod-reader", [{"kind": "User", "name": "alice"}],
                    "team"),
            binding("sa-reads", "ClusterRole", "reader",
                    [{"kind": "ServiceAccount", "name": "builder"}], "ci"),
            binding("dangling", "ClusterRole", "gone", [{"kind": "Group", "name": "devs"}],
                    "team"),
        ],
        cluster_role_bindings=[
            binding("ops-read", "ClusterRole", "reader", [{"kind": "Group", "name": "ops"}]),
        ])


def test_role_bindings_apply_in_their_namespace_only() -> None:
    p = policy()
    decision, reason = p.authorize(res("get", "pods", ns="team"))
    assert decision is Decision.ALLOW
    assert reason == ('RBAC: allowed by RoleBinding "alice-reads/team" of Role "pod-reader" to '
                      'User "alice"')
    assert p.authorize(res("get", "pods", ns="other"))[0] is Decision.NO_OPINION
    assert p.authorize(res("get", "pods"))[0] is Decision.NO_OPINION  # cluster-wide


def test_cluster_role_bindings_apply_everywhere() -> None:
    ops = UserInfo("olga", groups=("ops",))
    p = policy()
    assert p.authorize(res("list", "pods", user=ops))[0] is Decision.ALLOW
    assert p.authorize(res("list", "pods", ns="any", user=ops))[0] is Decision.ALLOW
    assert p.authorize(res("delete", "pods", ns="any", user=ops)) == (Decision.NO_OPINION, "")


def test_service_account_subject_defaults_to_the_binding_namespace() -> None:
    builder = UserInfo("system:serviceaccount:ci:builder",
                       groups=("system:serviceaccounts", "system:serviceaccounts:ci"))
    other = UserInfo("system:serviceaccount:team:builder")
    p = policy()
    decision, reason = p.authorize(res("get", "pods", ns="ci", user=builder))
    assert decision is Decision.ALLOW
    assert reason.endswith('to ServiceAccount "builder/ci"')
    assert p.authorize(res("get", "pods", ns="ci", user=other))[0] is Decision.NO_OPINION


def test_a_binding_to_a_missing_role_is_the_reason() -> None:
    decision, reason = policy().authorize(res("delete", "pods", ns="team"))
    assert decision is Decision.NO_OPINION
    assert reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'


def test_rules_for_lists_cluster_and_namespace_rules() -> None:
    rules, errors = policy().rules_for(ALICE, "team")
    assert rules == READ_PODS
    assert errors == ['clusterrole.rbac.authorization.k8s.io "gone" not found']


# --- escalation --------------------------------------------------------------------------------

@pytest.mark.parametrize(("owned", "wanted", "ok"), [
    ([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
     [{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]}], True),
    (READ_PODS, [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}], True),
    (READ_PODS, [{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]}], False),
    (READ_PODS, [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}], False),
    ([{"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}],
     [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}], True),
    ([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}],
     [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}], False),
    (READ_PODS,
     [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}], True),
    ([{"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}],
     [{"verbs": ["get"], "nonResourceURLs": ["/apis/apps"]}], True),
    ([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}],
     [{"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}], False),
])
def test_covers(owned: list[dict[str, Any]], wanted: list[dict[str, Any]], ok: bool) -> None:
    assert covers(owned, wanted)[0] is ok


def test_escalation_message_is_kubes() -> None:
    bob = UserInfo("bob", groups=("system:authenticated",))
    wanted = [{"verbs": ["get", "delete", "create"], "apiGroups": [""],
               "resources": ["pods", "secrets"]}]
    message = confirm_no_escalation(bob, READ_PODS, wanted)
    assert message == (
        'user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions '
        'not currently held:\n'
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "create"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete" "create"]}')
    assert confirm_no_escalation(bob, READ_PODS, READ_PODS) is None
    assert compact_string({"verbs": ["get"], "nonResourceURLs": ["/x"]}) == \
        '{NonResourceURLs:["/x"], Verbs:["get"]}'


# --- the Node authorizer -----------------------------------------------------------------------

NODE_A = UserInfo("system:node:a", groups=("system:nodes", "system:authenticated"))


@pytest.mark.parametrize(("attributes", "allowed"), [
    (res("get", "nodes", name="a", user=NODE_A), True),
    (res("get", "nodes", name="b", user=NODE_A), False),  # kube 1.32+: its own Node only
    (res("watch", "pods", user=NODE_A), False),  # only with spec.nodeName=a
    (res("create", "nodes", user=NODE_A), True),
    (res("patch", "nodes", sub="status", name="a", user=NODE_A), True),
    (res("delete", "nodes", name="a", user=NODE_A), False),
    (res("update", "pods", sub="status", ns="default", name="p", user=NODE_A), True),
    (res("create", "pods", sub="binding", ns="default", name="p", user=NODE_A), False),
    (res("update", "pods", ns="default", name="p", user=NODE_A), False),
    (res("create", "events", ns="default", user=NODE_A), True),
    (res("delete", "events", ns="default", user=NODE_A), False),
    (res("get", "leases", group="coordination.k8s.io", ns="kube-node-lease", name="a",
         user=NODE_A), True),
    (res("update", "leases", group="coordination.k8s.io", ns="kube-node-lease", name="b",
         user=NODE_A), False),
    (res("update", "leases", group="coordination.k8s.io", ns="kube-system", name="a",
         user=NODE_A), False),
    (res("list", "leases", group="coordination.k8s.io", ns="kube-node-lease", user=NODE_A),
     False),
    (res("get", "secrets", ns="default", name="s", user=NODE_A), False),
    (res("get", "namespaces", name="default", user=NODE_A), False),
    # not a node: no opinion whatever is asked
    (res("get", "nodes", user=UserInfo("system:node:a")), False),
    (res("get", "nodes", user=UserInfo("mallory", groups=("system:nodes",))), False),
])
def test_node_authorizer(attributes: Attributes, allowed: bool) -> None:
    decision, _ = node_decision(attributes)
    assert decision is (Decision.ALLOW if allowed else Decision.NO_OPINION)


def test_node_lease_reasons() -> None:
    assert node_decision(res("update", "leases", group="coordination.k8s.io",
                             ns="kube-node-lease", name="b", user=NODE_A)) == (
        Decision.NO_OPINION, "can only access node lease with the same name as the requesting node")


# --- NodeRestriction ---------------------------------------------------------------------------

def node(name: str, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def pod(node_name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "annotations": annotations or {}},
            "spec": {"nodeName": node_name}}


def write(operation: str, resource: str, name: str, obj: Any, old: Any, *, sub: str = "",
          group: str = "", ns: str = "", user: UserInfo = NODE_A) -> Write:
    return Write(user=user, operation=operation, group=group, resource=resource,
                 subresource=sub, namespace=ns, name=name, obj=obj, old=old)


@pytest.mark.parametrize(("attempt", "refusal"), [
    (write("UPDATE", "nodes", "a", node("a", {"app": "x"}), node("a")), None),
    (write("UPDATE", "nodes", "b", node("b", {"app": "x"}), node("b")),
     'node "a" is not allowed to modify node "b"'),
    (write("UPDATE", "nodes", "a", node("a", {"node-restriction.kubernetes.io/pci": "y"}),
           node("a")), "is not allowed to modify labels: node-restriction.kubernetes.io/pci"),
    (write("UPDATE", "nodes", "a", node("a", {"node-role.kubernetes.io/master": ""}),
           node("a")), "is not allowed to modify labels: node-role.kubernetes.io/master"),
    (write("UPDATE", "nodes", "a", node("a", {"kubernetes.io/hostname": "a"}), node("a")), None),
    (write("UPDATE", "nodes", "a", node("a", {"node.kubernetes.io/instance-type": "big"}),
           node("a")), None),
    (write("UPDATE", "nodes", "a", node("a", taints=[]),
           node("a", taints=[{"key": "k", "effect": "NoSchedule"}])),
     'node "a" is not allowed to modify taints'),
    (write("CREATE", "nodes", "a", node("a", {"x.node-restriction.kubernetes.io/y": "1"}),
           None),
     'node "a" is not allowed to set the following labels: x.node-restriction.kubernetes.io/y'),
    (write("UPDATE", "pods", "p", pod("a"), pod("a"), sub="status", ns="default"), None),
    (write("UPDATE", "pods", "p", pod("b"), pod("b"), sub="status", ns="default"),
     'node "a" can only update pod status for pods with spec.nodeName set to itself'),
    (write("DELETE", "pods", "p", None, pod("b"), ns="default"),
     'node "a" can only delete pods with spec.nodeName set to itself'),
    (write("DELETE", "pods", "p", None, pod("a"), ns="default"), None),
    (write("CREATE", "pods", "p", pod("a"), None, ns="default"),
     'pod does not have "kubernetes.io/config.mirror" annotation, node "a" can only create '
     'mirror pods'),
    (write("CREATE", "pods", "p", pod("a", {"kubernetes.io/config.mirror": "x"}), None,
           ns="default"), None),
    (write("CREATE", "pods", "p", {"target": {"name": "a"}}, None, sub="binding",
           ns="default"),
     "unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed"),
    (write("UPDATE", "leases", "b", {}, {}, group="coordination.k8s.io", ns="kube-node-lease"),
     "can only access node lease with the same name as the requesting node"),
    # not a node: not restricted
    (write("UPDATE", "nodes", "b", node("b", {"node-restriction.kubernetes.io/x": "1"}),
           node("b"), user=ALICE), None),
])
def test_node_restriction(attempt: Write, refusal: str | None) -> None:
    assert node_restriction(attempt) == refusal


def test_forbidden_node_labels() -> None:
    assert forbidden_node_labels({"app", "example.com/x", "k8s.io/x", "kubelet.kubernetes.io/y",
                                  "topology.kubernetes.io/zone"}) == ["k8s.io/x"]


# --- bootstrap reconciliation ------------------------------------------------------------------

def test_bootstrap_policy_names() -> None:
    names = {r["metadata"]["name"] for r in cluster_roles()}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user",
            "system:public-info-viewer", "system:kube-scheduler", "system:node",
            "system:kube-controller-manager", "system:node-proxier"} <= names
    bindings = {b["metadata"]["name"]: b for b in cluster_role_bindings()}
    assert bindings["cluster-admin"]["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"}]


def test_reconcile_role_adds_missing_rules_and_keeps_additions() -> None:
    expected = role("r", READ_PODS)
    expected["metadata"]["annotations"] = {AUTOUPDATE: "true"}
    mine = {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}
    existing = role("r", [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, mine])
    reconciled = reconcile_role(existing, expected)
    assert reconciled is not None
    assert mine in reconciled["rules"]
    assert covers(reconciled["rules"], READ_PODS)[0]
    assert reconcile_role(reconciled, expected) is None  # idempotent
    existing["metadata"]["annotations"] = {AUTOUPDATE: "false"}
    assert reconcile_role(existing, expected) is None


def test_reconcile_binding_adds_subjects_and_recreates_on_a_new_role_ref() -> None:
    expected = binding("b", "ClusterRole", "view", [{"kind": "Group", "name": "g"}])
    existing = binding("b", "ClusterRole", "view", [{"kind": "User", "name": "me"}])
    wanted, recreate = reconcile_binding(existing, expected)
    assert wanted is not None and not recreate
    assert wanted["subjects"] == [{"kind": "User", "name": "me"}, {"kind": "Group", "name": "g"}]
    wanted, recreate = reconcile_binding(
        binding("b", "ClusterRole", "edit", [{"kind": "Group", "name": "g"}]), expected)
    assert recreate and wanted is not None and wanted["roleRef"]["name"] == "view"


# --- validation and the Table ------------------------------------------------------------------

def test_validation() -> None:
    assert validate_role(role("r", READ_PODS, "team")) == []
    causes = validate_role(role("r", [{"verbs": [], "nonResourceURLs": ["/x"]}], "team"))
    assert [(c["field"], c["message"]) for c in causes] == [
        ("rules[0].verbs", "Required value: verbs must contain at least one value"),
        ("rules[0].nonResourceURLs",
         'Invalid value: []string{"/x"}: namespaced rules cannot apply to non-resource URLs')]
    assert validate_cluster_role(role("c", [{"verbs": ["get"], "nonResourceURLs": ["/x"]}])) == []
    causes = validate_cluster_role(role("c", [{"verbs": ["get"]}]))
    assert [c["field"] for c in causes] == ["rules[0].apiGroups", "rules[0].resources"]
    bad = binding("b", "Role", "r", [{"kind": "Robot", "name": "x"},
                                     {"kind": "User", "name": "u", "apiGroup": "x"},
                                     {"kind": "ServiceAccount", "name": "s"}])
    causes = validate_binding(bad, namespaced=False)
    assert [c["field"] for c in causes] == ["roleRef.kind", "subjects[0].kind",
                                            "subjects[1].apiGroup", "subjects[2].namespace"]


def test_binding_cells() -> None:
    obj = binding("b", "ClusterRole", "view", [
        {"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
        {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}])
    from datetime import UTC, datetime
    cells = binding_cells(obj, datetime.now(UTC))
    assert cells[:2] == ["b", "ClusterRole/view"]
    assert cells[3:] == ["u1, u2", "g", "n/s"]


def test_node_gets_only_pods_bound_to_it() -> None:
    bound = {("default", "mine"): "a", ("default", "theirs"): "b", ("default", "pending"): ""}

    def pod_node(namespace: str, name: str) -> str | None:
        return bound.get((namespace, name))

    def get(name: str) -> tuple[Decision, str]:
        return node_decision(res("get", "pods", ns="default", name=name, user=NODE_A), pod_node)

    assert get("mine") == (Decision.ALLOW, "")
    for name in ("theirs", "pending", "missing"):
        assert get(name) == (Decision.NO_OPINION,
                             "no relationship found between node 'a' and this object")
    # a get of the status subresource is no node's (NodeRestriction narrows status writes)
    assert node_decision(res("get", "pods", sub="status", ns="default", name="theirs",
                             user=NODE_A), pod_node)[0] is Decision.NO_OPINION
    # a list or watch of one pod by metadata.name (the request info's name): the same edge
    for verb in ("list", "watch"):
        assert node_decision(res(verb, "pods", ns="default", name="mine", user=NODE_A),
                             pod_node)[0] is Decision.ALLOW
        assert node_decision(res(verb, "pods", ns="default", name="theirs", user=NODE_A),
                             pod_node)[0] is Decision.NO_OPINION


def selected(verb: str, resource: str, selector: str, *, ns: str = "",
             user: UserInfo = NODE_A) -> Attributes:
    """A list/watch/deletecollection as the request info reads `?fieldSelector=...`."""
    query = {"fieldSelector": selector, **({"watch": "true"} if verb == "watch" else {})}
    method = "DELETE" if verb == "deletecollection" else "GET"
    path = f"/api/v1/namespaces/{ns}/{resource}" if ns else f"/api/v1/{resource}"
    attributes = request_attributes(user, method, path, query)
    assert attributes.verb == verb
    return attributes


PODS_ONLY = (Decision.NO_OPINION, "can only list/watch pods with spec.nodeName field selector")
ALL_NODES = (Decision.NO_OPINION, "node 'a' cannot read all nodes, only its own Node object")


# kube's node_authorizer_test.go "list/watch pods/nodes with selectors" cases
@pytest.mark.parametrize(("attributes", "expected"), [
    (selected("list", "pods", "spec.nodeName=a"), (Decision.ALLOW, "")),
    (selected("watch", "pods", "spec.nodeName=a"), (Decision.ALLOW, "")),
    (selected("list", "pods", "spec.nodeName==a"), (Decision.ALLOW, "")),
    (selected("watch", "pods", "spec.nodeName=a", ns="default"), (Decision.ALLOW, "")),
    (selected("list", "pods", "status.phase=Running,spec.nodeName=a"), (Decision.ALLOW, "")),
    (selected("list", "pods", ""), PODS_ONLY),
    (selected("list", "pods", "spec.nodeName=b"), PODS_ONLY),
    (selected("watch", "pods", "spec.nodeName!=a"), PODS_ONLY),
    (selected("list", "pods", "spec.nodeName="), PODS_ONLY),
    (selected("list", "pods", "spec.nodeName"), PODS_ONLY),  # does not parse
    (selected("deletecollection", "pods", "spec.nodeName=a", ns="default"),
     (Decision.NO_OPINION, "")),
    (selected("list", "nodes", "metadata.name=a"), (Decision.ALLOW, "")),
    (selected("watch", "nodes", "metadata.name=a"), (Decision.ALLOW, "")),
    (selected("list", "nodes", ""), ALL_NODES),
    (selected("watch", "nodes", "spec.unschedulable=false"), ALL_NODES),
    (selected("list", "nodes", "metadata.name=b"),
     (Decision.NO_OPINION, "node 'a' cannot read 'b', only its own Node object")),
    (res("get", "nodes", name="b", user=NODE_A),
     (Decision.NO_OPINION, "node 'a' cannot read 'b', only its own Node object")),
    (res("update", "nodes", name="b", user=NODE_A), (Decision.ALLOW, "")),  # NodeRestriction's
    (res("update", "nodes", sub="status", name="a", user=NODE_A), (Decision.ALLOW, "")),
    (res("get", "nodes", sub="status", name="a", user=NODE_A), (Decision.NO_OPINION, "")),
    (res("create", "pods", sub="eviction", ns="default", name="p", user=NODE_A),
     (Decision.ALLOW, "")),
    (res("delete", "pods", ns="default", name="p", user=NODE_A), (Decision.ALLOW, "")),
    # not a node: the node authorizer has no opinion, selector or not
    (selected("list", "pods", "spec.nodeName=a", user=ALICE), (Decision.NO_OPINION, "")),
])
def test_node_reads_with_selectors(attributes: Attributes,
                                   expected: tuple[Decision, str]) -> None:
    assert node_decision(attributes) == expected


@pytest.mark.parametrize(("selector", "requirements"), [
    ("", ()),
    ("spec.nodeName=a", (("spec.nodeName", "=", "a"),)),
    ("spec.nodeName==a", (("spec.nodeName", "=", "a"),)),
    ("a!=b,c=d", (("a", "!=", "b"), ("c", "=", "d"))),
    (r"metadata.name=x\,y", (("metadata.name", "=", "x,y"),)),
    ("nonsense", ()),
    ("a=b=c", ()),  # an unescaped "=" in a value
])
def test_field_requirements(selector: str, requirements: tuple[tuple[str, str, str], ...],
                            ) -> None:
    assert field_requirements(selector) == requirements


# --- impersonation -----------------------------------------------------------------------------

class PolicyAuthorizer:
    def __init__(self, p: Policy) -> None:
        self.policy = p

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.policy.authorize(attributes)


def impersonators() -> PolicyAuthorizer:
    everything = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
    users_only = [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"],
                   "resourceNames": ["alice"]}]
    return PolicyAuthorizer(Policy.build(
        roles=[], cluster_roles=[role("all", everything), role("as-alice", users_only)],
        role_bindings=[],
        cluster_role_bindings=[
            binding("admins", "ClusterRole", "all", [{"kind": "Group", "name": "system:masters"}]),
            binding("carol", "ClusterRole", "as-alice", [{"kind": "User", "name": "carol"}])]))


async def test_impersonation() -> None:
    from apiserver.auth.impersonation import impersonate
    from common import errors

    admin = UserInfo("admin", groups=("system:masters",))
    authorizer = impersonators()
    assert await impersonate(admin, {}, authorizer) is admin
    alice = await impersonate(admin, {"impersonate-user": ["alice"]}, authorizer)
    assert alice == UserInfo("alice", groups=("system:authenticated",))
    bot = await impersonate(admin, {"impersonate-user": ["system:serviceaccount:ci:bot"],
                                    "impersonate-extra-scopes": ["a", "b"],
                                    "impersonate-uid": ["42"]}, authorizer)
    assert bot == UserInfo("system:serviceaccount:ci:bot", uid="42", groups=(
        "system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"),
        extra={"scopes": ("a", "b")})
    anonymous = await impersonate(admin, {"impersonate-user": ["system:anonymous"]}, authorizer)
    assert anonymous.groups == ("system:unauthenticated",)
    carol = UserInfo("carol", groups=("system:authenticated",))
    assert (await impersonate(carol, {"impersonate-user": ["alice"]}, authorizer)).name == "alice"
    with pytest.raises(errors.Forbidden) as refused:
        await impersonate(carol, {"impersonate-user": ["alice"],
                                  "impersonate-group": ["system:masters"]}, authorizer)
    assert refused.value.message == (
        'groups "system:masters" is forbidden: User "carol" cannot impersonate resource '
        '"groups" in API group "" at the cluster scope')
    with pytest.raises(errors.Forbidden):
        await impersonate(carol, {"impersonate-user": ["bob"]}, authorizer)
    with pytest.raises(errors.ApiError):
        await impersonate(admin, {"impersonate-group": ["devs"]}, authorizer)
