"""Services (core/v1) on the session apiserver, driven by the real kubectl and the official
Python client: ClusterIPs and NodePorts allocated from the ranges in etcd (and refused with
kube's words when asked for one that is taken or outside), given back on delete and when
a create fails, the `kubernetes` Service and its EndpointSlice, kube's columns,
`kubectl create service`, `kubectl expose`, `kubectl describe svc`, `kubectl cluster-info`.
Bad input is a 422 with kube's causes and leaves the bitmaps as they were."""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import httpx
import kubernetes
import pytest

from tests.support import ApiServer, Etcd, Kubectl, eventually, table_lines, unique

CORE = "/api/v1/namespaces/default"
SERVICES = f"{CORE}/services"
MERGE = {"Content-Type": "application/merge-patch+json"}
CLUSTER_IP_RANGE = ipaddress.ip_network("10.96.0.0/12")


async def bitmap(etcd: Etcd, name: str) -> set[int]:
    """The offsets a RangeAllocation (`serviceips`, `servicenodeports`) has taken, read
    from etcd itself."""
    key = f"/registry/ranges/{name}".encode()
    async with httpx.AsyncClient(base_url=etcd.endpoint, timeout=10) as client:
        answer = await client.post("/v3/kv/range",
                                   json={"key": base64.b64encode(key).decode()})
    kvs = answer.json().get("kvs") or []
    if not kvs:
        return set()
    stored = json.loads(base64.b64decode(kvs[0]["value"]))
    assert stored["kind"] == "RangeAllocation"
    raw = base64.b64decode(stored["data"])  # big.Int.Bytes(): big-endian, bit i = offset i
    return {(len(raw) - 1 - index) * 8 + bit for index, byte in enumerate(raw) if byte
            for bit in range(8) if byte >> bit & 1}


def ip_offset(ip: str) -> int:
    return int(ipaddress.ip_address(ip)) - int(CLUSTER_IP_RANGE.network_address) - 1


def port_offset(port: int) -> int:
    return port - 30000


def svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}


@pytest.fixture(scope="module")
def kubectl(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(apiserver.url, tmp_path_factory.mktemp("svc-kubectl"))


# --- allocation ------------------------------------------------------------------------------

async def test_create_allocates_a_cluster_ip_and_node_port_and_delete_gives_them_back(
        http: httpx.AsyncClient, etcd: Etcd) -> None:
    name = unique("alloc")
    created = await http.post(SERVICES, json=svc(name, type="NodePort"))
    assert created.status_code == 201, created.text
    spec = created.json()["spec"]
    ip, node_port = spec["clusterIP"], spec["ports"][0]["nodePort"]
    assert spec["clusterIPs"] == [ip] and ipaddress.ip_address(ip) in CLUSTER_IP_RANGE
    assert ip != "10.96.0.1"  # the kubernetes Service's
    assert 30000 <= node_port <= 32767
    assert ip_offset(ip) in await bitmap(etcd, "serviceips")
    assert port_offset(node_port) in await bitmap(etcd, "servicenodeports")
    assert (await http.delete(f"{SERVICES}/{name}")).status_code == 200
    assert ip_offset(ip) not in await bitmap(etcd, "serviceips")
    assert port_offset(node_port) not in await bitmap(etcd, "servicenodeports")


async def test_requested_values_are_honoured_or_refused_with_kubes_words(
        http: httpx.AsyncClient, etcd: Etcd) -> None:
    first, second = unique("wants"), unique("wants")
    ip = "10.96.0.77"
    created = await http.post(SERVICES, json=svc(first, type="NodePort", clusterIP=ip,
                                                 ports=[{"port": 80, "nodePort": 30777}]))
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["clusterIPs"] == [ip]
    before = (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports"))
    taken_ip = await http.post(SERVICES, json=svc(second, clusterIP=ip))
    assert taken_ip.status_code == 422
    assert taken_ip.json()["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.clusterIPs",
         "message": f'Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: '
                    f'provided IP is already allocated'}]
    outside = await http.post(SERVICES, json=svc(second, clusterIP="192.168.7.7"))
    assert outside.json()["details"]["causes"][0]["message"] == (
        'Invalid value: []string{"192.168.7.7"}: failed to allocate IP 192.168.7.7: the '
        'provided IP (192.168.7.7) is not in the valid range. The range of valid IPs is '
        '10.96.0.0/12')
    taken_port = await http.post(SERVICES, json=svc(second, type="NodePort",
                                                    ports=[{"port": 80, "nodePort": 30777}]))
    assert taken_port.status_code == 422
    assert taken_port.json()["message"] == (
        f'Service "{second}" is invalid: spec.ports[0].nodePort: Invalid value: 30777: '
        f'provided port is already allocated')
    port_outside = await http.post(SERVICES, json=svc(second, type="NodePort",
                                                      ports=[{"port": 80, "nodePort": 8080}]))
    assert port_outside.json()["details"]["causes"][0]["message"] == (
        "Invalid value: 8080: provided port is not in the valid range. The range of valid "
        "ports is 30000-32767")
    # the refused creates took nothing, not even the ClusterIP the NodePort ones got first
    assert (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports")) == before
    assert (await http.get(f"{SERVICES}/{second}")).status_code == 404
    await http.delete(f"{SERVICES}/{first}")


async def test_malformed_services_are_422_with_kubes_causes_and_allocate_nothing(
        http: httpx.AsyncClient, etcd: Etcd) -> None:
    before = (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports"))
    name = unique("bad")
    answer = await http.post(SERVICES, json=svc(name, type="NodePort", ports=[
        {"port": 80, "targetPort": "Not_A_Name"}, {"port": 70000}]))
    assert answer.status_code == 422
    body = answer.json()
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Service"
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("spec.ports[0].name", "Required value"),
        ("spec.ports[0].targetPort", 'Invalid value: "Not_A_Name": must contain only '
                                     'alpha-numeric characters (a-z, 0-9), and hyphens (-)'),
        ("spec.ports[1].name", "Required value"),
        ("spec.ports[1].port", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
        ("spec.ports[1].targetPort",
         "Invalid value: 70000: must be between 1 and 65535, inclusive")]
    headless = await http.post(SERVICES, json=svc(name, type="NodePort", clusterIP="None"))
    assert headless.json()["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.clusterIPs[0]",
         "message": "Invalid value: \"None\": may not be set to 'None' for NodePort services"}]
    assert (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports")) == before


async def test_update_allocates_and_frees_with_the_type(http: httpx.AsyncClient,
                                                        etcd: Etcd) -> None:
    name = unique("retype")
    created = (await http.post(SERVICES, json=svc(name))).json()
    ip = created["spec"]["clusterIP"]
    assert "nodePort" not in created["spec"]["ports"][0]
    node_port_svc = (await http.patch(f"{SERVICES}/{name}", headers=MERGE,
                                      content='{"spec":{"type":"NodePort"}}')).json()
    node_port = node_port_svc["spec"]["ports"][0]["nodePort"]
    assert node_port_svc["spec"]["clusterIP"] == ip
    assert port_offset(node_port) in await bitmap(etcd, "servicenodeports")
    moved = await http.patch(f"{SERVICES}/{name}", headers=MERGE,
                             content='{"spec":{"clusterIP":"10.96.0.99",'
                                     '"clusterIPs":["10.96.0.99"]}}')
    assert moved.status_code == 422
    assert moved.json()["details"]["causes"][0]["message"] == (
        'Invalid value: []string{"10.96.0.99"}: may not change once set')
    back = (await http.patch(f"{SERVICES}/{name}", headers=MERGE,
                             content='{"spec":{"type":"ClusterIP"}}')).json()
    assert "nodePort" not in back["spec"]["ports"][0]
    assert port_offset(node_port) not in await bitmap(etcd, "servicenodeports")
    external = (await http.patch(f"{SERVICES}/{name}", headers=MERGE, content=json.dumps(
        {"spec": {"type": "ExternalName", "externalName": "db.example.com"}}))).json()
    assert "clusterIP" not in external["spec"]
    assert ip_offset(ip) not in await bitmap(etcd, "serviceips")
    await http.delete(f"{SERVICES}/{name}")


async def test_headless_and_external_name_hold_nothing(http: httpx.AsyncClient,
                                                       etcd: Etcd) -> None:
    before = await bitmap(etcd, "serviceips")
    headless, external = unique("headless"), unique("ext")
    made = (await http.post(SERVICES, json=svc(headless, clusterIP="None"))).json()
    assert made["spec"]["clusterIPs"] == ["None"]
    ext = (await http.post(SERVICES, json={"metadata": {"name": external}, "spec": {
        "type": "ExternalName", "externalName": "db.example.com"}})).json()
    assert "clusterIP" not in ext["spec"]
    assert await bitmap(etcd, "serviceips") == before
    for name in (headless, external):
        await http.delete(f"{SERVICES}/{name}")


async def test_dry_run_allocates_nothing(http: httpx.AsyncClient, etcd: Etcd) -> None:
    before = (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports"))
    name = unique("dry")
    answer = await http.post(SERVICES, params={"dryRun": "All"}, json=svc(name, type="NodePort"))
    assert answer.status_code == 201
    assert ipaddress.ip_address(answer.json()["spec"]["clusterIP"]) in CLUSTER_IP_RANGE
    assert (await bitmap(etcd, "serviceips"), await bitmap(etcd, "servicenodeports")) == before
    assert (await http.get(f"{SERVICES}/{name}")).status_code == 404


# --- the kubernetes Service --------------------------------------------------------------------

async def test_the_kubernetes_service_and_its_endpoint_slice(http: httpx.AsyncClient,
                                                             apiserver: ApiServer) -> None:
    async def found() -> dict[str, Any] | None:
        answer = await http.get(f"{SERVICES}/kubernetes")
        return answer.json() if answer.status_code == 200 else None

    service = await eventually(found)
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert service["spec"]["clusterIP"] == "10.96.0.1"
    assert service["spec"]["ports"] == [{"name": "https", "protocol": "TCP", "port": 443,
                                         "targetPort": apiserver.port}]
    slices = (await http.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                             params={"labelSelector": "kubernetes.io/service-name=kubernetes"})
              ).json()["items"]
    assert [(s["metadata"]["name"], s["addressType"], s["endpoints"][0]["addresses"],
             s["ports"]) for s in slices] == [
        ("kubernetes", "IPv4", ["127.0.0.1"],
         [{"name": "https", "port": apiserver.port, "protocol": "TCP"}])]


# --- kubectl -----------------------------------------------------------------------------------

def test_kubectl_create_service_get_wide_and_describe(kubectl: Kubectl,
                                                     apiserver: ApiServer) -> None:
    cluster, node = unique("kc-cluster"), unique("kc-node")
    kubectl("create", "service", "clusterip", cluster, "--tcp=80:8080", "--tcp=443:8443")
    kubectl("create", "service", "nodeport", node, "--tcp=80:8080", "--node-port=30123")
    rows = {row[0]: row for row in table_lines(kubectl("get", "svc", "-o", "wide"))}
    assert rows["NAME"] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                            "SELECTOR"]
    assert rows[cluster][1] == "ClusterIP" and rows[cluster][3:5] == ["<none>",
                                                                      "80/TCP,443/TCP"]
    assert ipaddress.ip_address(rows[cluster][2]) in CLUSTER_IP_RANGE
    assert rows[node][1] == "NodePort" and rows[node][4] == "80:30123/TCP"
    assert rows[node][6] == f"app={node}"
    assert rows["kubernetes"][1:5] == ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    described = kubectl("describe", "svc", node)
    assert f"Name:                     {node}" in described
    assert f"IP:                       {rows[node][2]}" in described
    assert "NodePort:                 80-8080  30123/TCP" in described
    assert "Endpoints:                <none>" in described
    kubernetes_described = kubectl("describe", "svc", "kubernetes")
    assert re.search(rf"Endpoints:\s+127\.0\.0\.1:{apiserver.port}\n", kubernetes_described)
    kubectl("delete", "svc", cluster, node)


def test_kubectl_expose_deployment_and_pod(kubectl: Kubectl) -> None:
    web = unique("web")
    kubectl("create", "deployment", web, "--image=kubelite/busybox:1.35", "--replicas=0")
    kubectl("expose", "deployment", web, "--port", "80", "--target-port", "8080")
    exposed = json.loads(kubectl("get", "svc", web, "-o", "json"))
    assert exposed["spec"]["selector"] == {"app": web}
    assert exposed["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    pod = unique("solo")
    kubectl.apply_pod(pod, {"containers": [{"name": "c", "image": "kubelite/busybox:1.35",
                                            "ports": [{"containerPort": 9000}]}]})
    kubectl("label", "pod", pod, f"run={pod}")
    kubectl("expose", "pod", pod, "--port", "90", "--name", f"{pod}-svc")
    by_pod = json.loads(kubectl("get", "svc", f"{pod}-svc", "-o", "json"))
    assert by_pod["spec"]["selector"] == {"run": pod}
    assert by_pod["spec"]["ports"] == [{"port": 90, "protocol": "TCP", "targetPort": 90}]
    kubectl("delete", "svc", web, f"{pod}-svc")
    kubectl("delete", "deployment", web)
    kubectl("delete", "pod", pod, "--grace-period=0", "--force")


def test_kubectl_cluster_info(kubectl: Kubectl, apiserver: ApiServer) -> None:
    assert f"Kubernetes control plane is running at {apiserver.url}" in kubectl("cluster-info")


# --- the official Python client ----------------------------------------------------------------

def test_official_python_client(apiserver: ApiServer, tmp_path: Path) -> None:
    configuration = apiserver.configure(kubernetes.client.Configuration())
    name = unique("py-svc")
    with kubernetes.client.ApiClient(configuration) as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        created = core.create_namespaced_service("default", kubernetes.client.V1Service(
            metadata=kubernetes.client.V1ObjectMeta(name=name),
            spec=kubernetes.client.V1ServiceSpec(
                type="NodePort", selector={"app": name},
                ports=[kubernetes.client.V1ServicePort(name="http", port=80,
                                                       target_port="http")])))
        assert created.spec.cluster_ip and created.spec.ports[0].node_port
        assert created.spec.ports[0].target_port == "http"
        listed = core.list_namespaced_service("default", field_selector=f"metadata.name={name}")
        assert [s.spec.cluster_ip for s in listed.items] == [created.spec.cluster_ip]
        by_type = core.list_service_for_all_namespaces(field_selector="spec.type=NodePort")
        assert name in [s.metadata.name for s in by_type.items]
        core.delete_namespaced_service(name, "default")
        assert core.list_namespaced_service(
            "default", field_selector=f"metadata.name={name}").items == []
