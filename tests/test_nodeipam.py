"""The node IPAM controller (controller_manager/nodeipam.py): each node's pod subnet.

Pure: the range allocator (kube's cidrset) and the flags' checks. End to end: a real
apiserver (an etcd prefix of its own, so that only this test's nodes are there) and the
real controller-manager with `--allocate-node-cidrs --cluster-cidr 10.250.0.0/23`, two
subnets: a node that has a subnet already keeps it and the others are given around it; a
full range is kube's `CIDRNotAvailable` event; a deleted node's subnet goes to the next;
after a kill -9 of the controller-manager, no subnet is handed out twice."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller_manager.nodeipam import RangeAllocator, config_errors, node_cidrs
from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd, eventually, unique

# -- pure ------------------------------------------------------------------------------------


def test_the_allocator_cuts_the_range_and_rotates() -> None:
    allocator = RangeAllocator(ipaddress.IPv4Network("10.244.0.0/22"), 24)
    assert allocator.count == 4
    assert allocator.occupy("10.244.1.0/24")
    assert [allocator.allocate() for _ in range(3)] == [
        "10.244.0.0/24", "10.244.2.0/24", "10.244.3.0/24"]
    assert allocator.allocate() is None
    allocator.release("10.244.0.0/24")
    assert allocator.allocate() == "10.244.0.0/24"


def test_subnets_that_are_not_ours_are_not_taken() -> None:
    allocator = RangeAllocator(ipaddress.IPv4Network("10.244.0.0/16"), 24)
    for other in ("10.245.0.0/24", "10.244.0.0/25", "10.244.0.1/24", "fd00::/64", "junk"):
        assert not allocator.occupy(other), other
    assert allocator.used == set()


def test_a_node_with_pod_cidrs_or_only_the_old_field() -> None:
    assert node_cidrs({"spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]}}) == [
        "10.0.0.0/24"]
    assert node_cidrs({"spec": {"podCIDR": "10.0.1.0/24"}}) == ["10.0.1.0/24"]
    assert node_cidrs({"spec": {}}) == node_cidrs({}) == []


@pytest.mark.parametrize(("allocate", "cidr", "mask", "error"), [
    (False, "", None, None),
    (False, "10.244.0.0/16", None, "used only with --allocate-node-cidrs"),
    (False, "", 24, "used only with --allocate-node-cidrs"),
    (True, "10.244.0.0/16", None, None),
    (True, "", 24, "--cluster-cidr is required when --allocate-node-cidrs is true"),
    (True, "10.244.0.1/16", 24, "has host bits set"),
    (True, "fd00::/48", 64, "only IPv4"),
    (True, "10.244.0.0/16", 8, "must be between"),
    (True, "10.0.0.0/8", 28, "too big"),
    (True, "10.244.0.0/16", 24, None),
])
def test_the_flags_are_checked(allocate: bool, cidr: str, mask: int | None,
                               error: str | None) -> None:
    errors = config_errors(allocate, cidr, mask)
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and error in errors[0], errors


# -- end to end ------------------------------------------------------------------------------

CLUSTER_CIDR = "10.250.0.0/23"


@pytest.fixture(scope="module")
def own_apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("ipam")), name="apiserver-ipam",
                       extra_args=["--etcd-prefix", f"/{unique('ipam')}"]).start()
    yield server
    server.stop()


def ipam_controller_manager(apiserver: ApiServer, workdir: Path) -> ControllerManagerProcess:
    return ControllerManagerProcess(apiserver, workdir, extra_args=(
        "--controllers", "nodeipam", "--allocate-node-cidrs", "--cluster-cidr", CLUSTER_CIDR,
        "--node-cidr-mask-size", "24")).start()


async def create_node(api: httpx.AsyncClient, name: str, cidr: str | None = None) -> None:
    spec = {"podCIDR": cidr, "podCIDRs": [cidr]} if cidr else {}
    answer = await api.post("/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec})
    assert answer.status_code == 201, answer.text


async def pod_cidr(api: httpx.AsyncClient, name: str) -> str | None:
    answer = await api.get(f"/api/v1/nodes/{name}")
    assert answer.status_code == 200, answer.text
    spec: dict[str, Any] = answer.json().get("spec") or {}
    if spec.get("podCIDR"):
        assert spec.get("podCIDRs") == [spec["podCIDR"]], spec
    return spec.get("podCIDR")


async def test_nodes_get_subnets_of_their_own_through_deletes_and_a_restart(
        own_apiserver: ApiServer, tmp_path: Path) -> None:
    async with own_apiserver.client() as api:
        had = unique("ipam-had")
        await create_node(api, had, "10.250.1.0/24")  # before the controller runs
        cm = ipam_controller_manager(own_apiserver, tmp_path)
        try:
            first, second = unique("ipam-a"), unique("ipam-b")
            await create_node(api, first)

            async def given(name: str) -> str | None:
                return await pod_cidr(api, name)
            assert await eventually(lambda: given(first), timeout=30,
                                    what="the first node's subnet") == "10.250.0.0/24"

            await create_node(api, second)

            async def refused(name: str) -> bool:
                events = (await api.get("/api/v1/namespaces/default/events", params={
                    "fieldSelector": f"involvedObject.name={name}"})).json()["items"]
                return any(e["reason"] == "CIDRNotAvailable" and e["message"] ==
                           f"Node {name} status is now: CIDRNotAvailable" for e in events)
            assert await eventually(lambda: refused(second), timeout=30,
                                    what="CIDRNotAvailable")
            assert await pod_cidr(api, second) is None

            assert (await api.delete(f"/api/v1/nodes/{had}")).status_code == 200
            assert await eventually(lambda: given(second), timeout=30,
                                    what="the freed subnet given") == "10.250.1.0/24"

            # kill -9: the new controller-manager takes what the nodes have, gives nothing twice
            cm.kill()
            cm = ipam_controller_manager(own_apiserver, tmp_path)
            third = unique("ipam-c")
            await create_node(api, third)

            assert await eventually(lambda: refused(third), timeout=30, what="the full range")
            assert f"node {third}: no subnet of {CLUSTER_CIDR} left" in cm.log()
            assert await pod_cidr(api, third) is None
            assert [await pod_cidr(api, n) for n in (first, second)] == [
                "10.250.0.0/24", "10.250.1.0/24"]
            # kube's rule: once set, a node's podCIDR stays
            answer = await api.patch(f"/api/v1/nodes/{first}",
                                     json={"spec": {"podCIDR": "10.250.1.0/24",
                                                    "podCIDRs": ["10.250.1.0/24"]}},
                                     headers={"Content-Type": "application/merge-patch+json"})
            assert answer.status_code == 422, answer.text
        finally:
            cm.stop()
        for name in (first, second, third):
            await api.delete(f"/api/v1/nodes/{name}")


def test_make_up_passes_the_pod_network_cidr_as_kubeadm_does() -> None:
    from tests.test_e2e_up import load_hack_module
    up = load_hack_module("up")
    _, options = up.parse_args(["--state-dir", "/tmp/state",
                                "--pod-network-cidr", "10.244.0.0/16"])
    manager = next(c for c in up.plan(options) if c.kind == "controller-manager")
    at = manager.args.index("--allocate-node-cidrs")
    assert manager.args[at:at + 3] == ("--allocate-node-cidrs", "--cluster-cidr",
                                       "10.244.0.0/16")
    _, plain = up.parse_args(["--state-dir", "/tmp/state"])
    manager = next(c for c in up.plan(plain) if c.kind == "controller-manager")
    assert "--allocate-node-cidrs" not in manager.args
