"""Who is asking, the pieces every authenticating server shares (the apiserver's secure
port and the kubelet's port, kube's k8s.io/apiserver authentication packages): the user
(`UserInfo`, kube's user.Info), x509 client certificates verified against a CA bundle (CN
the user, each O a group), the bearer token of a request, and `system:authenticated`.

The apiserver's authenticators (apiserver/auth/authn.py) and the kubelet's
(kubelet/auth.py) are built on these, so that the kubelet needs nothing of the apiserver.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class UserInfo:
    """kube's user.Info."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS = UserInfo("system:anonymous", groups=("system:unauthenticated",))
AUTHENTICATED = "system:authenticated"


class AuthenticationFailed(Exception):
    """A presented credential that does not authenticate (logged; the client sees 401)."""


def with_authenticated(user: UserInfo) -> UserInfo:
    """kube's AuthenticatedGroupAdder."""
    if AUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)


def bearer_token(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The token of `Authorization: Bearer TOKEN`; None when there is none."""
    for key, value in headers:
        if key == b"authorization":
            parts = value.decode("latin-1").split(" ")
            if len(parts) >= 2 and parts[0].lower() == "bearer" and parts[1]:
                return parts[1]
            return None
    return None


# --- x509 ----------------------------------------------------------------------------------


def load_ca_bundle(pem: bytes) -> tuple[x509.Certificate, ...]:
    return tuple(x509.load_pem_x509_certificates(pem))


@functools.lru_cache(maxsize=1024)
def _signed_leaf(pem: str, cas: tuple[x509.Certificate, ...]) -> tuple[
        x509.Certificate, x509.Certificate]:
    """(the leaf, its CA) once its signature checked (a connection's requests share it)."""
    leaf = x509.load_pem_x509_certificate(pem.encode())
    for ca in cas:
        if ca.subject != leaf.issuer:
            continue
        try:
            leaf.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return leaf, ca
    raise AuthenticationFailed("x509: certificate signed by unknown authority")


def verify_client_certificate(pem: str, cas: tuple[x509.Certificate, ...], *,
                              at: datetime.datetime | None = None) -> UserInfo | None:
    """The user of a client certificate; None when it names no one (no CN, as kube's
    CommonNameUserConversion); AuthenticationFailed when it does not verify."""
    try:
        leaf, ca = _signed_leaf(pem, cas)
    except ValueError as e:
        raise AuthenticationFailed(f"x509: malformed certificate: {e}") from None
    when = at or datetime.datetime.now(datetime.UTC)
    for cert in (leaf, ca):
        if not cert.not_valid_before_utc <= when <= cert.not_valid_after_utc:
            raise AuthenticationFailed(
                f"x509: certificate has expired or is not yet valid: current time "
                f"{when:%Y-%m-%dT%H:%M:%SZ} is outside {cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"
                f" - {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages and \
            ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
        raise AuthenticationFailed("x509: certificate specifies an incompatible key usage")
    names = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or not names[0].value:
        return None
    orgs = tuple(str(a.value) for a in leaf.subject.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME))
    return with_authenticated(UserInfo(str(names[0].value), groups=orgs))


def client_certificate(scope: Mapping[str, Any]) -> str | None:
    """The leaf certificate (PEM) the client presented, from the ASGI TLS extension."""
    tls = (scope.get("extensions") or {}).get("tls") or {}
    chain = tls.get("client_cert_chain") or ()
    return chain[0] if chain else None
