"""Probes (issue 14, "Probes and lifecycle"): the threshold rule and kube's defaults as
tables (after `pkg/kubelet/prober/worker_test.go`), then real kubelets on real Docker:
readiness drives Ready, a failed liveness probe restarts the container with kube's
`Unhealthy` and `Killing` events, httpGet, tcpSocket and grpc probes against the pod's IP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from kubelet.events import EventSink
from kubelet.prober import Probe, ProbeManager, Streak, advance, probe_of
from kubelet.prober.run import http_outcome, http_url, resolve_port
from kubelet.runtime import ContainerInfo, PodObservation, PodRef
from kubelet.status import generate_pod_status
from tests.docker_support import (
    KUBELITE_IMAGE,
    KubeletProcess,
    running_kubelet,
)
from tests.support import ApiServer, eventually, unique
from tests.test_kubelet import create_pod, get_pod, pod_events, pod_manifest, shell


def test_probe_defaults_are_kubes() -> None:
    container = {"name": "c", "readinessProbe": {"exec": {"command": ["true"]}},
                 "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 2,
                                   "successThreshold": 5, "failureThreshold": 1,
                                   "initialDelaySeconds": 3, "timeoutSeconds": 4}}
    assert probe_of(container, "readiness") == Probe(
        "readiness", {"exec": {"command": ["true"]}}, initial_delay_seconds=0,
        period_seconds=10, timeout_seconds=1, success_threshold=1, failure_threshold=3)
    # liveness and startup need one success, whatever the spec says (validation refuses
    # anything else)
    assert probe_of(container, "liveness") == Probe(
        "liveness", {"tcpSocket": {"port": 80}}, initial_delay_seconds=3, period_seconds=2,
        timeout_seconds=4, success_threshold=1, failure_threshold=1)
    assert probe_of(container, "startup") is None


READINESS = Probe("readiness", {}, success_threshold=2, failure_threshold=3)


@pytest.mark.parametrize(("name", "outcomes", "settled"), [
    ("one success is not enough with successThreshold 2", [True], [None]),
    ("two in a row settle it", [True, True], [None, True]),
    ("a failure breaks the run", [True, False, True, True], [None, None, None, True]),
    ("three failures in a row", [False, False, False], [None, None, False]),
    ("and every failure after them", [False, False, False, False], [None, None, False, False]),
    ("a success restarts the count", [False, False, True, False, False, False],
     [None, None, None, None, None, False]),
])
def test_thresholds(name: str, outcomes: list[bool], settled: list[bool | None]) -> None:
    streak, got = Streak(), []
    for outcome in outcomes:
        streak, result = advance(streak, outcome, READINESS)
        got.append(result)
    assert got == settled, name


@pytest.mark.parametrize(("code", "ok", "message"), [
    (200, True, ""), (302, True, ""), (399, True, ""),
    (404, False, "HTTP probe failed with statuscode: 404"),
    (500, False, "HTTP probe failed with statuscode: 500")])
def test_http_outcome(code: int, ok: bool, message: str) -> None:
    assert http_outcome(code) == (ok, message)


def test_ports_and_urls() -> None:
    container = {"name": "web", "ports": [{"name": "http", "containerPort": 8080}]}
    assert resolve_port(80, container) == 80 and resolve_port("81", container) == 81
    assert resolve_port("http", container) == 8080
    with pytest.raises(ValueError, match="couldn't find port: metrics in web"):
        resolve_port("metrics", container)
    assert http_url({"path": "healthz", "scheme": "HTTPS"}, host="10.0.0.2", port=443) == \
        "https://10.0.0.2:443/healthz"
    assert http_url({}, host="10.0.0.2", port=80) == "http://10.0.0.2:80/"


REF = PodRef(uid="u", name="p", namespace="default")


def running(id_: str, name: str = "app") -> ContainerInfo:
    return ContainerInfo(id=id_, name=name, pod=REF, attempt=0, image="i", image_id="i",
                         state="running", started_at=datetime.now(UTC))


async def test_readiness_and_startup_decide_ready_and_started() -> None:
    manager = ProbeManager(None, EventSink(None), on_change=lambda uid: None)  # type: ignore[arg-type]
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"containers": [
               {"name": "app", "image": "i", "readinessProbe": {"exec": {"command": ["x"]},
                                                                "initialDelaySeconds": 3600}},
               {"name": "side", "image": "i", "startupProbe": {"exec": {"command": ["x"]},
                                                               "initialDelaySeconds": 3600}},
               {"name": "plain", "image": "i"}]}}
    observation = PodObservation([], [running("c1"), running("c2", "side"),
                                      running("c3", "plain")])
    try:
        manager.sync_pod(pod, observation, pod_ip="10.0.0.9")
        status = manager.status("u", observation)
        assert {k: (v.ready, v.started) for k, v in status.items()} == {
            "app": (False, True), "side": (False, False)}
        pod_status = generate_pod_status(pod, observation, {}, node_ip="127.0.0.1",
                                         now=datetime.now(UTC), probes=status)
        ready = {s["name"]: (s["ready"], s["started"]) for s in pod_status["containerStatuses"]}
        assert ready == {"app": (False, True), "side": (False, False), "plain": (True, True)}
        condition = next(c for c in pod_status["conditions"] if c["type"] == "Ready")
        assert condition["message"] == "containers with unready status: [app side]"
        # The settled results belong to one container: its successor starts over.
        manager.workers[("u", "app", "readiness")].result = True
        assert manager.status("u", observation)["app"].ready is True
        restarted = PodObservation([], [running("c9")])
        assert manager.status("u", restarted)["app"].ready is False
        # Not started yet is no failure; a settled startup failure is a restart.
        assert manager.should_restart("u", running("c2", "side")) is None
        manager.workers[("u", "side", "startup")].failed = True
        assert manager.should_restart("u", running("c2", "side")) == "startup"
        assert manager.should_restart("u", running("c1")) is None
    finally:
        await manager.stop()


# --- real kubelets on real Docker ----------------------------------------------------------

@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[KubeletProcess]:
    with running_kubelet(apiserver, tmp_path_factory.mktemp("kubelet-probes"),
                         prefix="probes") as process:
        yield process


def ready_condition(pod: dict[str, Any]) -> str:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


async def test_readiness_probe_drives_the_ready_condition(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("ready")
    container = shell("app", "sleep 3; touch /tmp/ready; trap 'exit 0' TERM; "
                             "while true; do sleep 0.2; done",
                      readinessProbe={"exec": {"command": ["cat", "/tmp/ready"]},
                                      "periodSeconds": 1, "failureThreshold": 1})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [container], grace=1))

    async def running_unready() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and "running" in statuses[0]["state"] else None
    pod = await eventually(running_unready, timeout=60, what=f"{name} running")
    assert ready_condition(pod) == "False" and pod["status"]["containerStatuses"][0]["ready"] \
        is False

    async def ready() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if ready_condition(pod) == "True" else None
    pod = await eventually(ready, timeout=30, what=f"{name} Ready")
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    events = await pod_events(http, pod)
    assert any(e["reason"] == "Unhealthy" and e["message"].startswith(
        "Readiness probe failed: cat: can't open '/tmp/ready'") for e in events)
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


async def test_a_failed_liveness_probe_restarts_the_container(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("alive")
    container = shell("app", "touch /tmp/alive; sleep 2; rm /tmp/alive; "
                             "trap 'exit 0' TERM; while true; do sleep 0.2; done",
                      livenessProbe={"exec": {"command": ["cat", "/tmp/alive"]},
                                     "periodSeconds": 1, "failureThreshold": 2})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [container], grace=1))

    async def restarted() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and statuses[0]["restartCount"] >= 1 else None
    pod = await eventually(restarted, timeout=60, what=f"{name} restarted")
    last = pod["status"]["containerStatuses"][0]["lastState"]
    assert last["terminated"]["exitCode"] == 0  # it stopped on SIGTERM, as asked

    async def events() -> list[dict[str, Any]] | None:
        found = await pod_events(http, pod)
        reasons = {e["reason"] for e in found}
        return found if {"Unhealthy", "Killing"} <= reasons else None
    found = await eventually(events, timeout=30, what="Unhealthy and Killing events")
    messages = {(e["reason"], e["message"]) for e in found}
    assert ("Normal", "Killing") in {(e["type"], e["reason"]) for e in found}
    assert ("Killing", "Container app failed liveness probe, will be restarted") in messages
    assert any(reason == "Unhealthy" and message.startswith(
        "Liveness probe failed: cat: can't open '/tmp/alive'") for reason, message in messages)
    assert all(e["involvedObject"].get("fieldPath") == "spec.containers{app}"
               for e in found if e["reason"] in ("Unhealthy", "Killing"))
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


async def test_http_and_tcp_probes_reach_the_pod(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("web")
    container = shell("web", "mkdir -p /www && echo ok > /www/index.html && "
                             "exec httpd -f -p 8080 -h /www",
                      ports=[{"name": "http", "containerPort": 8080}],
                      readinessProbe={"httpGet": {"path": "/index.html", "port": "http"},
                                      "periodSeconds": 1},
                      livenessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                      startupProbe={"httpGet": {"path": "/", "port": 8080},
                                    "periodSeconds": 1, "failureThreshold": 30})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [container], grace=1))

    async def ready() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if ready_condition(pod) == "True" else None
    pod = await eventually(ready, timeout=60, what=f"{name} Ready")
    status = pod["status"]["containerStatuses"][0]
    assert status["started"] is True and status["restartCount"] == 0
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


async def test_a_failing_http_probe_says_why(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("missing")
    container = shell("web", "mkdir -p /www && exec httpd -f -p 8080 -h /www",
                      readinessProbe={"httpGet": {"path": "/nope", "port": 8080},
                                      "periodSeconds": 1})
    pod = await create_pod(http, pod_manifest(name, kubelet.node_name, [container], grace=1))

    want = "Readiness probe failed: HTTP probe failed with statuscode: 404"

    async def unhealthy() -> list[str] | None:
        # a probe before httpd listens fails to connect (its own message); then the 404s
        messages = [e["message"] for e in await pod_events(http, pod)
                    if e["reason"] == "Unhealthy"]
        return messages if want in messages else None
    messages = await eventually(unhealthy, timeout=60, what="an Unhealthy event for a 404")
    assert all(m == want or m.startswith('Readiness probe failed: Get "http://')
               for m in messages), messages
    assert ready_condition(await get_pod(http, name)) == "False"
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")


# A grpc.health.v1 server (grpcio, in the kubelite image) that answers NOT_SERVING for its
# first three seconds, then SERVING.
GRPC_HEALTH_SERVER = """
import signal, time
from concurrent import futures
import grpc
ready_at = time.monotonic() + 3
def check(request, context):
    return b"\\x08\\x01" if time.monotonic() > ready_at else b"\\x08\\x02"
server = grpc.server(futures.ThreadPoolExecutor(2))
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
    "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)})])
server.add_insecure_port("0.0.0.0:9090")
server.start()
signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
server.wait_for_termination()
"""


async def test_a_grpc_probe_asks_the_pods_health_service(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("grpc")
    container = {"name": "health", "image": KUBELITE_IMAGE,
                 "command": ["python", "-c", GRPC_HEALTH_SERVER],
                 "readinessProbe": {"grpc": {"port": 9090}, "periodSeconds": 1},
                 "livenessProbe": {"grpc": {"port": 9090}, "periodSeconds": 1,
                                   "failureThreshold": 30}}
    pod = await create_pod(http, pod_manifest(name, kubelet.node_name, [container], grace=1))
    # the apiserver's defaults (kubectl describe dereferences the service)
    assert pod["spec"]["containers"][0]["readinessProbe"] == {
        "grpc": {"port": 9090, "service": ""}, "periodSeconds": 1, "timeoutSeconds": 1,
        "successThreshold": 1, "failureThreshold": 3}

    async def ready() -> dict[str, Any] | None:
        pod = await get_pod(http, name)
        return pod if ready_condition(pod) == "True" else None
    pod = await eventually(ready, timeout=90, what=f"{name} Ready")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    messages = [e["message"] for e in await pod_events(http, pod) if e["reason"] == "Unhealthy"]
    # before the server listens, the connection times out; then it answers NOT_SERVING
    assert 'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")' \
        in messages, messages
    assert all(m.endswith('(responded with "NOT_SERVING")') or
               "timeout: failed to connect service" in m for m in messages), messages
    await http.delete(f"/api/v1/namespaces/default/pods/{name}")
