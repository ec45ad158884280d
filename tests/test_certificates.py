"""CertificateSigningRequests and bootstrap tokens: the pure parts (validation, the Table,
the approver's recognizers, the signer, tokens and the cluster-info signature, in the
style of kube's tests), then the session apiserver: the requester is the server's to say,
the spec never changes, approving needs `approve` on the signer, the status subresource
cannot approve, kubectl's Table and the official Python client."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.resources.certificates import (
    KEY_USAGES,
    condition_text,
    human_duration,
    validate_csr,
)
from common import bootstraptoken as bt
from common import pki
from common.csr import (
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
    certificate_request,
    csr_object,
)
from controller_manager.bootstrap import signed_cluster_info, signing_tokens
from controller_manager.certificates import (
    approval_subresource,
    cleanup_due,
    read_request,
    sign,
    signer_problem,
)
from tests.support import ApiServer, Kubectl, unique, user_cert

BASE = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


def request(cn: str = "system:node:n1", orgs: tuple[str, ...] = ("system:nodes",), *,
            dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> bytes:
    return certificate_request(ec.generate_private_key(ec.SECP256R1()), common_name=cn,
                               organizations=orgs, dns_names=dns, ip_addresses=ips)


def csr(name: str = "c1", *, signer: str = KUBE_APISERVER_CLIENT_KUBELET,
        usages: tuple[str, ...] = ("digital signature", "client auth"),
        pem: bytes | None = None, username: str = "system:bootstrap:abcdef",
        **spec: Any) -> dict[str, Any]:
    obj = csr_object(name, pem or request(), signer=signer, usages=usages)
    obj["spec"].update(username=username, **spec)
    return obj


def messages(causes: list[dict[str, str]]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in causes]


# --- validation and the Table --------------------------------------------------------------


def test_validation_in_kubes_words() -> None:
    assert validate_csr(csr()) == []
    broken = csr(signer="", usages=("client auth", "client auth", "flying"),
                 expirationSeconds=60)
    broken["spec"]["request"] = base64.b64encode(b"not a request").decode()
    assert messages(validate_csr(broken)) == [
        "spec.request: Invalid value: \"<request data>\": PEM block type must be "
        "CERTIFICATE REQUEST",
        "spec.signerName: Required value",
        'spec.usages[1]: Duplicate value: "client auth"',
        'spec.usages[2]: Unsupported value: "flying": supported values: ' + ", ".join(
            f'"{u}"' for u in KEY_USAGES),
        "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than "
        "600 seconds (10 minutes)",
    ]
    assert messages(validate_csr(csr(usages=()))) == ["spec.usages: Required value"]
    both = csr()
    both["status"] = {"conditions": [{"type": "Approved", "status": "True"},
                                     {"type": "Denied", "status": "True"}]}
    assert any("mutually exclusive" in m for m in messages(validate_csr(both)))


@pytest.mark.parametrize(("seconds", "shown"), [
    (600, "10m"), (3600, "60m"), (7200, "120m"), (4 * 3600, "4h"), (24 * 3600, "24h"),
    (3 * 86400, "3d"), (30 * 86400, "30d"), (365 * 86400, "365d"), (3 * 365 * 86400, "3y")])
def test_requested_duration_as_kubectl_prints_it(seconds: int, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_the_condition_column() -> None:
    pending = csr()
    assert condition_text(pending) == "Pending"
    approved = {**pending, "status": {"conditions": [{"type": "Approved", "status": "True"}],
                                      "certificate": "eA=="}}
    assert condition_text(approved) == "Approved,Issued"


# --- the approver and the signer -----------------------------------------------------------


def test_only_kubelet_client_requests_are_recognized_for_auto_approval() -> None:
    def subresource(obj: dict[str, Any]) -> str | None:
        found = read_request(obj)
        assert found is not None
        return approval_subresource(obj, found)

    assert subresource(csr()) == "nodeclient"  # a bootstrap token joining
    assert subresource(csr(username="system:node:n1")) == "selfnodeclient"  # a renewal
    assert subresource(csr(pem=request("system:node:n1", ("system:masters",)))) is None
    assert subresource(csr(pem=request("alice"))) is None
    assert subresource(csr(usages=("digital signature", "server auth"))) is None
    assert subresource(csr(pem=request(dns=("n1",)))) is None
    assert subresource(csr(signer=KUBELET_SERVING)) is None  # people approve those


def test_the_serving_signer_signs_a_nodes_own_names_only() -> None:
    serving = csr(signer=KUBELET_SERVING, usages=("digital signature", "server auth"),
                  username="system:node:n1", pem=request(dns=("n1",), ips=("127.0.0.2",)))
    found = read_request(serving)
    assert found is not None and signer_problem(serving, found) is None
    other = {**serving, "spec": {**serving["spec"], "username": "system:node:n2"}}
    assert signer_problem(other, found) == \
        "the requesting user is not the node the certificate is for"
    bare = csr(signer=KUBELET_SERVING, usages=("digital signature", "server auth"),
               username="system:node:n1")
    bare_request = read_request(bare)
    assert bare_request is not None
    assert signer_problem(bare, bare_request) == "DNS or IP subjectAltName is required"


def test_sign_keeps_the_subject_names_and_usages_within_the_duration() -> None:
    ca_key = pki.new_key()
    ca = pki.self_signed_ca("kubernetes", ca_key)
    serving = csr(signer=KUBELET_SERVING, usages=("digital signature", "server auth"),
                  pem=request(dns=("n1",), ips=("127.0.0.2",)), expirationSeconds=3600)
    cert = x509.load_pem_x509_certificate(sign(serving, ca, ca_key, now=NOW))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == \
        "system:node:n1"
    assert cert.issuer == ca.subject
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["n1"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.2"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(
        minutes=65)  # backdated 5 minutes, then the hour asked for


# --- bootstrap tokens ----------------------------------------------------------------------


def test_a_token_secret_authenticates_until_it_expires() -> None:
    token = bt.Token("abcdef", "0123456789abcdef")
    secret = bt.token_secret(token, now=NOW, ttl=datetime.timedelta(hours=1))
    user = bt.authenticate(str(token), secret, NOW)
    assert user == bt.BootstrapUser("system:bootstrap:abcdef",
                                    ("system:bootstrappers", bt.KUBEADM_GROUP))
    assert bt.authenticate("abcdef.0123456789abcdeX", secret, NOW) is None  # wrong secret
    assert bt.authenticate(str(token), secret, NOW + datetime.timedelta(hours=2)) is None
    assert bt.authenticate("not-a-token", secret, NOW) is None
    signing_only = bt.token_secret(token, now=NOW, ttl=None, usages=("signing",))
    assert bt.authenticate(str(token), signing_only, NOW) is None
    bad_group = bt.token_secret(token, now=NOW, ttl=None, groups=("system:masters",))
    assert bt.authenticate(str(token), bad_group, NOW) is None


def test_cluster_info_is_signed_with_each_signing_token_and_verifies() -> None:
    ca_key = pki.new_key()
    ca_pem = pki.cert_pem(pki.self_signed_ca("kubernetes", ca_key))
    info = {"data": {bt.KUBECONFIG_KEY: bt.cluster_info_kubeconfig("https://lb:6443", ca_pem)}}
    good, expired = bt.Token("aaaaaa", "a" * 16), bt.Token("bbbbbb", "b" * 16)
    secrets = [bt.token_secret(good, now=NOW, ttl=None),
               bt.token_secret(expired, now=NOW - datetime.timedelta(days=2),
                               ttl=datetime.timedelta(hours=1))]
    tokens = signing_tokens(secrets, NOW)
    assert tokens == [good]
    signed = signed_cluster_info(info, tokens)
    assert signed is not None and signed_cluster_info(signed, tokens) is None  # steady
    signature = signed["data"]["jws-kubeconfig-aaaaaa"]
    content = info["data"][bt.KUBECONFIG_KEY]
    assert bt.signature_valid(content, signature, good)
    assert not bt.signature_valid(content + " ", signature, good)
    assert not bt.signature_valid(content, signature, expired)
    # a token that goes takes its signature with it
    assert "jws-kubeconfig-aaaaaa" not in (signed_cluster_info(signed, []) or {})["data"]
    assert bt.ca_cert_hash(ca_pem).startswith("sha256:") and len(bt.ca_cert_hash(ca_pem)) == 71


# --- the API ---------------------------------------------------------------------------------


async def test_the_requester_is_stamped_and_approval_needs_approve_on_the_signer(
        apiserver: ApiServer, tmp_path: Path) -> None:
    who = unique("requester")
    name = unique("csr")
    async with apiserver.client() as admin:
        # may create CSRs and update approvals, but has no `approve` on any signer
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name}, "rules": [
                    {"apiGroups": ["certificates.k8s.io"], "verbs": ["create", "get", "update"],
                     "resources": ["certificatesigningrequests",
                                   "certificatesigningrequests/approval"]}]}
        assert (await admin.post("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                                 json=role)).status_code == 201
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": name},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                 "name": who}]}
        assert (await admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                                 json=binding)).status_code == 201
        async with apiserver.client(user_cert(who)) as requester:
            sent = csr(name, username="mallory", groups=["system:masters"])
            created = await requester.post(BASE, json=sent)
            assert created.status_code == 201, created.text
            spec = created.json()["spec"]
            assert spec["username"] == who and "system:masters" not in spec["groups"]
            assert "status" not in created.json()
            # the spec is never changed afterwards
            changed = {**created.json(), "spec": {**spec, "signerName": "example.com/x"}}
            put = await requester.put(f"{BASE}/{name}", json=changed)
            assert put.status_code == 200 and \
                put.json()["spec"]["signerName"] == KUBE_APISERVER_CLIENT_KUBELET
            approval = {**put.json(), "status": {"conditions": [
                {"type": "Approved", "status": "True", "reason": "Me"}]}}
            denied = await requester.put(f"{BASE}/{name}/approval", json=approval)
            assert denied.status_code == 403, denied.text
            assert denied.json()["message"] == (
                f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: user '
                f'not permitted to approve requests with signerName '
                f'"{KUBE_APISERVER_CLIENT_KUBELET}"')
        # the status subresource cannot approve, even for an admin
        current = (await admin.get(f"{BASE}/{name}")).json()
        via_status = await admin.put(f"{BASE}/{name}/status", json={**current, "status": {
            "conditions": [{"type": "Approved", "status": "True"}]}})
        assert via_status.status_code == 422, via_status.text
        assert "approval subresource only" in via_status.json()["message"]
        approved = await admin.put(f"{BASE}/{name}/approval", json={**current, "status": {
            "conditions": [{"type": "Approved", "status": "True", "reason": "Admin"}]}})
        assert approved.status_code == 200, approved.text
        condition = approved.json()["status"]["conditions"][0]
        assert condition["lastUpdateTime"] and condition["lastTransitionTime"]
        # Approved is never taken back
        withdrawn = await admin.put(f"{BASE}/{name}/approval", json={
            **approved.json(), "status": {"conditions": []}})
        assert withdrawn.status_code == 422, withdrawn.text
        # the apiserver's client signer is never for system:masters
        masters = csr(unique("csr"), signer=KUBE_APISERVER_CLIENT,
                      pem=request("eve", ("system:masters",)))
        refused = await admin.post(BASE, json=masters)
        assert refused.status_code == 403 and "system:masters group is not allowed" in \
            refused.json()["message"]
        table = Kubectl(apiserver.url, tmp_path).run("get", "csr", name).stdout
        assert table.split("\n")[0].split() == [
            "NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
        assert table.split("\n")[1].split()[2:] == [
            KUBE_APISERVER_CLIENT_KUBELET, who, "<none>", "Approved"]
        await admin.delete(f"{BASE}/{name}")
        await admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")
        await admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")


def test_the_official_python_client_lists_and_reads_csrs(apiserver: ApiServer) -> None:
    name = unique("csr")
    with httpx.Client(base_url=apiserver.url, verify=apiserver.ssl_context()) as admin:
        assert admin.post(BASE, json=csr(name)).status_code == 201
    api = kubernetes.client.CertificatesV1Api(kubernetes.client.ApiClient(
        apiserver.configure(kubernetes.client.Configuration())))
    read = api.read_certificate_signing_request(name)
    assert read.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET
    assert read.spec.username == "kubernetes-admin"
    assert name in [item.metadata.name for item in api.list_certificate_signing_request().items
                    if item.metadata is not None]
    api.delete_certificate_signing_request(name)


def test_the_csr_cleaner_removes_requests_at_kubes_ages() -> None:
    made = "2026-12-03T12:00:00Z"
    pending = {**csr(), "metadata": {"name": "p", "creationTimestamp": made}}
    assert cleanup_due(pending) == NOW + datetime.timedelta(hours=24)
    approved = {**pending, "status": {"conditions": [
        {"type": "Approved", "status": "True", "lastUpdateTime": "2026-12-03T12:30:00Z"}]}}
    assert cleanup_due(approved) == NOW + datetime.timedelta(minutes=90)
    denied = {**pending, "status": {"conditions": [{"type": "Denied", "status": "True"}]}}
    assert cleanup_due(denied) == NOW + datetime.timedelta(hours=1)
    ca_key = pki.new_key()
    ca = pki.self_signed_ca("kubernetes", ca_key)
    short = csr(expirationSeconds=600)
    cert = sign(short, ca, ca_key, now=NOW)
    issued = {**approved, "status": {**approved["status"],
                                     "certificate": base64.b64encode(cert).decode()}}
    assert cleanup_due(issued) == NOW + datetime.timedelta(minutes=10)  # expired first
