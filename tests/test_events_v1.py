"""events.k8s.io/v1: the same Events as core/v1, under other names, through every verb."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import lightkube
import pytest
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.events_v1 import Event

from apiserver.resources.events_v1 import from_core, to_core
from tests.support import ApiServer, Kubectl, table_lines, unique

V1 = "/apis/events.k8s.io/v1"
CORE = "/api/v1"


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def v1_event(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": now_micro(), "reportingController": "example.com/controller",
            "reportingInstance": "controller-1", "action": "Reconcile", "reason": "Synced",
            "type": "Normal", "note": "all good",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "web",
                          "apiVersion": "v1"}, **extra}


# --- the conversion, pure ------------------------------------------------------------------

def test_conversion_renames_as_kube_does() -> None:
    stored = to_core(v1_event("e", deprecatedCount=3,
                              deprecatedSource={"component": "kubelet", "host": "node1"}))
    assert stored["apiVersion"] == "v1"
    assert stored["message"] == "all good"
    assert stored["involvedObject"]["name"] == "web"
    assert stored["reportingComponent"] == "example.com/controller"
    assert stored["reportingInstance"] == "controller-1"
    assert stored["source"] == {"component": "kubelet", "host": "node1"}
    assert stored["count"] == 3
    assert not {"note", "regarding", "reportingController", "deprecatedSource",
                "deprecatedCount"} & stored.keys()


def test_a_legacy_event_in_v1_terms() -> None:
    legacy = {"kind": "Event", "apiVersion": "v1",
              "metadata": {"name": "web.1", "namespace": "default"},
              "involvedObject": {"kind": "Pod", "name": "web"}, "reason": "Started",
              "message": "Started container web", "source": {"component": "kubelet"},
              "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:01:00Z",
              "count": 2, "type": "Normal"}
    served = from_core(legacy)
    # Go writes every field without omitempty, and structs even with it: in struct order
    assert list(served) == ["kind", "apiVersion", "metadata", "eventTime", "reason",
                            "regarding", "note", "type", "deprecatedSource",
                            "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
                            "deprecatedCount"]
    assert served["eventTime"] is None
    assert served["deprecatedCount"] == 2
    assert served["apiVersion"] == "events.k8s.io/v1"
    assert to_core(served) == legacy  # and back, the zero values dropped


# --- through the apiserver -------------------------------------------------------------------

async def test_one_event_two_apis(http: httpx.AsyncClient) -> None:
    name = unique("ev1")
    created = await http.post(f"{V1}/namespaces/default/events", json=v1_event(name))
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["apiVersion"], body["note"], body["reportingController"]) == (
        "events.k8s.io/v1", "all good", "example.com/controller")
    assert body["deprecatedSource"] == {} and body["deprecatedFirstTimestamp"] is None
    core = (await http.get(f"{CORE}/namespaces/default/events/{name}")).json()
    assert (core["apiVersion"], core["message"], core["reportingComponent"]) == (
        "v1", "all good", "example.com/controller")
    assert core["involvedObject"]["name"] == "web"
    assert core["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    got = (await http.get(f"{V1}/namespaces/default/events/{name}")).json()
    assert got == body

    listed = (await http.get(f"{V1}/namespaces/default/events")).json()
    assert (listed["kind"], listed["apiVersion"]) == ("EventList", "events.k8s.io/v1")
    [item] = [i for i in listed["items"] if i["metadata"]["name"] == name] or [listed]
    assert item == body
    selected = (await http.get(f"{V1}/events", params={
        "fieldSelector": f"involvedObject.name=web,metadata.name={name}"})).json()
    assert [i["metadata"]["name"] for i in selected["items"]] == [name]

    deleted = await http.delete(f"{V1}/namespaces/default/events/{name}")
    assert deleted.status_code == 200
    assert deleted.json()["details"] == {"name": name, "group": "events.k8s.io",
                                         "kind": "events", "uid": body["metadata"]["uid"]}
    missing = await http.get(f"{CORE}/namespaces/default/events/{name}")
    assert missing.status_code == 404
    missing = await http.get(f"{V1}/namespaces/default/events/{name}")
    assert missing.json()["message"] == f'events.events.k8s.io "{name}" not found'


async def test_a_core_event_read_as_v1(http: httpx.AsyncClient) -> None:
    name = unique("legacy")
    event = {"metadata": {"name": name},
             "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
             "reason": "Started", "message": "Started container", "type": "Normal",
             "source": {"component": "kubelet", "host": "node1"},
             "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:00:00Z",
             "count": 1}
    (await http.post(f"{CORE}/namespaces/default/events", json=event)).raise_for_status()
    served = (await http.get(f"{V1}/namespaces/default/events/{name}")).json()
    assert served["deprecatedSource"] == {"component": "kubelet", "host": "node1"}
    assert served["deprecatedFirstTimestamp"] == "2025-01-01T00:00:00Z"
    assert (served["deprecatedCount"], served["note"], served["eventTime"]) == (
        1, "Started container", None)
    await http.delete(f"{CORE}/namespaces/default/events/{name}")


async def test_update_and_patch_through_v1(http: httpx.AsyncClient) -> None:
    name = unique("series")
    body = (await http.post(f"{V1}/namespaces/default/events", json=v1_event(name))).json()
    body["series"] = {"count": 2, "lastObservedTime": now_micro()}
    updated = await http.put(f"{V1}/namespaces/default/events/{name}", json=body)
    assert updated.status_code == 200, updated.text
    assert updated.json()["series"]["count"] == 2
    patched = await http.patch(
        f"{V1}/namespaces/default/events/{name}",
        json={"series": {"count": 3, "lastObservedTime": now_micro()}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["series"]["count"] == 3
    assert patched.json()["note"] == "all good"
    core = (await http.get(f"{CORE}/namespaces/default/events/{name}")).json()
    assert core["series"]["count"] == 3 and core["message"] == "all good"
    # what an events.k8s.io/v1 update may not change
    refused = await http.patch(f"{V1}/namespaces/default/events/{name}",
                               json={"note": "changed", "reason": "Other"},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert refused.status_code == 422
    assert [c["field"] for c in refused.json()["details"]["causes"]] == ["reason", "message"]
    assert refused.json()["details"]["kind"] == "Event"
    assert refused.json()["details"]["group"] == "events.k8s.io"
    # ... while core/v1 lets it (legacy validation only)
    allowed = await http.patch(f"{CORE}/namespaces/default/events/{name}",
                               json={"message": "changed"},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert allowed.status_code == 200, allowed.text
    await http.delete(f"{V1}/namespaces/default/events/{name}")


@pytest.mark.parametrize(("change", "fields"), [
    ({"eventTime": None}, ["eventTime"]),
    ({"type": "Odd"}, ["type"]),
    # required, and IsQualifiedName says so twice (empty name part, regex)
    ({"reportingController": ""}, ["reportingController"] * 3),
    ({"reportingInstance": None, "action": None}, ["reportingInstance", "action"]),
    ({"deprecatedCount": 2, "deprecatedSource": {"component": "x"}}, ["count", "source"]),
    ({"series": {"count": 1}}, ["series.count", "series.lastObservedTime"]),
])
async def test_v1_validation(http: httpx.AsyncClient, change: dict[str, Any],
                             fields: list[str]) -> None:
    event = {**v1_event(unique("bad")), **change}
    refused = await http.post(f"{V1}/namespaces/default/events", json=event)
    assert refused.status_code == 422, refused.text
    status = refused.json()
    assert sorted(c["field"] for c in status["details"]["causes"]) == sorted(fields)
    assert status["message"].startswith(f'Event.events.k8s.io "{event["metadata"]["name"]}" '
                                        f'is invalid: ')


async def test_watch_through_v1(http: httpx.AsyncClient, apiserver: ApiServer) -> None:
    name = unique("watched")
    start = (await http.get(f"{V1}/namespaces/default/events")).json()
    rv = start["metadata"]["resourceVersion"]
    async with apiserver.client(timeout=30) as watcher:
        async with watcher.stream("GET", f"{V1}/namespaces/default/events", params={
                "watch": "true", "resourceVersion": rv, "timeoutSeconds": "10"}) as stream:
            await http.post(f"{CORE}/namespaces/default/events", json={
                "metadata": {"name": name}, "reason": "Pulled", "message": "pulled",
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
                "source": {"component": "kubelet"}, "type": "Normal"})
            await http.delete(f"{CORE}/namespaces/default/events/{name}")
            seen: list[tuple[str, str, str]] = []
            lines = stream.aiter_lines()
            while len(seen) < 2:
                event = json.loads(await asyncio.wait_for(anext(lines), 10))
                obj = event["object"]
                if obj["metadata"]["name"] == name:
                    seen.append((event["type"], obj["apiVersion"], obj["note"]))
    assert seen == [("ADDED", "events.k8s.io/v1", "pulled"),
                    ("DELETED", "events.k8s.io/v1", "pulled")]


async def test_table_of_v1_events(http: httpx.AsyncClient) -> None:
    name = unique("table")
    (await http.post(f"{V1}/namespaces/default/events", json=v1_event(name))).raise_for_status()
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
    table = (await http.get(f"{V1}/namespaces/default/events/{name}",
                            headers={"Accept": accept},
                            params={"includeObject": "Object"})).json()
    assert [c["name"] for c in table["columnDefinitions"]][:4] == [
        "Last Seen", "Type", "Reason", "Object"]
    [row] = table["rows"]
    assert row["cells"][1:4] == ["Normal", "Synced", "pod/web"]
    assert row["cells"][5] == "example.com/controller, controller-1"
    assert row["object"]["apiVersion"] == "events.k8s.io/v1"
    await http.delete(f"{V1}/namespaces/default/events/{name}")


# --- clients ---------------------------------------------------------------------------------

@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver, tmp_path / "kubectl")


async def test_kubectl_get_and_events(kubectl: Kubectl, http: httpx.AsyncClient) -> None:
    name = unique("kubectl")
    (await http.post(f"{V1}/namespaces/default/events", json=v1_event(name))).raise_for_status()
    try:
        header, *rows = table_lines(kubectl("get", "events.v1.events.k8s.io",
                                            "--field-selector", f"metadata.name={name}"))
        assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        assert [row[1:] for row in rows] == [["Normal", "Synced", "pod/web", "all good"]]
        as_yaml = kubectl("get", "events.v1.events.k8s.io", name, "-o", "json")
        assert json.loads(as_yaml)["note"] == "all good"
        events = kubectl("events", "--for", "pod/web")
        assert any("Synced" in line and "all good" in line for line in events.splitlines())
    finally:
        await http.delete(f"{V1}/namespaces/default/events/{name}")


def test_official_python_client(apiserver: ApiServer) -> None:
    configuration = kubernetes.client.Configuration()
    apiserver.configure(configuration)
    with kubernetes.client.ApiClient(configuration) as api_client:
        api = kubernetes.client.EventsV1Api(api_client)
        name = unique("pyclient")
        body = kubernetes.client.EventsV1Event(
            metadata=kubernetes.client.V1ObjectMeta(name=name),
            event_time=datetime.now(UTC), reporting_controller="example.com/py",
            reporting_instance="py-1", action="Test", reason="Tested", type="Warning",
            note="from python",
            regarding=kubernetes.client.V1ObjectReference(kind="Node", name="node1"))
        created = api.create_namespaced_event("default", body)
        assert created.note == "from python"
        assert created.regarding.name == "node1"
        read = api.read_namespaced_event(name, "default")
        assert read.reporting_controller == "example.com/py"
        listed = api.list_namespaced_event(
            "default", field_selector=f"metadata.name={name}")
        assert [e.metadata.name for e in listed.items] == [name]
        patched = api.patch_namespaced_event(name, "default", {
            "series": {"count": 2, "lastObservedTime": now_micro()}})
        assert patched.series.count == 2
        core = kubernetes.client.CoreV1Api(api_client).read_namespaced_event(name, "default")
        assert (core.message, core.reporting_component) == ("from python", "example.com/py")
        status = api.delete_namespaced_event(name, "default")  # an `object`: the dict
        assert status["status"] == "Success"
        resources = api.get_api_resources()
        assert [r.name for r in resources.resources] == ["events"]


def test_lightkube(apiserver: ApiServer) -> None:
    config = lightkube.KubeConfig.from_dict(apiserver.config_dict())
    client = lightkube.Client(config=config)
    name = unique("lightkube")
    created = client.create(Event(
        metadata=ObjectMeta(name=name, namespace="default"),
        eventTime=datetime.now(UTC), reportingController="example.com/lk",
        reportingInstance="lk-1", action="Test", reason="Tested", type="Normal", note="lk",
        regarding=ObjectReference(kind="Pod", name="web", namespace="default")))
    assert created.note == "lk"
    got = client.get(Event, name, namespace="default")
    assert got.reportingController == "example.com/lk"
    names = [e.metadata.name for e in client.list(Event, namespace="default",
                                                   fields={"metadata.name": name})]
    assert names == [name]
    client.delete(Event, name, namespace="default")


async def test_deletecollection_through_v1(http: httpx.AsyncClient) -> None:
    names = [unique("bulk"), unique("bulk")]
    for name in names:
        event = v1_event(name)
        event["regarding"]["name"] = "bulk-target"
        (await http.post(f"{V1}/namespaces/default/events", json=event)).raise_for_status()
    deleted = await http.delete(f"{V1}/namespaces/default/events",
                                params={"fieldSelector": "involvedObject.name=bulk-target"})
    assert deleted.status_code == 200, deleted.text
    body = deleted.json()
    assert (body["kind"], body["apiVersion"]) == ("EventList", "events.k8s.io/v1")
    assert sorted(i["metadata"]["name"] for i in body["items"]) == sorted(names)
    assert {i["note"] for i in body["items"]} == {"all good"}
    left = (await http.get(f"{CORE}/namespaces/default/events",
                           params={"fieldSelector": "involvedObject.name=bulk-target"})).json()
    assert left["items"] == []
