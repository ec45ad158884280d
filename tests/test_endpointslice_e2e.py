"""The EndpointSlice controller on a real cluster: the secure apiserver, the scheduler, the
controller-manager (endpointslice, replicaset, deployment, garbage collector) and a kubelet on Docker running
busybox pods with a readiness probe. A pod that turns unready flips `ready: false` in the
slice; a terminating pod shows `terminating: true`; scaling to zero leaves the placeholder; the slice goes with its Service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.docker_support import BUSYBOX_IMAGE, docker_cluster
from tests.support import ApiServer, Kubectl, eventually, unique

SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, Kubectl]]:
    workdir = tmp_path_factory.mktemp("eps-cluster")
    with docker_cluster(workdir, (unique("eps-node"),),
                        controllers="endpointslice,replicaset,deployment,garbagecollector",
                        ) as found:
        yield found


def deployment(name: str, replicas: int) -> dict[str, Any]:
    # Ready while /tmp/ready exists (probed every second); a preStop hook keeps a deleted
    # pod terminating for a while, as a real server draining its connections would.
    container = {
        "name": "web", "image": BUSYBOX_IMAGE,
        "command": ["sh", "-c", "touch /tmp/ready; exec httpd -f -p 8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                           "periodSeconds": 1, "failureThreshold": 1},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "20"]}}},
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container],
                                           "terminationGracePeriodSeconds": 30}}}}


def service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}


def slices_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    listed = json.loads(kubectl("get", "endpointslices", "-l",
                                f"kubernetes.io/service-name={name}", "-o", "json"))
    return list(listed["items"])


def endpoints_of(kubectl: Kubectl, name: str) -> dict[str, dict[str, Any]]:
    """The service's endpoints by pod name (one slice expected)."""
    found = slices_of(kubectl, name)
    assert len(found) == 1, [s["metadata"]["name"] for s in found]
    return {e["targetRef"]["name"]: e for e in found[0].get("endpoints") or []}


def pods_of(kubectl: Kubectl, name: str) -> dict[str, dict[str, Any]]:
    listed = json.loads(kubectl("get", "pods", "-l", f"app={name}", "-o", "json"))
    return {p["metadata"]["name"]: p for p in listed["items"]}


async def test_slices_follow_pods_readiness_and_termination(
        cluster: tuple[ApiServer, Kubectl]) -> None:
    _apiserver, kubectl = cluster
    name = unique("web")
    kubectl.run("apply", "-f", "-", stdin=json.dumps(deployment(name, 2)))
    kubectl.run("apply", "-f", "-", stdin=json.dumps(service(name)))

    async def two_ready() -> dict[str, dict[str, Any]] | None:
        endpoints = endpoints_of(kubectl, name)
        ready = [e for e in endpoints.values() if e["conditions"]["ready"]]
        return endpoints if len(ready) == 2 else None

    endpoints = await eventually(two_ready, timeout=90, what="2 ready endpoints")
    [slice_] = slices_of(kubectl, name)
    svc = json.loads(kubectl("get", "service", name, "-o", "json"))
    assert slice_["metadata"]["name"].startswith(f"{name}-")
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == name
    assert slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == \
        "endpointslice-controller.k8s.io"
    assert slice_["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Service", "name": name, "uid": svc["metadata"]["uid"],
         "controller": True, "blockOwnerDeletion": True}]
    assert slice_["addressType"] == "IPv4"
    # the named targetPort resolved in the pods' container ports
    assert slice_["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    pods = pods_of(kubectl, name)
    assert set(endpoints) == set(pods)
    for pod_name, endpoint in endpoints.items():
        pod = pods[pod_name]
        assert endpoint["addresses"] == [pod["status"]["podIP"]]
        assert endpoint["nodeName"] == pod["spec"]["nodeName"]
        assert endpoint["targetRef"]["uid"] == pod["metadata"]["uid"]
        assert endpoint["conditions"] == {"ready": True, "serving": True,
                                          "terminating": False}

    # One pod's readiness probe starts failing: its endpoint is not ready, nor serving.
    unready, steady = sorted(pods)
    kubectl("exec", unready, "--", "rm", "/tmp/ready")

    async def flipped() -> bool:
        conditions = {k: e["conditions"] for k, e in endpoints_of(kubectl, name).items()}
        return (conditions[unready] == {"ready": False, "serving": False, "terminating": False}
                and conditions[steady]["ready"])

    await eventually(flipped, timeout=30, what=f"{unready} not ready in the slice")
    kubectl("exec", unready, "--", "touch", "/tmp/ready")

    async def back() -> bool:
        return endpoints_of(kubectl, name)[unready]["conditions"]["ready"] is True

    await eventually(back, timeout=30, what=f"{unready} ready again")

    # A deleted pod stays in the slice while it terminates (its preStop hook runs).
    kubectl("delete", "pod", steady, "--wait=false")

    async def terminating() -> bool:
        endpoint = endpoints_of(kubectl, name).get(steady)
        return endpoint is not None and endpoint["conditions"]["terminating"] is True \
            and endpoint["conditions"]["ready"] is False

    await eventually(terminating, timeout=30, what=f"{steady} terminating in the slice")

    # Scaled to zero: the placeholder slice, with no endpoints.
    kubectl("scale", "deployment", name, "--replicas=0")

    async def placeholder() -> bool:
        found = slices_of(kubectl, name)
        return len(found) == 1 and not found[0].get("endpoints") and not found[0].get("ports")

    await eventually(placeholder, timeout=90, what="the placeholder slice")

    # The Service goes, and its slice with it (the garbage collector follows the slice's
    # owner reference).
    kubectl("delete", "service", name)

    async def collected() -> bool:
        return not slices_of(kubectl, name)

    await eventually(collected, timeout=60, what="the slice collected with its Service")
    kubectl("delete", "deployment", name)


async def test_pods_on_other_ports_get_their_own_slice(
        cluster: tuple[ApiServer, Kubectl]) -> None:
    _apiserver, kubectl = cluster
    name = unique("multi")
    manifest = deployment(name, 1)
    kubectl.run("apply", "-f", "-", stdin=json.dumps(manifest))
    other = deployment(f"{name}-b", 1)
    other["spec"]["template"]["metadata"]["labels"] = {"app": name, "variant": "b"}
    other["spec"]["selector"]["matchLabels"] = {"app": name, "variant": "b"}
    container = other["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["sh", "-c", "touch /tmp/ready; exec httpd -f -p 9090"]
    container["ports"] = [{"name": "http", "containerPort": 9090}]
    kubectl.run("apply", "-f", "-", stdin=json.dumps(other))
    kubectl.run("apply", "-f", "-", stdin=json.dumps(service(name)))

    async def two_slices() -> dict[int, int] | None:
        found = slices_of(kubectl, name)
        by_port = {s["ports"][0]["port"]: len(s.get("endpoints") or [])
                   for s in found if s.get("ports")}
        return by_port if by_port == {8080: 1, 9090: 1} and len(found) == 2 else None

    await eventually(two_slices, timeout=90, what="a slice per port")
    kubectl("delete", "deployment", name, f"{name}-b")
    kubectl("delete", "service", name)
