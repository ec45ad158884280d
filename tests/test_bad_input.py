"""Bad input never hurts (issue 10), over HTTP against the real apiserver and etcd: one
test per family of hostile request. Each failing request must answer a Status and write
nothing: the keys under /registry/ and their revisions are the same before and after."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from apiserver.app import create_app
from apiserver.decode import MAX_DEPTH
from tests.support import Etcd, etcd_keys, unique

PODS = "/api/v1/namespaces/default/pods"
JSON = {"content-type": "application/json"}
MERGE = {"content-type": "application/merge-patch+json"}
JSON_PATCH = {"content-type": "application/json-patch+json"}
STRATEGIC = {"content-type": "application/strategic-merge-patch+json"}
YAML = {"content-type": "application/yaml"}


def pod(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}, **extra}


def assert_status(r: httpx.Response, *codes: int) -> dict[str, Any]:
    """A Failure Status whose code is the HTTP status, which is one of `codes`."""
    assert r.status_code in codes, (r.status_code, r.text[:500])
    body = r.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure" and body["code"] == r.status_code, body
    assert body.get("reason"), body
    return body


@pytest.fixture
async def web(http: httpx.AsyncClient) -> AsyncIterator[dict[str, Any]]:
    """A stored pod (unbound), deleted afterwards."""
    name = unique("bad")
    r = await http.post(PODS, json=pod(name))
    assert r.status_code == 201, r.text
    yield r.json()
    await http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})


async def refused_without_writing(etcd: Etcd, send: Any, *codes: int) -> dict[str, Any]:
    """Send one request; it must be refused with a Status and change no key in etcd."""
    before = await etcd_keys(etcd)
    r = await send()
    status = assert_status(r, *codes)
    assert await etcd_keys(etcd) == before, f"{r.status_code} but something was written"
    return status


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- a write is stored and the client told so, whatever its field names ------------------


@pytest.mark.parametrize("field", ["€", "a\nb", "nul\u0000x", "quote\"back\\slash"])
async def test_an_unknown_field_with_any_name_is_stored_once_with_a_readable_warning(
        http: httpx.AsyncClient, etcd: Etcd, field: str) -> None:
    name = unique("warn")
    before = await etcd_keys(etcd)
    r = await http.post(PODS, content=json.dumps({**pod(name), field: 1}), headers=JSON)
    assert r.status_code == 201, r.text
    warning = r.headers["warning"]
    assert warning.startswith('299 - "unknown field ') and warning.endswith('"'), warning
    assert "\n" not in warning and "\x00" not in warning
    if field == "€":  # sent as UTF-8, as kube sends it
        assert "€".encode() in dict(r.headers.raw)[b"warning"]
    added = set(await etcd_keys(etcd)) - set(before)
    assert added == {f"/registry/pods/default/{name}"}
    again = await http.post(PODS, content=json.dumps({**pod(name), field: 1}), headers=JSON)
    assert_status(again, 409)
    await http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})


# -- deep nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 990, 10_000])
async def test_deep_nesting_in_a_json_or_yaml_body_is_a_400(
        http: httpx.AsyncClient, etcd: Etcd, depth: int) -> None:
    body = json.dumps(pod(unique("deep"))).replace('"spec":', f'"x":{nested(depth)},"spec":')
    for headers in (JSON, YAML):  # JSON is YAML: the same text through either reader
        status = await refused_without_writing(
            etcd, lambda h=headers: http.post(PODS, content=body, headers=h), 400)
        assert "nested too deeply" in status["message"]


@pytest.mark.parametrize(("headers", "document"), [
    (MERGE, '{"metadata":{"labels":{"a":%s}}}'),
    (STRATEGIC, '{"metadata":{"labels":{"a":%s}}}'),
    (JSON_PATCH, '[{"op":"add","path":"/metadata/labels","value":%s}]'),
    (JSON_PATCH, '%s'),
])
async def test_deep_nesting_in_every_patch_type_is_a_400(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], headers: dict[str, str],
        document: str) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    for depth in (MAX_DEPTH + 1, 10_000):
        await refused_without_writing(
            etcd, lambda d=depth: http.patch(path, content=document % nested(d),
                                             headers=headers), 400)


# -- the YAML alias bomb --------------------------------------------------------------------


def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


async def test_a_yaml_alias_bomb_is_refused_quickly_and_the_server_keeps_answering(
        http: httpx.AsyncClient, etcd: Etcd) -> None:
    bomb = alias_bomb()
    assert len(bomb) < 600
    worst = 0.0

    async def probe(stop: asyncio.Event) -> None:
        nonlocal worst
        while not stop.is_set():
            began = time.monotonic()
            r = await http.get("/readyz")
            assert r.status_code == 200
            worst = max(worst, time.monotonic() - began)
            await asyncio.sleep(0.005)

    stop = asyncio.Event()
    prober = asyncio.create_task(probe(stop))
    try:
        for _ in range(20):
            began = time.monotonic()
            status = await refused_without_writing(
                etcd, lambda: http.post(PODS, content=bomb, headers=YAML), 400)
            # a generous timeout: expanding the bomb's 9**9 strings would take minutes
            assert time.monotonic() - began < 10
            assert "excessive aliasing" in status["message"]
    finally:
        stop.set()
        await prober
    print(f"worst /readyz during 20 alias bombs: {worst * 1000:.1f} ms")
    assert worst < 10  # a generous timeout (typically a few ms): the server never blocked


# -- Binding --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [
    "node1", 7, ["node1"], {"name": 123}, {"name": ["node1"]}, {"name": "Bad Node/../x"},
    {"name": ""}, {"name": None},
])
async def test_a_binding_of_the_wrong_shape_is_refused_and_binds_nothing(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], target: Any) -> None:
    name = web["metadata"]["name"]
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": target}
    await refused_without_writing(
        etcd, lambda: http.post(f"{PODS}/{name}/binding", json=binding), 400, 422)
    r = await http.get(f"{PODS}/{name}")
    assert "nodeName" not in r.json()["spec"]
    assert r.json()["metadata"]["resourceVersion"] == web["metadata"]["resourceVersion"]


@pytest.mark.parametrize("status", [{}, {"addresses": [{"type": "InternalIP",
                                                       "address": "10.0.0.1"}]},
                                     {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}])
async def test_logs_of_a_pod_on_a_node_without_a_kubelet_address_are_a_400(
        http: httpx.AsyncClient, status: dict[str, Any]) -> None:
    node = unique("no-address")
    r = await http.post("/api/v1/nodes", json={"metadata": {"name": node}, "status": status})
    assert r.status_code == 201, r.text
    name = unique("logs")
    r = await http.post(PODS, json=pod(name, spec={"nodeName": node, "containers": [
        {"name": "c", "image": "busybox:1.35"}]}))
    assert r.status_code == 201, r.text
    try:
        status_body = assert_status(await http.get(f"{PODS}/{name}/log"), 400)
        assert "does not report a kubelet address" in status_body["message"]
    finally:
        await http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})
        await http.delete(f"/api/v1/nodes/{node}")


# -- DeleteOptions ----------------------------------------------------------------------------


@pytest.mark.parametrize("options", [
    {"dryRun": "All"}, {"dryRun": 1}, {"dryRun": ["Bogus"]},
    {"gracePeriodSeconds": 1.5}, {"gracePeriodSeconds": True}, {"gracePeriodSeconds": "abc"},
    {"gracePeriodSeconds": [1]}, {"propagationPolicy": "Sometimes"}, {"preconditions": "x"},
    {"preconditions": {"uid": 5}}, {"orphanDependents": "yes"},
])
async def test_a_delete_with_bad_options_is_refused_and_deletes_nothing(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], options: dict[str, Any],
        ) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    body = json.dumps({"apiVersion": "v1", "kind": "DeleteOptions", **options})
    await refused_without_writing(
        etcd, lambda: http.request("DELETE", path, content=body, headers=JSON), 400, 422)
    r = await http.get(path)
    assert r.status_code == 200
    assert r.json()["metadata"]["resourceVersion"] == web["metadata"]["resourceVersion"]
    assert "deletionTimestamp" not in r.json()["metadata"]


@pytest.mark.parametrize("query", [
    {"gracePeriodSeconds": "abc"}, {"gracePeriodSeconds": "1.5"}, {"dryRun": "Yes"},
    {"propagationPolicy": "Sometimes"}, {"orphanDependents": "1", "propagationPolicy": "Orphan"},
])
async def test_a_delete_with_bad_query_options_deletes_nothing(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], query: dict[str, str],
        ) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    await refused_without_writing(etcd, lambda: http.delete(path, params=query), 400, 422)
    assert (await http.get(path)).status_code == 200


# -- patches ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("headers", "document"), [
    (STRATEGIC, {"$patch": "bogus"}),
    (STRATEGIC, {"spec": {"$setElementOrder/containers": "c"}}),
    (STRATEGIC, {"spec": {"$setElementOrder/containers": [{"image": "x"}]}}),
    (STRATEGIC, {"spec": {"containers": [{"image": "no-merge-key"}]}}),
    (STRATEGIC, {"spec": {"containers": [{"name": "c", "$patch": "bogus"}]}}),
    (STRATEGIC, ["not", "an", "object"]),
    (MERGE, "a string"),
    (JSON_PATCH, [{"op": "replace", "path": "/spec/containers/00/image", "value": "x"}]),
    (JSON_PATCH, [{"op": "replace", "path": "/spec/containers/-1/image", "value": "x"}]),
    (JSON_PATCH, [{"op": "replace", "path": "spec", "value": "x"}]),
    (JSON_PATCH, [{"op": "bogus", "path": "/spec"}]),
    (JSON_PATCH, {"op": "add"}),
    (JSON_PATCH, [{"op": "test", "path": "/metadata/name", "value": "other"}]),
])
async def test_a_broken_patch_is_a_4xx_and_writes_nothing(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], headers: dict[str, str],
        document: Any) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    await refused_without_writing(
        etcd, lambda: http.patch(path, content=json.dumps(document), headers=headers),
        400, 409, 422)


async def test_json_patch_index_with_a_leading_zero_is_a_422(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any]) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    document = [{"op": "replace", "path": "/spec/containers/00/image", "value": "x"}]
    await refused_without_writing(
        etcd, lambda: http.patch(path, content=json.dumps(document), headers=JSON_PATCH), 422)


@pytest.mark.parametrize(("headers", "document"), [
    (STRATEGIC, {"spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}}),
    (STRATEGIC, {"metadata": {"labels": {}}}),
    # kube's mergeMap skips a delete list of another type than the field (or no field)
    (STRATEGIC, {"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
    (STRATEGIC, {}),
    (MERGE, {}),
    (MERGE, {"metadata": {"annotations": {"not-there": None}}}),
    (JSON_PATCH, []),
    (JSON_PATCH, [{"op": "test", "path": "/spec/containers/0/name", "value": "c"}]),
])
async def test_a_patch_that_changes_nothing_writes_nothing(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], headers: dict[str, str],
        document: Any) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    before = await etcd_keys(etcd)
    r = await http.patch(path, content=json.dumps(document), headers=headers)
    assert r.status_code == 200, r.text
    meta = r.json()["metadata"]
    assert meta["resourceVersion"] == web["metadata"]["resourceVersion"]
    assert meta["generation"] == web["metadata"]["generation"]
    assert await etcd_keys(etcd) == before


# -- identity -----------------------------------------------------------------------------


IDENTITY_CHANGES: list[tuple[str, Any]] = [
    ("name", {"metadata": {"name": "other"}}),
    ("namespace", {"metadata": {"namespace": "kube-system"}}),
    ("uid", {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}}),
    ("kind", {"kind": "Node"}),
    ("apiVersion", {"apiVersion": "apps/v1"}),
]


@pytest.mark.parametrize(("field", "change"), IDENTITY_CHANGES)
@pytest.mark.parametrize("headers", [MERGE, STRATEGIC])
async def test_a_patch_may_not_change_identity(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], field: str, change: Any,
        headers: dict[str, str]) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    await refused_without_writing(
        etcd, lambda: http.patch(path, content=json.dumps(change), headers=headers),
        400, 422)


@pytest.mark.parametrize(("field", "value"), [
    ("/metadata/name", "other"), ("/metadata/namespace", "kube-system"),
    ("/metadata/uid", "00000000-0000-0000-0000-000000000000"), ("/kind", "Node"),
    ("/apiVersion", "apps/v1"),
])
async def test_a_json_patch_may_not_change_identity(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], field: str, value: str,
        ) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    document = [{"op": "replace", "path": field, "value": value}]
    await refused_without_writing(
        etcd, lambda: http.patch(path, content=json.dumps(document), headers=JSON_PATCH),
        400, 422)


@pytest.mark.parametrize(("field", "change"), IDENTITY_CHANGES)
async def test_a_put_may_not_change_identity(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any], field: str, change: Any,
        ) -> None:
    path = f"{PODS}/{web['metadata']['name']}"
    body = json.loads(json.dumps(web))
    for key, value in change.items():
        if isinstance(value, dict):
            body[key].update(value)
        else:
            body[key] = value
    await refused_without_writing(etcd, lambda: http.put(path, json=body), 400, 422)


# -- query parameters -------------------------------------------------------------------------


@pytest.mark.parametrize("query", [
    {"limit": "abc"}, {"limit": "1.5"}, {"resourceVersion": "abc"},
    {"continue": "garbage"}, {"timeoutSeconds": "abc"},
    {"labelSelector": "a in (b"}, {"fieldSelector": "spec.bogus=x"},
    {"watch": "true", "resourceVersion": "-5"}, {"watch": "true", "resourceVersion": "abc"},
    {"watch": "true", "timeoutSeconds": "abc"}, {"watch": "1", "limit": "x"},
])
async def test_a_bad_query_parameter_is_a_400(http: httpx.AsyncClient, query: dict[str, str],
                                              ) -> None:
    r = await http.get(PODS, params=query, timeout=5)
    assert_status(r, 400)


# etcd's revisions are int64, kube's resourceVersions uint64: past int64 it is a revision
# etcd has not reached (kube's 504 with a ResourceVersionTooLarge cause, as for any
# future one), past uint64 not a resourceVersion at all; never a 500.
@pytest.mark.parametrize(("resource_version", "code"), [
    ("9223372036854775808", 504), ("18446744073709551615", 504), ("18446744073709551616", 400),
])
@pytest.mark.parametrize("query", [{"resourceVersionMatch": "Exact"}, {"limit": "1"}])
async def test_a_resource_version_past_int64_is_too_large_not_a_500(
        http: httpx.AsyncClient, resource_version: str, code: int, query: dict[str, str],
        ) -> None:
    r = await http.get(PODS, params={"resourceVersion": resource_version, **query}, timeout=10)
    status = assert_status(r, code)
    if code == 504:
        assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


# ValidateListOptions' errors are an Invalid ListOptions, as kube's ListResource answers them.
@pytest.mark.parametrize("query", [
    {"resourceVersionMatch": "Bogus"}, {"resourceVersion": "0", "resourceVersionMatch": "Bogus"},
    {"resourceVersionMatch": "Exact"},
])
async def test_bad_list_options_are_a_422(http: httpx.AsyncClient, query: dict[str, str],
                                          ) -> None:
    status = assert_status(await http.get(PODS, params=query, timeout=5), 422)
    assert status["details"]["kind"] == "ListOptions"


@pytest.mark.parametrize("query", [
    {"fieldValidation": "Sometimes"}, {"dryRun": "Yes"}, {"dryRun": ""},
])
async def test_a_bad_write_query_parameter_writes_nothing(
        http: httpx.AsyncClient, etcd: Etcd, query: dict[str, str]) -> None:
    await refused_without_writing(
        etcd, lambda: http.post(PODS, json=pod(unique("q")), params=query), 400, 422)


# -- too large for etcd -------------------------------------------------------------------


@pytest.mark.parametrize("size", [1_700_000, 2_500_000])
async def test_a_pod_too_large_for_etcd_is_a_413_not_a_503(
        http: httpx.AsyncClient, etcd: Etcd, size: int) -> None:
    big = pod(unique("big"))
    big["spec"]["containers"][0]["env"] = [{"name": "X", "value": "x" * size}]
    status = await refused_without_writing(etcd, lambda: http.post(PODS, json=big), 413)
    assert status["reason"] == "RequestEntityTooLarge"


async def test_an_update_too_large_for_etcd_is_a_413(
        http: httpx.AsyncClient, etcd: Etcd, web: dict[str, Any]) -> None:
    path = f"{PODS}/{web['metadata']['name']}/status"  # annotations stop at 256 KiB
    document = {"status": {"message": "x" * 2_500_000}}
    r = await refused_without_writing(
        etcd, lambda: http.patch(path, content=json.dumps(document), headers=MERGE), 413)
    assert r["reason"] == "RequestEntityTooLarge"


# -- an unexpected exception anywhere ---------------------------------------------------------


async def test_an_unexpected_exception_on_any_route_is_a_logged_500_status(
        caplog: pytest.LogCaptureFixture) -> None:
    front = create_app(["http://127.0.0.1:1"])  # never started: no etcd is dialled

    @front.app.get("/version/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    transport = httpx.ASGITransport(app=front, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://kubelite") as client:
        with caplog.at_level(logging.ERROR, logger="apiserver"):
            for path in ("/version/boom", f"{PODS}/web"):  # FastAPI's route, the dispatcher's
                caplog.clear()
                r = await client.get(path)
                status = assert_status(r, 500)
                assert status["reason"] == "InternalError"
                assert r.headers["content-type"] == "application/json"
                failures = [rec for rec in caplog.records if "failed" in rec.getMessage()]
                assert len(failures) == 1 and failures[0].exc_info, caplog.records
