"""Authentication and authorization together, with real processes: an apiserver on HTTPS
with `--authorization-mode=Node,RBAC`, driven by the real kubectl as the cluster admin, as a
user with no bindings, as that user granted `edit` and `admin` in one namespace each, as
an anonymous caller, as a node and as the scheduler. The expectations are kube's default
policy as its documentation states it (Using RBAC Authorization, Using Node Authorization),
not read from our code."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from common import kubeconfig, pki
from tests.support import Etcd, Kubectl, SecureApiServer, table_lines, unique

NODE = unique("authz-node")
OTHER_NODE = unique("authz-other")


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("authz-pki")
    pki.init(directory, [NODE])
    ca_cert, ca_key = pki.load_cert(directory / "ca.crt"), pki.load_key(directory / "ca.key")
    for name, orgs in (("alice", ()), ("bob", ("devs",))):
        key = pki.new_key()
        cert = pki.issue(pki.CertSpec(name, name, orgs, client=True), key, ca_cert, ca_key)
        pki.write_file(directory / f"{name}.crt", pki.cert_pem(cert))
        pki.write_file(directory / f"{name}.key", pki.key_pem(key), private=True)
    return directory


@pytest.fixture(scope="module")
def server(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    api = SecureApiServer(etcd, tmp_path_factory.mktemp("authz"), pki_dir, name="apiserver-rbac",
                          plain=False, extra_args=(
                              "--authorization-mode=Node,RBAC",
                              "--etcd-prefix", f"/{unique('authz')}")).start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def as_(server: SecureApiServer, pki_dir: Path,
        tmp_path_factory: pytest.TempPathFactory) -> dict[str, Kubectl]:
    """kubectl for each identity: its own kubeconfig (CA + its certificate) and cache."""
    home = tmp_path_factory.mktemp("authz-kubectl")
    clients = {}
    for cert, user in (("admin", "kubernetes-admin"), ("alice", "alice"), ("bob", "bob"),
                       (f"kubelet-client-{NODE}", f"system:node:{NODE}"),
                       ("scheduler", "system:kube-scheduler")):
        kubectl = Kubectl(server.url, home / cert)
        pki.write_kubeconfig(kubectl.kubeconfig, pki.kubeconfig_for(
            pki_dir, cert, server=server.url, user=user, namespace="default"))
        clients[user] = kubectl
    return clients


def until(check: Callable[[], bool], timeout: float = 30) -> None:
    """Poll a check until it holds: a binding reaches the authorizer through its watch."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def can_i(kubectl: Kubectl, *args: str) -> str:
    result = kubectl.run("auth", "can-i", *args, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.strip()


def forbidden(kubectl: Kubectl, *args: str) -> str:
    result = kubectl.run(*args, check=False)
    assert result.returncode == 1, result.stdout
    # kubectl's generic verbs say "Error from server (Forbidden): ...", its `create role`
    # and friends "error: failed to create ...: ... is forbidden: ..."
    assert result.stderr.startswith(("Error from server (Forbidden): ",
                                     "error: failed to create ")), result.stderr
    assert " is forbidden: " in result.stderr, result.stderr
    return result.stderr.strip()


def test_the_admin_is_cluster_admin(as_: dict[str, Kubectl]) -> None:
    admin = as_["kubernetes-admin"]
    whoami = table_lines(admin("auth", "whoami"))
    assert ["Username", "kubernetes-admin"] in whoami
    assert ["Groups", "[system:masters system:authenticated]"] in whoami
    assert can_i(admin, "*", "*") == "yes"
    roles = table_lines(admin("get", "clusterroles"))
    assert roles[0] == ["NAME", "CREATED AT"]
    assert "cluster-admin" in [row[0] for row in roles]
    bindings = table_lines(admin("get", "clusterrolebindings", "-o", "wide"))
    assert bindings[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert ["cluster-admin", "ClusterRole/cluster-admin"] in [row[:2] for row in bindings]


def test_a_user_without_bindings_may_only_discover(as_: dict[str, Kubectl]) -> None:
    alice = as_["alice"]
    assert ["Username", "alice"] in table_lines(alice("auth", "whoami"))
    assert forbidden(alice, "get", "pods") == (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
        '"pods" in API group "" in the namespace "default"')
    assert can_i(alice, "create", "pods") == "no"
    assert can_i(alice, "get", "/version") == "yes"  # system:public-info-viewer
    assert can_i(alice, "create", "selfsubjectaccessreviews.authorization.k8s.io") == "yes"


def test_a_group_binding_grants_its_members(as_: dict[str, Kubectl]) -> None:
    admin, bob = as_["kubernetes-admin"], as_["bob"]
    ns = unique("devs")
    admin("create", "namespace", ns)
    admin("create", "rolebinding", "devs-view", "-n", ns, "--clusterrole=view", "--group=devs")
    until(lambda: can_i(bob, "list", "pods", "-n", ns) == "yes")
    assert can_i(bob, "create", "pods", "-n", ns) == "no"  # view reads only
    assert can_i(bob, "get", "secrets", "-n", ns) == "no"  # view never shows secrets
    assert can_i(bob, "list", "pods", "-n", "default") == "no"


def test_edit_in_one_namespace(as_: dict[str, Kubectl], tmp_path: Path) -> None:
    admin, alice = as_["kubernetes-admin"], as_["alice"]
    team = unique("team")
    admin("create", "namespace", team)
    admin("create", "rolebinding", "alice-edit", "-n", team, "--clusterrole=edit",
          "--user=alice")
    until(lambda: can_i(alice, "create", "pods", "-n", team) == "yes")
    alice("run", "web", "-n", team, "--image=kubelite/busybox:1.35", "--restart=Never",
          "--", "sleep", "60")
    assert alice("get", "pod", "web", "-n", team, "-o", "name").strip() == "pod/web"
    assert can_i(alice, "create", "pods", "-n", "default") == "no"
    assert forbidden(alice, "get", "nodes").endswith(
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the '
        'cluster scope')
    # edit may not touch RBAC itself
    assert can_i(alice, "create", "rolebindings", "-n", team) == "no"
    # impersonation: the admin may act as alice, alice may not act as anyone
    admin_ = as_["kubernetes-admin"]
    assert can_i(admin_, "create", "pods", "-n", team, "--as=alice") == "yes"
    assert can_i(admin_, "create", "pods", "-n", "default", "--as=alice") == "no"
    assert ["Username", "alice"] in table_lines(admin_("auth", "whoami", "--as=alice"))
    assert forbidden(alice, "get", "pods", "-n", team, "--as=bob").endswith(
        'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API '
        'group "" at the cluster scope')
    listed = table_lines(alice("auth", "can-i", "--list", "-n", team))
    pods = next(row for row in listed if row[0] == "pods")
    assert "create" in pods[-1] and "delete" in pods[-1]


def test_no_one_grants_what_they_do_not_hold(as_: dict[str, Kubectl]) -> None:
    admin, alice = as_["kubernetes-admin"], as_["alice"]
    ns = unique("own")
    admin("create", "namespace", ns)
    admin("create", "rolebinding", "alice-admin", "-n", ns, "--clusterrole=admin",
          "--user=alice")
    until(lambda: can_i(alice, "create", "roles", "-n", ns) == "yes")
    alice("create", "role", "pod-reader", "-n", ns, "--verb=get,list", "--resource=pods")
    message = forbidden(alice, "create", "role", "node-reader", "-n", ns, "--verb=get",
                        "--resource=nodes")
    assert 'user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC ' \
           'permissions not currently held' in message
    message = forbidden(alice, "create", "rolebinding", "mine", "-n", ns,
                        "--clusterrole=cluster-admin", "--user=alice")
    assert "is attempting to grant RBAC permissions not currently held" in message


def test_anonymous_may_read_only_public_info(server: SecureApiServer, pki_dir: Path) -> None:
    """Without credentials (kubectl would prompt for a password: curl, as kube's docs do)."""
    ca_only = kubeconfig.ssl_context(ca=(pki_dir / "ca.crt").read_bytes(), cert=None, key=None)
    pods = httpx.get(f"{server.url}/api/v1/namespaces/default/pods", verify=ca_only)
    assert pods.status_code == 403
    assert pods.json()["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group '
        '"" in the namespace "default"')
    assert pods.json()["reason"] == "Forbidden"
    assert httpx.get(f"{server.url}/version", verify=ca_only).json()["gitVersion"]
    assert httpx.get(f"{server.url}/healthz", verify=ca_only).text == "ok"
    assert httpx.get(f"{server.url}/api", verify=ca_only).status_code == 403  # discovery needs a user


def test_a_node_may_only_touch_what_is_its_own(as_: dict[str, Kubectl], tmp_path: Path) -> None:
    node, admin = as_[f"system:node:{NODE}"], as_["kubernetes-admin"]
    for name in (NODE, OTHER_NODE):
        manifest = tmp_path / f"{name}.json"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "Node",
                                        "metadata": {"name": name}}))
        if name == NODE:
            node("create", "-f", str(manifest))
        else:
            forbidden(node, "create", "-f", str(manifest))
    assert node("get", "node", NODE, "-o", "name").strip() == f"node/{NODE}"
    # kube 1.32+ (AuthorizeNodeWithSelectors): it reads its own Node and its own pods only
    assert forbidden(node, "get", "nodes").endswith(
        f"at the cluster scope: node '{NODE}' cannot read all nodes, only its own Node object")
    assert node("get", "nodes", f"--field-selector=metadata.name={NODE}",
                "-o", "name").strip() == f"node/{NODE}"
    assert forbidden(node, "get", "pods", "-A").endswith(
        "at the cluster scope: can only list/watch pods with spec.nodeName field selector")
    assert node("get", "pods", "-A", f"--field-selector=spec.nodeName={NODE}",
                "-o", "name").strip() == ""
    node("label", "node", NODE, "kubelite.io/role=worker")
    message = forbidden(node, "label", "node", NODE, "node-restriction.kubernetes.io/x=y")
    assert "node-restriction.kubernetes.io/" in message
    assert can_i(node, "create", "pods", "--subresource=binding") == "no"
    assert can_i(node, "delete", "nodes") == "no"
    admin("delete", "node", NODE)


def test_the_scheduler_binds_and_reads_but_does_not_delete(as_: dict[str, Kubectl]) -> None:
    scheduler = as_["system:kube-scheduler"]
    assert can_i(scheduler, "create", "pods", "--subresource=binding") == "yes"
    assert can_i(scheduler, "watch", "nodes") == "yes"
    assert can_i(scheduler, "create", "events") == "yes"
    assert can_i(scheduler, "delete", "nodes") == "no"
    assert can_i(scheduler, "get", "secrets") == "no"
    # beyond kube's role: its unschedulable-nodes annotation, and nothing else of a pod's
    assert can_i(scheduler, "patch", "pods") == "yes"
    assert can_i(scheduler, "update", "pods") == "no"
