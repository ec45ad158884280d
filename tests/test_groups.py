"""API groups: coordination.k8s.io/v1 Leases served by the same dispatcher as /api/v1.

Pure rules first (MicroTime decoding, ValidateLease), then the real apiserver on etcd
(every verb, watch, Tables, selectors, errors worded for a named group), then the real
kubectl reading leases and showing a node's lease in `describe node`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.resources import RESOURCES
from apiserver.schema import decode
from apiserver.validation import validate, validate_update
from common.errors import BadRequest
from common.models import Lease, micro_time_string
from tests.support import ApiServer, Etcd, Kubectl, table_lines, unique

GROUP_PATH = "/apis/coordination.k8s.io/v1"
LEASES = f"{GROUP_PATH}/namespaces/default/leases"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def lease(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": {"app": "groups"}}, "spec": spec}


# --- pure rules ------------------------------------------------------------------------------

@pytest.mark.parametrize(("sent", "stored"), [
    ("2025-03-04T05:06:07.123456Z", "2025-03-04T05:06:07.123456Z"),
    ("2025-03-04T05:06:07.000001+02:00", "2025-03-04T03:06:07.000001Z"),
    ("2025-03-04T05:06:07,123456Z", "2025-03-04T05:06:07.123456Z"),
])
def test_micro_time_is_kept_in_utc_with_microseconds(sent: str, stored: str) -> None:
    assert micro_time_string(sent) == stored


@pytest.mark.parametrize(("sent", "message"), [
    ("2025-03-04T05:06:07Z", 'parsing time "2025-03-04T05:06:07Z" as '
     '"2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'),
    ("2025-03-04T05:06:07.123Z", 'parsing time "2025-03-04T05:06:07.123Z" as '
     '"2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000"'),
    ("2025-03-04 05:06:07.123456Z", 'parsing time "2025-03-04 05:06:07.123456Z" as '
     '"2006-01-02T15:04:05.000000Z07:00": cannot parse " 05:06:07.123456Z" as "T"'),
    ("2025-13-04T05:06:07.123456Z", 'parsing time "2025-13-04T05:06:07.123456Z": '
     'month out of range'),
    ("2025-02-30T05:06:07.123456Z", 'parsing time "2025-02-30T05:06:07.123456Z": '
     'day out of range'),
    ("2025-03-04T05:06:07.123456Zabc", 'parsing time "2025-03-04T05:06:07.123456Zabc": '
     'extra text: "abc"'),
    (1700000000, "json: cannot unmarshal number into Go value of type string"),
])
def test_micro_time_refusals_are_worded_as_go_words_them(sent: Any, message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        decode(Lease, lease("l", renewTime=sent))
    assert refused.value.message == f'Lease in version "v1" cannot be handled as a Lease: {message}'


def test_lease_decoding_keeps_known_fields_and_reports_unknown_ones() -> None:
    body = lease("l", holderIdentity="a", leaseDurationSeconds=40, leaseTransitions=2,
                 acquireTime="2025-03-04T05:06:07.000000Z", surprise=True)
    pruned, unknown = decode(Lease, body)
    assert pruned["spec"] == {"holderIdentity": "a", "leaseDurationSeconds": 40,
                              "acquireTime": "2025-03-04T05:06:07.000000Z",
                              "leaseTransitions": 2}
    assert unknown == ["spec.surprise"]
    with pytest.raises(BadRequest, match="Go struct field LeaseSpec.spec.leaseDurationSeconds "
                                         "of type int32"):
        decode(Lease, lease("l", leaseDurationSeconds="40"))


def with_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "namespace": "default"}}


@pytest.mark.parametrize(("spec", "causes"), [
    ({"leaseDurationSeconds": 40, "leaseTransitions": 0}, []),
    ({"leaseDurationSeconds": 0}, [("spec.leaseDurationSeconds", "FieldValueInvalid",
                                    "Invalid value: 0: must be greater than 0")]),
    ({"leaseTransitions": -1}, [("spec.leaseTransitions", "FieldValueInvalid",
                                 "Invalid value: -1: must be greater than or equal to 0")]),
    ({"preferredHolder": "b"}, [("spec.preferredHolder", "FieldValueForbidden",
                                 "Forbidden: may only be specified if `strategy` is defined")]),
    ({"strategy": "OldestEmulationVersion", "preferredHolder": "b"}, []),
    ({"strategy": "Newest"}, [("spec.strategy.strategy", "FieldValueNotSupported",
                               'Unsupported value: "Newest": supported values: '
                               '"OldestEmulationVersion"')]),
    ({"strategy": "example.com/custom"}, []),
])
def test_validate_lease(spec: dict[str, Any], causes: list[tuple[str, str, str]]) -> None:
    found = validate(RESOURCES["leases"], with_namespace(lease("l", **spec)))
    assert [(c["field"], c["reason"], c["message"]) for c in found] == causes


def test_validate_lease_names_and_updates() -> None:
    [bad_name] = validate(RESOURCES["leases"], with_namespace(lease("Node_1")))
    assert bad_name["field"] == "metadata.name"
    assert "a lowercase RFC 1123 subdomain" in bad_name["message"]
    old = with_namespace(lease("l", leaseDurationSeconds=40))
    old["metadata"]["uid"] = "u1"
    new = {**old, "metadata": {**old["metadata"], "uid": "u2"},
           "spec": {"leaseDurationSeconds": -5}}
    assert [c["field"] for c in validate_update(RESOURCES["leases"], new, old)] == [
        "metadata.uid", "spec.leaseDurationSeconds"]


# --- the apiserver ---------------------------------------------------------------------------

async def test_lease_every_verb(http: httpx.AsyncClient, etcd: Etcd) -> None:
    name = unique("lease")
    created = await http.post(LEASES, json=lease(
        name, holderIdentity="a", leaseDurationSeconds=15,
        renewTime="2025-03-04T05:06:07.123456+01:00"))
    assert created.status_code == 201, created.text
    obj = created.json()
    assert list(obj)[:2] == ["kind", "apiVersion"]
    assert (obj["kind"], obj["apiVersion"]) == ("Lease", "coordination.k8s.io/v1")
    assert obj["metadata"]["namespace"] == "default"
    assert "generation" not in obj["metadata"]  # the lease strategy keeps none
    assert obj["spec"]["renewTime"] == "2025-03-04T04:06:07.123456Z"

    # stored where kube-apiserver keeps it, with the group's apiVersion
    key = base64.b64encode(f"/registry/leases/default/{name}".encode()).decode()
    async with httpx.AsyncClient(base_url=etcd.endpoint) as raw:
        [kv] = (await raw.post("/v3/kv/range", json={"key": key})).json()["kvs"]
    stored = json.loads(base64.b64decode(kv["value"]))
    assert stored["apiVersion"] == "coordination.k8s.io/v1"
    assert "resourceVersion" not in stored["metadata"]

    got = (await http.get(f"{LEASES}/{name}")).json()
    assert got == obj
    listed = (await http.get(LEASES, params={"labelSelector": "app=groups"})).json()
    assert (listed["kind"], listed["apiVersion"]) == ("LeaseList", "coordination.k8s.io/v1")
    assert name in [item["metadata"]["name"] for item in listed["items"]]
    everywhere = (await http.get(f"{GROUP_PATH}/leases",
                                 params={"fieldSelector": f"metadata.name={name}"})).json()
    assert [item["metadata"]["namespace"] for item in everywhere["items"]] == ["default"]

    got["spec"]["holderIdentity"] = "b"
    updated = await http.put(f"{LEASES}/{name}", json=got)
    assert updated.status_code == 200, updated.text
    assert updated.json()["spec"]["holderIdentity"] == "b"
    stale = await http.put(f"{LEASES}/{name}", json=got)
    assert stale.status_code == 409
    assert stale.json()["message"] == (
        f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object '
        "has been modified; please apply your changes to the latest version and try again")
    assert stale.json()["details"] == {"name": name, "group": "coordination.k8s.io",
                                       "kind": "leases"}

    patched = await http.patch(f"{LEASES}/{name}", json={"spec": {"leaseTransitions": 1}},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"] == {"holderIdentity": "b", "leaseDurationSeconds": 15,
                                      "renewTime": "2025-03-04T04:06:07.123456Z",
                                      "leaseTransitions": 1}

    deleted = await http.delete(f"{LEASES}/{name}")
    assert deleted.status_code == 200
    assert deleted.json()["details"] == {"name": name, "group": "coordination.k8s.io",
                                         "kind": "leases", "uid": obj["metadata"]["uid"]}
    missing = await http.get(f"{LEASES}/{name}")
    assert missing.status_code == 404
    assert missing.json()["message"] == f'leases.coordination.k8s.io "{name}" not found'


async def test_lease_put_creates_and_needs_a_resource_version(http: httpx.AsyncClient) -> None:
    """The lease strategy: AllowCreateOnUpdate, but no unconditional update."""
    name = unique("put")
    created = await http.put(f"{LEASES}/{name}", json=lease(name, holderIdentity="a"))
    assert created.status_code == 201, created.text
    assert created.json()["metadata"]["uid"]
    unconditional = await http.put(f"{LEASES}/{name}", json=lease(name, holderIdentity="b"))
    assert unconditional.status_code == 422
    assert unconditional.json()["message"] == (
        f'leases.coordination.k8s.io "{name}" is invalid: metadata.resourceVersion: '
        "Invalid value: 0: must be specified for an update")
    assert unconditional.json()["details"]["kind"] == "leases"
    held = (await http.get(f"{LEASES}/{name}")).json()
    assert held["spec"]["holderIdentity"] == "a"
    await http.delete(f"{LEASES}/{name}")


async def test_lease_errors_name_the_group(http: httpx.AsyncClient) -> None:
    name = unique("bad")
    invalid = await http.post(LEASES, json=lease(name, leaseDurationSeconds=0))
    assert invalid.status_code == 422
    body = invalid.json()
    assert body["message"] == (f'Lease.coordination.k8s.io "{name}" is invalid: '
                               "spec.leaseDurationSeconds: Invalid value: 0: must be greater "
                               "than 0")
    assert (body["details"]["group"], body["details"]["kind"]) == ("coordination.k8s.io",
                                                                   "Lease")
    core_body = await http.post(LEASES, json={**lease(name), "apiVersion": "v1"})
    assert core_body.status_code == 400
    assert core_body.json()["message"] == ("the API version in the data (v1) does not match "
                                           "the expected API version (coordination.k8s.io/v1)")
    strict = await http.post(LEASES, params={"fieldValidation": "Strict"},
                             json=lease(name, holder="typo"))
    assert strict.status_code == 400
    assert strict.json()["message"] == ('Lease in version "v1" cannot be handled as a Lease: '
                                        'strict decoding error: unknown field "spec.holder"')
    warned = await http.post(LEASES, json=lease(name, holder="typo"))
    assert warned.status_code == 201
    assert warned.headers["Warning"] == '299 - "unknown field \\"spec.holder\\""'
    assert (await http.post(LEASES, json=lease(name))).status_code == 409
    selector = await http.get(LEASES, params={"fieldSelector": "spec.holderIdentity=a"})
    assert selector.status_code == 400
    assert selector.json()["message"] == ('"spec.holderIdentity" is not a known field selector: '
                                          'only "metadata.name", "metadata.namespace"')
    nowhere = await http.post(f"{GROUP_PATH}/namespaces/{unique('ns')}/leases",
                              json=lease(name))
    assert nowhere.status_code == 404
    await http.delete(f"{LEASES}/{name}")


@pytest.mark.parametrize("path", [
    "/api/v1/namespaces/default/leases",  # leases are not in the core group
    f"{GROUP_PATH}/namespaces/default/pods",  # and pods are not in coordination
    f"{GROUP_PATH}/namespaces",
    "/apis/coordination.k8s.io/v2/namespaces/default/leases",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/apps/v1/namespaces/default/leases",  # leases are not in apps
])
async def test_paths_outside_a_group_version_are_404(http: httpx.AsyncClient,
                                                     path: str) -> None:
    response = await http.get(path)
    assert response.status_code == 404
    assert response.json()["message"] == "the server could not find the requested resource"


async def watch_events(http: httpx.AsyncClient, path: str, *, accept: str = "application/json",
                       **params: str) -> AsyncIterator[dict[str, Any]]:
    async with http.stream("GET", path, params={"watch": "true", **params},
                           headers={"Accept": accept},
                           timeout=httpx.Timeout(30, read=None)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.strip():
                yield json.loads(line)


async def test_lease_watch_from_a_resource_version(http: httpx.AsyncClient) -> None:
    name = unique("watched")
    start = (await http.get(f"{GROUP_PATH}/leases"))
    since = start.json()["metadata"]["resourceVersion"]
    seen: list[tuple[str, str, str]] = []

    async def follow() -> None:
        async for event in watch_events(http, f"{GROUP_PATH}/leases", resourceVersion=since,
                                        fieldSelector=f"metadata.name={name}"):
            obj = event["object"]
            seen.append((event["type"], obj["apiVersion"], obj["spec"].get("holderIdentity")))
            if event["type"] == "DELETED":
                return

    watcher = asyncio.create_task(follow())
    created = (await http.post(LEASES, json=lease(name, holderIdentity="a"))).json()
    created["spec"]["holderIdentity"] = "b"
    assert (await http.put(f"{LEASES}/{name}", json=created)).status_code == 200
    await http.delete(f"{LEASES}/{name}")
    await asyncio.wait_for(watcher, 30)
    group_version = "coordination.k8s.io/v1"
    assert seen == [("ADDED", group_version, "a"), ("MODIFIED", group_version, "b"),
                    ("DELETED", group_version, "b")]


async def test_lease_watch_bookmarks_carry_the_group(http: httpx.AsyncClient) -> None:
    events = []
    async for event in watch_events(http, LEASES, sendInitialEvents="true",
                                    allowWatchBookmarks="true", timeoutSeconds="1",
                                    fieldSelector=f"metadata.name={unique('none')}"):
        events.append(event)
    assert events[0]["type"] == "BOOKMARK"
    assert (events[0]["object"]["kind"], events[0]["object"]["apiVersion"]) == (
        "Lease", "coordination.k8s.io/v1")


async def test_lease_table_and_table_watch(http: httpx.AsyncClient) -> None:
    name = unique("table")
    await http.post(LEASES, json=lease(name, holderIdentity="holder-1"))
    table = (await http.get(LEASES, params={"labelSelector": "app=groups"},
                            headers={"Accept": TABLE_ACCEPT})).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert [name, "holder-1"] in [row["cells"][:2] for row in table["rows"]]
    one = (await http.get(f"{LEASES}/{name}", headers={"Accept": TABLE_ACCEPT})).json()
    assert one["rows"][0]["cells"][:2] == [name, "holder-1"]
    async for event in watch_events(http, LEASES, accept=TABLE_ACCEPT, timeoutSeconds="5",
                                    fieldSelector=f"metadata.name={name}"):
        assert event["type"] == "ADDED"
        assert event["object"]["kind"] == "Table"
        assert event["object"]["rows"][0]["cells"][:2] == [name, "holder-1"]
        break
    await http.delete(f"{LEASES}/{name}")


# --- the real kubectl ------------------------------------------------------------------------

@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path / "kubectl")


async def test_kubectl_reads_leases_and_describes_a_nodes_lease(
        kubectl: Kubectl, http: httpx.AsyncClient) -> None:
    node = unique("node")
    node_obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert (await http.post("/api/v1/nodes", json=node_obj)).status_code == 201
    before = kubectl("describe", "node", node)
    assert (f'\nLease:              Failed to get lease: leases.coordination.k8s.io "{node}" '
            "not found\n") in before
    node_lease = {**lease(node, holderIdentity=node, leaseDurationSeconds=40,
                          renewTime="2025-03-04T05:06:07.123456Z"),
                  "metadata": {"name": node, "namespace": "kube-node-lease"}}
    kubectl.run("create", "-f", "-", stdin=json.dumps(node_lease))
    try:
        rows = table_lines(kubectl("get", "leases", "-A"))
        assert rows[0] == ["NAMESPACE", "NAME", "HOLDER", "AGE"]
        assert ["kube-node-lease", node, node] in [row[:3] for row in rows[1:]]
        as_yaml = kubectl("get", "lease", "-n", "kube-node-lease", node, "-o", "yaml")
        assert "apiVersion: coordination.k8s.io/v1\nkind: Lease\n" in as_yaml
        assert 'renewTime: "2025-03-04T05:06:07.123456Z"' in as_yaml
        described = kubectl("describe", "node", node)
        assert (f"Lease:\n  HolderIdentity:  {node}\n  AcquireTime:     <unset>\n"
                "  RenewTime:       Tue, 04 Mar 2025 05:06:07 +0000\n") in described
    finally:
        kubectl.run("delete", "lease", "-n", "kube-node-lease", node, check=False)
        await http.delete(f"/api/v1/nodes/{node}")
