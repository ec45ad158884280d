"""Validation causes, compared word for word with what kube-apiserver answers."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from apiserver.objects import default_object
from apiserver.resources import RESOURCES
from apiserver.resources.nodes import NODES
from apiserver.resources.pod_validation import validate_binding
from apiserver.resources.pods import PODS
from apiserver.validation import (
    check_namespace,
    validate,
    validate_status_update,
    validate_update,
    warnings,
)
from common.errors import BadRequest, invalid

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_KEY_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
    " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
FORBIDDEN_UPDATE = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)\n")

Mutation = Callable[[dict[str, Any]], None]


def make_pod(**spec: Any) -> dict[str, Any]:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.15"}], **spec}}
    return default_object(PODS, body)


def container(pod: dict[str, Any], i: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = pod["spec"]["containers"][i]
    return result


def test_a_valid_pod_has_no_causes() -> None:
    pod = make_pod(volumes=[{"name": "data", "emptyDir": {}}], nodeSelector={"disk": "ssd"},
                   tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    container(pod).update(
        ports=[{"name": "http", "containerPort": 80, "protocol": "TCP"}],
        env=[{"name": "MY_VAR", "value": "1"}],
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
        resources={"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}})
    assert validate(PODS, pod) == []


def set_in(path: str, value: Any) -> Mutation:
    """A mutation that sets a dotted path (list indexes as numbers) of the pod."""
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = obj
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return mutate


@pytest.mark.parametrize(("mutate", "expected"), [
    (set_in("metadata.name", "Bad_Name"),
     ("FieldValueInvalid", "metadata.name", f'Invalid value: "Bad_Name": {SUBDOMAIN_MSG}')),
    (set_in("metadata.name", ""),
     ("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")),
    (set_in("metadata.name", "a" * 254),
     ("FieldValueInvalid", "metadata.name",
      f'Invalid value: "{"a" * 254}": must be no more than 253 characters')),
    (set_in("metadata.labels", {"bad key!": "ok"}),
     ("FieldValueInvalid", "metadata.labels", f'Invalid value: "bad key!": {LABEL_KEY_NAME_MSG}')),
    (set_in("metadata.labels", {"ok": "bad value!"}),
     ("FieldValueInvalid", "metadata.labels",
      f'Invalid value: "bad value!": {LABEL_VALUE_MSG}')),
    (set_in("metadata.labels", {"Example.com/app": "x"}),
     ("FieldValueInvalid", "metadata.labels",
      f'Invalid value: "Example.com/app": prefix part {SUBDOMAIN_MSG}')),
    (set_in("metadata.annotations", {"/x": "y"}),
     ("FieldValueInvalid", "metadata.annotations",
      'Invalid value: "/x": prefix part must be non-empty')),
    (set_in("spec.containers", []),
     ("FieldValueRequired", "spec.containers", "Required value")),
    (set_in("spec.containers.0.name", "App_1"),
     ("FieldValueInvalid", "spec.containers[0].name", f'Invalid value: "App_1": {LABEL_MSG}')),
    (set_in("spec.containers.0.image", ""),
     ("FieldValueRequired", "spec.containers[0].image", "Required value")),
    (set_in("spec.containers.0.ports", [{"containerPort": 70000, "protocol": "TCP"}]),
     ("FieldValueInvalid", "spec.containers[0].ports[0].containerPort",
      "Invalid value: 70000: must be between 1 and 65535, inclusive")),
    (set_in("spec.containers.0.ports", [{"containerPort": 0, "protocol": "TCP"}]),
     ("FieldValueRequired", "spec.containers[0].ports[0].containerPort", "Required value")),
    (set_in("spec.containers.0.ports", [{"containerPort": 80, "protocol": "HTTP"}]),
     ("FieldValueNotSupported", "spec.containers[0].ports[0].protocol",
      'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"')),
    (set_in("spec.restartPolicy", "Sometimes"),
     ("FieldValueNotSupported", "spec.restartPolicy",
      'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"')),
    (set_in("spec.dnsPolicy", "Cluster"),
     ("FieldValueNotSupported", "spec.dnsPolicy",
      'Unsupported value: "Cluster": supported values: "ClusterFirstWithHostNet", '
      '"ClusterFirst", "Default", "None"')),
    (set_in("spec.containers.0.imagePullPolicy", "Sometimes"),
     ("FieldValueNotSupported", "spec.containers[0].imagePullPolicy",
      'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"')),
    (set_in("spec.containers.0.resources", {"limits": {"cpu": "abc"}}),
     ("FieldValueInvalid", "spec.containers[0].resources.limits[cpu]",
      'Invalid value: "abc": quantities must match the regular expression '
      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")),
    (set_in("spec.containers.0.resources", {"requests": {"memory": "-1Gi"}}),
     ("FieldValueInvalid", "spec.containers[0].resources.requests[memory]",
      'Invalid value: "-1Gi": must be greater than or equal to 0')),
    (set_in("spec.containers.0.resources", {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}),
     ("FieldValueInvalid", "spec.containers[0].resources.requests",
      'Invalid value: "2": must be less than or equal to cpu limit of 1')),
    (set_in("spec.containers.0.resources", {"limits": {"gpu": "1"}}),
     ("FieldValueInvalid", "spec.containers[0].resources.limits[gpu]",
      'Invalid value: "gpu": must be a standard resource for containers')),
    (set_in("spec.containers.0.env", [{"name": "A=B"}]),
     ("FieldValueInvalid", "spec.containers[0].env[0].name",
      'Invalid value: "A=B": a valid environment variable name must consist only of printable '
      "ASCII characters other than '='")),
    (set_in("spec.containers.0.volumeMounts", [{"name": "nope", "mountPath": "/x"}]),
     ("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name", 'Not found: "nope"')),
    (set_in("spec.activeDeadlineSeconds", 0),
     ("FieldValueInvalid", "spec.activeDeadlineSeconds",
      "Invalid value: 0: must be between 1 and 2147483647, inclusive")),
    (set_in("spec.nodeSelector", {"disk": "a b"}),
     ("FieldValueInvalid", "spec.nodeSelector", f'Invalid value: "a b": {LABEL_VALUE_MSG}')),
    (set_in("spec.tolerations", [{"key": "k", "operator": "Equal", "effect": "Sometimes"}]),
     ("FieldValueNotSupported", "spec.tolerations[0].effect",
      'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", '
      '"NoExecute"')),
    (set_in("spec.ephemeralContainers", [{"name": "debug", "image": "busybox",
                                           "terminationMessagePolicy": "File",
                                           "imagePullPolicy": "IfNotPresent"}]),
     ("FieldValueForbidden", "spec.ephemeralContainers", "Forbidden: cannot be set on create")),
])
def test_pod_causes(mutate: Mutation, expected: tuple[str, str, str]) -> None:
    pod = make_pod()
    mutate(pod)
    reason, field, message = expected
    assert validate(PODS, pod) == [{"reason": reason, "message": message, "field": field}]


def test_duplicate_container_names_across_init_and_regular_containers() -> None:
    pod = make_pod(initContainers=[{"name": "app", "image": "busybox"}])
    pod = default_object(PODS, pod)
    pod["spec"]["containers"].append(copy.deepcopy(container(pod)))
    causes = validate(PODS, pod)
    assert causes == [
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "app"',
         "field": "spec.containers[1].name"},
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "app"',
         "field": "spec.initContainers[0].name"},
    ]


def test_the_422_message_joins_causes_like_kube() -> None:
    pod = make_pod(restartPolicy="Sometimes")
    pod["metadata"]["name"] = "Bad_Name"
    err = invalid("Pod", "Bad_Name", validate(PODS, pod))
    assert err.message == (
        f'Pod "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}, '
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"]')


def test_generate_name_allows_a_trailing_dash_but_is_still_checked() -> None:
    pod = make_pod()
    pod["metadata"].update(generateName="web-", name="web-x7k2p")
    assert validate(PODS, pod) == []
    pod["metadata"].update(generateName="Web-")
    assert [c["field"] for c in validate(PODS, pod)] == ["metadata.generateName"]


def test_host_ports_must_be_unique_and_match_under_host_network() -> None:
    pod = make_pod(hostNetwork=True)
    container(pod)["ports"] = [
        {"containerPort": 80, "hostPort": 80, "protocol": "TCP"},
        {"containerPort": 81, "hostPort": 80, "protocol": "TCP"},
    ]
    assert validate(PODS, pod) == [
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "/TCP/80"',
         "field": "spec.containers[0].ports[1].hostPort"},
        {"reason": "FieldValueInvalid",
         "message": "Invalid value: 81: must match `hostPort` when `hostNetwork` is true",
         "field": "spec.containers[0].ports[1].containerPort"},
    ]


# --- updates -------------------------------------------------------------------------------

def stored(pod: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["metadata"].update(uid="1234", creationTimestamp="2024-01-02T03:04:05Z")
    return out


@pytest.mark.parametrize("mutate", [
    set_in("spec.containers.0.image", "nginx:1.16"),
    set_in("spec.activeDeadlineSeconds", 30),
    set_in("spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]),
    set_in("metadata.labels", {"app": "web"}),
    set_in("spec.hostNetwork", False),  # false and absent are the same to Go
])
def test_allowed_pod_updates(mutate: Mutation) -> None:
    old = stored(make_pod())
    new = copy.deepcopy(old)
    mutate(new)
    assert validate_update(PODS, new, old) == []


def test_forbidden_pod_update_names_the_fields_and_shows_a_diff() -> None:
    old = stored(make_pod())
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    container(new)["image"] = "nginx:1.16"  # allowed, so not in the diff
    container(new)["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
    assert validate_update(PODS, new, old) == [{
        "reason": "FieldValueForbidden", "field": "spec",
        "message": FORBIDDEN_UPDATE + (
            "  core.PodSpec{\n"
            '+ \tContainers[0].Ports: [{"containerPort": 80, "protocol": "TCP"}],\n'
            '- \tRestartPolicy: "Always",\n'
            '+ \tRestartPolicy: "Never",\n'
            "  }"),
    }]


@pytest.mark.parametrize(("mutate", "expected"), [
    (set_in("spec.containers", []),
     ("FieldValueForbidden", "spec.containers",
      "Forbidden: pod updates may not add or remove containers")),
    (set_in("metadata.uid", "5678"),
     ("FieldValueInvalid", "metadata.uid", 'Invalid value: "5678": field is immutable')),
    (set_in("metadata.creationTimestamp", "2025-01-01T00:00:00Z"),
     ("FieldValueInvalid", "metadata.creationTimestamp",
      "Invalid value: 2025-01-01 00:00:00 +0000 UTC: field is immutable")),
    (set_in("metadata.namespace", "other"),
     ("FieldValueInvalid", "metadata.namespace", 'Invalid value: "other": field is immutable')),
])
def test_rejected_pod_updates(mutate: Mutation, expected: tuple[str, str, str]) -> None:
    old = stored(make_pod(activeDeadlineSeconds=60))
    new = copy.deepcopy(old)
    mutate(new)
    reason, field, message = expected
    assert {"reason": reason, "message": message, "field": field} in validate_update(
        PODS, new, old)


def test_active_deadline_may_only_shrink_and_tolerations_only_grow() -> None:
    old = stored(make_pod(activeDeadlineSeconds=60,
                          tolerations=[{"key": "k", "operator": "Exists"}]))
    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = 120
    assert validate_update(PODS, new, old) == [{
        "reason": "FieldValueInvalid", "field": "spec.activeDeadlineSeconds",
        "message": "Invalid value: 120: must be less than or equal to previous value"}]
    new = copy.deepcopy(old)
    new["spec"]["tolerations"] = []
    assert validate_update(PODS, new, old) == [{
        "reason": "FieldValueForbidden", "field": "spec.tolerations",
        "message": "Forbidden: existing toleration can not be modified except its "
                   "tolerationSeconds"}]


def validate_as(plural: str, obj: dict[str, Any]) -> list[dict[str, str]]:
    """Create-time causes of obj, defaulted; a Binding (the pods/binding subresource) has
    its own rules only."""
    if plural == "bindings":
        return validate_binding(obj)
    resource = RESOURCES[plural]
    return validate(resource, default_object(resource, obj))


# --- nodes, namespaces, events, bindings ---------------------------------------------------

@pytest.mark.parametrize(("resource", "obj", "expected"), [
    ("nodes", {"metadata": {"name": "Node_1"}},
     [("FieldValueInvalid", "metadata.name", f'Invalid value: "Node_1": {SUBDOMAIN_MSG}')]),
    ("nodes", {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "Bad"}]}},
     [("FieldValueNotSupported", "metadata.taints[0].effect",
       'Unsupported value: "Bad": supported values: "NoSchedule", "PreferNoSchedule", '
       '"NoExecute"')]),
    ("nodes", {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k"}]}},
     [("FieldValueRequired", "metadata.taints[0].effect", "Required value")]),
    ("nodes", {"metadata": {"name": "n1"},
               "status": {"capacity": {"cpu": "-1"}, "allocatable": {"cpu": "1"}}},
     [("FieldValueInvalid", "status.capacity.cpu",
       'Invalid value: "-1": must be greater than or equal to 0')]),
    ("namespaces", {"metadata": {"name": "a.b"}},
     [("FieldValueInvalid", "metadata.name", 'Invalid value: "a.b": must not contain dots')]),
    ("namespaces", {"metadata": {"name": "Team"}},
     [("FieldValueInvalid", "metadata.name", f'Invalid value: "Team": {LABEL_MSG}')]),
    ("namespaces", {"metadata": {"name": "team"}, "spec": {"finalizers": ["custom"]}},
     [("FieldValueInvalid", "spec.finalizers", 'Invalid value: "custom": name is neither a '
       "standard finalizer name nor is it fully qualified")]),
    ("events", {"metadata": {"name": "web.17a", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "other", "name": "web"}},
     [("FieldValueInvalid", "involvedObject.namespace",
       'Invalid value: "other": does not match event.namespace')]),
    ("events", {"metadata": {"name": "web/1", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}},
     [("FieldValueInvalid", "metadata.name", "Invalid value: \"web/1\": may not contain '/'")]),
    ("bindings", {"metadata": {"name": "web"}, "target": {"kind": "Pod"}},
     [("FieldValueNotSupported", "target.kind",
       'Unsupported value: "Pod": supported values: "Node", "<empty>"'),
      ("FieldValueRequired", "target.name", "Required value")]),
])
def test_other_resources(resource: str, obj: dict[str, Any],
                         expected: list[tuple[str, str, str]]) -> None:
    causes = validate_as(resource, obj)
    assert causes == [{"reason": r, "message": m, "field": f} for r, f, m in expected]


@pytest.mark.parametrize(("resource", "obj"), [
    ("nodes", {"metadata": {"name": "node1"}, "spec": {"unschedulable": True, "taints": [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}),
    ("namespaces", {"metadata": {"name": "team-a"}}),
    ("events", {"metadata": {"name": "web.17a", "namespace": "default"}, "reason": "Started",
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
                "type": "Normal", "count": 1}),
    ("bindings", {"metadata": {"name": "web"}, "target": {"kind": "Node", "name": "node1"}}),
])
def test_valid_other_resources(resource: str, obj: dict[str, Any]) -> None:
    assert validate_as(resource, obj) == []


def test_node_updates_may_not_change_provider_id() -> None:
    old = {"metadata": {"name": "n1"}, "spec": {"providerID": "aws://1"}}
    new = {"metadata": {"name": "n1"}, "spec": {"providerID": "aws://2", "unschedulable": True}}
    assert validate_update(NODES, new, old) == [{
        "reason": "FieldValueForbidden", "field": "spec.providerID",
        "message": 'Forbidden: node updates may not change providerID except from "" to valid'}]


def test_body_namespace_must_match_the_url() -> None:
    pod = make_pod()
    check_namespace(PODS, pod, "default")
    check_namespace(NODES, {"metadata": {"namespace": "x"}}, None)
    with pytest.raises(BadRequest, match="the namespace of the provided object does not match "
                                         "the namespace sent on the request"):
        check_namespace(PODS, pod, "other")


def test_status_updates() -> None:
    old = stored(make_pod(restartPolicy="Never", nodeName="node1"))
    old["status"]["containerStatuses"] = [
        {"name": "app", "state": {"terminated": {"exitCode": 0}}}]
    new = copy.deepcopy(old)
    new["status"].update(podIPs=[{"ip": "10.0.0.1"}, {"ip": "10.0.0.x"}],
                         containerStatuses=[{"name": "app", "state": {"running": {}}}])
    new["spec"]["nodeName"] = "node2"
    assert validate_status_update(PODS, new, old) == [
        {"reason": "FieldValueForbidden", "field": "status.nodeName",
         "message": "Forbidden: may not be changed directly"},
        {"reason": "FieldValueForbidden", "field": "status.containerStatuses[0].state",
         "message": "Forbidden: may not be transitioned to non-terminated state"},
        {"reason": "FieldValueInvalid", "field": "status.podIPs[1]",
         "message": 'Invalid value: "10.0.0.x": must be a valid IP address, '
                    "(e.g. 10.9.8.7 or 2001:db8::ffff)"},
    ]
    running = copy.deepcopy(old)
    running["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0}}
    assert validate_status_update(PODS, running, old) == []


@pytest.mark.parametrize(("grace", "expected"), [
    (30, []),
    (-1, ["spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and "
          "will be treated as 1"]),
])
def test_negative_grace_period_is_a_warning_not_an_error(grace: int,
                                                         expected: list[str]) -> None:
    pod = make_pod(terminationGracePeriodSeconds=grace)
    assert validate(PODS, pod) == []
    assert warnings(PODS, pod) == expected
