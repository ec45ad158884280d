"""The RBAC policy kube-apiserver creates at start (plugin/pkg/auth/authorizer/rbac/
bootstrappolicy: policy.go ClusterRoles and ClusterRoleBindings), and its reconciliation
(pkg/registry/rbac/reconciliation, run by the `rbac/bootstrap-roles` post-start hook).

admin, edit and view are aggregated roles in kube (an aggregation controller fills their
rules from the `aggregate-to-*` roles); kubelite has no such controller, so they are shipped
with the aggregated rules flattened in.

Reconciliation, as `kubectl auth reconcile` without --remove-extra-*: an object annotated
`rbac.authorization.kubernetes.io/autoupdate: "false"` is left alone; otherwise missing
labels, annotations, rules and subjects are added and what a user added is kept; a binding
whose roleRef changed is recreated.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from apiserver.auth.escalation import covers
from apiserver.auth.node import NODE_RULES
from apiserver.storage import Unavailable
from common import errors

log = logging.getLogger("apiserver.rbac")

Object = dict[str, Any]
RBAC_GROUP = "rbac.authorization.k8s.io"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
CACHE_WAIT = 10.0
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"  # kubeadm's apiserver-kubelet-client CN
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
CERTIFICATES = "certificates.k8s.io"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]


def rule(verbs: list[str], groups: list[str], resources: list[str], *,
         names: list[str] | None = None) -> Object:
    found: Object = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        found["resourceNames"] = names
    return found


def urls(verbs: list[str], paths: list[str]) -> Object:
    return {"verbs": verbs, "nonResourceURLs": paths}


EVENTS_RULE = rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"])

# aggregate-to-view
VIEW_RULES = [
    rule(READ, [""], ["pods", "replicationcontrollers", "replicationcontrollers/scale",
                      "serviceaccounts", "services", "services/status", "endpoints",
                      "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"]),
    rule(READ, [""], ["limitranges", "resourcequotas", "bindings", "events", "pods/status",
                      "resourcequotas/status", "namespaces/status",
                      "replicationcontrollers/status", "pods/log"]),
    rule(READ, [""], ["namespaces"]),
    rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    rule(READ, ["apps"], ["controllerrevisions", "statefulsets", "statefulsets/scale",
                          "statefulsets/status", "daemonsets", "daemonsets/status",
                          "deployments", "deployments/scale", "deployments/status",
                          "replicasets", "replicasets/scale", "replicasets/status"]),
    rule(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    rule(READ, ["batch"], ["jobs", "jobs/status", "cronjobs", "cronjobs/status"]),
    rule(READ, ["extensions"], ["daemonsets", "daemonsets/status", "deployments",
                                "deployments/scale", "deployments/status", "ingresses",
                                "ingresses/status", "replicasets", "replicasets/scale",
                                "replicasets/status", "replicationcontrollers/scale",
                                "networkpolicies"]),
    rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    rule(READ, ["networking.k8s.io"], ["networkpolicies", "ingresses", "ingresses/status"]),
]

# aggregate-to-edit
EDIT_RULES = [
    rule(READ, [""], ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets",
                      "services/proxy"]),
    rule(["impersonate"], [""], ["serviceaccounts"]),
    rule(WRITE, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
    rule(["create"], [""], ["pods/eviction"]),
    rule(WRITE, [""], ["replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                       "services", "services/proxy", "persistentvolumeclaims", "configmaps",
                       "secrets", "events"]),
    rule(["create"], [""], ["serviceaccounts/token"]),
    rule(WRITE, ["apps"], ["statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                           "deployments/scale", "deployments/rollback", "replicasets",
                           "replicasets/scale"]),
    rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    rule(WRITE, ["batch"], ["jobs", "cronjobs"]),
    rule(WRITE, ["extensions"], ["daemonsets", "deployments", "deployments/scale",
                                 "deployments/rollback", "ingresses", "replicasets",
                                 "replicasets/scale", "replicationcontrollers/scale",
                                 "networkpolicies"]),
    rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    rule(WRITE, ["networking.k8s.io"], ["networkpolicies", "ingresses"]),
    rule(READ_WRITE, ["coordination.k8s.io"], ["leases"]),
]

# aggregate-to-admin
ADMIN_RULES = [
    rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    rule(READ_WRITE, [RBAC_GROUP], ["roles", "rolebindings"]),
]

DASHBOARD_URLS = ["/dashboard", "/dashboard/*"]
PUBLIC_INFO_URLS = ["/livez", "/readyz", "/healthz", "/version", "/version/"]


def cluster_role(name: str, rules: list[Object], labels: dict[str, str] | None = None) -> Object:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {**BOOTSTRAP_LABELS, **(labels or {})},
                         "annotations": {AUTOUPDATE: "true"}},
            "rules": copy.deepcopy(rules)}


def cluster_role_binding(name: str, role: str, subjects: list[tuple[str, str]]) -> Object:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS),
                         "annotations": {AUTOUPDATE: "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": kind, "apiGroup": RBAC_GROUP, "name": subject}
                         for kind, subject in subjects]}


# The controllers' own roles (bootstrappolicy/controller_policy.go), named
# system:controller:<controller>. kube binds each to its ServiceAccount in kube-system
# (kube-controller-manager --use-service-account-credentials); kubelite's
# controller-manager runs every controller with its own certificate, so each binding also
# names the system:kube-controller-manager user (kubelite's addition).
CONTROLLER_ROLE_PREFIX = "system:controller:"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


def controller_roles() -> list[Object]:
    apps = ["apps", "extensions"]
    roles = {
        "node-controller": [
            rule(["get", "list", "update", "delete", "patch"], [""], ["nodes"]),
            rule(["patch", "update"], [""], ["nodes/status"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            rule(["list", "get", "delete"], [""], ["pods"]),
            EVENTS_RULE,
        ],
        "taint-eviction-controller": [
            rule(["get", "list", "watch", "delete"], [""], ["pods"]),
            rule(["patch"], [""], ["pods/status"]),
            rule(READ, [""], ["nodes"]),
            EVENTS_RULE,
        ],
        "namespace-controller": [
            rule(["get", "list", "watch", "delete"], [""], ["namespaces"]),
            rule(["update"], [""], ["namespaces/finalize", "namespaces/status"]),
            rule(["get", "list", "delete", "deletecollection"], ["*"], ["*"]),
        ],
        "replicaset-controller": [
            rule(["get", "list", "watch", "update"], apps, ["replicasets"]),
            rule(["update"], apps, ["replicasets/status"]),
            rule(["update"], apps, ["replicasets/finalizers"]),
            rule(["list", "watch", "patch", "create", "delete"], [""], ["pods"]),
            EVENTS_RULE,
        ],
        "job-controller": [
            rule(["get", "list", "watch", "update", "patch"], ["batch"], ["jobs"]),
            rule(["update"], ["batch"], ["jobs/status"]),
            rule(["update"], ["batch"], ["jobs/finalizers"]),
            rule(["list", "watch", "create", "delete", "patch"], [""], ["pods"]),
            EVENTS_RULE,
        ],
        "ttl-after-finished-controller": [
            rule(["delete", "get", "list", "watch"], ["batch"], ["jobs"]),
            EVENTS_RULE,
        ],
        "generic-garbage-collector": [
            rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"]),
            EVENTS_RULE,
        ],
        "endpointslice-controller": [
            rule(READ, [""], ["services", "pods", "nodes"]),
            # it owns the slices it writes with blockOwnerDeletion: an update of the
            # Service's finalizers, as the OwnerReferencesPermissionEnforcement check asks
            rule(["update"], [""], ["services/finalizers"]),
            rule(["get", "list", "create", "update", "delete"], ["discovery.k8s.io"],
                 ["endpointslices"]),
            EVENTS_RULE,
        ],
        # csrapproving and csrsigning (kube's certificate-controller role)
        "certificate-controller": [
            rule(["delete", "get", "list", "watch"], [CERTIFICATES], ["certificatesigningrequests"]),
            rule(["update"], [CERTIFICATES], ["certificatesigningrequests/approval",
                                              "certificatesigningrequests/status"]),
            rule(["approve"], [CERTIFICATES], ["signers"],
                 names=[LEGACY_UNKNOWN, KUBELET_CLIENT_SIGNER]),
            rule(["sign"], [CERTIFICATES], ["signers"],
                 names=[LEGACY_UNKNOWN, APISERVER_CLIENT_SIGNER, KUBELET_CLIENT_SIGNER,
                        KUBELET_SERVING_SIGNER]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            EVENTS_RULE,
        ],
        "deployment-controller": [
            rule(["get", "list", "watch", "update"], apps, ["deployments"]),
            rule(["update"], apps, ["deployments/status"]),
            rule(["update"], apps, ["deployments/finalizers"]),
            rule(["get", "list", "watch", "create", "update", "patch", "delete"], apps,
                 ["replicasets"]),
            rule(["get", "list", "watch", "update"], [""], ["pods"]),
            EVENTS_RULE,
        ],
    }
    return [cluster_role(CONTROLLER_ROLE_PREFIX + name, rules) for name, rules in roles.items()]


def controller_role_bindings() -> list[Object]:
    found = []
    for role in controller_roles():
        name = role["metadata"]["name"]
        found_binding = cluster_role_binding(name, name, [("User", CONTROLLER_MANAGER_USER)])
        found_binding["subjects"].insert(0, {
            "kind": "ServiceAccount", "name": name.removeprefix(CONTROLLER_ROLE_PREFIX),
            "namespace": "kube-system"})
        found.append(found_binding)
    return found


def cluster_roles() -> list[Object]:
    return [
        cluster_role("cluster-admin", [rule(["*"], ["*"], ["*"]), urls(["*"], ["*"])]),
        cluster_role("admin", VIEW_RULES + EDIT_RULES + ADMIN_RULES),
        cluster_role("edit", VIEW_RULES + EDIT_RULES,
                     {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
        cluster_role("view", VIEW_RULES,
                     {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
        cluster_role("system:discovery", [urls(["get"], [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
            "/openapi/*", "/readyz", "/version", "/version/"])]),
        # kubelite's own: the dashboard's page and its diagram renderer, to anyone signed in
        # (the page reads nothing itself: what it shows is what the user's RBAC lets it list)
        cluster_role("system:kubelite-dashboard", [
            urls(["get"], DASHBOARD_URLS), urls(["post"], ["/dashboard/timeline"])]),
        cluster_role("system:basic-user", [
            rule(["create"], ["authorization.k8s.io"],
                 ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
        ]),
        cluster_role("system:public-info-viewer", [urls(["get"], PUBLIC_INFO_URLS)]),
        cluster_role("system:monitoring", [urls(["get"], [
            "/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*",
            "/metrics", "/metrics/slis"])]),
        cluster_role("system:auth-delegator", [
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
        ]),
        # full access to the kubelet's API; kubeadm binds the apiserver's kubelet client to it
        cluster_role("system:kubelet-api-admin", [
            rule(READ, [""], ["nodes"]),
            rule(["proxy"], [""], ["nodes"]),
            rule(["*"], [""], ["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log",
                               "nodes/healthz", "nodes/pods", "nodes/checkpoint",
                               "nodes/configz"]),
        ]),
        cluster_role("system:node", NODE_RULES),
        # what joining nodes may do (kubeadm binds them to its bootstrap-token groups)
        cluster_role("system:node-bootstrapper", [
            rule(["create", "get", "list", "watch"], [CERTIFICATES],
                 ["certificatesigningrequests"])]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule(["create"], [CERTIFICATES], ["certificatesigningrequests/nodeclient"])]),
        cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule(["create"], [CERTIFICATES], ["certificatesigningrequests/selfnodeclient"])]),
        *(cluster_role(f"system:certificates.k8s.io:{signer.split('/')[1]}-approver", [
            rule(["approve"], [CERTIFICATES], ["signers"], names=[signer])])
          for signer in (LEGACY_UNKNOWN, APISERVER_CLIENT_SIGNER, KUBELET_CLIENT_SIGNER,
                         KUBELET_SERVING_SIGNER)),
        cluster_role("system:node-proxier", [
            rule(["list", "watch"], [""], ["services", "endpoints"]),
            rule(READ, [""], ["nodes"]),
            EVENTS_RULE,
            rule(["list", "watch"], ["discovery.k8s.io"], ["endpointslices"]),
        ]),
        # kube's role is list/watch of endpoints and services; the cluster DNS here reads
        # EndpointSlices (kubelite's addition, as CoreDNS's own system:coredns role has)
        cluster_role("system:kube-dns", [
            rule(["list", "watch"], [""], ["endpoints", "services"]),
            rule(["list", "watch"], ["discovery.k8s.io"], ["endpointslices"]),
        ]),
        cluster_role("system:kube-scheduler", [
            EVENTS_RULE,
            rule(["create"], ["coordination.k8s.io"], ["leases"]),
            rule(["get", "update"], ["coordination.k8s.io"], ["leases"], names=["kube-scheduler"]),
            rule(["create"], [""], ["endpoints"]),
            rule(["get", "update"], [""], ["endpoints"], names=["kube-scheduler"]),
            rule(READ, [""], ["nodes"]),
            rule(["get", "list", "watch", "delete"], [""], ["pods"]),
            # kubelite's addition to kube's role: the scheduler explains an unschedulable
            # pod node by node in its scheduler.kubelite.io/unschedulable-nodes annotation
            rule(["patch"], [""], ["pods"]),
            rule(["create"], [""], ["pods/binding", "bindings"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            rule(READ, [""], ["services", "replicationcontrollers"]),
            rule(READ, ["apps", "extensions"], ["replicasets"]),
            rule(READ, ["apps"], ["statefulsets"]),
            rule(READ, ["policy"], ["poddisruptionbudgets"]),
            rule(READ, [""], ["persistentvolumeclaims", "persistentvolumes"]),
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            rule(READ, ["storage.k8s.io"], ["csinodes"]),
            rule(READ, [""], ["namespaces"]),
            rule(READ, ["storage.k8s.io"], ["csidrivers"]),
            rule(READ, ["storage.k8s.io"], ["csistoragecapacities"]),
        ]),
        cluster_role("system:kube-controller-manager", [
            EVENTS_RULE,
            rule(["create"], ["coordination.k8s.io"], ["leases"]),
            rule(["get", "update"], ["coordination.k8s.io"], ["leases"],
                 names=["kube-controller-manager"]),
            rule(["create"], [""], ["endpoints"]),
            rule(["get", "update"], [""], ["endpoints"], names=["kube-controller-manager"]),
            rule(["create"], [""], ["secrets", "serviceaccounts"]),
            rule(["delete"], [""], ["secrets"]),
            rule(["get"], [""], ["configmaps", "namespaces", "secrets", "serviceaccounts"]),
            rule(["update"], [""], ["secrets", "serviceaccounts"]),
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            rule(["list", "watch"], ["*"], ["*"]),
            rule(["create"], [""], ["serviceaccounts/token"]),
        ]),
        *controller_roles(),
    ]


def kube_dns_binding() -> Object:
    """kube binds system:kube-dns to the kube-system/kube-dns ServiceAccount; kubelite's
    cluster DNS signs in with a certificate whose CN is system:kube-dns (common/pki.py), so
    the binding names that user too."""
    found = cluster_role_binding("system:kube-dns", "system:kube-dns",
                                 [("User", "system:kube-dns")])
    found["subjects"].insert(0, {"kind": "ServiceAccount", "name": "kube-dns",
                                 "namespace": "kube-system"})
    return found


KUBE_DNS_SERVICE = "system:kubelite:kube-dns-service"


def in_namespace(obj: Object, kind: str, namespace: str) -> Object:
    """A Role or RoleBinding of bootstrappolicy.NamespaceRoles(): the cluster-scoped shape,
    namespaced."""
    return {**obj, "kind": kind, "metadata": {**obj["metadata"], "namespace": namespace}}


BOOTSTRAP_SIGNER = CONTROLLER_ROLE_PREFIX + "bootstrap-signer"
TOKEN_CLEANER = CONTROLLER_ROLE_PREFIX + "token-cleaner"


def namespace_roles() -> list[Object]:
    """The namespaced bootstrap roles: kubelite's cluster DNS keeps its own selector-less
    kube-system/kube-dns Service and EndpointSlice (in kube, the addon manager writes them
    from CoreDNS's manifest), so its user may get, create and update those there; the
    bootstrap signer signs kube-public/cluster-info with the tokens of kube-system, and the
    token cleaner deletes expired tokens (kube's NamespaceRoles)."""
    return [
        in_namespace(cluster_role(KUBE_DNS_SERVICE, [
            rule(["get", "create", "update"], [""], ["services"]),
            rule(["get", "create", "update"], ["discovery.k8s.io"], ["endpointslices"]),
        ]), "Role", "kube-system"),
        in_namespace(cluster_role(BOOTSTRAP_SIGNER, [
            rule(READ, [""], ["configmaps"]),
            rule(["update"], [""], ["configmaps"], names=["cluster-info"]),
            EVENTS_RULE,
        ]), "Role", "kube-public"),
        in_namespace(cluster_role(BOOTSTRAP_SIGNER, [rule(READ, [""], ["secrets"])]),
                     "Role", "kube-system"),
        in_namespace(cluster_role(TOKEN_CLEANER, [
            rule(["delete", "get", "list", "watch"], [""], ["secrets"]), EVENTS_RULE,
        ]), "Role", "kube-system"),
    ]


def namespace_role_bindings() -> list[Object]:
    def role_binding(name: str, namespace: str, subjects: list[tuple[str, str]],
                     service_account: str = "") -> Object:
        binding = cluster_role_binding(name, name, subjects)
        binding["roleRef"]["kind"] = "Role"
        if service_account:
            binding["subjects"].insert(0, {"kind": "ServiceAccount", "name": service_account,
                                           "namespace": "kube-system"})
        return in_namespace(binding, "RoleBinding", namespace)

    manager = [("User", CONTROLLER_MANAGER_USER)]
    return [
        role_binding(KUBE_DNS_SERVICE, "kube-system", [("User", "system:kube-dns")]),
        role_binding(BOOTSTRAP_SIGNER, "kube-public", manager, "bootstrap-signer"),
        role_binding(BOOTSTRAP_SIGNER, "kube-system", manager, "bootstrap-signer"),
        role_binding(TOKEN_CLEANER, "kube-system", manager, "token-cleaner"),
    ]


def cluster_role_bindings() -> list[Object]:
    binding = cluster_role_binding
    return [
        binding("cluster-admin", "cluster-admin", [("Group", "system:masters")]),
        binding("system:discovery", "system:discovery", [("Group", "system:authenticated")]),
        binding("system:basic-user", "system:basic-user", [("Group", "system:authenticated")]),
        binding("system:kubelite-dashboard", "system:kubelite-dashboard",
                [("Group", "system:authenticated")]),
        binding("system:public-info-viewer", "system:public-info-viewer",
                [("Group", "system:authenticated"), ("Group", "system:unauthenticated")]),
        binding("system:monitoring", "system:monitoring", [("Group", "system:monitoring")]),
        binding("system:node", "system:node", []),  # the Node authorizer does the work
        binding("system:node-proxier", "system:node-proxier", [("User", "system:kube-proxy")]),
        binding("system:kube-scheduler", "system:kube-scheduler",
                [("User", "system:kube-scheduler")]),
        kube_dns_binding(),
        binding("system:kube-controller-manager", "system:kube-controller-manager",
                [("User", "system:kube-controller-manager")]),
        # kubeadm's (1.37+, which no longer puts this certificate in a superuser group), not
        # kube-apiserver's: kubelets authorize the apiserver's calls (logs, ...) with it
        binding("kubeadm:apiserver-kubelet-client", "system:kubelet-api-admin",
                [("User", KUBELET_CLIENT_USER)]),
        *controller_role_bindings(),
    ]


# --- reconciliation (pure) -------------------------------------------------------------------

def merge_meta(existing: Object, expected: Object) -> Object:
    """Missing labels and annotations added; existing values kept."""
    meta = dict(existing.get("metadata") or {})
    for key in ("labels", "annotations"):
        wanted = (expected.get("metadata") or {}).get(key) or {}
        meta[key] = {**wanted, **(meta.get(key) or {})}
    return meta


def autoupdate(existing: Object) -> bool:
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    return annotations.get(AUTOUPDATE) != "false"


def reconcile_role(existing: Object | None, expected: Object) -> Object | None:
    """computeReconciledRole: the role to write, or None when nothing needs changing."""
    if existing is None:
        return expected
    if not autoupdate(existing):
        return None
    _, missing = covers(existing.get("rules") or [], expected.get("rules") or [])
    meta = merge_meta(existing, expected)
    if not missing and meta == existing.get("metadata"):
        return None
    return {**existing, "metadata": meta, "rules": [*(existing.get("rules") or []), *missing]}


def subject_key(subject: Object) -> tuple[str, str, str, str]:
    return (subject.get("kind", ""), subject.get("apiGroup", ""), subject.get("name", ""),
            subject.get("namespace", ""))


def reconcile_binding(existing: Object | None, expected: Object,
                      ) -> tuple[Object | None, bool]:
    """computeReconciledRoleBinding: (the binding to write or None, whether it must be
    recreated because its roleRef changed)."""
    if existing is None:
        return expected, False
    if not autoupdate(existing):
        return None, False
    if existing.get("roleRef") != expected.get("roleRef"):
        return {**expected, "metadata": {**merge_meta(existing, expected),
                                         "name": expected["metadata"]["name"]}}, True
    subjects = list(existing.get("subjects") or [])
    have = {subject_key(s) for s in subjects}
    subjects += [s for s in expected.get("subjects") or [] if subject_key(s) not in have]
    meta = merge_meta(existing, expected)
    if subjects == list(existing.get("subjects") or []) and meta == existing.get("metadata"):
        return None, False
    return {**existing, "metadata": meta, "subjects": subjects}, False


# --- against the registry ---------------------------------------------------------------------

async def reconcile(registry: Any, *, attempts: int = 30, pause: float = 1.0) -> None:
    """Reconcile the bootstrap policy, retrying while etcd is unavailable or another
    apiserver writes the same objects (kube's hook retries for 30 s, then fails start)."""
    for attempt in range(1, attempts + 1):
        try:
            await reconcile_once(registry)
            return
        except (Unavailable, errors.Conflict) as e:
            if attempt == attempts:
                raise
            log.warning("bootstrap RBAC policy not reconciled yet: %s", e)
            await asyncio.sleep(pause)


async def reconcile_once(registry: Any) -> None:
    """Create or update every bootstrap ClusterRole and ClusterRoleBinding, and the
    namespaced Roles and RoleBindings."""
    from apiserver.resources.namespaces import ensure_default_namespaces
    from apiserver.resources.rbac import (
        CLUSTER_ROLE_BINDINGS,
        CLUSTER_ROLES,
        ROLE_BINDINGS,
        ROLES,
    )

    # the namespaced roles' namespaces first, as kube's hook creates them when needed
    await ensure_default_namespaces(registry)
    roles = [(CLUSTER_ROLES, r) for r in cluster_roles()] + [(ROLES, r) for r in namespace_roles()]
    bindings = ([(CLUSTER_ROLE_BINDINGS, b) for b in cluster_role_bindings()]
                + [(ROLE_BINDINGS, b) for b in namespace_role_bindings()])
    for resource, expected in roles:
        namespace, name = expected["metadata"].get("namespace"), expected["metadata"]["name"]
        existing = await _get(registry, resource, namespace, name)
        wanted = reconcile_role(existing, expected)
        if wanted is not None:
            await _write(registry, resource, namespace, name, wanted, existing is not None)
    for resource, expected in bindings:
        namespace, name = expected["metadata"].get("namespace"), expected["metadata"]["name"]
        existing = await _get(registry, resource, namespace, name)
        wanted, recreate = reconcile_binding(existing, expected)
        if wanted is None:
            continue
        if recreate:
            await registry.delete(resource, namespace, name)
        await _write(registry, resource, namespace, name, wanted,
                     existing is not None and not recreate)
    # serve only once the authorizer sees the policy (kube's readyz waits for this hook)
    revision = await registry.storage.revision()
    for resource in (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS):
        await registry.cache(resource).wait_fresh(revision, CACHE_WAIT)


async def _get(registry: Any, resource: Any, namespace: str | None, name: str) -> Object | None:
    try:
        obj: Object = await registry.get(resource, namespace, name)
        return obj
    except errors.NotFound:
        return None


async def _write(registry: Any, resource: Any, namespace: str | None, name: str, obj: Object,
                 exists: bool) -> None:
    manager = "kube-apiserver"
    where = f"{namespace}/{name}" if namespace else name
    if exists:
        await registry.update(resource, namespace, name, obj, manager=manager)
        log.info("updated %s %s (bootstrap policy)", resource.plural, where)
    else:
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        try:
            await registry.create(resource, namespace, {**obj, "metadata": meta},
                                  manager=manager)
        except errors.AlreadyExists:
            return  # another apiserver made it meanwhile
        log.info("created %s %s (bootstrap policy)", resource.plural, where)
