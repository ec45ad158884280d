"""RBAC over HTTP: the bootstrap policy, SubjectAccessReviews for the issue's matrix, the
escalation check and NodeRestriction on writes, and kubectl's `auth can-i` / `whoami`.

Authentication is not in this branch (every request is system:anonymous), so the in-process
tests put the user in the ASGI scope where the authenticator will (USER_SCOPE_KEY), and the
matrix is asked as SubjectAccessReviews with explicit spec.user/groups, as kube's own
integration tests do. Expectations are written from kube's documented default roles
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings
and .../node/).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.app import ResourceFront, create_app
from apiserver.auth import USER_SCOPE_KEY, UserInfo
from tests.support import ApiServer, Etcd, Kubectl, table_lines, unique

RBAC = "/apis/rbac.authorization.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"
ADMIN = UserInfo("admin", groups=("system:masters", "system:authenticated"))
AUTHENTICATED = ("system:authenticated",)

Client = Callable[[UserInfo], httpx.AsyncClient]


@pytest.fixture
async def front(etcd: Etcd) -> AsyncIterator[ResourceFront]:
    app = create_app([etcd.endpoint], etcd_prefix=f"/{unique('rbac')}",
                     authorization_modes=("Node", "RBAC"))
    async with app.app.router.lifespan_context(app.app):
        yield app


@pytest.fixture
async def as_user(front: ResourceFront) -> AsyncIterator[Client]:
    """A client whose requests come from one user (what authentication will set)."""
    clients: list[httpx.AsyncClient] = []

    def client(user: UserInfo) -> httpx.AsyncClient:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            await front({**scope, USER_SCOPE_KEY: user}, receive, send)

        made = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kubelite")
        clients.append(made)
        return made

    yield client
    for made in clients:
        await made.aclose()


def subjects(kind: str, name: str) -> list[dict[str, str]]:
    return [{"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name}]


def binding(name: str, role_kind: str, role: str, subject: list[dict[str, str]],
            namespace: str | None = None) -> dict[str, Any]:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}, "subjects": subject}


async def create(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(path, json=body)


async def namespace(client: httpx.AsyncClient, name: str) -> None:
    r = await client.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code in (201, 409), r.text


def sar(user: UserInfo, verb: str, resource: str = "", *, group: str = "", sub: str = "",
        ns: str = "", name: str = "", path: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if path:
        spec["nonResourceAttributes"] = {"verb": verb, "path": path}
    else:
        spec["resourceAttributes"] = {"verb": verb, "resource": resource, "group": group,
                                      "subresource": sub, "namespace": ns, "name": name}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


async def allowed(client: httpx.AsyncClient, review: dict[str, Any]) -> bool:
    r = await client.post(f"{AUTHZ}/subjectaccessreviews", json=review)
    assert r.status_code == 201, r.text
    return bool(r.json()["status"]["allowed"])


async def eventually_allowed(client: httpx.AsyncClient, review: dict[str, Any]) -> None:
    """Bindings reach the authorizer through the watch cache: a few ms after the write."""
    for _ in range(100):
        if await allowed(client, review):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never allowed: {review}")


async def test_bootstrap_policy_is_served(as_user: Client) -> None:
    admin = as_user(ADMIN)
    r = await admin.get(f"{RBAC}/clusterroles/cluster-admin")
    assert r.status_code == 200
    assert r.json()["metadata"]["annotations"] == {
        "rbac.authorization.kubernetes.io/autoupdate": "true"}
    assert r.json()["rules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                 {"verbs": ["*"], "nonResourceURLs": ["*"]}]
    r = await admin.get(f"{RBAC}/clusterrolebindings", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    rows = {row["cells"][0]: row["cells"] for row in r.json()["rows"]}
    assert rows["system:public-info-viewer"][1] == "ClusterRole/system:public-info-viewer"
    assert rows["system:public-info-viewer"][4] == "system:authenticated, system:unauthenticated"
    assert rows["system:kube-scheduler"][3] == "system:kube-scheduler"


VIEWER = UserInfo("vera", groups=AUTHENTICATED)
EDITOR = UserInfo("ed", groups=AUTHENTICATED)
NODE_A = UserInfo("system:node:a", groups=("system:nodes", "system:authenticated"))
SCHEDULER = UserInfo("system:kube-scheduler", groups=AUTHENTICATED)
ANONYMOUS = UserInfo("system:anonymous", groups=("system:unauthenticated",))
LEASES = "coordination.k8s.io"

# (who, verb, resource, subresource, group, namespace, name, allowed) — kube's default policy
MATRIX: list[tuple[UserInfo, str, str, str, str, str, str, bool]] = [
    # anonymous: only what system:public-info-viewer allows
    (ANONYMOUS, "get", "pods", "", "", "default", "", False),
    (ANONYMOUS, "list", "nodes", "", "", "", "", False),
    (ANONYMOUS, "create", "pods", "binding", "", "default", "p", False),
    (ANONYMOUS, "delete", "nodes", "", "", "", "a", False),
    (ANONYMOUS, "update", "leases", "", LEASES, "kube-system", "kube-scheduler", False),
    (ANONYMOUS, "delete", "namespaces", "", "", "", "kube-node-lease", False),
    (ANONYMOUS, "create", "selfsubjectaccessreviews", "", "authorization.k8s.io", "", "", False),
    # view, everywhere: read namespaced objects, never write, no nodes, leases or RBAC
    (VIEWER, "get", "pods", "", "", "team", "web", True),
    (VIEWER, "list", "pods", "", "", "", "", True),
    (VIEWER, "watch", "events", "", "", "default", "", True),
    (VIEWER, "get", "pods", "log", "", "team", "web", True),
    (VIEWER, "get", "pods", "status", "", "team", "web", True),
    (VIEWER, "get", "namespaces", "", "", "", "team", True),
    (VIEWER, "create", "pods", "", "", "team", "", False),
    (VIEWER, "delete", "pods", "", "", "team", "web", False),
    (VIEWER, "update", "pods", "status", "", "team", "web", False),
    (VIEWER, "list", "nodes", "", "", "", "", False),
    (VIEWER, "get", "leases", "", LEASES, "team", "x", False),
    (VIEWER, "list", "roles", "", "rbac.authorization.k8s.io", "team", "", False),
    (VIEWER, "create", "selfsubjectaccessreviews", "", "authorization.k8s.io", "", "", True),
    # edit in namespace team only
    (EDITOR, "create", "pods", "", "", "team", "", True),
    (EDITOR, "delete", "pods", "", "", "team", "web", True),
    (EDITOR, "deletecollection", "pods", "", "", "team", "", True),
    (EDITOR, "patch", "pods", "", "", "team", "web", True),
    (EDITOR, "create", "pods", "eviction", "", "team", "web", True),
    (EDITOR, "create", "events", "", "", "team", "", True),
    (EDITOR, "update", "leases", "", LEASES, "team", "x", True),
    (EDITOR, "create", "pods", "", "", "default", "", False),
    (EDITOR, "list", "pods", "", "", "", "", False),
    (EDITOR, "create", "pods", "binding", "", "team", "web", False),
    (EDITOR, "update", "pods", "status", "", "team", "web", False),
    (EDITOR, "create", "roles", "", "rbac.authorization.k8s.io", "team", "", False),
    (EDITOR, "create", "rolebindings", "", "rbac.authorization.k8s.io", "team", "", False),
    (EDITOR, "delete", "namespaces", "", "", "", "team", False),
    (EDITOR, "get", "nodes", "", "", "", "a", False),
    # the kubelet of node a (the Node authorizer; NodeRestriction narrows its writes)
    # kube 1.32+ (AuthorizeNodeWithSelectors): its own Node only, and pods only through
    # the spec.nodeName=a field selector, which a review without one does not have
    (NODE_A, "get", "nodes", "", "", "", "a", True),
    (NODE_A, "get", "nodes", "", "", "", "b", False),
    (NODE_A, "watch", "pods", "", "", "", "", False),
    (NODE_A, "patch", "nodes", "status", "", "", "a", True),
    (NODE_A, "create", "nodes", "", "", "", "", True),
    (NODE_A, "update", "pods", "status", "", "default", "p", True),
    (NODE_A, "create", "events", "", "", "default", "", True),
    (NODE_A, "get", "leases", "", LEASES, "kube-node-lease", "a", True),
    (NODE_A, "update", "leases", "", LEASES, "kube-node-lease", "a", True),
    (NODE_A, "update", "leases", "", LEASES, "kube-node-lease", "b", False),
    (NODE_A, "update", "leases", "", LEASES, "kube-system", "kube-scheduler", False),
    (NODE_A, "delete", "nodes", "", "", "", "a", False),
    (NODE_A, "create", "pods", "binding", "", "default", "p", False),
    (NODE_A, "update", "pods", "", "", "default", "p", False),
    (NODE_A, "delete", "namespaces", "", "", "", "kube-node-lease", False),
    (NODE_A, "list", "roles", "", "rbac.authorization.k8s.io", "", "", False),
    # the scheduler: read nodes and pods, bind, write pod status, its own lease
    (SCHEDULER, "list", "nodes", "", "", "", "", True),
    (SCHEDULER, "watch", "pods", "", "", "", "", True),
    (SCHEDULER, "create", "pods", "binding", "", "default", "p", True),
    (SCHEDULER, "patch", "pods", "status", "", "default", "p", True),
    (SCHEDULER, "delete", "pods", "", "", "default", "p", True),
    (SCHEDULER, "create", "events", "", "events.k8s.io", "default", "", True),
    (SCHEDULER, "create", "leases", "", LEASES, "kube-system", "", True),
    (SCHEDULER, "update", "leases", "", LEASES, "kube-system", "kube-scheduler", True),
    (SCHEDULER, "update", "leases", "", LEASES, "kube-system", "kube-controller-manager", False),
    (SCHEDULER, "create", "pods", "", "", "default", "", False),
    (SCHEDULER, "update", "nodes", "", "", "", "a", False),
    (SCHEDULER, "patch", "nodes", "status", "", "", "a", False),
    (SCHEDULER, "delete", "namespaces", "", "", "", "kube-node-lease", False),
]

NON_RESOURCE_MATRIX = [
    (ANONYMOUS, "/version", True), (ANONYMOUS, "/healthz", True), (ANONYMOUS, "/readyz", True),
    (ANONYMOUS, "/api", False), (ANONYMOUS, "/apis/apps/v1", False),
    (VIEWER, "/api", True), (VIEWER, "/apis/apps/v1", True), (VIEWER, "/openapi/v3", True),
    (VIEWER, "/metrics", False), (NODE_A, "/metrics", False),
    (UserInfo("prometheus", groups=("system:monitoring", "system:authenticated")), "/metrics",
     True),
]


async def test_default_policy_matrix(as_user: Client) -> None:
    admin = as_user(ADMIN)
    await namespace(admin, "team")
    for body in (binding("vera-view", "ClusterRole", "view", subjects("User", "vera")),
                 binding("ed-edit", "ClusterRole", "edit", subjects("User", "ed"), "team")):
        path = (f"{RBAC}/namespaces/team/rolebindings" if body["kind"] == "RoleBinding"
                else f"{RBAC}/clusterrolebindings")
        r = await create(admin, path, body)
        assert r.status_code == 201, r.text
    await eventually_allowed(admin, sar(VIEWER, "get", "pods", ns="team"))
    await eventually_allowed(admin, sar(EDITOR, "create", "pods", ns="team"))
    wrong = []
    for user, verb, resource, sub, group, ns, name, expected in MATRIX:
        review = sar(user, verb, resource, group=group, sub=sub, ns=ns, name=name)
        if await allowed(admin, review) is not expected:
            wrong.append((user.name, verb, resource, sub, ns, name, expected))
    for user, path, expected in NON_RESOURCE_MATRIX:
        if await allowed(admin, sar(user, "get", path=path)) is not expected:
            wrong.append((user.name, "get", path, expected))
    assert wrong == []


async def test_review_validation_and_verbs(as_user: Client) -> None:
    admin = as_user(ADMIN)
    r = await admin.post(f"{AUTHZ}/subjectaccessreviews", json={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
    assert r.status_code == 422
    assert r.json()["message"] == ('SubjectAccessReview.authorization.k8s.io "" is invalid: '
                                   'spec.user: Invalid value: "": at least one of user or group '
                                   "must be specified")
    assert (await admin.get(f"{AUTHZ}/subjectaccessreviews")).status_code == 405
    r = await admin.post(f"{AUTHZ}/selfsubjectaccessreviews", json={
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})
    assert r.status_code == 201 and r.json()["status"]["allowed"] is True
    r = await as_user(VIEWER).post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
    assert r.status_code == 201
    assert r.json()["status"]["userInfo"] == {"username": "vera",
                                              "groups": ["system:authenticated"]}
    r = await as_user(VIEWER).post(f"{AUTHZ}/selfsubjectrulesreviews",
                                   json={"spec": {"namespace": "default"}})
    status = r.json()["status"]
    assert status["incomplete"] is False
    assert {"verbs": ["get"], "nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version",
                                                  "/version/"]} in status["nonResourceRules"]
    assert {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"]} in status["resourceRules"]


LEAD = UserInfo("lead", groups=AUTHENTICATED)


def role_body(name: str, rules: list[dict[str, Any]], ns: str = "team") -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": ns}, "rules": rules}


async def test_escalation_check(as_user: Client) -> None:
    admin, lead = as_user(ADMIN), as_user(LEAD)
    await namespace(admin, "team")
    r = await create(admin, f"{RBAC}/namespaces/team/rolebindings",
                     binding("lead-admin", "ClusterRole", "admin", subjects("User", "lead"),
                             "team"))
    assert r.status_code == 201, r.text
    await eventually_allowed(admin, sar(LEAD, "create", "roles", group="rbac.authorization.k8s.io",
                                        ns="team"))
    roles = f"{RBAC}/namespaces/team/roles"
    r = await create(lead, roles, role_body("pod-reader", [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]))
    assert r.status_code == 201, r.text
    r = await create(lead, roles, role_body("node-reader", [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes", "pods"]}]))
    assert r.status_code == 403
    assert r.json()["message"] == (
        'roles.rbac.authorization.k8s.io "node-reader" is forbidden: user "lead" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not '
        'currently held:\n{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}')
    bindings = f"{RBAC}/namespaces/team/rolebindings"
    r = await create(lead, bindings, binding("v", "ClusterRole", "view", subjects("User", "x"),
                                             "team"))
    assert r.status_code == 201, r.text
    r = await create(lead, bindings, binding("root", "ClusterRole", "cluster-admin",
                                             subjects("User", "x"), "team"))
    assert r.status_code == 403
    assert "is attempting to grant RBAC permissions not currently held" in r.json()["message"]
    r = await create(lead, bindings, binding("ghost", "ClusterRole", "no-such-role",
                                             subjects("User", "x"), "team"))
    assert r.status_code == 403
    assert r.json()["message"] == (
        'rolebindings.rbac.authorization.k8s.io "ghost" is forbidden: '
        'clusterrole.rbac.authorization.k8s.io "no-such-role" not found')
    r = await create(lead, f"{RBAC}/clusterrolebindings",
                     binding("lead-view", "ClusterRole", "view", subjects("User", "lead")))
    assert r.status_code == 403
    # `bind` on a role lets one bind it without holding it; `escalate` lets one write it
    r = await create(admin, roles, role_body("delegate", [
        {"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["clusterroles"], "resourceNames": ["cluster-admin"]},
        {"verbs": ["escalate"], "apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles"]}]))
    assert r.status_code == 201, r.text
    r = await create(admin, bindings, binding("lead-delegate", "Role", "delegate",
                                              subjects("User", "lead"), "team"))
    assert r.status_code == 201, r.text
    await eventually_allowed(admin, sar(LEAD, "bind", "clusterroles",
                                        group="rbac.authorization.k8s.io", ns="team",
                                        name="cluster-admin"))
    r = await create(lead, bindings, binding("root", "ClusterRole", "cluster-admin",
                                             subjects("User", "x"), "team"))
    assert r.status_code == 201, r.text
    r = await create(lead, roles, role_body("node-reader", [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]))
    assert r.status_code == 201, r.text
    # roleRef is immutable
    r = await lead.patch(f"{bindings}/v", json={"roleRef": {"name": "edit"}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422
    assert "roleRef: Invalid value" in r.json()["message"]
    assert "cannot change roleRef" in r.json()["message"]


def node_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_node_restriction(as_user: Client) -> None:
    admin, kubelet = as_user(ADMIN), as_user(NODE_A)
    for name in ("a", "b"):
        r = await admin.post("/api/v1/nodes", json=node_body(name))
        assert r.status_code in (201, 409), r.text
    merge = {"Content-Type": "application/merge-patch+json"}
    r = await kubelet.patch("/api/v1/nodes/a", json={"metadata": {"labels": {"app": "x"}}},
                            headers=merge)
    assert r.status_code == 200, r.text
    r = await kubelet.patch("/api/v1/nodes/b", json={"metadata": {"labels": {"app": "x"}}},
                            headers=merge)
    assert r.status_code == 403
    assert r.json()["message"] == 'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'
    r = await kubelet.patch("/api/v1/nodes/a", json={"metadata": {"labels": {
        "node-restriction.kubernetes.io/trusted": "yes"}}}, headers=merge)
    assert r.status_code == 403
    assert r.json()["message"] == ('nodes "a" is forbidden: is not allowed to modify labels: '
                                   "node-restriction.kubernetes.io/trusted")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": unique("p")},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    r = await admin.post("/api/v1/namespaces/default/pods", json=pod)
    assert r.status_code == 201, r.text
    name = pod["metadata"]["name"]
    r = await kubelet.post(f"/api/v1/namespaces/default/pods/{name}/binding", json={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "a"}})
    assert r.status_code == 403
    assert r.json()["message"].startswith(f'pods "{name}" is forbidden: unexpected pod '
                                          'subresource "binding"')
    r = await kubelet.patch(f"/api/v1/namespaces/default/pods/{name}/status",
                            json={"status": {"phase": "Succeeded"}}, headers=merge)
    assert r.status_code == 403
    assert "can only update pod status for pods with spec.nodeName set to itself" in r.text
    r = await kubelet.delete(f"/api/v1/namespaces/default/pods/{name}")
    assert r.status_code == 403
    # a kubelet reads only the pods bound to it (the Node authorizer, from the pod cache)
    bound = {**pod, "metadata": {"name": unique("bound")}, "spec": {**pod["spec"],
                                                                    "nodeName": "a"}}
    r = await admin.post("/api/v1/namespaces/default/pods", json=bound)
    assert r.status_code == 201, r.text
    await eventually_allowed(admin, sar(NODE_A, "get", "pods", ns="default",
                                        name=bound["metadata"]["name"]))
    assert not await allowed(admin, sar(NODE_A, "get", "pods", ns="default", name=name))


# --- kubectl, against a process started with --authorization-mode=Node,RBAC -------------------

def test_kubectl_create_rbac_objects(apiserver: ApiServer, tmp_path: Path) -> None:
    """kubectl's typed clients send RBAC objects in protobuf (an AlwaysAllow apiserver)."""
    kubectl = Kubectl(apiserver, tmp_path)
    ns = unique("rbac")
    kubectl("create", "namespace", ns)
    kubectl("create", "role", "pod-reader", "-n", ns, "--verb=get,list", "--resource=pods",
            "--resource-name=web")
    kubectl("create", "rolebinding", "readers", "-n", ns, "--role=pod-reader", "--user=alice",
            "--group=devs", f"--serviceaccount={ns}:builder")
    name = unique("reader")
    kubectl("create", "clusterrole", name, "--verb=get", "--non-resource-url=/logs/*")
    kubectl("create", "clusterrolebinding", name, f"--clusterrole={name}", "--user=bob")
    rows = table_lines(kubectl("get", "rolebindings", "-n", ns, "-o", "wide"))
    assert rows[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert rows[1][:2] == ["readers", "Role/pod-reader"]
    assert rows[1][3:] == ["alice", "devs", f"{ns}/builder"]
    role = kubectl("get", "role", "pod-reader", "-n", ns, "-o", "jsonpath={.rules}")
    assert role == ('[{"apiGroups":[""],"resourceNames":["web"],"resources":["pods"],'
                    '"verbs":["get","list"]}]')
    result = kubectl.run("create", "clusterrolebinding", unique("x"), "--clusterrole=view",
                         "--user=bob", "--dry-run=server", "-o", "name")
    assert result.stdout.startswith("clusterrolebinding.rbac.authorization.k8s.io/")


async def test_bootstrap_reconciliation_keeps_user_changes(front: ResourceFront,
                                                           as_user: Client) -> None:
    from apiserver.auth.bootstrap import reconcile

    admin = as_user(ADMIN)
    mine = {"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}
    merge = {"Content-Type": "application/merge-patch+json"}
    r = await admin.patch(f"{RBAC}/clusterroles/edit", json={"rules": [mine]}, headers=merge)
    assert r.status_code == 200, r.text
    r = await admin.patch(f"{RBAC}/clusterroles/view", json={
        "metadata": {"annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
        "rules": [mine]}, headers=merge)
    assert r.status_code == 200, r.text
    r = await admin.patch(f"{RBAC}/clusterrolebindings/system:basic-user", json={
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "me"}]},
        headers=merge)
    assert r.status_code == 200, r.text
    await reconcile(front.app.state.registry)  # what the next start does
    edit = (await admin.get(f"{RBAC}/clusterroles/edit")).json()["rules"]
    assert edit[0] == mine
    assert {"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]} in edit
    assert (await admin.get(f"{RBAC}/clusterroles/view")).json()["rules"] == [mine]
    subjects = (await admin.get(f"{RBAC}/clusterrolebindings/system:basic-user")).json()
    assert [s["name"] for s in subjects["subjects"]] == ["me", "system:authenticated"]


async def test_local_subject_access_review(as_user: Client) -> None:
    admin = as_user(ADMIN)
    await namespace(admin, "team")
    path = f"{AUTHZ}/namespaces/team/localsubjectaccessreviews"
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
              "spec": {"user": "nobody", "groups": ["system:masters"],
                       "resourceAttributes": {"verb": "get", "resource": "pods",
                                              "namespace": "team"}}}
    r = await admin.post(path, json=review)
    assert r.status_code == 201, r.text
    assert r.json()["metadata"] == {"namespace": "team", "creationTimestamp": None}
    assert r.json()["status"]["allowed"] is True
    review["spec"]["resourceAttributes"]["namespace"] = "default"
    r = await admin.post(path, json=review)
    assert r.status_code == 422
    assert r.json()["message"].endswith('spec.resourceAttributes.namespace: Invalid value: '
                                        '"default": must match metadata.namespace')
    r = await admin.post(f"{AUTHZ}/localsubjectaccessreviews", json=review)
    assert r.status_code == 405
