"""Server-side printing, checked against what kube-apiserver's printers answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver.resources.events import COLUMNS as EVENT_COLUMNS
from apiserver.resources.events import EVENTS, event_cells
from apiserver.resources.leases import COLUMNS as LEASE_COLUMNS
from apiserver.resources.leases import LEASES, lease_cells
from apiserver.resources.namespaces import NAMESPACES
from apiserver.resources.nodes import COLUMNS as NODE_COLUMNS
from apiserver.resources.nodes import node_cells, node_roles, node_status
from apiserver.resources.pods import COLUMNS as POD_COLUMNS
from apiserver.resources.pods import PODS, pod_cells
from apiserver.tables import format_age, human_duration, table_version, to_table, wants_table
from common.errors import BadRequest

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                  "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def waiting(reason: str) -> dict[str, Any]:
    return {"waiting": {"reason": reason}}


def terminated(reason: str | None, exit_code: int, **extra: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": exit_code, "finishedAt": ago(60), **extra}
    if reason:
        state["reason"] = reason
    return {"terminated": state}


RUNNING = {"running": {"startedAt": "2024-05-01T11:59:00Z"}}


def status(name: str, state: dict[str, Any], *, ready: bool = False, restarts: int = 0,
           last_state: dict[str, Any] | None = None, started: bool | None = None
           ) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "ready": ready, "restartCount": restarts,
                             "state": state, "lastState": last_state or {}}
    if started is not None:
        entry["started"] = started
    return entry


def pod(phase: str, containers: list[dict[str, Any]] | None = None, *,
        init: list[dict[str, Any]] | None = None, init_specs: list[dict[str, Any]] | None = None,
        names: tuple[str, ...] = ("app",), conditions: list[dict[str, Any]] | None = None,
        deleting: bool = False, reason: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web", "namespace": "default",
                                "creationTimestamp": ago(31)}
    if deleting:
        metadata["deletionTimestamp"] = ago(0)
    spec: dict[str, Any] = {"containers": [{"name": n, "image": "busybox"} for n in names]}
    if init_specs is not None:
        spec["initContainers"] = init_specs
    pod_status: dict[str, Any] = {"phase": phase, "conditions": conditions or [],
                                  "containerStatuses": containers or []}
    if init is not None:
        pod_status["initContainerStatuses"] = init
    if reason:
        pod_status["reason"] = reason
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": pod_status}


READY_TRUE = [{"type": "Ready", "status": "True"}]
INIT_SPEC = [{"name": "setup", "image": "busybox"}]

POD_CASES = [
    ("Pending, nothing reported yet", pod("Pending"), "0/1", "Pending", "0"),
    ("ContainerCreating", pod("Pending", [status("app", waiting("ContainerCreating"))]),
     "0/1", "ContainerCreating", "0"),
    ("ErrImagePull", pod("Pending", [status("app", waiting("ErrImagePull"))]),
     "0/1", "ErrImagePull", "0"),
    ("ImagePullBackOff", pod("Pending", [status("app", waiting("ImagePullBackOff"))]),
     "0/1", "ImagePullBackOff", "0"),
    ("CrashLoopBackOff with the last restart's age",
     pod("Running", [status("app", waiting("CrashLoopBackOff"), restarts=3,
                            last_state={"terminated": {"exitCode": 1, "reason": "Error",
                                                       "finishedAt": ago(120)}})]),
     "0/1", "CrashLoopBackOff", "3 (2m ago)"),
    ("Running", pod("Running", [status("app", RUNNING, ready=True)], conditions=READY_TRUE),
     "1/1", "Running", "0"),
    ("Running but not ready", pod("Running", [status("app", RUNNING)]), "0/1", "Running", "0"),
    ("Completed", pod("Succeeded", [status("app", terminated("Completed", 0))]),
     "0/1", "Completed", "0"),
    ("Error", pod("Failed", [status("app", terminated("Error", 1))]), "0/1", "Error", "0"),
    ("OOMKilled", pod("Running", [status("app", terminated("OOMKilled", 137))]),
     "0/1", "OOMKilled", "0"),
    ("terminated without a reason: the signal",
     pod("Failed", [status("app", terminated(None, 137, signal=9))]), "0/1", "Signal:9", "0"),
    ("terminated without a reason: the exit code",
     pod("Failed", [status("app", terminated(None, 2))]), "0/1", "ExitCode:2", "0"),
    ("Terminating while running",
     pod("Running", [status("app", RUNNING, ready=True)], deleting=True),
     "1/1", "Terminating", "0"),
    ("a finished pod being deleted keeps its verdict",
     pod("Succeeded", [status("app", terminated("Completed", 0))], deleting=True),
     "0/1", "Completed", "0"),
    ("deleted on an unreachable node",
     pod("Running", [status("app", RUNNING, ready=True)], deleting=True, reason="NodeLost"),
     "1/1", "Unknown", "0"),
    ("pod-level reason (evicted)", pod("Failed", reason="Evicted"), "0/1", "Evicted", "0"),
    ("scheduling gated",
     pod("Pending", conditions=[{"type": "PodScheduled", "status": "False",
                                 "reason": "SchedulingGated"}]),
     "0/1", "SchedulingGated", "0"),
    ("Init:0/1 while the init container runs",
     pod("Pending", [status("app", waiting("PodInitializing"))], init_specs=INIT_SPEC,
         init=[status("setup", RUNNING)]),
     "0/1", "Init:0/1", "0"),
    ("Init:0/1 before the init container starts",
     pod("Pending", init_specs=INIT_SPEC, init=[status("setup", waiting("PodInitializing"))]),
     "0/1", "Init:0/1", "0"),
    ("Init:ErrImagePull", pod("Pending", init_specs=INIT_SPEC,
                              init=[status("setup", waiting("ErrImagePull"))]),
     "0/1", "Init:ErrImagePull", "0"),
    ("Init:Error counts init restarts",
     pod("Pending", init_specs=INIT_SPEC, init=[status("setup", terminated("Error", 1),
                                                       restarts=2)]),
     "0/1", "Init:Error", "2"),
    ("Init:ExitCode", pod("Pending", init_specs=INIT_SPEC,
                          init=[status("setup", terminated(None, 3))]),
     "0/1", "Init:ExitCode:3", "0"),
    ("init done, main container running",
     pod("Running", [status("app", RUNNING, ready=True)], init_specs=INIT_SPEC,
         init=[status("setup", terminated("Completed", 0))], conditions=READY_TRUE),
     "1/1", "Running", "0"),
    ("one container completed, another still running and ready",
     pod("Running", [status("app", RUNNING, ready=True),
                     status("job", terminated("Completed", 0))],
         names=("app", "job"), conditions=READY_TRUE),
     "1/2", "Running", "0"),
    ("one container completed, another running, pod not ready",
     pod("Running", [status("app", RUNNING, ready=True),
                     status("job", terminated("Completed", 0))], names=("app", "job")),
     "1/2", "NotReady", "0"),
    ("a sidecar (restartable init container) counts as a container",
     pod("Running", [status("app", RUNNING, ready=True)],
         init_specs=[{"name": "proxy", "image": "busybox", "restartPolicy": "Always"}],
         init=[status("proxy", RUNNING, ready=True, started=True)],
         conditions=[*READY_TRUE, {"type": "Initialized", "status": "True"}]),
     "2/2", "Running", "0"),
]


@pytest.mark.parametrize(("case", "obj", "ready", "reason", "restarts"), POD_CASES,
                         ids=[c[0] for c in POD_CASES])
def test_pod_row(case: str, obj: dict[str, Any], ready: str, reason: str,
                 restarts: str) -> None:
    assert pod_cells(obj, NOW)[:5] == ["web", ready, reason, restarts, "31s"]


def test_pod_wide_cells() -> None:
    running = pod("Running", [status("app", RUNNING, ready=True)])
    running["spec"]["nodeName"] = "node2"
    running["status"]["podIP"] = "172.17.0.2"
    assert pod_cells(running, NOW)[5:] == ["172.17.0.2", "node2", "<none>", "<none>"]
    assert pod_cells(pod("Pending"), NOW)[5:] == ["<none>", "<none>", "<none>", "<none>"]


def test_pod_ip_prefers_pod_ips_and_readiness_gates_count_true_conditions() -> None:
    gated = pod("Running", conditions=[{"type": "example.com/lb", "status": "True"}])
    gated["spec"]["readinessGates"] = [{"conditionType": "example.com/lb"},
                                       {"conditionType": "example.com/dns"}]
    gated["status"]["podIPs"] = [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}]
    assert pod_cells(gated, NOW)[5] == "10.0.0.7"
    assert pod_cells(gated, NOW)[8] == "1/2"


AGE_CASES = [
    (0, "0s"), (31, "31s"), (119, "119s"), (120, "2m"), (409, "6m49s"), (599, "9m59s"),
    (600, "10m"), (179 * 60 + 59, "179m"), (3 * 3600, "3h"), (3 * 3600 + 5 * 60, "3h5m"),
    (8 * 3600 + 59 * 60, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"),
    (2 * 86400 + 3 * 3600, "2d3h"), (14 * 86400 + 5 * 3600, "14d"), (729 * 86400, "729d"),
    (730 * 86400, "2y"), (731 * 86400, "2y1d"), (9 * 365 * 86400, "9y"),
    (-1.5, "0s"), (-5, "<invalid>"),
]


@pytest.mark.parametrize(("seconds", "expected"), AGE_CASES)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


@pytest.mark.parametrize(("created", "expected"), [
    (ago(409), "6m49s"), ("2024-05-01T11:59:29.123456Z", "30s"),
    ("2024-05-01T11:59:29+00:00", "31s"), (None, "<unknown>"), ("", "<unknown>"),
])
def test_format_age(created: str | None, expected: str) -> None:
    assert format_age(created, NOW) == expected


def node(conditions: list[dict[str, str]], *, unschedulable: bool = False,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node2", "creationTimestamp": ago(14 * 86400 + 60),
                         "labels": labels or {}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": "node2"}],
                       "nodeInfo": {"kubeletVersion": "v1.37.0+kubelite",
                                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                                    "kernelVersion": "6.1.0", "containerRuntimeVersion":
                                    "docker://24.0.7"}}}


READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(("obj", "expected"), [
    (node([{"type": "MemoryPressure", "status": "False"}, READY]), "Ready"),
    (node([{"type": "Ready", "status": "False"}]), "NotReady"),
    (node([{"type": "Ready", "status": "Unknown"}]), "NotReady"),
    (node([]), "Unknown"),
    (node([READY], unschedulable=True), "Ready,SchedulingDisabled"),
    (node([], unschedulable=True), "Unknown,SchedulingDisabled"),
])
def test_node_status(obj: dict[str, Any], expected: str) -> None:
    assert node_status(obj) == expected


@pytest.mark.parametrize(("labels", "expected"), [
    ({"kubernetes.io/hostname": "node2", "shuai": "b"}, "<none>"),
    ({"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": ""},
     "control-plane,master"),
    ({"kubernetes.io/role": "worker"}, "worker"),
    ({"node-role.kubernetes.io/": "", "kubernetes.io/role": ""}, "<none>"),
])
def test_node_roles(labels: dict[str, str], expected: str) -> None:
    assert node_roles(labels) == expected


def test_node_row() -> None:
    assert node_cells(node([READY]), NOW) == [
        "node2", "Ready", "<none>", "14d", "v1.37.0+kubelite", "127.0.0.1", "<none>",
        "Debian GNU/Linux 12 (bookworm)", "6.1.0", "docker://24.0.7"]
    bare = {"metadata": {"name": "n"}, "status": {}}
    assert node_cells(bare, NOW)[5:] == ["<none>", "<none>", "<unknown>", "<unknown>",
                                         "<unknown>"]


def event(**extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "pod-example.17c3f0a1b2c3d4e5", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "pod-example",
                               "fieldPath": "spec.containers{nginx}"},
            "reason": "Pulling", "message": 'Pulling image "nginx:1.15"\n', "type": "Normal",
            "source": {"component": "kubelet", "host": "node2"},
            "firstTimestamp": ago(500), "lastTimestamp": ago(20), "count": 3, **extra}


def test_event_row() -> None:
    assert event_cells(event(), NOW) == [
        "20s", "Normal", "Pulling", "pod/pod-example", "spec.containers{nginx}",
        "kubelet, node2", 'Pulling image "nginx:1.15"', "8m20s", 3,
        "pod-example.17c3f0a1b2c3d4e5"]


def test_event_row_fallbacks() -> None:
    scheduled = event(source={}, reportingComponent="default-scheduler", lastTimestamp=None,
                      count=0, involvedObject={"kind": "Node"})
    cells = event_cells(scheduled, NOW)
    assert cells[0] == cells[7] == "8m20s"
    assert cells[3] == "node"
    assert cells[5] == "default-scheduler"
    assert cells[8] == 1
    series = event(series={"count": 7, "lastObservedTime": ago(5)})
    assert [event_cells(series, NOW)[i] for i in (0, 8)] == ["5s", 7]
    new_api = event(firstTimestamp=None, lastTimestamp=None, eventTime=ago(61))
    assert event_cells(new_api, NOW)[0] == "61s"


def test_lease_row_is_name_holder_age() -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "node1", "namespace": "kube-node-lease",
                          "creationTimestamp": ago(90)},
             "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40}}
    assert lease_cells(lease, NOW) == ["node1", "node1", "90s"]
    # printLease: no holder is an empty cell (kubectl prints it blank), not <none>
    unheld = {**lease, "spec": {"leaseDurationSeconds": 40}}
    assert lease_cells(unheld, NOW) == ["node1", "", "90s"]
    table = to_table(LEASES, [lease], resource_version="12", now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert table["rows"][0]["object"]["metadata"]["name"] == "node1"


def test_column_definitions_match_kube_apiserver() -> None:
    assert [(c["name"], c["type"], c["format"], c["priority"]) for c in POD_COLUMNS] == [
        ("Name", "string", "name", 0), ("Ready", "string", "", 0),
        ("Status", "string", "", 0), ("Restarts", "string", "", 0),
        ("Age", "string", "", 0), ("IP", "string", "", 1), ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1), ("Readiness Gates", "string", "", 1)]
    assert [c["name"] for c in NODE_COLUMNS if c["priority"] == 0] == [
        "Name", "Status", "Roles", "Age", "Version"]
    assert [c["name"] for c in EVENT_COLUMNS if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]
    assert [c["name"] for c in EVENT_COLUMNS if c["priority"] == 1] == [
        "Subobject", "Source", "First Seen", "Count", "Name"]
    assert POD_COLUMNS[1]["description"] == (
        "The aggregate readiness state of this pod for accepting traffic.")
    assert [(c["name"], c["format"], c["priority"]) for c in LEASE_COLUMNS] == [
        ("Name", "name", 0), ("Holder", "", 0), ("Age", "", 0)]
    assert LEASE_COLUMNS[1]["description"].startswith(
        "holderIdentity contains the identity of the holder of a current lease.")


def test_table_with_partial_object_metadata() -> None:
    done = pod("Succeeded", [status("app", terminated("Completed", 0))])
    table = to_table(PODS, [done], resource_version="90", now=NOW)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "90"}
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Ready"]
    [row] = table["rows"]
    assert row["cells"] == ["web", "0/1", "Completed", "0", "31s", "<none>", "<none>",
                            "<none>", "<none>"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": done["metadata"]}
    assert row["conditions"] == [{"type": "Completed", "status": "True",
                                  "reason": "Succeeded",
                                  "message": "The pod has completed successfully."}]


def test_table_include_object_and_headers() -> None:
    running = pod("Running", [status("app", RUNNING, ready=True)])
    full = to_table(PODS, [running], resource_version="7", include_object="Object", now=NOW)
    assert full["rows"][0]["object"] == running
    assert "conditions" not in full["rows"][0]
    bare = to_table(PODS, [running], resource_version="7", include_object="None",
                    include_column_definitions=False, version="v1beta1", now=NOW)
    assert "object" not in bare["rows"][0]
    assert bare["columnDefinitions"] is None
    assert bare["apiVersion"] == "meta.k8s.io/v1beta1"
    default = to_table(NAMESPACES, [{"metadata": {"name": "default",
                                                    "creationTimestamp": ago(3 * 3600)},
                                       "status": {"phase": "Active"}}],
                       resource_version="3", include_object="", now=NOW)
    assert default["rows"][0]["cells"] == ["default", "Active", "3h"]
    assert default["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert to_table(EVENTS, [], resource_version="1", continue_token="abc")["metadata"] == {
        "resourceVersion": "1", "continue": "abc"}


def test_table_rejects_unknown_include_object() -> None:
    with pytest.raises(BadRequest, match='unrecognized includeObject value: "All"'):
        to_table(PODS, [], resource_version="1", include_object="All")


@pytest.mark.parametrize(("accept", "expected"), [
    (KUBECTL_ACCEPT, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
    ("application/json; as=Table; v=v1; g=meta.k8s.io", "v1"),
    ("application/json", None),
    ("*/*", None),
    (None, None),
    ("", None),
    ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
    ("application/yaml,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", None),
])
def test_table_negotiation(accept: str | None, expected: str | None) -> None:
    assert table_version(accept) == expected
    assert wants_table(accept) is (expected is not None)
