"""ConfigMaps and Secrets (core/v1) on the session apiserver: the real kubectl's create
commands, Secret data as base64 with stringData merged in, the common Secret types'
rules, `immutable`, the Tables, and the official Python client."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.support import ApiServer, Kubectl, table_lines, unique

CORE = "/api/v1/namespaces/default"
MERGE = {"Content-Type": "application/merge-patch+json"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# The one place this module builds its kubectl (adapt it when the fixtures move).
@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path_factory.mktemp("cm-kubectl"))


async def test_kubectl_create_configmap_and_secret(kubectl: Kubectl, http: httpx.AsyncClient,
                                                   tmp_path: Path) -> None:
    source = tmp_path / "app.conf"
    source.write_text("listen 80\n")
    name = unique("cfg")
    kubectl("create", "configmap", name, "--from-literal=a=1", f"--from-file={source}")
    stored = (await http.get(f"{CORE}/configmaps/{name}")).json()
    assert stored["data"] == {"a": "1", "app.conf": "listen 80\n"}
    assert "generation" not in stored["metadata"]
    kubectl("create", "secret", "generic", name, "--from-literal=user=admin",
            f"--from-file={source}")
    secret = (await http.get(f"{CORE}/secrets/{name}")).json()
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"user": b64("admin"), "app.conf": b64("listen 80\n")}
    rows = table_lines(kubectl("get", "configmap", name))
    assert rows[0] == ["NAME", "DATA", "AGE"] and rows[1][:2] == [name, "2"]
    rows = table_lines(kubectl("get", "secret", name))
    assert rows[0] == ["NAME", "TYPE", "DATA", "AGE"] and rows[1][:3] == [name, "Opaque", "2"]
    kubectl("create", "secret", "docker-registry", f"{name}-reg", "--docker-server=r.example",
            "--docker-username=u", "--docker-password=p")
    selected = kubectl("get", "secrets", "--field-selector",
                       "type=kubernetes.io/dockerconfigjson", "-o", "name")
    assert f"secret/{name}-reg" in selected.split() and f"secret/{name}" not in selected.split()


async def test_string_data_is_merged_into_data_and_never_stored(
        http: httpx.AsyncClient) -> None:
    name = unique("merged")
    body = {"metadata": {"name": name}, "data": {"a": b64("from-data"), "b": b64("kept")},
            "stringData": {"a": "from-string-data", "c": "new"}}
    answer = await http.post(f"{CORE}/secrets", json=body)
    assert answer.status_code == 201, answer.text
    for secret in (answer.json(), (await http.get(f"{CORE}/secrets/{name}")).json()):
        assert secret["data"] == {"a": b64("from-string-data"), "b": b64("kept"),
                                  "c": b64("new")}
        assert "stringData" not in secret
    patched = await http.patch(f"{CORE}/secrets/{name}", json={"stringData": {"b": "changed"}},
                               headers=MERGE)
    assert patched.json()["data"]["b"] == b64("changed")


async def test_secret_data_must_be_base64(http: httpx.AsyncClient) -> None:
    name = unique("bad64")
    answer = await http.post(f"{CORE}/secrets", json={"metadata": {"name": name},
                                                      "data": {"a": "not*base64"}})
    assert answer.status_code == 400
    assert answer.json()["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                                        "illegal base64 data at input byte 3")
    assert (await http.get(f"{CORE}/secrets/{name}")).status_code == 404


@pytest.mark.parametrize(("body", "message"), [
    ({"type": "kubernetes.io/tls", "data": {"tls.crt": b64("c")}},
     "data[tls.key]: Required value"),
    ({"type": "kubernetes.io/basic-auth"},
     "[data[username]: Required value, data[password]: Required value]"),
    ({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64("{x")}},
     'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": '),
    ({"type": "kubernetes.io/service-account-token"},
     "metadata.annotations[kubernetes.io/service-account.name]: Required value"),
    ({"type": "kubernetes.io/ssh-auth"}, "data[ssh-privatekey]: Required value"),
    ({"data": {"bad key": b64("x")}},
     'data[bad key]: Invalid value: "bad key": a valid config key must consist of '
     "alphanumeric characters, '-', '_' or '.'"),
])
async def test_secret_types_are_validated(http: httpx.AsyncClient, body: dict[str, Any],
                                          message: str) -> None:
    name = unique("typed")
    answer = await http.post(f"{CORE}/secrets", json={"metadata": {"name": name}, **body})
    assert answer.status_code == 422, answer.text
    assert answer.json()["message"].startswith(f'Secret "{name}" is invalid: {message}')
    assert (await http.get(f"{CORE}/secrets/{name}")).status_code == 404


async def test_secret_type_is_immutable(http: httpx.AsyncClient) -> None:
    name = unique("retype")
    created = (await http.post(f"{CORE}/secrets", json={"metadata": {"name": name}})).json()
    answer = await http.put(f"{CORE}/secrets/{name}",
                            json={**created, "type": "example.com/other"})
    assert answer.status_code == 422
    assert answer.json()["message"] == (f'Secret "{name}" is invalid: type: Invalid value: '
                                        '"example.com/other": field is immutable')


async def test_immutable_config_maps_and_secrets(http: httpx.AsyncClient) -> None:
    for plural, data in (("configmaps", {"a": "1"}), ("secrets", {"a": b64("1")})):
        name = unique("frozen")
        answer = await http.post(f"{CORE}/{plural}", json={
            "metadata": {"name": name}, "immutable": True, "data": data})
        assert answer.status_code == 201, answer.text
        changed = await http.patch(f"{CORE}/{plural}/{name}", json={"data": {"a": None}},
                                   headers=MERGE)
        assert changed.status_code == 422, plural
        assert changed.json()["message"].endswith(
            "data: Forbidden: field is immutable when `immutable` is set"), plural
        thawed = await http.patch(f"{CORE}/{plural}/{name}", json={"immutable": False},
                                  headers=MERGE)
        assert thawed.status_code == 422
        assert "immutable: Forbidden: field is immutable when `immutable` is set" in \
            thawed.json()["message"]
        labelled = await http.patch(f"{CORE}/{plural}/{name}",
                                    json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE)
        assert labelled.status_code == 200, plural  # metadata stays mutable
        assert (await http.delete(f"{CORE}/{plural}/{name}")).status_code == 200


async def test_config_map_keys(http: httpx.AsyncClient) -> None:
    name = unique("keys")
    answer = await http.post(f"{CORE}/configmaps", json={
        "metadata": {"name": name}, "data": {"a": "1"}, "binaryData": {"a": b64("1")}})
    assert answer.status_code == 422
    assert answer.json()["message"] == (f'ConfigMap "{name}" is invalid: data[a]: Invalid value: '
                                        '"a": duplicate of key present in binaryData')


def test_official_client(apiserver: ApiServer) -> None:
    configuration = apiserver.configure(kubernetes.client.Configuration())
    with kubernetes.client.ApiClient(configuration) as client:
        core = kubernetes.client.CoreV1Api(client)
        name = unique("client")
        core.create_namespaced_config_map("default", kubernetes.client.V1ConfigMap(
            metadata=kubernetes.client.V1ObjectMeta(name=name), data={"k": "v"}))
        assert core.read_namespaced_config_map(name, "default").data == {"k": "v"}
        core.create_namespaced_secret("default", kubernetes.client.V1Secret(
            metadata=kubernetes.client.V1ObjectMeta(name=name), string_data={"k": "v"}))
        secret = core.read_namespaced_secret(name, "default")
        assert secret.data == {"k": b64("v")} and secret.type == "Opaque"
        assert name in [s.metadata.name for s in core.list_namespaced_secret("default").items]
