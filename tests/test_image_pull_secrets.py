"""imagePullSecrets: the registry credentials a pod names reach Docker's pull.

Pure tests of the keyring (kubelet.credentials); then, end to end, a registry on
loopback that asks for Basic auth and records what Docker sends: a pod whose Secret
(`kubectl create secret docker-registry`) names that registry makes Docker log in with it,
a pod without one pulls anonymously, and a Secret that does not exist is kube's
FailedToRetrieveImagePullSecret warning. The registry has no images, so each pull then
fails as a missing manifest (ErrImagePull): nothing leaves the machine."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from kubelet.credentials import Credential, credentials_for, entry_matches, secret_credentials
from tests.support import Kubectl, eventually, unique
from tests.test_volumes import events, kubectl, kubelet, ns, root_dir, waiting  # noqa: F401


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def dockerconfigjson(auths: dict[str, Any]) -> dict[str, Any]:
    return {"type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": b64(json.dumps({"auths": auths}))}}


# -- the keyring (pure) ---------------------------------------------------------------------

@pytest.mark.parametrize("key, repository, matches", [
    ("registry.example.com", "registry.example.com/team/app", True),
    ("https://registry.example.com/v2/", "registry.example.com/app", False),  # path v2
    ("registry.example.com/team", "registry.example.com/team/app", True),
    ("registry.example.com/team", "registry.example.com/teamster/app", False),
    ("registry.example.com/other", "registry.example.com/team/app", False),
    ("registry.example.com:5000", "registry.example.com/app", False),  # ports must agree
    ("127.0.0.1:5000", "127.0.0.1:5000/app", True),
    ("*.example.com", "eu.example.com/app", True),
    ("*.example.com", "a.eu.example.com/app", False),  # a glob matches one label
    ("https://index.docker.io/v1/", "busybox", True),  # docker.io/library/busybox
    ("docker.io", "someone/app", True),
    ("quay.io", "busybox", False),
    ("REGISTRY.example.com", "registry.example.com/app", True),
])
def test_an_entry_matches_an_image_as_kubes_keyring_does(key: str, repository: str,
                                                         matches: bool) -> None:
    assert entry_matches(key, repository) is matches


def test_secret_entries_from_both_docker_config_formats() -> None:
    json_secret = dockerconfigjson({"r.example.com": {"auth": b64("alice:s3:cret")},
                                    "t.example.com": {"identitytoken": "tok"},
                                    "empty.example.com": {}})
    legacy = {"type": "kubernetes.io/dockercfg",
              "data": {".dockercfg": b64(json.dumps(
                  {"old.example.com": {"username": "bob", "password": "pw"}}))}}
    assert secret_credentials(json_secret) == [
        Credential("r.example.com", "alice", "s3:cret"),
        Credential("t.example.com", identity_token="tok")]
    assert secret_credentials(legacy) == [Credential("old.example.com", "bob", "pw")]
    for broken in ({"data": {".dockerconfigjson": "not base64!"}},
                   {"data": {".dockerconfigjson": b64("[1, 2]")}},
                   {"data": {"token": b64("x")}}, {}):
        assert secret_credentials(broken) == []


def test_the_most_specific_entry_is_tried_first() -> None:
    secrets = [dockerconfigjson({"r.example.com": {"username": "any", "password": "1"}}),
               dockerconfigjson({"r.example.com/team": {"username": "team", "password": "2"},
                                 "elsewhere.io": {"username": "no", "password": "3"}})]
    assert [c.username for c in credentials_for("r.example.com/team/app", secrets)] == [
        "team", "any"]


def test_the_registry_auth_header_is_dockers_base64url_json() -> None:
    header = Credential("127.0.0.1:5000", "alice", "pw?>").registry_auth_header()
    assert "+" not in header and "/" not in header
    assert json.loads(base64.urlsafe_b64decode(header)) == {
        "serveraddress": "127.0.0.1:5000", "username": "alice", "password": "pw?>"}


# -- end to end: Docker logs in to a loopback registry with the pod's Secret ------------------

class Registry:
    """A registry API that demands Basic auth and has no images (every manifest is unknown)."""

    def __init__(self) -> None:
        self.authorizations: list[str] = []  # the Authorization header of each request
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                given = self.headers.get("Authorization") or ""
                registry.authorizations.append(given)
                if not given.startswith("Basic "):
                    self._answer(401, "UNAUTHORIZED", {
                        "WWW-Authenticate": 'Basic realm="kubelite-test"'})
                else:
                    self._answer(404 if self.path != "/v2/" else 200, "MANIFEST_UNKNOWN")

            do_HEAD = do_GET

            def _answer(self, code: int, error: str, headers: dict[str, str] | None = None) -> None:
                body = json.dumps({"errors": [{"code": error, "message": error.lower()}]})
                self.send_response(code)
                for name, value in {"Content-Type": "application/json",
                                    "Docker-Distribution-API-Version": "registry/2.0",
                                    **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"

    def basic(self, username: str, password: str) -> str:
        return f"Basic {b64(f'{username}:{password}')}"


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    found = Registry()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


async def pull_pod(http: httpx.AsyncClient, namespace: str, node: str, image: str,
                   secrets: list[str]) -> str:
    name = unique("pull")
    created = await http.post(f"/api/v1/namespaces/{namespace}/pods", json={
        "metadata": {"name": name},
        "spec": {"nodeName": node, "imagePullSecrets": [{"name": s} for s in secrets],
                 "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "app", "image": image,
                                 "imagePullPolicy": "Always"}]}})
    assert created.status_code == 201, created.text
    return name


async def test_docker_pulls_with_the_pods_secret_and_without_it_anonymously(
        http: httpx.AsyncClient, kubelet: Any, kubectl: Kubectl,  # noqa: F811
        ns: str, registry: Registry) -> None:  # noqa: F811
    kubectl("create", "secret", "docker-registry", "regcred", "-n", ns,
            f"--docker-server={registry.address}", "--docker-username=alice",
            "--docker-password=s3cret")
    image = f"{registry.address}/private/app:1"

    with_secret = await pull_pod(http, ns, kubelet.node_name, image, ["regcred"])
    assert (await waiting(http, ns, with_secret))["reason"] in ("ErrImagePull",
                                                                 "ImagePullBackOff")
    assert registry.basic("alice", "s3cret") in registry.authorizations
    await http.delete(f"/api/v1/namespaces/{ns}/pods/{with_secret}")

    registry.authorizations.clear()
    missing = await pull_pod(http, ns, kubelet.node_name, image, ["nope"])
    assert (await waiting(http, ns, missing))["reason"] in ("ErrImagePull", "ImagePullBackOff")

    async def warned() -> bool:
        return any(e["reason"] == "FailedToRetrieveImagePullSecret" and e["message"] ==
                   "Unable to retrieve some image pull secrets (nope); attempting to pull "
                   "the image may not succeed." for e in await events(http, ns, missing))
    await eventually(warned, timeout=30, what="the FailedToRetrieveImagePullSecret warning")
    assert registry.authorizations and not any(registry.authorizations), \
        "without a usable Secret Docker pulls anonymously"
