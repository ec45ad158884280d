"""CertificateSigningRequests (certificates.k8s.io/v1) as every side reads them: the
apiserver validating them, the controller-manager approving and signing, the kubelet
asking for its certificates. kube's signer names and condition types, and the request
inside `spec.request` (base64 of a PEM CERTIFICATE REQUEST)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
# what the kubelet asks for (kube's kubelet: certificate.NewKubeletClient/ServerCertificate)
KUBELET_CLIENT_USAGES = ["digital signature", "client auth"]
KUBELET_SERVING_USAGES = ["digital signature", "server auth"]


def decoded_bytes(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_request(spec: Mapping[str, Any]) -> x509.CertificateSigningRequest | None:
    """The x509 request of spec.request; None when it is not one."""
    pem = decoded_bytes(spec.get("request"))
    if pem is None or b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        return None
    try:
        return x509.load_pem_x509_csr(pem)
    except ValueError:
        return None


def conditions(csr: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((csr.get("status") or {}).get("conditions") or [])


def has_condition(csr: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status", "True") == "True"
               for c in conditions(csr))


def is_approved(csr: Mapping[str, Any]) -> bool:
    return has_condition(csr, APPROVED) and not has_condition(csr, DENIED)


def is_decided(csr: Mapping[str, Any]) -> bool:
    return has_condition(csr, APPROVED) or has_condition(csr, DENIED)


def issued_certificate(csr: Mapping[str, Any]) -> bytes | None:
    """status.certificate decoded (PEM), None until it is issued."""
    return decoded_bytes((csr.get("status") or {}).get("certificate"))


def certificate_request(key: ec.EllipticCurvePrivateKey, *, common_name: str,
                        organizations: Sequence[str] = (), dns_names: Sequence[str] = (),
                        ip_addresses: Sequence[str] = ()) -> bytes:
    """A PEM certificate request signed with `key`."""
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)
                           for o in organizations),
                         x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr_object(name: str, request_pem: bytes, *, signer: str, usages: Sequence[str],
               expiration_seconds: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"request": base64.b64encode(request_pem).decode(),
                            "signerName": signer, "usages": list(usages)}
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": spec}
