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
import io
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from apiserver.auth import ANONYMOUS, UserInfo
from common import errors

# shared with the kubelet's port (common/authn.py); importers of this module keep them
from common.authn import AUTHENTICATED as AUTHENTICATED
from common.authn import AuthenticationFailed as AuthenticationFailed
from common.authn import bearer_token as bearer_token
from common.authn import client_certificate as client_certificate
from common.authn import load_ca_bundle as load_ca_bundle
from common.authn import verify_client_certificate as verify_client_certificate
from common.authn import with_authenticated as with_authenticated
from common.bootstraptoken import parse_token as parse_bootstrap_token

log = logging.getLogger("apiserver")

# kube's old insecure port (--insecure-port, removed in 1.24) served every request as this
# superuser, with authentication and authorization skipped.
UNSECURED = UserInfo("system:unsecured", groups=("system:masters", AUTHENTICATED))


def unauthorized() -> errors.Unauthorized:
    """kube's 401: the reason, never which credential failed or why."""
    return errors.Unauthorized("Unauthorized")


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


# --- x509 ----------------------------------------------------------------------------------


# --- the union ------------------------------------------------------------------------------


def is_bootstrap_shaped(token: str) -> bool:
    """`abcdef.0123456789abcdef`: a bootstrap token (a ServiceAccount JWT has two dots)."""
    return parse_bootstrap_token(token) is not None


# (a bearer token, the audiences asked for, () for the apiserver's) -> (its user, the
# audiences it is good for); AuthenticationFailed when it is not a valid one.
TokenAuthenticator = Callable[[str, Sequence[str]], Awaitable[tuple[UserInfo, list[str]]]]


@dataclass(frozen=True)
class Authenticator:
    client_cas: tuple[x509.Certificate, ...] = ()
    tokens: Mapping[str, UserInfo] | None = None
    anonymous: bool = True
    service_account_tokens: TokenAuthenticator | None = None
    # --enable-bootstrap-token-auth: `ID.SECRET` tokens of kube-system Secrets
    bootstrap_tokens: TokenAuthenticator | None = None

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
        if token is not None:
            for kind, tokens in (("bootstrap token", self.bootstrap_tokens),
                                 ("service account token", self.service_account_tokens)):
                if tokens is None or (kind == "bootstrap token") != is_bootstrap_shaped(token):
                    continue
                try:
                    user, _ = await tokens(token, ())
                    return user
                except AuthenticationFailed as e:
                    failures.append(f"{kind}: {e}")
        return self.fallback(scope, failures)

    async def authenticate_token(self, token: str, audiences: Sequence[str] = ()) -> tuple[
            UserInfo, list[str]]:
        """A bearer token's user and audiences (TokenReview); AuthenticationFailed when it
        has none. Token-file tokens are good for any audience asked."""
        found = (self.tokens or {}).get(token)
        if found is not None:
            return with_authenticated(found), list(audiences)
        if self.bootstrap_tokens is not None and is_bootstrap_shaped(token):
            return await self.bootstrap_tokens(token, audiences)
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
