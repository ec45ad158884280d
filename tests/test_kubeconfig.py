"""Reading kubeconfigs as client-go does: context, server, token, certificates."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from common import kubeconfig


def write(path: Path, *, server: str, user: dict[str, str], context: str = "c") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": "k", "user": "u"}}]}))
    return path


def test_a_token_becomes_a_bearer_header(tmp_path: Path) -> None:
    conn = kubeconfig.load(write(tmp_path / "config", server="http://127.0.0.1:1/",
                                 user={"token": "abc"}))
    assert conn.server == "http://127.0.0.1:1"
    assert conn.headers == {"Authorization": "Bearer abc"}
    assert conn.ssl_context is None


def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    conn = kubeconfig.load(write(tmp_path / "config", server="http://h",
                                 user={"tokenFile": "token"}))
    assert conn.headers["Authorization"] == "Bearer from-file"


def test_a_missing_context_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path / "config", server="http://h", user={})
    with pytest.raises(kubeconfig.KubeconfigError, match="context 'other'"):
        kubeconfig.load(path, context="other")


def test_a_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "config", server="https://h", user={
        "client-certificate-data": base64.b64encode(b"x").decode()})
    with pytest.raises(kubeconfig.KubeconfigError, match="needs its key"):
        kubeconfig.load(path)


def test_the_url_flag_overrides_the_kubeconfig_server(tmp_path: Path) -> None:
    path = write(tmp_path / "config", server="http://a", user={"token": "t"})
    conn = kubeconfig.connection(kubeconfig=str(path), server="http://b/")
    assert conn.server == "http://b" and conn.headers == {"Authorization": "Bearer t"}
    assert kubeconfig.connection(kubeconfig=None, server="http://c").server == "http://c"
    with pytest.raises(kubeconfig.KubeconfigError):
        kubeconfig.connection(kubeconfig=None, server=None)
