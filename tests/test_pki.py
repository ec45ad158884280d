"""The cluster PKI (common.pki): kubeadm's layout, names, chains, and idempotence."""

from __future__ import annotations

import base64
import ipaddress
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common import kubeconfig, pki

NODES = ("node1", "node2")


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    pki.init(directory, NODES)
    return directory


def cert(directory: Path, name: str) -> x509.Certificate:
    return pki.load_cert(directory / f"{name}.crt")


def cn_and_orgs(c: x509.Certificate) -> tuple[str, list[str]]:
    cn = c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    orgs = [str(a.value) for a in c.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return str(cn), orgs


def usages(c: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


@pytest.mark.parametrize(("name", "cn", "orgs"), [
    ("admin", "kubernetes-admin", ["system:masters"]),
    ("scheduler", "system:kube-scheduler", []),
    ("controller-manager", "system:kube-controller-manager", []),
    ("kube-proxy", "system:kube-proxy", []),
    ("kube-dns", "system:kube-dns", []),
    ("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []),  # kubeadm 1.37+
    ("kubelet-client-node1", "system:node:node1", ["system:nodes"]),
    ("kubelet-client-node2", "system:node:node2", ["system:nodes"]),
])
def test_client_certificates_name_their_identity(pki_dir: Path, name: str, cn: str,
                                                 orgs: list[str]) -> None:
    c = cert(pki_dir, name)
    assert cn_and_orgs(c) == (cn, orgs)
    assert usages(c) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    c.verify_directly_issued_by(cert(pki_dir, "ca"))


def test_the_apiserver_serves_kubernetes_names_and_loopback(pki_dir: Path) -> None:
    c = cert(pki_dir, "apiserver")
    sans = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"} <= set(
        sans.get_values_for_type(x509.DNSName))
    assert set(sans.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    assert usages(c) == {ExtendedKeyUsageOID.SERVER_AUTH}
    c.verify_directly_issued_by(cert(pki_dir, "ca"))


def test_the_ca_is_a_ca(pki_dir: Path) -> None:
    ca = cert(pki_dir, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cn_and_orgs(ca) == ("kubernetes", [])
    ca.verify_directly_issued_by(ca)


def test_etcd_has_its_own_ca(pki_dir: Path) -> None:
    etcd_ca = cert(pki_dir, "etcd/ca")
    assert cn_and_orgs(etcd_ca) == ("etcd-ca", [])
    assert etcd_ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in ("etcd/server", "etcd/peer", "etcd/healthcheck-client",
                 "apiserver-etcd-client"):
        cert(pki_dir, name).verify_directly_issued_by(etcd_ca)
        with pytest.raises(ValueError):
            cert(pki_dir, name).verify_directly_issued_by(cert(pki_dir, "ca"))
    with pytest.raises(ValueError):  # and etcd's CA signs nothing of the cluster's
        cert(pki_dir, "admin").verify_directly_issued_by(etcd_ca)


@pytest.mark.parametrize(("name", "cn", "server"), [
    ("etcd/server", "kube-etcd", True),
    ("etcd/peer", "kube-etcd-peer", True),
    ("etcd/healthcheck-client", "kube-etcd-healthcheck-client", False),
    ("apiserver-etcd-client", "kube-apiserver-etcd-client", False),
])
def test_etcd_certificates_as_kubeadm_makes_them(pki_dir: Path, name: str, cn: str,
                                                 server: bool) -> None:
    c = cert(pki_dir, name)
    assert cn_and_orgs(c) == (cn, [])
    assert usages(c) == ({ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
                         if server else {ExtendedKeyUsageOID.CLIENT_AUTH})
    if server:  # etcd listens on loopback
        sans = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
        assert set(sans.get_values_for_type(x509.IPAddress)) == {
            ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    else:
        with pytest.raises(x509.ExtensionNotFound):
            c.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_each_kubelet_has_a_serving_certificate(pki_dir: Path) -> None:
    c = cert(pki_dir, "kubelet-node1")
    sans = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "node1" in sans.get_values_for_type(x509.DNSName)
    assert usages(c) == {ExtendedKeyUsageOID.SERVER_AUTH}


def test_private_keys_are_0600(pki_dir: Path) -> None:
    keys = sorted(pki_dir.rglob("*.key"))
    assert {str(p.relative_to(pki_dir)) for p in keys} >= {
        "ca.key", "sa.key", "admin.key", "apiserver.key", "etcd/ca.key", "etcd/server.key",
        "etcd/peer.key", "etcd/healthcheck-client.key", "apiserver-etcd-client.key"}
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_init_keeps_what_exists(tmp_path: Path) -> None:
    first = pki.init(tmp_path, ["a"])
    assert tmp_path / "ca.crt" in first
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert pki.init(tmp_path, ["a"]) == []
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    (tmp_path / "admin.crt").unlink()
    (tmp_path / "admin.key").unlink()
    again = pki.init(tmp_path, ["a", "b"])  # a new node, and what was removed
    assert set(again) == {tmp_path / f"{n}.{ext}" for n in ("admin", "kubelet-client-b",
                                                            "kubelet-b")
                          for ext in ("crt", "key")}
    assert (tmp_path / "ca.crt").read_bytes() == before[tmp_path / "ca.crt"]


def test_a_kubeconfig_embeds_the_ca_and_the_client_certificate(pki_dir: Path,
                                                               tmp_path: Path) -> None:
    paths = pki.write_kubeconfigs(pki_dir, tmp_path, NODES, server="https://127.0.0.1:6443")
    assert [p.name for p in paths] == ["admin.conf", "scheduler.conf", "controller-manager.conf",
                                       "kube-proxy.conf", "kube-dns.conf",
                                       "kubelet-node1.conf", "kubelet-node2.conf"]
    config = yaml.safe_load((tmp_path / "admin.conf").read_text())
    assert config["current-context"] == "kubernetes-admin@kubernetes"
    cluster = config["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == (
        pki_dir / "ca.crt").read_bytes()
    user = config["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == (
        pki_dir / "admin.crt").read_bytes()
    assert stat.S_IMODE((tmp_path / "admin.conf").stat().st_mode) == 0o600
    conn = kubeconfig.load(tmp_path / "kubelet-node1.conf")  # common.kubeconfig reads it
    assert conn.server == "https://127.0.0.1:6443" and conn.ssl_context is not None


def test_the_cli_writes_the_pki_and_kubeconfigs(tmp_path: Path) -> None:
    assert pki.main(["init", str(tmp_path), "--node", "n1", "--server", "https://h:1"]) == 0
    assert (tmp_path / "kubelet-client-n1.crt").exists()
    assert (tmp_path / "kubelet-n1.conf").exists()
