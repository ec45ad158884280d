"""CertificateSigningRequests (certificates.k8s.io/v1): the strategy of pkg/registry/
certificates/certificates (the requester stamped into the spec on create, a spec nobody
changes afterwards, the status and approval subresources each changing only its part),
ValidateCertificateSigningRequest{Create,Update,StatusUpdate,ApprovalUpdate}, and the Table
of printCertificateSigningRequest (`kubectl get csr`).

Who may approve or sign is admission's (apiserver/auth/admission.py: CertificateApproval,
CertificateSigning, CertificateSubjectRestriction); the controller-manager approves kubelet
client certificates and signs (controller_manager/certificates.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cryptography import x509

from apiserver.auth import UserInfo
from apiserver.resources.base import Resource, SubresourceUpdate
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    Cause,
    duplicate,
    forbidden,
    invalid,
    is_qualified_name,
    name_is_dns_subdomain,
    not_supported,
    required,
    validate_object_meta,
)
from common.csr import (
    APPROVED,
    DENIED,
    FAILED,
    conditions,
    decoded_bytes,
    has_condition,
    parse_request,
)
from common.models import Int32, KubeModel, ObjectMeta
from common.timestamps import rfc3339

CERTIFICATES_GROUP = "certificates.k8s.io"
MIN_EXPIRATION_SECONDS = 600
# certificates.KeyUsage values
KEY_USAGES = (
    "signing", "digital signature", "content commitment", "key encipherment",
    "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
    "decipher only", "any", "server auth", "client auth", "code signing", "email protection",
    "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping",
    "ocsp signing", "microsoft sgc", "netscape sgc")
CONDITION_STATUSES = ("True", "False", "Unknown")

Object = dict[str, Any]


class CertificateSigningRequestSpec(KubeModel):
    request: str | None = None  # base64 of the PEM CSR ([]byte in Go)
    signer_name: str | None = None
    expiration_seconds: Int32 | None = None
    usages: list[str] | None = None
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class CertificateSigningRequestCondition(KubeModel):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_update_time: str | None = None
    last_transition_time: str | None = None


class CertificateSigningRequestStatus(KubeModel):
    conditions: list[CertificateSigningRequestCondition] | None = None
    certificate: str | None = None  # base64 of the PEM chain


class CertificateSigningRequest(KubeModel):
    kind: str | None = None
    api_version: str | None = None
    metadata: ObjectMeta | None = None
    spec: CertificateSigningRequestSpec | None = None
    status: CertificateSigningRequestStatus | None = None


# --- create and update -------------------------------------------------------------------------


def stamp_requester(csr: Object, user: UserInfo | None) -> None:
    """PrepareForCreate: who asked is the server's to say (spec.username, uid, groups,
    extra), and a new request has no status."""
    spec = csr.setdefault("spec", {})
    for key in ("username", "uid", "groups", "extra"):
        spec.pop(key, None)
    csr.pop("status", None)
    if user is None:
        return
    spec["username"] = user.name
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)


def default_csr(csr: Object, old: Object | None) -> None:
    """On update nothing changes the spec (kube copies the old one back); conditions get
    status True and their timestamps (populateConditionTimestamps)."""
    if old is not None:
        csr["spec"] = old.get("spec") or {}
    before = {c.get("type"): c for c in conditions(old or {})}
    for condition in (csr.get("status") or {}).get("conditions") or []:
        condition.setdefault("status", "True")
        previous = before.get(condition.get("type"))
        stamp = rfc3339()
        condition.setdefault("lastUpdateTime", stamp)
        if previous is not None and previous.get("status") == condition.get("status"):
            condition.setdefault("lastTransitionTime",
                                 previous.get("lastTransitionTime") or stamp)
        else:
            condition.setdefault("lastTransitionTime", stamp)


def validate_signer_name(name: Any, path: str) -> list[Cause]:
    """ValidateSignerName: a `domain/path` qualified name."""
    if not name:
        return [required(path, "")]
    text = str(name)
    if "/" not in text:
        return [invalid(path, text, "must be a fully qualified domain and path of the form "
                                    "'example.com/signer-name'")]
    domain, rest = text.split("/", 1)
    errs = [invalid(path, text, m) for m in is_qualified_name(domain) if domain]
    if not rest:
        errs.append(invalid(path, text, "validating path: must be non-empty"))
    return errs


def validate_conditions(csr: Mapping[str, Any]) -> list[Cause]:
    """The conditions' types once each, known statuses; Approved and Denied never both."""
    errs: list[Cause] = []
    seen: set[str] = set()
    for i, condition in enumerate(conditions(csr)):
        path = f"status.conditions[{i}]"
        kind = condition.get("type") or ""
        if not kind:
            errs.append(required(f"{path}.type", ""))
        elif kind in (APPROVED, DENIED, FAILED) and kind in seen:
            errs.append(duplicate(f"{path}.type", kind))
        seen.add(kind)
        status = condition.get("status") or ""
        if status not in CONDITION_STATUSES:
            errs.append(not_supported(f"{path}.status", status, CONDITION_STATUSES))
        elif kind in (APPROVED, DENIED) and status != "True":
            errs.append(not_supported(f"{path}.status", status, ("True",)))
    if has_condition(csr, APPROVED) and has_condition(csr, DENIED):
        errs.append(invalid("status.conditions", conditions(csr),
                            "Approved and Denied conditions are mutually exclusive"))
    return errs


def validate_certificate(csr: Mapping[str, Any]) -> list[Cause]:
    text = (csr.get("status") or {}).get("certificate")
    if not text:
        return []
    pem = decoded_bytes(text)
    try:
        if pem is None:
            raise ValueError
        x509.load_pem_x509_certificates(pem)
    except ValueError:
        return [invalid("status.certificate", "<certificate data>",
                        "must contain at least one CERTIFICATE PEM block")]
    return []


def validate_csr(csr: Object) -> list[Cause]:
    """ValidateCertificateSigningRequestCreate."""
    errs = validate_object_meta(csr.get("metadata") or {}, namespaced=False,
                                name_check=name_is_dns_subdomain)
    spec = csr.get("spec") or {}
    if not spec.get("request"):
        errs.append(required("spec.request", ""))
    elif parse_request(spec) is None:
        errs.append(invalid("spec.request", "<request data>",
                            "PEM block type must be CERTIFICATE REQUEST"))
    errs += validate_signer_name(spec.get("signerName"), "spec.signerName")
    usages = spec.get("usages") or []
    if not usages:
        errs.append(required("spec.usages", ""))
    seen: set[str] = set()
    for i, usage in enumerate(usages):
        if usage not in KEY_USAGES:
            errs.append(not_supported(f"spec.usages[{i}]", usage, KEY_USAGES))
        elif usage in seen:
            errs.append(duplicate(f"spec.usages[{i}]", usage))
        seen.add(usage)
    seconds = spec.get("expirationSeconds")
    if seconds is not None and seconds < MIN_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", seconds,
                            "may not specify a duration less than 600 seconds (10 minutes)"))
    return errs + validate_conditions(csr) + validate_certificate(csr)


def validate_update(new: Object, old: Object) -> list[Cause]:
    return validate_conditions(new)


def removed_decisions(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """Approved and Denied are never taken back."""
    return [forbidden("status.conditions",
                      f'updates may not remove a condition of type "{kind}"')
            for kind in (APPROVED, DENIED) if has_condition(old, kind)
            and not has_condition(new, kind)]


def validate_status_update(new: Object, old: Object) -> list[Cause]:
    """ValidateCertificateSigningRequestStatusUpdate: a certificate is issued once, and
    Approved/Denied are the approval subresource's."""
    errs = validate_conditions(new) + validate_certificate(new) + removed_decisions(new, old)
    for kind in (APPROVED, DENIED):
        if has_condition(new, kind) and not has_condition(old, kind):
            errs.append(forbidden("status.conditions",
                                  f'a condition of type "{kind}" is added through the '
                                  "approval subresource only"))
    before = (old.get("status") or {}).get("certificate")
    after = (new.get("status") or {}).get("certificate")
    if before and after != before:
        errs.append(forbidden("status.certificate",
                              "updates may not modify existing certificate content"))
    return errs


def prepare_approval(new: Object, old: Object) -> Object:
    """The approval subresource changes status.conditions only."""
    out = dict(old)
    status = dict(old.get("status") or {})
    sent = (new.get("status") or {}).get("conditions")
    if sent:
        status["conditions"] = sent
    else:
        status.pop("conditions", None)
    out["status"] = status
    return out


def validate_approval(new: Object, old: Object) -> list[Cause]:
    return validate_conditions(new) + removed_decisions(new, old)


APPROVAL = SubresourceUpdate(prepare=prepare_approval, validate=validate_approval)


# --- the Table ---------------------------------------------------------------------------------


def human_duration(seconds: int) -> str:
    """duration.HumanDuration, as kubectl prints a requested duration."""
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        rest = (seconds % 3600) // 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def condition_text(csr: Mapping[str, Any]) -> str:
    """The CONDITION column: the condition types, and Issued once a certificate is there;
    Pending with neither."""
    found = [str(c.get("type")) for c in conditions(csr) if c.get("status", "True") == "True"]
    if (csr.get("status") or {}).get("certificate"):
        found.append("Issued")
    return ",".join(found) if found else "Pending"


COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("SignerName", "Name of the signer that will issue the certificate."),
    column("Requestor", "Name of the user that requested the certificate."),
    column("RequestedDuration", "The requested duration of the certificate."),
    column("Condition", "The current status of the request: Pending, Approved, Denied, "
                        "Failed, and whether the certificate was Issued."),
]


def csr_cells(csr: Object, now: datetime) -> list[Any]:
    """printCertificateSigningRequest."""
    meta, spec = csr.get("metadata") or {}, csr.get("spec") or {}
    seconds = spec.get("expirationSeconds")
    return [meta.get("name", ""), format_age(meta.get("creationTimestamp"), now),
            spec.get("signerName") or "<none>", spec.get("username") or "",
            "<none>" if seconds is None else human_duration(int(seconds)), condition_text(csr)]


CERTIFICATE_SIGNING_REQUESTS = Resource(
    plural="certificatesigningrequests", singular="certificatesigningrequest",
    kind="CertificateSigningRequest", namespaced=False, model=CertificateSigningRequest,
    storage_name="certificatesigningrequests", group=CERTIFICATES_GROUP,
    short_names=("csr",), subresources=frozenset({"status", "approval"}),
    descriptions={"CertificateSigningRequest": (
        "CertificateSigningRequest objects provide a mechanism to obtain x509 certificates "
        "by submitting a certificate signing request, and having it asynchronously approved "
        "and issued.")},
    prepare_for_user=stamp_requester, default=default_csr, validate=validate_csr,
    validate_update=validate_update, validate_status_update=validate_status_update,
    subresource_updates={"approval": APPROVAL}, tracks_generation=False,
    columns=COLUMNS, cells=csr_cells, merge_keys={"status.conditions": "type"},
)
