"""Pure tests of the ConfigMap and Secret strategies: Go's base64 rules, stringData, keys."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.resources.configmaps import is_config_map_key
from apiserver.resources.secrets import default_secret, validate_type
from common.models import base64_error


@pytest.mark.parametrize(("text", "error_at"), [
    ("", None), ("YQ==", None), ("YWJj", None), ("YWJj\nZA==", None),
    ("YW", 0), ("a*bc", 1), ("YWJjZA", 4), ("Y===", 1),
])
def test_base64_as_go_decodes_it(text: str, error_at: int | None) -> None:
    assert base64_error(text) == error_at


@pytest.mark.parametrize(("key", "ok"), [
    ("a", True), ("app.conf", True), ("KEY_NAME", True), ("a-b", True),
    ("a b", False), ("a/b", False), (".", False), ("..x", False), ("x" * 254, False),
])
def test_config_map_keys(key: str, ok: bool) -> None:
    assert (is_config_map_key(key) == []) is ok


@pytest.mark.parametrize(("secret", "expected"), [
    ({}, {"type": "Opaque"}),
    ({"type": "kubernetes.io/tls"}, {"type": "kubernetes.io/tls"}),
    ({"stringData": {"a": "x"}}, {"type": "Opaque", "data": {"a": "eA=="}}),
    ({"data": {"a": "eQ==", "b": "eQ=="}, "stringData": {"a": "x"}},
     {"type": "Opaque", "data": {"a": "eA==", "b": "eQ=="}}),
])
def test_secret_defaults(secret: dict[str, Any], expected: dict[str, Any]) -> None:
    default_secret(secret, None)
    assert secret == expected


@pytest.mark.parametrize(("secret", "fields"), [
    ({"type": "Opaque"}, []),
    ({"type": "example.com/custom"}, []),
    ({"type": "kubernetes.io/basic-auth", "data": {"password": ""}}, []),
    ({"type": "kubernetes.io/basic-auth"}, ["data[username]", "data[password]"]),
    ({"type": "kubernetes.io/tls", "data": {"tls.key": "eA=="}}, ["data[tls.crt]"]),
    ({"type": "kubernetes.io/dockercfg", "data": {".dockercfg": "e30="}}, []),
    ({"type": "kubernetes.io/dockerconfigjson"}, ["data[.dockerconfigjson]"]),
])
def test_secret_types(secret: dict[str, Any], fields: list[str]) -> None:
    assert [c["field"] for c in validate_type(secret)] == fields
