"""The kubelet's pure decisions: status, phase, conditions, actions, back-off, naming."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver.logs import choose_container, forwarded_params, kubelet_base_url
from common import errors
from kubelet.actions import Backoff, compute_pod_actions, containers_to_garbage_collect
from kubelet.docker import (
    container_create_body,
    demultiplex,
    parse_docker_time,
    sandbox_create_body,
)
from kubelet.images import default_pull_policy, should_pull
from kubelet.node import merged_labels, node_conditions, parse_node_labels
from kubelet.pod_workers import differs_semantically
from kubelet.resources import memory_bytes, nano_cpus
from kubelet.runtime import (
    ContainerInfo,
    ContainerSummary,
    InvalidImageName,
    PodObservation,
    PodRef,
    SandboxInfo,
    changed_pods,
    container_name,
    container_spec_hash,
    grace_period_of,
    parse_image,
    sandbox_name,
)
from kubelet.server import LogRequestError, parse_log_options, pick_log_container
from kubelet.status import (
    Waiting,
    container_status,
    generate_pod_status,
    go_duration,
    pod_phase,
    should_restart,
    status_patch,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
REF = PodRef(uid="u-1", name="web", namespace="default")


def make_pod(*names: str, restart_policy: str = "Always", **spec: Any) -> dict[str, Any]:
    containers = [{"name": n, "image": "kubelite/busybox:1.35"} for n in names or ("app",)]
    return {"metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
            "spec": {"restartPolicy": restart_policy, "containers": containers, **spec},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}}


def instance(name: str = "app", *, attempt: int = 0, state: str = "running", exit_code: int = 0,
             spec_hash: str = "", oom: bool = False) -> ContainerInfo:
    started = NOW - timedelta(seconds=30 - attempt)
    return ContainerInfo(
        id=f"{name}-{attempt}", name=name, pod=REF, attempt=attempt,
        image="kubelite/busybox:1.35", image_id="sha256:abc", state=state,  # type: ignore[arg-type]
        exit_code=exit_code, oom_killed=oom, created_at=started, started_at=started,
        finished_at=started + timedelta(seconds=1) if state == "exited" else None,
        spec_hash=spec_hash or container_spec_hash({"name": name,
                                                    "image": "kubelite/busybox:1.35"}))


def sandbox(*, attempt: int = 0, ready: bool = True, ip: str = "172.17.0.5") -> SandboxInfo:
    return SandboxInfo(id=f"sb-{attempt}", pod=REF, attempt=attempt,
                       state="running" if ready else "exited", ip=ip)


def observed(*containers: ContainerInfo, sandboxes: tuple[SandboxInfo, ...] = ()) -> PodObservation:
    return PodObservation(sandboxes=list(sandboxes),
                          containers=sorted(containers, key=lambda c: c.attempt, reverse=True))


# --- naming, images, quantities -------------------------------------------------------------

def test_runtime_names_follow_kubernetes() -> None:
    assert container_name(container="app", pod=REF, attempt=3) == "k8s_app_web_default_u-1_3"
    assert sandbox_name(pod=REF, attempt=0) == "k8s_POD_web_default_u-1_0"


@pytest.mark.parametrize(("image", "expected"), [
    ("busybox", "busybox:latest"),
    ("kubelite/busybox:1.35", "kubelite/busybox:1.35"),
    ("127.0.0.1:5999/missing:1", "127.0.0.1:5999/missing:1"),
    ("localhost/x", "localhost/x:latest"),
    ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
    ("nginx@sha256:" + "a" * 64, "nginx@sha256:" + "a" * 64),
])
def test_parse_image_defaults_the_tag(image: str, expected: str) -> None:
    assert str(parse_image(image)) == expected


@pytest.mark.parametrize("image", ["", "UPPER/case", "bad image", "x:", "a//b", "-x"])
def test_invalid_image_names_use_the_kubelet_wording(image: str) -> None:
    with pytest.raises(InvalidImageName) as caught:
        parse_image(image)
    assert str(caught.value) == (f'Failed to apply default image tag "{image}": couldn\'t parse '
                                 f'image reference "{image}": invalid reference format')


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"), ("busybox:latest", "Always"), ("busybox:1.35", "IfNotPresent")])
def test_default_pull_policy(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


@pytest.mark.parametrize(("policy", "present", "pull"), [
    ("Always", True, True), ("IfNotPresent", True, False), ("IfNotPresent", False, True),
    ("Never", False, False)])
def test_should_pull(policy: str, present: bool, pull: bool) -> None:
    assert should_pull(policy, present) is pull


def test_quantities_become_docker_numbers() -> None:
    assert nano_cpus("500m") == 500_000_000 and nano_cpus("2") == 2_000_000_000
    assert memory_bytes("64Mi") == 64 * 2**20 and memory_bytes("1G") == 10**9
    with pytest.raises(ValueError):
        memory_bytes("lots")


@pytest.mark.parametrize(("seconds", "text"), [
    (10, "10s"), (20, "20s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"), (1.25, "1.25s"),
    (0.25, "250ms")])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_docker_times_keep_microseconds_and_treat_zero_as_never() -> None:
    parsed = parse_docker_time("2026-11-29T17:49:22.154494123Z")
    assert parsed == datetime(2026, 11, 29, 17, 49, 22, 154494, tzinfo=UTC)
    assert parse_docker_time("0001-01-01T00:00:00Z") is None


# --- back-off ---------------------------------------------------------------------------------

def test_back_off_doubles_from_10s_to_5min() -> None:
    backoff = Backoff()
    delays = []
    for i in range(8):
        backoff.next("k", at=float(i))
        delays.append(backoff.delay("k"))
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]


def test_back_off_resets_after_ten_quiet_minutes() -> None:
    backoff = Backoff()
    for at in (0.0, 1.0, 2.0):
        backoff.next("k", at=at)
    assert backoff.delay("k") == 40
    backoff.next("k", at=2.0 + 601)
    assert backoff.delay("k") == 10


def test_in_back_off_since_a_crash() -> None:
    backoff = Backoff()
    assert not backoff.in_backoff_since("k", since=100, now=101)  # never failed: no wait
    backoff.next("k", at=100)
    assert backoff.in_backoff_since("k", since=100, now=105)
    assert not backoff.in_backoff_since("k", since=100, now=110.5)
    assert backoff.in_backoff_since_update("k", now=109)
    assert not backoff.in_backoff_since_update("k", now=111)


# --- container status and phase ----------------------------------------------------------------

@pytest.mark.parametrize(("policy", "state", "exit_code", "restart"), [
    ("Always", "exited", 0, True), ("Always", "running", 0, False),
    ("OnFailure", "exited", 0, False), ("OnFailure", "exited", 1, True),
    ("Never", "exited", 1, False), ("Never", "created", 0, True)])
def test_should_restart(policy: str, state: str, exit_code: int, restart: bool) -> None:
    latest = instance(state=state, exit_code=exit_code)
    assert should_restart(make_pod(restart_policy=policy), latest) is restart
    assert should_restart(make_pod(restart_policy=policy), None) is True


def test_should_not_restart_a_deleting_pod() -> None:
    pod = make_pod()
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert should_restart(pod, instance(state="exited")) is False


def test_a_container_not_created_yet_is_container_creating() -> None:
    status = container_status(make_pod(), {"name": "app", "image": "img"}, [], None, None)
    assert status["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["ready"] is False and status["restartCount"] == 0 and status["lastState"] == {}


def test_running_container_status() -> None:
    status = container_status(make_pod(), {"name": "app", "image": "img"},
                              [instance(attempt=2)], None, None)
    assert status["ready"] is True and status["started"] is True
    assert status["restartCount"] == 2
    assert status["containerID"] == "docker://app-2"
    assert status["imageID"] == "docker://sha256:abc"
    assert "running" in status["state"]


def test_crash_loop_shows_waiting_with_the_last_termination() -> None:
    crashed = [instance(attempt=1, state="exited", exit_code=1),
               instance(attempt=0, state="exited", exit_code=1)]
    waiting = Waiting("CrashLoopBackOff", "back-off 10s restarting failed container=app pod=x")
    status = container_status(make_pod(), {"name": "app", "image": "img"}, crashed, None, waiting)
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert status["restartCount"] == 1 and status["ready"] is False


def test_terminated_reasons() -> None:
    spec = {"name": "app", "image": "img"}
    done = container_status(make_pod(restart_policy="Never"), spec,
                            [instance(state="exited")], None, None)
    assert done["state"]["terminated"]["reason"] == "Completed"
    oom = container_status(make_pod(restart_policy="Never"), spec,
                           [instance(state="exited", exit_code=137, oom=True)], None, None)
    assert oom["state"]["terminated"]["reason"] == "OOMKilled"


def _statuses(*states: dict[str, Any], last: dict[str, Any] | None = None) -> list[dict]:
    return [{"name": f"c{i}", "state": s, "lastState": last or {}} for i, s in enumerate(states)]


RUNNING = {"running": {"startedAt": "x"}}
WAITING = {"waiting": {"reason": "ContainerCreating"}}
OK = {"terminated": {"exitCode": 0}}
FAIL = {"terminated": {"exitCode": 1}}


@pytest.mark.parametrize(("policy", "states", "phase"), [
    ("Always", [WAITING], "Pending"),
    ("Always", [RUNNING], "Running"),
    ("Always", [RUNNING, WAITING], "Pending"),
    ("Always", [OK], "Running"),
    ("Never", [OK], "Succeeded"),
    ("Never", [OK, FAIL], "Failed"),
    ("Never", [RUNNING, OK], "Running"),
    ("OnFailure", [FAIL], "Running"),
    ("OnFailure", [OK, OK], "Succeeded"),
])
def test_pod_phase(policy: str, states: list[dict[str, Any]], phase: str) -> None:
    pod = make_pod(*[f"c{i}" for i in range(len(states))], restart_policy=policy)
    assert pod_phase(pod, _statuses(*states)) == phase


def test_waiting_after_a_crash_counts_as_stopped_not_pending() -> None:
    pod = make_pod("c0")
    statuses = _statuses({"waiting": {"reason": "CrashLoopBackOff"}}, last=FAIL)
    assert pod_phase(pod, statuses) == "Running"


# --- whole pod status -------------------------------------------------------------------------

def test_generated_status_for_a_running_pod() -> None:
    pod = make_pod("a", "b")
    status = generate_pod_status(pod, observed(instance("a"), instance("b"),
                                               sandboxes=(sandbox(),)),
                                 {}, node_ip="127.0.0.1", now=NOW)
    assert status["phase"] == "Running"
    assert status["hostIP"] == "127.0.0.1" and status["podIP"] == "172.17.0.5"
    assert status["podIPs"] == [{"ip": "172.17.0.5"}]
    assert status["startTime"] == "2026-01-02T03:04:05Z"
    assert status["qosClass"] == "BestEffort"
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert all(c["status"] == "True" for c in status["conditions"])


def test_unready_containers_are_named_in_the_conditions() -> None:
    status = generate_pod_status(make_pod("a", "b"), observed(instance("a"),
                                                              sandboxes=(sandbox(),)),
                                 {}, node_ip="127.0.0.1", now=NOW)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [b]"
    assert status["phase"] == "Pending"


def test_host_network_pods_use_the_node_ip() -> None:
    pod = make_pod(hostNetwork=True)
    status = generate_pod_status(pod, observed(instance(), sandboxes=(sandbox(ip=""),)), {},
                                 node_ip="127.0.0.1", now=NOW)
    assert status["podIP"] == "127.0.0.1"


def test_condition_transition_times_are_kept_while_unchanged() -> None:
    pod = make_pod()
    first = generate_pod_status(pod, observed(instance(), sandboxes=(sandbox(),)), {},
                                node_ip="127.0.0.1", now=NOW)
    pod["status"] = first
    later = generate_pod_status(pod, observed(instance(), sandboxes=(sandbox(),)), {},
                                node_ip="127.0.0.1", now=NOW + timedelta(minutes=5))
    assert later["conditions"] == first["conditions"]
    assert later["startTime"] == first["startTime"]


def test_terminal_phase_is_never_left() -> None:
    pod = make_pod(restart_policy="Never")
    pod["status"]["phase"] = "Succeeded"
    status = generate_pod_status(pod, observed(), {}, node_ip="127.0.0.1", now=NOW)
    assert status["phase"] == "Succeeded"


def test_succeeded_pod_conditions_say_pod_completed() -> None:
    pod = make_pod(restart_policy="Never")
    status = generate_pod_status(pod, observed(instance(state="exited")), {},
                                 node_ip="127.0.0.1", now=NOW)
    assert status["phase"] == "Succeeded"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "PodCompleted" and ready["status"] == "False"


def test_status_patch_removes_vanished_fields() -> None:
    assert status_patch({"podIP": "1", "phase": "Pending"}, {"phase": "Running"}) == {
        "podIP": None, "phase": "Running"}


def test_status_only_changes_are_not_semantic() -> None:
    pod = make_pod()
    assert not differs_semantically(pod, {**pod, "status": {"phase": "Running"}})
    deleting = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "t"}}
    assert differs_semantically(pod, deleting)


# --- actions ----------------------------------------------------------------------------------

def test_a_new_pod_gets_a_sandbox_and_all_containers() -> None:
    actions = compute_pod_actions(make_pod("a", "b"), observed())
    assert actions.create_sandbox and actions.sandbox_attempt == 0 and not actions.kill_pod
    assert [(s.name, s.attempt) for s in actions.start] == [("a", 0), ("b", 0)]


def test_a_running_pod_needs_nothing() -> None:
    actions = compute_pod_actions(make_pod(), observed(instance(), sandboxes=(sandbox(),)))
    assert not actions.create_sandbox and not actions.start and not actions.kill
    assert not actions.kill_pod


def test_an_exited_container_restarts_with_the_next_attempt() -> None:
    actions = compute_pod_actions(make_pod(), observed(instance(attempt=4, state="exited"),
                                                       sandboxes=(sandbox(),)))
    assert [(s.name, s.attempt) for s in actions.start] == [("app", 5)]
    assert actions.start[0].previous is not None and actions.start[0].previous.attempt == 4


def test_a_finished_never_pod_stops_its_sandbox_and_makes_no_new_one() -> None:
    pod = make_pod(restart_policy="Never")
    actions = compute_pod_actions(pod, observed(instance(state="exited"),
                                                sandboxes=(sandbox(),)))
    assert actions.kill_pod and not actions.start
    stopped = compute_pod_actions(pod, observed(instance(state="exited"),
                                                sandboxes=(sandbox(ready=False),)))
    assert not stopped.create_sandbox and not stopped.start


def test_a_dead_sandbox_is_replaced_and_containers_restarted() -> None:
    actions = compute_pod_actions(make_pod(), observed(instance(attempt=1),
                                                       sandboxes=(sandbox(ready=False),)))
    assert actions.create_sandbox and actions.sandbox_attempt == 1 and actions.kill_pod
    assert [(s.name, s.attempt) for s in actions.start] == [("app", 2)]


def test_a_changed_container_spec_is_restarted() -> None:
    actions = compute_pod_actions(make_pod(), observed(instance(spec_hash="old"),
                                                       sandboxes=(sandbox(),)))
    assert [k.message for k in actions.kill] == [
        "Container app definition changed, will be restarted"]
    assert [(s.name, s.attempt) for s in actions.start] == [("app", 1)]


def test_on_failure_does_not_rerun_succeeded_containers_in_a_new_sandbox() -> None:
    pod = make_pod("ok", "bad", restart_policy="OnFailure")
    actions = compute_pod_actions(pod, observed(instance("ok", state="exited"),
                                                instance("bad", state="exited", exit_code=1),
                                                sandboxes=(sandbox(ready=False),)))
    assert [s.name for s in actions.start] == ["bad"]


def test_garbage_collection_keeps_current_and_previous() -> None:
    obs = observed(*(instance(attempt=i, state="exited") for i in range(4)),
                   sandboxes=(sandbox(attempt=1), sandbox(attempt=0, ready=False)))
    assert sorted(containers_to_garbage_collect(obs)) == ["app-0", "app-1", "sb-0"]


def test_pleg_diff_finds_changed_pods() -> None:
    def summary(cid: str, uid: str, state: str) -> ContainerSummary:
        return ContainerSummary(id=cid, pod=PodRef(uid, "p", "ns"), name="c", is_sandbox=False,
                                state=state)  # type: ignore[arg-type]
    old = {"1": summary("1", "a", "running"), "2": summary("2", "b", "running"),
           "3": summary("3", "c", "running")}
    new = {"1": summary("1", "a", "running"), "2": summary("2", "b", "exited"),
           "4": summary("4", "d", "running")}
    assert changed_pods(old, new) == {"b", "c", "d"}


def test_grace_period_prefers_the_deletion() -> None:
    pod = make_pod(terminationGracePeriodSeconds=7)
    assert grace_period_of(pod) == 7
    pod["metadata"]["deletionGracePeriodSeconds"] = 2
    assert grace_period_of(pod) == 2
    assert grace_period_of(make_pod()) == 30


# --- Docker bodies ----------------------------------------------------------------------------

def test_container_body_maps_the_container_spec() -> None:
    pod = make_pod()
    spec = {"name": "app", "image": "img:1", "command": ["sh", "-c"], "args": ["echo hi"],
            "env": [{"name": "A", "value": "1"}], "workingDir": "/tmp",
            "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "250m", "memory": "32Mi"}}}
    body = container_create_body(pod, spec, node_name="n1", sandbox_id="sb", attempt=2)
    assert body["Entrypoint"] == ["sh", "-c"] and body["Cmd"] == ["echo hi"]
    assert body["Env"] == ["A=1"] and body["WorkingDir"] == "/tmp"
    assert "ExposedPorts" not in body  # the sandbox owns the pod's network and its ports
    host = body["HostConfig"]
    assert host["NetworkMode"] == "container:sb" and host["IpcMode"] == "container:sb"
    # kube's cgroup values: the request defaults to the limit for the shares (250m ->
    # 256), the limit is a CFS quota of 25 ms per 100 ms, memory without swap.
    assert host["CpuShares"] == 256 and host["CpuQuota"] == 25_000
    assert host["CpuPeriod"] == 100_000 and "NanoCpus" not in host
    assert host["Memory"] == host["MemorySwap"] == 32 * 2**20
    labels = body["Labels"]
    assert labels["io.kubernetes.pod.uid"] == "u-1" and labels["io.kubelite.node"] == "n1"
    assert labels["io.kubernetes.container.restartCount"] == "2"
    assert labels["io.kubelite.managed"] == "true"


def test_args_alone_keep_the_image_entrypoint() -> None:
    body = container_create_body(make_pod(), {"name": "a", "image": "i", "args": ["x"]},
                                 node_name="n", sandbox_id="s", attempt=0)
    assert "Entrypoint" not in body and body["Cmd"] == ["x"]


def test_sandbox_binds_host_ports_on_the_node_ip() -> None:
    pod = make_pod()
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 18080}]
    body = sandbox_create_body(pod, node_name="n", image="pause", attempt=0, node_ip="127.0.0.1")
    assert body["HostConfig"]["PortBindings"] == {
        "80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "18080"}]}
    assert body["HostConfig"]["NetworkMode"] == "bridge" and body["Hostname"] == "web"
    assert body["ExposedPorts"] == {"80/tcp": {}}
    host = sandbox_create_body(make_pod(hostNetwork=True), node_name="n", image="pause",
                               attempt=0, node_ip="127.0.0.1")
    assert host["HostConfig"]["NetworkMode"] == "host" and "Hostname" not in host


async def test_demultiplex_strips_frame_headers_across_chunks() -> None:
    frames = b"\x01\x00\x00\x00\x00\x00\x00\x03out" + b"\x02\x00\x00\x00\x00\x00\x00\x04err\n"

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(frames), 5):
            yield frames[i:i + 5]

    assert [part async for part in demultiplex(chunks())] == [b"out", b"err\n"]


# --- node -------------------------------------------------------------------------------------

def test_node_labels_flag() -> None:
    assert parse_node_labels("a=1, b=,c=x=y") == {"a": "1", "b": "", "c": "x=y"}
    with pytest.raises(ValueError):
        parse_node_labels("novalue")


def test_labels_added_by_others_are_kept() -> None:
    assert merged_labels({"team": "a", "kubernetes.io/os": "old"},
                         {"kubernetes.io/os": "linux"}) == {"team": "a", "kubernetes.io/os": "linux"}


def test_node_ready_follows_the_runtime() -> None:
    up = node_conditions(runtime_ok=True, now=NOW)
    ready = next(c for c in up if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "KubeletReady"
    down = node_conditions(runtime_ok=False, runtime_error="boom", old=up,
                           now=NOW + timedelta(seconds=10))
    not_ready = next(c for c in down if c["type"] == "Ready")
    assert not_ready["status"] == "False" and "container runtime is down" in not_ready["message"]
    assert not_ready["lastTransitionTime"] == "2026-01-02T03:04:15Z"
    memory = next(c for c in down if c["type"] == "MemoryPressure")
    assert memory["lastTransitionTime"] == "2026-01-02T03:04:05Z"


# --- logs -------------------------------------------------------------------------------------

def test_log_container_choice_and_errors() -> None:
    crashed = [instance(attempt=1, state="exited"), instance(attempt=0, state="exited")]
    assert pick_log_container(crashed, pod_name="web", container="app",
                              previous=True).attempt == 0
    with pytest.raises(LogRequestError, match='previous terminated container "app" in pod'):
        pick_log_container(crashed[:1], pod_name="web", container="app", previous=True)
    with pytest.raises(LogRequestError, match="is waiting to start: ContainerCreating"):
        pick_log_container([], pod_name="web", container="app", previous=False)
    options = parse_log_options({"follow": "true", "tailLines": "5"})
    assert options.follow and options.tail_lines == 5
    with pytest.raises(LogRequestError):
        parse_log_options({"tailLines": "-1"})


def test_apiserver_log_proxy_picks_container_and_kubelet() -> None:
    pod = make_pod("a", "b")
    with pytest.raises(errors.BadRequest) as caught:
        choose_container(pod, None)
    assert caught.value.message == ("a container name must be specified for pod web, "
                                    "choose one of: [a b]")
    assert choose_container(make_pod("only"), None) == "only"
    with pytest.raises(errors.BadRequest, match="container c is not valid for pod web"):
        choose_container(pod, "c")
    node = {"metadata": {"name": "n1"},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"},
                                     {"type": "InternalIP", "address": "127.0.0.1"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    assert kubelet_base_url(node) == "http://127.0.0.1:10250"
    with pytest.raises(errors.BadRequest):
        kubelet_base_url({"metadata": {"name": "n1"}, "status": {}})
    assert forwarded_params({"follow": "true", "container": "a", "tailLines": ""}) == {
        "follow": "true"}


def test_a_container_docker_could_not_start_counts_as_exited() -> None:
    from kubelet.docker import container_from_inspect

    info = container_from_inspect({
        "Id": "c1", "Created": "2026-01-02T03:04:05.5Z", "Image": "sha256:abc",
        "Config": {"Image": "img", "Labels": {"io.kubernetes.container.name": "app",
                                              "io.kubernetes.container.restartCount": "1"}},
        "State": {"Status": "created", "ExitCode": 127, "StartedAt": "0001-01-01T00:00:00Z",
                  "FinishedAt": "0001-01-01T00:00:00Z",
                  "Error": 'exec: "/nope": stat /nope: no such file or directory'}})
    assert info.state == "exited" and info.exit_code == 127 and info.attempt == 1
    assert info.finished_at == info.created_at
    terminated = container_status(make_pod(restart_policy="Never"), {"name": "app", "image": "i"},
                                  [info], None, None)["state"]["terminated"]
    assert terminated["reason"] == "StartError" and "/nope" in terminated["message"]


class _FakeNodeApi:
    """Just enough of ApiClient for NodeAgent: one Node kept in memory."""

    def __init__(self) -> None:
        self.node: dict[str, Any] | None = None

    async def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        if self.node is not None:
            raise errors.AlreadyExists("exists")
        self.node = obj
        return obj

    async def get(self, resource: str, name: str) -> dict[str, Any]:
        if self.node is None:
            raise errors.NotFound("gone")
        return self.node

    async def patch(self, resource: str, name: str, patch: dict[str, Any], *,
                    subresource: str | None = None) -> dict[str, Any]:
        assert self.node is not None
        for key, value in patch.items():
            if isinstance(value, dict):
                self.node.setdefault(key, {}).update(value)
        return self.node


class _FakeRuntime:
    def __init__(self) -> None:
        self.up = True

    async def ping(self) -> bool:
        return self.up

    async def version(self) -> Any:
        from kubelet.runtime import RuntimeVersion

        return RuntimeVersion(name="docker", version="20.10.24", api_version="1.41",
                              os="Debian", kernel_version="6.1", operating_system="linux",
                              architecture="amd64", cpus=2, memory_bytes=4 * 2**30)


async def test_node_agent_registers_adopts_and_goes_not_ready_without_docker() -> None:
    from kubelet.node import NodeAgent, NodeConfig

    api, runtime = _FakeNodeApi(), _FakeRuntime()
    config = NodeConfig(node_name="n1", node_ip="127.0.0.1", port=10250, labels={"x": "1"})
    agent = NodeAgent(client=api, runtime=runtime, config=config)  # type: ignore[arg-type]
    await agent.register()
    assert api.node is not None
    status = api.node["status"]
    assert status["nodeInfo"]["containerRuntimeVersion"] == "docker://20.10.24"
    assert status["capacity"] == {"cpu": "2", "memory": f"{4 * 2**20}Ki", "pods": "110"}
    assert api.node["metadata"]["labels"]["x"] == "1"

    api.node["metadata"]["labels"]["team"] = "a"  # `kubectl label` meanwhile
    await NodeAgent(client=api, runtime=runtime, config=config).register()  # type: ignore[arg-type]
    assert api.node["metadata"]["labels"]["team"] == "a"

    runtime.up = False
    await agent.post_status()
    ready = next(c for c in api.node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "KubeletNotReady"
    runtime.up = True
    await agent.post_status()
    ready = next(c for c in api.node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


async def test_node_agent_retries_registration_while_the_apiserver_restarts() -> None:
    """A dropped connection or a 503 mid-registration is waited out, not fatal; a 4xx is."""
    import httpx

    from kubelet.node import NodeAgent, NodeConfig

    class Restarting(_FakeNodeApi):
        def __init__(self, failures: list[BaseException]) -> None:
            super().__init__()
            self.failures = failures

        async def patch(self, resource: str, name: str, patch: dict[str, Any], *,
                        subresource: str | None = None) -> dict[str, Any]:
            if self.failures:
                raise self.failures.pop(0)
            return await super().patch(resource, name, patch, subresource=subresource)

    config = NodeConfig(node_name="n1", node_ip="127.0.0.1", port=10250, labels={})
    api = Restarting([httpx.ReadError("connection reset"),
                      errors.ServiceUnavailable("storage is unavailable")])
    api.node = {"metadata": {"name": "n1", "labels": {}}, "status": {}}  # adopt: PATCHes
    await NodeAgent(client=api, runtime=_FakeRuntime(), config=config).register()  # type: ignore[arg-type]
    assert not api.failures and api.node["status"]["nodeInfo"]

    api.failures = [errors.Forbidden("no")]
    with pytest.raises(errors.Forbidden):
        await NodeAgent(client=api, runtime=_FakeRuntime(), config=config).register()  # type: ignore[arg-type]


def test_the_security_settings_the_kubelet_honours_reach_docker() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 3000,
                                        "supplementalGroups": [4000], "fsGroup": 2000},
                    "containers": [{"name": "c", "image": "busybox", "securityContext": {
                        "runAsUser": 1001, "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}}
    body = container_create_body(pod, pod["spec"]["containers"][0], node_name="n",
                                 sandbox_id="s", attempt=0)
    assert body["User"] == "1001:3000"
    host = body["HostConfig"]
    assert host["GroupAdd"] == ["4000", "2000"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["CapAdd"] == ["NET_BIND_SERVICE"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
