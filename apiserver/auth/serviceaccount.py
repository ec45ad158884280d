"""ServiceAccount tokens: the JWTs kube's TokenRequest mints and its service-account token
authenticator accepts (pkg/serviceaccount claims.go and jwt.go).

A bound token names its issuer (`--service-account-issuer`), its audiences, when it was
issued and expires, a unique id, and under `kubernetes.io` the namespace, the
ServiceAccount (name and uid) and, when bound, the pod. It is signed with the cluster's
service-account key (RS256 for the RSA sa.key, ES256 for a P-256 key); `kid` is the
SHA-256 of the public key, as kube's keyIDFromPublicKey. Signing and verification are
pure; whether the ServiceAccount (and pod) still exist is asked by the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from apiserver.auth import UserInfo

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
Claims = dict[str, Any]
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS = "system:serviceaccounts"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
P256_SIZE = 32


class InvalidToken(Exception):
    """A token that does not authenticate; the message says why (logged, never sent)."""


# --- encoding ---------------------------------------------------------------------------------

def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise InvalidToken(f"malformed token: {e}") from None


def key_id(key: PublicKey) -> str:
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def algorithm(key: PublicKey) -> str:
    return "RS256" if isinstance(key, rsa.RSAPublicKey) else "ES256"


# --- signing and verifying --------------------------------------------------------------------

def sign(claims: Claims, key: PrivateKey) -> str:
    """The compact JWS of `claims`."""
    public = key.public_key()
    header = {"alg": algorithm(public), "kid": key_id(public)}
    signing_input = (f"{b64url(json.dumps(header, separators=(',', ':')).encode())}."
                     f"{b64url(json.dumps(claims, separators=(',', ':')).encode())}")
    data = signing_input.encode()
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    else:  # JWS wants r||s, not DER
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(P256_SIZE, "big") + s.to_bytes(P256_SIZE, "big")
    return f"{signing_input}.{b64url(signature)}"


def signature_ok(key: PublicKey, alg: str, data: bytes, signature: bytes) -> bool:
    try:
        if isinstance(key, rsa.RSAPublicKey) and alg == "RS256":
            key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
            return True
        if isinstance(key, ec.EllipticCurvePublicKey) and alg == "ES256" and \
                len(signature) == 2 * P256_SIZE:
            der = encode_dss_signature(int.from_bytes(signature[:P256_SIZE], "big"),
                                       int.from_bytes(signature[P256_SIZE:], "big"))
            key.verify(der, data, ec.ECDSA(hashes.SHA256()))
            return True
    except InvalidSignature:
        return False
    return False


def verified_claims(token: str, keys: Sequence[PublicKey]) -> Claims:
    """The claims of a token signed by one of `keys`; InvalidToken otherwise."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("not a JWT")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
    except ValueError:
        raise InvalidToken("malformed token") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("malformed token")
    data = f"{parts[0]}.{parts[1]}".encode()
    signature = b64url_decode(parts[2])
    if not any(signature_ok(key, str(header.get("alg")), data, signature) for key in keys):
        raise InvalidToken("invalid signature")
    return claims


# --- the claims -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Subject:
    """Who a token speaks for: the ServiceAccount, and the pod it is bound to if any."""

    namespace: str
    name: str
    uid: str
    pod_name: str = ""
    pod_uid: str = ""
    credential_id: str = ""


def claims_for(subject: Subject, *, issuer: str, audiences: Sequence[str], now: int,
               expiration_seconds: int) -> Claims:
    """kube's serviceaccount.Claims: what a bound token says."""
    private: dict[str, Any] = {"namespace": subject.namespace,
                               "serviceaccount": {"name": subject.name, "uid": subject.uid}}
    if subject.pod_name:
        private["pod"] = {"name": subject.pod_name, "uid": subject.pod_uid}
    return {"aud": list(audiences), "exp": now + expiration_seconds, "iat": now,
            "iss": issuer, "jti": str(uuid.uuid4()), "kubernetes.io": private, "nbf": now,
            "sub": f"{SERVICE_ACCOUNT_PREFIX}{subject.namespace}:{subject.name}"}


def subject_of(claims: Claims, *, issuers: Sequence[str], audiences: Sequence[str],
               now: int) -> tuple[Subject, list[str]]:
    """(whom the claims name, the audiences they share with `audiences`); InvalidToken when
    the issuer is not ours, no audience is, the time is outside [nbf, exp], or the
    `kubernetes.io` claims do not match `sub`."""
    if claims.get("iss") not in issuers:
        raise InvalidToken("token issuer is not accepted")
    aud = claims.get("aud")
    token_audiences = [aud] if isinstance(aud, str) else list(aud or [])
    shared = [a for a in audiences if a in token_audiences]
    if not shared:
        raise InvalidToken("token audiences is invalid for the target audiences")
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int) or now > exp:
        raise InvalidToken("service account token has expired")
    if isinstance(nbf, int) and now < nbf:
        raise InvalidToken("service account token is not valid yet")
    private = claims.get("kubernetes.io")
    if not isinstance(private, dict):
        raise InvalidToken("token does not contain the kubernetes.io claims")
    namespace = private.get("namespace") or ""
    sa = private.get("serviceaccount") or {}
    pod = private.get("pod") or {}
    if not namespace or not sa.get("name") or not sa.get("uid") or \
            claims.get("sub") != f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{sa['name']}":
        raise InvalidToken("token subject does not match its kubernetes.io claims")
    jti = claims.get("jti")
    return Subject(namespace, sa["name"], sa["uid"], pod.get("name", ""), pod.get("uid", ""),
                   f"JTI={jti}" if jti else ""), shared


def user_of(subject: Subject) -> UserInfo:
    """serviceaccount.UserInfo: the ServiceAccount's user, its groups and the pod it runs."""
    extra: dict[str, tuple[str, ...]] = {}
    if subject.credential_id:
        extra[CREDENTIAL_ID] = (subject.credential_id,)
    if subject.pod_name:
        extra[POD_NAME] = (subject.pod_name,)
        extra[POD_UID] = (subject.pod_uid,)
    return UserInfo(f"{SERVICE_ACCOUNT_PREFIX}{subject.namespace}:{subject.name}",
                    uid=subject.uid,
                    groups=(ALL_SERVICE_ACCOUNTS, f"{ALL_SERVICE_ACCOUNTS}:{subject.namespace}",
                            "system:authenticated"),
                    extra=extra)


# --- the authenticator ------------------------------------------------------------------------

# (namespace, name) -> the stored object's uid, or None when there is none
UidLookup = Callable[[str, str], Awaitable[str | None]]


@dataclass(frozen=True)
class ServiceAccountTokens:
    """Mints (with `signing_key`) and authenticates (with `keys`) ServiceAccount tokens."""

    keys: tuple[PublicKey, ...]
    issuer: str = DEFAULT_ISSUER
    api_audiences: tuple[str, ...] = ()
    signing_key: PrivateKey | None = None
    max_expiration: int = 0  # --service-account-max-token-expiration; 0: none

    @property
    def audiences(self) -> tuple[str, ...]:
        return self.api_audiences or (self.issuer,)

    def mint(self, subject: Subject, audiences: Sequence[str], expiration_seconds: int,
             now: int) -> str:
        assert self.signing_key is not None
        return sign(claims_for(subject, issuer=self.issuer, audiences=audiences, now=now,
                               expiration_seconds=expiration_seconds), self.signing_key)

    def expiration(self, requested: int) -> int:
        return min(requested, self.max_expiration) if self.max_expiration else requested

    async def authenticate(self, token: str, *, now: int, service_account_uid: UidLookup,
                           pod_uid: UidLookup, audiences: Sequence[str] = ()) -> tuple[
                               UserInfo, list[str]]:
        """(the user, the audiences matched); InvalidToken when the token is not one of
        ours, or names a ServiceAccount or pod that is gone (or was recreated)."""
        claims = verified_claims(token, self.keys)
        subject, shared = subject_of(claims, issuers=(self.issuer,),
                                     audiences=audiences or self.audiences, now=now)
        uid = await service_account_uid(subject.namespace, subject.name)
        if uid is None:
            raise InvalidToken(f"service account {subject.namespace}/{subject.name} has "
                               f"been deleted")
        if uid != subject.uid:
            raise InvalidToken(f"service account UID ({subject.uid}) does not match the "
                               f"service account's current UID ({uid})")
        if subject.pod_name:
            current = await pod_uid(subject.namespace, subject.pod_name)
            if current is None:
                raise InvalidToken(f"pod {subject.namespace}/{subject.pod_name} has been "
                                   f"deleted")
            if current != subject.pod_uid:
                raise InvalidToken(f"pod UID ({subject.pod_uid}) does not match the pod's "
                                   f"current UID ({current})")
        return user_of(subject), shared


PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.+?-----END \1-----\s*", re.S)


def load_public_keys(pem: bytes) -> tuple[PublicKey, ...]:
    """--service-account-key-file: PEM public keys, or private keys (their public half)."""
    keys: list[PublicKey] = []
    for block in PEM_BLOCK.finditer(pem):
        if b"PRIVATE" in block.group(1):
            public: Any = serialization.load_pem_private_key(block.group(0),
                                                             password=None).public_key()
        else:
            public = serialization.load_pem_public_key(block.group(0))
        if not isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            raise ValueError("service account keys must be RSA or ECDSA")
        keys.append(public)
    if not keys:
        raise ValueError("no public keys found")
    return tuple(keys)


def load_signing_key(pem: bytes) -> PrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError("the service account signing key must be RSA or ECDSA")
    return key
