"""EventRecorder: Event shape, repeats folded into a count, never raising."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import common.events
from common import ApiClient, EventRecorder
from common.errors import NotFound
from tests.support import ApiServer, unique

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "web", "namespace": "prod", "uid": "uid-1",
                                   "resourceVersion": "42"}}


class FakeEventsApi:
    """Just enough of the events API: POST creates, merge PATCH bumps, 404/409 as usual."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.split("/")  # /api/v1/namespaces/{ns}/events[/{name}]
        namespace = parts[4]
        self.calls.append(request.method)
        if request.method == "POST":
            assert request.headers["Content-Type"] == "application/json"
            event = json.loads(request.content)
            key = (namespace, event["metadata"]["name"])
            if key in self.events:
                return self.status(409, "AlreadyExists")
            self.events[key] = event
            return httpx.Response(201, json=event)
        if request.method == "PATCH":
            assert request.headers["Content-Type"] == "application/merge-patch+json"
            key = (namespace, parts[6])
            if key not in self.events:
                return self.status(404, "NotFound")
            self.events[key].update(json.loads(request.content))
            return httpx.Response(200, json=self.events[key])
        return self.status(405, "MethodNotAllowed")

    @staticmethod
    def status(code: int, reason: str) -> httpx.Response:
        return httpx.Response(code, json={"kind": "Status", "apiVersion": "v1",
                                          "status": "Failure", "reason": reason, "code": code,
                                          "message": reason})

    def only(self) -> dict[str, Any]:
        assert len(self.events) == 1, self.events
        return next(iter(self.events.values()))


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeEventsApi, EventRecorder]]:
    api = FakeEventsApi()
    async with ApiClient("http://127.0.0.1:6443",
                         transport=httpx.MockTransport(api.handle)) as client:
        yield api, EventRecorder(client, component="kubelet", host="node1")


async def test_first_event_is_a_full_core_v1_event(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    await recorder.event(POD, "Normal", "Pulling", 'Pulling image "nginx:1.15"',
                         field_path="spec.containers{nginx}")
    event = api.only()
    assert re.fullmatch(r"web\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == "prod"
    assert event["involvedObject"] == {
        "kind": "Pod", "namespace": "prod", "name": "web", "uid": "uid-1", "apiVersion": "v1",
        "resourceVersion": "42", "fieldPath": "spec.containers{nginx}"}
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal", "Pulling", 'Pulling image "nginx:1.15"')
    assert event["source"] == {"component": "kubelet", "host": "node1"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("kubelet", "node1")
    assert event["count"] == 1
    assert TIMESTAMP.match(event["firstTimestamp"])
    assert TIMESTAMP.match(event["lastTimestamp"])
    assert (event["apiVersion"], event["kind"]) == ("v1", "Event")


async def test_a_repeat_bumps_count_and_last_timestamp(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    for _ in range(3):
        await recorder.event(POD, "Warning", "BackOff", "Back-off restarting failed container")
    event = api.only()
    assert event["count"] == 3
    assert TIMESTAMP.match(event["lastTimestamp"])
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    assert api.calls == ["POST", "PATCH", "PATCH"]


async def test_a_new_resource_version_is_still_the_same_event(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    await recorder.event(POD, "Normal", "Started", "Started container app")
    later = {**POD, "metadata": {**POD["metadata"], "resourceVersion": "43"}}
    await recorder.event(later, "Normal", "Started", "Started container app")
    assert api.only()["count"] == 2


@pytest.mark.parametrize("different", [
    {"message": "Started container other"},
    {"reason": "Created"},
    {"type_": "Warning"},
    {"obj": {**POD, "metadata": {**POD["metadata"], "uid": "uid-2"}}},
])
async def test_anything_else_different_is_a_new_event(
        fake: tuple[FakeEventsApi, EventRecorder], different: dict[str, Any]) -> None:
    api, recorder = fake
    first: dict[str, Any] = {"obj": POD, "type_": "Normal", "reason": "Started",
                             "message": "Started container app"}
    await recorder.event(**first)
    await recorder.event(**{**first, **different})
    assert [e["count"] for e in api.events.values()] == [1, 1]
    assert api.calls == ["POST", "POST"]


async def test_an_expired_event_is_written_again(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    await recorder.event(POD, "Normal", "Pulled", "already present")
    await recorder.event(POD, "Normal", "Pulled", "already present")
    first = api.only()
    api.events.clear()  # the event TTL ran out
    await recorder.event(POD, "Normal", "Pulled", "already present")
    again = api.only()
    assert api.calls == ["POST", "PATCH", "PATCH", "POST"]
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert again["count"] == 3
    assert again["firstTimestamp"] == first["firstTimestamp"]


async def test_concurrent_repeats_are_counted_once_each(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    await asyncio.gather(*(recorder.event(POD, "Normal", "Killing", "Stopping container app")
                           for _ in range(5)))
    assert api.only()["count"] == 5
    assert api.calls == ["POST"] + ["PATCH"] * 4


async def test_cluster_scoped_objects_get_events_in_default(
        fake: tuple[FakeEventsApi, EventRecorder]) -> None:
    api, recorder = fake
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node1", "uid": "n-1"}}
    await recorder.event(node, "Normal", "NodeReady", "Node node1 status is now: NodeReady")
    ((namespace, _), event), = api.events.items()
    assert namespace == "default"
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]


async def test_the_cache_forgets_the_least_recently_used(
        fake: tuple[FakeEventsApi, EventRecorder], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common.events, "MAX_CACHE_ENTRIES", 2)
    api, recorder = fake
    for reason in ("A", "B", "A", "C"):  # C evicts B, the least recently used
        await recorder.event(POD, "Normal", reason, "m")
    await recorder.event(POD, "Normal", "A", "m")  # still cached: a bump
    await recorder.event(POD, "Normal", "B", "m")  # forgotten: a new Event
    assert api.calls == ["POST", "POST", "PATCH", "POST", "PATCH", "POST"]
    assert sorted((e["reason"], e["count"]) for e in api.events.values()) == [
        ("A", 3), ("B", 1), ("B", 1), ("C", 1)]


async def test_failures_are_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with ApiClient("http://127.0.0.1:6443",
                         transport=httpx.MockTransport(refuse)) as client:
        recorder = EventRecorder(client, component="default-scheduler")
        with caplog.at_level(logging.WARNING, logger="common.events"):
            await recorder.event(POD, "Normal", "Scheduled", "Successfully assigned prod/web")
    assert "could not record Event(Pod prod/web)" in caplog.text
    assert "ConnectError" in caplog.text


# -- against the real apiserver ---------------------------------------------------------


async def test_repeats_against_the_apiserver(apiserver: ApiServer) -> None:
    name = unique("evt")
    async with ApiClient(apiserver.connection(), timeout=10) as client:
        pod = await client.create("pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
        recorder = EventRecorder(client, component="default-scheduler")
        message = f"Successfully assigned default/{name} to node2"
        await recorder.event(pod, "Normal", "Scheduled", message)
        await recorder.event(pod, "Normal", "Scheduled", message)

        # What `kubectl describe pod` asks for.
        selector = (f"involvedObject.name={name},involvedObject.namespace=default,"
                    f"involvedObject.uid={pod['metadata']['uid']}")
        events = (await client.list("events", namespace="default",
                                    field_selector=selector))["items"]
        assert len(events) == 1
        event = events[0]
        assert (event["count"], event["reason"], event["message"]) == (2, "Scheduled", message)
        assert event["source"] == {"component": "default-scheduler"}
        assert event["involvedObject"]["kind"] == "Pod"

        await client.delete("events", event["metadata"]["name"], namespace="default")
        with pytest.raises(NotFound):
            await client.get("events", event["metadata"]["name"], namespace="default")
        await recorder.event(pod, "Normal", "Scheduled", message)
        again = await client.get("events", event["metadata"]["name"], namespace="default")
        assert again["count"] == 3
        await client.delete("pods", name, namespace="default", grace_period_seconds=0)
