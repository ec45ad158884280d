"""Defaults as kube-apiserver fills them in (pkg/apis/core/v1/defaults.go and friends)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.objects import default_object
from apiserver.resources.events import EVENTS
from apiserver.resources.namespaces import NAMESPACES
from apiserver.resources.nodes import NODES
from apiserver.resources.pods import PODS, default_pull_policy, pod_qos_class


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": list(containers), **spec}}


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"),
    ("nginx:latest", "Always"),
    ("nginx:1.15", "IfNotPresent"),
    ("docker.io/library/busybox", "Always"),
    ("127.0.0.1:5999/missing:1", "IfNotPresent"),  # the port is not a tag
    ("127.0.0.1:5999/missing", "Always"),
    ("localhost:5000/team/app:v1", "IfNotPresent"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),  # a digest and no tag
    ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ("NGINX", "IfNotPresent"),  # not a reference: ParseImageName fails, no tag
])
def test_image_pull_policy(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def test_pod_defaults() -> None:
    out = default_object(PODS, pod({"name": "c", "image": "nginx:1.15",
                                      "ports": [{"containerPort": 80}]}))
    spec = out["spec"]
    assert {k: v for k, v in spec.items() if k != "containers"} == {
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    assert spec["containers"] == [{
        "name": "c", "image": "nginx:1.15", "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File", "resources": {},
    }]
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_explicit_values_are_kept_and_input_untouched() -> None:
    given = pod({"name": "c", "image": "nginx", "imagePullPolicy": "Never"},
                restartPolicy="Never", terminationGracePeriodSeconds=0, enableServiceLinks=False)
    out = default_object(PODS, given)
    assert out["spec"]["restartPolicy"] == "Never"
    assert out["spec"]["terminationGracePeriodSeconds"] == 0
    assert out["spec"]["enableServiceLinks"] is False
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    assert "status" not in given and "resources" not in given["spec"]["containers"][0]


def test_requests_default_to_limits() -> None:
    out = default_object(PODS, pod({"name": "c", "image": "i", "resources": {
        "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}))
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m",
                                                                      "memory": "1Gi"}


def test_host_network_copies_container_port_to_host_port() -> None:
    out = default_object(PODS, pod({"name": "c", "image": "i", "ports": [{"containerPort": 8080}]},
                                     hostNetwork=True))
    assert out["spec"]["containers"][0]["ports"][0]["hostPort"] == 8080


def test_update_keeps_priority_and_skips_create_only_defaults() -> None:
    old = default_object(PODS, pod({"name": "c", "image": "i"}))
    new = default_object(PODS, pod({"name": "c", "image": "i"}, priorityClassName="x"), old=old)
    assert new["spec"]["priority"] == 0
    assert new["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert "status" not in new


def guaranteed(cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    return {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}}


@pytest.mark.parametrize(("resources", "qos"), [
    ([{}], "BestEffort"),
    ([{"requests": {"cpu": "0"}}], "BestEffort"),  # zero does not count
    ([{"requests": {"ephemeral-storage": "1Gi"}}], "BestEffort"),  # only cpu and memory count
    ([{"requests": {"cpu": "100m"}}], "Burstable"),
    ([{"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}], "Burstable"),  # memory limit missing
    ([guaranteed()], "Guaranteed"),
    ([guaranteed(), guaranteed("2", "2Gi")], "Guaranteed"),
    ([guaranteed(), {}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}],
     "Burstable"),
])
def test_qos_class(resources: list[dict[str, Any]], qos: str) -> None:
    spec = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}
    assert pod_qos_class(spec) == qos


def test_qos_class_after_defaulting_limits_only_is_guaranteed() -> None:
    out = default_object(PODS, pod({"name": "c", "image": "i",
                                      "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}))
    assert out["status"]["qosClass"] == "Guaranteed"


def test_namespace_defaults() -> None:
    out = default_object(NAMESPACES, {"metadata": {"name": "team", "labels": {"a": "b"}}})
    assert out["metadata"]["labels"] == {"a": "b", "kubernetes.io/metadata.name": "team"}
    assert out["spec"] == {"finalizers": ["kubernetes"]}
    assert out["status"] == {"phase": "Active"}


def test_namespace_update_does_not_bring_the_finalizer_back() -> None:
    old = default_object(NAMESPACES, {"metadata": {"name": "team"}})
    new = default_object(NAMESPACES, {"metadata": {"name": "team"}, "spec": {"finalizers": []}},
                         old=old)
    assert new["spec"]["finalizers"] == []


def test_node_allocatable_defaults_to_capacity_and_events_get_nothing() -> None:
    node = default_object(NODES, {"metadata": {"name": "n"},
                                    "status": {"capacity": {"cpu": "2", "pods": "110"}}})
    assert node["status"]["allocatable"] == {"cpu": "2", "pods": "110"}
    assert "phase" not in node["status"]
    event = {"metadata": {"name": "e"}, "reason": "Started"}
    assert default_object(EVENTS, event) == event
