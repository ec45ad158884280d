"""Deployments end to end with the real kubectl: create, rollout status, scale, set image
(a rolling update), rollout undo and a cascading delete, on real kubelets and the real
scheduler against an apiserver of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cm_support import ControllerManagerProcess
from tests.docker_support import KubeletProcess, ensure_docker, remove_node_containers
from tests.support import ApiServer, Etcd, Kubectl, SchedulerProcess, eventually, unique


@dataclass
class Cluster:
    apiserver: ApiServer
    kubectl: Kubectl
    node: str


@pytest.fixture(scope="module")
def cluster(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ensure_docker()
    workdir = Path(tmp_path_factory.mktemp("cm-deploy"))
    apiserver = ApiServer(etcd, workdir, name="apiserver-cm-deploy",
                          extra_args=["--etcd-prefix", f"/{unique('cm-deploy')}"]).start()
    node = unique("deploy-node")
    scheduler = SchedulerProcess(apiserver, workdir, port=0, leader_elect=False).start()
    kubelet = KubeletProcess(apiserver, workdir, node_name=node).start()
    cm = ControllerManagerProcess(apiserver, workdir).start()
    try:
        yield Cluster(apiserver, Kubectl(apiserver.url, workdir / "kubectl"), node)
    finally:
        cm.stop()
        kubelet.stop()
        scheduler.stop()
        apiserver.stop()
        remove_node_containers(node)


async def running_pods(cluster: Cluster, app: str) -> list[str]:
    async with cluster.apiserver.client() as api:
        answer = await api.get("/api/v1/namespaces/default/pods",
                               params={"labelSelector": f"app={app}"})
    return [p["spec"]["containers"][0]["image"] for p in answer.json()["items"]
            if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


async def test_create_rollout_scale_set_image_undo_delete(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    name = unique("web")
    kubectl("create", "deployment", name, "--image=kubelite/busybox:1.35", "--replicas=3",
            "--", "httpd", "-f")
    out = kubectl.run("rollout", "status", f"deployment/{name}", "--timeout=120s").stdout
    assert f'deployment "{name}" successfully rolled out' in out
    assert len(await running_pods(cluster, name)) == 3
    table = kubectl("get", "deployment", name).split("\n")[1].split()
    assert table[:4] == [name, "3/3", "3", "3"], table

    kubectl("scale", f"deployment/{name}", "--replicas=2")
    kubectl("rollout", "status", f"deployment/{name}", "--timeout=60s")

    async def two() -> bool:
        return len(await running_pods(cluster, name)) == 2
    await eventually(two, timeout=60, what="2 pods after the scale")

    # A new template (an env var: no second image can be pulled here): a rolling update.
    kubectl("set", "env", f"deployment/{name}", "ROLL=1")
    out = kubectl.run("rollout", "status", f"deployment/{name}", "--timeout=120s").stdout
    assert "successfully rolled out" in out
    rss = kubectl("get", "rs", "-l", f"app={name}", "-o",
                  "jsonpath={range .items[*]}{.metadata.annotations.deployment\\.kubernetes"
                  "\\.io/revision}={.spec.replicas} {end}").split()
    assert sorted(rss) == ["1=0", "2=2"], rss
    history = kubectl("rollout", "history", f"deployment/{name}")
    assert "1" in history and "2" in history
    events = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}")
    assert "ScalingReplicaSet" in events and "Scaled up replica set" in events
    assert "Scaled down replica set" in events

    kubectl("rollout", "undo", f"deployment/{name}")
    kubectl("rollout", "status", f"deployment/{name}", "--timeout=120s")
    rss = kubectl("get", "rs", "-l", f"app={name}", "-o",
                  "jsonpath={range .items[*]}{.metadata.annotations.deployment\\.kubernetes"
                  "\\.io/revision}={.spec.replicas} {end}").split()
    assert sorted(rss) == ["2=0", "3=2"], rss

    kubectl("delete", "deployment", name, "--wait=true", "--timeout=120s")

    async def no_pods() -> bool:
        return await running_pods(cluster, name) == [] and kubectl(
            "get", "rs", "-l", f"app={name}", "-o", "name").strip() == ""
    await eventually(no_pods, timeout=120, what="the cascade to remove rs and pods")


async def test_kubectl_create_job_and_wait_for_complete(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    name = unique("hello")
    kubectl("create", "job", name, "--image=kubelite/busybox:1.35", "--", "echo", "hello")
    kubectl("wait", "--for=condition=complete", f"job/{name}", "--timeout=120s")
    status = kubectl("get", "job", name, "-o", "jsonpath={.status.succeeded} "
                     "{.status.active} {.status.conditions[*].type}")
    assert status.split() == ["1", "0", "SuccessCriteriaMet", "Complete"], status
    assert "hello" in kubectl("logs", f"job/{name}")
    events = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}")
    assert "SuccessfulCreate" in events and "Completed" in events
    table = kubectl("get", "job", name).split("\n")[1].split()
    assert table[:3] == [name, "Complete", "1/1"], table


def job_manifest(name: str, command: str, *, restart_policy: str = "Never",
                 **spec: object) -> str:
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                       "spec": {**spec, "template": {"spec": {
                           "restartPolicy": restart_policy, "terminationGracePeriodSeconds": 1,
                           "containers": [{"name": "main", "image": "kubelite/busybox:1.35",
                                           "command": ["sh", "-c", command]}]}}}})


async def test_an_indexed_job_runs_each_index_once_then_its_ttl_deletes_it(
        cluster: Cluster) -> None:
    """completionMode Indexed: each pod reads its index from JOB_COMPLETION_INDEX (the
    downward API env the controller adds); once complete, ttlSecondsAfterFinished deletes
    the Job and, cascading, its pods."""
    kubectl = cluster.kubectl
    name = unique("indexed")
    kubectl.run("apply", "-f", "-", stdin=job_manifest(
        name, "echo index=$JOB_COMPLETION_INDEX host=$(hostname)", completions=3,
        parallelism=3, completionMode="Indexed", ttlSecondsAfterFinished=3))
    kubectl("wait", "--for=condition=complete", f"job/{name}", "--timeout=120s")
    status = kubectl("get", "job", name, "-o", "jsonpath={.status.succeeded} "
                     "{.status.completedIndexes}")
    assert status.split() == ["3", "0-2"], status
    logs = kubectl("logs", "-l", f"batch.kubernetes.io/job-name={name}", "--prefix=false")
    assert sorted(line for line in logs.splitlines() if line) == [
        f"index={i} host={name}-{i}" for i in range(3)], logs

    async def gone() -> bool:
        return (kubectl.run("get", "job", name, check=False).returncode != 0
                and kubectl("get", "pods", "-l", f"batch.kubernetes.io/job-name={name}",
                            "-o", "name").strip() == "")
    await eventually(gone, timeout=60, what="the TTL-after-finished controller's delete")


async def test_a_failing_job_stops_at_its_backoff_limit(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    name = unique("failing")
    kubectl.run("apply", "-f", "-", stdin=job_manifest(name, "exit 3", backoffLimit=1))
    kubectl("wait", "--for=condition=failed", f"job/{name}", "--timeout=120s")
    failed = json.loads(kubectl("get", "job", name, "-o", "json"))["status"]
    assert failed["failed"] == 2 and failed.get("active", 0) == 0, failed
    condition = next(c for c in failed["conditions"] if c["type"] == "Failed")
    assert (condition["reason"], condition["message"]) == (
        "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    events = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}")
    assert "BackoffLimitExceeded" in events


async def test_container_restarts_under_on_failure_count_against_the_backoff_limit(
        cluster: Cluster) -> None:
    """restartPolicy OnFailure: the kubelet restarts the failing container in place, the
    controller creates no new pod, and the restart reaching backoffLimit fails the Job
    and deletes its pod."""
    kubectl = cluster.kubectl
    name = unique("onfailure")
    kubectl.run("apply", "-f", "-", stdin=job_manifest(name, "exit 3", backoffLimit=1,
                                                        restart_policy="OnFailure"))
    kubectl("wait", "--for=condition=failed", f"job/{name}", "--timeout=120s")
    status = json.loads(kubectl("get", "job", name, "-o", "json"))["status"]
    condition = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (condition["reason"], condition["message"]) == (
        "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    events = json.loads(kubectl("get", "events", "--field-selector",
                                f"involvedObject.name={name}", "-o", "json"))["items"]
    created = [e for e in events if e["reason"] == "SuccessfulCreate"]
    assert len(created) == 1 and created[0]["count"] == 1, created  # one pod, restarted
    pod_name = created[0]["message"].removeprefix("Created pod: ")
    pod_events = json.loads(kubectl("get", "events", "--field-selector",
                                    f"involvedObject.name={pod_name}", "-o", "json"))["items"]
    starts = sum(e["count"] for e in pod_events if e["reason"] == "Started")
    assert starts >= 2 or any(e["reason"] == "BackOff" for e in pod_events), pod_events

    async def pod_gone() -> bool:
        return kubectl("get", "pods", "-l", f"batch.kubernetes.io/job-name={name}",
                       "-o", "name").strip() == ""
    await eventually(pod_gone, timeout=60, what="the failed job's pod to be deleted")


async def test_a_suspended_job_runs_nothing_until_resumed_and_suspending_deletes_its_pods(
        cluster: Cluster) -> None:
    """spec.suspend (kube's Job suspension): a Job created suspended creates no pod and
    says so (condition Suspended, event Suspended); resumed, it starts its pod (JobResumed,
    event Resumed, startTime set); suspended again, its running pod is deleted."""
    kubectl = cluster.kubectl
    name = unique("suspended")
    kubectl.run("apply", "-f", "-", stdin=job_manifest(name, "sleep 300", suspend=True))
    kubectl("wait", "--for=condition=suspended", f"job/{name}", "--timeout=60s")
    job = json.loads(kubectl("get", "job", name, "-o", "json"))
    condition = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True", "JobSuspended", "Job suspended")
    assert "startTime" not in job["status"]
    selector = f"batch.kubernetes.io/job-name={name}"
    assert kubectl("get", "pods", "-l", selector, "-o", "name").strip() == ""
    assert kubectl("get", "job", name, "--no-headers").split()[1] == "Suspended"

    kubectl("patch", "job", name, "--type=merge", "-p", '{"spec":{"suspend":false}}')

    async def running_pod() -> str | None:
        pods = kubectl("get", "pods", "-l", selector, "-o",
                       "jsonpath={range .items[*]}{.status.phase}{end}")
        return pods if pods == "Running" else None
    await eventually(running_pod, timeout=90, what="the resumed job's pod to run")
    job = json.loads(kubectl("get", "job", name, "-o", "json"))
    condition = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "JobResumed", "Job resumed")
    assert job["status"]["startTime"]

    kubectl("patch", "job", name, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    kubectl("wait", "--for=condition=suspended", f"job/{name}", "--timeout=60s")

    async def no_pods() -> bool:
        return kubectl("get", "pods", "-l", selector, "-o", "name").strip() == ""
    await eventually(no_pods, timeout=60, what="the suspended job's pod to be deleted")
    events = json.loads(kubectl("get", "events", "--field-selector",
                                f"involvedObject.name={name}", "-o", "json"))["items"]
    said = {(e["reason"], e["message"]): e["count"] for e in events}
    assert said[("Suspended", "Job suspended")] == 2 and said[("Resumed", "Job resumed")] == 1, \
        said
    assert ("SuccessfulDelete", f"Deleted pod: {job_pod(events)}") in said
    kubectl("delete", "job", name, "--wait=false")


def job_pod(events: list[dict[str, object]]) -> str:
    created = next(e for e in events if e["reason"] == "SuccessfulCreate")
    return str(created["message"]).removeprefix("Created pod: ")


async def test_a_job_past_its_active_deadline_fails_and_its_pods_go(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    name = unique("deadline")
    kubectl.run("apply", "-f", "-", stdin=job_manifest(name, "sleep 300",
                                                        activeDeadlineSeconds=3))
    kubectl("wait", "--for=condition=failed", f"job/{name}", "--timeout=120s")
    status = json.loads(kubectl("get", "job", name, "-o", "json"))["status"]
    condition = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (condition["reason"], condition["message"]) == (
        "DeadlineExceeded", "Job was active longer than specified deadline")

    async def no_pods() -> bool:
        return kubectl("get", "pods", "-l", f"batch.kubernetes.io/job-name={name}",
                       "-o", "name").strip() == ""
    await eventually(no_pods, timeout=60, what="the job's running pod to be deleted")


async def test_rollout_status_reports_the_exceeded_progress_deadline(cluster: Cluster) -> None:
    """Pods no node can take never become available: after progressDeadlineSeconds the
    controller sets Progressing=False ProgressDeadlineExceeded and `kubectl rollout
    status` fails as kube's does."""
    kubectl = cluster.kubectl
    name = unique("stuck")
    manifest = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 2, "progressDeadlineSeconds": 3,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "nodeSelector": {"kubelite.test/no-such-node": "true"},
                     "containers": [{"name": "web", "image": "kubelite/busybox:1.35",
                                     "command": ["httpd", "-f"]}]}}}}
    kubectl.run("apply", "-f", "-", stdin=json.dumps(manifest))
    result = kubectl.run("rollout", "status", f"deployment/{name}", "--timeout=60s",
                         check=False)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert f'error: deployment "{name}" exceeded its progress deadline' in result.stderr
    async with cluster.apiserver.client() as api:
        got = (await api.get(f"/apis/apps/v1/namespaces/default/deployments/{name}")).json()
    progressing = {c["type"]: c for c in got["status"]["conditions"]}["Progressing"]
    rs = kubectl("get", "rs", "-l", f"app={name}", "-o", "jsonpath={.items[0].metadata.name}")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "False", "ProgressDeadlineExceeded", f'ReplicaSet "{rs}" has timed out progressing.')
    kubectl("delete", "deployment", name)
