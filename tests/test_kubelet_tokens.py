"""Projected serviceAccountToken volumes (issue 14, "Configuration and volumes"): the
kubelet's token manager (after pkg/kubelet/token: requiresRefresh, the cache), the volume's
payload, the apiserver's defaults and validation of the projection, and NodeRestriction of
a node's TokenRequests (admitServiceAccount)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth.admission import node_token_restriction
from apiserver.objects import default_object
from apiserver.resources.pods import PODS
from apiserver.validation import validate
from kubelet.env import PodContext
from kubelet.token_manager import Token, TokenKey, TokenManager, requires_refresh, token_of
from kubelet.volumes.payload import PayloadError, volume_payload

HOUR = 3600
KEY = TokenKey("default", "robot", ("vault",), HOUR, "web", "uid-1")


@pytest.mark.parametrize(("lifetime", "age", "jitter", "refresh"), [
    (HOUR, 0, 0, False),
    (HOUR, 2879, 0, False),
    (HOUR, 2881, 0, True),  # past 80% of its life
    (HOUR, 2875, 10, True),  # the jitter brings it forward
    (48 * HOUR, 23 * HOUR, 0, False),
    (48 * HOUR, 24 * HOUR + 1, 0, True),  # never older than a day
])
def test_when_a_token_needs_a_refresh(lifetime: int, age: float, jitter: float,
                                      refresh: bool) -> None:
    issued = 1_800_000_000
    token = Token("t", expires_at=issued + lifetime, lifetime=lifetime)
    assert requires_refresh(token, issued + age, jitter) is refresh


def answer(token: str, *, issued: int, lifetime: int = HOUR) -> dict[str, Any]:
    from datetime import UTC, datetime
    expires = datetime.fromtimestamp(issued + lifetime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "TokenRequest", "spec": {"expirationSeconds": lifetime},
            "status": {"token": token, "expirationTimestamp": expires}}


def test_an_answer_gives_the_token_and_its_lifetime() -> None:
    assert token_of(answer("abc", issued=1_800_000_000)) == Token(
        "abc", expires_at=1_800_000_000 + HOUR, lifetime=HOUR)
    with pytest.raises(ValueError, match="no token"):
        token_of({"status": {}})


async def test_tokens_are_cached_bound_to_the_pod_and_refreshed() -> None:
    now = [1_800_000_000.0]
    sent: list[tuple[str, str, dict[str, Any]]] = []

    async def request(namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        sent.append((namespace, name, body))
        return answer(f"token-{len(sent)}", issued=int(now[0]))

    tokens = TokenManager(request, clock=lambda: now[0], jitter=lambda: 0.0)
    assert await tokens.get(KEY) == "token-1"
    assert sent == [("default", "robot", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": HOUR, "audiences": ["vault"],
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web",
                                    "uid": "uid-1"}}})]
    now[0] += 2000
    assert await tokens.get(KEY) == "token-1"  # cached
    now[0] += 1000
    assert await tokens.get(KEY) == "token-2"  # 3000 s of 3600: refreshed
    tokens.forget_pod("uid-1")
    assert await tokens.get(KEY) == "token-3"


def test_the_token_is_a_file_of_the_projected_volume() -> None:
    pod = {"metadata": {"name": "web", "namespace": "default", "uid": "uid-1"}, "spec": {}}
    volume = {"name": "api", "projected": {"defaultMode": 0o440, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": HOUR}},
        {"configMap": {"name": "ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    payload = volume_payload(pod, volume, PodContext(), {"ca": {"data": {"ca.crt": "PEM"}}}, {},
                             {0: "a.b.c"})
    assert {path: (f.data, f.mode) for path, f in payload.items()} == {
        "token": (b"a.b.c", 0o440), "ca.crt": (b"PEM", 0o440), "namespace": (b"default", 0o440)}
    with pytest.raises(PayloadError, match="failed to fetch token"):
        volume_payload(pod, volume, PodContext(), {"ca": {"data": {"ca.crt": "PEM"}}}, {}, {})


def token_pod(projection: dict[str, Any]) -> dict[str, Any]:
    return default_object(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.15"}],
                 "volumes": [{"name": "api", "projected": {"sources": [
                     {"serviceAccountToken": projection}]}}]}})


def test_a_projected_token_lives_an_hour_by_default() -> None:
    pod = token_pod({"path": "token", "audience": "vault"})
    source = pod["spec"]["volumes"][0]["projected"]["sources"][0]
    assert source == {"serviceAccountToken": {"path": "token", "audience": "vault",
                                              "expirationSeconds": HOUR}}
    assert validate(PODS, pod) == []


@pytest.mark.parametrize(("projection", "expected"), [
    ({"path": "token", "expirationSeconds": 599},
     [("FieldValueInvalid", "spec.volumes[0].projected.sources[0].serviceAccountToken."
       "expirationSeconds", "Invalid value: 599: may not specify a duration less than 10 "
       "minutes")]),
    ({"path": "token", "expirationSeconds": (1 << 32) + 1},
     [("FieldValueInvalid", "spec.volumes[0].projected.sources[0].serviceAccountToken."
       "expirationSeconds", f"Invalid value: {(1 << 32) + 1}: may not specify a duration "
       "larger than 2^32 seconds")]),
    ({"path": ""}, [("FieldValueRequired", "spec.volumes[0].projected.path", "Required value")]),
    ({"path": "../token"}, [("FieldValueInvalid", "spec.volumes[0].projected.path",
                             "Invalid value: \"../token\": must not contain '..'")]),
])
def test_token_projection_causes(projection: dict[str, Any],
                                 expected: list[tuple[str, str, str]]) -> None:
    assert [(c["reason"], c["field"], c["message"])
            for c in validate(PODS, token_pod(projection))] == expected


POD = {"metadata": {"name": "web", "uid": "uid-1"}, "spec": {"nodeName": "node1"}}


def bound(**ref: Any) -> dict[str, Any]:
    return {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web",
                                        "uid": "uid-1", **ref}}}


@pytest.mark.parametrize(("request_", "node", "why"), [
    (bound(), "node1", None),
    ({"spec": {}}, "node1", "node requested token not bound to a pod"),
    (bound(kind="Secret"), "node1", "node requested token not bound to a pod"),
    (bound(uid=""), "node1", "node requested token with a pod binding without a uid"),
    (bound(uid="uid-0"), "node1",
     "the UID in the bound object reference (uid-0) does not match the UID in record. The "
     "object might have been deleted and then recreated"),
    (bound(), "node2", "node requested token bound to a pod scheduled on a different node"),
])
def test_a_node_may_only_request_tokens_bound_to_its_own_pods(
        request_: dict[str, Any], node: str, why: str | None) -> None:
    assert node_token_restriction(node, request_, POD) == why


def test_a_pod_runs_as_the_default_service_account_unless_it_names_one() -> None:
    from apiserver.resources.pods import admit_create
    pods = [{"metadata": {"name": "a"}, "spec": {}},
            {"metadata": {"name": "b"}, "spec": {"serviceAccountName": "robot"}},
            {"metadata": {"name": "c"}, "spec": {"serviceAccount": "legacy"}},
            {"metadata": {"name": "d", "annotations": {"kubernetes.io/config.mirror": "x"}},
             "spec": {}}]
    for pod in pods:
        admit_create(pod)
    assert [(p["spec"].get("serviceAccountName"), p["spec"].get("serviceAccount"))
            for p in pods] == [("default", "default"), ("robot", "robot"),
                               ("legacy", "legacy"), (None, None)]
