"""Body decoding: Go-like type errors (400), unknown fields pruned and reported."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from apiserver.schema import decode, strict_decoding_message
from common.errors import BadRequest
from common.models import Node, Pod
from common.quantity import QuantityError, canonical_quantity, parse_quantity

CANNOT = 'Pod in version "v1" cannot be handled as a Pod: '


def test_unknown_fields_are_pruned_and_listed() -> None:
    body = {
        "apiVersion": "v1", "kind": "Pod", "bogus": 1,
        "metadata": {"name": "web", "labels": {"app": "web"}, "colour": "red"},
        "spec": {"containers": [
            {"name": "c", "image": "nginx", "foo": 2,
             "ports": [{"containerPort": 80, "bar": 3}],
             "resources": {"limits": {"cpu": "1"}}}],
            "hostNetwork": False, "nodeName": None,
            "nodeSelector": {"disk": "ssd"}},
    }
    pruned, unknown = decode(Pod, body)
    assert pruned == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                                 "ports": [{"containerPort": 80}],
                                 "resources": {"limits": {"cpu": "1"}}}],
                 "hostNetwork": False, "nodeSelector": {"disk": "ssd"}},
    }
    assert unknown == ["bogus", "metadata.colour", "spec.containers[0].foo",
                       "spec.containers[0].ports[0].bar"]
    assert strict_decoding_message(unknown[:2]) == (
        'strict decoding error: unknown field "bogus", unknown field "metadata.colour"')


def test_opaque_structures_and_kube_spelling_are_kept() -> None:
    body = {"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "i",
                                     "env": [{"name": "A", "valueFrom": {"fieldRef": {
                                         "fieldPath": "metadata.name"}}}],
                                     "livenessProbe": {"httpGet": {"port": 80}}}],
                     "hostPID": True, "setHostnameAsFQDN": False},
            "status": {"podIP": "10.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
                       "containerStatuses": [{"name": "c", "imageID": "x", "containerID": "y"}]}}
    pruned, unknown = decode(Pod, body)
    assert pruned == body
    assert unknown == []


def test_quantities_are_stored_canonical_even_when_given_as_numbers() -> None:
    pruned, _ = decode(Node, {"status": {"capacity": {"cpu": 2, "memory": "4Gi"},
                                            "allocatable": {"cpu": 1.5, "memory": " 0.5Gi"}}})
    assert pruned["status"] == {"capacity": {"cpu": "2", "memory": "4Gi"},
                                "allocatable": {"cpu": "1500m", "memory": "512Mi"}}


@pytest.mark.parametrize(("text", "canonical"), [
    ("100m", "100m"), ("0.5", "500m"), ("1000m", "1"), ("1.5", "1500m"), ("2000", "2k"),
    ("110", "110"), ("1024", "1024"), ("1G", "1G"), ("1Gi", "1Gi"), ("1.5Gi", "1536Mi"),
    ("2048Ki", "2Mi"), ("0.5Ki", "512"), ("1e3", "1e3"), ("10e2", "1e3"), ("1E6", "1e6"),
    ("0", "0"), ("0.0000000001", "1n"), ("-1500m", "-1500m"),
])
def test_canonical_quantity(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical


@pytest.mark.parametrize(("body", "message"), [
    ({"spec": {"containers": "x"}},
     "json: cannot unmarshal string into Go struct field PodSpec.spec.containers "
     "of type []v1.Container"),
    ({"spec": {"containers": [{"ports": [{"containerPort": "abc"}]}]}},
     "json: cannot unmarshal string into Go struct field "
     "ContainerPort.spec.containers.ports.containerPort of type int32"),
    ({"spec": {"containers": [{"ports": [{"containerPort": 99999999999}]}]}},
     "json: cannot unmarshal number 99999999999 into Go struct field "
     "ContainerPort.spec.containers.ports.containerPort of type int32"),
    ({"spec": {"terminationGracePeriodSeconds": 1.5}},
     "json: cannot unmarshal number 1.5 into Go struct field "
     "PodSpec.spec.terminationGracePeriodSeconds of type int64"),
    ({"metadata": {"labels": {"a": 1}}},
     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
     "of type string"),
    ({"spec": {"hostNetwork": "true"}},
     "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"),
    ({"spec": "x"},
     "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec"),
    ({"spec": {"containers": [5]}},
     "json: cannot unmarshal number into Go struct field PodSpec.spec.containers "
     "of type v1.Container"),
    ({"spec": {"containers": [{"readinessProbe": {"grpc": {"port": "abc"}}}]}},
     "json: cannot unmarshal string into Go struct field "
     "GRPCAction.spec.containers.readinessProbe.grpc.port of type int32"),
    ({"spec": {"containers": [{"livenessProbe": {"periodSeconds": "10"}}]}},
     "json: cannot unmarshal string into Go struct field "
     "Probe.spec.containers.livenessProbe.periodSeconds of type int32"),
    ({"spec": {"containers": [{"startupProbe": {"exec": {"command": "ls"}}}]}},
     "json: cannot unmarshal string into Go struct field "
     "ExecAction.spec.containers.startupProbe.exec.command of type []string"),
    ({"spec": {"containers": [{"readinessProbe": {"httpGet": {"httpHeaders": [{"name": 5}]}}}]}},
     "json: cannot unmarshal number into Go struct field "
     "HTTPHeader.spec.containers.readinessProbe.httpGet.httpHeaders.name of type string"),
    ({"spec": {"containers": [{"lifecycle": {"preStop": {"sleep": {"seconds": True}}}}]}},
     "json: cannot unmarshal bool into Go struct field "
     "SleepAction.spec.containers.lifecycle.preStop.sleep.seconds of type int64"),
    ({"spec": {"containers": [{"resources": {"limits": {"cpu": "abc"}}}]}},
     "quantities must match the regular expression "
     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
])
def test_type_errors_are_bad_requests_worded_like_go(body: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        decode(Pod, body)
    assert caught.value.message == CANNOT + message
    assert caught.value.code == 400


def test_a_body_that_is_not_an_object() -> None:
    with pytest.raises(BadRequest, match='Node in version "v1" cannot be handled as a Node: '
                                         "json: cannot unmarshal array into Go value of type "
                                         "v1.Node"):
        decode(Node, [])  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "value"), [
    ("100m", Decimal("0.1")),
    ("1Gi", Decimal(2**30)),
    ("1e3", Decimal(1000)),
    ("1E-3", Decimal("0.001")),
    ("0.5", Decimal("0.5")),
    (".5", Decimal("0.5")),
    ("1.", Decimal(1)),
    ("-2k", Decimal(-2000)),
    ("+3", Decimal(3)),
    ("5n", Decimal("0.000000005")),
    ("2E", Decimal(2 * 10**18)),
    ("1Ki", Decimal(1024)),
])
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("", "quantities must match the regular expression"),
    ("abc", "quantities must match the regular expression"),
    ("1 Gi", "quantities must match the regular expression"),
    ("1Zi", "quantities must match the regular expression"),
    ("1ki", "unable to parse quantity's suffix"),
    ("1e", "unable to parse quantity's suffix"),
    ("Gi", "unable to parse numeric part of quantity"),
    (".", "unable to parse numeric part of quantity"),
])
def test_parse_quantity_errors(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        parse_quantity(text)


def test_the_message_names_the_kind_the_body_claims() -> None:
    with pytest.raises(BadRequest, match='^Node in version "v1" cannot be handled as a Pod: '):
        decode(Pod, {"apiVersion": "v1", "kind": "Node", "spec": {"containers": 1}})
