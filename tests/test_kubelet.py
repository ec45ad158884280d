"""The kubelet end to end: real dockerd, etcd, apiserver and `python -m kubelet` processes.

Pods name `nodeName` directly (no scheduler). Each kubelet has its own node name, so
it only ever sees and touches its own containers; teardown removes only those.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from common.errors import AlreadyExists, Conflict, NotFound
from common.models import parse_micro_time
from kubelet.node import NodeLease, renewed_lease
from tests.docker_support import (
    BUSYBOX_IMAGE,
    UNREACHABLE_IMAGE,
    KubeletProcess,
    StalledRegistry,
    ensure_docker,
    inspect_container,
    node_containers,
    remove_container,
    remove_node_containers,
    run_container,
    run_unrelated_container,
)
from tests.support import ApiServer, eventually, free_port, unique

pytestmark = pytest.mark.docker

NS = "default"
# Pod Security enforces baseline in `default`; host namespaces and privileged containers go
# where kube puts them, in a privileged namespace.
PRIVILEGED_NS = "kube-system"
# The module's kubelet renews its node lease every 2 s (a quarter of 8 s), not every 10 s.
LEASE_SECONDS = 8
NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture(scope="module")
def docker_ready() -> None:
    ensure_docker()


@pytest.fixture(scope="module")
def kubelet(apiserver: ApiServer, docker_ready: None,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeletProcess]:
    node = unique("node")
    process = KubeletProcess(apiserver, Path(tmp_path_factory.mktemp("kubelet")),
                             node_name=node, node_labels="kubelite.io/test=yes",
                             extra_args=["--node-lease-duration-seconds",
                                         str(LEASE_SECONDS)]).start()
    yield process
    process.stop()
    remove_node_containers(node)


def pod_manifest(name: str, node: str, containers: list[dict[str, Any]], *,
                 restart_policy: str = "Always", grace: int = 5,
                 namespace: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"nodeName": node, "restartPolicy": restart_policy,
                     "terminationGracePeriodSeconds": grace, "containers": containers}}


def shell(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX_IMAGE, "command": ["sh", "-c", script], **extra}


# A process that stops promptly on SIGTERM (a bare `sleep` as PID 1 ignores it).
SERVE_FOREVER = "trap 'exit 0' TERM; while true; do sleep 0.2; done"


async def create_pod(http: httpx.AsyncClient, manifest: dict[str, Any]) -> dict[str, Any]:
    namespace = manifest["metadata"].get("namespace") or NS
    response = await http.post(f"/api/v1/namespaces/{namespace}/pods", json=manifest)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def get_pod(http: httpx.AsyncClient, name: str, *, ns: str = NS) -> dict[str, Any]:
    response = await http.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def pod_events(http: httpx.AsyncClient, pod: dict[str, Any]) -> list[dict[str, Any]]:
    meta = pod["metadata"]
    selector = (f"involvedObject.name={meta['name']},involvedObject.namespace={NS},"
                f"involvedObject.uid={meta['uid']}")
    response = await http.get(f"/api/v1/namespaces/{NS}/events",
                              params={"fieldSelector": selector})
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def wait_events(http: httpx.AsyncClient, pod: dict[str, Any], *reasons: str
                      ) -> list[dict[str, Any]]:
    """The pod's Events once each of `reasons` is among them: the kubelet writes Events
    from a queue of their own, in no fixed order with its status updates."""
    async def all_there() -> list[dict[str, Any]] | None:
        events = await pod_events(http, pod)
        return events if set(reasons) <= {e["reason"] for e in events} else None
    found = await eventually(all_there, what=f"events {', '.join(reasons)}")
    assert found is not None
    return found


def container_status(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status["name"] == name:
            return dict(status)
    return {}


def waiting_reason(pod: dict[str, Any], name: str) -> str:
    return str(((container_status(pod, name).get("state") or {}).get("waiting") or {})
               .get("reason") or "")


async def wait_running(http: httpx.AsyncClient, name: str, *,
                       timeout: float = 60, ns: str = NS) -> dict[str, Any]:
    async def running() -> dict[str, Any]:
        pod = await get_pod(http, name, ns=ns)
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if pod["status"].get("phase") == "Running" and statuses and all(
                s.get("ready") for s in statuses):
            return pod
        return {}
    return await eventually(running, timeout=timeout, what=f"pod {name} Running and ready")


async def delete_pod(http: httpx.AsyncClient, name: str, *, ns: str = NS) -> None:
    await http.delete(f"/api/v1/namespaces/{ns}/pods/{name}")


async def watch_pod(http: httpx.AsyncClient, name: str) -> AsyncIterator[dict[str, Any]]:
    """Every version of the pod, as a watch delivers them (none is missed, unlike polling)."""
    params = {"watch": "true", "fieldSelector": f"metadata.name={name}"}
    async with http.stream("GET", f"/api/v1/namespaces/{NS}/pods", params=params,
                           timeout=httpx.Timeout(30, read=None)) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.strip():
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED"):
                    yield event["object"]


async def pod_status_cell(http: httpx.AsyncClient, name: str) -> str:
    """The STATUS column `kubectl get pod` prints (the apiserver's Table)."""
    response = await http.get(f"/api/v1/namespaces/{NS}/pods/{name}", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert response.status_code == 200, response.text
    table = response.json()
    column = [c["name"] for c in table["columnDefinitions"]].index("Status")
    return str(table["rows"][0]["cells"][column])


async def test_node_is_registered_ready_with_its_facts(http: httpx.AsyncClient,
                                                      kubelet: KubeletProcess) -> None:
    async def registered() -> dict[str, Any]:
        response = await http.get(f"/api/v1/nodes/{kubelet.node_name}")
        return dict(response.json()) if response.status_code == 200 else {}

    node = await eventually(registered, what="the Node")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == kubelet.node_name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"]
    assert labels["kubelite.io/test"] == "yes"
    status = node["status"]
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == kubelet.port
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    assert status["nodeInfo"]["kubeletVersion"].startswith("v1.")
    assert int(status["capacity"]["pods"]) > 0 and status["allocatable"]["cpu"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastHeartbeatTime"]


# --- the node lease ---------------------------------------------------------------------------

NODE_REF = {"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "u-1"}


def test_renewed_lease_sets_holder_renew_time_and_an_owner_only_once() -> None:
    now = datetime(2025, 3, 4, 5, 6, 7, 89, tzinfo=UTC)
    base: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": "node1", "namespace": "kube-node-lease",
                                         "resourceVersion": "41"},
                            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 15,
                                     "leaseTransitions": 2}}
    renewed = renewed_lease(base, node_name="node1", duration_seconds=40, now=now,
                            owner=NODE_REF)
    assert renewed["metadata"]["resourceVersion"] == "41"  # the PUT is conditional
    assert renewed["metadata"]["ownerReferences"] == [NODE_REF]
    assert renewed["spec"] == {"holderIdentity": "node1", "leaseDurationSeconds": 40,
                               "leaseTransitions": 2,
                               "renewTime": "2025-03-04T05:06:07.000089Z"}
    assert base["spec"]["holderIdentity"] == "someone"  # not mutated
    other = {**NODE_REF, "uid": "u-2"}
    again = renewed_lease(renewed, node_name="node1", duration_seconds=40, now=now, owner=other)
    assert again["metadata"]["ownerReferences"] == [NODE_REF]


class FakeLeaseApi:
    """Leases and one Node in memory, with the apiserver's resourceVersion rules."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.revision = 0
        self.calls: list[str] = []

    def _stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        stored = json.loads(json.dumps(obj))
        stored["metadata"]["resourceVersion"] = str(self.revision)
        self.leases[obj["metadata"]["name"]] = stored
        return json.loads(json.dumps(stored))

    async def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict:
        self.calls.append(f"get {resource}")
        if resource == "nodes":
            return {"metadata": {"name": name, "uid": "u-1"}}
        if name not in self.leases:
            raise NotFound(f'leases.coordination.k8s.io "{name}" not found')
        return json.loads(json.dumps(self.leases[name]))

    async def create(self, resource: str, obj: dict) -> dict:
        self.calls.append("create leases")
        if obj["metadata"]["name"] in self.leases:
            raise AlreadyExists("exists")
        return self._stored(obj)

    async def update(self, resource: str, obj: dict) -> dict:
        self.calls.append("update leases")
        current = self.leases.get(obj["metadata"]["name"])
        if current is None:
            raise NotFound("gone")
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        return self._stored(obj)


async def test_node_lease_creates_renews_and_rereads_on_conflict() -> None:
    api = FakeLeaseApi()
    lease = NodeLease(client=api, node_name="node1", duration_seconds=40)
    assert lease.renew_seconds == 10
    await lease.sync()
    assert api.calls == ["get leases", "get nodes", "create leases"]
    created = api.leases["node1"]
    assert created["spec"]["holderIdentity"] == "node1"
    assert created["spec"]["leaseDurationSeconds"] == 40
    assert created["metadata"]["ownerReferences"] == [NODE_REF]
    first = parse_micro_time(created["spec"]["renewTime"])

    api.calls.clear()
    await lease.sync()  # from the lease it wrote last: no read, no node lookup
    assert api.calls == ["update leases"]
    assert parse_micro_time(api.leases["node1"]["spec"]["renewTime"]) >= first

    someone = api._stored({**api.leases["node1"], "metadata": {
        **api.leases["node1"]["metadata"], "labels": {"touched": "yes"}}})
    api.calls.clear()
    await lease.sync()  # 409, read it again, renew on top of the other write
    assert api.calls == ["update leases", "get leases", "update leases"]
    renewed = api.leases["node1"]
    assert renewed["metadata"]["labels"] == {"touched": "yes"}
    assert int(renewed["metadata"]["resourceVersion"]) > int(
        someone["metadata"]["resourceVersion"])

    del api.leases["node1"]
    api.calls.clear()
    await lease.sync()  # deleted meanwhile: the update fails, the lease is created again
    assert api.calls[-2:] == ["get nodes", "create leases"]
    assert "node1" in api.leases


async def test_node_lease_adopts_an_existing_lease() -> None:
    api = FakeLeaseApi()
    api._stored({"metadata": {"name": "node1", "namespace": "kube-node-lease", "uid": "old"},
                 "spec": {"holderIdentity": "node1", "leaseDurationSeconds": 40}})
    await NodeLease(client=api, node_name="node1").sync()
    assert api.calls == ["get leases", "get nodes", "update leases"]
    adopted = api.leases["node1"]
    assert adopted["metadata"]["uid"] == "old"
    assert adopted["metadata"]["ownerReferences"] == [NODE_REF]
    assert adopted["spec"]["renewTime"]


async def node_lease_of(http: httpx.AsyncClient, node: str) -> dict[str, Any]:
    response = await http.get(f"{NODE_LEASES}/{node}")
    return dict(response.json()) if response.status_code == 200 else {}


async def test_node_lease_is_held_by_the_node_and_renewed(http: httpx.AsyncClient,
                                                          kubelet: KubeletProcess) -> None:
    node_name = kubelet.node_name
    lease = await eventually(lambda: node_lease_of(http, node_name), what="the node lease")
    node = (await http.get(f"/api/v1/nodes/{node_name}")).json()
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    assert lease["spec"]["holderIdentity"] == node_name
    assert lease["spec"]["leaseDurationSeconds"] == LEASE_SECONDS
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node["metadata"]["uid"]}]
    first = parse_micro_time(lease["spec"]["renewTime"])

    async def renewed_after(when: datetime) -> dict[str, Any]:
        current = await node_lease_of(http, node_name)
        if current and parse_micro_time(current["spec"]["renewTime"]) > when:
            return current
        return {}

    later = await eventually(lambda: renewed_after(first), timeout=30,
                             what="renewTime to move forward")
    assert int(later["metadata"]["resourceVersion"]) > int(lease["metadata"]["resourceVersion"])
    assert later["metadata"]["uid"] == lease["metadata"]["uid"]

    # Someone else writes the lease: the kubelet's next PUT conflicts, it reads again and
    # renews on top of that write.
    async def touch() -> dict[str, Any]:
        current = await node_lease_of(http, node_name)
        current["metadata"]["labels"] = {"touched": "yes"}
        response = await http.put(f"{NODE_LEASES}/{node_name}", json=current)
        assert response.status_code in (200, 409), response.text  # 409: the kubelet was first
        return dict(response.json()) if response.status_code == 200 else {}

    touched = await eventually(touch, what="our own write of the lease")
    since = parse_micro_time(touched["spec"]["renewTime"])
    after_conflict = await eventually(lambda: renewed_after(since), timeout=30,
                                      what="a renewal after the conflicting write")
    assert after_conflict["metadata"]["labels"] == {"touched": "yes"}

    # Deleted, it comes back (a new object, same holder).
    assert (await http.delete(f"{NODE_LEASES}/{node_name}")).status_code == 200
    again = await eventually(lambda: node_lease_of(http, node_name), timeout=30,
                             what="the node lease to be created again")
    assert again["metadata"]["uid"] != lease["metadata"]["uid"]
    assert again["spec"]["holderIdentity"] == node_name


async def test_pod_with_node_name_runs_with_kubelet_events(http: httpx.AsyncClient,
                                                          kubelet: KubeletProcess) -> None:
    name = unique("web")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [shell("app", SERVE_FOREVER)]))
    pod = await wait_running(http, name)

    status = pod["status"]
    app = container_status(pod, "app")
    assert app["ready"] is True and app["started"] is True and app["restartCount"] == 0
    assert "running" in app["state"] and app["containerID"].startswith("docker://")
    assert app["imageID"] and status["hostIP"] == "127.0.0.1" and status["podIP"]
    assert status["startTime"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True" and conditions["ContainersReady"] == "True"
    assert conditions["Initialized"] == "True" and conditions["PodScheduled"] == "True"

    container_id = app["containerID"].removeprefix("docker://")
    inspected = inspect_container(container_id)
    assert inspected is not None
    uid = pod["metadata"]["uid"]
    assert inspected["Name"] == f"/k8s_app_{name}_{NS}_{uid}_0"
    labels = inspected["Config"]["Labels"]
    assert labels["io.kubernetes.pod.uid"] == uid
    assert labels["io.kubelite.node"] == kubelet.node_name
    sandbox = inspected["HostConfig"]["NetworkMode"].removeprefix("container:")
    sandbox_info = inspect_container(sandbox)
    assert sandbox_info is not None
    assert sandbox_info["Name"] == f"/k8s_POD_{name}_{NS}_{uid}_0"

    async def lifecycle_events() -> list[dict[str, Any]]:
        events = await pod_events(http, pod)
        reasons = [e["reason"] for e in events]
        return events if {"Pulled", "Created", "Started"} <= set(reasons) else []

    events = await eventually(lifecycle_events, what="Pulled/Created/Started events")
    by_reason = {e["reason"]: e for e in events}
    assert "Scheduled" not in by_reason
    assert by_reason["Pulled"]["message"] == \
        f'Container image "{BUSYBOX_IMAGE}" already present on machine'
    assert by_reason["Created"]["message"] == "Created container: app"
    assert by_reason["Started"]["message"] == "Started container app"
    for event in events:
        assert event["source"] == {"component": "kubelet", "host": kubelet.node_name}
    await delete_pod(http, name)


async def test_exit_zero_with_restart_policy_never_succeeds(http: httpx.AsyncClient,
                                                           kubelet: KubeletProcess) -> None:
    name = unique("done")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [shell("job", "echo done")],
                                        restart_policy="Never"))

    async def succeeded() -> dict[str, Any]:
        pod = await get_pod(http, name)
        return pod if pod["status"].get("phase") == "Succeeded" else {}

    pod = await eventually(succeeded, timeout=60, what="phase Succeeded")
    terminated = container_status(pod, "job")["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "PodCompleted"
    await delete_pod(http, name)


async def test_the_security_context_the_kubelet_honours_is_what_the_container_gets(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("secctx")
    probe = shell("probe", "id -u; id -g; id -G; touch /x 2>/dev/null && echo writable "
                           "|| echo read-only")
    probe["securityContext"] = {"runAsUser": 1234, "runAsGroup": 2345,
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}}
    manifest = pod_manifest(name, kubelet.node_name, [probe], restart_policy="Never")
    manifest["spec"]["securityContext"] = {"supplementalGroups": [3456]}
    await create_pod(http, manifest)

    async def succeeded() -> dict[str, Any]:
        pod = await get_pod(http, name)
        return pod if pod["status"].get("phase") == "Succeeded" else {}

    await eventually(succeeded, timeout=60, what="phase Succeeded")
    logs = (await http.get(f"/api/v1/namespaces/{NS}/pods/{name}/log")).text.split()
    assert logs[:2] == ["1234", "2345"]
    assert "3456" in logs[2:-1]
    assert logs[-1] == "read-only"
    await delete_pod(http, name)


async def test_a_pod_asking_for_what_the_kubelet_cannot_honour_is_refused(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("claim")
    manifest = pod_manifest(name, kubelet.node_name, [shell("c", "true")],
                            namespace=PRIVILEGED_NS)
    manifest["spec"]["volumes"] = [{"name": "data",
                                    "persistentVolumeClaim": {"claimName": "data"}}]
    r = await http.post(f"/api/v1/namespaces/{PRIVILEGED_NS}/pods", json=manifest)
    assert r.status_code == 422, r.text
    assert r.json()["message"] == (
        f'Pod "{name}" is invalid: spec.volumes[0].persistentVolumeClaim: Forbidden: '
        "kubelite's kubelet does not implement persistentVolumeClaim volumes")


async def run_to_completion(http: httpx.AsyncClient, manifest: dict[str, Any]) -> list[str]:
    """Create the pod, wait for it to succeed, and return its log's lines."""
    namespace = manifest["metadata"]["namespace"]
    name = manifest["metadata"]["name"]
    await create_pod(http, manifest)

    async def succeeded() -> dict[str, Any]:
        pod = await get_pod(http, name, ns=namespace)
        assert pod["status"].get("phase") == "Succeeded", pod["status"].get("containerStatuses")
        return pod

    await eventually(succeeded, timeout=60, what=f"pod {name} Succeeded")
    log = (await http.get(f"/api/v1/namespaces/{namespace}/pods/{name}/log")).text
    await delete_pod(http, name, ns=namespace)
    return log.splitlines()


DOCKER_DEFAULT_CAP_EFF = 0xa80425fb


async def test_a_privileged_container_is_created_privileged(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("priv")
    privileged = shell("privileged", "grep CapEff /proc/self/status",
                       securityContext={"privileged": True})
    await create_pod(http, pod_manifest(name, kubelet.node_name, [privileged],
                                        restart_policy="Never", namespace=PRIVILEGED_NS))

    async def finished() -> dict[str, Any]:
        pod = await get_pod(http, name, ns=PRIVILEGED_NS)
        state = container_status(pod, "privileged").get("state") or {}
        return dict(state.get("terminated") or {})

    terminated = await eventually(finished, timeout=60, what="the privileged container done")
    created = node_containers(kubelet.node_name, **{"io.kubernetes.container.name": "privileged"})
    info = inspect_container(created[0]["Id"])
    assert info is not None and info["HostConfig"]["Privileged"] is True
    if terminated["reason"] == "StartError":
        # an engine that itself lacks capabilities (a container without CAP_SYS_RESOURCE, as
        # on this project's CI) cannot start one: the pod says so rather than run unprivileged
        assert "unable to apply caps" in terminated.get("message", ""), terminated
        await delete_pod(http, name, ns=PRIVILEGED_NS)
        pytest.skip("this Docker engine cannot start privileged containers")
    log = (await http.get(f"/api/v1/namespaces/{PRIVILEGED_NS}/pods/{name}/log")).text
    assert int(log.split()[1], 16) > DOCKER_DEFAULT_CAP_EFF
    await delete_pod(http, name, ns=PRIVILEGED_NS)


async def test_host_pid_and_host_ipc_share_the_hosts_namespaces(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    script = "readlink /proc/self/ns/pid; readlink /proc/self/ns/ipc"
    host = pod_manifest(unique("hostns"), kubelet.node_name, [shell("c", script)],
                        restart_policy="Never", namespace=PRIVILEGED_NS)
    host["spec"].update(hostPID=True, hostIPC=True)
    lines = await run_to_completion(http, host)
    assert lines == [os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/ipc")]
    own = await run_to_completion(http, pod_manifest(
        unique("ownns"), kubelet.node_name, [shell("c", script)], restart_policy="Never",
        namespace=PRIVILEGED_NS))
    assert own[0] != os.readlink("/proc/self/ns/pid")
    assert own[1] != os.readlink("/proc/self/ns/ipc")


async def test_crashing_container_restarts_with_crash_loop_back_off(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("crash")
    pod = await create_pod(http, pod_manifest(name, kubelet.node_name,
                                              [shell("app", "echo crashing; exit 1")]))
    seen_back_off = False

    async def restarted_twice_in_back_off() -> bool:
        nonlocal seen_back_off
        current = await get_pod(http, name)
        seen_back_off |= waiting_reason(current, "app") == "CrashLoopBackOff"
        return seen_back_off and container_status(current, "app").get("restartCount", 0) >= 2

    await eventually(restarted_twice_in_back_off, timeout=90, interval=0.3,
                     what="CrashLoopBackOff and restartCount >= 2")
    current = await get_pod(http, name)
    last = container_status(current, "app")["lastState"]
    assert last["terminated"]["exitCode"] == 1 and last["terminated"]["reason"] == "Error"
    events = await wait_events(http, pod, "BackOff")
    back_off = [e for e in events if e["reason"] == "BackOff" and e["type"] == "Warning"]
    assert back_off and back_off[0]["message"] == (
        f"Back-off restarting failed container app in pod "
        f"{name}_{NS}({pod['metadata']['uid']})")
    await delete_pod(http, name)


async def test_unreachable_registry_gives_err_image_pull_then_back_off(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("pull")
    pod = await create_pod(http, pod_manifest(name, kubelet.node_name, [
        {"name": "app", "image": UNREACHABLE_IMAGE}]))
    reasons: list[str] = []  # every waiting reason written, in order (a watch misses none)
    try:
        async with asyncio.timeout(60):  # the pull fails at once; the back-off follows
            async for current in watch_pod(http, name):
                reason = waiting_reason(current, "app")
                if reason and (not reasons or reasons[-1] != reason):
                    reasons.append(reason)
                if "ErrImagePull" in reasons and \
                        "ImagePullBackOff" in reasons[reasons.index("ErrImagePull"):]:
                    break
    except TimeoutError:
        raise AssertionError(f"no ErrImagePull then ImagePullBackOff: {reasons}") from None
    assert reasons[0] == "ContainerCreating"
    current = await get_pod(http, name)
    assert current["status"]["phase"] == "Pending"
    events = await wait_events(http, pod, "Pulling", "Failed", "BackOff")
    messages = {(e["reason"], e["message"]) for e in events}
    assert ("Pulling", f'Pulling image "{UNREACHABLE_IMAGE}"') in messages
    assert ("Failed", "Error: ErrImagePull") in messages
    assert ("BackOff", f'Back-off pulling image "{UNREACHABLE_IMAGE}"') in messages
    assert any(r == "Failed" and m.startswith(f'Failed to pull image "{UNREACHABLE_IMAGE}": ')
               for r, m in messages)
    await delete_pod(http, name)


async def test_pod_is_container_creating_while_its_pull_is_stalled_and_deletes_at_once(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    registry = await StalledRegistry().start()
    try:
        name = unique("stalled")
        pod = await create_pod(http, pod_manifest(name, kubelet.node_name, [
            {"name": "app", "image": registry.image}]))

        async def creating_while_pulling() -> dict[str, Any]:
            if not registry.stalled:
                return {}
            current = await get_pod(http, name)
            pulling = registry.stalled > 0  # still, after the pod was read
            # The status that says the sandbox is up is queued just before the pull starts.
            sandbox_up = any(c["type"] == "PodReadyToStartContainers" and c["status"] == "True"
                             for c in current.get("status", {}).get("conditions") or ())
            return current if pulling and sandbox_up and waiting_reason(current, "app") else {}

        current = await eventually(creating_while_pulling, timeout=60,
                                   what="a status while the pull is in progress")
        status = current["status"]
        assert status["phase"] == "Pending"
        assert status["hostIP"] == "127.0.0.1" and status["startTime"]
        assert container_status(current, "app") == {
            "name": "app", "image": registry.image, "imageID": "", "ready": False,
            "started": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}
        conditions = {c["type"]: c for c in status["conditions"]}
        for type_ in ("Ready", "ContainersReady"):
            assert conditions[type_]["status"] == "False"
            assert conditions[type_]["reason"] == "ContainersNotReady"
            assert conditions[type_]["message"] == "containers with unready status: [app]"
        assert conditions["Initialized"]["status"] == "True"
        assert conditions["PodScheduled"]["status"] == "True"
        assert conditions["PodReadyToStartContainers"]["status"] == "True"  # sandbox is up
        assert await pod_status_cell(http, name) == "ContainerCreating"
        events = await wait_events(http, pod, "Pulling")
        assert ("Pulling", f'Pulling image "{registry.image}"') in {
            (e["reason"], e["message"]) for e in events}

        # The pull never ends by itself: the deletion must not wait for it.
        await delete_pod(http, name)

        async def pod_gone() -> bool:
            response = await http.get(f"/api/v1/namespaces/{NS}/pods/{name}")
            return response.status_code == 404

        # The registry never answers the manifest request: the pull cannot have ended.
        await eventually(pod_gone, timeout=60, what="the pod deleted during its pull")
        uid = pod["metadata"]["uid"]
        assert node_containers(kubelet.node_name, **{"io.kubernetes.pod.uid": uid}) == []
        assert "interrupting the sync in progress" in kubelet.log()
    finally:
        await registry.close()


async def test_containers_of_a_pod_share_localhost_and_logs_flow_through_the_apiserver(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("duo")
    server = shell("server", "mkdir -p /www && echo hello-from-server > /www/index.html "
                             "&& exec httpd -f -p 127.0.0.1:8080 -h /www")
    server["ports"] = [{"containerPort": 8080}]  # declared ports live on the sandbox
    client = shell("client", "until wget -q -O /tmp/page http://127.0.0.1:8080/; do sleep 0.2; "
                             "done; cat /tmp/page; i=0; trap 'exit 0' TERM; "
                             "while true; do echo tick-$i; i=$((i+1)); sleep 0.3; done")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [server, client]))
    await wait_running(http, name)
    log_path = f"/api/v1/namespaces/{NS}/pods/{name}/log"

    async def client_read_the_page() -> str:
        response = await http.get(log_path, params={"container": "client"})
        return response.text if "hello-from-server" in response.text else ""

    text = await eventually(client_read_the_page, what="the client's log to show the page")
    assert text.splitlines()[0] == "hello-from-server"

    ambiguous = await http.get(log_path)
    assert ambiguous.status_code == 400
    assert ambiguous.json()["message"] == (
        f"a container name must be specified for pod {name}, choose one of: [server client]")

    tail = await http.get(log_path, params={"container": "client", "tailLines": "1"})
    assert tail.status_code == 200 and len(tail.text.splitlines()) == 1

    stamped = await http.get(log_path, params={"container": "client", "tailLines": "1",
                                               "timestamps": "true"})
    assert stamped.text[:4].isdigit() and "Z " in stamped.text

    # follow: lines written after the request arrive on the open stream
    seen: list[str] = []
    async with http.stream("GET", log_path, params={"container": "client", "follow": "true",
                                                    "tailLines": "1"}) as stream:
        assert stream.status_code == 200
        async with asyncio.timeout(30):
            async for line in stream.aiter_lines():
                seen.append(line)
                if len(seen) >= 4:
                    break
    ticks = [int(line.removeprefix("tick-")) for line in seen if line.startswith("tick-")]
    assert len(ticks) == 4 and ticks == sorted(ticks) and ticks[-1] - ticks[0] == 3

    missing = await http.get(log_path, params={"container": "nope"})
    assert missing.status_code == 400
    await delete_pod(http, name)


async def test_host_network_pod_serves_on_the_node_loopback(http: httpx.AsyncClient,
                                                           kubelet: KubeletProcess) -> None:
    name = unique("hostnet")
    port = free_port()
    manifest = pod_manifest(name, kubelet.node_name, [shell(
        "web", f"mkdir -p /www && echo {name} > /www/index.html && "
               f"exec httpd -f -p 127.0.0.1:{port} -h /www")], namespace=PRIVILEGED_NS)
    manifest["spec"]["hostNetwork"] = True
    await create_pod(http, manifest)
    pod = await wait_running(http, name, ns=PRIVILEGED_NS)
    assert pod["status"]["podIP"] == "127.0.0.1"

    async def served() -> str:
        async with httpx.AsyncClient(timeout=5) as client:
            try:
                response = await client.get(f"http://127.0.0.1:{port}/")
            except httpx.HTTPError:
                return ""
            return response.text

    assert (await eventually(served, what="httpd on the host network")).strip() == name
    await delete_pod(http, name, ns=PRIVILEGED_NS)


async def test_delete_stops_and_removes_containers_then_the_pod(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    name = unique("gone")
    await create_pod(http, pod_manifest(name, kubelet.node_name, [shell("app", SERVE_FOREVER)]))
    pod = await wait_running(http, name)
    uid = pod["metadata"]["uid"]
    assert len(node_containers(kubelet.node_name, **{"io.kubernetes.pod.uid": uid})) == 2

    response = await http.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    assert response.status_code == 200, response.text

    async def pod_gone() -> bool:
        response = await http.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        return response.status_code == 404

    await eventually(pod_gone, timeout=60, what="the pod object to be deleted")
    assert node_containers(kubelet.node_name, **{"io.kubernetes.pod.uid": uid}) == []
    events = await wait_events(http, pod, "Killing")
    assert any(e["reason"] == "Killing" and e["message"] == "Stopping container app"
               for e in events)


async def test_orphans_are_removed_and_unrelated_containers_untouched(
        http: httpx.AsyncClient, kubelet: KubeletProcess) -> None:
    tag = unique("unrelated")
    unrelated = run_unrelated_container(tag, label=tag)
    # Looks like ours (our node's labels) but its pod does not exist: an orphan.
    orphan = run_container(f"{tag}-orphan", labels={
        "io.kubelite.managed": "true", "io.kubelite.node": kubelet.node_name,
        "io.kubernetes.pod.uid": "no-such-pod", "io.kubernetes.pod.name": "ghost",
        "io.kubernetes.pod.namespace": NS, "io.kubernetes.container.name": "x",
        "io.kubernetes.pod.terminationGracePeriod": "1"})
    try:
        async def orphan_removed() -> bool:
            return inspect_container(orphan) is None

        await eventually(orphan_removed, timeout=30, what="the orphan to be removed")
        info = inspect_container(unrelated)
        assert info is not None and info["State"]["Running"] is True
    finally:
        remove_container(unrelated)
        remove_container(orphan)


async def test_kubelet_restart_adopts_running_containers(
        http: httpx.AsyncClient, apiserver: ApiServer, docker_ready: None,
        tmp_path: Path) -> None:
    node = unique("restart-node")
    first = KubeletProcess(apiserver, tmp_path / "first", node_name=node).start()
    try:
        name = unique("keep")
        await create_pod(http, pod_manifest(name, node, [shell("app", SERVE_FOREVER)]))
        pod = await wait_running(http, name)
        before = sorted(c["Id"] for c in node_containers(node))
        assert len(before) == 2
        patched = await http.patch(f"/api/v1/nodes/{node}",
                                   content=json.dumps({"metadata": {"labels": {"team": "a"}}}),
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text

        lease = await eventually(lambda: node_lease_of(http, node), what="the node lease")

        first.kill()
        second = KubeletProcess(apiserver, tmp_path / "second", node_name=node).start()
        try:
            # Let the new kubelet sync the pod a few times (relist + resync).
            async def synced_again() -> bool:
                return f"{NS}/{name}: new pod worker" in second.log()

            await eventually(synced_again, what="the new kubelet to pick the pod up")

            async def lease_adopted() -> bool:
                current = await node_lease_of(http, node)
                return current["metadata"]["uid"] == lease["metadata"]["uid"] and (
                    parse_micro_time(current["spec"]["renewTime"])
                    > parse_micro_time(lease["spec"]["renewTime"]))

            await eventually(lease_adopted, what="the new kubelet to renew the same lease")
            await asyncio.sleep(3)
            after = sorted(c["Id"] for c in node_containers(node))
            assert after == before
            assert f"{NS}/{name}: started pod sandbox" not in second.log()
            assert "replacing leftover container" not in second.log()
            current = await wait_running(http, name)
            app = container_status(current, "app")
            assert app["restartCount"] == 0
            assert app["containerID"] == container_status(pod, "app")["containerID"]
            node_obj = (await http.get(f"/api/v1/nodes/{node}")).json()
            assert node_obj["metadata"]["labels"]["team"] == "a"
        finally:
            second.stop()  # SIGTERM: a kubelet that stops leaves its pods running
        running = [c for c in node_containers(node) if c["State"] == "running"]
        assert sorted(c["Id"] for c in running) == before

        third = KubeletProcess(apiserver, tmp_path / "third", node_name=node).start()
        try:
            await delete_pod(http, name)

            async def gone() -> bool:
                return node_containers(node) == []

            await eventually(gone, timeout=60, what="containers removed after delete")
        finally:
            third.stop()
    finally:
        first.stop()
        remove_node_containers(node)
