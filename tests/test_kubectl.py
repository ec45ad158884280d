"""The seeds' kubectl session, with the real kubectl against a whole kubelite cluster.

The module runs its own etcd, apiserver, scheduler and two kubelets (Docker), so that
`kubectl get nodes` lists exactly its two nodes. The nodes get unique names: a developer's
`make up` cluster (node1, node2) on the same Docker is never touched. Tests compare
columns and key cells, never ages.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from tests.docker_support import BUSYBOX_IMAGE, UNREACHABLE_IMAGE, docker_cluster
from tests.support import (
    KUBECTL,
    ApiServer,
    Kubectl,
    table_lines,
    unique,
)

pytestmark = pytest.mark.docker

T = TypeVar("T")
# busybox httpd in the seeds' nginx role: serves on port 80, exits at once on SIGTERM.
HTTPD = ["sh", "-c", "trap 'exit 0' TERM; httpd -f -v -p 80 -h /var/www & wait"]
POD_COLUMNS = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
WIDE_POD_COLUMNS = [*POD_COLUMNS, "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]


@dataclass
class Cluster:
    apiserver: ApiServer
    kubectl: Kubectl
    node1: str
    node2: str
    workdir: Path

    def manifest(self, name: str, documents: list[dict[str, object]]) -> Path:
        path = self.workdir / name
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("kubectl-cluster")
    node1, node2 = unique("node1"), unique("node2")
    # deleted namespaces are emptied by the controller-manager
    with docker_cluster(workdir, (node1, node2),
                        controllers="namespace-controller") as (apiserver, kubectl):
        yield Cluster(apiserver, kubectl, node1, node2, workdir)


def wait_for(check: Callable[[], T | None], *, timeout: float = 60, what: str) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def pod_row(kubectl: Kubectl, name: str, *flags: str) -> list[str]:
    header, row = table_lines(kubectl("get", "pod", name, *flags))
    assert header[:5] == POD_COLUMNS
    return row


def wait_status(kubectl: Kubectl, name: str, status: str, timeout: float = 60) -> list[str]:
    def current() -> list[str] | None:
        row = pod_row(kubectl, name)
        return row if row[2] == status else None

    return wait_for(current, timeout=timeout, what=f"pod {name} to be {status}")


def describe_events(output: str) -> list[list[str]]:
    """The rows of the Events table at the end of `kubectl describe` (Type Reason Age ...)."""
    lines = output.split("\nEvents:")[1].strip().splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["Type", "Reason", "Age", "From", "Message"]
    return [re.split(r"\s{2,}", line.strip(), maxsplit=4) for line in lines[2:]]


def kubelet_events_written(kubectl: Kubectl, name: str) -> list[list[str]]:
    """`kubectl describe pod`'s Events once Started is among them: the kubelet writes its
    Events from a queue, in no fixed order with the status that made the pod Running."""
    def started() -> list[list[str]] | None:
        events = describe_events(kubectl("describe", "pod", name))
        return events if "Started" in [e[1] for e in events] else None
    return wait_for(started, what=f"the Started event of {name}")


def pod(name: str, *, node_name: str | None = None, node_selector: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, command: list[str] | None = None,
        image: str = BUSYBOX_IMAGE, restart_policy: str | None = None,
        grace: int | None = None) -> dict[str, object]:
    spec: dict[str, object] = {}
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    container: dict[str, object] = {"name": "nginx", "image": image}
    if command:
        container["command"] = command
    spec["containers"] = [container]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": "nginx"}}, "spec": spec}


def test_nodes_labels_and_cordon(cluster: Cluster) -> None:
    kubectl, node1, node2 = cluster.kubectl, cluster.node1, cluster.node2
    rows = table_lines(kubectl("get", "nodes"))
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert sorted((r[0], r[1], r[2]) for r in rows[1:]) == [
        (node1, "Ready", "<none>"), (node2, "Ready", "<none>")]
    assert kubectl("label", "nodes", node1, "shuai=a") == f"node/{node1} labeled\n"
    assert kubectl("label", "nodes", node2, "shuai=b") == f"node/{node2} labeled\n"
    header, *rows = table_lines(kubectl("get", "nodes", "--show-labels"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "LABELS"]
    labels = {row[0]: row[5].split(",") for row in rows}
    assert "shuai=a" in labels[node1] and f"kubernetes.io/hostname={node1}" in labels[node1]
    assert "shuai=b" in labels[node2]
    refused = kubectl.run("label", "nodes", node2, "shuai=c", check=False)
    assert refused.returncode == 1
    assert refused.stderr == "error: 'shuai' already has a value (b), and --overwrite is false\n"
    assert kubectl("label", "nodes", node2, "shuai=c", "--overwrite") == f"node/{node2} labeled\n"
    assert kubectl("label", "nodes", node2, "shuai-") == f"node/{node2} unlabeled\n"
    assert kubectl("label", "nodes", node2, "shuai=b") == f"node/{node2} labeled\n"
    assert kubectl("cordon", node1) == f"node/{node1} cordoned\n"
    header, *rows = table_lines(kubectl("get", "nodes", "-o", "wide"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP",
                      "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    wide = {row[0]: row for row in rows}
    assert wide[node1][1] == "Ready,SchedulingDisabled"
    assert wide[node2][5:7] == ["127.0.0.1", "<none>"]
    assert wide[node2][9].startswith("docker://")
    assert kubectl("uncordon", node1) == f"node/{node1} uncordoned\n"
    assert table_lines(kubectl("get", "node", node1))[1][1] == "Ready"
    described = kubectl("describe", "node", node2)
    assert re.search(rf"^Name:\s+{node2}$", described, re.M)
    assert re.search(r"^\s+shuai=b$", described, re.M)


def test_node_leases(cluster: Cluster) -> None:
    """Each kubelet holds a Lease named after its node; `describe node` shows it."""
    kubectl, node1, node2 = cluster.kubectl, cluster.node1, cluster.node2

    def both_leases() -> list[list[str]] | None:
        rows = table_lines(kubectl("get", "leases", "-A"))
        return rows if len(rows) == 4 else None  # and the scheduler's leader election lease

    rows = wait_for(both_leases, what="both node leases")
    assert rows[0] == ["NAMESPACE", "NAME", "HOLDER", "AGE"]
    assert sorted(row[:3] for row in rows[1:] if row[0] == "kube-node-lease") == [
        ["kube-node-lease", node1, node1], ["kube-node-lease", node2, node2]]
    assert [row[:2] for row in rows[1:] if row[0] != "kube-node-lease"] == [
        ["kube-system", "kube-scheduler"]]
    lease = yaml.safe_load(kubectl("get", "lease", "-n", "kube-node-lease", node1, "-o", "yaml"))
    assert (lease["apiVersion"], lease["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert lease["spec"]["holderIdentity"] == node1
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lease["spec"]["renewTime"])
    [owner] = lease["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("v1", "Node", node1)
    described = kubectl("describe", "node", node1)
    assert re.search(rf"^Lease:\n  HolderIdentity:  {node1}\n  AcquireTime:     <unset>\n"
                     r"  RenewTime:       \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000$",
                     described, re.M), described


def test_seed_node_name_pod(cluster: Cluster) -> None:
    """Seed 1: nodeName skips the scheduler; its events are the kubelet's only."""
    kubectl = cluster.kubectl
    manifest = cluster.manifest("nodename.yaml", [
        pod("pod-example", node_name=cluster.node1, command=HTTPD)])
    assert kubectl("create", "-f", str(manifest)) == "pod/pod-example created\n"
    row = wait_status(kubectl, "pod-example", "Running")
    assert row[:4] == ["pod-example", "1/1", "Running", "0"]
    rows = table_lines(kubectl("get", "pods"))
    assert rows[0] == POD_COLUMNS
    assert ["pod-example", "1/1", "Running", "0"] in [r[:4] for r in rows[1:]]
    header, row = table_lines(kubectl("get", "pods", "pod-example", "-o", "wide"))
    assert header == WIDE_POD_COLUMNS
    assert row[5] != "<none>" and row[6:] == [cluster.node1, "<none>", "<none>"]
    events = kubelet_events_written(kubectl, "pod-example")
    assert [e[1] for e in events] == ["Pulled", "Created", "Started"]
    assert all(e[0] == "Normal" and e[3] == "kubelet" for e in events)
    assert events[0][4].endswith(f'Container image "{BUSYBOX_IMAGE}" already present on '
                                 'machine')
    assert events[2][4].endswith("Started container nginx")
    deleted = kubectl.run("delete", "pod", "pod-example")
    assert deleted.stdout == 'pod "pod-example" deleted from default namespace\n'
    gone = kubectl.run("get", "pod", "pod-example", check=False)
    assert gone.stderr == 'Error from server (NotFound): pods "pod-example" not found\n'


def test_seed_node_selector_pod(cluster: Cluster) -> None:
    """Seed 2: nodeSelector shuai=b goes through the scheduler to the node labelled so."""
    kubectl, node2 = cluster.kubectl, cluster.node2
    manifest = cluster.manifest("nodeSelector.yaml", [
        pod("pod-example", node_selector={"shuai": "b"}, command=HTTPD)])
    assert kubectl("apply", "-f", str(manifest)) == "pod/pod-example created\n"
    wait_status(kubectl, "pod-example", "Running")
    assert pod_row(kubectl, "pod-example", "-o", "wide")[6] == node2
    events = kubelet_events_written(kubectl, "pod-example")
    assert events[0][:2] == ["Normal", "Scheduled"]
    assert events[0][3:] == ["default-scheduler",
                             f"Successfully assigned default/pod-example to {node2}"]
    assert [e[1] for e in events[1:]] == ["Pulled", "Created", "Started"]

    assert kubectl("apply", "-f", str(manifest)) == "pod/pod-example unchanged\n"
    relabelled = cluster.manifest("relabelled.yaml", [
        pod("pod-example", node_selector={"shuai": "b"}, command=HTTPD,
            labels={"app": "nginx", "tier": "web"})])
    assert kubectl("apply", "-f", str(relabelled)) == "pod/pod-example configured\n"
    assert kubectl("get", "pods", "-l", "tier=web", "-o", "name") == "pod/pod-example\n"
    assert kubectl("get", "pods", "-l", "tier=db", "-o", "name") == ""
    on_node = table_lines(kubectl("get", "pods", "--field-selector", f"spec.nodeName={node2}"))
    assert [r[0] for r in on_node[1:]] == ["pod-example"]
    everywhere = table_lines(kubectl("get", "pods", "-A"))
    assert everywhere[0] == ["NAMESPACE", *POD_COLUMNS]
    assert ["default", "pod-example", "1/1", "Running"] in [r[:4] for r in everywhere[1:]]
    as_yaml = yaml.safe_load(kubectl("get", "pod", "pod-example", "-o", "yaml"))
    assert as_yaml["spec"]["nodeName"] == node2
    assert as_yaml["metadata"]["labels"] == {"app": "nginx", "tier": "web"}
    as_json = yaml.safe_load(kubectl("get", "pod", "pod-example", "-o", "json"))
    assert as_json["status"]["phase"] == "Running"
    assert kubectl("get", "pod", "pod-example", "-o",
                   "jsonpath={.spec.containers[0].image}") == BUSYBOX_IMAGE

    immutable = cluster.manifest("moved.yaml", [
        pod("pod-example", node_selector={"shuai": "a"}, command=HTTPD)])
    refused = kubectl.run("apply", "-f", str(immutable), check=False)
    assert refused.returncode == 1
    assert 'The Pod "pod-example" is invalid: spec: Forbidden: pod updates may not change ' \
           "fields other than `spec.containers[*].image`" in refused.stderr

    header, *rows = table_lines(kubectl("get", "events", "--field-selector",
                                        "involvedObject.name=pod-example"))
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert {"Scheduled", "Started"} <= {row[2] for row in rows}
    assert {row[3] for row in rows} == {"pod/pod-example"}

    deleted = kubectl.run("delete", "-f", str(manifest))
    assert deleted.stdout == 'pod "pod-example" deleted from default namespace\n'
    assert kubectl("get", "pods", "pod-example", "--ignore-not-found") == ""


def test_status_column(cluster: Cluster) -> None:
    """STATUS shows what kubectl shows on Kubernetes, for each way a pod can be."""
    kubectl = cluster.kubectl
    manifest = cluster.manifest("statuses.yaml", [
        pod("st-pull", image=UNREACHABLE_IMAGE),
        pod("st-crash", command=["sh", "-c", "echo boom; exit 1"]),
        pod("st-done", command=["sh", "-c", "echo done"], restart_policy="Never"),
        pod("st-error", command=["sh", "-c", "exit 3"], restart_policy="Never"),
        pod("st-nowhere", node_selector={"disktype": "ssd"}),
        pod("st-stubborn", command=["sh", "-c", "trap '' TERM; sleep 3600 & wait; sleep 3600"],
            grace=60),
    ])
    kubectl("apply", "-f", str(manifest))
    try:
        wait_status(kubectl, "st-done", "Completed")
        wait_status(kubectl, "st-error", "Error")
        assert wait_status(kubectl, "st-pull", "ImagePullBackOff")[1] == "0/1"
        crash = wait_status(kubectl, "st-crash", "CrashLoopBackOff")
        assert re.fullmatch(r"[1-9]\d* \(\d+s ago\)", crash[3])
        assert kubectl("logs", "st-crash", "--previous") == "boom\n"
        assert pod_row(kubectl, "st-nowhere")[2] == "Pending"
        scheduling = describe_events(kubectl("describe", "pod", "st-nowhere"))
        assert scheduling[-1][:2] == ["Warning", "FailedScheduling"]
        assert scheduling[-1][4] == ("0/2 nodes are available: 2 node(s) didn't match Pod's "
                                     "node affinity/selector. preemption: 0/2 nodes are "
                                     "available: 2 Preemption is not helpful for scheduling..")
        pull_events = describe_events(kubectl("describe", "pod", "st-pull"))
        assert ["Warning", "Failed"] in [e[:2] for e in pull_events]
        assert any(e[4].endswith("Error: ErrImagePull") for e in pull_events)
        wait_status(kubectl, "st-stubborn", "Running")
        kubectl("delete", "pod", "st-stubborn", "--wait=false")
        assert pod_row(kubectl, "st-stubborn")[2] == "Terminating"
    finally:
        kubectl.run("delete", "-f", str(manifest), "--grace-period=0", "--force",
                    check=False)


def test_errors_a_user_can_act_on(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    missing = kubectl.run("get", "pod", "nope", check=False)
    assert (missing.returncode, missing.stderr) == (
        1, 'Error from server (NotFound): pods "nope" not found\n')
    unknown = cluster.manifest("unknown-field.yaml", [pod("bad-field")])
    text = unknown.read_text().replace("  - name: nginx\n", "  - name: nginx\n    imagePolicy: x\n")
    unknown.write_text(text)
    refused = kubectl.run("create", "-f", str(unknown), check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        f'Error from server (BadRequest): error when creating "{unknown}": Pod in version "v1" '
        'cannot be handled as a Pod: strict decoding error: unknown field '
        '"spec.containers[0].imagePolicy"\n')
    bad_name = cluster.manifest("bad-name.yaml", [pod("Bad_Name")])
    invalid = kubectl.run("create", "-f", str(bad_name), check=False)
    assert invalid.returncode == 1
    assert invalid.stderr.startswith(
        'The Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase '
        "RFC 1123 subdomain must consist of lower case alphanumeric characters")
    nowhere = cluster.manifest("twice.yaml", [pod("twice", node_selector={"disktype": "x"})])
    kubectl("create", "-f", str(nowhere))
    try:
        again = kubectl.run("create", "-f", str(nowhere), check=False)
        assert again.stderr == (f'Error from server (AlreadyExists): error when creating '
                                f'"{nowhere}": pods "twice" already exists\n')
    finally:
        kubectl.run("delete", "pod", "twice", "--grace-period=0", "--force", check=False)


class LineReader:
    """A background kubectl whose stdout lines arrive on a queue."""

    def __init__(self, kubectl: Kubectl, *args: str) -> None:
        self.args = args
        self.process = subprocess.Popen(
            [str(KUBECTL), "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
             str(kubectl.cache_dir), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, predicate: Callable[[str], bool], timeout: float = 60) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if predicate(line):
                return seen
        raise AssertionError(f"kubectl {' '.join(self.args)} never printed the line; "
                             f"got {seen}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def test_run_watch_and_logs(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    watcher = LineReader(kubectl, "get", "pods", "-w")
    try:
        created = kubectl("run", "web", f"--image={BUSYBOX_IMAGE}", "--command", "--", "sh",
                          "-c", "echo hello; echo world; exec sleep 3600")
        assert created == "pod/web created\n"
        lines = watcher.until(lambda line: line.split()[:3] == ["web", "1/1", "Running"])
        assert re.split(r"\s{2,}", lines[0].strip()) == POD_COLUMNS
    finally:
        watcher.stop()
    try:
        # Both lines are printed right after the start that made the pod Running.
        wait_for(lambda: kubectl("logs", "web") == "hello\nworld\n", timeout=30,
                 what="both lines in the log")
        assert kubectl("logs", "web", "-c", "web", "--tail=1") == "world\n"
        follower = LineReader(kubectl, "logs", "-f", "web")
        try:
            assert follower.until(lambda line: line == "world") == ["hello", "world"]
        finally:
            follower.stop()
    finally:
        kubectl.run("delete", "pod", "web", "--grace-period=0", "--force", check=False)


def test_namespaces(cluster: Cluster) -> None:
    """`kubectl create namespace` sends protobuf; deleting one empties it, then it is gone."""
    kubectl = cluster.kubectl
    assert kubectl("create", "namespace", "team-a") == "namespace/team-a created\n"
    rows = table_lines(kubectl("get", "namespaces"))
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert ["team-a", "Active"] in [row[:2] for row in rows[1:]]
    kubectl("run", "short", "-n", "team-a", "--image=kubelite/busybox:1.35", "--",
            "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait")
    kubectl("wait", "-n", "team-a", "--for=condition=Ready", "pod/short", "--timeout=60s")
    assert kubectl("delete", "namespace", "team-a") == 'namespace "team-a" deleted\n'
    gone = kubectl.run("get", "namespace", "team-a", check=False)
    assert gone.stderr == 'Error from server (NotFound): namespaces "team-a" not found\n'
    refused = kubectl.run("delete", "namespace", "default", check=False)
    assert refused.stderr == ('Error from server (Forbidden): namespaces "default" is forbidden: '
                              'this namespace may not be deleted\n')
