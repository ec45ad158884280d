"""The scheduler's, kubelet's and controller-manager's /metrics after real work: one
cluster (real etcd, the secure apiserver, scheduler, controller-manager with its
ReplicaSet controller, a kubelet on the local dockerd) runs a ReplicaSet of one pod to
Running, and each component's page, parsed with prometheus_client's parser, has kube's
metric names with the values that work implies. Pure parts: tests/test_metrics.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kubelet.metrics import container_type
from tests.cm_support import ControllerManagerProcess
from tests.docker_support import (
    BUSYBOX_IMAGE,
    KubeletProcess,
    ensure_docker,
    remove_node_containers,
)
from tests.support import ApiServer, Etcd, SchedulerProcess, eventually, unique
from tests.test_metrics import Samples, parse, value


class Cluster:
    def __init__(self, apiserver: ApiServer, scheduler: SchedulerProcess,
                 controllers: ControllerManagerProcess, kubelet: KubeletProcess) -> None:
        self.apiserver = apiserver
        self.scheduler = scheduler
        self.controllers = controllers
        self.kubelet = kubelet


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ensure_docker()
    workdir = tmp_path_factory.mktemp("metrics-cluster")
    node = unique("metrics-node")
    etcd = Etcd(workdir).start()
    started: list[Any] = []
    try:
        apiserver = ApiServer(etcd, workdir).start()
        started.append(apiserver)
        scheduler = SchedulerProcess(apiserver, workdir).start()
        started.append(scheduler)
        controllers = ControllerManagerProcess(apiserver, workdir, extra_args=(
            "--leader-elect=false", "--controllers=replicaset-controller")).start()
        started.append(controllers)
        kubelet = KubeletProcess(apiserver, workdir, node_name=node).start()
        started.append(kubelet)
        yield Cluster(apiserver, scheduler, controllers, kubelet)
    finally:
        for process in reversed(started):
            process.stop()
        etcd.stop()
        remove_node_containers(node)


@pytest.fixture(scope="module")
def running(cluster: Cluster) -> Iterator[str]:
    """A ReplicaSet whose one pod the scheduler placed and the kubelet started."""
    name = unique("metrics-rs")
    labels = {"app": name}
    server = cluster.apiserver
    with httpx.Client(base_url=server.url, verify=server.ssl_context(), timeout=10) as http:
        created = http.post("/apis/apps/v1/namespaces/default/replicasets", json={
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                                         "command": ["sleep", "3600"]}]}}}})
        assert created.status_code == 201, created.text
        deadline = time.monotonic() + 90
        while True:
            pods = http.get("/api/v1/namespaces/default/pods",
                            params={"labelSelector": f"app={name}"}).json()["items"]
            if pods and all(p["status"].get("phase") == "Running" for p in pods):
                break
            assert time.monotonic() < deadline, f"the ReplicaSet's pod is not running: {pods}"
            time.sleep(0.5)
        yield name
        http.delete(f"/apis/apps/v1/namespaces/default/replicasets/{name}")


async def page(url: str, verify: Any = True) -> tuple[httpx.Response, Samples]:
    async with httpx.AsyncClient(verify=verify, timeout=10) as http:
        response = await http.get(f"{url}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return response, parse(response.text)


async def test_the_schedulers_metrics_after_a_bind(cluster: Cluster, running: str) -> None:
    _, samples = await page(cluster.scheduler.url)
    profile = {"profile": "default-scheduler"}
    assert value(samples, "scheduler_schedule_attempts_total", result="scheduled",
                 **profile) >= 1
    assert value(samples, "scheduler_scheduling_attempt_duration_seconds_count",
                 result="scheduled", **profile) >= 1
    assert value(samples, "scheduler_pod_scheduling_sli_duration_seconds_count",
                 attempts="1") >= 1
    assert value(samples, "scheduler_pod_scheduling_sli_duration_seconds_sum") > 0
    assert value(samples, "scheduler_pod_scheduling_attempts_count") >= 1
    assert ("scheduler_preemption_attempts_total", frozenset()) not in samples  # none ran
    assert value(samples, "scheduler_pending_pods", queue="active") == 0
    assert value(samples, "scheduler_cache_size", type="nodes") >= 1
    # its API client: the bind's POST answered 201, the informers' LISTs 200
    assert value(samples, "rest_client_requests_total", method="POST", code="201") >= 1
    assert value(samples, "rest_client_requests_total", method="GET", code="200") >= 1
    assert value(samples, "rest_client_request_duration_seconds_count", verb="POST") >= 1


async def test_the_kubelets_metrics_after_a_pod_start(cluster: Cluster, running: str) -> None:
    kubelet = cluster.kubelet
    verify = cluster.apiserver.ssl_context()

    async def relisted_running() -> tuple[httpx.Response, Samples] | None:
        # the running gauges are the PLEG's last relist (once a second): it may not have
        # seen the pod's containers yet when its status said Running
        response, samples = await page(kubelet.url, verify=verify)
        seen = (value(samples, "kubelet_running_pods") >= 1
                and value(samples, "kubelet_running_containers", container_state="running") >= 1)
        return (response, samples) if seen else None
    seen = await eventually(relisted_running, what="a relist to see the pod")
    assert seen is not None
    response, samples = seen
    assert value(samples, "kubelet_pod_start_duration_seconds_count") >= 1
    assert value(samples, "kubelet_pod_start_duration_seconds_sum") > 0
    assert value(samples, "kubelet_pod_worker_duration_seconds_count",
                 operation_type="create") >= 1
    assert value(samples, "kubelet_running_pods") >= 1
    assert value(samples, "kubelet_running_containers", container_state="running") >= 1
    for operation in ("create_container", "start_container", "list_containers",
                      "container_status"):
        assert value(samples, "kubelet_runtime_operations_total",
                     operation_type=operation) >= 1, operation
        assert value(samples, "kubelet_runtime_operations_duration_seconds_count",
                     operation_type=operation) >= 1, operation
    assert value(samples, "kubelet_pleg_relist_duration_seconds_count") >= 1
    assert value(samples, "kubelet_started_containers_total", container_type="container") >= 1
    assert value(samples, "rest_client_requests_total", method="PATCH") >= 1  # status

    # the kubelet's /metrics is nodes/metrics to its authorizer: no certificate, no page
    async with httpx.AsyncClient(verify=cluster.apiserver.ssl_context(None)) as anonymous:
        assert (await anonymous.get(f"{kubelet.url}/metrics")).status_code == 401
    assert "kubelet_running_pods" in response.text


async def test_the_controller_managers_workqueue_metrics(cluster: Cluster,
                                                         running: str) -> None:
    _, samples = await page(cluster.controllers.url)
    queue = {"name": "replicaset-controller"}
    assert value(samples, "workqueue_adds_total", **queue) >= 1
    assert value(samples, "workqueue_queue_duration_seconds_count", **queue) >= 1
    assert value(samples, "workqueue_work_duration_seconds_count", **queue) >= 1
    assert value(samples, "workqueue_work_duration_seconds_sum", **queue) > 0
    assert ("workqueue_depth", frozenset(queue.items())) in samples
    assert ("workqueue_retries_total", frozenset(queue.items())) in samples
    assert ("workqueue_longest_running_processor_seconds",
            frozenset(queue.items())) in samples
    # the ReplicaSet controller's pod create went through the writer client
    assert value(samples, "rest_client_requests_total", method="POST", code="201") >= 1


@pytest.mark.parametrize(("name", "kind"), [
    ("app", "container"), ("setup", "init_container"), ("debugger", "ephemeral_container")])
def test_container_types_are_kubes(name: str, kind: str) -> None:
    pod = {"spec": {"containers": [{"name": "app"}], "initContainers": [{"name": "setup"}],
                    "ephemeralContainers": [{"name": "debugger"}]}}
    assert container_type(pod, name) == kind

