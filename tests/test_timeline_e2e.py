"""`kubectl timeline` end to end: a whole kubelite cluster (etcd, apiserver, scheduler, two
kubelets on Docker), pods created with the real kubectl, and the real plugin run through
kubectl's plugin mechanism (`kubectl timeline ...` finds `kubectl-timeline` on PATH).

Five stories: a scheduled pod, a nodeName pod (no scheduler lane), an unschedulable pod
(per-node reasons), an image that cannot be pulled (a closed loopback registry) and a
container that keeps crashing (CrashLoopBackOff with restarts)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import readme
from tests.docker_support import BUSYBOX_IMAGE, UNREACHABLE_IMAGE, docker_cluster
from tests.support import REPO, Kubectl, unique
from tests.test_kubectl import wait_for

pytestmark = pytest.mark.docker

VENV_BIN = REPO / ".venv" / "bin"


@dataclass
class Cluster:
    kubectl: Kubectl
    node1: str
    node2: str
    workdir: Path

    def create(self, name: str, spec: dict[str, Any]) -> str:
        return self.kubectl.apply_pod(name, spec)

    def timeline(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`kubectl timeline ARGS`, as a user runs it: kubectl on PATH next to the plugin,
        KUBECONFIG naming the admin kubeconfig (client certificate, cluster CA)."""
        result = subprocess.run(
            [str(VENV_BIN / "kubectl"), "timeline", *args], capture_output=True, text=True,
            timeout=60, env={"PATH": f"{VENV_BIN}:/usr/bin:/bin",
                             "HOME": str(self.workdir),
                             "KUBECONFIG": str(self.kubectl.kubeconfig)})
        if check:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    def pod(self, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", "pod", name, "-o", "json"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("timeline")
    node1, node2 = unique("tl-node1"), unique("tl-node2")
    with docker_cluster(workdir, (node1, node2)) as (_, kubectl):
        yield Cluster(kubectl, node1, node2, workdir)


def rows(output: str) -> list[str]:
    """The diagram's hop rows: `+12ms 3ms │ ├──▶ ... label`."""
    return [line for line in output.splitlines() if re.match(r"\s*~?\+\d", line)]


def labels(output: str) -> list[str]:
    return [re.split(r"[│┆├┤▶◀↻✗─ ]{3,}", row.strip())[-1] for row in rows(output)]


def arrow(row: str, lanes: str, source: str, target: str) -> bool:
    """Whether `row` draws an arrow from lane `source` to `target` (by header columns)."""
    a, b = lanes.index(source) + len(source) // 2, lanes.index(target) + len(target) // 2
    if a == b:
        return row[a] in "↻✗"
    lo, hi = min(a, b), max(a, b)
    return row[a] in "├┤" and all(c in "─▶◀✗" for c in row[lo + 1:hi])


def header(output: str) -> str:
    return next(line for line in output.splitlines() if "apiserver" in line and "docker" in line)


def kubelet_done(cluster: Cluster, name: str, reason: str) -> Callable[[], bool]:
    """Whether the kubelet's `reason` Event about `name` is there (events come after)."""
    def check() -> bool:
        out = cluster.kubectl("get", "events", "--field-selector",
                              f"involvedObject.name={name}", "-o",
                              "jsonpath={.items[*].reason}")
        return reason in out.split()
    return check


def running(cluster: Cluster, prefix: str, **spec: Any) -> str:
    """A sleeping busybox pod, Ready, and its `Started` Event written."""
    name = cluster.create(unique(prefix), {**spec, "containers": [{
        "name": "app", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]})
    cluster.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=90s")
    wait_for(kubelet_done(cluster, name, "Started"), what="the Started event")
    return name


def test_scheduled_pod_crosses_every_lane(cluster: Cluster) -> None:
    name = running(cluster, "tl-web")
    out = cluster.timeline(f"pod/{name}").stdout
    lanes = header(out)
    assert out.startswith(f"pod default/{name} on ")
    assert ": Ready after " in out.splitlines()[0]
    assert labels(out) == [
        "create pod", f"commit pod, rev {labels(out)[1].split()[-1]}",
        "watch: new unbound pod", f"filter, score: {cluster.pod(name)['spec']['nodeName']}",
        f"bind to {cluster.pod(name)['spec']['nodeName']}", labels(out)[5],
        f"watch: pod on {cluster.pod(name)['spec']['nodeName']}", "run pod sandbox",
        "image present (app)", "create container app", "start container app",
        "status: Ready", "commit status"]
    assert labels(out)[5].startswith("commit binding, rev ")
    hops = rows(out)
    for row, (source, target) in zip(hops, [
            ("client", "apiserver"), ("apiserver", "etcd"), ("etcd", "scheduler"),
            ("scheduler", "scheduler"), ("scheduler", "apiserver"), ("apiserver", "etcd"),
            ("etcd", "kubelet"), ("kubelet", "docker"), ("kubelet", "docker"),
            ("kubelet", "docker"), ("kubelet", "docker"), ("kubelet", "apiserver"),
            ("apiserver", "etcd")], strict=True):
        assert arrow(row, lanes, source, target), (row, source, target)
    # every measured hop has a millisecond time since the create; the binding a duration
    assert all(re.match(r"\s*\+\d+(\.\d)?ms|\s*\+\d+\.\d\ds", row) for row in hops[:11]), hops
    assert re.match(r"\s*\+\S+\s+\d", hops[4]), hops[4]
    # the revisions are etcd's: the binding's comes after the create's
    create_rev = int(labels(out)[1].split()[-1])
    bind_rev = int(labels(out)[5].split()[-1])
    assert 0 < create_rev < bind_rev


def test_node_name_pod_skips_the_scheduler(cluster: Cluster) -> None:
    name = running(cluster, "tl-pinned", nodeName=cluster.node1)
    out = cluster.timeline(f"pod/{name}", "-n", "default").stdout
    lanes = header(out)
    assert "scheduler skipped: spec.nodeName was set at create" in out
    assert not any(arrow(row, lanes, "scheduler", "scheduler") or "bind" in row
                   for row in rows(out))
    assert f"watch: pod on {cluster.node1}" in labels(out)
    # the skipped lane is drawn dotted all the way down
    column = lanes.index("scheduler") + len("scheduler") // 2
    assert {row[column] for row in rows(out)} <= {"┆", "─"}


def test_unschedulable_pod_shows_per_node_reasons(cluster: Cluster) -> None:
    name = cluster.create(unique("tl-nowhere"), {"nodeSelector": {"tl": "nowhere"},
                                                  "containers": [{"name": "app",
                                                                  "image": BUSYBOX_IMAGE}]})
    wait_for(kubelet_done(cluster, name, "FailedScheduling"), what="FailedScheduling")
    out = cluster.timeline(f"po/{name}").stdout
    assert "stopped: Unschedulable" in out.splitlines()[0]
    failed = [row for row in rows(out) if "✗" in row]
    assert len(failed) >= 1 and "filter: 0/2 nodes are available" in failed[0]
    for node in (cluster.node1, cluster.node2):
        assert f"{node}: didn't match Pod's node affinity/selector" in out
    assert not any("kubelet" in label or "watch: pod on" in label for label in labels(out))


def test_image_pull_failure_stops_at_docker(cluster: Cluster) -> None:
    name = cluster.create(unique("tl-nopull"), {"nodeName": cluster.node2, "containers": [{
        "name": "app", "image": UNREACHABLE_IMAGE}]})

    def pull_failed() -> bool:
        statuses = cluster.pod(name).get("status", {}).get("containerStatuses") or []
        return any(((s.get("state") or {}).get("waiting") or {}).get("reason") in
                   ("ErrImagePull", "ImagePullBackOff") for s in statuses)
    wait_for(pull_failed, timeout=90, what="ErrImagePull")
    wait_for(kubelet_done(cluster, name, "Failed"), what="the Failed event")
    out = cluster.timeline(f"pod/{name}", "-o", "text").stdout
    assert re.search(r"stopped: (ErrImagePull|ImagePullBackOff)", out.splitlines()[0])
    pull = [row for row in rows(out) if "✗ pull image (app)" in row]
    assert pull and arrow(pull[0], header(out), "kubelet", "docker")
    assert UNREACHABLE_IMAGE in out


def test_crash_loop_shows_restarts(cluster: Cluster) -> None:
    name = cluster.create(unique("tl-crash"), {"nodeName": cluster.node1, "containers": [{
        "name": "app", "image": BUSYBOX_IMAGE, "command": ["sh", "-c", "exit 3"]}]})

    def crash_looping() -> bool:
        statuses = cluster.pod(name).get("status", {}).get("containerStatuses") or []
        return any(((s.get("state") or {}).get("waiting") or {}).get("reason") ==
                   "CrashLoopBackOff" and s.get("restartCount", 0) >= 1 for s in statuses)
    wait_for(crash_looping, what="CrashLoopBackOff", timeout=120)
    wait_for(kubelet_done(cluster, name, "BackOff"), what="the BackOff event")
    out = cluster.timeline(f"pod/{name}").stdout
    assert "stopped: CrashLoopBackOff" in out.splitlines()[0]
    assert re.search(r"container app: CrashLoopBackOff, [1-9]\d* restart\(s\)", out)
    assert "(exit code 3)" in out
    assert any("✗ Back-off restarting failed container" in row for row in rows(out))


def test_mermaid_and_svg_of_a_real_pod(cluster: Cluster) -> None:
    name = running(cluster, "tl-doc", nodeName=cluster.node2)
    mermaid = cluster.timeline(f"pod/{name}", "-o", "mermaid").stdout
    assert mermaid.startswith("sequenceDiagram\n")
    assert "    kubelet->>docker: start container app (+" in mermaid
    assert "    Note over scheduler: skipped: spec.nodeName was set at create" in mermaid
    svg = cluster.timeline(f"pod/{name}", "-o", "svg").stdout
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert "start container app" in svg and svg.rstrip().endswith("</svg>")
    model = json.loads(cluster.timeline(f"pod/{name}", "-o", "json").stdout)
    assert (model["name"], model["node"], model["outcome"]) == (name, cluster.node2, "Ready")
    assert [h["target"] for h in model["hops"]][-3:] == ["docker", "apiserver", "etcd"]


def test_errors_are_kubectls(cluster: Cluster) -> None:
    missing = cluster.timeline("pod/does-not-exist", check=False)
    assert missing.returncode == 1
    assert missing.stderr == 'Error from server (NotFound): pods "does-not-exist" not found\n'
    wrong = cluster.timeline("deployment/web", check=False)
    assert (wrong.returncode, wrong.stderr) == (1, 'error: only pods have a timeline, not '
                                                   '"deployment"\n')
    env_less = subprocess.run([str(VENV_BIN / "kubectl-timeline"), "pod/x", "--kubeconfig",
                               str(cluster.workdir / "nope")], capture_output=True, text=True,
                              env={**os.environ, "HOME": str(cluster.workdir)})
    assert env_less.returncode == 1 and env_less.stderr.startswith("error: cannot read kubeconfig")


# --- the README's section, on this cluster ------------------------------------------------

def timings_out(text: str) -> str:
    """What differs from run to run in a timeline: times, durations, revisions."""
    # a FailedScheduling retried meanwhile: " (x3, last +2.01s)"
    text = re.sub(r" \(x\d+, last [^)]*\)", "", text)
    text = re.sub(r"(~?)\+\d+(\.\d+)?(ms|s)\b", r"\1+<t>", text)
    text = re.sub(r"\b\d+(\.\d+)?(ms|s)\b", "<d>", text)
    return re.sub(r"\brev \d+", "rev <n>", text)


def test_readme_timeline_section(cluster: Cluster) -> None:
    names = {"node1": cluster.node1, "node2": cluster.node2}
    back = {real: seed for seed, real in names.items()}
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(cluster.workdir),
           "KUBECONFIG": str(cluster.kubectl.kubeconfig)}
    examples = readme.examples("timeline")
    assert len(examples) >= 8
    drifted = []
    for example in examples:
        expected = [timings_out(line) for line in example.expected]
        deadline = time.monotonic() + 20
        while True:
            output = readme.run(example, replacements=names, cwd=REPO, env=env)
            actual = timings_out(readme.replace_all(output, back))
            # Events land a moment after the status `kubectl wait` waited for
            if readme.matches(expected, actual) or not example.command.startswith(
                    "kubectl timeline") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not readme.matches(expected, actual):
            drifted.append(f"$ {example.command}\n--- README says:\n"
                           + "\n".join(example.expected)
                           + f"\n--- actual:\n{readme.replace_all(output, back)}")
    assert not drifted, "README examples drifted:\n" + "\n\n".join(drifted)
