"""Pure tests of the workload strategies: defaults, validation, selectors, Table cells, Scale
(table tests in the style of kube's defaults_test.go and validation_test.go)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver.resources.deployments import (
    default_deployment,
    deployment_cells,
    validate_deployment,
)
from apiserver.resources.jobs import default_job, job_cells, validate_job
from apiserver.resources.replicasets import default_replica_set, replica_set_cells
from apiserver.resources.workloads import (
    format_selector,
    scale_of,
    selector_matches,
    validate_label_selector,
    with_replicas,
)

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]}}


def deployment(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": copy.deepcopy(TEMPLATE), **spec}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
          "strategy": {"type": "RollingUpdate",
                       "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}}),
    ({"replicas": 0, "strategy": {"type": "Recreate"}},
     {"replicas": 0, "strategy": {"type": "Recreate"}}),
    ({"strategy": {"rollingUpdate": {"maxSurge": 2}}},
     {"strategy": {"type": "RollingUpdate",
                   "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}}}),
    ({"revisionHistoryLimit": 0, "progressDeadlineSeconds": 30},
     {"revisionHistoryLimit": 0, "progressDeadlineSeconds": 30}),
])
def test_deployment_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = deployment(**spec)
    default_deployment(obj, None)
    for key, value in expected.items():
        assert obj["spec"][key] == value
    pod_spec = obj["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Always" and "enableServiceLinks" not in pod_spec


@pytest.mark.parametrize(("spec", "fields"), [
    ({}, []),
    ({"replicas": -1}, ["spec.replicas"]),
    ({"selector": None}, ["spec.selector"]),
    ({"selector": {"matchLabels": {"app": "other"}}}, ["spec.template.metadata.labels"]),
    ({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
     ["spec.selector.matchExpressions[0].values", "spec.selector"]),
    ({"strategy": {"type": "Blue"}}, ["spec.strategy.type"]),
    ({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "120%",
                                                              "maxSurge": 1}}},
     ["spec.strategy.rollingUpdate.maxUnavailable"]),
    ({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "x",
                                                              "maxSurge": 1}}},
     ["spec.strategy.rollingUpdate.maxUnavailable"]),
    ({"minReadySeconds": 700}, ["spec.progressDeadlineSeconds"]),
])
def test_deployment_validation(spec: dict[str, Any], fields: list[str]) -> None:
    obj = deployment(**spec)
    if spec.get("selector", "") is None:
        obj["spec"].pop("selector")
    default_deployment(obj, None)
    assert [cause["field"] for cause in validate_deployment(obj)] == fields


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"},
     True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ({}, {"x": "y"}, True),
])
def test_selector_matches(selector: dict[str, Any], labels: dict[str, str],
                          matches: bool) -> None:
    assert selector_matches(selector, labels) is matches


@pytest.mark.parametrize(("selector", "text"), [
    ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
    ({"matchLabels": {"a": "1"},
      "matchExpressions": [{"key": "z", "operator": "NotIn", "values": ["y", "x"]},
                           {"key": "b", "operator": "Exists"}]}, "a=1,b,z notin (x,y)"),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, "!a"),
    (None, ""),
])
def test_format_selector(selector: dict[str, Any] | None, text: str) -> None:
    assert format_selector(selector) == text


def test_label_selector_operator_must_be_known() -> None:
    causes = validate_label_selector(
        {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["1"]}]}, "spec.selector")
    assert [c["message"] for c in causes] == [
        'Invalid value: "Near": not a valid selector operator']


def job(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pi", "namespace": "default", "uid": "u-1"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox:1.35"}]}}, **spec}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, {"completions": 1, "parallelism": 1, "backoffLimit": 6}),
    ({"parallelism": 3}, {"parallelism": 3, "backoffLimit": 6}),
    ({"completions": 5}, {"completions": 5, "parallelism": 1}),
    ({"backoffLimitPerIndex": 1, "completions": 2, "completionMode": "Indexed"},
     {"backoffLimit": 2**31 - 1}),
])
def test_job_defaults(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = job(**spec)
    default_job(obj, None)
    for key, value in expected.items():
        assert obj["spec"][key] == value
    if "completions" not in spec and "parallelism" in spec:
        assert "completions" not in obj["spec"]
    assert obj["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert obj["metadata"]["labels"]["job-name"] == "pi"
    assert validate_job(obj) == []


def test_job_manual_selector_is_kept_and_checked() -> None:
    obj = job(manualSelector=True, selector={"matchLabels": {"x": "y"}})
    default_job(obj, None)
    assert obj["spec"]["selector"] == {"matchLabels": {"x": "y"}}
    assert [c["field"] for c in validate_job(obj)] == ["spec.template.metadata.labels"]


@pytest.mark.parametrize(("spec", "status", "cells"), [
    ({"completions": 3}, {"succeeded": 1}, ["Running", "1/3", ""]),
    ({"parallelism": 2}, {}, ["Running", "0/1 of 2", ""]),
    ({"completions": 1}, {"succeeded": 1, "startTime": "2026-01-01T00:00:00Z",
                          "completionTime": "2026-01-01T00:00:07Z",
                          "conditions": [{"type": "Complete", "status": "True"}]},
     ["Complete", "1/1", "7s"]),
    ({"completions": 1}, {"startTime": "2026-01-01T00:09:00Z",
                          "conditions": [{"type": "Failed", "status": "True"}]},
     ["Failed", "0/1", "60s"]),
    ({"completions": 1}, {"conditions": [{"type": "Suspended", "status": "True"}]},
     ["Suspended", "0/1", ""]),
])
def test_job_cells(spec: dict[str, Any], status: dict[str, Any], cells: list[str]) -> None:
    obj = {"metadata": {"name": "pi", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": spec, "status": status}
    assert job_cells(obj, NOW)[1:4] == cells


def test_deployment_and_replica_set_cells() -> None:
    obj = deployment(replicas=3)
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    obj["status"] = {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}
    assert deployment_cells(obj, NOW) == ["web", "2/3", 3, 1, "10m", "c", "busybox:1.35",
                                          "app=web"]
    replica_set = deployment(replicas=3)
    default_replica_set(replica_set, None)
    replica_set["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    assert replica_set_cells(replica_set, NOW) == ["web", 3, 0, 0, "10m", "c", "busybox:1.35",
                                                   "app=web"]


def test_scale_view_and_update() -> None:
    obj = deployment(replicas=3)
    obj["metadata"]["resourceVersion"] = "9"
    obj["status"] = {"replicas": 2}
    assert scale_of(obj) == {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "9"},
        "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}}
    scaled = with_replicas(obj, 0)
    assert scaled["spec"]["replicas"] == 0 and obj["spec"]["replicas"] == 3
    assert scaled["spec"]["template"] == obj["spec"]["template"]
