"""Protobuf request bodies, as kubectl's typed clients send them: Namespace (`kubectl create
namespace`), DeleteOptions and Eviction (`kubectl drain`), Pod (`kubectl debug`).

The bodies are built by a tiny encoder of the protobuf wire format (below) from the field
numbers of kube's generated.proto, writing every non-pointer field even at its zero value,
as kube's marshaller does."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apiserver import protobuf
from common import errors
from tests.support import unique

# -- a test-only encoder -------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field: a string, bytes or an embedded message."""
    raw = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def number(n: int, value: int | bool) -> bytes:
    return varint(n << 3) + varint(int(value))


def message(*parts: bytes) -> bytes:
    return b"".join(parts)


def entry(n: int, key: str, value: bytes | str) -> bytes:
    """One entry of a map<string, ...> field."""
    return field(n, field(1, key) + field(2, value))


def quantity(text: str) -> bytes:
    return field(1, text)


def unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return (protobuf.MAGIC + field(1, type_meta) + field(2, raw)
            + field(4, "application/vnd.kubernetes.protobuf"))


def decode(body: bytes) -> dict[str, Any]:
    return protobuf.decode(body, accepted="application/json")


def object_meta(name: str, *extra: bytes) -> bytes:
    """ObjectMeta as kube writes an unset one: the strings empty, creationTimestamp an
    empty Time, generation 0."""
    return message(field(1, name), field(2, ""), field(3, ""), field(4, ""), field(5, ""),
                   field(6, ""), number(7, 0), field(8, b""), *extra)


def container(name: str, image: str, *extra: bytes) -> bytes:
    """A Container with its non-pointer fields written at their zero values."""
    return message(field(1, name), field(2, image), field(5, ""), field(8, b""),
                   field(13, ""), field(14, ""), number(16, False), number(17, False),
                   number(18, False), field(20, ""), *extra)


# -- decoding ------------------------------------------------------------------------------


def test_namespace_with_labels_and_finalizers() -> None:
    meta = object_meta("demo", entry(11, "team", "a"), entry(12, "note", "x"))
    body = unknown("v1", "Namespace", field(1, meta) + field(2, field(1, "kubernetes"))
                   + field(3, field(1, "")))
    assert decode(body) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "demo", "labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {"finalizers": ["kubernetes"]}}


def test_delete_options_keep_a_zero_grace_period_and_dry_run() -> None:
    """gracePeriodSeconds is a pointer: 0 is "now", not "unset"; dryRun must never be lost."""
    body = unknown("v1", "DeleteOptions", message(
        number(1, 0), field(2, field(1, "uid-1") + field(2, "42")), field(4, "Background"),
        field(5, "All")))
    assert decode(body) == {
        "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
        "propagationPolicy": "Background", "dryRun": ["All"]}


def test_negative_integers_are_twos_complement() -> None:
    body = unknown("v1", "DeleteOptions", number(1, -1))
    assert decode(body)["gracePeriodSeconds"] == -1


def test_eviction_carries_its_delete_options() -> None:
    body = unknown("policy/v1", "Eviction", message(
        field(1, object_meta("web", field(3, "default"))),
        field(2, message(number(1, 30), field(5, "All")))))
    assert decode(body) == {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 30, "dryRun": ["All"]}}


def pod_body(spec: bytes, *, status: bytes = b"", meta: bytes | None = None) -> bytes:
    return unknown("v1", "Pod", message(field(1, meta or object_meta("web")), field(2, spec),
                                        field(3, status)))


def test_a_pod_as_kubectl_debug_sends_it() -> None:
    owner = message(field(5, "v1"), field(1, "ReplicationController"), field(3, "rc"),
                    field(4, "uid-rc"), number(6, True))
    meta = object_meta("web", field(3, "default"), entry(11, "app", "web"),
                       entry(12, "note", "copied"), field(13, owner))
    http_probe = field(1, field(2, message(field(1, "/healthz"), field(2, number(1, 0)
                                           + number(2, 8080) + field(3, "")), field(3, ""),
                                           field(4, "HTTP"))))
    tcp_probe = field(1, field(3, field(1, number(1, 1) + number(2, 0) + field(3, "http"))))
    app = container(
        "app", "kubelite/busybox:1.35", field(3, "sh"), field(3, "-c"), field(4, "sleep 1"),
        field(6, message(field(1, "http"), number(2, 0), number(3, 80), field(4, "TCP"),
                         field(5, ""))),
        field(7, message(field(1, "MODE"), field(2, "debug"))),
        field(7, message(field(1, "NODE"), field(2, ""), field(3, field(1, message(
            field(1, "v1"), field(2, "spec.nodeName")))))),
        field(8, message(entry(1, "cpu", quantity("100m")),
                         entry(2, "memory", quantity("64Mi")))),
        field(9, message(field(1, "scratch"), number(2, False), field(3, "/scratch"),
                         field(4, ""), field(6, ""))),
        field(10, message(http_probe, number(2, 0), number(3, 1), number(4, 10), number(5, 1),
                          number(6, 3))),
        field(11, message(tcp_probe, number(2, 5), number(3, 1), number(4, 10), number(5, 1),
                          number(6, 3))),
        field(15, message(field(1, field(1, "SYS_PTRACE") + field(2, "NET_RAW")),
                          number(4, 0), number(6, True))))
    volumes = [
        message(field(1, "scratch"), field(2, field(2, field(1, "")))),
        message(field(1, "host"), field(2, field(1, field(1, "/var/log") + field(2, "")))),
        message(field(1, "config"), field(2, field(19, message(
            field(1, field(1, "settings")), field(2, field(1, "a") + field(2, "a.conf")),
            number(3, 0o644))))),
        message(field(1, "creds"), field(2, field(6, message(field(1, "token"),
                                                             number(4, True))))),
    ]
    toleration = message(field(1, "node.kubernetes.io/unreachable"), field(2, "Exists"),
                         field(3, ""), field(4, "NoExecute"), number(5, 300))
    term = field(1, message(field(1, "disk"), field(2, "In"), field(3, "ssd")))
    affinity = field(1, field(1, field(1, term)))
    spec = message(
        *(field(1, v) for v in volumes), field(2, app), field(3, "Always"), number(4, 30),
        field(6, "ClusterFirst"), field(8, ""), field(9, ""), field(10, ""),
        number(11, False), number(12, False), number(13, False), number(27, True),
        field(14, message(number(2, 1000), field(4, varint(1) + varint(2)))),
        field(16, ""), field(17, ""), field(18, affinity), field(19, "default-scheduler"),
        field(22, toleration), field(24, ""), number(30, False))
    status = message(field(1, ""), field(3, ""), field(4, ""), field(5, ""), field(6, ""),
                     field(9, ""), field(11, ""), field(14, ""), number(17, 0))
    assert decode(pod_body(spec, status=status, meta=meta)) == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web", "namespace": "default", "labels": {"app": "web"},
            "annotations": {"note": "copied"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                                 "name": "rc", "uid": "uid-rc", "controller": True}]},
        "spec": {
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": ""}},
                {"name": "config", "configMap": {
                    "name": "settings", "items": [{"key": "a", "path": "a.conf"}],
                    "defaultMode": 0o644}},
                {"name": "creds", "secret": {"secretName": "token", "optional": True}}],
            "containers": [{
                "name": "app", "image": "kubelite/busybox:1.35", "command": ["sh", "-c"],
                "args": ["sleep 1"],
                "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "debug"},
                        {"name": "NODE", "valueFrom": {"fieldRef": {
                            "apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "resources": {"limits": {"cpu": "100m"}, "requests": {"memory": "64Mi"}},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080,
                                              "scheme": "HTTP"},
                                  "timeoutSeconds": 1, "periodSeconds": 10,
                                  "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": "http"}, "initialDelaySeconds": 5,
                                   "timeoutSeconds": 1, "periodSeconds": 10,
                                   "successThreshold": 1, "failureThreshold": 3},
                # runAsUser is a pointer: 0 (root) is kept
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"],
                                                     "drop": ["NET_RAW"]},
                                    "runAsUser": 0, "readOnlyRootFilesystem": True}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "shareProcessNamespace": True,
            "securityContext": {"runAsUser": 1000, "supplementalGroups": [1, 2]},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "enableServiceLinks": False}}


def test_what_kubectl_debug_node_sends() -> None:
    spec = message(
        field(1, message(field(1, "host-root"),
                         field(2, field(1, field(1, "/") + field(2, ""))))),
        field(2, container("debugger", "kubelite/busybox:1.35", field(3, "sleep"),
                           field(3, "3600"),
                           field(9, message(field(1, "host-root"), field(3, "/host"))))),
        field(3, "Never"), field(10, "node1"), number(11, True), number(12, True),
        number(13, True), field(22, message(field(1, ""), field(2, "Exists"))))
    decoded = decode(pod_body(spec))
    assert decoded["spec"]["hostNetwork"] is decoded["spec"]["hostPID"] is True
    assert decoded["spec"]["hostIPC"] is True and decoded["spec"]["nodeName"] == "node1"
    assert decoded["spec"]["volumes"] == [{"name": "host-root",
                                           "hostPath": {"path": "/", "type": ""}}]
    assert decoded["spec"]["tolerations"] == [{"operator": "Exists"}]


@pytest.mark.parametrize(("spec", "named"), [
    # a field number no table has
    (field(2, container("app", "img", field(99, "x"))),
     "spec.containers[0] has field number 99, which is not a field of Container"),
    # fields the server does not decode from protobuf
    (field(2, container("app", "img", field(12, field(1, field(4, number(1, 5)))))),
     "spec.containers[0].lifecycle.postStart.sleep is not supported"),
    (field(34, b""), "spec.ephemeralContainers is not supported"),
    (field(1, message(field(1, "data"), field(2, field(10, field(1, "claim"))))),
     "spec.volumes[0].persistentVolumeClaim is not supported"),
    (field(41, "custom-host"), "spec.hostnameOverride is not supported"),
])
def test_what_is_not_decoded_is_refused_by_name(spec: bytes, named: str) -> None:
    with pytest.raises(errors.UnsupportedMediaType) as caught:
        decode(pod_body(spec))
    assert named in caught.value.message


def test_metadata_fields_not_decoded_are_refused_unless_zero() -> None:
    spec = field(2, container("app", "img"))
    assert decode(pod_body(spec, meta=object_meta("web", field(15, ""))))["metadata"] == {
        "name": "web"}
    # managedFields a client read back come with its update, FieldsV1 as the JSON it holds
    entry = field(17, message(field(1, "kubectl"), field(2, "Update"), field(3, "v1"),
                              field(6, "FieldsV1"), field(7, field(1, '{"f:spec":{}}'))))
    assert decode(pod_body(spec, meta=object_meta("web", entry)))["metadata"][
        "managedFields"] == [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    with pytest.raises(errors.UnsupportedMediaType, match="metadata.managedFields"):
        decode(pod_body(spec, meta=object_meta("web", field(17, field(5, "old fields")))))


def test_a_status_that_is_not_empty_is_refused() -> None:
    with pytest.raises(errors.UnsupportedMediaType, match="Pod status.phase is not supported"):
        decode(pod_body(field(2, container("app", "img")), status=field(1, "Running")))


def test_kinds_without_a_decoder_are_415() -> None:
    with pytest.raises(errors.UnsupportedMediaType):
        decode(unknown("v1", "PersistentVolumeClaim", b""))
    with pytest.raises(errors.UnsupportedMediaType):
        decode(unknown("apps/v1", "Pod", b""))


@pytest.mark.parametrize("body", [
    b"{}", protobuf.MAGIC + b"\x0a\x05ab", protobuf.MAGIC + b"\x0a",
    unknown("v1", "Pod", number(1, 5)),  # metadata as a varint
    unknown("v1", "DeleteOptions", field(1, b"x")),  # gracePeriodSeconds as bytes
    unknown("v1", "Pod", varint(1 << 3 | 5) + b"\0\0\0\0"),  # a fixed32 field
])
def test_malformed_bodies_are_400(body: bytes) -> None:
    with pytest.raises(errors.BadRequest):
        decode(body)


# -- through the apiserver -----------------------------------------------------------------

PODS = "/api/v1/namespaces/default/pods"
PROTOBUF = {"Content-Type": protobuf.MEDIA_TYPE}


def simple_pod(name: str) -> bytes:
    return pod_body(field(2, container("app", "kubelite/busybox:1.35", field(3, "sleep"),
                                       field(3, "3600"))),
                    meta=object_meta(name, entry(11, "via", "protobuf")))


async def test_create_delete_and_evict_in_protobuf(http: httpx.AsyncClient) -> None:
    name = unique("pb")
    r = await http.post(PODS, content=simple_pod(name), headers=PROTOBUF)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["metadata"]["labels"] == {"via": "protobuf"}
    assert created["spec"]["containers"][0]["command"] == ["sleep", "3600"]
    assert created["spec"]["restartPolicy"] == "Always"  # defaulted as from JSON

    # DELETE and eviction with dryRun in the protobuf body: nothing is deleted
    dry = unknown("v1", "DeleteOptions", message(number(1, 0), field(5, "All")))
    r = await http.request("DELETE", f"{PODS}/{name}", content=dry, headers=PROTOBUF)
    assert r.status_code == 200, r.text
    eviction = unknown("policy/v1", "Eviction", message(
        field(1, object_meta(name, field(3, "default"))),
        field(2, message(number(1, 0), field(5, "All")))))
    r = await http.post(f"{PODS}/{name}/eviction", content=eviction, headers=PROTOBUF)
    assert (r.status_code, r.json()["status"]) == (201, "Success"), r.text
    current = (await http.get(f"{PODS}/{name}")).json()
    assert current["metadata"]["uid"] == created["metadata"]["uid"]
    assert "deletionTimestamp" not in current["metadata"]

    # an Eviction naming another pod is refused; a real one deletes (no kubelet: grace 0)
    other = unknown("policy/v1", "Eviction", field(1, object_meta("other")))
    r = await http.post(f"{PODS}/{name}/eviction", content=other, headers=PROTOBUF)
    assert r.status_code == 400
    assert r.json()["message"] == "name in URL does not match name in Eviction object"
    real = unknown("policy/v1", "Eviction", message(field(1, object_meta(name)),
                                                    field(2, number(1, 0))))
    r = await http.post(f"{PODS}/{name}/eviction", content=real, headers=PROTOBUF)
    assert r.status_code == 201, r.text
    assert (await http.get(f"{PODS}/{name}")).status_code == 404
    r = await http.post(f"{PODS}/{name}/eviction", content=real, headers=PROTOBUF)
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"


async def test_eviction_in_json_and_in_discovery(http: httpx.AsyncClient) -> None:
    name = unique("ev")
    await http.post(PODS, json={"metadata": {"name": name}, "spec": {"containers": [
        {"name": "app", "image": "kubelite/busybox:1.35"}]}})
    r = await http.post(f"{PODS}/{name}/eviction", params={"dryRun": "All"},
                        json={"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    assert (await http.get(f"{PODS}/{name}")).status_code == 200
    r = await http.post(f"{PODS}/{name}/eviction", json={
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
        "deleteOptions": {"gracePeriodSeconds": 0}})
    assert r.status_code == 201, r.text
    assert (await http.get(f"{PODS}/{name}")).status_code == 404
    resources = (await http.get("/api/v1")).json()["resources"]
    assert {"name": "pods/eviction", "singularName": "", "namespaced": True,
            "group": "policy", "version": "v1", "kind": "Eviction",
            "verbs": ["create"]} in resources


async def test_an_unreadable_field_is_a_415_status(http: httpx.AsyncClient) -> None:
    body = pod_body(field(2, container("app", "img", field(25, field(1, "Restart")))),
                    meta=object_meta(unique("pb")))
    r = await http.post(PODS, content=body, headers=PROTOBUF)
    assert r.status_code == 415
    status = r.json()
    assert (status["kind"], status["reason"]) == ("Status", "UnsupportedMediaType")
    assert "spec.containers[0].restartPolicyRules is not supported" in status["message"]
