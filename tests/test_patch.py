"""JSON merge patch, JSON patch and strategic merge patch, with kube-apiserver's errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.patch import (
    UnknownError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from apiserver.resources.nodes import NODES
from apiserver.resources.pods import PODS
from common.errors import ApiError, BadRequest, Invalid, RequestEntityTooLarge

DOC: dict[str, Any] = {
    "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
    "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}], "nodeName": "n1"},
}

# --- JSON merge patch ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({}, DOC),
        # kubectl label app=web2 tier-
        ({"metadata": {"labels": {"app": "web2", "tier": None}}},
         {**DOC, "metadata": {"name": "web", "labels": {"app": "web2"}}}),
        ({"spec": {"nodeName": None}},
         {**DOC, "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}),
        # Lists are replaced whole, never merged.
        ({"spec": {"containers": [{"name": "x"}]}},
         {**DOC, "spec": {"containers": [{"name": "x"}], "nodeName": "n1"}}),
        # A new subtree loses its nulls; so does an array replacing a non-object.
        ({"status": {"phase": "Running", "podIP": None}}, {**DOC, "status": {"phase": "Running"}}),
        ({"spec": {"nodeName": [1, None, {"a": None}]}},
         {**DOC, "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}],
                          "nodeName": [1, {}]}}),
        # A scalar replaces an object.
        ({"metadata": {"labels": "x"}}, {**DOC, "metadata": {"name": "web", "labels": "x"}}),
        ({"missing": None}, DOC),
    ],
)
def test_merge_patch(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(DOC)
    assert apply_merge_patch(DOC, patch) == expected
    assert before == DOC


@pytest.mark.parametrize(
    ("patch", "error", "message"),
    [
        (None, BadRequest, "Invalid JSON Patch"),
        ("text", BadRequest, "Invalid JSON Patch"),
        (3, BadRequest, "Invalid JSON Patch"),
        ([1], Invalid, ' "" is invalid: patch: Invalid value: "[1]": couldn\'t get version/kind'),
    ],
)
def test_merge_patch_errors(patch: Any, error: type[ApiError], message: str) -> None:
    with pytest.raises(error) as caught:
        apply_merge_patch(DOC, patch)
    assert caught.value.message.startswith(message)


# --- JSON patch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "check"),
    [
        ([], lambda d: d == DOC),
        (None, lambda d: d == DOC),
        ([{"op": "add", "path": "/metadata/labels/example.com~1role", "value": "x"}],
         lambda d: d["metadata"]["labels"]["example.com/role"] == "x"),
        ([{"op": "add", "path": "/metadata/annotations", "value": {"a~b": "1"}},
          {"op": "add", "path": "/metadata/annotations/c~0d", "value": "2"}],
         lambda d: d["metadata"]["annotations"] == {"a~b": "1", "c~d": "2"}),
        ([{"op": "add", "path": "/spec/containers/-", "value": {"name": "side"}}],
         lambda d: [c["name"] for c in d["spec"]["containers"]] == ["nginx", "side"]),
        ([{"op": "add", "path": "/spec/containers/0", "value": {"name": "first"}}],
         lambda d: [c["name"] for c in d["spec"]["containers"]] == ["first", "nginx"]),
        ([{"op": "remove", "path": "/metadata/labels/tier"}],
         lambda d: d["metadata"]["labels"] == {"app": "web"}),
        ([{"op": "remove", "path": "/spec/containers/0"}], lambda d: d["spec"]["containers"] == []),
        ([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}],
         lambda d: d["spec"]["containers"][0]["image"] == "nginx:2"),
        # json-patch v4 (kube-apiserver's) lets replace create a missing object key.
        ([{"op": "replace", "path": "/spec/hostname", "value": "h"}],
         lambda d: d["spec"]["hostname"] == "h"),
        ([{"op": "move", "from": "/spec/nodeName", "path": "/metadata/node"}],
         lambda d: d["metadata"]["node"] == "n1" and "nodeName" not in d["spec"]),
        ([{"op": "copy", "from": "/metadata/labels", "path": "/spec/selector"}],
         lambda d: d["spec"]["selector"] == DOC["metadata"]["labels"]),
        ([{"op": "test", "path": "/metadata/name", "value": "web"},
          {"op": "test", "path": "/spec/containers/0", "value": {"image": "nginx:1",
                                                                 "name": "nginx"}},
          {"op": "test", "path": "/missing", "value": None}],
         lambda d: d == DOC),
    ],
)
def test_json_patch(ops: Any, check: Any) -> None:
    before = copy.deepcopy(DOC)
    assert check(apply_json_patch(DOC, ops))
    assert before == DOC


def test_json_patch_copy_is_independent() -> None:
    result = apply_json_patch(DOC, [
        {"op": "copy", "from": "/metadata/labels", "path": "/spec/selector"},
        {"op": "add", "path": "/spec/selector/extra", "value": "1"},
    ])
    assert "extra" not in result["metadata"]["labels"]


@pytest.mark.parametrize(
    ("ops", "cause"),
    [
        ([{"op": "remove", "path": "/spec/nope/x"}],
         'remove operation does not apply: doc is missing path: "/spec/nope/x": missing value'),
        ([{"op": "remove", "path": "/metadata/nope"}],
         "error in remove for path: '/metadata/nope': Unable to remove nonexistent key: nope: "
         "missing value"),
        ([{"op": "add", "path": "/a/b", "value": 1}],
         'add operation does not apply: doc is missing path: "/a/b": missing value'),
        ([{"op": "add", "path": "/spec/containers/5", "value": 1}],
         "error in add for path: '/spec/containers/5': Unable to access invalid index: 5: "
         "invalid index referenced"),
        ([{"op": "add", "path": "/spec/containers/x", "value": 1}],
         "error in add for path: '/spec/containers/x': value was not a proper array index: 'x': "
         'strconv.Atoi: parsing "x": invalid syntax'),
        ([{"op": "replace", "path": "/spec/containers/3", "value": 1}],
         "replace operation does not apply: doc is missing key: /spec/containers/3: "
         "missing value"),
        ([{"op": "test", "path": "/metadata/name", "value": "db"}],
         "testing value /metadata/name failed: test failed"),
        ([{"op": "test", "path": "/spec/nodeName", "value": True}],
         "testing value /spec/nodeName failed: test failed"),
        ([{"op": "move", "from": "/metadata/nope", "path": "/x"}],
         "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value"),
        ([{"op": "frobnicate", "path": "/x"}], "Unexpected kind: frobnicate"),
        ([{"path": "/x"}], "Unexpected kind: unknown"),
        ([{"op": "add", "value": 1}], "add operation failed to decode path: missing value"),
        # All or nothing: the first operation applied, the second failed.
        ([{"op": "add", "path": "/x", "value": 1}, {"op": "remove", "path": "/y"}],
         "error in remove for path: '/y': Unable to remove nonexistent key: y: missing value"),
    ],
)
def test_json_patch_failures_are_kubes_generic_422(ops: list[Any], cause: str) -> None:
    before = copy.deepcopy(DOC)
    with pytest.raises(Invalid) as caught:
        apply_json_patch(DOC, ops)
    status = caught.value.status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert status["details"]["causes"] == [{"reason": "UnexpectedServerResponse",
                                            "message": cause}]
    assert before == DOC


@pytest.mark.parametrize(
    ("ops", "error", "message"),
    [
        ({"op": "add"}, BadRequest,
         "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        (["add"], BadRequest,
         "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
        ([{"op": "test", "path": "/a"}] * 10001, RequestEntityTooLarge,
         "The allowed maximum operations in a JSON patch is 10000, got 10001"),
    ],
)
def test_json_patch_malformed(ops: Any, error: type[ApiError], message: str) -> None:
    with pytest.raises(error) as caught:
        apply_json_patch(DOC, ops)
    assert caught.value.message == message


# --- strategic merge patch -------------------------------------------------------------------

NGINX: dict[str, Any] = {
    "name": "nginx", "image": "nginx:1.15", "imagePullPolicy": "IfNotPresent",
    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443,
                                                         "protocol": "TCP"}],
    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    "terminationMessagePath": "/dev/termination-log",
}
POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
        "name": "web", "namespace": "default", "uid": "u-1", "labels": {"app": "web"},
        "finalizers": ["a.example.com/f", "b.example.com/f"],
        "ownerReferences": [{"uid": "o-1", "kind": "ReplicaSet", "name": "rs"}],
    },
    "spec": {
        "containers": [NGINX, {"name": "sidecar", "image": "busybox"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "restartPolicy": "Always",
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"},
                       {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "nginx", "ready": False},
                              {"name": "sidecar", "ready": True}],
    },
}
NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
    "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
    "status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                       {"type": "MemoryPressure", "status": "False"}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                      {"type": "Hostname", "address": "n1"}],
    },
}


def names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [item[key] for item in items]


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def test_kubectl_apply_changing_label_and_image_keeps_other_container_fields() -> None:
    last_applied = json.dumps({"apiVersion": "v1", "kind": "Pod"})
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                     last_applied},
                     "labels": {"app": "web2"}},
        "spec": {"$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
                 "containers": [{"image": "busybox:2", "name": "nginx"}]},
    }
    result = apply_strategic_merge_patch(POD, patch, merge_keys=PODS.merge_keys)
    assert result["metadata"]["labels"] == {"app": "web2"}
    assert result["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": last_applied}
    assert container(result, "nginx") == {**NGINX, "image": "busybox:2"}
    assert names(result["spec"]["containers"]) == ["nginx", "sidecar"]
    assert result["spec"]["volumes"] == POD["spec"]["volumes"]
    assert result["status"] == POD["status"]
    assert not any(k.startswith("$") for k in result["spec"])


def test_kubectl_apply_replacing_an_env_var_orders_as_the_config() -> None:
    patch = {"spec": {
        "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
        "containers": [{
            "name": "nginx",
            "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
            "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
        }],
    }}
    result = apply_strategic_merge_patch(POD, patch, merge_keys=PODS.merge_keys)
    assert container(result, "nginx")["env"] == [{"name": "A", "value": "1"},
                                                 {"name": "C", "value": "3"}]
    assert container(result, "nginx")["ports"] == NGINX["ports"]
    assert names(result["spec"]["containers"]) == ["nginx", "sidecar"]


STRATEGIC_CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("null deletes a key",
     {"metadata": {"labels": {"app": None}}, "spec": {"restartPolicy": None}},
     lambda r: r["metadata"]["labels"] == {} and "restartPolicy" not in r["spec"]),
    ("new container goes first, as kube-apiserver orders it",
     {"spec": {"containers": [{"name": "new", "image": "redis", "env": None}]}},
     lambda r: names(r["spec"]["containers"]) == ["new", "nginx", "sidecar"]
     and container(r, "new") == {"name": "new", "image": "redis"}),
    ("ports merge by containerPort",
     {"spec": {"containers": [{"name": "nginx", "ports": [{"containerPort": 443,
                                                           "name": "https"}]}]}},
     lambda r: container(r, "nginx")["ports"] == [
         {"containerPort": 80, "protocol": "TCP"},
         {"containerPort": 443, "protocol": "TCP", "name": "https"}]),
    ("env merges by name, null inside an element deletes",
     {"spec": {"containers": [{"name": "nginx", "env": [{"name": "B", "value": None,
                                                         "valueFrom": {"a": 1}}]}]}},
     lambda r: container(r, "nginx")["env"] == [{"name": "A", "value": "1"},
                                                {"name": "B", "valueFrom": {"a": 1}}]),
    ("volumeMounts merge by mountPath",
     {"spec": {"containers": [{"name": "nginx", "volumeMounts": [
         {"mountPath": "/data", "readOnly": True}, {"mountPath": "/cache", "name": "c"}]}]}},
     lambda r: container(r, "nginx")["volumeMounts"] == [
         {"name": "data", "mountPath": "/data", "readOnly": True},
         {"mountPath": "/cache", "name": "c"}]),
    ("$patch: delete removes a list element by merge key",
     {"spec": {"$setElementOrder/containers": [{"name": "nginx"}],
               "containers": [{"$patch": "delete", "name": "sidecar"}]}},
     lambda r: names(r["spec"]["containers"]) == ["nginx"]),
    ("$patch: replace in a list replaces it with the other elements",
     {"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}},
     lambda r: r["spec"]["containers"] == [{"name": "only", "image": "x"}]),
    ("$patch: replace in a map replaces the map",
     {"metadata": {"labels": {"$patch": "replace", "new": "1"}}},
     lambda r: r["metadata"]["labels"] == {"new": "1"}),
    ("an element carrying $patch: replace is a directive on the whole list",
     {"spec": {"containers": [{"name": "nginx", "$patch": "replace", "image": "i"}]}},
     lambda r: r["spec"]["containers"] == []),
    ("$patch: delete in a map empties it",
     {"metadata": {"labels": {"$patch": "delete"}}},
     lambda r: r["metadata"]["labels"] == {}),
    ("$patch: delete of an absent map leaves nothing",
     {"metadata": {"annotations": {"$patch": "delete"}}},
     lambda r: "annotations" not in r["metadata"]),
    ("lists without a patch strategy are replaced: tolerations",
     {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}},
     lambda r: r["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]),
    ("lists without a patch strategy are replaced: containerStatuses",
     {"status": {"containerStatuses": [{"name": "nginx", "ready": True}]}},
     lambda r: r["status"]["containerStatuses"] == [{"name": "nginx", "ready": True}]),
    ("pod conditions merge by type",
     {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                {"type": "Initialized", "status": "True"}]}},
     lambda r: r["status"]["conditions"] == [
         {"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"},
         {"type": "PodScheduled", "status": "True"}]),
    ("finalizers merge as a set",
     {"metadata": {"finalizers": ["b.example.com/f", "c.example.com/f"]}},
     lambda r: sorted(r["metadata"]["finalizers"]) == [
         "a.example.com/f", "b.example.com/f", "c.example.com/f"]),
    ("$deleteFromPrimitiveList removes from a primitive list",
     {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/f"]}},
     lambda r: r["metadata"]["finalizers"] == ["b.example.com/f"]),
    ("$deleteFromPrimitiveList of an absent list adds nothing",
     {"spec": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
     lambda r: "finalizers" not in r["spec"]),
    ("$setElementOrder reorders a primitive list",
     {"metadata": {"$setElementOrder/finalizers": ["b.example.com/f", "a.example.com/f"]}},
     lambda r: r["metadata"]["finalizers"] == ["b.example.com/f", "a.example.com/f"]),
    ("$setElementOrder reorders containers",
     {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}]}},
     lambda r: names(r["spec"]["containers"]) == ["sidecar", "nginx"]),
    ("ownerReferences merge by uid",
     {"metadata": {"ownerReferences": [{"uid": "o-1", "controller": True},
                                       {"uid": "o-2", "kind": "Job", "name": "j"}]}},
     lambda r: r["metadata"]["ownerReferences"] == [
         {"uid": "o-1", "kind": "ReplicaSet", "name": "rs", "controller": True},
         {"uid": "o-2", "kind": "Job", "name": "j"}]),
    ("$retainKeys clears what it does not list",
     {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"],
                            "hostPath": {"path": "/tmp"}}]}},
     lambda r: r["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/tmp"}}]),
    ("a type change replaces",
     {"spec": {"restartPolicy": {"weird": None, "x": 1}}},
     lambda r: r["spec"]["restartPolicy"] == {"x": 1}),
    ("$patch at the top replaces the whole object",
     {"$patch": "replace", "metadata": {"name": "web"}},
     lambda r: r == {"metadata": {"name": "web"}}),
]


@pytest.mark.parametrize(("case", "patch", "check"), STRATEGIC_CASES,
                         ids=[case for case, _, _ in STRATEGIC_CASES])
def test_strategic_merge_patch_on_pods(case: str, patch: dict[str, Any], check: Any) -> None:
    before = copy.deepcopy(POD)
    patch_before = copy.deepcopy(patch)
    assert check(apply_strategic_merge_patch(POD, patch, merge_keys=PODS.merge_keys)), case
    assert before == POD and patch_before == patch


NODE_CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("kubectl cordon", {"spec": {"unschedulable": True}},
     lambda r: r["spec"]["unschedulable"] is True and r["spec"]["taints"] == NODE["spec"]["taints"]),
    ("kubectl uncordon", {"spec": {"unschedulable": None}},
     lambda r: "unschedulable" not in r["spec"]),
    ("taints have no patch strategy: replaced",
     {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}},
     lambda r: r["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]),
    ("node conditions merge by type",
     {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": None}]}},
     lambda r: r["status"]["conditions"] == [{"type": "Ready", "status": "False"},
                                             {"type": "MemoryPressure", "status": "False"}]),
    ("addresses merge by type",
     {"status": {"addresses": [{"type": "Hostname", "address": "n1.local"}]}},
     lambda r: r["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"},
                                            {"type": "Hostname", "address": "n1.local"}]),
    ("podCIDRs merge as a set",
     {"spec": {"podCIDRs": ["10.0.1.0/24"]}},
     lambda r: sorted(r["spec"]["podCIDRs"]) == ["10.0.0.0/24", "10.0.1.0/24"]),
    ("labels merge", {"metadata": {"labels": {"role": "gpu"}}},
     lambda r: r["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "role": "gpu"}),
]


@pytest.mark.parametrize(("case", "patch", "check"), NODE_CASES,
                         ids=[case for case, _, _ in NODE_CASES])
def test_strategic_merge_patch_on_nodes(case: str, patch: dict[str, Any], check: Any) -> None:
    assert check(apply_strategic_merge_patch(NODE, patch, merge_keys=NODES.merge_keys)), case


def test_patch_strategy_is_per_resource() -> None:
    """status.addresses merges on nodes, but a pod has no such strategy: replaced."""
    doc = {"status": {"addresses": [{"type": "A"}, {"type": "B"}]}}
    patch = {"status": {"addresses": [{"type": "B", "x": 1}]}}
    merged = apply_strategic_merge_patch(doc, patch, merge_keys=NODES.merge_keys)
    replaced = apply_strategic_merge_patch(doc, patch, merge_keys=PODS.merge_keys)
    assert merged["status"]["addresses"] == [{"type": "A"}, {"type": "B", "x": 1}]
    assert replaced["status"]["addresses"] == [{"type": "B", "x": 1}]


@pytest.mark.parametrize(
    ("patch", "error", "message"),
    [
        ({"metadata": {"$retainKeys": "name"}}, BadRequest, "invalid patch format of retainKeys"),
        ({"metadata": {"$retainKeys": ["name"], "labels": {}}}, BadRequest,
         "invalid patch format of retainKeys"),
        ({"metadata": {"$deleteFromPrimitiveListX/finalizers": ["a"]}}, BadRequest,
         "invalid patch format of primitive list"),
        ({"spec": {"$setElementOrderX/containers": []}}, BadRequest,
         "invalid patch format of setElementOrder list"),
        ({"spec": {"containers": [{"image": "x"}]}}, UnknownError,
         "map: map[image:x] does not contain declared merge key: name"),
        ({"metadata": {"labels": {"$patch": "merge"}}}, UnknownError,
         "unknown patch type: merge in map: map[$patch:merge]"),
        ({"spec": {"containers": [{"name": "x"}, {"$patch": "merge"}]}}, UnknownError,
         "merging lists cannot yet be specified in the patch"),
        ({"spec": {"containers": [{"name": "x", "$patch": "bogus"}]}}, UnknownError,
         "unknown patch type: bogus in map: map[$patch:bogus name:x]"),
        ({"spec": {"$setElementOrder/containers": [{"name": "nginx"}],
                   "containers": [{"name": "other"}]}}, UnknownError,
         "The order in patch list:\n[map[name:other]]\n doesn't match $setElementOrder list:\n"
         "[map[name:nginx]]\n"),
        ({"metadata": {"finalizers": [["nested"]]}}, UnknownError,
         "list element types are not identical: [[a.example.com/f b.example.com/f] [[nested]]]"),
        ([1], BadRequest,
         "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ],
)
def test_strategic_merge_patch_errors(patch: Any, error: type[ApiError], message: str) -> None:
    with pytest.raises(error) as caught:
        apply_strategic_merge_patch(POD, patch, merge_keys=PODS.merge_keys)
    assert caught.value.message == message


def test_strategic_merge_patch_errors_blame_the_patch_not_the_server() -> None:
    # kube-apiserver answers these 500 with no reason; a bad patch is the client's error
    with pytest.raises(UnknownError) as caught:
        apply_strategic_merge_patch(POD, {"spec": {"containers": [{"image": "x"}]}},
                                    merge_keys=PODS.merge_keys)
    assert caught.value.status()["code"] == 400
    assert caught.value.status()["reason"] == "BadRequest"
    assert "does not contain declared merge key: name" in caught.value.message


def test_strategic_merge_patch_list_of_lists_is_a_422() -> None:
    doc: dict[str, Any] = {"metadata": {"finalizers": []}}
    with pytest.raises(Invalid) as caught:
        apply_strategic_merge_patch(doc, {"metadata": {"finalizers": [["x"]]}}, merge_keys=PODS.merge_keys)
    assert caught.value.details["causes"][0]["message"] == "lists of lists are not supported"
