"""The kubelet's request attributes (kube's pkg/kubelet/server/auth.go and the "Kubelet
authentication/authorization" doc) and its filter, with fake reviewers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from apiserver.auth import UserInfo
from common import pki
from kubelet.auth import KubeletAuth, TTLCache, request_verb, subresources, with_auth
from tests.docker_support import (
    DOCKER_SOCKET,
    PAUSE_IMAGE,
    ensure_docker,
    remove_node_containers,
)
from tests.support import (
    PYTHON,
    Kubectl,
    Process,
    SecureApiServer,
    client_context,
    free_port,
    unique,
)


@pytest.mark.parametrize(("path", "expected"), [
    ("/stats/summary", ("stats",)), ("/stats", ("stats",)), ("/metrics", ("metrics",)),
    ("/metrics/cadvisor", ("metrics",)), ("/logs/syslog", ("log",)), ("/spec/", ("spec",)),
    ("/checkpoint/ns/p/c", ("checkpoint",)), ("/containerLogs/ns/p/c", ("proxy",)),
    ("/exec/ns/p/c", ("proxy",)), ("/statsx", ("proxy",)), ("/healthz", ("healthz", "proxy")),
    ("/pods", ("pods", "proxy")), ("/configz", ("configz", "proxy")), ("/", ("proxy",)),
])
def test_paths_map_to_kubes_subresources(path: str, expected: tuple[str, ...]) -> None:
    assert subresources(path) == expected


@pytest.mark.parametrize(("method", "verb"), [
    ("GET", "get"), ("POST", "create"), ("PUT", "update"), ("PATCH", "patch"),
    ("DELETE", "delete"), ("HEAD", ""),
])
def test_methods_map_to_verbs(method: str, verb: str) -> None:
    assert request_verb(method) == verb


def test_ttl_cache_expires() -> None:
    now = [0.0]
    cache: TTLCache[str, int] = TTLCache(clock=lambda: now[0])
    cache.put("a", 1, 5)
    assert cache.get("a") == 1
    now[0] = 6
    assert cache.get("a") is None


async def test_the_filter_authenticates_and_asks_once() -> None:
    asked: list[tuple[str, str, str]] = []

    async def review_token(token: str) -> UserInfo | None:
        return UserInfo("alice", groups=("devs",)) if token == "good" else None

    async def review_access(user: UserInfo, verb: str, sub: str) -> tuple[bool, str]:
        asked.append((user.name, verb, sub))
        return user.name == "alice" and sub == "proxy" and verb == "get", ""

    app = Starlette(routes=[Route("/containerLogs/{a}/{b}/{c}",
                                  lambda _r: PlainTextResponse("logs"))])
    auth = KubeletAuth(node_name="n1", anonymous=False, review_token=review_token,
                       review_access=review_access)
    transport = httpx.ASGITransport(app=with_auth(app, auth))
    async with httpx.AsyncClient(transport=transport, base_url="http://kubelet") as http:
        assert (await http.get("/containerLogs/ns/p/c")).status_code == 401
        bad = await http.get("/containerLogs/ns/p/c", headers={"Authorization": "Bearer x"})
        assert bad.status_code == 401
        good = {"Authorization": "Bearer good"}
        assert (await http.get("/containerLogs/ns/p/c", headers=good)).text == "logs"
        assert (await http.get("/containerLogs/ns/p/c", headers=good)).text == "logs"
        denied = await http.post("/containerLogs/ns/p/c", headers=good)
        assert denied.status_code == 403
        assert denied.text == ("Forbidden (user=alice, verb=create, resource=nodes, "
                               "subresource(s)=[proxy])")
    assert asked == [("alice", "get", "proxy"), ("alice", "create", "proxy")]  # cached


# --- with real processes: the secure apiserver and a kubelet on TLS ---------------------------

NODE = "kauth-node"


@pytest.fixture(scope="module")
def secure_cluster(etcd: Any, tmp_path_factory: pytest.TempPathFactory,
                   ) -> Iterator[tuple[Path, int, Kubectl]]:
    ensure_docker()
    pki_dir = tmp_path_factory.mktemp("kauth-pki")
    pki.init(pki_dir, [NODE])
    work = tmp_path_factory.mktemp("kauth")
    api = SecureApiServer(etcd, work, pki_dir, name="apiserver-kauth", plain=False, extra_args=(
        "--authorization-mode=Node,RBAC", "--etcd-prefix", f"/{unique('kauth')}",
        "--kubelet-client-certificate", str(pki_dir / "apiserver-kubelet-client.crt"),
        "--kubelet-client-key", str(pki_dir / "apiserver-kubelet-client.key"),
        "--kubelet-certificate-authority", str(pki_dir / "ca.crt"))).start()
    pki.write_kubeconfigs(pki_dir, pki_dir, [NODE], server=api.url)
    port = free_port()
    kubelet = Process(f"kubelet-{NODE}", [
        PYTHON, "-m", "kubelet", "--kubeconfig", str(pki_dir / f"kubelet-{NODE}.conf"),
        "--node-name", NODE, "--node-ip", "127.0.0.1", "--address", "127.0.0.1",
        "--port", str(port), "--docker-socket", DOCKER_SOCKET,
        "--pod-infra-container-image", PAUSE_IMAGE,
        "--tls-cert-file", str(pki_dir / f"kubelet-{NODE}.crt"),
        "--tls-private-key-file", str(pki_dir / f"kubelet-{NODE}.key"),
        "--client-ca-file", str(pki_dir / "ca.crt"), "--anonymous-auth=false",
        "--authentication-token-webhook", "--authorization-mode", "Webhook"],
        work / "kubelet.log").start()
    admin = Kubectl(api.url, work / "kubectl")
    pki.write_kubeconfig(admin.kubeconfig, pki.kubeconfig_for(
        pki_dir, "admin", server=api.url, user="kubernetes-admin", namespace="default"))
    try:
        deadline = time.monotonic() + 30
        while True:
            assert kubelet.alive(), kubelet.log()[-3000:]
            try:
                if httpx.get(f"https://127.0.0.1:{port}/healthz",
                             verify=client_context(pki_dir, "admin"), timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, kubelet.log()[-3000:]
            time.sleep(0.2)
        yield pki_dir, port, admin
    finally:
        kubelet.stop()
        remove_node_containers(NODE)
        api.stop()


def test_the_kubelet_port_authenticates_and_authorizes(
        secure_cluster: tuple[Path, int, Kubectl], tmp_path: Path) -> None:
    pki_dir, port, admin = secure_cluster
    url = f"https://127.0.0.1:{port}/containerLogs/default/nope/c"
    ca_only = client_context(pki_dir, None)
    assert httpx.get(url, verify=ca_only).status_code == 401
    other = tmp_path / "other"
    pki.init(other, [])
    foreign = client_context(other, "admin", ca_dir=pki_dir)
    assert httpx.get(url, verify=foreign).status_code == 401
    admin("create", "clusterrolebinding", unique("alice-view"), "--clusterrole=view",
          "--user=alice")
    denied = httpx.get(url, verify=ca_only, headers={"Authorization": "Bearer good-token"})
    assert denied.status_code == 403, denied.text
    assert denied.text == ("Forbidden (user=alice, verb=get, resource=nodes, "
                           "subresource(s)=[proxy])")
    for cert in ("admin", "apiserver-kubelet-client"):
        ok = httpx.get(url, verify=client_context(pki_dir, cert))
        assert ok.status_code == 404, ok.text  # through: the kubelet has no such pod
    pod = unique("logs")
    admin("run", pod, "--image=kubelite/busybox:1.35", "--restart=Never",
          f"--overrides={json.dumps({'spec': {'nodeName': NODE}})}", "--", "echo", "hello")
    deadline = time.monotonic() + 60
    while admin.run("logs", pod, check=False).stdout != "hello\n":
        assert time.monotonic() < deadline, admin.run("logs", pod, check=False)
        time.sleep(0.5)
