"""The cluster's PKI in kubeadm's layout: a CA, each component's certificate, kubeconfigs.

    python -m common.pki init DIR --node node1 --node node2 [--server https://127.0.0.1:6443]

writes what is missing under DIR (existing files are kept, so it runs on every start):

    ca.crt ca.key                              the cluster CA (CN kubernetes)
    apiserver.crt/.key                         serving: kubernetes, kubernetes.default, ...
    apiserver-kubelet-client.crt/.key          the apiserver calling kubelets (CN
                                               kube-apiserver-kubelet-client, no O)
    admin.crt/.key                             CN kubernetes-admin, O system:masters
    scheduler.crt/.key                         CN system:kube-scheduler
    controller-manager.crt/.key                CN system:kube-controller-manager
    kube-proxy.crt/.key                        CN system:kube-proxy (kubeadm gives kube-proxy
                                               a ServiceAccount; a host process gets a cert)
    kube-dns.crt/.key                          CN system:kube-dns, the cluster DNS's watcher
    kubelet-client-NODE.crt/.key               CN system:node:NODE, O system:nodes
    kubelet-NODE.crt/.key                      the kubelet's serving certificate, signed
                                               by the cluster CA as k3s does (kubeadm's is
                                               self-signed): SANs NODE, localhost, loopback
    sa.key sa.pub                              signs ServiceAccount tokens
    etcd/ca.crt etcd/ca.key                    etcd's own CA (CN etcd-ca): nothing else signs
                                               what etcd trusts
    etcd/server.crt/.key                       CN kube-etcd: localhost, 127.0.0.1, ::1
    etcd/peer.crt/.key                         CN kube-etcd-peer (member to member)
    etcd/healthcheck-client.crt/.key           CN kube-etcd-healthcheck-client
    apiserver-etcd-client.crt/.key             CN kube-apiserver-etcd-client (etcd CA)

and, with --server, a kubeconfig per identity (admin.conf, scheduler.conf,
controller-manager.conf, kube-proxy.conf, kube-dns.conf, kubelet-NODE.conf) with the CA and the client certificate
embedded, as kubeadm's admin.conf has them.

Keys are ECDSA P-256 (kubeadm's `encryptionAlgorithm: ECDSA-P256`); sa.key is RSA, as
kubeadm always makes it. Private keys are written 0600.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
CERT_DAYS = 365
MASTERS = "system:masters"
NODES_GROUP = "system:nodes"
APISERVER_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local")
APISERVER_IPS = ("127.0.0.1", "::1")
ETCD_DNS = ("localhost",)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertSpec:
    """One certificate to issue: its file base name (`admin` -> admin.crt, admin.key)."""

    name: str
    cn: str
    orgs: tuple[str, ...] = ()
    client: bool = False
    server: bool = False
    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    ca: str = "ca"  # the base name of the CA that signs it


@dataclass(frozen=True)
class Identity:
    """A kubeconfig to write: its file, the user name in it, and the certificate's base."""

    file: str
    user: str
    cert: str


@dataclass
class Written:
    files: list[Path] = field(default_factory=list)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def subject(cn: str, orgs: Sequence[str] = ()) -> x509.Name:
    return x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                      *([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else [])])


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def self_signed_ca(cn: str, key: PrivateKey, *, days: int = CA_DAYS,
                   not_before: datetime.datetime | None = None) -> x509.Certificate:
    start = (not_before or now()) - datetime.timedelta(minutes=5)
    name = subject(cn)
    return (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, key_encipherment=True,
                                         content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))


def issue(spec: CertSpec, key: PrivateKey, ca_cert: x509.Certificate, ca_key: PrivateKey, *,
          not_before: datetime.datetime | None = None,
          not_after: datetime.datetime | None = None) -> x509.Certificate:
    """The certificate `spec` describes, for `key`, signed by the CA."""
    start = not_before or now() - datetime.timedelta(minutes=5)
    end = not_after or start + datetime.timedelta(days=CERT_DAYS)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if spec.server else []) + \
        ([ExtendedKeyUsageOID.CLIENT_AUTH] if spec.client else [])
    builder = (x509.CertificateBuilder()
               .subject_name(subject(spec.cn, spec.orgs)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True,
                                            key_cert_sign=False, crl_sign=False,
                                            content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in spec.dns]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in spec.ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def cert_specs(nodes: Sequence[str], *, extra_sans: Sequence[str] = (),
               etcd_extra_sans: Sequence[str] = ()) -> list[CertSpec]:
    """Every certificate of the cluster, kubeadm's CNs and Os (and k3s's per-node ones).
    `extra_sans`: kubeadm's apiServer.certSANs; `etcd_extra_sans`: its etcd.local
    serverCertSANs and peerCertSANs (the addresses of the other etcd members)."""
    extra_ips = tuple(s for s in extra_sans if is_ip(s))
    extra_dns = tuple(s for s in extra_sans if not is_ip(s))
    etcd_ips = APISERVER_IPS + tuple(s for s in etcd_extra_sans if is_ip(s))
    etcd_dns = ETCD_DNS + tuple(s for s in etcd_extra_sans if not is_ip(s))
    specs = [
        CertSpec("apiserver", "kube-apiserver", server=True,
                 dns=APISERVER_DNS + extra_dns, ips=APISERVER_IPS + extra_ips),
        # kubeadm before 1.37 put it in system:masters (1.29+: kubeadm:cluster-admins); 1.37+
        # gives it no group, only the kubeadm:apiserver-kubelet-client binding to
        # system:kubelet-api-admin (apiserver/auth/bootstrap.py)
        CertSpec("apiserver-kubelet-client", "kube-apiserver-kubelet-client", client=True),
        CertSpec("admin", "kubernetes-admin", (MASTERS,), client=True),
        CertSpec("scheduler", "system:kube-scheduler", client=True),
        CertSpec("controller-manager", "system:kube-controller-manager", client=True),
        CertSpec("kube-proxy", "system:kube-proxy", client=True),
        CertSpec("kube-dns", "system:kube-dns", client=True),
        # etcd's, signed by its own CA (kubeadm's `certs etcd-*` phases): etcd trusts
        # that CA only, so the cluster's certificates (admin's too) cannot reach it
        CertSpec("etcd/server", "kube-etcd", server=True, client=True,
                 dns=etcd_dns, ips=etcd_ips, ca="etcd/ca"),
        CertSpec("etcd/peer", "kube-etcd-peer", server=True, client=True,
                 dns=etcd_dns, ips=etcd_ips, ca="etcd/ca"),
        CertSpec("etcd/healthcheck-client", "kube-etcd-healthcheck-client", client=True,
                 ca="etcd/ca"),
        # older kubeadm also put it (and the healthcheck client) in system:masters; etcd
        # reads only that the etcd CA signed it, and the CN
        CertSpec("apiserver-etcd-client", "kube-apiserver-etcd-client", client=True,
                 ca="etcd/ca"),
    ]
    for node in nodes:
        specs.append(CertSpec(f"kubelet-client-{node}", f"system:node:{node}", (NODES_GROUP,),
                              client=True))
        specs.append(CertSpec(f"kubelet-{node}", node, server=True,
                              dns=(node, "localhost"), ips=APISERVER_IPS))
    return specs


def identities(nodes: Sequence[str]) -> list[Identity]:
    """The kubeconfigs kubeadm writes (admin.conf, scheduler.conf, ...), one per node."""
    return [Identity("admin.conf", "kubernetes-admin", "admin"),
            Identity("scheduler.conf", "system:kube-scheduler", "scheduler"),
            Identity("controller-manager.conf", "system:kube-controller-manager",
                     "controller-manager"),
            Identity("kube-proxy.conf", "system:kube-proxy", "kube-proxy"),
            Identity("kube-dns.conf", "system:kube-dns", "kube-dns"),
            *(Identity(f"kubelet-{n}.conf", f"system:node:{n}", f"kubelet-client-{n}")
              for n in nodes)]


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# --- files -------------------------------------------------------------------------------


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def write_file(path: Path, data: bytes, *, private: bool = False) -> None:
    """Atomically, a private file 0600 from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def load_key(path: Path) -> PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey)
    return key


def ensure_ca(directory: Path, name: str, cn: str, written: Written) -> tuple[
        x509.Certificate, PrivateKey]:
    crt, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    if crt.exists() and key_path.exists():
        return load_cert(crt), load_key(key_path)
    key = new_key()
    cert = self_signed_ca(cn, key)
    write_file(key_path, key_pem(key), private=True)
    write_file(crt, cert_pem(cert))
    written.files += [crt, key_path]
    return cert, key


def ensure_cert(directory: Path, spec: CertSpec,
                cas: dict[str, tuple[x509.Certificate, PrivateKey]], written: Written) -> None:
    crt, key_path = directory / f"{spec.name}.crt", directory / f"{spec.name}.key"
    if crt.exists() and key_path.exists() and covers(load_cert(crt), spec):
        return
    ca_cert, ca_key = cas[spec.ca]
    key = new_key()
    write_file(key_path, key_pem(key), private=True)
    write_file(crt, cert_pem(issue(spec, key, ca_cert, ca_key)))
    written.files += [crt, key_path]


def covers(cert: x509.Certificate, spec: CertSpec) -> bool:
    """Whether `cert` names every DNS name and IP of `spec` (a certificate from before
    SANs were added, say for --ha's addresses, is issued again, as `kubeadm init phase
    certs` renews one that lacks them)."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return not spec.dns and not spec.ips
    dns = set(names.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    return set(spec.dns) <= dns and {str(ipaddress.ip_address(i)) for i in spec.ips} <= ips


def ensure_sa_key(directory: Path, written: Written) -> None:
    key_path, pub = directory / "sa.key", directory / "sa.pub"
    if key_path.exists() and pub.exists():
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_file(key_path, key_pem(key), private=True)
    write_file(pub, key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    written.files += [key_path, pub]


def init(directory: Path, nodes: Sequence[str], *, extra_sans: Sequence[str] = (),
         etcd_extra_sans: Sequence[str] = ()) -> list[Path]:
    """Create what is missing of the PKI under `directory`; the files written."""
    written = Written()
    cas = {"ca": ensure_ca(directory, "ca", "kubernetes", written),
           "etcd/ca": ensure_ca(directory, "etcd/ca", "etcd-ca", written)}
    for spec in cert_specs(nodes, extra_sans=extra_sans, etcd_extra_sans=etcd_extra_sans):
        ensure_cert(directory, spec, cas, written)
    ensure_sa_key(directory, written)
    return written.files


# --- kubeconfigs -------------------------------------------------------------------------


def kubeconfig(*, server: str, ca: bytes, cert: bytes, key: bytes, user: str,
               cluster: str = "kubernetes", namespace: str | None = None) -> dict[str, Any]:
    """A kubeconfig as kubeadm's admin.conf: one cluster, user and context, all embedded."""
    context = f"{user}@{cluster}"
    ctx: dict[str, Any] = {"cluster": cluster, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": cluster, "cluster": {
                "server": server, "certificate-authority-data": b64(ca)}}],
            "users": [{"name": user, "user": {"client-certificate-data": b64(cert),
                                              "client-key-data": b64(key)}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context}


def kubeconfig_for(directory: Path, cert_name: str, *, server: str, user: str,
                   namespace: str | None = None) -> dict[str, Any]:
    return kubeconfig(server=server, ca=(directory / "ca.crt").read_bytes(),
                      cert=(directory / f"{cert_name}.crt").read_bytes(),
                      key=(directory / f"{cert_name}.key").read_bytes(), user=user,
                      namespace=namespace)


def write_kubeconfig(path: Path, config: dict[str, Any]) -> None:
    write_file(path, yaml.safe_dump(config, sort_keys=False).encode(), private=True)


def write_kubeconfigs(directory: Path, out: Path, nodes: Sequence[str], *,
                      server: str) -> list[Path]:
    """Every identity's kubeconfig (rewritten each time: the server may have moved)."""
    paths = []
    for identity in identities(nodes):
        path = out / identity.file
        write_kubeconfig(path, kubeconfig_for(directory, identity.cert, server=server,
                                              user=identity.user))
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.pki",
                                     description="the cluster's CA, certificates, kubeconfigs")
    sub = parser.add_subparsers(dest="command", required=True)
    p_init = sub.add_parser("init", help="create what is missing of the PKI under DIR")
    p_init.add_argument("dir", type=Path)
    p_init.add_argument("--node", action="append", default=[], help="a node (repeatable)")
    p_init.add_argument("--apiserver-cert-extra-sans", default="",
                        help="comma-separated extra DNS names or IPs of the apiserver")
    p_init.add_argument("--etcd-cert-extra-sans", default="",
                        help="comma-separated extra DNS names or IPs of etcd's server and "
                             "peer certificates (kubeadm's etcd.local.serverCertSANs)")
    p_init.add_argument("--server", help="also write each identity's kubeconfig for this URL")
    p_init.add_argument("--kubeconfig-dir", type=Path,
                        help="where the kubeconfigs go (default: DIR)")
    args = parser.parse_args(argv)
    sans = [s for s in args.apiserver_cert_extra_sans.split(",") if s]
    etcd_sans = [s for s in args.etcd_cert_extra_sans.split(",") if s]
    for path in init(args.dir, args.node, extra_sans=sans, etcd_extra_sans=etcd_sans):
        print(f"wrote {path}")
    if args.server:
        for path in write_kubeconfigs(args.dir, args.kubeconfig_dir or args.dir, args.node,
                                      server=args.server):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
