"""The apiserver on a real etcd: CRUD, errors that write nothing, concurrency, binding."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
import yaml

from tests.support import ApiServer, Etcd, unique

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.35"}], **spec}}


async def count_pods(http: httpx.AsyncClient) -> int:
    r = await http.get("/api/v1/pods")
    assert r.status_code == 200
    return len(r.json()["items"])


async def test_health_endpoints(http: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        r = await http.get(path)
        assert r.status_code == 200, path
        assert r.text == "ok"


async def test_default_namespaces_exist(http: httpx.AsyncClient) -> None:
    r = await http.get("/api/v1/namespaces")
    names = {ns["metadata"]["name"] for ns in r.json()["items"]}
    assert {"default", "kube-system"} <= names


async def test_create_get_list_delete_json(http: httpx.AsyncClient) -> None:
    name = unique("web")
    r = await http.post(PODS, json=pod(name))
    assert r.status_code == 201, r.text
    created = r.json()
    meta = created["metadata"]
    assert meta["name"] == name and meta["namespace"] == "default"
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    # Kubernetes' defaults
    spec = created["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert created["status"]["phase"] == "Pending"

    got = (await http.get(f"{PODS}/{name}")).json()
    assert got == created

    listed = (await http.get(PODS)).json()
    assert listed["kind"] == "PodList"
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert name in {p["metadata"]["name"] for p in listed["items"]}

    r = await http.delete(f"{PODS}/{name}")  # unbound: removed at once
    assert r.status_code == 200
    assert (await http.get(f"{PODS}/{name}")).status_code == 404


async def test_create_yaml_body(http: httpx.AsyncClient) -> None:
    name = unique("yaml")
    body = yaml.safe_dump(pod(name))
    r = await http.post(PODS, content=body, headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["name"] == name


async def test_resource_version_is_not_stored_in_value(http: httpx.AsyncClient) -> None:
    name = unique("rv")
    created = (await http.post(PODS, json=pod(name))).json()
    r = await http.patch(f"{PODS}/{name}", json={"metadata": {"labels": {"x": "y"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert int(r.json()["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])


async def test_generate_name(http: httpx.AsyncClient) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "gen-"}
    r = await http.post(PODS, json=body)
    assert r.status_code == 201, r.text
    name = r.json()["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5


# -- errors: the right Status, and nothing written -------------------------------------


def assert_status(r: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason
    return dict(body)


async def test_not_found(http: httpx.AsyncClient) -> None:
    body = assert_status(await http.get(f"{PODS}/nope"), 404, "NotFound")
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}


async def test_unknown_namespace_is_404_and_writes_nothing(http: httpx.AsyncClient) -> None:
    before = await count_pods(http)
    r = await http.post("/api/v1/namespaces/nowhere/pods", json=pod(unique("x")))
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'namespaces "nowhere" not found'
    assert await count_pods(http) == before


async def test_already_exists(http: httpx.AsyncClient) -> None:
    name = unique("dup")
    assert (await http.post(PODS, json=pod(name))).status_code == 201
    body = assert_status(await http.post(PODS, json=pod(name)), 409, "AlreadyExists")
    assert body["message"] == f'pods "{name}" already exists'


async def test_invalid_has_one_cause_per_problem(http: httpx.AsyncClient) -> None:
    before = await count_pods(http)
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"},
           "spec": {"restartPolicy": "Sometimes",
                    "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 70000}]},
                                   {"name": "a", "image": ""}]}}
    body = assert_status(await http.post(PODS, json=bad), 422, "Invalid")
    assert body["message"].startswith('Pod "Bad_Name" is invalid: ')
    fields = [c["field"] for c in body["details"]["causes"]]
    assert "metadata.name" in fields
    assert "spec.restartPolicy" in fields
    assert "spec.containers[0].ports[0].containerPort" in fields
    assert "spec.containers[1].name" in fields
    assert "spec.containers[1].image" in fields
    name_cause = next(c for c in body["details"]["causes"] if c["field"] == "metadata.name")
    assert name_cause["reason"] == "FieldValueInvalid"
    assert name_cause["message"].startswith(
        'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of')
    assert await count_pods(http) == before


async def test_no_containers_is_invalid(http: httpx.AsyncClient) -> None:
    r = await http.post(PODS, json={"metadata": {"name": unique("empty")}, "spec": {}})
    body = assert_status(r, 422, "Invalid")
    assert {"reason": "FieldValueRequired", "message": "Required value",
            "field": "spec.containers"} in body["details"]["causes"]


async def test_undecodable_body_is_400(http: httpx.AsyncClient) -> None:
    before = await count_pods(http)
    r = await http.post(PODS, content=b"{not json",
                        headers={"Content-Type": "application/json"})
    assert_status(r, 400, "BadRequest")
    r = await http.post(PODS, content=b"[1, 2]", headers={"Content-Type": "application/json"})
    assert_status(r, 400, "BadRequest")
    assert await count_pods(http) == before


async def test_body_over_3mib_is_413(http: httpx.AsyncClient) -> None:
    before = await count_pods(http)
    big = pod(unique("big"))
    big["metadata"]["annotations"] = {"blob": "x" * (3 * 1024 * 1024 + 10)}
    r = await http.post(PODS, content=json.dumps(big).encode(),
                        headers={"Content-Type": "application/json"})
    assert_status(r, 413, "RequestEntityTooLarge")
    assert await count_pods(http) == before


async def test_unknown_content_type_is_415(http: httpx.AsyncClient) -> None:
    before = await count_pods(http)
    r = await http.post(PODS, content=json.dumps(pod(unique("ct"))).encode(),
                        headers={"Content-Type": "text/plain"})
    assert_status(r, 415, "UnsupportedMediaType")
    name = unique("patchct")
    await http.post(PODS, json=pod(name))
    r = await http.patch(f"{PODS}/{name}", json={"metadata": {"labels": {"a": "b"}}},
                         headers={"Content-Type": "application/json"})
    assert_status(r, 415, "UnsupportedMediaType")
    assert await count_pods(http) == before + 1


async def test_strict_field_validation_refuses_before_writing(http: httpx.AsyncClient) -> None:
    name = unique("strict")
    body = pod(name)
    body["spec"]["containers"][0]["imagePolicy"] = "x"
    r = await http.post(PODS, json=body, params={"fieldValidation": "Strict"})
    assert r.status_code == 400
    assert r.json()["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict '
                                   'decoding error: unknown field "spec.containers[0].imagePolicy"')
    assert (await http.get(f"{PODS}/{name}")).status_code == 404
    r = await http.post(PODS, json=body)  # Warn, the default: stored without the field
    assert r.status_code == 201
    assert r.headers["Warning"] == '299 - "unknown field \\"spec.containers[0].imagePolicy\\""'
    current = r.json()
    current["metadata"]["labels"] = {"app": "strict"}
    current["spec"]["containers"][0]["imagePolicy"] = "x"
    r = await http.put(f"{PODS}/{name}", json=current, params={"fieldValidation": "Strict"})
    assert r.status_code == 400
    assert (await http.get(f"{PODS}/{name}")).json()["metadata"]["labels"] == {"app": "web"}
    await http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})


async def test_method_not_allowed(http: httpx.AsyncClient) -> None:
    assert_status(await http.put(PODS, json=pod("x")), 405, "MethodNotAllowed")


async def test_stale_update_conflicts(http: httpx.AsyncClient) -> None:
    name = unique("stale")
    created = (await http.post(PODS, json=pod(name))).json()
    first = json.loads(json.dumps(created))
    first["metadata"]["labels"] = {"v": "1"}
    assert (await http.put(f"{PODS}/{name}", json=first)).status_code == 200
    stale = json.loads(json.dumps(created))
    stale["metadata"]["labels"] = {"v": "2"}
    body = assert_status(await http.put(f"{PODS}/{name}", json=stale), 409, "Conflict")
    assert body["message"] == (
        f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
        'please apply your changes to the latest version and try again')
    assert (await http.get(f"{PODS}/{name}")).json()["metadata"]["labels"] == {"v": "1"}


async def test_concurrent_updates_with_same_version_exactly_one_wins(
        http: httpx.AsyncClient) -> None:
    name = unique("race")
    created = (await http.post(PODS, json=pod(name))).json()

    async def put(value: str) -> int:
        body = json.loads(json.dumps(created))
        body["metadata"]["labels"] = {"winner": value}
        return (await http.put(f"{PODS}/{name}", json=body)).status_code

    codes = await asyncio.gather(*(put(str(i)) for i in range(8)))
    assert sorted(codes).count(200) == 1 and codes.count(409) == 7


async def test_update_does_not_change_status_and_status_does_not_change_spec(
        http: httpx.AsyncClient) -> None:
    name = unique("sub")
    created = (await http.post(PODS, json=pod(name))).json()
    body = json.loads(json.dumps(created))
    body["status"] = {"phase": "Running"}
    body["spec"]["activeDeadlineSeconds"] = 100
    updated = (await http.put(f"{PODS}/{name}", json=body)).json()
    assert updated["status"]["phase"] == "Pending"
    assert updated["spec"]["activeDeadlineSeconds"] == 100

    body = json.loads(json.dumps(updated))
    body["status"] = {"phase": "Running"}
    body["spec"]["activeDeadlineSeconds"] = 5
    r = await http.put(f"{PODS}/{name}/status", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Running"
    assert r.json()["spec"]["activeDeadlineSeconds"] == 100

    r = await http.patch(f"{PODS}/{name}/status", json={"status": {"phase": "Succeeded"}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.json()["status"]["phase"] == "Succeeded"


async def test_json_patch(http: httpx.AsyncClient) -> None:
    name = unique("jp")
    await http.post(PODS, json=pod(name))
    ops = [{"op": "add", "path": "/metadata/labels/tier", "value": "front"}]
    r = await http.patch(f"{PODS}/{name}", json=ops,
                         headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["labels"] == {"app": "web", "tier": "front"}


async def test_label_and_field_selectors(http: httpx.AsyncClient) -> None:
    tag = unique("sel")
    for i in range(3):
        body = pod(f"{tag}-{i}")
        body["metadata"]["labels"] = {"batch": tag, "idx": str(i)}
        await http.post(PODS, json=body)
    r = await http.get(PODS, params={"labelSelector": f"batch={tag},idx in (0,2)"})
    assert sorted(p["metadata"]["name"] for p in r.json()["items"]) == [f"{tag}-0", f"{tag}-2"]
    r = await http.get(PODS, params={"fieldSelector": f"metadata.name={tag}-1"})
    assert [p["metadata"]["name"] for p in r.json()["items"]] == [f"{tag}-1"]
    r = await http.get("/api/v1/pods", params={"labelSelector": f"batch={tag}",
                                               "fieldSelector": "status.phase=Pending"})
    assert len(r.json()["items"]) == 3
    assert_status(await http.get(PODS, params={"fieldSelector": "spec.bogus=1"}),
                  400, "BadRequest")
    assert_status(await http.get(PODS, params={"labelSelector": "a in (b"}), 400, "BadRequest")


# -- binding and deletion ---------------------------------------------------------------


async def create_node(http: httpx.AsyncClient, name: str) -> None:
    r = await http.post("/api/v1/nodes", json={"metadata": {"name": name}})
    assert r.status_code in (201, 409), r.text


async def test_a_node_without_spec_is_served_with_an_empty_one(http: httpx.AsyncClient) -> None:
    name = unique("bare-node")
    created = await http.post("/api/v1/nodes", json={"metadata": {"name": name}})
    assert created.status_code == 201, created.text
    assert created.json()["spec"] == {}
    assert (await http.get(f"/api/v1/nodes/{name}")).json()["spec"] == {}
    await http.delete(f"/api/v1/nodes/{name}")


async def test_binding_sets_node_and_condition(http: httpx.AsyncClient) -> None:
    name = unique("bind")
    await create_node(http, "bind-node")
    await http.post(PODS, json=pod(name))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "bind-node"}}
    r = await http.post(f"{PODS}/{name}/binding", json=binding)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "Success"
    bound = (await http.get(f"{PODS}/{name}")).json()
    assert bound["spec"]["nodeName"] == "bind-node"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][0].items()
    r = await http.post(f"{PODS}/{name}/binding", json=binding)
    body = assert_status(r, 409, "Conflict")
    assert f'pod {name} is already assigned to node "bind-node"' in body["message"]


async def test_concurrent_bindings_exactly_one_wins(http: httpx.AsyncClient) -> None:
    name = unique("bindrace")
    await http.post(PODS, json=pod(name))

    async def bind(node: str) -> int:
        binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
        return (await http.post(f"{PODS}/{name}/binding", json=binding)).status_code

    codes = await asyncio.gather(*(bind(f"n{i}") for i in range(6)))
    assert codes.count(201) == 1 and codes.count(409) == 5


async def test_delete_bound_pod_is_graceful(http: httpx.AsyncClient) -> None:
    name = unique("grace")
    body = pod(name, nodeName="some-node")
    await http.post(PODS, json=body)
    r = await http.delete(f"{PODS}/{name}")
    assert r.status_code == 200
    marked = r.json()
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert (await http.get(f"{PODS}/{name}")).status_code == 200
    r = await http.delete(f"{PODS}/{name}", params={"gracePeriodSeconds": "0"})
    assert r.status_code == 200
    assert (await http.get(f"{PODS}/{name}")).status_code == 404


async def test_events_are_stored_with_a_lease(http: httpx.AsyncClient, etcd: Etcd) -> None:
    name = unique("ev")
    event = {"metadata": {"name": f"{name}.1"}, "involvedObject": {
        "kind": "Pod", "namespace": "default", "name": name},
        "reason": "Testing", "message": "hello", "type": "Normal",
        "source": {"component": "test"}}
    r = await http.post("/api/v1/namespaces/default/events", json=event)
    assert r.status_code == 201, r.text
    r = await http.get("/api/v1/namespaces/default/events",
                       params={"fieldSelector": f"involvedObject.name={name}"})
    assert [e["reason"] for e in r.json()["items"]] == ["Testing"]
    # the etcd key carries a lease of about an hour (kube-apiserver's --event-ttl default)
    key = base64.b64encode(f"/registry/events/default/{name}.1".encode()).decode()
    async with httpx.AsyncClient(base_url=etcd.endpoint) as raw:
        kvs = (await raw.post("/v3/kv/range", json={"key": key})).json()["kvs"]
        lease = kvs[0]["lease"]
        ttl = (await raw.post("/v3/lease/timetolive", json={"ID": lease})).json()
    assert 3500 <= int(ttl["grantedTTL"]) <= 3700


async def test_delete_with_a_uid_precondition_only_deletes_that_object(
        http: httpx.AsyncClient, apiserver: ApiServer) -> None:
    from common.client import ApiClient
    from common.errors import Conflict

    name = unique("precond")
    first = (await http.post(PODS, json=pod(name))).json()
    await http.delete(f"{PODS}/{name}")
    await http.post(PODS, json=pod(name))  # same name, another pod
    async with ApiClient(apiserver.connection()) as client:
        with pytest.raises(Conflict) as refused:
            await client.delete("pods", name, namespace="default", grace_period_seconds=0,
                                preconditions={"uid": first["metadata"]["uid"]})
        assert "Precondition failed: UID in precondition" in refused.value.message
        assert (await http.get(f"{PODS}/{name}")).status_code == 200


async def test_dry_run_checks_everything_and_writes_nothing(http: httpx.AsyncClient) -> None:
    """`kubectl ... --dry-run=server` sends dryRun=All: the answer as if, nothing stored."""
    name = unique("dry")
    before = await count_pods(http)
    r = await http.post(PODS, json=pod(name), params={"dryRun": "All"})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["restartPolicy"] == "Always"  # defaulted, validated
    assert (await http.get(f"{PODS}/{name}")).status_code == 404
    assert await count_pods(http) == before
    assert_status(await http.post(PODS, json={"metadata": {"name": "Bad_Name"}},
                                  params={"dryRun": "All"}), 422, "Invalid")

    created = (await http.post(PODS, json=pod(name))).json()
    r = await http.patch(f"{PODS}/{name}", json={"metadata": {"labels": {"dry": "run"}}},
                         params={"dryRun": "All"},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["metadata"]["labels"]["dry"] == "run"
    stored = (await http.get(f"{PODS}/{name}")).json()
    assert "dry" not in stored["metadata"]["labels"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    r = await http.delete(f"{PODS}/{name}", params={"dryRun": "All"})
    assert r.status_code == 200
    assert (await http.get(f"{PODS}/{name}")).status_code == 200
    assert_status(await http.delete(f"{PODS}/{name}", params={"dryRun": "Some"}), 422, "Invalid")
