"""Image pull credentials from a pod's `imagePullSecrets` (after kube's
pkg/credentialprovider: the Docker config keyring and its registry matching).

A Secret of type `kubernetes.io/dockerconfigjson` (`.dockerconfigjson`: `{"auths": {...}}`)
or `kubernetes.io/dockercfg` (`.dockercfg`: the same entries without `auths`) names
registries; an image matches an entry when the entry's host is the image's registry (a
`*.` wildcard matches one label), the ports agree and the entry's path is a prefix of the
image's repository path. Matches are tried longest first, as kube's keyring does; the
Docker Engine takes each as an `X-Registry-Auth` header on its pull.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", "docker.io"}
DOCKERCONFIGJSON, DOCKERCFG = ".dockerconfigjson", ".dockercfg"


@dataclass(frozen=True)
class Credential:
    registry: str  # the entry's key, as the Secret spells it
    username: str = ""
    password: str = ""
    identity_token: str = ""

    def registry_auth_header(self) -> str:
        """The Docker Engine's `X-Registry-Auth`: base64url of the auth config JSON."""
        config: dict[str, str] = {"serveraddress": self.registry}
        if self.identity_token:
            config["identitytoken"] = self.identity_token
        else:
            config.update(username=self.username, password=self.password)
        return base64.urlsafe_b64encode(json.dumps(config).encode()).decode()


def _split(location: str) -> tuple[str, str]:
    """(host[:port], path) of a registry key or image repository; docker.io's aliases are one."""
    for scheme in ("https://", "http://"):
        if location.startswith(scheme):
            location = location[len(scheme):]
    host, _, path = location.partition("/")
    if host in _DOCKER_HUB_ALIASES:
        host, path = DOCKER_HUB, "" if path in ("v1", "v1/", "v2", "v2/") else path
    return host.lower(), path.strip("/")


def image_location(repository: str) -> tuple[str, str]:
    """(registry, path) of a parsed image repository (`busybox` is docker.io/library/busybox)."""
    first, _, rest = repository.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        path = repository if "/" in repository else f"library/{repository}"
        return DOCKER_HUB, path
    return _split(repository)


def _host_matches(pattern: str, host: str) -> bool:
    pattern_host, _, pattern_port = pattern.partition(":")
    image_host, _, image_port = host.partition(":")
    if pattern_port != image_port:
        return False
    pattern_labels, host_labels = pattern_host.split("."), image_host.split(".")
    return len(pattern_labels) == len(host_labels) and all(
        fnmatch.fnmatchcase(label, glob) for glob, label in zip(pattern_labels, host_labels,
                                                                  strict=True))


def entry_matches(key: str, repository: str) -> bool:
    key_host, key_path = _split(key)
    host, path = image_location(repository)
    if not _host_matches(key_host, host):
        return False
    return not key_path or path == key_path or path.startswith(f"{key_path}/")


def _decoded(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _credential(key: str, entry: Any) -> Credential | None:
    if not isinstance(entry, Mapping):
        return None
    username, password = str(entry.get("username") or ""), str(entry.get("password") or "")
    if entry.get("auth") and not (username or password):
        username, _, password = _decoded(str(entry["auth"])).partition(":")
    token = str(entry.get("identitytoken") or "")
    if not (username or password or token):
        return None
    return Credential(registry=key, username=username, password=password, identity_token=token)


def secret_credentials(secret: Mapping[str, Any]) -> list[Credential]:
    """The registry entries of one pull Secret; a Secret that is not a Docker config, or
    one whose data does not decode, gives none (kube skips it the same way)."""
    data = secret.get("data") or {}
    raw = data.get(DOCKERCONFIGJSON) or data.get(DOCKERCFG)
    if not isinstance(raw, str):
        return []
    try:
        config = json.loads(_decoded(raw) or "null")
    except ValueError:
        return []
    if not isinstance(config, Mapping):
        return []
    entries = config.get("auths") if DOCKERCONFIGJSON in data else config
    if not isinstance(entries, Mapping):
        return []
    found = (_credential(str(key), entry) for key, entry in entries.items())
    return [c for c in found if c is not None]


def credentials_for(repository: str, secrets: Iterable[Mapping[str, Any]]) -> list[Credential]:
    """The entries that match an image, the most specific (longest key) first."""
    matches = [c for secret in secrets for c in secret_credentials(secret)
               if entry_matches(c.registry, repository)]
    return sorted(matches, key=lambda c: len(_split(c.registry)[0]) + len(_split(c.registry)[1]),
                  reverse=True)
