"""Reading a kubeconfig the way client-go does: the current context's server, the CA to
trust, and the client's credentials (a certificate and key, or a bearer token).

Every kubelite component connects through one of these (`--kubeconfig`), so that each
runs with its own identity; a bare `--apiserver URL` stays for a plain-HTTP development
port.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(ValueError):
    pass


@dataclass(frozen=True)
class Connection:
    """Where the apiserver is and how to talk to it."""

    server: str
    ssl_context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)
    user: str = ""  # the kubeconfig user's entry name, for logs

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What httpx's `verify=` takes."""
        return self.ssl_context if self.ssl_context is not None else True


def plain(server: str) -> Connection:
    return Connection(server=server.rstrip("/"))


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return dict(entry.get(what) or {})
    raise KubeconfigError(f"{what} {name!r} is not in the kubeconfig")


def _data(section: dict[str, Any], key: str, base: Path) -> bytes | None:
    """`key-data` (base64) or the file `key` names (relative to the kubeconfig)."""
    inline = section.get(f"{key}-data")
    if inline:
        return base64.b64decode(inline)
    path = section.get(key)
    if path:
        resolved = Path(path) if Path(path).is_absolute() else base / path
        return resolved.read_bytes()
    return None


def load(path: str | os.PathLike[str], *, context: str | None = None) -> Connection:
    """The Connection of `context` (default: the current one) in the kubeconfig at `path`."""
    file = Path(path)
    try:
        config = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise KubeconfigError(f"cannot read kubeconfig {file}: {e}") from None
    if not isinstance(config, dict):
        raise KubeconfigError(f"kubeconfig {file} is not a YAML mapping")
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError(f"kubeconfig {file} has no current-context")
    ctx = _named(config.get("contexts"), name, "context")
    cluster = _named(config.get("clusters"), ctx.get("cluster", ""), "cluster")
    user_name = ctx.get("user", "")
    user = _named(config.get("users"), user_name, "user") if user_name else {}
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server")
    base = file.parent
    headers: dict[str, str] = {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    context_ssl = None
    if server.startswith("https://"):
        context_ssl = ssl_context(
            ca=_data(cluster, "certificate-authority", base),
            cert=_data(user, "client-certificate", base),
            key=_data(user, "client-key", base),
            insecure=bool(cluster.get("insecure-skip-tls-verify")))
    return Connection(server=server, ssl_context=context_ssl, headers=headers,
                      user=user_name)


def ssl_context(*, ca: bytes | None, cert: bytes | None, key: bytes | None,
                insecure: bool = False) -> ssl.SSLContext:
    """A client SSLContext trusting `ca` (PEM) and presenting `cert`/`key` (PEM) if given."""
    context = ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca:
        context.load_verify_locations(cadata=ca.decode())
    if cert and key:
        # load_cert_chain reads files only: a private temporary directory, gone at once
        with tempfile.TemporaryDirectory() as tmp:
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_path.write_bytes(cert)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            context.load_cert_chain(cert_path, key_path)
    elif cert or key:
        raise KubeconfigError("a client certificate needs its key, and a key its certificate")
    return context


def connection(*, kubeconfig: str | None, server: str | None) -> Connection:
    """What a component's `--kubeconfig` and `--apiserver` flags say (the URL, if both are
    given, overrides the kubeconfig's server, as client-go's --master does)."""
    if kubeconfig:
        loaded = load(kubeconfig)
        if server:
            return Connection(server=server.rstrip("/"), ssl_context=loaded.ssl_context,
                              headers=loaded.headers, user=loaded.user)
        return loaded
    if server:
        return plain(server)
    raise KubeconfigError("give --kubeconfig (or --apiserver for a plain-HTTP port)")
