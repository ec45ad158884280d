"""A container's probes and hooks: kube's defaults and validation, wording included
(pkg/apis/core/v1/defaults.go SetDefaults_Probe / SetDefaults_HTTPGetAction, and
validation.go's validateProbe, validateLifecycle, validateHandler)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.objects import default_object
from apiserver.resources.pods import PODS
from apiserver.validation import validate

EXEC = {"exec": {"command": ["true"]}}


def pod_with(container: dict[str, Any], *, init: dict[str, Any] | None = None,
             grace: int = 30) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx:1.15", **container}],
                            "terminationGracePeriodSeconds": grace}
    if init is not None:
        spec["initContainers"] = [{"name": "setup", "image": "busybox:1.35", **init}]
    return default_object(PODS, {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "web", "namespace": "default"},
                                 "spec": spec})


def causes(container: dict[str, Any], **kwargs: Any) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"])
            for c in validate(PODS, pod_with(container, **kwargs))]


def test_probes_get_kubes_defaults() -> None:
    pod = pod_with({"readinessProbe": {"httpGet": {"port": 80}},
                    "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 2,
                                      "failureThreshold": 0},
                    "startupProbe": {"grpc": {"port": 9090}},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}})
    app = pod["spec"]["containers"][0]
    assert app["readinessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
        "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert app["livenessProbe"] == {  # a zero is unset, as in Go
        "tcpSocket": {"port": 80}, "timeoutSeconds": 1, "periodSeconds": 2,
        "successThreshold": 1, "failureThreshold": 3}
    assert app["startupProbe"]["grpc"] == {"port": 9090, "service": ""}
    assert app["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/stop",
                                                      "scheme": "HTTP"}
    assert validate(PODS, pod) == []


def test_every_handler_kind_is_valid_alone() -> None:
    for handler in (EXEC, {"httpGet": {"port": "http"}}, {"tcpSocket": {"port": 8080}},
                    {"grpc": {"port": 9090, "service": "web"}}):
        assert causes({"ports": [{"name": "http", "containerPort": 80}],
                       "readinessProbe": dict(handler), "startupProbe": dict(handler)}) == []
    assert causes({"lifecycle": {"postStart": EXEC, "preStop": {"sleep": {"seconds": 5}}}}) == []


@pytest.mark.parametrize(("container", "expected"), [
    ({"readinessProbe": {"periodSeconds": 1}},
     [("FieldValueRequired", "spec.containers[0].readinessProbe",
       "Required value: must specify a handler type")]),
    ({"livenessProbe": {**EXEC, "httpGet": {"port": 80}, "tcpSocket": {"port": 80}}},
     [("FieldValueForbidden", "spec.containers[0].livenessProbe.httpGet",
       "Forbidden: may not specify more than 1 handler type"),
      ("FieldValueForbidden", "spec.containers[0].livenessProbe.tcpSocket",
       "Forbidden: may not specify more than 1 handler type")]),
    ({"readinessProbe": {"exec": {"command": []}}},
     [("FieldValueRequired", "spec.containers[0].readinessProbe.exec.command",
       "Required value")]),
    ({"readinessProbe": {"tcpSocket": {"port": 70000}}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.tcpSocket.port",
       "Invalid value: 70000: must be between 1 and 65535, inclusive")]),
    ({"readinessProbe": {"grpc": {"port": 0}}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.grpc.port",
       "Invalid value: 0: must be between 1 and 65535, inclusive")]),
    ({"readinessProbe": {"httpGet": {"port": "no_such"}}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.httpGet.port",
       'Invalid value: "no_such": must contain only alpha-numeric characters (a-z, 0-9), '
       "and hyphens (-)")]),
    ({"readinessProbe": {"httpGet": {"port": 80, "scheme": "FTP"}}},
     [("FieldValueNotSupported", "spec.containers[0].readinessProbe.httpGet.scheme",
       'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"')]),
    ({"readinessProbe": {"httpGet": {"port": 80, "httpHeaders": [{"name": "X Y",
                                                                  "value": "1"}]}}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.httpGet.httpHeaders",
       "Invalid value: \"X Y\": a valid HTTP header must consist of alphanumeric characters "
       "or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')")]),
    ({"readinessProbe": {**EXEC, "initialDelaySeconds": -1, "timeoutSeconds": -2}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.initialDelaySeconds",
       "Invalid value: -1: must be greater than or equal to 0"),
      ("FieldValueInvalid", "spec.containers[0].readinessProbe.timeoutSeconds",
       "Invalid value: -2: must be greater than or equal to 0")]),
    ({"livenessProbe": {**EXEC, "successThreshold": 2}},
     [("FieldValueInvalid", "spec.containers[0].livenessProbe.successThreshold",
       "Invalid value: 2: must be 1")]),
    ({"startupProbe": {**EXEC, "successThreshold": 3}},
     [("FieldValueInvalid", "spec.containers[0].startupProbe.successThreshold",
       "Invalid value: 3: must be 1")]),
    ({"readinessProbe": {**EXEC, "successThreshold": 3}}, []),  # readiness may need more
    ({"readinessProbe": {**EXEC, "terminationGracePeriodSeconds": 5}},
     [("FieldValueInvalid", "spec.containers[0].readinessProbe.terminationGracePeriodSeconds",
       "Invalid value: 5: must not be set for readinessProbes")]),
    ({"livenessProbe": {**EXEC, "terminationGracePeriodSeconds": 0}},
     [("FieldValueInvalid", "spec.containers[0].livenessProbe.terminationGracePeriodSeconds",
       "Invalid value: 0: must be greater than 0")]),
    ({"lifecycle": {"preStop": {}}},
     [("FieldValueRequired", "spec.containers[0].lifecycle.preStop",
       "Required value: must specify a handler type")]),
    ({"lifecycle": {"postStart": {**EXEC, "sleep": {"seconds": 1}}}},
     [("FieldValueForbidden", "spec.containers[0].lifecycle.postStart.sleep",
       "Forbidden: may not specify more than 1 handler type")]),
    ({"lifecycle": {"preStop": {"sleep": {"seconds": 31}}}},
     [("FieldValueInvalid", "spec.containers[0].lifecycle.preStop.sleep",
       "Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds "
       "(30)")]),
    ({"lifecycle": {"preStop": {"grpc": {"port": 80}}}},  # grpc is a probe's handler only
     [("FieldValueRequired", "spec.containers[0].lifecycle.preStop",
       "Required value: must specify a handler type")]),
])
def test_handler_causes(container: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    assert causes(container) == expected


def test_init_containers_may_have_neither_probes_nor_hooks() -> None:
    init = {"readinessProbe": EXEC, "lifecycle": {"postStart": EXEC}}
    assert causes({}, init=init) == [
        ("FieldValueForbidden", f"spec.initContainers[0].{key}",
         "Forbidden: may not be set for init containers without restartPolicy=Always")
        for key in ("lifecycle", "readinessProbe")]
