"""Bootstrap tokens, as kubeadm and kube's bootstrap packages define them
(k8s.io/cluster-bootstrap: token/api, token/util, token/jws): what a node joining the
cluster holds before it has a certificate.

A token `abcdef.0123456789abcdef` is its public id and its secret. It lives in the Secret
`kube-system/bootstrap-token-abcdef` of type `bootstrap.kubernetes.io/token`; the apiserver
authenticates it as `system:bootstrap:abcdef` in `system:bootstrappers` (plus its
`auth-extra-groups`), and the controller-manager's bootstrap signer signs the public
`kube-public/cluster-info` ConfigMap with it (a detached JWS, HS256 keyed by the whole
token), so that a joining node can trust what it downloaded without a CA yet: the
signature proves the ConfigMap came from someone holding the token, and the CA's public
key hash (`--discovery-token-ca-cert-hash sha256:...`) pins the CA in it.

    python -m common.bootstraptoken create --kubeconfig admin.conf [--ttl 24h]
        [--print-join-command]                   # kubeadm token create
    python -m common.bootstraptoken list --kubeconfig admin.conf      # kubeadm token list
    python -m common.bootstraptoken delete ID --kubeconfig admin.conf
    python -m common.bootstraptoken setup --kubeconfig admin.conf --server URL --ca ca.crt
        # kubeadm init's bootstrap-token phase: cluster-info and the RBAC that lets
        # bootstrap tokens join
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import hashlib
import hmac
import json
import re
import secrets
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from common.timestamps import rfc3339

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
SYSTEM_NAMESPACE = "kube-system"
PUBLIC_NAMESPACE = "kube-public"
CLUSTER_INFO = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_PREFIX = "jws-kubeconfig-"
USER_PREFIX = "system:bootstrap:"
GROUP = "system:bootstrappers"
KUBEADM_GROUP = "system:bootstrappers:kubeadm:default-node-token"
ID_KEY, SECRET_KEY, EXPIRATION_KEY = "token-id", "token-secret", "expiration"
DESCRIPTION_KEY, EXTRA_GROUPS_KEY = "description", "auth-extra-groups"
USAGE_AUTHENTICATION = "usage-bootstrap-authentication"
USAGE_SIGNING = "usage-bootstrap-signing"
DEFAULT_TTL = datetime.timedelta(hours=24)

TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
ID_RE = re.compile(r"^[a-z0-9]{6}$")
SECRET_RE = re.compile(r"^[a-z0-9]{16}$")
EXTRA_GROUP_RE = re.compile(r"^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$")
ALPHABET = string.ascii_lowercase + string.digits

Object = dict[str, Any]


@dataclass(frozen=True)
class Token:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"


def parse_token(text: str) -> Token | None:
    """`abcdef.0123456789abcdef` split, or None when it is not a bootstrap token."""
    found = TOKEN_RE.match(text)
    return Token(found.group(1), found.group(2)) if found else None


def generate_token() -> Token:
    """A random token (kubeadm's GenerateBootstrapToken)."""
    def pick(n: int) -> str:
        return "".join(secrets.choice(ALPHABET) for _ in range(n))
    return Token(pick(6), pick(16))


def secret_name(token_id: str) -> str:
    return SECRET_PREFIX + token_id


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token_secret(token: Token, *, now: datetime.datetime, ttl: datetime.timedelta | None,
                 description: str = "", groups: Sequence[str] = (KUBEADM_GROUP,),
                 usages: Sequence[str] = ("authentication", "signing")) -> Object:
    """The Secret that holds `token` (kubeadm's BootstrapTokenToSecret)."""
    data = {ID_KEY: token.id, SECRET_KEY: token.secret}
    if ttl is not None and ttl.total_seconds() > 0:
        data[EXPIRATION_KEY] = rfc3339(now + ttl)
    if description:
        data[DESCRIPTION_KEY] = description
    for usage in usages:
        data[f"usage-bootstrap-{usage}"] = "true"
    if groups:
        data[EXTRA_GROUPS_KEY] = ",".join(groups)
    return {"apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
            "metadata": {"name": secret_name(token.id), "namespace": SYSTEM_NAMESPACE},
            "data": {key: b64(value) for key, value in data.items()}}


def secret_data(secret: Mapping[str, Any], key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    if not value:
        return ""
    try:
        return base64.b64decode(value).decode()
    except (ValueError, UnicodeDecodeError):
        return ""


def parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def expired(secret: Mapping[str, Any], now: datetime.datetime) -> bool:
    """kube's bootstrapsecretutil.HasExpired: an unparseable expiration counts as expired."""
    text = secret_data(secret, EXPIRATION_KEY)
    if not text:
        return False
    when = parse_time(text)
    return when is None or when < now


def token_of_secret(secret: Mapping[str, Any]) -> Token | None:
    """The token a Secret holds, when it is a well-formed bootstrap token Secret named for
    its id (kube ignores any other)."""
    if secret.get("type") != SECRET_TYPE:
        return None
    token_id, token_secret_ = secret_data(secret, ID_KEY), secret_data(secret, SECRET_KEY)
    name = (secret.get("metadata") or {}).get("name")
    if not ID_RE.match(token_id) or not SECRET_RE.match(token_secret_) or \
            name != secret_name(token_id):
        return None
    return Token(token_id, token_secret_)


def extra_groups(secret: Mapping[str, Any]) -> list[str] | None:
    """auth-extra-groups; None when one of them is not a system:bootstrappers: group (the
    token is then refused, as kube's ValidateBootstrapGroupName refuses it)."""
    text = secret_data(secret, EXTRA_GROUPS_KEY)
    groups = [g.strip() for g in text.split(",") if g.strip()] if text else []
    return groups if all(EXTRA_GROUP_RE.match(g) for g in groups) else None


def usable_for(secret: Mapping[str, Any], usage_key: str, now: datetime.datetime) -> bool:
    return (secret_data(secret, usage_key) == "true" and not expired(secret, now)
            and not (secret.get("metadata") or {}).get("deletionTimestamp"))


@dataclass(frozen=True)
class BootstrapUser:
    name: str
    groups: tuple[str, ...]


def authenticate(presented: str, secret: Mapping[str, Any] | None,
                 now: datetime.datetime) -> BootstrapUser | None:
    """kube's bootstrap token authenticator (plugin/pkg/auth/authenticator/token/bootstrap):
    the presented token's user, or None when the Secret does not vouch for it."""
    token = parse_token(presented)
    if token is None or secret is None:
        return None
    held = token_of_secret(secret)
    if held is None or held.id != token.id or \
            not hmac.compare_digest(held.secret.encode(), token.secret.encode()):
        return None
    if not usable_for(secret, USAGE_AUTHENTICATION, now):
        return None
    groups = extra_groups(secret)
    if groups is None:
        return None
    return BootstrapUser(USER_PREFIX + token.id, (GROUP, *groups))


# --- the detached JWS over cluster-info (token/jws) ----------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def detached_signature(content: str, token: Token) -> str:
    """ComputeDetachedSignature: a compact JWS, HS256 keyed by the whole token, with its
    payload left out (`header..signature`)."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": token.id},
                                separators=(",", ":")).encode())
    payload = _b64url(content.encode())
    mac = hmac.new(str(token).encode(), f"{header}.{payload}".encode(), hashlib.sha256)
    return f"{header}..{_b64url(mac.digest())}"


def signature_valid(content: str, signature: str, token: Token) -> bool:
    """DetachedTokenIsValid: the signature over `content` was made with `token`."""
    parts = signature.split(".")
    if len(parts) != 3 or parts[1]:
        return False
    try:
        header = json.loads(_b64url_decode(parts[0]))
    except ValueError:
        return False
    if not isinstance(header, dict) or header.get("alg") != "HS256" or \
            header.get("kid", token.id) != token.id:
        return False
    mac = hmac.new(str(token).encode(), f"{parts[0]}.{_b64url(content.encode())}".encode(),
                   hashlib.sha256)
    try:
        return hmac.compare_digest(mac.digest(), _b64url_decode(parts[2]))
    except ValueError:
        return False


def signatures(cluster_info: Mapping[str, Any], tokens: Sequence[Token]) -> dict[str, str]:
    """What the bootstrap signer keeps in cluster-info: jws-kubeconfig-ID per signing token."""
    content = (cluster_info.get("data") or {}).get(KUBECONFIG_KEY)
    if not content:
        return {}
    return {JWS_PREFIX + token.id: detached_signature(content, token) for token in tokens}


# --- the CA pin (kubeadm's pubkeypin) --------------------------------------------------------


def ca_cert_hash(cert_pem: bytes) -> str:
    """`sha256:` and the hex SHA-256 of the CA's SubjectPublicKeyInfo, as kubeadm prints it
    for --discovery-token-ca-cert-hash."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig kubeadm publishes in cluster-info: the server and its CA, no user."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "contexts": None, "current-context": "", "users": None}, indent=2) + "\n"


# --- kubeadm's RBAC for joining (phases/bootstraptoken/{clusterinfo,node}) -------------------

RBAC = "rbac.authorization.k8s.io"
RBAC_GROUP_VERSIONS = {plural: f"{RBAC}/v1" for plural in ("roles", "rolebindings",
                                                         "clusterrolebindings")}
NODE_BOOTSTRAPPER = "system:node-bootstrapper"
NODE_CLIENT = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
SELF_NODE_CLIENT = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"


def join_rbac() -> list[tuple[str, Object]]:
    """(resource, object): anonymous may read cluster-info; bootstrap tokens may create
    CSRs that the approver signs off; nodes may renew their own client certificates."""
    def crb(name: str, role: str, kind: str, subject: str) -> Object:
        return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": RBAC, "kind": kind, "name": subject}]}

    role = {"apiVersion": f"{RBAC}/v1", "kind": "Role",
            "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo",
                         "namespace": PUBLIC_NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                       "resourceNames": [CLUSTER_INFO]}]}
    binding = {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
               "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo",
                            "namespace": PUBLIC_NAMESPACE},
               "roleRef": {"apiGroup": RBAC, "kind": "Role",
                           "name": "kubeadm:bootstrap-signer-clusterinfo"},
               "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "system:anonymous"}]}
    return [
        ("roles", role), ("rolebindings", binding),
        ("clusterrolebindings", crb("kubeadm:kubelet-bootstrap", NODE_BOOTSTRAPPER, "Group",
                                    KUBEADM_GROUP)),
        ("clusterrolebindings", crb("kubeadm:node-autoapprove-bootstrap", NODE_CLIENT,
                                    "Group", KUBEADM_GROUP)),
        ("clusterrolebindings", crb("kubeadm:node-autoapprove-certificate-rotation",
                                    SELF_NODE_CLIENT, "Group", "system:nodes")),
    ]


# --- the command line ------------------------------------------------------------------------


def parse_duration(text: str) -> datetime.timedelta:
    """`24h`, `30m`, `90s`, `0` (never expires), Go's time.ParseDuration for these units."""
    if text.strip() == "0":
        return datetime.timedelta(0)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 24h, 30m, 0)")
    hours, minutes, seconds = (int(g or 0) for g in parts.groups())
    return datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def join_command(server: str, token: Token, ca_pem: bytes) -> str:
    """kubeadm token create --print-join-command, for kubelite's kubelet."""
    host = server.removeprefix("https://")
    return (f"python -m kubelet --server https://{host} --token {token} "
            f"--discovery-token-ca-cert-hash {ca_cert_hash(ca_pem)} --node-name NAME")


async def _create(api: Any, args: argparse.Namespace) -> None:
    token = parse_token(args.token) if args.token else generate_token()
    if token is None:
        sys.exit(f'bootstraptoken: the token "{args.token}" was not of the form '
                 f'"{TOKEN_RE.pattern}"')
    now = datetime.datetime.now(datetime.UTC)
    await api.create("secrets", token_secret(token, now=now, ttl=args.ttl,
                                             description=args.description),
                     namespace=SYSTEM_NAMESPACE)
    if args.print_join_command:
        info = await api.get("configmaps", CLUSTER_INFO, namespace=PUBLIC_NAMESPACE)
        config = json.loads(info["data"][KUBECONFIG_KEY])
        cluster = config["clusters"][0]["cluster"]
        print(join_command(cluster["server"], token,
                           base64.b64decode(cluster["certificate-authority-data"])))
    else:
        print(token)


def describe(secret: Mapping[str, Any], now: datetime.datetime) -> list[str]:
    token = token_of_secret(secret)
    if token is None:
        return []
    expires = secret_data(secret, EXPIRATION_KEY)
    ttl = "<forever>"
    if expires:
        when = parse_time(expires)
        ttl = "<invalid>" if when is None else (
            f"{max(0, int((when - now).total_seconds()) // 3600)}h")
    usages = ",".join(u for u in ("authentication", "signing")
                      if secret_data(secret, f"usage-bootstrap-{u}") == "true")
    return [f"{token.id}.{'*' * 16}", ttl, expires or "<never>", usages,
            secret_data(secret, DESCRIPTION_KEY) or "<none>",
            secret_data(secret, EXTRA_GROUPS_KEY)]


async def _list(api: Any) -> None:
    now = datetime.datetime.now(datetime.UTC)
    listed = await api.list("secrets", namespace=SYSTEM_NAMESPACE,
                            field_selector=f"type={SECRET_TYPE}")
    rows = [["TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS"]]
    rows += [row for item in listed.get("items", []) if (row := describe(item, now))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


async def setup(api: Any, server: str, ca_pem: bytes) -> None:
    """cluster-info in kube-public and the join RBAC, created or left as they are."""
    from common.errors import AlreadyExists
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": CLUSTER_INFO, "namespace": PUBLIC_NAMESPACE},
                  "data": {KUBECONFIG_KEY: cluster_info_kubeconfig(server, ca_pem)}}
    for resource, obj in [("configmaps", config_map), *join_rbac()]:
        try:
            await api.create(resource, obj, namespace=obj["metadata"].get("namespace"))
        except AlreadyExists:
            continue


async def _main(args: argparse.Namespace) -> None:
    from common.client import GROUP_VERSIONS, ApiClient
    from common.kubeconfig import connection
    async with ApiClient(connection(kubeconfig=args.kubeconfig, server=None),
                         user_agent="kubelite-bootstraptoken",
                         group_versions={**GROUP_VERSIONS, **RBAC_GROUP_VERSIONS}) as api:
        if args.command == "create":
            await _create(api, args)
        elif args.command == "list":
            await _list(api)
        elif args.command == "delete":
            token_id = args.id.split(".")[0]
            await api.delete("secrets", secret_name(token_id), namespace=SYSTEM_NAMESPACE)
            print(f"bootstrap token {token_id!r} deleted")
        else:
            await setup(api, args.server, args.ca_pem)
            print(f"cluster-info published in {PUBLIC_NAMESPACE} for {args.server}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m common.bootstraptoken",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a bootstrap token (kubeadm token "
                                                "create)")
    create.add_argument("token", nargs="?", help="the token (default: a random one)")
    create.add_argument("--ttl", type=parse_duration, default=DEFAULT_TTL,
                        help="how long it is good for; 0: forever (default 24h)")
    create.add_argument("--description", default="")
    create.add_argument("--print-join-command", action="store_true",
                        help="print the kubelet command line that joins with it")
    commands.add_parser("list", help="the bootstrap tokens (kubeadm token list)")
    delete = commands.add_parser("delete", help="delete a bootstrap token")
    delete.add_argument("id", help="the token or its id")
    setup_ = commands.add_parser("setup", help="publish cluster-info and the join RBAC")
    setup_.add_argument("--server", required=True, help="the URL joining nodes use")
    setup_.add_argument("--ca", required=True, help="the cluster CA certificate (PEM)")
    args = parser.parse_args(argv)
    if args.command == "setup":
        args.ca_pem = Path(args.ca).read_bytes()
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
