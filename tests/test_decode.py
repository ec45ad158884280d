"""The pure halves of reading a request: document limits, options, admission, warnings."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from starlette.datastructures import QueryParams

from apiserver import decode, options, schema
from apiserver.app import warning_header
from apiserver.logs import kubelet_base_url
from apiserver.resources.nodes import validate_node_endpoints
from apiserver.resources.pod_admission import unimplemented_causes, unsupported_fields
from apiserver.resources.pod_validation import validate_binding
from common import errors
from common.models import Pod

# -- documents ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["json", "yaml"])
@pytest.mark.parametrize("depth", [decode.MAX_DEPTH + 1, 990, 10_000])
def test_deep_nesting_is_a_400_in_json_and_yaml(kind: str, depth: int) -> None:
    raw = ("[" * depth + "]" * depth).encode()
    with pytest.raises(errors.BadRequest) as caught:
        decode.parse_document(raw, kind)
    assert "nested too deeply" in caught.value.message


def test_nesting_within_the_limit_is_read() -> None:
    depth = decode.MAX_DEPTH
    assert decode.parse_document(("[" * depth + "]" * depth).encode(), "json") is not None


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    raw = "\n".join(lines).encode()
    assert len(raw) < 600
    began = time.monotonic()
    with pytest.raises(errors.BadRequest) as caught:
        decode.parse_document(raw, "yaml")
    assert time.monotonic() - began < 0.1  # measured on the composed graph, never expanded
    assert "excessive aliasing" in caught.value.message


@pytest.mark.parametrize("levels", [5, 6, 7])
def test_small_bombs_are_refused_as_go_yaml_refuses_them(levels: int) -> None:
    lines = ['a: &a ["x"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join(["*a" if i == 1 else f"*a{i - 1}"] * 9) + "]")
    with pytest.raises(errors.BadRequest) as caught:
        decode.parse_document("\n".join(lines).encode(), "yaml")
    assert "excessive aliasing" in caught.value.message


@pytest.mark.parametrize("raw", [b"&a [*a]", b"a: &a {b: *a}"])
def test_a_yaml_document_that_contains_itself_is_refused(raw: bytes) -> None:
    with pytest.raises(errors.BadRequest) as caught:
        decode.parse_document(raw, "yaml")
    assert "nested too deeply" in caught.value.message


def test_deep_yaml_is_refused_before_its_scanner_gets_slow() -> None:
    began = time.monotonic()
    with pytest.raises(errors.BadRequest):
        decode.parse_document(b"[" * 100_000 + b"]" * 100_000, "yaml")
    assert time.monotonic() - began < 0.2


def test_yaml_expansion_counts_shared_nodes_once_per_use() -> None:
    node = yaml.compose("a: &a [1, 2]\nb: *a\nc: *a\n")
    total, distinct, depth = decode.yaml_expansion(node)
    assert (distinct, depth) == (7, 3)  # the map, three keys, one list of two
    assert total == 1 + 3 + 3 * 3  # the map, its keys, three lists of two


def test_yaml_merge_keys_still_work() -> None:
    raw = b"a: &x {p: 1}\nb: {<<: *x, q: 2}\n"
    assert decode.parse_document(raw, "yaml") == {"a": {"p": 1}, "b": {"p": 1, "q": 2}}


def test_excessive_aliasing_is_refused() -> None:
    raw = ("a: &a x\nb: [" + ",".join(["*a"] * (decode.MAX_YAML_ALIASES + 1)) + "]").encode()
    with pytest.raises(errors.BadRequest) as caught:
        decode.parse_document(raw, "yaml")
    assert "excessive aliasing" in caught.value.message


def test_a_few_aliases_are_fine() -> None:
    assert decode.parse_document(b"a: &a {x: 1}\nb: *a\n", "yaml") == {"a": {"x": 1},
                                                                       "b": {"x": 1}}


@pytest.mark.parametrize("body", [
    {"kind": "Node"},
    {"apiVersion": "apps/v1"},
    {"metadata": "x"},
])
def test_type_meta_must_match(body: dict[str, Any]) -> None:
    with pytest.raises(errors.BadRequest):
        decode.check_type_meta(body, "Pod", "v1")


# -- options -----------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    {"gracePeriodSeconds": "abc"}, {"gracePeriodSeconds": [1]}, {"gracePeriodSeconds": 1.5},
    {"gracePeriodSeconds": True}, {"preconditions": "x"}, {"dryRun": "All"}, {"dryRun": 1},
    {"orphanDependents": "yes"},
])
def test_delete_options_of_the_wrong_type_are_a_400(body: dict[str, Any]) -> None:
    with pytest.raises(errors.BadRequest):
        options.delete_options(QueryParams(""), body)


@pytest.mark.parametrize("body, field", [
    ({"propagationPolicy": "Sometimes"}, "propagationPolicy"),
    ({"dryRun": ["Some"]}, "dryRun"),
    ({"orphanDependents": True, "propagationPolicy": "Orphan"}, "propagationPolicy"),
])
def test_invalid_delete_options_are_a_422(body: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        options.delete_options(QueryParams(""), body)
    assert caught.value.message.startswith('DeleteOptions.meta.k8s.io "" is invalid')
    assert [c["field"] for c in caught.value.details["causes"]] == [field]


def test_delete_options_merge_query_and_body() -> None:
    got = options.delete_options(QueryParams("dryRun=All&gracePeriodSeconds=5"),
                                 {"preconditions": {"uid": "u"}})
    assert got == options.DeleteOptions(grace_period_seconds=5, preconditions={"uid": "u"},
                                        dry_run=True)


def test_delete_options_that_disagree_are_a_400() -> None:
    with pytest.raises(errors.BadRequest):
        options.delete_options(QueryParams("gracePeriodSeconds=5"), {"gracePeriodSeconds": 0})


@pytest.mark.parametrize("query", ["gracePeriodSeconds=abc", "gracePeriodSeconds=1.5",
                                   "gracePeriodSeconds=99999999999999999999"])
def test_bad_delete_query_parameters_are_a_400(query: str) -> None:
    with pytest.raises(errors.BadRequest):
        options.delete_options(QueryParams(query), None)


# kube's parameter codec: only "0" and "false" (any case) are false, the empty string and
# anything else true (Convert_Slice_string_To_bool); absent is false.
@pytest.mark.parametrize("value, expected", [
    ("true", True), ("1", True), ("False", False), ("FALSE", False), ("0", False),
    ("", True), ("yes", True), ("f", True),
])
def test_query_bool_reads_what_kube_reads(value: str, expected: bool) -> None:
    assert options.query_bool(QueryParams(f"watch={value}"), "watch") is expected
    assert options.query_bool(QueryParams("other=1"), "watch") is False


def test_dry_run_values_other_than_all_are_a_422() -> None:
    with pytest.raises(errors.Invalid):
        options.dry_run(QueryParams("dryRun=Yes"))
    assert options.dry_run(QueryParams("dryRun=All")) is True
    assert options.dry_run(QueryParams("")) is False


# -- bindings, nodes, warnings -----------------------------------------------------------


@pytest.mark.parametrize("name", ["Bad Node/../x", "UPPER", "a_b", "-x"])
def test_a_binding_to_a_name_no_node_can_have_is_invalid(name: str) -> None:
    causes = validate_binding({"target": {"name": name}})
    assert [c["field"] for c in causes] == ["target.name"]


def test_a_binding_to_a_node_name_is_valid() -> None:
    assert validate_binding({"target": {"kind": "Node", "name": "node-1.example"}}) == []


@pytest.mark.parametrize("address", [
    {"type": "InternalIP", "address": "[::ffff:127.0.0.1]:2379/version#"},
    {"type": "InternalIP", "address": "127.0.0.1:2379"},
    {"type": "ExternalIP", "address": "example.com"},
    {"type": "Hostname", "address": "a/b"},
])
def test_node_addresses_must_be_addresses(address: dict[str, str]) -> None:
    assert validate_node_endpoints({"addresses": [address]})


def test_a_bad_kubelet_port_is_invalid() -> None:
    status = {"daemonEndpoints": {"kubeletEndpoint": {"Port": 70000}}}
    assert validate_node_endpoints(status)


def test_the_kubelet_url_is_built_from_valid_parts_only() -> None:
    def node(address: str, port: Any = 10250) -> dict[str, Any]:
        return {"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "InternalIP", "address": address}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}

    assert kubelet_base_url(node("127.0.0.1")) == "http://127.0.0.1:10250"
    assert kubelet_base_url(node("::1")) == "http://[::1]:10250"
    for bad in (node("[::ffff:127.0.0.1]:2379/version#"), node("127.0.0.1", "2379/x"),
                node("127.0.0.1", 0)):
        with pytest.raises(errors.BadRequest):
            kubelet_base_url(bad)


@pytest.mark.parametrize("text", ['unknown field "€"', 'unknown field "a\nb"',
                                  'unknown field "a\x00b"', 'say "hi" \\'])
def test_a_warning_header_can_always_be_written(text: str) -> None:
    value = warning_header(text)
    assert value.startswith(b'299 - "') and value.endswith(b'"')
    assert b"\n" not in value and b"\x00" not in value
    value.decode("utf-8")


# -- admission and no-op writes ----------------------------------------------------------


def pod_spec(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


@pytest.mark.parametrize("spec, path", [
    ({"hostUsers": False}, "spec.hostUsers"),
    ({"volumes": [{"name": "r", "persistentVolumeClaim": {"claimName": "c"}}]},
     "spec.volumes[0].persistentVolumeClaim"),
    ({"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}, "spec.volumes[0].nfs"),
    ({"volumes": [{"name": "m", "emptyDir": {"medium": "HugePages"}}]},
     "spec.volumes[0].emptyDir.medium"),
    ({"volumes": [{"name": "t", "projected": {"sources": [
        {"clusterTrustBundle": {"signerName": "example.com/s", "path": "ca.crt"}}]}}]},
     "spec.volumes[0].projected.sources[0].clusterTrustBundle"),
    ({"containers": [{"name": "c", "image": "b", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "mountPropagation": "Bidirectional"}]}]},
     "spec.containers[0].volumeMounts[0].mountPropagation"),
    ({"containers": [{"name": "c", "image": "b", "securityContext": {"procMount": "Unmasked"}}]},
     "spec.containers[0].securityContext.procMount"),
    ({"securityContext": {"sysctls": [{"name": "a", "value": "b"}]}},
     "spec.securityContext.sysctls"),
    ({"securityContext": {"runAsNonRoot": True}},
     "spec.containers[0].securityContext.runAsNonRoot"),
    ({"securityContext": {"runAsNonRoot": True, "runAsUser": 0}},
     "spec.containers[0].securityContext.runAsUser"),
])
def test_what_the_kubelet_cannot_honour_is_invalid(spec: dict[str, Any], path: str) -> None:
    pod = pod_spec(**spec)
    assert path in [p for p, _ in unsupported_fields(pod)]
    causes = unimplemented_causes(pod)
    assert path in [c["field"] for c in causes]
    assert all(c["reason"] == "FieldValueForbidden" and c["message"].startswith(
        "Forbidden: kubelite's kubelet does not implement ") for c in causes)


def test_what_the_kubelet_honours_is_admitted() -> None:
    assert unimplemented_causes(pod_spec(
        hostNetwork=True, hostPID=True, hostIPC=True,
        securityContext={"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 2000},
        volumes=[{"name": "h", "hostPath": {"path": "/tmp"}},
                 {"name": "m", "emptyDir": {"medium": "Memory"}},
                 {"name": "p", "projected": {"sources": [
                     {"configMap": {"name": "a"}}, {"secret": {"name": "b"}},
                     {"downwardAPI": {"items": []}}]}}],
        containers=[{"name": "c", "image": "b", "env": [
            {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}}],
            "volumeMounts": [{"name": "h", "mountPath": "/h", "mountPropagation": "None"}],
            "securityContext": {
            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
            "privileged": True,
            "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]},
            "seccompProfile": {"type": "RuntimeDefault"}}}])) == []


def test_empty_maps_and_lists_are_no_fields_at_all() -> None:
    pruned, _ = schema.decode(Pod, {
        "metadata": {"name": "p", "labels": {}, "annotations": {}},
        "spec": {"containers": [{"name": "c", "env": [], "resources": {}}], "tolerations": [],
                 "nodeSelector": {}, "securityContext": {}}})
    assert pruned == {"metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c", "resources": {}}],
                               "securityContext": {}}}
