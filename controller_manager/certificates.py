"""The certificate controllers of kube-controller-manager (pkg/controller/certificates):

- csrapproving: a kubelet's client certificate request (signer
  kubernetes.io/kube-apiserver-client-kubelet, `O=system:nodes`, `CN=system:node:NAME`,
  client usages only) is approved when a SubjectAccessReview says its requester may create
  `certificatesigningrequests/nodeclient` (a bootstrap token joining) or, for its own node,
  `certificatesigningrequests/selfnodeclient` (a kubelet renewing).
- csrsigning: an approved request of one of kube's signers is signed with the cluster CA
  (`--cluster-signing-cert-file`, `--cluster-signing-key-file`), or marked Failed when the
  signer's rules refuse it (a kubelet-serving request for another node's names, ...).

Serving certificates are never approved automatically, as in kube: an administrator runs
`kubectl certificate approve`.
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common.client import ApiClient
from common.csr import (
    APPROVED,
    DENIED,
    FAILED,
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
    LEGACY_UNKNOWN,
    conditions,
    has_condition,
    is_approved,
    is_decided,
    parse_request,
)
from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from common.timestamps import rfc3339
from controller_manager.controller import QueueController
from controller_manager.pods import parse_time

log = logging.getLogger("controller_manager.certificates")

APPROVING = "csrapproving"
SIGNING = "csrsigning"
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
DEFAULT_DURATION = datetime.timedelta(days=365)  # --cluster-signing-duration 8760h
CLOCK_SKEW = datetime.timedelta(minutes=5)  # the signer backdates by this much
KUBELET_CLIENT_USAGES = ({"client auth", "digital signature"},
                         {"client auth", "digital signature", "key encipherment"})
KUBELET_SERVING_USAGES = ({"server auth", "digital signature"},
                          {"server auth", "digital signature", "key encipherment"})
CSR_GROUP_VERSIONS = {"certificatesigningrequests": "certificates.k8s.io/v1",
                      "subjectaccessreviews": "authorization.k8s.io/v1"}

Object = dict[str, Any]
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


# -- reading a request (pure) -------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    common_name: str
    organizations: tuple[str, ...]
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    emails: tuple[str, ...]
    uris: tuple[str, ...]


def read_request(csr: Mapping[str, Any]) -> Request | None:
    request = parse_request(csr.get("spec") or {})
    if request is None:
        return None
    subject = request.subject
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = tuple(sans.get_values_for_type(x509.DNSName))
        ips = tuple(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))
        emails = tuple(sans.get_values_for_type(x509.RFC822Name))
        uris = tuple(sans.get_values_for_type(x509.UniformResourceIdentifier))
    except x509.ExtensionNotFound:
        dns = ips = emails = uris = ()
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return Request(
        common_name=str(cns[0].value) if cns else "",
        organizations=tuple(str(a.value) for a in subject.get_attributes_for_oid(
            NameOID.ORGANIZATION_NAME)),
        dns_names=dns, ip_addresses=ips, emails=emails, uris=uris)


def usages(csr: Mapping[str, Any]) -> set[str]:
    return set((csr.get("spec") or {}).get("usages") or [])


def kubelet_client_problem(csr: Mapping[str, Any], request: Request) -> str | None:
    """ValidateKubeletClientCSR: None when it is a kubelet client certificate request."""
    if request.organizations != (NODES_GROUP,):
        return "subject organization is not system:nodes"
    if not request.common_name.startswith(NODE_PREFIX):
        return 'subject common name does not begin with "system:node:"'
    if request.dns_names or request.emails or request.ip_addresses or request.uris:
        return "DNS, email, IP or URI subjectAltNames are not allowed"
    if usages(csr) not in KUBELET_CLIENT_USAGES:
        return ("usages did not match [client auth digital signature] or "
                "[client auth digital signature key encipherment]")
    return None


def kubelet_serving_problem(csr: Mapping[str, Any], request: Request) -> str | None:
    """ValidateKubeletServingCSR, and the request is the requesting node's own."""
    if request.organizations != (NODES_GROUP,):
        return "subject organization is not system:nodes"
    if not request.common_name.startswith(NODE_PREFIX):
        return 'subject common name does not begin with "system:node:"'
    if request.emails or request.uris:
        return "email and URI subjectAltNames are not allowed"
    if not request.dns_names and not request.ip_addresses:
        return "DNS or IP subjectAltName is required"
    if usages(csr) not in KUBELET_SERVING_USAGES:
        return ("usages did not match [server auth digital signature] or "
                "[server auth digital signature key encipherment]")
    if (csr.get("spec") or {}).get("username") != request.common_name:
        return "the requesting user is not the node the certificate is for"
    return None


def signer_problem(csr: Mapping[str, Any], request: Request) -> str | None:
    """What the signer of the request's signerName refuses in it; None: it signs."""
    signer = (csr.get("spec") or {}).get("signerName")
    if signer == KUBE_APISERVER_CLIENT_KUBELET:
        return kubelet_client_problem(csr, request)
    if signer == KUBELET_SERVING:
        return kubelet_serving_problem(csr, request)
    if signer == KUBE_APISERVER_CLIENT:
        return None if "client auth" in usages(csr) else "usages must include client auth"
    if signer == LEGACY_UNKNOWN:
        return None
    return f"unknown signer {signer!r}"


def approval_subresource(csr: Mapping[str, Any], request: Request) -> str | None:
    """Which permission approves it automatically (csrapproving's recognizers):
    `selfnodeclient` for a node's own renewal, `nodeclient` for any kubelet client
    request; None when no recognizer matches."""
    spec = csr.get("spec") or {}
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_KUBELET or \
            kubelet_client_problem(csr, request) is not None:
        return None
    if spec.get("username") == request.common_name:
        return "selfnodeclient"
    return "nodeclient"


def access_review(csr: Mapping[str, Any], subresource: str) -> Object:
    spec = csr.get("spec") or {}
    review: Object = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": {"user": spec.get("username", ""),
                               "groups": list(spec.get("groups") or []),
                               "resourceAttributes": {
                                   "group": "certificates.k8s.io",
                                   "resource": "certificatesigningrequests",
                                   "verb": "create", "subresource": subresource}}}
    if spec.get("uid"):
        review["spec"]["uid"] = spec["uid"]
    if spec.get("extra"):
        review["spec"]["extra"] = spec["extra"]
    return review


def with_condition(csr: Object, kind: str, reason: str, message: str) -> Object:
    stamp = rfc3339()
    status = dict(csr.get("status") or {})
    status["conditions"] = [*conditions(csr), {
        "type": kind, "status": "True", "reason": reason, "message": message,
        "lastUpdateTime": stamp, "lastTransitionTime": stamp}]
    return {**csr, "status": status}


# -- signing (pure) -----------------------------------------------------------------------------


KEY_USAGE_FLAGS = {"digital signature": "digital_signature",
                   "key encipherment": "key_encipherment",
                   "content commitment": "content_commitment",
                   "data encipherment": "data_encipherment", "key agreement": "key_agreement",
                   "cert sign": "key_cert_sign", "crl sign": "crl_sign",
                   "encipher only": "encipher_only", "decipher only": "decipher_only"}
EXTENDED_USAGES = {"server auth": ExtendedKeyUsageOID.SERVER_AUTH,
                   "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
                   "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
                   "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
                   "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
                   "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING}


def duration_of(csr: Mapping[str, Any], ceiling: datetime.timedelta) -> datetime.timedelta:
    """spec.expirationSeconds, never beyond the signer's --cluster-signing-duration."""
    seconds = (csr.get("spec") or {}).get("expirationSeconds")
    if seconds is None:
        return ceiling
    return min(ceiling, datetime.timedelta(seconds=int(seconds)))


def sign(csr: Mapping[str, Any], ca_cert: x509.Certificate, ca_key: PrivateKey, *,
         now: datetime.datetime, ceiling: datetime.timedelta = DEFAULT_DURATION) -> bytes:
    """The PEM certificate for the request: its subject and SANs, the usages it asked
    for, valid from 5 minutes ago for its duration (never past the CA's own expiry)."""
    request = parse_request(csr.get("spec") or {})
    if request is None:
        raise ValueError("spec.request is not a certificate request")
    start = now - CLOCK_SKEW
    end = min(now + duration_of(csr, ceiling), ca_cert.not_valid_after_utc)
    wanted = usages(csr)
    flags = {flag: usage in wanted for usage, flag in KEY_USAGE_FLAGS.items()}
    builder = (x509.CertificateBuilder()
               .subject_name(request.subject).issuer_name(ca_cert.subject)
               .public_key(request.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(**flags), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    extended = [EXTENDED_USAGES[u] for u in sorted(wanted) if u in EXTENDED_USAGES]
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    try:
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        builder = builder.add_extension(sans.value, critical=False)
    except x509.ExtensionNotFound:
        pass
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class SigningCA:
    cert: x509.Certificate
    key: PrivateKey
    duration: datetime.timedelta = DEFAULT_DURATION

    @classmethod
    def load(cls, cert_pem: bytes, key_pem: bytes,
             duration: datetime.timedelta = DEFAULT_DURATION) -> SigningCA:
        key = serialization.load_pem_private_key(key_pem, None)
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError("the signing key is neither ECDSA nor RSA")
        return cls(x509.load_pem_x509_certificate(cert_pem), key, duration)


# -- the controllers ----------------------------------------------------------------------------


def csr_name(csr: Mapping[str, Any]) -> str:
    return str((csr.get("metadata") or {}).get("name") or "")


class _CSRController(QueueController):
    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.csrs = factory.informer("certificatesigningrequests")
        self.csrs.add_event_handler(on_add=self._changed,
                                    on_update=lambda _old, new: self._changed(new),
                                    name=f"{self.name} certificatesigningrequests")

    def synced_before_start(self) -> Sequence[SharedInformer]:
        return [self.csrs]

    def _changed(self, csr: Object) -> None:
        if self.wants(csr):
            self.queue.add(csr_name(csr))

    def wants(self, csr: Mapping[str, Any]) -> bool:
        raise NotImplementedError


class CSRApprovingController(_CSRController):
    name = APPROVING

    def wants(self, csr: Mapping[str, Any]) -> bool:
        return not is_decided(csr) and not has_condition(csr, FAILED) and \
            (csr.get("spec") or {}).get("signerName") == KUBE_APISERVER_CLIENT_KUBELET

    async def sync(self, key: str) -> None:
        csr = self.csrs.get(key)
        if csr is None or not self.wants(csr):
            return
        request = read_request(csr)
        subresource = approval_subresource(csr, request) if request is not None else None
        if subresource is None:
            return  # not one it recognizes: left for a person
        review = await self.client.create("subjectaccessreviews",
                                          access_review(csr, subresource))
        if not (review.get("status") or {}).get("allowed"):
            log.info("csr %s: %s may not create certificatesigningrequests/%s: not approving",
                     key, (csr.get("spec") or {}).get("username"), subresource)
            return
        approved = with_condition(csr, APPROVED, "AutoApproved",
                                  "Auto approving self kubelet client certificate after "
                                  "SubjectAccessReview." if subresource == "selfnodeclient"
                                  else "Auto approving kubelet client certificate after "
                                       "SubjectAccessReview.")
        try:
            await self.client.update("certificatesigningrequests", approved,
                                     subresource="approval")
        except (NotFound, Conflict):
            return  # gone, or changed: the informer brings it back
        log.info("csr %s: approved kubelet client certificate for %s (%s)", key,
                 (csr.get("spec") or {}).get("username"), subresource)


class CSRSigningController(_CSRController):
    name = SIGNING

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 ca: SigningCA, workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.ca = ca

    def wants(self, csr: Mapping[str, Any]) -> bool:
        return is_approved(csr) and not has_condition(csr, FAILED) and \
            not (csr.get("status") or {}).get("certificate") and \
            (csr.get("spec") or {}).get("signerName") in (
                KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING,
                LEGACY_UNKNOWN)

    async def sync(self, key: str) -> None:
        csr = self.csrs.get(key)
        if csr is None or not self.wants(csr):
            return
        request = read_request(csr)
        problem = "spec.request is not a certificate request" if request is None \
            else signer_problem(csr, request)
        if problem is not None:
            log.info("csr %s: the signer refuses it: %s", key, problem)
            updated = with_condition(csr, FAILED, "SignerValidationFailure", problem)
        else:
            pem = sign(csr, self.ca.cert, self.ca.key, now=datetime.datetime.now(datetime.UTC),
                       ceiling=self.ca.duration)
            updated = {**csr, "status": {**(csr.get("status") or {}),
                                         "certificate": base64.b64encode(pem).decode()}}
        try:
            await self.client.update("certificatesigningrequests", updated,
                                     subresource="status")
        except (NotFound, Conflict):
            return
        if problem is None:
            log.info("csr %s: signed a %s certificate for %s", key,
                     (csr.get("spec") or {}).get("signerName"),
                     request.common_name if request else "?")


# -- csrcleaner ---------------------------------------------------------------------------------

CLEANER = "csrcleaner"
APPROVED_EXPIRATION = datetime.timedelta(hours=1)  # kube's csrcleaner's ages
DENIED_EXPIRATION = datetime.timedelta(hours=1)
PENDING_EXPIRATION = datetime.timedelta(hours=24)


def cleanup_due(csr: Mapping[str, Any]) -> datetime.datetime | None:
    """When kube's csrcleaner removes a request: an approved (issued or not) one an hour
    after its approval, a denied or failed one an hour after that, a pending one a day
    after it was made; one whose certificate has expired at once."""
    due: list[datetime.datetime] = []
    pem = (csr.get("status") or {}).get("certificate")
    if pem:
        try:
            chain = x509.load_pem_x509_certificates(base64.b64decode(pem))
            due.append(min(c.not_valid_after_utc for c in chain))
        except ValueError:
            pass
    created = parse_time((csr.get("metadata") or {}).get("creationTimestamp"))
    decided = False
    for condition in conditions(csr):
        if condition.get("type") in (APPROVED, DENIED, FAILED):
            decided = True
            since = parse_time(condition.get("lastUpdateTime")) or created
            age = APPROVED_EXPIRATION if condition.get("type") == APPROVED \
                else DENIED_EXPIRATION
            if since is not None:
                due.append(since + age)
    if not decided and created is not None:
        due.append(created + PENDING_EXPIRATION)
    return min(due, default=None)


class CSRCleanerController(_CSRController):
    name = CLEANER

    def wants(self, csr: Mapping[str, Any]) -> bool:
        return cleanup_due(csr) is not None

    async def sync(self, key: str) -> None:
        csr = self.csrs.get(key)
        due = cleanup_due(csr) if csr is not None else None
        if csr is None or due is None:
            return
        left = (due - datetime.datetime.now(datetime.UTC)).total_seconds()
        if left > 0:
            self.queue.add_after(key, left)
            return
        log.info("csr %s: old enough to be removed (csrcleaner)", key)
        try:
            await self.client.delete("certificatesigningrequests", key,
                                     preconditions={"uid": str(csr["metadata"].get("uid"))})
        except (NotFound, Conflict):
            return
