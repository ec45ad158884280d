"""What kubectl 1.37 sends as protobuf, end to end on a one-node cluster (Docker): `kubectl
drain` (Evictions with DeleteOptions, server-side dry run included) and `kubectl debug`
(a Pod)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.docker_support import BUSYBOX_IMAGE, docker_cluster
from tests.support import ApiServer, Kubectl, unique
from tests.test_kubectl import pod, wait_status

pytestmark = pytest.mark.docker

SLEEP = ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
ENFORCE = "pod-security.kubernetes.io/enforce"


@dataclass
class Cluster:
    apiserver: ApiServer
    kubectl: Kubectl
    node: str
    workdir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("kubectl-protobuf")
    node = unique("pbnode")
    with docker_cluster(workdir, (node,)) as (apiserver, kubectl):
        yield Cluster(apiserver, kubectl, node, workdir)


def create(cluster: Cluster, name: str, **kwargs: object) -> None:
    path = cluster.workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(pod(name, command=SLEEP, **kwargs)))  # type: ignore[arg-type]
    cluster.kubectl("apply", "-f", str(path))


def pod_names(kubectl: Kubectl) -> list[str]:
    return sorted(kubectl("get", "pods", "-o", "jsonpath={.items[*].metadata.name}").split())


def test_debug_copy_to_creates_a_copy_that_runs(cluster: Cluster) -> None:
    """The copy arrives as protobuf; kubectl's default ("general") profile adds SYS_PTRACE
    to the debug container, which the kubelet grants. Pod Security's baseline (the default
    namespace's level) forbids that capability: the namespace is made privileged first, as a
    kube user would."""
    kubectl = cluster.kubectl
    name, copy = unique("orig"), unique("copy")
    create(cluster, name)
    debug = ("debug", name, f"--copy-to={copy}", f"--image={BUSYBOX_IMAGE}", "--", "sleep",
             "3600")
    try:
        wait_status(kubectl, name, "Running")
        refused = kubectl.run(*debug, check=False)
        assert refused.returncode != 0
        assert f'pods "{copy}" is forbidden: violates PodSecurity "baseline:latest": ' \
               "non-default capabilities" in refused.stderr
        kubectl("label", "namespace", "default", f"{ENFORCE}=privileged")
        out = kubectl.run(*debug, check=False)
        print("kubectl debug --copy-to:", out.returncode, out.stdout, out.stderr)
        assert out.returncode == 0, out.stderr
        wait_status(kubectl, copy, "Running")
        images = kubectl("get", "pod", copy, "-o", "jsonpath={.spec.containers[*].image}")
        assert images.split() == [BUSYBOX_IMAGE, BUSYBOX_IMAGE]
        command = kubectl("get", "pod", copy, "-o", "jsonpath={.spec.containers[1].command}")
        args = kubectl("get", "pod", copy, "-o", "jsonpath={.spec.containers[1].args}")
        assert "sleep" in command + args and "3600" in command + args
        added = kubectl("get", "pod", copy, "-o", "jsonpath="
                        "{.spec.containers[1].securityContext.capabilities.add}")
        assert "SYS_PTRACE" in added
    finally:
        kubectl("label", "namespace", "default", f"{ENFORCE}-")
        kubectl("delete", "pod", name, copy, "--grace-period=1", "--ignore-not-found")


def test_debug_node_is_refused_with_a_clear_status(cluster: Cluster) -> None:
    out = cluster.kubectl.run("debug", f"node/{cluster.node}", f"--image={BUSYBOX_IMAGE}",
                              "--", "sleep", "3600", check=False)
    print("kubectl debug node:", out.returncode, out.stdout, out.stderr)
    assert out.returncode != 0
    # the Pod (hostPID, hostIPC, hostNetwork, a hostPath of /) was read, then refused by
    # Pod Security (the default namespace is baseline), naming what baseline forbids
    assert 'is forbidden: violates PodSecurity "baseline:latest": host namespaces' \
        in out.stderr
    assert "hostPath volumes" in out.stderr


def test_drain_dry_run_then_drain(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    names = sorted([unique("drained"), unique("drained")])
    for name in names:
        create(cluster, name, node_name=cluster.node)
    for name in names:
        wait_status(kubectl, name, "Running")
    try:
        out = kubectl.run("drain", cluster.node, "--dry-run=server", "--ignore-daemonsets",
                          "--force", check=False)
        print("kubectl drain --dry-run=server:", out.returncode, out.stdout, out.stderr)
        assert out.returncode == 0, out.stderr
        for name in names:
            assert f"evicting pod default/{name} (server dry run)" in out.stdout + out.stderr
        assert pod_names(kubectl) == names
        for name in names:
            assert kubectl("get", "pod", name, "-o",
                           "jsonpath={.metadata.deletionTimestamp}") == ""
        assert kubectl("get", "node", cluster.node, "-o",
                       "jsonpath={.spec.unschedulable}") == ""
        log = cluster.apiserver.process.log()
        assert all(f"dry run: evicted pod default/{name}" in log for name in names)

        # without evictions, drain DELETEs each pod with protobuf DeleteOptions: the dry run
        # in them is honoured too
        out = kubectl.run("drain", cluster.node, "--dry-run=server", "--disable-eviction",
                          "--ignore-daemonsets", "--force", check=False)
        print("kubectl drain --dry-run=server --disable-eviction:", out.returncode, out.stdout,
              out.stderr)
        assert out.returncode == 0, out.stderr
        assert "drained (server dry run)" in out.stdout
        assert pod_names(kubectl) == names
        log = cluster.apiserver.process.log()
        assert all(f"dry run: marked for deletion pods default/{name}" in log
                   or f"dry run: deleted pods default/{name}" in log for name in names)

        out = kubectl.run("drain", cluster.node, "--ignore-daemonsets", "--force",
                          "--grace-period=1", "--timeout=90s", check=False)
        print("kubectl drain:", out.returncode, out.stdout, out.stderr)
        assert out.returncode == 0, out.stderr
        for name in names:
            assert f"pod/{name} evicted" in out.stdout + out.stderr
        assert pod_names(kubectl) == []
        assert kubectl("get", "node", cluster.node, "-o",
                       "jsonpath={.spec.unschedulable}") == "true"
    finally:
        kubectl("uncordon", cluster.node)
