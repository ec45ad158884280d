"""The kubelet's request attributes (kube's pkg/kubelet/server/auth.go and the "Kubelet
authentication/authorization" doc) and its filter, with fake reviewers."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from apiserver.auth import UserInfo
from kubelet.auth import KubeletAuth, TTLCache, request_verb, subresources, with_auth


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
