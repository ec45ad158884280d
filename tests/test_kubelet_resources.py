"""Node resources and their enforcement (issue 13, "Nodes and the kubelet").

Pure tables (in the style of kube's `*_test.go`) for the cgroup arithmetic
(`pkg/kubelet/cm/helpers_linux_test.go`), the QoS class (`qos_test.go`), the flags'
syntax and allocatable (`node_container_manager_linux_test.go`); then real kubelets on
real Docker: the Node's capacity and allocatable, limits reaching Docker, `OOMKilled`,
and `kubectl describe node`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from kubelet.allocatable import (
    DECLARABLE,
    DEFAULT_EVICTION_HARD,
    RESERVABLE,
    Threshold,
    allocatable,
    binary_bytes,
    eviction_reservation,
    parse_eviction_thresholds,
    parse_resource_list,
    quantity_strings,
)
from kubelet.docker import container_create_body
from kubelet.docker.runtime import may_await_oom_flag
from kubelet.qos import oom_score_adj, pod_qos_class
from kubelet.resources import container_resources, milli_cpu_to_quota, milli_cpu_to_shares
from kubelet.status import generate_pod_status
from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    inspect_container,
    remove_node_containers,
)
from tests.support import ApiServer, Kubectl, eventually, unique
from tests.test_kubelet import create_pod, get_pod, pod_manifest, shell
from tests.test_kubelet_status import instance

D = Decimal
GI, MI = 2**30, 2**20


# --- cgroup values from requests and limits ----------------------------------------------

@pytest.mark.parametrize(("milli", "shares"), [
    (0, 2), (1, 2), (2, 2), (250, 256), (1000, 1024), (1500, 1536), (256000, 262144),
    (300000, 262144)])
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(("milli", "quota"), [
    (0, 0), (5, 1000), (9, 1000), (10, 1000), (200, 20000), (500, 50000), (1000, 100000),
    (1500, 150000)])
def test_milli_cpu_to_quota(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(("name", "resources", "expected"), [
    ("nothing: the minimum shares", {}, {"CpuShares": 2}),
    ("a cpu request: shares only", {"requests": {"cpu": "500m"}}, {"CpuShares": 512}),
    ("a cpu limit alone: shares from it, and a quota", {"limits": {"cpu": "1"}},
     {"CpuShares": 1024, "CpuQuota": 100000, "CpuPeriod": 100000}),
    ("request and limit", {"requests": {"cpu": "100m"}, "limits": {"cpu": "2"}},
     {"CpuShares": 102, "CpuQuota": 200000, "CpuPeriod": 100000}),
    ("a memory limit, no swap", {"limits": {"memory": "16Mi"}},
     {"CpuShares": 2, "Memory": 16 * MI, "MemorySwap": 16 * MI}),
    ("a memory request is no cgroup limit", {"requests": {"memory": "1Gi"}}, {"CpuShares": 2}),
])
def test_container_resources(name: str, resources: dict[str, Any],
                             expected: dict[str, int]) -> None:
    assert container_resources({"name": "c", "resources": resources}) == expected, name


# --- QoS -----------------------------------------------------------------------------------

def _pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": r}
                                           for i, r in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "resources": r} for i, r in enumerate(init)]
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec}


def _rl(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    return {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}


GUARANTEED = {"requests": _rl("100m", "100Mi"), "limits": _rl("100m", "100Mi")}


@pytest.mark.parametrize(("name", "pod", "qos"), [
    ("no resources", _pod({}), "BestEffort"),
    ("only other resources", _pod({"requests": {"ephemeral-storage": "1Gi"}}), "BestEffort"),
    ("zero requests do not count", _pod({"requests": _rl("0", "0")}), "BestEffort"),
    ("requests equal limits", _pod(GUARANTEED, GUARANTEED), "Guaranteed"),
    ("a cpu request only", _pod({"requests": _rl("100m")}), "Burstable"),
    ("one container best-effort", _pod(GUARANTEED, {}), "Burstable"),
    ("requests below limits", _pod({"requests": _rl("50m", "100Mi"),
                                    "limits": _rl("100m", "100Mi")}), "Burstable"),
    ("a cpu limit only", _pod({"requests": _rl("100m"), "limits": _rl("100m")}), "Burstable"),
    ("limits without requests (before defaulting)", _pod({"limits": _rl("100m", "100Mi")}),
     "Burstable"),
    ("init containers count", _pod(GUARANTEED, init=({},)), "Burstable"),
    ("guaranteed init containers too", _pod(GUARANTEED, init=(GUARANTEED,)), "Guaranteed"),
    ("sums compare, not containers", _pod({"requests": _rl("100m", "100Mi"),
                                           "limits": _rl("200m", "100Mi")},
                                          {"requests": _rl("100m", "100Mi"),
                                           "limits": _rl("100m", "100Mi")}), "Burstable"),
])
def test_pod_qos_class(name: str, pod: dict[str, Any], qos: str) -> None:
    assert pod_qos_class(pod) == qos, name


@pytest.mark.parametrize(("name", "pod", "adj"), [
    ("guaranteed", _pod(GUARANTEED), -997),
    ("best effort", _pod({}), 1000),
    ("burstable asking for a quarter", _pod({"requests": _rl(memory="1Gi")}), 750),
    ("burstable asking for nothing: below best effort", _pod({"requests": _rl("1")}), 999),
    ("burstable asking for it all: above guaranteed", _pod({"requests": _rl(memory="8Gi")}), 3),
])
def test_oom_score_adj(name: str, pod: dict[str, Any], adj: int) -> None:
    container = pod["spec"]["containers"][0]
    assert oom_score_adj(pod, container, memory_capacity=4 * GI) == adj, name


def test_the_kubelet_reports_the_qos_class_it_computes_unless_the_pod_has_one() -> None:
    from datetime import UTC, datetime

    from kubelet.runtime import PodObservation
    now = datetime(2026, 1, 2, tzinfo=UTC)
    pod = _pod(GUARANTEED)
    assert generate_pod_status(pod, PodObservation(), {}, node_ip="127.0.0.1",
                               now=now)["qosClass"] == "Guaranteed"
    pod["status"] = {"qosClass": "Burstable"}  # set at creation, immutable: kept
    assert generate_pod_status(pod, PodObservation(), {}, node_ip="127.0.0.1",
                               now=now)["qosClass"] == "Burstable"


def test_the_create_body_carries_the_cgroup_settings_and_the_oom_score() -> None:
    pod = _pod({"requests": _rl("250m", "1Gi"), "limits": _rl("500m", "2Gi")})
    pod["spec"]["containers"][0]["image"] = "img:1"
    body = container_create_body(pod, pod["spec"]["containers"][0], node_name="n",
                                 sandbox_id="sb", attempt=0, memory_capacity=4 * GI)
    host = body["HostConfig"]
    assert (host["CpuShares"], host["CpuQuota"], host["CpuPeriod"]) == (256, 50000, 100000)
    assert host["Memory"] == host["MemorySwap"] == 2 * GI and host["OomScoreAdj"] == 750
    # Guaranteed: kube's -997 needs CAP_SYS_RESOURCE, which Docker in a container lacks.
    pod = _pod(GUARANTEED)
    pod["spec"]["containers"][0]["image"] = "img:1"
    body = container_create_body(pod, pod["spec"]["containers"][0], node_name="n",
                                 sandbox_id="sb", attempt=0, memory_capacity=4 * GI)
    assert body["HostConfig"]["OomScoreAdj"] == 0
    body = container_create_body(pod, pod["spec"]["containers"][0], node_name="n",
                                 sandbox_id="sb", attempt=0)
    assert "OomScoreAdj" not in body["HostConfig"]  # no node memory known: Docker's default


# --- flags and allocatable ---------------------------------------------------------------

@pytest.mark.parametrize(("text", "parsed"), [
    ("", {}),
    ("cpu=100m,memory=100Mi", {"cpu": D("0.1"), "memory": D(100 * MI)}),
    (" cpu = 1 , ephemeral-storage=1Gi,pid=1000", {"cpu": D(1), "ephemeral-storage": D(GI),
                                                   "pid": D(1000)}),
])
def test_parse_reserved(text: str, parsed: dict[str, Decimal]) -> None:
    assert parse_resource_list(text, allowed=RESERVABLE, flag="--system-reserved") == parsed


@pytest.mark.parametrize(("text", "allowed", "error"), [
    ("cpu", RESERVABLE, "invalid --x 'cpu': expected resource=quantity"),
    ("gpu=1", RESERVABLE, "invalid --x: resource 'gpu' is not one of cpu, memory, "
                          "ephemeral-storage, pid"),
    ("pods=10", RESERVABLE, "resource 'pods' is not one of"),
    ("cpu=lots", RESERVABLE, "invalid --x 'cpu=lots': quantities must match"),
    ("memory=-1Gi", RESERVABLE, "cannot be negative"),
    ("pid=5", DECLARABLE, "resource 'pid' is not one of cpu, memory, ephemeral-storage, pods"),
])
def test_parse_resource_list_refuses(text: str, allowed: tuple[str, ...], error: str) -> None:
    with pytest.raises(ValueError, match=None) as e:
        parse_resource_list(text, allowed=allowed, flag="--x")
    assert error in str(e.value)


def test_parse_eviction_thresholds() -> None:
    assert parse_eviction_thresholds(DEFAULT_EVICTION_HARD) == [
        Threshold("memory.available", quantity=D(100 * MI)),
        Threshold("nodefs.available", percentage=D("0.1")),
        Threshold("imagefs.available", percentage=D("0.15")),
        Threshold("nodefs.inodesFree", percentage=D("0.05"))]
    assert parse_eviction_thresholds("") == []
    for text, error in [("memory.available>1Gi", "expected signal<quantity"),
                        ("cpu.available<1", "unsupported eviction signal cpu.available"),
                        ("memory.available<1Gi,memory.available<2Gi", "duplicate"),
                        ("nodefs.available<110%", "must be >= 0% and <= 100%"),
                        ("memory.available<x", "quantities must match")]:
        with pytest.raises(ValueError) as e:
            parse_eviction_thresholds(text)
        assert error in str(e.value), text


CAPACITY = {"cpu": D(10), "memory": D(10 * GI), "ephemeral-storage": D(100 * GI),
            "pods": D(110)}


@pytest.mark.parametrize(("name", "system", "kube", "eviction", "expected"), [
    ("nothing reserved", {}, {}, "", CAPACITY),
    ("kube's reservations add up", {"cpu": D("0.05"), "memory": D(50 * MI)},
     {"cpu": D("0.1"), "memory": D(100 * MI)}, "",
     {**CAPACITY, "cpu": D("9.85"), "memory": D(10 * GI - 150 * MI)}),
    ("hard eviction keeps memory and nodefs back", {}, {}, DEFAULT_EVICTION_HARD,
     {**CAPACITY, "memory": D(10 * GI - 100 * MI), "ephemeral-storage": D(90 * GI)}),
    ("a percentage of memory", {}, {"memory": D(GI)}, "memory.available<5%",
     {**CAPACITY, "memory": D(9 * GI) - int(D(10 * GI) * D("0.05"))}),
    ("never below zero", {"cpu": D(20)}, {}, "", {**CAPACITY, "cpu": D(0)}),
])
def test_allocatable(name: str, system: dict[str, Decimal], kube: dict[str, Decimal],
                     eviction: str, expected: dict[str, Decimal]) -> None:
    assert allocatable(CAPACITY, system_reserved=system, kube_reserved=kube,
                       eviction_hard=parse_eviction_thresholds(eviction)) == expected, name


def test_eviction_reservation_percentages_round_down_like_kube() -> None:
    assert eviction_reservation([Threshold("nodefs.available", percentage=D("0.1"))],
                                {"ephemeral-storage": D(1001)}) == {"ephemeral-storage": D(100)}


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (1000, "1000"), (1024, "1Ki"), (2 * MI, "2Mi"), (25276510208, "24684092Ki"),
    (243497856615, "243497856615"), (8 * GI - 100 * MI, "8092Mi")])
def test_binary_bytes(value: int, text: str) -> None:
    assert binary_bytes(value) == text


def test_quantity_strings() -> None:
    assert quantity_strings({"cpu": D("1.85"), "memory": D(4 * GI), "pods": D(110),
                             "hugepages-2Mi": D(0)}) == {
        "cpu": "1850m", "hugepages-2Mi": "0", "memory": "4Gi", "pods": "110"}


# --- real kubelets on real Docker ----------------------------------------------------------

def kubectl_for(apiserver: ApiServer, home: Path) -> Kubectl:
    """The one place this module builds a kubectl (the lead adapts it to the secure port)."""
    return Kubectl(apiserver.url, home)


@pytest.fixture(scope="module")
def small_node(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[KubeletProcess]:
    """A "2-cpu, 4Gi" node on whatever this machine is, with kube's reservations."""
    ensure_docker()
    node = unique("small")
    workdir = Path(tmp_path_factory.mktemp("kubelet-resources"))
    process = KubeletProcess(apiserver, workdir, node_name=node, extra_args=[
        "--declared-capacity", "cpu=2,memory=4Gi", "--max-pods", "20",
        "--system-reserved", "cpu=100m,memory=100Mi", "--kube-reserved", "cpu=150m",
        "--root-dir", str(workdir / "root")]).start()
    yield process
    process.stop()
    remove_node_containers(node)


async def node_status(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    async def registered() -> dict[str, Any] | None:
        response = await http.get(f"/api/v1/nodes/{name}")
        return dict(response.json()["status"]) if response.status_code == 200 else None
    return await eventually(registered, timeout=30, what=f"node {name}")


async def test_the_node_reports_declared_capacity_and_allocatable(
        http: httpx.AsyncClient, small_node: KubeletProcess) -> None:
    status = await node_status(http, small_node.node_name)
    capacity, allocatable_ = status["capacity"], status["allocatable"]
    assert capacity["cpu"] == "2" and capacity["memory"] == "4Gi" and capacity["pods"] == "20"
    assert capacity["ephemeral-storage"].endswith("Ki")  # the root dir's filesystem
    # 2 - 100m - 150m; 4Gi - 100Mi (system) - 100Mi (memory.available); nodefs 10% kept.
    assert allocatable_["cpu"] == "1750m" and allocatable_["memory"] == "3896Mi"
    assert allocatable_["pods"] == "20"
    storage = int(capacity["ephemeral-storage"][:-2]) * 1024
    assert int(allocatable_["ephemeral-storage"]) == storage - int(storage * 0.1)


async def test_limits_reach_docker_and_the_pod_gets_its_qos_class(
        http: httpx.AsyncClient, small_node: KubeletProcess) -> None:
    name = unique("limited")
    container = shell("app", "trap 'exit 0' TERM; while true; do sleep 0.2; done",
                      resources={"requests": {"cpu": "250m", "memory": "32Mi"},
                                 "limits": {"cpu": "500m", "memory": "64Mi"}})
    await create_pod(http, pod_manifest(name, small_node.node_name, [container], grace=1))

    async def running() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and "running" in statuses[0]["state"] else None
    pod = await eventually(running, timeout=60, what=f"{name} running")
    assert pod["status"]["qosClass"] == "Burstable"
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("docker://")
    inspected = inspect_container(container_id)
    assert inspected is not None
    host = inspected["HostConfig"]
    assert (host["CpuShares"], host["CpuQuota"], host["CpuPeriod"]) == (256, 50000, 100000)
    assert host["Memory"] == 64 * MI and host["NanoCpus"] == 0
    # Burstable: 1000 - 1000 * 32Mi / 4Gi (the node's declared memory).
    assert host["OomScoreAdj"] == 1000 - (1000 * 32 * MI) // (4 * GI)
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


async def test_a_container_over_its_memory_limit_is_oom_killed(
        http: httpx.AsyncClient, small_node: KubeletProcess) -> None:
    name = unique("oom")
    # `tail` keeps the last lines of a stream that has no newline: it grows until killed.
    container = shell("hog", "tail /dev/zero",
                      resources={"limits": {"cpu": "500m", "memory": "16Mi"}})
    await create_pod(http, pod_manifest(name, small_node.node_name, [container],
                                        restart_policy="Never", grace=1))

    async def terminated() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        return statuses[0]["state"].get("terminated") if statuses else None
    state = await eventually(terminated, timeout=60, what=f"{name} terminated")
    assert state["reason"] == "OOMKilled" and state["exitCode"] == 137
    pod = await get_pod(http, name)
    assert pod["status"]["phase"] == "Failed" and pod["status"]["qosClass"] == "Guaranteed"
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


def test_a_fresh_sigkill_waits_for_dockers_oom_flag() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    killed = instance("hog", state="exited", exit_code=137)
    killed = dataclasses.replace(killed, finished_at=now - timedelta(seconds=0.5))
    assert may_await_oom_flag(killed, now)
    assert not may_await_oom_flag(dataclasses.replace(killed, oom_killed=True), now)
    assert not may_await_oom_flag(dataclasses.replace(killed, exit_code=1), now)
    assert not may_await_oom_flag(killed, now + timedelta(seconds=5))


async def test_kubectl_describe_node_shows_allocated_resources_and_its_pods(
        http: httpx.AsyncClient, apiserver: ApiServer, small_node: KubeletProcess,
        tmp_path: Path) -> None:
    node = small_node.node_name
    await node_status(http, node)
    name = unique("described")
    container = shell("app", "trap 'exit 0' TERM; while true; do sleep 0.2; done",
                      resources={"requests": {"cpu": "350m", "memory": "100Mi"},
                                 "limits": {"cpu": "700m", "memory": "200Mi"}})
    await create_pod(http, pod_manifest(name, node, [container], grace=1))
    done = unique("done")
    await create_pod(http, pod_manifest(done, node, [shell("once", "true")],
                                        restart_policy="Never", grace=1))

    async def succeeded() -> bool:
        return (await get_pod(http, done))["status"].get("phase") == "Succeeded"
    await eventually(succeeded, timeout=60, what=f"{done} Succeeded")

    kubectl = kubectl_for(apiserver, tmp_path / "kubectl")
    out = await asyncio.to_thread(kubectl, "describe", "node", node)
    print(out)
    assert "Capacity:\n  cpu:                2\n" in out
    assert "Allocatable:\n  cpu:                1750m\n" in out
    assert "Non-terminated Pods:          (1 in total)" in out
    assert f"  default                     {name}" in out and done not in out
    assert "Allocated resources:" in out
    # 350m of 1750m allocatable is 20%; 700m is 40%.
    assert "  cpu                350m (20%)  700m (40%)" in out
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")
    await http.delete(f"/api/v1/namespaces/default/pods/{done}")


@pytest.mark.parametrize(("args", "error"), [
    (["--system-reserved", "cpu=1x"], "argument --system-reserved: invalid --system-reserved "
                                      "'cpu=1x': quantities must match"),
    (["--kube-reserved", "gpu=1"], "argument --kube-reserved: invalid --kube-reserved: "
                                   "resource 'gpu' is not one of"),
    (["--eviction-hard", "memory.available=1Gi"], "expected signal<quantity"),
    (["--declared-capacity", "cpu=-2"], "cannot be negative"),
    (["--max-pods", "0"], "must be greater than 0"),
])
def test_the_kubelet_refuses_bad_resource_flags(args: list[str], error: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kubelet.main import parse_args
    with pytest.raises(SystemExit) as e:
        parse_args(["--node-name", "n", "--apiserver", "http://127.0.0.1:1", *args])
    assert e.value.code == 2
    assert error in capsys.readouterr().err


def test_the_resource_flags_reach_the_node() -> None:
    from kubelet.main import node_resources, parse_args
    args = parse_args(["--node-name", "n", "--apiserver", "http://127.0.0.1:1",
                       "--declared-capacity", "cpu=4,memory=8Gi,pods=30", "--max-pods", "50",
                       "--system-reserved", "cpu=500m", "--eviction-hard", ""])
    capacity, allocatable_ = node_resources(args)
    assert (capacity["cpu"], capacity["memory"], capacity["pods"]) == (D(4), D(8 * GI), D(30))
    assert allocatable_["cpu"] == D("3.5") and allocatable_["memory"] == D(8 * GI)
    assert allocatable_["ephemeral-storage"] == capacity["ephemeral-storage"]
