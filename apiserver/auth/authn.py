"""Who is asking: kube-apiserver's request authenticators, in its order.

x509 client certificates (verified against `--client-ca-file`: CN is the user, each O a
group), then bearer tokens from `--token-auth-file`, then ServiceAccount tokens
(apiserver/auth/serviceaccount.py); the first that succeeds decides. A
credential that is presented but fails (an unknown token, a certificate that does not
verify) is a 401 even when anonymous requests are allowed (kube's FailOnError union in
front of the anonymous authenticator); no credential at all is `system:anonymous` when
`--anonymous-auth` allows it, else a 401. Every authenticated user is in
`system:authenticated`.
"""

from __future__ import annotations

import csv
import datetime
import functools
import io
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.auth import ANONYMOUS, UserInfo
from common import errors

log = logging.getLogger("apiserver")

AUTHENTICATED = "system:authenticated"
# kube's old insecure port (--insecure-port, removed in 1.24) served every request as this
# superuser, with authentication and authorization skipped.
UNSECURED = UserInfo("system:unsecured", groups=("system:masters", AUTHENTICATED))


class AuthenticationFailed(Exception):
    """A presented credential that does not authenticate (logged; the client sees 401)."""


def unauthorized() -> errors.Unauthorized:
    """kube's 401: the reason, never which credential failed or why."""
    return errors.Unauthorized("Unauthorized")


def with_authenticated(user: UserInfo) -> UserInfo:
    """kube's AuthenticatedGroupAdder."""
    if AUTHENTICATED in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)


# --- bearer tokens -----------------------------------------------------------------------


class TokenFileError(ValueError):
    pass


def parse_token_file(text: str, *, source: str = "token file") -> dict[str, UserInfo]:
    """kube's --token-auth-file: CSV lines `token,user,uid[,"group1,group2"]`."""
    tokens: dict[str, UserInfo] = {}
    for number, record in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not record:
            continue
        if len(record) < 3:
            raise TokenFileError(f"token file '{source}' must have at least 3 columns "
                                 f"(token, user name, user uid), found {len(record)}")
        token, name, uid = record[0], record[1], record[2]
        if not token:
            log.warning("empty token has been found in token file '%s', record number '%d'",
                        source, number)
            continue
        if token in tokens:
            log.warning("duplicate token has been found in token file '%s', record number "
                        "'%d'", source, number)
        groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
        tokens[token] = UserInfo(name, uid, groups)
    return tokens


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


# --- the union ------------------------------------------------------------------------------


# (a bearer token, the audiences asked for, () for the apiserver's) -> (its user, the
# audiences it is good for); AuthenticationFailed when it is not a valid one.
TokenAuthenticator = Callable[[str, Sequence[str]], Awaitable[tuple[UserInfo, list[str]]]]


@dataclass(frozen=True)
class Authenticator:
    client_cas: tuple[x509.Certificate, ...] = ()
    tokens: Mapping[str, UserInfo] | None = None
    anonymous: bool = True
    service_account_tokens: TokenAuthenticator | None = None

    def authenticate(self, scope: Mapping[str, Any]) -> UserInfo:
        """The request's user by certificate or token file; errors.Unauthorized when it
        has none (ServiceAccount tokens are `authenticate_request`'s)."""
        failures: list[str] = []
        user = self.static_user(scope, failures)
        if user is not None:
            return user
        return self.fallback(scope, failures)

    async def authenticate_request(self, scope: Mapping[str, Any]) -> UserInfo:
        """The request's user, ServiceAccount tokens included."""
        failures: list[str] = []
        user = self.static_user(scope, failures)
        if user is not None:
            return user
        token = bearer_token(scope.get("headers") or ())
        if token is not None and self.service_account_tokens is not None:
            try:
                user, _ = await self.service_account_tokens(token, ())
                return user
            except AuthenticationFailed as e:
                failures.append(f"service account token: {e}")
        return self.fallback(scope, failures)

    async def authenticate_token(self, token: str, audiences: Sequence[str] = ()) -> tuple[
            UserInfo, list[str]]:
        """A bearer token's user and audiences (TokenReview); AuthenticationFailed when it
        has none. Token-file tokens are good for any audience asked."""
        found = (self.tokens or {}).get(token)
        if found is not None:
            return with_authenticated(found), list(audiences)
        if self.service_account_tokens is None:
            raise AuthenticationFailed("not in the token file")
        return await self.service_account_tokens(token, audiences)

    def static_user(self, scope: Mapping[str, Any], failures: list[str]) -> UserInfo | None:
        pem = client_certificate(scope)
        if pem is not None and self.client_cas:
            try:
                user = verify_client_certificate(pem, self.client_cas)
                if user is not None:
                    return user
            except AuthenticationFailed as e:
                failures.append(str(e))
        token = bearer_token(scope.get("headers") or ())
        if token is not None:
            found = (self.tokens or {}).get(token)
            if found is not None:
                return with_authenticated(found)
            failures.append("not in the token file")
        return None

    def fallback(self, scope: Mapping[str, Any], failures: list[str]) -> UserInfo:
        """No credential authenticated: 401 when one failed, else anonymous if allowed."""
        if failures:
            client = scope.get("client") or ("?", 0)
            log.info("unable to authenticate the request from %s: %s", client[0],
                     "; ".join(failures))
            raise unauthorized()
        if self.anonymous:
            return ANONYMOUS
        raise unauthorized()
