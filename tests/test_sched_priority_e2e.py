"""Preemption end to end: a real scheduler process against its own apiserver and etcd,
two API-only Nodes of one cpu each, filled by a low- and a middle-priority pod; a
high-priority pod preempts the low one only (kube's pick: the lowest highest-victim
priority), which gets the DisruptionTarget condition and the `Preempted` event, and takes
its node. A `preemptionPolicy: Never` pod of the same priority waits, in kube's words."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from common.client import GROUP_VERSIONS, ApiClient
from common.errors import NotFound
from tests.support import ApiServer, Etcd, SchedulerProcess, eventually, unique


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    workdir = tmp_path_factory.mktemp("priority-e2e")
    etcd = Etcd(workdir).start()
    server = ApiServer(etcd, workdir).start()
    scheduler = SchedulerProcess(server, workdir, port=0).start()
    yield server
    scheduler.stop()
    server.stop()
    etcd.stop()


@pytest.fixture
async def api(cluster: ApiServer) -> AsyncIterator[ApiClient]:
    async with ApiClient(cluster.connection(), group_versions={
            **GROUP_VERSIONS, "priorityclasses": "scheduling.k8s.io/v1"}) as client:
        yield client


def pod(name: str, priority_class: str, *, grace: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"priorityClassName": priority_class,
                     "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "app", "image": "busybox:1.36",
                                     "resources": {"requests": {"cpu": "800m"}}}]}}


async def node_of(api: ApiClient, name: str) -> str | None:
    try:
        got = await api.get("pods", name, namespace="default")
    except NotFound:
        return None
    return (got.get("spec") or {}).get("nodeName") or None


async def events_of(api: ApiClient, name: str) -> list[dict[str, Any]]:
    listed = await api.list("events", namespace="default",
                            field_selector=f"involvedObject.name={name}")
    return list(listed.get("items") or [])


async def test_high_priority_pod_preempts_the_least_important(api: ApiClient) -> None:
    suffix = unique("p")
    classes = {"low": 1000, "mid": 5000, "high": 1_000_000}
    for level, value in classes.items():
        await api.create("priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"{level}-{suffix}"}, "value": value})
    await api.create("priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": f"never-{suffix}"}, "value": 1_000_000,
        "preemptionPolicy": "Never"})
    nodes = [f"a-{suffix}", f"b-{suffix}"]
    status = {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    for name in nodes:
        await api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": name}, "status": status})
        await api.patch("nodes", name, {"status": status}, subresource="status")

    low, mid, high, polite = (f"{level}-{suffix}" for level in ("low", "mid", "high", "polite"))
    await api.create("pods", pod(low, f"low-{suffix}"), namespace="default")
    low_node = await eventually(lambda: node_of(api, low), timeout=30, what="low bound")
    await api.create("pods", pod(mid, f"mid-{suffix}"), namespace="default")
    mid_node = await eventually(lambda: node_of(api, mid), timeout=30, what="mid bound")
    assert {low_node, mid_node} == set(nodes)

    # Never-preempting first: it waits, and nothing is preempted for it.
    await api.create("pods", pod(polite, f"never-{suffix}"), namespace="default")

    async def polite_failed() -> str | None:
        messages = [e["message"] for e in await events_of(api, polite)
                    if e["reason"] == "FailedScheduling"]
        return messages[-1] if messages else None
    assert await eventually(polite_failed, timeout=30, what="polite's FailedScheduling") == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never..")
    assert await node_of(api, low) == low_node

    created = await api.create("pods", pod(high, f"high-{suffix}"), namespace="default")
    assert created["spec"]["priority"] == 1_000_000
    # The low pod goes (grace 0: at once), the middle one stays; high takes low's node.
    assert await eventually(lambda: node_of(api, high), timeout=30,
                            what="high bound") == low_node
    assert await node_of(api, low) is None
    assert await node_of(api, mid) == mid_node
    preempted = [e for e in await events_of(api, low) if e["reason"] == "Preempted"]
    assert [(e["type"], e["message"]) for e in preempted] == [
        ("Normal", f"Preempted by pod {created['metadata']['uid']} on node {low_node}")]
    bound = await api.get("pods", high, namespace="default")
    assert "nominatedNodeName" not in bound["status"]  # binding cleared it
    # polite (same priority, Never) is still waiting: it preempted nobody.
    assert await node_of(api, polite) is None


async def test_a_more_important_preemptor_takes_a_nominated_pods_room(api: ApiClient) -> None:
    """A pod nominated to a node (its victim still terminating: there is no kubelet to
    end it) loses that nomination when a more important pod preempts on the same node,
    as kube's prepareCandidate clears the lower-priority nominations there."""
    suffix = unique("n")
    for level, value in {"bottom": 10, "middle": 2000, "top": 2_000_000}.items():
        await api.create("priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"{level}-{suffix}"}, "value": value})
    node = f"c-{suffix}"
    status = {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    # tainted, so that the earlier test's waiting pod does not take it
    await api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": node, "labels": {"only": suffix}},
                               "spec": {"taints": [{"key": "only", "value": suffix,
                                                    "effect": "NoSchedule"}]}})
    await api.patch("nodes", node, {"status": status}, subresource="status")

    def on_node(name: str, level: str) -> dict[str, Any]:
        body = pod(name, f"{level}-{suffix}", grace=300)  # stays Terminating, no kubelet
        body["spec"]["nodeSelector"] = {"only": suffix}
        body["spec"]["tolerations"] = [{"key": "only", "value": suffix,
                                        "effect": "NoSchedule"}]
        return body

    bottom, middle, top = (f"{level}-{suffix}" for level in ("bottom", "middle", "top"))
    await api.create("pods", on_node(bottom, "bottom"), namespace="default")
    assert await eventually(lambda: node_of(api, bottom), timeout=30,
                            what="bottom bound") == node

    async def nominated(name: str) -> str | None:
        got = await api.get("pods", name, namespace="default")
        return (got.get("status") or {}).get("nominatedNodeName")

    await api.create("pods", on_node(middle, "middle"), namespace="default")
    assert await eventually(lambda: nominated(middle), timeout=30,
                            what="middle nominated") == node
    await api.create("pods", on_node(top, "top"), namespace="default")
    assert await eventually(lambda: nominated(top), timeout=30, what="top nominated") == node

    async def middle_released() -> bool:
        return await nominated(middle) is None
    await eventually(middle_released, timeout=30, what="middle's nomination cleared")
    assert await node_of(api, middle) is None and await node_of(api, top) is None
