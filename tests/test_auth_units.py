"""Authentication and request attributes as pure functions: kube's RequestInfoFactory,
the token file, x509 users, and the 401/403 wording."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.auth import ANONYMOUS, Attributes, Decision, UserInfo, request_user
from apiserver.auth.authn import (
    UNSECURED,
    AuthenticationFailed,
    Authenticator,
    TokenFileError,
    bearer_token,
    load_ca_bundle,
    parse_token_file,
    verify_client_certificate,
)
from apiserver.auth.filters import Secured, Unsecured
from apiserver.auth.forbidden import forbidden
from apiserver.auth.requestinfo import request_attributes
from common import errors, pki

ALICE = UserInfo("alice")


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/default/pods", {}, ("list", "", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": "true"},
     ("watch", "", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": "1"},
     ("watch", "", "pods", "", "default", "")),
    ("GET", "/api/v1/watch/namespaces/default/pods", {},
     ("watch", "", "pods", "", "default", "")),
    ("GET", "/api/v1/watch/namespaces/default/pods/web", {},
     ("watch", "", "pods", "", "default", "web")),
    ("GET", "/api/v1/namespaces/default/pods/web", {}, ("get", "", "pods", "", "default", "web")),
    ("HEAD", "/api/v1/namespaces/default/pods/web", {}, ("get", "", "pods", "", "default", "web")),
    ("POST", "/api/v1/namespaces/default/pods", {}, ("create", "", "pods", "", "default", "")),
    ("PUT", "/api/v1/namespaces/default/pods/web", {},
     ("update", "", "pods", "", "default", "web")),
    ("PATCH", "/api/v1/namespaces/default/pods/web", {},
     ("patch", "", "pods", "", "default", "web")),
    ("DELETE", "/api/v1/namespaces/default/pods/web", {},
     ("delete", "", "pods", "", "default", "web")),
    ("DELETE", "/api/v1/namespaces/default/pods", {},
     ("deletecollection", "", "pods", "", "default", "")),
    ("PUT", "/api/v1/namespaces/default/pods/web/status", {},
     ("update", "", "pods", "status", "default", "web")),
    ("POST", "/api/v1/namespaces/default/pods/web/binding", {},
     ("create", "", "pods", "binding", "default", "web")),
    ("GET", "/api/v1/namespaces/default/pods/web/log", {},
     ("get", "", "pods", "log", "default", "web")),
    ("GET", "/api/v1/nodes", {}, ("list", "", "nodes", "", "", "")),
    ("PATCH", "/api/v1/nodes/node1/status", {}, ("patch", "", "nodes", "status", "", "node1")),
    ("GET", "/api/v1/pods", {}, ("list", "", "pods", "", "", "")),
    # a namespace is its own namespace
    ("GET", "/api/v1/namespaces/kube-system", {},
     ("get", "", "namespaces", "", "kube-system", "kube-system")),
    ("PUT", "/api/v1/namespaces/ns1/finalize", {},
     ("update", "", "namespaces", "finalize", "ns1", "ns1")),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", "", "", "")),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1", {},
     ("get", "coordination.k8s.io", "leases", "", "kube-node-lease", "node1")),
    ("GET", "/apis/apps/v1/deployments", {}, ("list", "apps", "deployments", "", "", "")),
    # a list narrowed to one name by its field selector is that name's
    ("GET", "/api/v1/namespaces/default/pods", {"fieldSelector": "metadata.name=web"},
     ("list", "", "pods", "", "default", "web")),
    ("GET", "/api/v1/namespaces/default/pods", {"fieldSelector": "metadata.name!=web"},
     ("list", "", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/kube-system/configmaps",
     {"fieldSelector": "metadata.name==cm", "watch": "true"},
     ("watch", "", "configmaps", "", "kube-system", "cm")),
])
def test_resource_requests(method: str, path: str, query: dict[str, str],
                           expected: tuple[str, ...]) -> None:
    a = request_attributes(ALICE, method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name) == expected


@pytest.mark.parametrize(("method", "path", "verb"), [
    ("GET", "/healthz", "get"), ("GET", "/readyz", "get"), ("GET", "/version", "get"),
    ("GET", "/api", "get"), ("GET", "/api/v1", "get"), ("GET", "/apis", "get"),
    ("GET", "/apis/apps", "get"), ("GET", "/apis/apps/v1", "get"),
    ("GET", "/openapi/v2", "get"), ("GET", "/openapi/v3/api/v1", "get"),
    ("POST", "/metrics", "post"), ("GET", "/", "get"),
])
def test_non_resource_requests(method: str, path: str, verb: str) -> None:
    a = request_attributes(ALICE, method, path, {})
    assert not a.resource_request and (a.verb, a.path) == (verb, path)


def test_api_version_is_kept() -> None:
    assert request_attributes(ALICE, "GET", "/apis/apps/v1/deployments", {}).api_version == "v1"


# --- 403 --------------------------------------------------------------------------------


def test_forbidden_is_worded_as_kube() -> None:
    listing = request_attributes(ALICE, "GET", "/api/v1/namespaces/default/pods", {})
    err = forbidden(listing, "")
    assert err.code == 403 and err.reason == "Forbidden"
    assert err.message == ('pods is forbidden: User "alice" cannot list resource "pods" in API '
                           'group "" in the namespace "default"')
    assert err.status()["details"] == {"kind": "pods"}
    lease = request_attributes(ALICE, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/"
                                                "kube-node-lease/leases/n1", {})
    assert forbidden(lease, "no RBAC policy matched").message == (
        'leases.coordination.k8s.io "n1" is forbidden: User "alice" cannot delete resource '
        '"leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": '
        'no RBAC policy matched')
    assert forbidden(lease, "").status()["details"] == {
        "name": "n1", "group": "coordination.k8s.io", "kind": "leases"}
    status = request_attributes(ANONYMOUS, "PATCH", "/api/v1/nodes/n1/status", {})
    assert forbidden(status, "").message == (
        'nodes "n1" is forbidden: User "system:anonymous" cannot patch resource "nodes/status" '
        'in API group "" at the cluster scope')


def test_forbidden_non_resource_path() -> None:
    a = Attributes(user=ANONYMOUS, verb="get", resource_request=False, path="/metrics")
    err = forbidden(a, "")
    assert err.message == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    assert err.status()["details"] == {}


# --- tokens -----------------------------------------------------------------------------


def test_token_file_format() -> None:
    tokens = parse_token_file('t1,alice,uid-1,"dev,ops"\n\nt2,bob,uid-2\nt3,carol,3,admins,x\n')
    assert tokens["t1"] == UserInfo("alice", "uid-1", ("dev", "ops"))
    assert tokens["t2"] == UserInfo("bob", "uid-2", ())
    assert tokens["t3"].groups == ("admins",)
    with pytest.raises(TokenFileError, match="at least 3 columns"):
        parse_token_file("t1,alice\n")
    assert parse_token_file(",nobody,0\n") == {}


def test_bearer_header() -> None:
    assert bearer_token([(b"authorization", b"Bearer abc")]) == "abc"
    assert bearer_token([(b"authorization", b"bearer abc")]) == "abc"
    assert bearer_token([(b"authorization", b"Basic YTpi")]) is None
    assert bearer_token([(b"authorization", b"Bearer ")]) is None
    assert bearer_token([]) is None


def scope(*, token: str | None = None, cert: str | None = None) -> dict[str, object]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return {"type": "http", "headers": headers, "client": ("127.0.0.1", 1),
            "extensions": {"tls": {"client_cert_chain": [cert] if cert else []}}}


def test_the_token_user_is_authenticated() -> None:
    authn = Authenticator(tokens=parse_token_file('t1,alice,u1,"dev"\n'))
    assert authn.authenticate(scope(token="t1")) == UserInfo(
        "alice", "u1", ("dev", "system:authenticated"))
    with pytest.raises(errors.Unauthorized) as e:
        authn.authenticate(scope(token="nope"))  # even with anonymous allowed
    assert e.value.status()["message"] == "Unauthorized"
    assert authn.authenticate(scope()) == ANONYMOUS
    with pytest.raises(errors.Unauthorized):
        Authenticator(anonymous=False).authenticate(scope())


# --- x509 -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    pki.init(directory, ["n1"])
    return directory


def issued(ca: Path, spec: pki.CertSpec, **kwargs: datetime.datetime) -> str:
    key = pki.new_key()
    cert = pki.issue(spec, key, pki.load_cert(ca / "ca.crt"), pki.load_key(ca / "ca.key"),
                     **kwargs)
    return pki.cert_pem(cert).decode()


def test_a_certificate_is_its_cn_and_orgs(ca: Path) -> None:
    cas = load_ca_bundle((ca / "ca.crt").read_bytes())
    admin = (ca / "admin.crt").read_text()
    assert verify_client_certificate(admin, cas) == UserInfo(
        "kubernetes-admin", groups=("system:masters", "system:authenticated"))
    node = (ca / "kubelet-client-n1.crt").read_text()
    assert verify_client_certificate(node, cas) == UserInfo(
        "system:node:n1", groups=("system:nodes", "system:authenticated"))


def test_certificates_that_do_not_verify(ca: Path) -> None:
    cas = load_ca_bundle((ca / "ca.crt").read_bytes())
    foreign = (ca / "apiserver-etcd-client.crt").read_text()  # the etcd CA's
    with pytest.raises(AuthenticationFailed, match="unknown authority"):
        verify_client_certificate(foreign, cas)
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)
    expired = issued(ca, pki.CertSpec("x", "old", client=True), not_before=past,
                     not_after=past + datetime.timedelta(days=1))
    with pytest.raises(AuthenticationFailed, match="expired"):
        verify_client_certificate(expired, cas)
    serving = (ca / "apiserver.crt").read_text()  # serverAuth only
    with pytest.raises(AuthenticationFailed, match="key usage"):
        verify_client_certificate(serving, cas)
    assert verify_client_certificate(issued(ca, pki.CertSpec("x", "", ("o",), client=True)), cas) is None


def test_a_bad_certificate_is_401_unless_a_token_authenticates(ca: Path) -> None:
    cas = load_ca_bundle((ca / "ca.crt").read_bytes())
    authn = Authenticator(client_cas=cas, tokens={"t": UserInfo("bob")})
    foreign = (ca / "apiserver-etcd-client.crt").read_text()
    with pytest.raises(errors.Unauthorized):
        authn.authenticate(scope(cert=foreign))
    assert authn.authenticate(scope(cert=foreign, token="t")).name == "bob"
    assert authn.authenticate(scope(cert=(ca / "admin.crt").read_text(), token="x")).name == \
        "kubernetes-admin"


# --- the front door (ASGI, in process) ---------------------------------------------------


class DenyPods:
    """Denies anything on pods, with a reason; no opinion on the rest (so: forbidden)."""

    def __init__(self) -> None:
        self.seen: list[Attributes] = []

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        self.seen.append(attributes)
        if attributes.resource == "pods":
            return Decision.DENY, "pods are off limits"
        if attributes.path == "/healthz":
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""


async def reached(scope: dict[str, Any], receive: Any, send: Any) -> None:
    user = request_user(scope)
    body = f"{user.name} {','.join(user.groups)}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def test_every_request_is_authenticated_then_authorized() -> None:
    authorizer = DenyPods()
    app = Secured(reached, Authenticator(tokens={"t": UserInfo("alice", groups=("dev",))},
                                         anonymous=False), authorizer)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
        assert (await http.get("/healthz")).status_code == 401
        auth = {"Authorization": "Bearer t"}
        ok = await http.get("/healthz", headers=auth)
        assert (ok.status_code, ok.text) == (200, "alice dev,system:authenticated")
        pods = await http.get("/api/v1/namespaces/default/pods", headers=auth)
        assert pods.status_code == 403
        assert pods.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods is forbidden: User "alice" cannot list resource "pods" in API '
                       'group "" in the namespace "default": pods are off limits',
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403}
        version = await http.get("/version", headers=auth)  # no opinion: forbidden
        assert version.status_code == 403
        assert version.json()["message"] == \
            'forbidden: User "alice" cannot get path "/version"'
    assert [a.verb for a in authorizer.seen] == ["get", "list", "get"]


async def test_the_insecure_port_is_one_superuser() -> None:
    app = Unsecured(reached, UNSECURED)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
        response = await http.get("/api/v1/pods", headers={"Authorization": "Bearer bogus"})
    assert response.text == "system:unsecured system:masters,system:authenticated"
