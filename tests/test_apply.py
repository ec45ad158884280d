"""Server-side apply and managedFields: the field sets as tables (FieldsV1, merge, compare,
conflicts), then over HTTP, with kubectl 1.37 `apply --server-side`, the official client's
DynamicClient and lightkube."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import lightkube
import pytest
import yaml
from kubernetes.dynamic import DynamicClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod as LightkubePod

from apiserver import managed_fields, objects
from apiserver.patch import apply as fields
from apiserver.resources.pods import PODS
from common.errors import Conflict
from tests.support import ApiServer, Kubectl, unique

SCHEMA = managed_fields.schema_of(PODS)
APPLY = {"Content-Type": "application/apply-patch+yaml"}
OLD_KUBECTL = "/usr/bin/kubectl"  # 1.32 where installed
NGINX = 'k:{"name":"nginx"}'


def pod(name: str, image: str = "nginx:1.25", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "nginx", "image": image}], **spec}}


# --- field sets ----------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "expected"), [
    ({"metadata": {"name": "web", "labels": {"app": "web"}}},
     {"f:metadata": {"f:labels": {"f:app": {}}}}),
    (pod("web"), {"f:spec": {"f:containers": {NGINX: {".": {}, "f:image": {}, "f:name": {}}}}}),
    # ports are keyed by containerPort and protocol (TCP when left out)
    ({"spec": {"containers": [{"name": "nginx", "ports": [{"containerPort": 80}]}]}},
     {"f:spec": {"f:containers": {NGINX: {".": {}, "f:name": {}, "f:ports": {
         'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}}}}),
    ({"spec": {"containers": [{"name": "nginx", "env": [{"name": "A", "value": "1"}]}]}},
     {"f:spec": {"f:containers": {NGINX: {".": {}, "f:env": {
         'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}, "f:name": {}}}}}),
    # finalizers are a set, command is atomic, an empty struct is a leaf
    ({"metadata": {"finalizers": ["a.io/x"]},
      "spec": {"containers": [{"name": "nginx", "command": ["sh"], "resources": {}}]}},
     {"f:metadata": {"f:finalizers": {'v:"a.io/x"': {}}},
      "f:spec": {"f:containers": {NGINX: {".": {}, "f:command": {}, "f:name": {},
                                          "f:resources": {}}}}}),
    ({"spec": {"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k"}]}},
     {"f:spec": {"f:nodeSelector": {"f:disk": {}}, "f:tolerations": {}}}),
    # what the server sets is never tracked
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "d", "uid": "u"}},
     {}),
])
def test_field_set_of_a_configuration(config: dict[str, Any], expected: dict[str, Any]) -> None:
    assert fields.to_fields_v1(fields.field_set(SCHEMA, config)) == expected
    assert fields.from_fields_v1(expected) == fields.field_set(SCHEMA, config)


@pytest.mark.parametrize("tree", [
    {},
    {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
    {"f:spec": {"f:containers": {NGINX: {".": {}, "f:image": {}}, 'k:{"name":"a"}': {}}}},
    {"f:metadata": {"f:finalizers": {".": {}, 'v:"x"': {}}}},
    {"f:spec": {"f:things": {"i:0": {"f:a": {}}, "i:1": {}}}},
])
def test_fields_v1_round_trip(tree: dict[str, Any]) -> None:
    assert fields.to_fields_v1(fields.from_fields_v1(tree)) == tree


@pytest.mark.parametrize("tree", [[], {"f:a": []}, {"x:y": {}}, {"k:{notjson": {}}])
def test_unreadable_fields_v1(tree: Any) -> None:
    with pytest.raises(ValueError):
        fields.from_fields_v1(tree)


@pytest.mark.parametrize(("path", "text"), [
    (("f:spec", "f:containers", NGINX, "f:image"), '.spec.containers[name="nginx"].image'),
    (("f:spec", "f:containers", NGINX, "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'),
     '.spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"]'),
    (("f:metadata", "f:finalizers", 'v:"a"'), '.metadata.finalizers[="a"]'),
    (("f:metadata", "f:labels", "f:app"), ".metadata.labels.app"),
    (("f:spec", "f:things", "i:3", "f:a"), ".spec.things[3].a"),
])
def test_path_string(path: fields.Path, text: str) -> None:
    assert fields.path_string(path) == text


@pytest.mark.parametrize(("live", "config", "expected"), [
    ({"metadata": {"labels": {"a": "1"}}}, {"metadata": {"labels": {"b": "2"}}},
     {"metadata": {"labels": {"a": "1", "b": "2"}}}),
    # containers merge by name; atomic lists are replaced; sets are unions
    ({"spec": {"containers": [{"name": "a", "image": "x", "command": ["sh"]},
                              {"name": "b", "image": "y"}]}},
     {"spec": {"containers": [{"name": "b", "image": "z"},
                              {"name": "a", "command": ["bash"]}, {"name": "c"}]}},
     {"spec": {"containers": [{"name": "a", "image": "x", "command": ["bash"]},
                              {"name": "b", "image": "z"}, {"name": "c"}]}}),
    ({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["b", "a"]}},
     {"metadata": {"finalizers": ["a", "b"]}}),
    ({"spec": {"tolerations": [{"key": "a"}]}}, {"spec": {"tolerations": [{"key": "b"}]}},
     {"spec": {"tolerations": [{"key": "b"}]}}),
])
def test_merge(live: dict[str, Any], config: dict[str, Any], expected: dict[str, Any]) -> None:
    assert fields.merge(SCHEMA, live, config) == expected


@pytest.mark.parametrize(("old", "new", "added", "modified", "removed"), [
    ({"metadata": {}}, {"metadata": {"labels": {"a": "1"}}},
     {("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:a")}, set(), set()),
    (pod("x"), pod("x", "nginx:2"), set(),
     {("f:spec", "f:containers", NGINX, "f:image")}, set()),
    (pod("x", nodeName="n"), pod("x"), set(), set(), {("f:spec", "f:nodeName")}),
    (pod("x"), {**pod("x"), "spec": {"containers": []}}, set(), set(),
     {("f:spec", "f:containers", NGINX), ("f:spec", "f:containers", NGINX, "f:name"),
      ("f:spec", "f:containers", NGINX, "f:image")}),
])
def test_compare(old: dict[str, Any], new: dict[str, Any], added: set[fields.Path],
                 modified: set[fields.Path], removed: set[fields.Path]) -> None:
    assert fields.compare(SCHEMA, old, new) == fields.Comparison(
        frozenset(added), frozenset(modified), frozenset(removed))


def test_a_new_pods_fields_are_computed_once_and_match_compare() -> None:
    obj = objects.default_object(PODS, objects.prepare_for_create(
        PODS, {**pod("web"), "metadata": {"name": "web", "labels": {"app": "web"}}},
        namespace="default"))
    fast = managed_fields.record_create(PODS, obj, manager="m", now="t")
    slow = managed_fields.record_update(PODS, None, obj, manager="m", subresource=None, now="t")
    assert fast == slow
    tree = fast["metadata"]["managedFields"][0]["fieldsV1"]
    assert tree["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert tree["f:spec"]["f:containers"][NGINX]["f:imagePullPolicy"] == {}
    assert "f:status" not in tree and "f:containers" in tree["f:spec"]
    assert managed_fields.create_tree(PODS, obj) is managed_fields.create_tree(PODS, obj)


def test_what_admission_defaults_belongs_to_the_creator_only_when_it_sent_it() -> None:
    sent = pod("web")
    obj = objects.default_object(PODS, objects.prepare_for_create(PODS, sent,
                                                                  namespace="default"))
    assert obj["spec"]["priority"] == 0
    tree = managed_fields.record_create(PODS, obj, manager="m", sent=sent)[
        "metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:priority" not in tree["f:spec"] and "f:preemptionPolicy" not in tree["f:spec"]
    assert "f:restartPolicy" in tree["f:spec"]  # a decode-time default: the creator's
    sent = pod("web", priority=0)
    tree = managed_fields.record_create(PODS, obj, manager="m", sent=sent)[
        "metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:priority" in tree["f:spec"] and "f:preemptionPolicy" not in tree["f:spec"]


def managers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def apply(live: dict[str, Any] | None, config: dict[str, Any], manager: str, *,
          force: bool = False) -> dict[str, Any]:
    return managed_fields.record_apply(PODS, live, config, manager=manager, subresource=None,
                                       force=force, now="t")


def test_apply_conflicts_with_the_owner_of_a_changed_field() -> None:
    live = apply(None, pod("web"), "alice")
    assert managers(live)["alice"]["operation"] == "Apply"
    # bob applies the same value: shared, no conflict
    live = apply(live, pod("web"), "bob")
    assert set(managers(live)) == {"alice", "bob"}
    with pytest.raises(Conflict) as caught:
        apply(live, pod("web", "nginx:2"), "bob")
    assert caught.value.message == ('Apply failed with 1 conflict: conflict with "alice": '
                                    '.spec.containers[name="nginx"].image')
    assert caught.value.details["causes"] == [{
        "reason": "FieldManagerConflict", "message": 'conflict with "alice"',
        "field": '.spec.containers[name="nginx"].image'}]
    forced = apply(live, pod("web", "nginx:2"), "bob", force=True)
    assert forced["spec"]["containers"][0]["image"] == "nginx:2"
    alice = fields.from_fields_v1(managers(forced)["alice"]["fieldsV1"])
    assert ("f:spec", "f:containers", NGINX, "f:image") not in alice


def test_an_update_takes_fields_and_apply_names_it_by_version() -> None:
    live = apply(None, pod("web"), "kubectl")
    edited = managed_fields.record_update(PODS, live, {**live, **pod("web", "nginx:3")},
                                          manager="kubectl-edit", subresource=None, now="t")
    assert set(managers(edited)) == {"kubectl", "kubectl-edit"}
    with pytest.raises(Conflict, match='conflict with "kubectl-edit" using v1: '):
        apply(edited, pod("web", "nginx:4"), "kubectl")


def test_several_conflicts_are_listed_per_manager() -> None:
    live = apply(None, {**pod("web"), "metadata": {"name": "web", "labels": {"a": "1"}}}, "x")
    config = {**pod("web", "nginx:2"), "metadata": {"name": "web", "labels": {"a": "2"}}}
    with pytest.raises(Conflict) as caught:
        apply(live, config, "y")
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "x":\n- .metadata.labels.a\n'
        '- .spec.containers[name="nginx"].image')
    assert len(caught.value.details["causes"]) == 2


def test_fields_a_manager_stops_applying_are_removed_unless_someone_owns_them() -> None:
    labelled = {**pod("web"), "metadata": {"name": "web", "labels": {"a": "1", "b": "2"}}}
    live = apply(None, labelled, "alice")
    live = apply(live, {**pod("web"), "metadata": {"name": "web", "labels": {"b": "2"}}}, "bob")
    after = apply(live, pod("web"), "alice")
    assert after["metadata"]["labels"] == {"b": "2"}  # a: alice's only; b: bob's too


def test_an_object_without_managed_fields_is_before_first_apply_s() -> None:
    live = pod("web")  # written before managedFields were tracked, or after they were cleared
    with pytest.raises(Conflict, match='conflict with "before-first-apply" using v1'):
        apply(live, pod("web", "nginx:2"), "alice")
    applied = apply(live, pod("web"), "alice")
    assert set(managers(applied)) == {"alice", "before-first-apply"}


def test_kubectl_takes_over_what_client_side_apply_last_applied() -> None:
    config = pod("web")
    live = {**config, "metadata": {"name": "web", "annotations": {
        managed_fields.LAST_APPLIED: json.dumps(config)}}}
    live = managed_fields.record_update(PODS, None, live, manager="kubectl-client-side-apply",
                                        subresource=None, now="t")
    upgraded = apply(live, pod("web", "nginx:2"), "kubectl")
    assert upgraded["spec"]["containers"][0]["image"] == "nginx:2"
    assert json.loads(upgraded["metadata"]["annotations"][managed_fields.LAST_APPLIED]) == \
        pod("web", "nginx:2")
    with pytest.raises(Conflict):  # only kubectl's own apply upgrades
        apply(live, pod("web", "nginx:2"), "other")


def test_past_ten_update_managers_the_oldest_become_ancient_changes() -> None:
    live: dict[str, Any] = pod("web")
    for i in range(12):
        labelled = {**live, "metadata": {**live["metadata"],
                                         "labels": {**live["metadata"].get("labels", {}),
                                                    f"l{i}": "x"}}}
        live = managed_fields.record_update(PODS, live, labelled, manager=f"m{i:02}",
                                            subresource=None, now=f"2026-01-01T00:00:{i:02}Z")
    entries = live["metadata"]["managedFields"]
    assert len(entries) == 10
    ancient = managers(live)["ancient-changes"]
    assert ancient["time"] == "2026-01-01T00:00:02Z"
    assert set(ancient["fieldsV1"]["f:metadata"]["f:labels"]) >= {"f:l0", "f:l1", "f:l2"}
    assert [e["manager"] for e in entries][1:] == [f"m{i:02}" for i in range(3, 12)]


@pytest.mark.parametrize(("entry", "field"), [
    ({"manager": "m", "operation": "Patch", "fieldsType": "FieldsV1"},
     "metadata.managedFields[0].operation"),
    ({"manager": "m", "operation": "Update", "fieldsType": "FieldsV2"},
     "metadata.managedFields[0].fieldsType"),
    ({"manager": "m" * 129, "operation": "Update"}, "metadata.managedFields[0].manager"),
])
def test_invalid_managed_fields(entry: dict[str, Any], field: str) -> None:
    assert [c["field"] for c in managed_fields.validate([entry])] == [field]


@pytest.mark.parametrize(("query", "agent", "manager"), [
    ({"fieldManager": "mine"}, "kubectl/v1.37.1 (linux/amd64)", "mine"),
    ({}, "kubectl/v1.37.1 (linux/amd64) kubernetes/abc", "kubectl"),
    ({}, "kube-scheduler/v1.37.1", "kube-scheduler"),
    ({}, None, ""),
])
def test_manager_name(query: dict[str, str], agent: str | None, manager: str) -> None:
    assert managed_fields.manager_name(query, agent) == manager


# --- HTTP ----------------------------------------------------------------------------------

def pod_path(name: str, namespace: str = "default") -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


async def test_apply_creates_then_updates_and_conflicts(http: httpx.AsyncClient) -> None:
    name = unique("ssa")
    r = await http.patch(pod_path(name) + "?fieldManager=alice",
                         content=yaml.safe_dump(pod(name)), headers=APPLY)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["spec"]["restartPolicy"] == "Always"  # defaults as on create
    assert created["metadata"]["managedFields"] == [{
        "manager": "alice", "operation": "Apply", "apiVersion": "v1",
        "time": created["metadata"]["managedFields"][0]["time"], "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:containers": {
            NGINX: {".": {}, "f:image": {}, "f:name": {}}}}}}]
    r = await http.patch(pod_path(name) + "?fieldManager=bob",
                         json={"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}},
                         headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200, r.text
    assert set(managers(r.json())) == {"alice", "bob"}
    # JSON is YAML: an apply body may be either
    r = await http.patch(pod_path(name) + "?fieldManager=alice",
                         content=json.dumps(pod(name, "nginx:3")), headers=APPLY)
    assert r.status_code == 409, r.text
    assert r.json()["message"] == ('Apply failed with 1 conflict: conflict with "bob" using v1: '
                                   '.spec.containers[name="nginx"].image')
    assert r.json()["reason"] == "Conflict"
    assert r.json()["details"]["causes"][0]["reason"] == "FieldManagerConflict"
    r = await http.patch(pod_path(name) + "?fieldManager=alice&force=true&dryRun=All",
                         content=yaml.safe_dump(pod(name, "nginx:3")), headers=APPLY)
    assert r.status_code == 200 and r.json()["spec"]["containers"][0]["image"] == "nginx:3"
    r = await http.get(pod_path(name))
    assert r.json()["spec"]["containers"][0]["image"] == "nginx:2"  # the dry run wrote nothing
    r = await http.patch(pod_path(name) + "?fieldManager=alice&force=true",
                         content=yaml.safe_dump(pod(name, "nginx:3")), headers=APPLY)
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["containers"][0]["image"] == "nginx:3"
    assert "bob" not in managers(r.json())  # bob owned only the image


async def test_reapplying_the_same_configuration_writes_nothing(http: httpx.AsyncClient,
                                                                ) -> None:
    name = unique("ssa-noop")
    body = yaml.safe_dump({**pod(name), "spec": {"containers": [
        {"name": "nginx", "image": "nginx:1", "bogus": 1}]}})
    first = await http.patch(pod_path(name) + "?fieldManager=m", content=body, headers=APPLY)
    assert first.status_code == 201
    assert first.headers["warning"] == '299 - "unknown field \\"spec.containers[0].bogus\\""'
    again = await http.patch(pod_path(name) + "?fieldManager=m", content=body, headers=APPLY)
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == first.json()["metadata"]["resourceVersion"]
    assert again.json()["metadata"]["managedFields"] == first.json()["metadata"]["managedFields"]
    strict = await http.patch(pod_path(name) + "?fieldManager=m&fieldValidation=Strict",
                              content=body, headers=APPLY)
    assert strict.status_code == 400 and "unknown field" in strict.json()["message"]


async def test_the_default_namespaces_are_the_apiservers(http: httpx.AsyncClient) -> None:
    r = await http.get("/api/v1/namespaces/kube-system")
    assert [e["manager"] for e in r.json()["metadata"]["managedFields"]] == ["kube-apiserver"]


async def test_apply_refusals(http: httpx.AsyncClient) -> None:
    name = unique("ssa-bad")
    body = yaml.safe_dump(pod(name))
    r = await http.patch(pod_path(name), content=body, headers=APPLY)
    assert r.status_code == 422
    assert r.json()["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                   'Required value: is required for apply patch')
    r = await http.patch(pod_path(name) + "?force=true", json={},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422
    assert "force: Forbidden: may not be specified for non-apply patch" in r.json()["message"]
    r = await http.patch(pod_path("other") + "?fieldManager=m", content=body, headers=APPLY)
    assert r.status_code == 400
    assert "does not match the name on the URL" in r.json()["message"]
    r = await http.patch(pod_path(name) + "?fieldManager=m",
                         content=yaml.safe_dump({**pod(name), "kind": "Node"}), headers=APPLY)
    assert r.status_code == 400
    r = await http.patch(pod_path(name) + "?fieldManager=m&dryRun=All", content=body,
                         headers=APPLY)
    assert r.status_code == 201
    assert (await http.get(pod_path(name))).status_code == 404
    r = await http.patch(pod_path(name) + "?fieldManager=m",
                         content=yaml.safe_dump({**pod(name), "spec": {"containers": [
                             {"name": "nginx"}]}}), headers=APPLY)
    assert r.status_code == 422  # validated as a create


async def test_apply_to_status_and_status_in_a_main_apply(http: httpx.AsyncClient) -> None:
    name = unique("ssa-status")
    body = {**pod(name), "status": {"phase": "Running"}}
    r = await http.patch(pod_path(name) + "?fieldManager=a", content=yaml.safe_dump(body),
                         headers=APPLY)
    assert r.status_code == 201, r.text
    assert r.json()["status"]["phase"] == "Pending"  # the main resource ignores status
    assert "f:status" not in managers(r.json())["a"]["fieldsV1"]
    status = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
              "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    r = await http.patch(pod_path(name) + "/status?fieldManager=kubelet",
                         content=yaml.safe_dump(status), headers=APPLY)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    entry = managers(r.json())["kubelet"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {
        ".": {}, "f:status": {}, "f:type": {}}}}}
    r = await http.patch(pod_path(name) + "?fieldManager=a", headers=APPLY,
                         content=yaml.safe_dump({**pod(name), "metadata": {
                             "name": name, "managedFields": [{"manager": "x"}]}}))
    assert r.status_code == 400 and r.json()["message"] == "metadata.managedFields must be nil"


async def test_every_write_records_its_manager(http: httpx.AsyncClient) -> None:
    name = unique("mf")
    r = await http.post("/api/v1/namespaces/default/pods", json=pod(name),
                        headers={"User-Agent": "kube-thing/v1.0 (linux)"})
    assert list(managers(r.json())) == ["kube-thing"]
    r = await http.patch(pod_path(name) + "?fieldManager=kubectl-label",
                         json={"metadata": {"labels": {"a": "b"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
    entry = managers(r.json())["kubectl-label"]
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
    current = r.json()
    current["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    r = await http.put(pod_path(name) + "/status?fieldManager=kubelet", json=current)
    assert r.status_code == 200, r.text
    status = managers(r.json())["kubelet"]
    assert status["subresource"] == "status"
    assert set(status["fieldsV1"]) == {"f:status"}
    # a write that changes nothing changes no managedFields
    again = await http.put(pod_path(name) + "/status?fieldManager=kubelet", json=r.json())
    assert again.json()["metadata"]["resourceVersion"] == r.json()["metadata"]["resourceVersion"]
    # managedFields: [{}] clears them
    r = await http.patch(pod_path(name), json={"metadata": {"managedFields": [{}]}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and "managedFields" not in r.json()["metadata"]
    bad = {**r.json(), "metadata": {**r.json()["metadata"], "managedFields": [
        {"manager": "x", "operation": "Replace", "fieldsType": "FieldsV1", "fieldsV1": {}}]}}
    r = await http.put(pod_path(name), json=bad)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "metadata.managedFields[0].operation"
    r = await http.get("/api/v1/namespaces/default/pods",
                       params={"fieldSelector": "metadata.managedFields=x"})
    assert r.status_code == 400
    r = await http.post("/api/v1/namespaces/default/pods", params={"fieldManager": "m" * 129},
                        json=pod(unique("long")))
    assert r.status_code == 422
    assert r.json()["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldManager: '
                                   "Too long: may not be more than 128 bytes")


async def test_openapi_advertises_apply(http: httpx.AsyncClient) -> None:
    v3 = (await http.get("/openapi/v3/api/v1")).json()
    body = v3["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["requestBody"]
    assert "application/apply-patch+yaml" in body["content"]
    v2 = (await http.get("/openapi/v2")).json()
    assert "application/apply-patch+yaml" in \
        v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["consumes"]


# --- kubectl 1.37 ----------------------------------------------------------------------------

def write(path: Path, obj: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def test_kubectl_apply_server_side(apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    name = unique("kssa")
    manifest = tmp_path / "pod.yaml"
    assert kubectl("apply", "--server-side", "-f", write(manifest, pod(name))) == \
        f"pod/{name} serverside-applied\n"
    assert kubectl("apply", "--server-side", "-f", write(manifest, pod(name, "nginx:1.26"))) \
        == f"pod/{name} serverside-applied\n"
    kubectl("set", "image", f"pod/{name}", "nginx=nginx:1.27")
    refused = kubectl.run("apply", "--server-side", "-f",
                          write(manifest, pod(name, "nginx:1.28")), check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "kubectl-set" using v1: '
        '.spec.containers[name="nginx"].image\n'), refused.stderr
    assert kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest)) == \
        f"pod/{name} serverside-applied\n"
    got = json.loads(kubectl("get", "pod", name, "-o", "json", "--show-managed-fields"))
    assert got["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert {e["manager"]: e["operation"] for e in got["metadata"]["managedFields"]} == {
        "kubectl": "Apply"}


def test_kubectl_edit_then_apply_conflicts(apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    name = unique("kedit")
    manifest = tmp_path / "pod.yaml"
    kubectl("apply", "--server-side", "-f", write(manifest, pod(name)))
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/image: nginx:1.25/image: nginx:1.29/' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    edited = kubectl.run("edit", f"pod/{name}", check=False,
                         env={"KUBE_EDITOR": str(editor)})
    assert edited.returncode == 0, edited.stderr
    refused = kubectl.run("apply", "--server-side", "-f",
                          write(manifest, pod(name, "nginx:1.30")), check=False)
    assert 'conflict with "kubectl-edit" using v1: .spec.containers[name="nginx"].image' in \
        refused.stderr


def test_kubectl_client_side_then_server_side_apply(apiserver: ApiServer,
                                                    tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver, tmp_path / "kubectl")
    name = unique("kcsa")
    manifest = tmp_path / "pod.yaml"
    assert kubectl("apply", "-f", write(manifest, pod(name))) == f"pod/{name} created\n"
    assert kubectl("apply", "--server-side", "-f", write(manifest, pod(name, "nginx:1.26"))) \
        == f"pod/{name} serverside-applied\n"
    got = json.loads(kubectl("get", "pod", name, "-o", "json", "--show-managed-fields"))
    assert got["spec"]["containers"][0]["image"] == "nginx:1.26"
    entries = {e["manager"]: e["operation"] for e in got["metadata"]["managedFields"]}
    assert entries.get("kubectl") == "Apply"
    assert "kubectl-client-side-apply" not in entries  # kubectl migrated its fields
    assert got["metadata"]["generation"] == 2  # one change of the spec: the image
    # and client-side apply can follow again
    assert kubectl("apply", "-f", write(manifest, pod(name, "nginx:1.27"))) == \
        f"pod/{name} configured\n"


@pytest.mark.skipif(not Path(OLD_KUBECTL).exists(), reason=f"no kubectl 1.32 at {OLD_KUBECTL}")
def test_kubectl_132_apply_server_side(apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver, tmp_path / "kubectl", binary=OLD_KUBECTL)
    name = unique("k132")
    manifest = tmp_path / "pod.yaml"
    assert kubectl("apply", "-f", write(manifest, pod(name))) == f"pod/{name} created\n"
    assert kubectl("apply", "--server-side", "-f", write(manifest, pod(name, "nginx:1.26"))) \
        == f"pod/{name} serverside-applied\n"
    kubectl("set", "image", f"pod/{name}", "nginx=nginx:1.27")
    refused = kubectl.run("apply", "--server-side", "-f",
                          write(manifest, pod(name, "nginx:1.28")), check=False)
    assert 'conflict with "kubectl-set" using v1' in refused.stderr
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert kubectl("get", "pod", name, "-o", "jsonpath={.spec.containers[0].image}") == \
        "nginx:1.28"


# --- the official client and lightkube -------------------------------------------------------

def test_dynamic_client_server_side_apply(apiserver: ApiServer) -> None:
    config = kubernetes.client.Configuration()
    apiserver.configure(config)
    with kubernetes.client.ApiClient(config) as api_client:
        pods = DynamicClient(api_client).resources.get(api_version="v1", kind="Pod")
        name = unique("dyn")
        applied = pods.server_side_apply(body=pod(name), name=name, namespace="default",
                                         field_manager="dynamic")
        assert applied.metadata.managedFields[0].manager == "dynamic"
        again = pods.server_side_apply(body=pod(name, "nginx:2"), name=name,
                                       namespace="default", field_manager="dynamic")
        assert again.spec.containers[0].image == "nginx:2"
        with pytest.raises(kubernetes.dynamic.exceptions.ConflictError):
            pods.server_side_apply(body=pod(name, "nginx:3"), name=name, namespace="default",
                                   field_manager="other")


def test_lightkube_apply(apiserver: ApiServer) -> None:
    client = lightkube.Client(field_manager="lightkube",
                              config=KubeConfig.from_dict(apiserver.config_dict()))
    name = unique("lk")

    def lk_pod(image: str) -> LightkubePod:
        return LightkubePod(metadata=ObjectMeta(name=name, namespace="default"),
                            spec=PodSpec(containers=[Container(name="nginx", image=image)]))

    created = client.apply(lk_pod("nginx:1"))
    assert created.metadata is not None and created.metadata.managedFields is not None
    assert created.metadata.managedFields[0].manager == "lightkube"
    updated = client.apply(lk_pod("nginx:2"))
    assert updated.spec is not None and updated.spec.containers[0].image == "nginx:2"
    with pytest.raises(lightkube.ApiError) as caught:
        client.apply(lk_pod("nginx:3"), field_manager="someone-else")
    assert caught.value.status.code == 409
    forced = client.apply(lk_pod("nginx:3"), field_manager="someone-else", force=True)
    assert forced.spec is not None and forced.spec.containers[0].image == "nginx:3"

