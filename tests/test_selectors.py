"""Label and field selectors: parsing, matching and error wording as apimachinery has them."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.resources import RESOURCES
from apiserver.resources.events import EVENTS
from apiserver.resources.pods import PODS
from apiserver.selectors import (
    parse_field_selector,
    parse_label_selector,
    selectable_fields,
)
from common.errors import BadRequest

LABELS = {"app": "web", "tier": "front", "version": "3", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", LABELS, True),
        ("", None, True),
        ("app=web", LABELS, True),
        ("app==web", LABELS, True),
        ("app=db", LABELS, False),
        ("app!=db", LABELS, True),
        ("app!=web", LABELS, False),
        ("missing!=x", LABELS, True),
        ("app in (db,web)", LABELS, True),
        ("app in (db)", LABELS, False),
        ("missing in (db)", LABELS, False),
        ("app notin (db)", LABELS, True),
        ("app notin (db,web)", LABELS, False),
        ("missing notin (db)", LABELS, True),
        ("app", LABELS, True),
        ("missing", LABELS, False),
        ("!missing", LABELS, True),
        ("!app", LABELS, False),
        ("version>2", LABELS, True),
        ("version>3", LABELS, False),
        ("version<4", LABELS, True),
        ("app>1", LABELS, False),  # a non-integer label never compares
        ("missing<4", LABELS, False),
        ("app=web,tier=front", LABELS, True),
        ("app=web,tier=back", LABELS, False),
        ("  app = web ,  tier  in ( front , back )  ", LABELS, True),
        ("empty=", LABELS, True),
        ("empty in ()", LABELS, True),
        ("app=", LABELS, False),
        ("in in (in)", {"in": "in"}, True),
        ("example.com/role=x", {"example.com/role": "x"}, True),
        ("app=web", None, False),
        ("!app", None, True),
    ],
)
def test_label_selector_matches(selector: str, labels: dict[str, str] | None,
                                expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "canonical"),
    [
        ("", ""),
        ("tier=front,app=web", "app=web,tier=front"),
        ("a==b", "a==b"),
        ("a != b", "a!=b"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x in (b, a, b)", "x in (a,b)"),
        ("!k", "!k"),
        ("k>1,k<10", "k>1,k<10"),
        ("k=", "k="),
    ],
)
def test_label_selector_string_round_trips(selector: str, canonical: str) -> None:
    parsed = parse_label_selector(selector)
    assert str(parsed) == canonical
    assert parse_label_selector(str(parsed)) == parsed


NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_REGEX = ("a valid label must be an empty string or consist of alphanumeric characters, "
               "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        # The wording kube-apiserver answers with (seen in kubectl's "Error from server").
        ("app:monolith", f'unable to parse requirement: <nil>: Invalid value: "app:monolith": '
                         f"{NAME_PART}"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("k=a$", f'unable to parse requirement: values[0][k]: Invalid value: "a$": {VALUE_REGEX}'),
        ("k>a", 'unable to parse requirement: values[0]: Invalid value: "a": for \'Gt\', \'Lt\' '
                "operators, the value must be an integer"),
        ("k in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("k in a", "unable to parse requirement: found 'a' expected: '('"),
        ("k=(", "unable to parse requirement: found '(', expected: identifier"),
        ("a,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
    ],
)
def test_label_selector_errors(selector: str, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_label_selector(selector)
    assert caught.value.message == message
    assert caught.value.code == 400


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("a/b/c", "a valid label key must consist of"),
        ("/name", "prefix part must be non-empty"),
        ("app.kubernetes_io/name", "prefix part a lowercase RFC 1123 subdomain"),
        ("x" * 64, "name part must be no more than 63 characters"),
    ],
)
def test_label_selector_rejects_invalid_keys(key: str, fragment: str) -> None:
    with pytest.raises(BadRequest, match="unable to parse requirement: <nil>: Invalid value") as e:
        parse_label_selector(f"{key}=v")
    assert fragment in e.value.message


POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"restartPolicy": "Always", "schedulerName": "default-scheduler",
             "containers": [{"name": "c", "image": "busybox"}]},
    "status": {"phase": "Pending"},
}
BOUND_POD: dict[str, Any] = {
    "metadata": {"name": "db", "namespace": "prod"},
    "spec": {"nodeName": "node1", "hostNetwork": True, "serviceAccountName": "sa"},
    "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
               "nominatedNodeName": "node2"},
}


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        ("", POD, True),
        ("spec.nodeName=", POD, True),  # unbound pods, as the scheduler asks for them
        ("spec.nodeName=", BOUND_POD, False),
        ("spec.nodeName=node1", BOUND_POD, True),
        ("spec.nodeName==node1", BOUND_POD, True),
        ("spec.nodeName!=node1", BOUND_POD, False),
        ("spec.host=node1", BOUND_POD, True),  # old alias of spec.nodeName
        ("metadata.name=web,metadata.namespace=default", POD, True),
        ("metadata.name=web,metadata.namespace=prod", POD, False),
        ("status.phase!=Running,status.phase!=Succeeded", POD, True),
        ("status.phase!=Running,status.phase!=Succeeded", BOUND_POD, False),
        ("spec.hostNetwork=false", POD, True),
        ("spec.hostNetwork=true", BOUND_POD, True),
        ("status.podIP=10.0.0.5", BOUND_POD, True),
        ("status.nominatedNodeName=node2", BOUND_POD, True),
        ("spec.serviceAccountName=sa", BOUND_POD, True),
        ("spec.restartPolicy=Always,spec.schedulerName=default-scheduler", POD, True),
        ("status.podIPs=", BOUND_POD, True),  # accepted by kube, never populated
    ],
)
def test_field_selector_on_pods(selector: str, obj: dict[str, Any], expected: bool) -> None:
    fields = selectable_fields(PODS, obj)
    assert parse_field_selector(selector, PODS).matches(fields) is expected


def test_field_selector_value_escapes() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d", PODS)
    assert selector.exact("metadata.name") == "a,b=c\\d"
    assert selector.matches({"metadata.name": "a,b=c\\d"})
    assert str(selector) == r"metadata.name=a\,b\=c\\d"
    assert parse_field_selector(str(selector), PODS) == selector


@pytest.mark.parametrize(
    ("selector", "field", "expected"),
    [
        ("metadata.name=web", "metadata.name", "web"),
        ("metadata.name==web", "metadata.name", "web"),
        ("spec.nodeName=", "spec.nodeName", ""),
        ("metadata.name!=web", "metadata.name", None),
        ("status.phase=Running,spec.nodeName=n1", "spec.nodeName", "n1"),
        ("spec.host=n1", "spec.nodeName", "n1"),
        ("status.phase=Running", "metadata.name", None),
        ("", "metadata.name", None),
    ],
)
def test_field_selector_exact(selector: str, field: str, expected: str | None) -> None:
    assert parse_field_selector(selector, PODS).exact(field) == expected


@pytest.mark.parametrize(
    ("selector", "resource", "message"),
    [
        ("status.hostIP=1.2.3.4", "pods", "field label not supported: status.hostIP"),
        ("spec.nodeName=x", "nodes", "field label not supported: spec.nodeName"),
        ("spec.unschedulable=true", "pods", "field label not supported: spec.unschedulable"),
        ("name=default", "namespaces", "field label not supported: name"),
        ("metadata.name", "pods", "invalid selector: 'metadata.name'; can't understand "
                                  "'metadata.name'"),
        ("metadata.name=a=b", "pods", "invalid field selector: unescaped character in value: 61"),
        (r"metadata.name=a\x", "pods", r"invalid field selector: invalid escape sequence: \x"),
        ("metadata.name=a\\", "pods", "invalid field selector: invalid escape sequence: \\"),
        # leases have no table of their own: kube's default metadata conversion
        ("spec.x=1", "leases", '"spec.x" is not a known field selector: only '
                               '"metadata.name", "metadata.namespace"'),
    ],
)
def test_field_selector_errors(selector: str, resource: str, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_field_selector(selector, RESOURCES[resource])
    assert caught.value.message == message


EVENT: dict[str, Any] = {
    "metadata": {"name": "web.17a", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u-1",
                       "apiVersion": "v1", "resourceVersion": "41"},
    "reason": "Scheduled", "type": "Normal", "source": {"component": "default-scheduler"},
}


@pytest.mark.parametrize(
    ("resource", "obj", "expected"),
    [
        ("nodes", {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}},
         {"metadata.name": "n1", "spec.unschedulable": "true"}),
        ("nodes", {"metadata": {"name": "n2"}},
         {"metadata.name": "n2", "spec.unschedulable": "false"}),
        ("namespaces", {"metadata": {"name": "ns"}, "status": {"phase": "Active"}},
         {"metadata.name": "ns", "status.phase": "Active"}),
        ("events", EVENT, {
            "metadata.name": "web.17a", "metadata.namespace": "default",
            "involvedObject.kind": "Pod", "involvedObject.namespace": "default",
            "involvedObject.name": "web", "involvedObject.uid": "u-1",
            "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "41",
            "involvedObject.fieldPath": "", "reason": "Scheduled", "reportingComponent": "",
            "source": "default-scheduler", "type": "Normal"}),
        ("events", {"metadata": {"name": "e"}, "reportingComponent": "kubelet"},
         {"source": "kubelet", "reportingComponent": "kubelet"}),
    ],
)
def test_selectable_fields(resource: str, obj: dict[str, Any], expected: dict[str, str]) -> None:
    fields = selectable_fields(RESOURCES[resource], obj)
    assert {k: fields[k] for k in expected} == expected
    table = RESOURCES[resource].fields
    assert table is not None and set(fields) <= table.labels


def test_pod_fields_cover_every_selectable_field_but_pod_ips() -> None:
    assert PODS.fields is not None
    assert set(selectable_fields(PODS, POD)) == PODS.fields.labels - {"status.podIPs"}


def test_describe_pod_event_query() -> None:
    selector = parse_field_selector(
        "involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u-1",
        EVENTS)
    assert selector.matches(selectable_fields(EVENTS, EVENT))
    assert not selector.matches(selectable_fields(EVENTS, {**EVENT, "involvedObject": {}}))
