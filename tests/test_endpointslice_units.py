"""The EndpointSlice controller's decisions (controller_manager.endpointslice), as kube's
reconciler_test.go and utils_test.go tables: services and pods in, the slices to create,
update and delete out."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.endpointslice import (
    LABEL_HEADLESS,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    LAST_CHANGE_TRIGGER_TIME,
    MANAGED_BY,
    SliceTracker,
    TriggerTimeTracker,
    address_types,
    endpoint_ports,
    find_port,
    format_trigger_time,
    pod_to_endpoint,
    port_key,
    reconcile,
    service_selector,
    services_to_update,
    should_pod_be_in_endpoints,
    slice_labels,
    with_trigger_time,
)

SVC_UID = "svc-uid"
NODES = {"node1": {"metadata": {"name": "node1", "labels": {
    "topology.kubernetes.io/zone": "zone-a"}}},
    "node2": {"metadata": {"name": "node2"}}}


def node_of(name: str) -> dict[str, Any] | None:
    return NODES.get(name)


def service(name: str = "web", *, ports: list[dict[str, Any]] | None = None,
            selector: dict[str, str] | None = None, cluster_ip: str = "10.96.0.10",
            labels: dict[str, str] | None = None, uid: str = SVC_UID,
            **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "uid": uid,
                         **({"labels": labels} if labels else {})},
            "spec": {"selector": {"app": "web"} if selector is None else selector,
                     "clusterIP": cluster_ip, "ipFamilies": ["IPv4"],
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080,
                                "protocol": "TCP"}] if ports is None else ports,
                     **spec}}


def pod(name: str, ip: str | None = "172.17.0.2", *, ready: bool = True,
        node: str = "node1", phase: str = "Running", deleting: bool = False,
        ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "labels": {"app": "web"}, "resourceVersion": "7"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status.update(podIP=ip, podIPs=[{"ip": ip}])
    return {"metadata": meta,
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "i", **({"ports": ports} if ports else {})}], **spec},
            "status": status}


def pods(count: int) -> list[dict[str, Any]]:
    return [pod(f"p{i:03d}", f"172.17.{i // 250}.{i % 250 + 2}") for i in range(count)]


def written(plan_slices: list[dict[str, Any]], start: int = 0) -> list[dict[str, Any]]:
    """The slices as the apiserver would store them: named, with a uid and version."""
    stored = []
    for i, obj in enumerate(copy.deepcopy(plan_slices)):
        meta = obj["metadata"]
        if "name" not in meta:
            meta["name"] = f"{meta.pop('generateName')}{start + i:05d}"
        meta.setdefault("uid", f"slice-{meta['name']}")
        meta["resourceVersion"] = str(100 + start + i)
        meta["generation"] = 1
        stored.append(obj)
    return stored


def addresses(slices: list[dict[str, Any]]) -> list[str]:
    return sorted(a for s in slices for e in s["endpoints"] for a in e["addresses"])


# -- endpoints ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("target", "container_ports", "want"), [
    (8080, None, 8080),
    ("http", [{"name": "http", "containerPort": 9376}], 9376),
    ("http", [{"name": "http", "containerPort": 53, "protocol": "UDP"}], None),
    ("http", [{"name": "metrics", "containerPort": 9090}], None),
    ("http", None, None),
])
def test_find_port(target: Any, container_ports: list[dict[str, Any]] | None,
                   want: int | None) -> None:
    assert find_port(pod("a", ports=container_ports),
                     {"port": 80, "targetPort": target, "protocol": "TCP"}) == want


def test_find_port_in_a_sidecar_only() -> None:
    sidecar = pod("a", initContainers=[
        {"name": "s", "image": "i", "restartPolicy": "Always",
         "ports": [{"name": "http", "containerPort": 7000}]},
        {"name": "init", "image": "i", "ports": [{"name": "grpc", "containerPort": 7001}]}])
    assert find_port(sidecar, {"port": 80, "targetPort": "http"}) == 7000
    assert find_port(sidecar, {"port": 80, "targetPort": "grpc"}) is None


def test_endpoint_ports_keep_service_order_and_skip_unresolved() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                         {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP",
                          "appProtocol": "dns"}])
    assert endpoint_ports(svc, pod("a")) == [
        {"name": "dns", "port": 53, "protocol": "UDP", "appProtocol": "dns"}]
    named = pod("b", ports=[{"name": "http", "containerPort": 8080}])
    assert [p["port"] for p in endpoint_ports(svc, named)] == [8080, 53]
    assert port_key(endpoint_ports(svc, named)) == port_key(
        list(reversed(endpoint_ports(svc, named))))


@pytest.mark.parametrize(("kwargs", "publish", "conditions"), [
    ({}, False, {"ready": True, "serving": True, "terminating": False}),
    ({"ready": False}, False, {"ready": False, "serving": False, "terminating": False}),
    ({"deleting": True}, False, {"ready": False, "serving": True, "terminating": True}),
    ({"ready": False, "deleting": True}, False,
     {"ready": False, "serving": False, "terminating": True}),
    ({"ready": False}, True, {"ready": True, "serving": False, "terminating": False}),
    ({"deleting": True}, True, {"ready": True, "serving": True, "terminating": True}),
])
def test_endpoint_conditions(kwargs: dict[str, Any], publish: bool,
                             conditions: dict[str, bool]) -> None:
    svc = service(publishNotReadyAddresses=publish)
    endpoint = pod_to_endpoint(pod("a", **kwargs), NODES["node1"], svc, "IPv4")
    assert endpoint == {"addresses": ["172.17.0.2"], "conditions": conditions,
                        "nodeName": "node1", "zone": "zone-a",
                        "targetRef": {"kind": "Pod", "namespace": "default", "name": "a",
                                      "uid": "uid-a"}}


def test_hostname_only_for_the_pods_subdomain() -> None:
    mine = pod("a", hostname="a-0", subdomain="web")
    other = pod("b", hostname="b-0", subdomain="elsewhere")
    assert pod_to_endpoint(mine, None, service(), "IPv4")["hostname"] == "a-0"
    assert "hostname" not in pod_to_endpoint(other, None, service(), "IPv4")


@pytest.mark.parametrize(("obj", "want"), [
    (pod("a"), True),
    (pod("a", ip=None), False),
    (pod("a", phase="Succeeded"), False),
    (pod("a", phase="Failed"), False),
    (pod("a", deleting=True), True),
    (pod("a", phase="Pending"), True),
])
def test_should_pod_be_in_endpoints(obj: dict[str, Any], want: bool) -> None:
    assert should_pod_be_in_endpoints(obj) is want


@pytest.mark.parametrize(("spec", "want"), [
    ({"ipFamilies": ["IPv4"]}, ["IPv4"]),
    ({"ipFamilies": ["IPv6", "IPv4"]}, ["IPv4", "IPv6"]),
    ({"ipFamilies": [], "clusterIP": "fd00::10"}, ["IPv6"]),
    ({"ipFamilies": [], "clusterIP": "10.96.0.1"}, ["IPv4"]),
    ({"ipFamilies": [], "clusterIP": "None"}, ["IPv4", "IPv6"]),
])
def test_address_types(spec: dict[str, Any], want: list[str]) -> None:
    assert address_types(service(**spec)) == want


@pytest.mark.parametrize(("svc", "want"), [
    (service(), {"app": "web"}),
    (service(selector={}), None),
    (service(type="ExternalName", externalName="example.com"), None),
])
def test_service_selector(svc: dict[str, Any], want: dict[str, str] | None) -> None:
    assert service_selector(svc) == want


def test_slice_labels_mirror_the_service_but_the_reserved_ones() -> None:
    svc = service(labels={"team": "a", LABEL_SERVICE_NAME: "spoof"}, cluster_ip="None")
    assert slice_labels(svc) == {"team": "a", LABEL_HEADLESS: "", LABEL_SERVICE_NAME: "web",
                                 LABEL_MANAGED_BY: MANAGED_BY}


# -- reconcile ---------------------------------------------------------------------------------


def test_a_new_service_gets_one_slice_with_its_pods() -> None:
    plan = reconcile(service(), [pod("a"), pod("b", "172.17.0.3", ready=False),
                                 pod("c", None)], [], node_of)
    assert not plan.update and not plan.delete and not plan.errors
    [created] = plan.create
    assert created["metadata"]["generateName"] == "web-"
    assert created["metadata"]["labels"] == {LABEL_SERVICE_NAME: "web",
                                             LABEL_MANAGED_BY: MANAGED_BY}
    assert created["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": SVC_UID,
         "controller": True, "blockOwnerDeletion": True}]
    assert created["addressType"] == "IPv4"
    assert created["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert [(e["addresses"], e["conditions"]["ready"]) for e in created["endpoints"]] == [
        (["172.17.0.2"], True), (["172.17.0.3"], False)]


def test_nothing_is_written_when_nothing_changed() -> None:
    svc, members = service(), pods(250)
    stored = written(reconcile(svc, members, [], node_of).create)
    again = reconcile(svc, copy.deepcopy(members), stored, node_of)
    assert again.empty and not again.errors


def test_at_most_100_endpoints_a_slice() -> None:
    plan = reconcile(service(), pods(250), [], node_of)
    assert sorted(len(s["endpoints"]) for s in plan.create) == [50, 100, 100]
    assert len(addresses(plan.create)) == 250


def test_max_endpoints_per_slice_is_configurable() -> None:
    plan = reconcile(service(), pods(7), [], node_of, max_endpoints=3)
    assert sorted(len(s["endpoints"]) for s in plan.create) == [1, 3, 3]


def test_a_readiness_change_updates_only_its_slice_in_place() -> None:
    svc, members = service(), pods(150)
    stored = written(reconcile(svc, members, [], node_of).create)
    flipped = copy.deepcopy(members)
    flipped[3]["status"]["conditions"][0]["status"] = "False"
    flipped[3]["metadata"]["resourceVersion"] = "8"  # a targetRef's version is no change
    plan = reconcile(svc, flipped, stored, node_of)
    assert not plan.create and not plan.delete
    [updated] = plan.update
    holder = next(s for s in stored if any(e["targetRef"]["name"] == "p003"
                                           for e in s["endpoints"]))
    assert updated["metadata"]["name"] == holder["metadata"]["name"]
    assert updated["metadata"]["resourceVersion"] == holder["metadata"]["resourceVersion"]
    endpoint = next(e for e in updated["endpoints"] if e["targetRef"]["name"] == "p003")
    assert endpoint["conditions"] == {"ready": False, "serving": False, "terminating": False}
    assert len(updated["endpoints"]) == len(holder["endpoints"])


def test_a_new_pod_fills_an_existing_slice() -> None:
    svc = service()
    stored = written(reconcile(svc, pods(3), [], node_of).create)
    plan = reconcile(svc, pods(4), stored, node_of)
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert [e["targetRef"]["name"] for e in updated["endpoints"]] == [
        "p000", "p001", "p002", "p003"]


def test_new_pods_fill_the_slice_changing_anyway_before_a_new_one() -> None:
    svc, members = service(), pods(150)
    stored = written(reconcile(svc, members, [], node_of).create)
    fewer = [p for p in members if p["metadata"]["name"] != "p120"]
    more = fewer + [pod("z1", "172.17.9.1"), pod("z2", "172.17.9.2")]
    plan = reconcile(svc, more, stored, node_of)
    assert not plan.create and not plan.delete and len(plan.update) == 1
    names = {e["targetRef"]["name"] for e in plan.update[0]["endpoints"]}
    assert {"z1", "z2"} <= names and "p120" not in names


def test_a_slice_left_empty_is_deleted_and_the_placeholder_kept() -> None:
    svc = service()
    stored = written(reconcile(svc, pods(2), [], node_of).create)
    plan = reconcile(svc, [], stored, node_of)
    # The emptied slice becomes the placeholder (finalize turns delete + create into
    # an update of the same slice).
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert updated["metadata"]["name"] == stored[0]["metadata"]["name"]
    assert updated["ports"] == [] and updated["endpoints"] == []
    placeholder = written(plan.update)
    assert reconcile(svc, [], placeholder, node_of).empty


def test_a_service_without_pods_has_one_placeholder() -> None:
    plan = reconcile(service(), [pod("a", None)], [], node_of)
    [placeholder] = plan.create
    assert placeholder["endpoints"] == [] and placeholder["ports"] == []
    assert reconcile(service(), [], written(plan.create), node_of).empty


def test_the_placeholder_gives_way_to_real_endpoints() -> None:
    svc = service()
    placeholder = written(reconcile(svc, [], [], node_of).create)
    plan = reconcile(svc, [pod("a")], placeholder, node_of)
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert updated["metadata"]["name"] == placeholder[0]["metadata"]["name"]
    assert addresses([updated]) == ["172.17.0.2"]


def test_pods_resolving_a_named_port_differently_get_their_own_slices() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "http",
                          "protocol": "TCP"}])
    members = [pod("a", "172.17.0.2", ports=[{"name": "http", "containerPort": 8080}]),
               pod("b", "172.17.0.3", ports=[{"name": "http", "containerPort": 9090}]),
               pod("c", "172.17.0.4")]
    plan = reconcile(svc, members, [], node_of)
    by_ports = {tuple(p["port"] for p in s["ports"]): addresses([s]) for s in plan.create}
    assert by_ports == {(8080,): ["172.17.0.2"], (9090,): ["172.17.0.3"],
                        (): ["172.17.0.4"]}


def test_a_port_change_replaces_the_slice_in_place() -> None:
    svc = service()
    stored = written(reconcile(svc, pods(2), [], node_of).create)
    moved = service(ports=[{"name": "http", "port": 80, "targetPort": 9000,
                            "protocol": "TCP"}])
    plan = reconcile(moved, pods(2), stored, node_of)
    assert not plan.create and not plan.delete
    [updated] = plan.update
    assert updated["metadata"]["name"] == stored[0]["metadata"]["name"]
    assert updated["ports"][0]["port"] == 9000 and len(updated["endpoints"]) == 2


def test_pods_on_unknown_nodes_are_left_out_and_retried() -> None:
    plan = reconcile(service(), [pod("a"), pod("b", "172.17.0.3", node="gone")], [],
                     node_of)
    assert addresses(plan.create) == ["172.17.0.2"]
    assert plan.errors == ["skipping Pod b for Service default/web: Node gone Not Found"]
    published = reconcile(service(publishNotReadyAddresses=True),
                          [pod("b", "172.17.0.3", node="gone")], [], node_of)
    assert addresses(published.create) == ["172.17.0.3"] and not published.errors


def test_label_changes_on_the_service_reach_its_slices() -> None:
    svc = service()
    stored = written(reconcile(svc, pods(2), [], node_of).create)
    plan = reconcile(service(labels={"team": "a"}), pods(2), stored, node_of)
    [updated] = plan.update
    assert updated["metadata"]["labels"]["team"] == "a"
    assert updated["endpoints"] == stored[0]["endpoints"]


def test_slices_of_an_older_service_of_that_name_are_replaced() -> None:
    stored = written(reconcile(service(uid="old"), pods(2), [], node_of).create)
    plan = reconcile(service(), pods(2), stored, node_of)
    # Never updated into ours: owned by another Service (kube's finalize checks ownedBy).
    assert [s["metadata"]["name"] for s in plan.delete] == [stored[0]["metadata"]["name"]]
    [created] = plan.create
    assert created["metadata"]["ownerReferences"][0]["uid"] == SVC_UID


def test_a_service_being_deleted_gets_no_new_slices() -> None:
    svc = service()
    svc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert reconcile(svc, pods(2), [], node_of).create == []


def test_slices_of_a_dropped_address_type_are_deleted() -> None:
    svc = service()
    stored = written(reconcile(svc, pods(1), [], node_of).create)
    stored[0]["addressType"] = "IPv6"
    plan = reconcile(svc, pods(1), stored, node_of)
    assert [s["metadata"]["name"] for s in plan.delete] == [stored[0]["metadata"]["name"]]
    assert len(plan.create) == 1 and plan.create[0]["addressType"] == "IPv4"


def test_headless_service_without_ports() -> None:
    svc = service(cluster_ip="None", ports=[])
    [created] = reconcile(svc, [pod("a")], [], node_of).create
    assert created["ports"] == [] and addresses([created]) == ["172.17.0.2"]
    assert created["metadata"]["labels"][LABEL_HEADLESS] == ""


def test_duplicate_endpoints_across_slices_are_dropped() -> None:
    svc = service()
    stored = written(reconcile(svc, [pod("a")], [], node_of).create)
    copy_ = copy.deepcopy(stored[0])
    copy_["metadata"].update(name="web-dup", uid="slice-dup", resourceVersion="200")
    plan = reconcile(svc, [pod("a")], [*stored, copy_], node_of)
    assert [s["metadata"]["name"] for s in plan.delete] == ["web-dup"]
    assert not plan.create and not plan.update


# -- pod changes and the tracker ---------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "changed", "want"), [
    ({"a", "b"}, {"b", "c"}, False, {"a", "c"}),
    ({"a", "b"}, {"b", "c"}, True, {"a", "b", "c"}),
    (set(), {"a"}, False, {"a"}),
])
def test_services_to_update(old: set[str], new: set[str], changed: bool,
                            want: set[str]) -> None:
    assert services_to_update(old, new, pod_changed=changed) == want


def tracked_slice(uid: str, generation: int) -> dict[str, Any]:
    return {"metadata": {"name": uid, "namespace": "default", "uid": uid,
                         "generation": generation,
                         "labels": {LABEL_SERVICE_NAME: "web",
                                    LABEL_MANAGED_BY: MANAGED_BY}}}


def test_tracker_sees_its_own_echo_and_stale_caches() -> None:
    tracker, svc = SliceTracker(), service()
    assert not tracker.stale(svc, [])
    tracker.update(tracked_slice("s1", 2))
    assert not tracker.should_sync(tracked_slice("s1", 2))  # our own write coming back
    assert tracker.should_sync(tracked_slice("s1", 3))  # someone else's
    assert tracker.should_sync(tracked_slice("other", 1))
    assert tracker.stale(svc, [])  # missing what we wrote
    assert tracker.stale(svc, [tracked_slice("s1", 1)])  # older than we wrote
    assert not tracker.stale(svc, [tracked_slice("s1", 2)])
    tracker.expect_deletion(tracked_slice("s1", 2))
    assert tracker.stale(svc, [tracked_slice("s1", 2)])  # deleted, still cached
    assert not tracker.stale(svc, [])
    assert tracker.handle_deletion(tracked_slice("s1", 2))  # we deleted it
    tracker.update(tracked_slice("s2", 1))
    assert not tracker.handle_deletion(tracked_slice("s2", 1))  # someone else did


def test_tracker_forgets_a_recreated_service() -> None:
    tracker = SliceTracker()
    assert not tracker.stale(service(uid="old"), [])
    tracker.update(tracked_slice("s1", 1))
    assert tracker.stale(service(uid="old"), [])
    assert not tracker.stale(service(uid="new"), [])


def test_tracker_orders_by_resource_version_without_generations() -> None:
    tracker = SliceTracker()
    written_slice = tracked_slice("s1", 0)
    del written_slice["metadata"]["generation"]
    written_slice["metadata"]["resourceVersion"] = "41"
    tracker.update(written_slice)
    newer = copy.deepcopy(written_slice)
    newer["metadata"]["resourceVersion"] = "42"
    assert not tracker.should_sync(written_slice) and tracker.should_sync(newer)


# -- last-change-trigger-time (kube's trigger_time_tracker_test.go) ----------------------------

T0, T1, T2, T3 = (f"2026-01-01T00:00:0{i}Z" for i in range(4))


def ready_at(name: str, at: str) -> dict[str, Any]:
    found = pod(name)
    found["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": at}]
    return found


def created_at(at: str) -> dict[str, Any]:
    found = service()
    found["metadata"]["creationTimestamp"] = at
    return found


def stamp(at: datetime | None) -> str | None:
    return None if at is None else format_trigger_time(at)


def test_trigger_time_is_the_earliest_change_new_since_the_last_sync() -> None:
    tracker = TriggerTimeTracker()
    # First sync: everything is new, the Service's creation is the earliest.
    assert stamp(tracker.compute("default/web", created_at(T0),
                                 [ready_at("a", T1), ready_at("b", T2)])) == "2026-01-01T00:00:00Z"
    # Nothing changed: no trigger.
    assert tracker.compute("default/web", created_at(T0),
                           [ready_at("a", T1), ready_at("b", T2)]) is None
    # Two pods changed since: the earlier of them; an unchanged one does not count.
    assert stamp(tracker.compute("default/web", created_at(T0), [
        ready_at("a", T1), ready_at("b", T3), ready_at("c", T2)])) == "2026-01-01T00:00:02Z"
    # A pod gone is no trigger (its deletion was seen when it began terminating).
    assert tracker.compute("default/web", created_at(T0), [ready_at("b", T3)]) is None
    # A pod without a Ready condition has no trigger time.
    assert tracker.compute("default/web", created_at(T0), [ready_at("b", T3), pod("d")]) is None
    # A Service deleted and recreated starts over.
    tracker.delete_service("default/web")
    assert stamp(tracker.compute("default/web", created_at(T3), [])) == "2026-01-01T00:00:03Z"


def test_a_pod_ready_in_the_second_it_was_created_is_a_new_trigger() -> None:
    tracker = TriggerTimeTracker()
    unready = ready_at("a", T1)
    unready["status"]["conditions"][0]["status"] = "False"
    tracker.compute("default/web", created_at(T0), [unready])
    # Ready within the same second: the same lastTransitionTime, another status.
    assert stamp(tracker.compute("default/web", created_at(T0), [ready_at("a", T1)])) \
        == "2026-01-01T00:00:01Z"
    assert tracker.compute("default/web", created_at(T0), [ready_at("a", T1)]) is None


def test_a_trigger_stays_new_until_its_slices_were_written() -> None:
    tracker = TriggerTimeTracker()
    pods = [ready_at("a", T1)]
    # A sync whose write failed did not record it: its retry stamps the same trigger.
    for _ in range(2):
        assert stamp(tracker.compute("default/web", created_at(T0), pods, record=False)) \
            == "2026-01-01T00:00:00Z"
    tracker.record("default/web", created_at(T0), pods)
    assert tracker.compute("default/web", created_at(T0), pods) is None


def test_trigger_time_annotates_the_written_slices_and_clears_without_a_trigger() -> None:
    svc = created_at(T0)
    plan = reconcile(svc, [ready_at("a", T1)], [], node_of)
    with_trigger_time(plan, datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=UTC))
    [written] = plan.create
    assert written["metadata"]["annotations"] == {
        LAST_CHANGE_TRIGGER_TIME: "2026-01-01T00:00:01.5Z"}
    written["metadata"]["annotations"]["other"] = "kept"
    again = reconcile(svc, [ready_at("a", T1), ready_at("b", T2)], [written], node_of)
    with_trigger_time(again, None)
    [updated] = again.update
    assert updated["metadata"]["annotations"] == {"other": "kept"}
    del written["metadata"]["annotations"]
    once_more = reconcile(svc, [ready_at("a", T1), ready_at("c", T2)], [written], node_of)
    with_trigger_time(once_more, None)
    assert "annotations" not in once_more.update[0]["metadata"]
