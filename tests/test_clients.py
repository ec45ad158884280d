"""The Python clients users run, against a real apiserver: kr8s (pods, watch,
events.k8s.io/v1, deletecollection) and kubernetes_asyncio (events.k8s.io/v1,
deletecollection). The official sync client and lightkube have theirs in
test_delete_collection.py and test_events_v1.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kr8s
import kr8s.asyncio
import kubernetes_asyncio
import pytest
from kr8s.asyncio.objects import Pod, new_class

from tests.support import ApiServer, unique

# kr8s warns that it was not tested against the Kubernetes version kubelite reports
pytestmark = pytest.mark.filterwarnings("ignore:Kubernetes version")

IMAGE = "kubelite/busybox:1.35"
EventV1 = new_class("Event", "events.k8s.io/v1", namespaced=True)


def pod_manifest(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "app", "image": IMAGE}]}}


def event_v1(name: str, regarding: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
            "reason": "Pulled", "action": "Pulling", "note": "pulled the image",
            "reportingController": "example.com/puller", "reportingInstance": "puller-1",
            "regarding": {"kind": "Pod", "namespace": "default", "name": regarding}}


@pytest.fixture
async def api(apiserver: ApiServer, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    # kr8s reads ~/.kube/config when it has one: an empty home keeps it to our kubeconfig
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    config = apiserver.kubeconfig(tmp_path / "kubeconfig")
    yield await kr8s.asyncio.api(kubeconfig=str(config), namespace="default")


# -- kr8s --------------------------------------------------------------------------------------


async def test_kr8s_pods_create_get_list_delete(api: Any) -> None:
    tag = unique("kr8s")
    name = f"{tag}-a"
    pod = await Pod(pod_manifest(name, {"suite": tag}), api=api)
    await pod.create()
    assert pod.metadata.uid and pod.spec.restartPolicy == "Always"
    fetched = await Pod.get(name, namespace="default", api=api)
    assert fetched.metadata.uid == pod.metadata.uid
    listed = [p async for p in api.get("pods", namespace="default",
                                      label_selector={"suite": tag})]
    assert [p.name for p in listed] == [name]
    assert await pod.exists()
    await pod.patch({"metadata": {"labels": {"patched": "yes"}}})
    await pod.refresh()
    assert pod.labels["patched"] == "yes"
    await pod.delete(force=True)
    assert not await pod.exists()


async def test_kr8s_watch_sees_a_pod_come_and_go(api: Any) -> None:
    tag = unique("kr8sw")
    name = f"{tag}-w"
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for event, obj in api.watch("pods", namespace="default",
                                          label_selector={"suite": tag}):
            seen.append((event, obj.name))
            if event == "DELETED":
                return

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before anything happens
    pod = await Pod(pod_manifest(name, {"suite": tag}), api=api)
    await pod.create()
    await pod.delete(force=True)
    await asyncio.wait_for(task, 30)
    assert seen[0] == ("ADDED", name) and seen[-1] == ("DELETED", name)


async def test_kr8s_events_v1(api: Any) -> None:
    name = unique("kr8s-event")
    event = await EventV1(event_v1(name, "web"), api=api)
    await event.create()
    assert event.raw["apiVersion"] == "events.k8s.io/v1"
    assert event.raw["regarding"]["name"] == "web"
    fetched = await EventV1.get(name, namespace="default", api=api)
    assert fetched.raw["note"] == "pulled the image"
    listed = [e.name async for e in api.get(EventV1, namespace="default")]
    assert name in listed
    # the same Event through the kind's full name, as `kr8s get` resolves it from discovery
    by_name = [e async for e in api.get("events.events.k8s.io", name, namespace="default")]
    assert [e.raw["reportingController"] for e in by_name] == ["example.com/puller"]
    await event.delete()
    assert not await event.exists()


async def test_kr8s_deletecollection_through_its_raw_api_call(api: Any) -> None:
    """kr8s has no deletecollection of its own; its raw call reaches the collection."""
    tag = unique("kr8sdc")
    for i in range(3):
        await (await Pod(pod_manifest(f"{tag}-{i}", {"suite": tag, "keep": str(i == 2)}),
                         api=api)).create()
    async with api.call_api("DELETE", url="pods", namespace="default",
                            params={"labelSelector": f"suite={tag},keep=False",
                                    "gracePeriodSeconds": "0"}) as response:
        deleted = response.json()
    assert deleted["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in deleted["items"]) == [f"{tag}-0", f"{tag}-1"]
    left = [p.name async for p in api.get("pods", namespace="default",
                                         label_selector={"suite": tag})]
    assert left == [f"{tag}-2"]


# -- kubernetes_asyncio ------------------------------------------------------------------------


@pytest.fixture
async def asyncio_client(apiserver: ApiServer) -> AsyncIterator[Any]:
    configuration = kubernetes_asyncio.client.Configuration()
    apiserver.configure(configuration)
    async with kubernetes_asyncio.client.ApiClient(configuration) as client:
        yield client


async def test_kubernetes_asyncio_events_v1(asyncio_client: Any) -> None:
    api = kubernetes_asyncio.client.EventsV1Api(asyncio_client)
    name = unique("kasync-event")
    created = await api.create_namespaced_event("default", event_v1(name, "db"))
    assert (created.reason, created.regarding.name) == ("Pulled", "db")
    read = await api.read_namespaced_event(name, "default")
    assert read.reporting_controller == "example.com/puller"
    listed = await api.list_namespaced_event("default", field_selector=f"metadata.name={name}")
    assert [e.metadata.name for e in listed.items] == [name]
    patched = await api.patch_namespaced_event(
        name, "default", {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}})
    assert patched.series.count == 2
    await api.delete_namespaced_event(name, "default")
    listed = await api.list_namespaced_event("default", field_selector=f"metadata.name={name}")
    assert listed.items == []


async def test_kubernetes_asyncio_deletecollection(asyncio_client: Any) -> None:
    core = kubernetes_asyncio.client.CoreV1Api(asyncio_client)
    events = kubernetes_asyncio.client.EventsV1Api(asyncio_client)
    tag = unique("kasyncdc")
    for i in range(2):
        await core.create_namespaced_pod("default", pod_manifest(f"{tag}-{i}", {"suite": tag}))
        event = event_v1(f"{tag}-{i}", f"{tag}-{i}")
        event["metadata"]["labels"] = {"suite": tag}
        await events.create_namespaced_event("default", event)
    # the client types the answer as a Status (kube sends the deleted list): not read here
    await core.delete_collection_namespaced_pod("default", label_selector=f"suite={tag}",
                                                dry_run="All")
    pods = await core.list_namespaced_pod("default", label_selector=f"suite={tag}")
    assert len(pods.items) == 2
    await core.delete_collection_namespaced_pod("default", label_selector=f"suite={tag}",
                                                grace_period_seconds=0)
    pods = await core.list_namespaced_pod("default", label_selector=f"suite={tag}")
    assert pods.items == []
    await events.delete_collection_namespaced_event("default", label_selector=f"suite={tag}")
    left = await events.list_namespaced_event("default", label_selector=f"suite={tag}")
    assert left.items == []
