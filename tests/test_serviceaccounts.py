"""ServiceAccounts and their tokens: the JWT claims and their verification (pure), then an
HTTPS apiserver with --authorization-mode=RBAC: the `default` ServiceAccount of every
namespace, TokenRequest, a token authenticating as its ServiceAccount with RBAC applied,
TokenReview, and the real kubectl's `create token` and `auth whoami --token`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from apiserver.auth.serviceaccount import (
    DEFAULT_ISSUER,
    InvalidToken,
    ServiceAccountTokens,
    Subject,
    claims_for,
    sign,
    subject_of,
    user_of,
    verified_claims,
)
from common import kubeconfig, pki
from tests.support import Etcd, Kubectl, SecureApiServer, unique

NOW = 1_800_000_000
SUBJECT = Subject("team", "robot", "uid-1")


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY = rsa_key()
TOKENS = ServiceAccountTokens(keys=(KEY.public_key(),), signing_key=KEY)


def authenticate(token: str, *, now: int = NOW + 10, uids: dict[str, str] | None = None,
                 audiences: tuple[str, ...] = ()) -> Any:
    known = {"team/robot": "uid-1"} if uids is None else uids

    async def uid(namespace: str, name: str) -> str | None:
        return known.get(f"{namespace}/{name}")

    return asyncio.run(TOKENS.authenticate(token, now=now, service_account_uid=uid,
                                           pod_uid=uid, audiences=audiences))


# --- pure -------------------------------------------------------------------------------------

def test_claims_are_kubes() -> None:
    claims = claims_for(SUBJECT, issuer=DEFAULT_ISSUER, audiences=["a"], now=NOW,
                        expiration_seconds=600)
    assert claims["sub"] == "system:serviceaccount:team:robot"
    assert (claims["iss"], claims["aud"], claims["iat"], claims["nbf"], claims["exp"]) == (
        DEFAULT_ISSUER, ["a"], NOW, NOW, NOW + 600)
    assert claims["kubernetes.io"] == {"namespace": "team",
                                       "serviceaccount": {"name": "robot", "uid": "uid-1"}}
    assert claims["jti"]


@pytest.mark.parametrize("key", [rsa_key(), ec.generate_private_key(ec.SECP256R1())],
                         ids=["RS256", "ES256"])
def test_signature_verifies_with_its_key_only(key: Any) -> None:
    token = sign({"x": 1}, key)
    assert verified_claims(token, [key.public_key()]) == {"x": 1}
    with pytest.raises(InvalidToken, match="signature"):
        verified_claims(token, [rsa_key().public_key()])
    head, body, sig = token.split(".")
    with pytest.raises(InvalidToken):
        verified_claims(f"{head}.{body}x.{sig}", [key.public_key()])


def test_a_valid_token_is_its_service_account() -> None:
    user, audiences = authenticate(TOKENS.mint(SUBJECT, [DEFAULT_ISSUER], 3600, NOW))
    assert user.name == "system:serviceaccount:team:robot"
    assert user.uid == "uid-1"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team",
                           "system:authenticated")
    assert audiences == [DEFAULT_ISSUER]


def test_expired_token_is_rejected() -> None:
    token = TOKENS.mint(SUBJECT, [DEFAULT_ISSUER], 600, NOW)
    with pytest.raises(InvalidToken, match="expired"):
        authenticate(token, now=NOW + 601)
    with pytest.raises(InvalidToken, match="not valid yet"):
        authenticate(token, now=NOW - 5)


def test_wrong_audience_is_rejected() -> None:
    token = TOKENS.mint(SUBJECT, ["vault"], 3600, NOW)
    with pytest.raises(InvalidToken, match="audiences"):
        authenticate(token)
    assert authenticate(token, audiences=("vault",))[1] == ["vault"]


def test_wrong_signature_or_issuer_is_rejected() -> None:
    other = ServiceAccountTokens(keys=(), signing_key=rsa_key())
    with pytest.raises(InvalidToken, match="signature"):
        authenticate(other.mint(SUBJECT, [DEFAULT_ISSUER], 3600, NOW))
    foreign = sign(claims_for(SUBJECT, issuer="https://elsewhere", audiences=[DEFAULT_ISSUER],
                              now=NOW, expiration_seconds=3600), KEY)
    with pytest.raises(InvalidToken, match="issuer"):
        authenticate(foreign)


def test_deleted_or_recreated_service_account_is_rejected() -> None:
    token = TOKENS.mint(SUBJECT, [DEFAULT_ISSUER], 3600, NOW)
    with pytest.raises(InvalidToken, match="deleted"):
        authenticate(token, uids={})
    with pytest.raises(InvalidToken, match="UID"):
        authenticate(token, uids={"team/robot": "uid-2"})


def test_bound_pod_must_still_exist() -> None:
    bound = Subject("team", "robot", "uid-1", "web", "pod-uid")
    token = TOKENS.mint(bound, [DEFAULT_ISSUER], 3600, NOW)
    user, _ = authenticate(token, uids={"team/robot": "uid-1", "team/web": "pod-uid"})
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("web",)
    with pytest.raises(InvalidToken, match="pod"):
        authenticate(token)


def test_subject_must_match_the_kubernetes_claims() -> None:
    claims = claims_for(SUBJECT, issuer=DEFAULT_ISSUER, audiences=[DEFAULT_ISSUER], now=NOW,
                        expiration_seconds=600)
    claims["sub"] = "system:serviceaccount:kube-system:root"
    with pytest.raises(InvalidToken, match="subject"):
        subject_of(claims, issuers=[DEFAULT_ISSUER], audiences=[DEFAULT_ISSUER], now=NOW)


def test_user_of_a_subject() -> None:
    assert user_of(SUBJECT).name == "system:serviceaccount:team:robot"


# --- HTTP ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sa-pki")
    pki.init(directory, ["sa-node"])
    return directory


@pytest.fixture(scope="module")
def server(etcd: Etcd, pki_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureApiServer]:
    api = SecureApiServer(etcd, tmp_path_factory.mktemp("sa"), pki_dir, name="apiserver-sa",
                          plain=False, extra_args=(
                              "--authorization-mode=RBAC",
                              "--etcd-prefix", f"/{unique('sa')}")).start()
    yield api
    api.stop()


@pytest.fixture(scope="module")
def admin(server: SecureApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, verify=server.admin, timeout=10) as client:
        yield client


def until(check: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def new_namespace(admin: httpx.Client) -> str:
    name = unique("sa-ns")
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    return name


def default_sa(admin: httpx.Client, namespace: str) -> dict[str, Any] | None:
    answer = admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
    return answer.json() if answer.status_code == 200 else None


def request_token(admin: httpx.Client, namespace: str, name: str = "default",
                  **spec: Any) -> httpx.Response:
    return admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                      json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": spec})


def as_token(server: SecureApiServer, token: str) -> httpx.Client:
    """Only the token (the admin's context would present its certificate first)."""
    ca_only = kubeconfig.ssl_context(ca=server.ca, cert=None, key=None)
    return httpx.Client(base_url=server.url, verify=ca_only, timeout=10,
                        headers={"Authorization": f"Bearer {token}"})


def test_default_service_account_in_every_namespace(admin: httpx.Client) -> None:
    assert until(lambda: default_sa(admin, "default"))
    assert until(lambda: default_sa(admin, "kube-system"))
    namespace = new_namespace(admin)
    first = until(lambda: default_sa(admin, namespace))
    assert admin.delete(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
                        ).status_code == 200
    again = until(lambda: default_sa(admin, namespace))
    assert again["metadata"]["uid"] != first["metadata"]["uid"]


def test_service_account_validation_and_table(admin: httpx.Client) -> None:
    namespace = new_namespace(admin)
    bad = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     json={"metadata": {"name": "Not_Valid"}})
    assert bad.status_code == 422
    assert bad.json()["details"]["causes"][0]["field"] == "metadata.name"
    assert admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                      json={"metadata": {"name": "robot"},
                            "secrets": [{"name": "s1"}]}).status_code == 201
    table = admin.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/robot", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Secrets", "Age"]
    assert table["rows"][0]["cells"][:2] == ["robot", 1]


def test_token_request_validation(admin: httpx.Client) -> None:
    namespace = new_namespace(admin)
    until(lambda: default_sa(admin, namespace))
    short = request_token(admin, namespace, expirationSeconds=60)
    assert short.status_code == 422
    assert "may not specify a duration less than 10 minutes" in short.json()["message"]
    assert request_token(admin, namespace, "nobody").status_code == 404
    secret = request_token(admin, namespace, boundObjectRef={"kind": "Secret", "name": "s"})
    assert secret.status_code == 422
    assert 'spec.boundObjectRef.kind: Unsupported value: "Secret"' in secret.json()["message"]
    missing_pod = request_token(admin, namespace, boundObjectRef={"kind": "Pod",
                                                                  "apiVersion": "v1",
                                                                  "name": "ghost"})
    assert missing_pod.status_code == 404
    ok = request_token(admin, namespace)
    assert ok.status_code == 201
    body = ok.json()
    assert body["spec"]["expirationSeconds"] == 3600
    assert body["spec"]["audiences"] == [DEFAULT_ISSUER]
    assert body["status"]["token"].count(".") == 2
    assert body["status"]["expirationTimestamp"].endswith("Z")


def test_token_authenticates_and_rbac_applies(server: SecureApiServer,
                                              admin: httpx.Client) -> None:
    namespace, other = new_namespace(admin), new_namespace(admin)
    until(lambda: default_sa(admin, namespace))
    token = request_token(admin, namespace).json()["status"]["token"]
    with as_token(server, token) as robot:
        assert robot.get(f"/api/v1/namespaces/{namespace}/pods").status_code == 403
        assert admin.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
                          json={"metadata": {"name": "pod-reader"}, "rules": [
                              {"apiGroups": [""], "resources": ["pods"],
                               "verbs": ["list"]}]}).status_code == 201
        assert admin.post(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
            json={"metadata": {"name": "robot-reads"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                              "name": "pod-reader"},
                  "subjects": [{"kind": "ServiceAccount", "name": "default",
                                "namespace": namespace}]}).status_code == 201
        until(lambda: robot.get(f"/api/v1/namespaces/{namespace}/pods").status_code == 200)
        assert robot.get(f"/api/v1/namespaces/{other}/pods").status_code == 403
        forbidden = robot.get(f"/api/v1/namespaces/{other}/pods").json()["message"]
        assert f'User "system:serviceaccount:{namespace}:default" cannot list' in forbidden
    # the ServiceAccount deleted: its tokens no longer authenticate
    assert admin.delete(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
                        ).status_code == 200
    with as_token(server, token) as robot:
        assert robot.get(f"/api/v1/namespaces/{namespace}/pods").status_code == 401
    with as_token(server, token[:-4] + "AAAA") as forged:
        answer = forged.get("/api/v1/namespaces/default/pods")
        assert answer.status_code == 401
        assert answer.json()["message"] == "Unauthorized"


def test_token_review(server: SecureApiServer, admin: httpx.Client) -> None:
    namespace = new_namespace(admin)
    until(lambda: default_sa(admin, namespace))
    token = request_token(admin, namespace).json()["status"]["token"]

    def review(token: str, audiences: list[str] | None = None) -> dict[str, Any]:
        answer = admin.post("/apis/authentication.k8s.io/v1/tokenreviews", json={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token, **({"audiences": audiences} if audiences else {})}})
        assert answer.status_code == 201, answer.text
        return answer.json()["status"]

    status = review(token)
    assert status["authenticated"] is True
    assert status["user"]["username"] == f"system:serviceaccount:{namespace}:default"
    assert f"system:serviceaccounts:{namespace}" in status["user"]["groups"]
    assert status["audiences"] == [DEFAULT_ISSUER]
    assert "authenticated" not in review(token, ["vault"])
    assert review("good-token")["user"]["username"] == "alice"  # the token file too
    assert review("nonsense")["error"]


def test_kubectl_create_token_and_whoami(server: SecureApiServer, pki_dir: Path,
                                         tmp_path: Path, admin: httpx.Client) -> None:
    kubectl = Kubectl(server.url, tmp_path / "kubectl")
    pki.write_kubeconfig(kubectl.kubeconfig, pki.kubeconfig_for(
        pki_dir, "admin", server=server.url, user="kubernetes-admin", namespace="default"))
    until(lambda: default_sa(admin, "default"))
    token = kubectl("create", "token", "default", "--duration=20m").strip()
    # a kubeconfig without the admin's certificate, which would authenticate first
    bare = Kubectl(server.url, tmp_path / "bare")
    whoami = bare("--certificate-authority", str(pki_dir / "ca.crt"), "auth", "whoami",
                  f"--token={token}")
    assert "system:serviceaccount:default:default" in whoami
    assert "system:serviceaccounts:default" in whoami
    assert "sa" in kubectl("api-resources", "--api-group=", "--no-headers").split()
    assert "default" in kubectl("get", "sa")
    # kubectl sends both as protobuf
    assert kubectl("create", "serviceaccount", "robot").strip() == "serviceaccount/robot created"
    refused = kubectl.run("create", "token", "robot", "--duration=5m", check=False)
    assert "may not specify a duration less than 10 minutes" in refused.stderr
