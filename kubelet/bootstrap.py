"""A kubelet that joins a cluster from nothing but a server URL, a bootstrap token and the
CA's public key hash: kubeadm join's discovery and the kubelet's TLS bootstrap.

1. Discovery (kubeadm's token discovery): fetch `kube-public/cluster-info` without
   trusting the server yet, check its `jws-kubeconfig-ID` signature with the token (only
   someone holding the token could have signed it) and the CA in it against
   `--discovery-token-ca-cert-hash`, then fetch it again trusting that CA. Writes
   `<root-dir>/pki/ca.crt` and `<root-dir>/bootstrap-kubelet.conf` (the token as a bearer).
2. TLS bootstrap (the kubelet's `--bootstrap-kubeconfig`): a new key, a
   CertificateSigningRequest for `CN=system:node:NAME, O=system:nodes` to the signer
   kubernetes.io/kube-apiserver-client-kubelet, which the controller-manager approves
   (the token's group may create `certificatesigningrequests/nodeclient`) and signs.
   Writes `<root-dir>/pki/kubelet-client-current.pem` and the `--kubeconfig` the kubelet
   runs with from then on; a restart with a valid one skips both steps.
3. `--rotate-server-certificates`: the serving certificate is requested the same way
   (signer kubernetes.io/kubelet-serving, the node's name and IP as SANs) by the node
   itself; an administrator approves it (`kubectl certificate approve`), as in kube.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from common.bootstraptoken import (
    CLUSTER_INFO,
    JWS_PREFIX,
    KUBECONFIG_KEY,
    PUBLIC_NAMESPACE,
    Token,
    ca_cert_hash,
    signature_valid,
)
from common.client import ApiClient
from common.csr import (
    DENIED,
    FAILED,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_CLIENT_USAGES,
    KUBELET_SERVING,
    KUBELET_SERVING_USAGES,
    certificate_request,
    csr_object,
    has_condition,
    issued_certificate,
)
from common.errors import Gone
from common.kubeconfig import load, ssl_context
from common.pki import write_file

log = logging.getLogger("kubelet.bootstrap")

RETRY_SECONDS = 2.0
# a CSR's watch is ended and started again after this, as client-go's is
WATCH_SECONDS = 300
CSR_GROUP_VERSIONS = {"certificatesigningrequests": "certificates.k8s.io/v1"}
# a certificate this close to its end is requested anew at start
RENEW_BEFORE = datetime.timedelta(hours=1)


class BootstrapError(Exception):
    """Joining cannot go on (a token the cluster does not know, a CA that is not the
    pinned one): one line for the log, then exit 1."""


# --- discovery -------------------------------------------------------------------------------


def insecure_context() -> ssl.SSLContext:
    """For the first fetch of cluster-info only: its signature is what is trusted."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True)
class ClusterInfo:
    server: str
    ca_pem: bytes


def verified_cluster_info(config_map: dict[str, Any], token: Token,
                          pinned_hashes: tuple[str, ...]) -> tuple[ClusterInfo, str]:
    """The server and CA of cluster-info once its signature and CA check out (kubeadm's
    discovery/token), and the content that was signed; BootstrapError otherwise."""
    data = config_map.get("data") or {}
    content = data.get(KUBECONFIG_KEY)
    if not content:
        raise BootstrapError(f"there is no {KUBECONFIG_KEY} in the {CLUSTER_INFO} ConfigMap")
    signature = data.get(JWS_PREFIX + token.id)
    if not signature:
        raise BootstrapError(
            f'token id "{token.id}" is invalid for this cluster or it has expired. Use '
            '"python -m common.bootstraptoken create" on the control-plane node to create '
            "a new valid token")
    if not signature_valid(content, signature, token):
        raise BootstrapError("failed to verify JWS signature of received cluster info "
                             "object, can't trust this API Server")
    config = yaml.safe_load(content)
    cluster = ((config.get("clusters") or [{}])[0]).get("cluster") or {}
    ca_pem = base64.b64decode(cluster.get("certificate-authority-data") or "")
    found = ca_cert_hash(ca_pem)
    if found not in pinned_hashes:
        raise BootstrapError(f'cluster CA found in cluster-info ConfigMap is invalid: none of '
                             f'the public keys "{found}" are pinned')
    return ClusterInfo(str(cluster.get("server") or ""), ca_pem), content


async def fetch_cluster_info(server: str, verify: ssl.SSLContext) -> dict[str, Any]:
    url = f"{server}/api/v1/namespaces/{PUBLIC_NAMESPACE}/configmaps/{CLUSTER_INFO}"
    async with httpx.AsyncClient(verify=verify, timeout=10) as client:
        response = await client.get(url)
    if response.status_code != 200:
        raise httpx.HTTPStatusError(f"GET {url}: {response.status_code} {response.text[:200]}",
                                    request=response.request, response=response)
    found: dict[str, Any] = response.json()
    return found


async def discover(server: str, token: Token, pinned: tuple[str, ...], *,
                   timeout: float) -> ClusterInfo:
    """Discovery, retried while the apiserver is unreachable or the token's signature is
    not in cluster-info yet (the controller-manager signs a new token within moments)."""
    deadline = asyncio.get_running_loop().time() + timeout
    last = ""
    while True:
        try:
            info, content = verified_cluster_info(
                await fetch_cluster_info(server, insecure_context()), token, pinned)
            # again, now trusting the CA: the server is the one holding its key
            again = await fetch_cluster_info(server, ssl_context(ca=info.ca_pem, cert=None,
                                                                 key=None))
            if (again.get("data") or {}).get(KUBECONFIG_KEY) != content:
                raise BootstrapError("cluster-info changed between the insecure and the "
                                     "verified fetch")
            log.info("discovery: cluster-info from %s verified (signed with token %s, CA %s)",
                     server, token.id, ca_cert_hash(info.ca_pem))
            return info
        except (BootstrapError, httpx.HTTPError, OSError, ValueError) as e:
            if asyncio.get_running_loop().time() > deadline:
                raise BootstrapError(f"discovery from {server} failed: {e}") from None
            if str(e) != last:
                log.info("discovery from %s: %s; retrying", server, e)
                last = str(e)
            await asyncio.sleep(RETRY_SECONDS)


def bootstrap_kubeconfig(info: ClusterInfo, token: Token) -> dict[str, Any]:
    """What kubeadm join writes as bootstrap-kubelet.conf."""
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "kubernetes", "cluster": {
                "server": info.server,
                "certificate-authority-data": base64.b64encode(info.ca_pem).decode()}}],
            "users": [{"name": "tls-bootstrap-token-user", "user": {"token": str(token)}}],
            "contexts": [{"name": "tls-bootstrap-token-user@kubernetes", "context": {
                "cluster": "kubernetes", "user": "tls-bootstrap-token-user"}}],
            "current-context": "tls-bootstrap-token-user@kubernetes"}


# --- certificates through the CSR API ----------------------------------------------------------


def still_good(pem_file: Path, now: datetime.datetime) -> bool:
    """A cert+key PEM file whose certificate is valid a while longer."""
    try:
        cert = x509.load_pem_x509_certificate(pem_file.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc - RENEW_BEFORE > now


def has_credentials(kubeconfig: Path, pem_file: Path, *others: Path) -> bool:
    """The kubeconfig, a certificate valid a while longer, and the other files are there."""
    return (kubeconfig.exists() and all(p.exists() for p in others)
            and still_good(pem_file, datetime.datetime.now(datetime.UTC)))


def key_and_cert_pem(key: ec.EllipticCurvePrivateKey, cert_pem: bytes) -> bytes:
    """kubelet-*-current.pem: the certificate chain and the key in one file, as kube's."""
    return cert_pem + key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.TraditionalOpenSSL,
                                        serialization.NoEncryption())


async def request_certificate(api: ApiClient, *, common_name: str, signer: str,
                              usages: list[str], dns_names: tuple[str, ...] = (),
                              ip_addresses: tuple[str, ...] = (),
                              ) -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    """A new key and the certificate issued for it (waits for approval and signing);
    BootstrapError when the request is denied or fails."""
    key = ec.generate_private_key(ec.SECP256R1())
    request = certificate_request(key, common_name=common_name, organizations=["system:nodes"],
                                  dns_names=dns_names, ip_addresses=ip_addresses)
    body = csr_object("", request, signer=signer, usages=usages)
    body["metadata"] = {"generateName": "csr-"}
    created = await api.create("certificatesigningrequests", body)
    name = created["metadata"]["name"]
    log.info("requested a %s certificate for %s: CertificateSigningRequest %s; waiting for "
             "it to be approved and issued", signer, common_name, name)
    issued = await wait_for_certificate(api, name)
    log.info("certificate %s issued for %s", name, common_name)
    return key, issued


def certificate_outcome(csr: dict[str, Any]) -> bytes | None:
    """The certificate a CSR was issued, None while it waits; BootstrapError once it was
    denied or failed."""
    issued = issued_certificate(csr)
    if issued:
        return issued
    for refused in (DENIED, FAILED):
        if has_condition(csr, refused):
            raise BootstrapError(f"certificate request {csr['metadata']['name']} was "
                                 f"{refused.lower()}")
    return None


async def wait_for_certificate(api: ApiClient, name: str) -> bytes:
    """client-go's WaitForCertificate: a list and then a watch of this one CSR
    (fieldSelector metadata.name), listed again whenever the watch ends, until the
    signer has issued it."""
    selector = f"metadata.name={name}"
    while True:
        listed = await api.list("certificatesigningrequests", field_selector=selector)
        if not listed.get("items"):
            raise BootstrapError(f"certificate request {name} was deleted")
        issued = certificate_outcome(listed["items"][0])
        if issued:
            return issued
        version = listed["metadata"]["resourceVersion"]
        try:
            async with contextlib.aclosing(api.watch(
                    "certificatesigningrequests", resource_version=version,
                    field_selector=selector, timeout_seconds=WATCH_SECONDS)) as events:
                async for event in events:
                    if event["type"] == "DELETED":
                        raise BootstrapError(f"certificate request {name} was deleted")
                    if event["type"] in ("ADDED", "MODIFIED"):
                        issued = certificate_outcome(event["object"])
                        if issued:
                            return issued
        except Gone:
            continue  # compacted under us: list again
        except (httpx.HTTPError, OSError) as e:
            log.info("watching CertificateSigningRequest %s: %s; listing again", name, e)
            await asyncio.sleep(RETRY_SECONDS)


def client_kubeconfig(server: str, ca_pem: bytes, pem: bytes, node: str) -> dict[str, Any]:
    user = f"system:node:{node}"
    data = base64.b64encode(pem).decode()
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "kubernetes", "cluster": {
                "server": server,
                "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
            "users": [{"name": user, "user": {"client-certificate-data": data,
                                              "client-key-data": data}}],
            "contexts": [{"name": f"{user}@kubernetes", "context": {
                "cluster": "kubernetes", "user": user}}],
            "current-context": f"{user}@kubernetes"}


def write_yaml(path: Path, config: dict[str, Any]) -> None:
    write_file(path, yaml.safe_dump(config, sort_keys=False).encode(), private=True)


def read_kubeconfig(path: Path) -> tuple[str, bytes] | None:
    """(server, CA) of a kubeconfig file, None when it cannot be read."""
    try:
        config = yaml.safe_load(path.read_text())
        cluster = config["clusters"][0]["cluster"]
        return str(cluster["server"]), base64.b64decode(cluster["certificate-authority-data"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def kubeconfig_client(path: Path, user_agent: str) -> ApiClient:
    return ApiClient(load(path), user_agent=user_agent, group_versions=CSR_GROUP_VERSIONS)


async def ensure_client_certificate(*, node: str, kubeconfig: Path,
                                    bootstrap: Path, cert_dir: Path) -> None:
    """The kubelet's --kubeconfig with a valid client certificate: kept when it has one,
    else obtained with the bootstrap kubeconfig."""
    current = cert_dir / "kubelet-client-current.pem"
    if await asyncio.to_thread(has_credentials, kubeconfig, current):
        log.info("kubelet %s: client certificate %s is valid: no bootstrap needed", node,
                 current)
        return
    found = await asyncio.to_thread(read_kubeconfig, bootstrap)
    if found is None:
        raise BootstrapError(f"--bootstrap-kubeconfig {bootstrap}: not a usable kubeconfig")
    server, ca_pem = found
    api = kubeconfig_client(bootstrap, "kubelet-bootstrap")
    try:
        key, cert = await request_certificate(
            api, common_name=f"system:node:{node}", signer=KUBE_APISERVER_CLIENT_KUBELET,
            usages=KUBELET_CLIENT_USAGES)
    finally:
        await api.aclose()
    pem = key_and_cert_pem(key, cert)
    write_file(current, pem, private=True)
    write_yaml(kubeconfig, client_kubeconfig(server, ca_pem, pem, node))
    log.info("kubelet %s: client certificate written to %s, kubeconfig %s", node, current,
             kubeconfig)


async def ensure_serving_certificate(*, node: str, kubeconfig: Path, cert_dir: Path,
                                     addresses: tuple[str, ...]) -> Path:
    """cert-dir/kubelet-server-current.pem with a certificate for the node's name and
    addresses, requested as the node itself when there is no valid one."""
    current = cert_dir / "kubelet-server-current.pem"
    if still_good(current, datetime.datetime.now(datetime.UTC)):
        return current
    api = kubeconfig_client(kubeconfig, f"kubelet/{node}")
    try:
        key, cert = await request_certificate(
            api, common_name=f"system:node:{node}", signer=KUBELET_SERVING,
            usages=KUBELET_SERVING_USAGES, dns_names=(node,), ip_addresses=addresses)
    finally:
        await api.aclose()
    write_file(current, key_and_cert_pem(key, cert), private=True)
    log.info("kubelet %s: serving certificate written to %s", node, current)
    return current


def parse_hashes(text: str) -> tuple[str, ...]:
    hashes = tuple(h.strip().lower() for h in text.split(",") if h.strip())
    for value in hashes:
        if not value.startswith("sha256:") or len(value) != len("sha256:") + 64:
            raise ValueError(f'invalid hash "{value}", expected "sha256:" and 64 hex digits')
    return hashes


async def join(*, server: str, token: Token, pinned: tuple[str, ...], node: str,
               root_dir: Path, cert_dir: Path, kubeconfig: Path, timeout: float) -> Path:
    """kubeadm join for this kubelet: discovery (skipped once it has a valid client
    certificate), then the TLS bootstrap; the bootstrap kubeconfig it wrote."""
    bootstrap = root_dir / "bootstrap-kubelet.conf"
    joined = await asyncio.to_thread(has_credentials, kubeconfig,
                                     cert_dir / "kubelet-client-current.pem", cert_dir / "ca.crt")
    if not joined:
        info = await discover(server, token, pinned, timeout=timeout)
        write_file(cert_dir / "ca.crt", info.ca_pem)
        write_yaml(bootstrap, bootstrap_kubeconfig(info, token))
    return bootstrap
