"""ClusterIP and NodePort allocation under concurrency, restarts and leaks, on an etcd of
this module's own with two real apiserver processes: 50 concurrent creates spread over
both get 50 distinct ClusterIPs and NodePorts (all marked in etcd's bitmaps); a restarted
apiserver still refuses a taken IP; the repair pass marks what a Service holds that the
bitmap lost and frees a leaked bit after its passes."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ApiServer, Etcd, eventually, unique
from tests.test_services import bitmap, ip_offset, port_offset

SERVICES = "/api/v1/namespaces/default/services"
RANGE = ipaddress.ip_network("10.96.0.0/12")


@pytest.fixture(scope="module")
def own_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    server = Etcd(tmp_path_factory.mktemp("alloc-etcd")).start()
    yield server
    server.stop()


def plain_apiserver(etcd: Etcd, workdir: Path, name: str, *extra: str) -> ApiServer:
    return ApiServer(etcd, workdir, name=name, plain=True,
                     extra_args=["--service-repair-interval", "1s", *extra])


@pytest.fixture(scope="module")
def two_apiservers(own_etcd: Etcd, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[ApiServer, ApiServer]]:
    workdir = tmp_path_factory.mktemp("alloc-apiservers")
    first = plain_apiserver(own_etcd, workdir, "alloc-a").start()
    second = plain_apiserver(own_etcd, workdir, "alloc-b").start()
    yield first, second
    second.stop()
    first.stop()


async def default_namespace_ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/api/v1/namespaces/default")).status_code == 200


async def test_50_concurrent_creates_across_two_apiservers_are_all_distinct(
        two_apiservers: tuple[ApiServer, ApiServer], own_etcd: Etcd) -> None:
    first, second = two_apiservers
    async with httpx.AsyncClient(base_url=first.url, timeout=60) as a, \
            httpx.AsyncClient(base_url=second.url, timeout=60) as b:
        await eventually(lambda: default_namespace_ready(a), what="namespace default")
        names = [unique("burst") for _ in range(50)]

        async def create(index: int, name: str) -> dict:
            client = a if index % 2 else b
            answer = await client.post(SERVICES, json={"metadata": {"name": name}, "spec": {
                "type": "NodePort", "selector": {"app": name}, "ports": [{"port": 80}]}})
            assert answer.status_code == 201, answer.text
            return answer.json()

        created = await asyncio.gather(*(create(i, n) for i, n in enumerate(names)))
    ips = [s["spec"]["clusterIP"] for s in created]
    ports = [s["spec"]["ports"][0]["nodePort"] for s in created]
    assert len(set(ips)) == 50 and len(set(ports)) == 50
    assert all(ipaddress.ip_address(ip) in RANGE for ip in ips)
    assert all(30000 <= port <= 32767 for port in ports)
    assert {ip_offset(ip) for ip in ips} <= await bitmap(own_etcd, "serviceips")
    assert {port_offset(port) for port in ports} <= await bitmap(own_etcd, "servicenodeports")


async def test_a_restarted_apiserver_keeps_the_allocations(
        two_apiservers: tuple[ApiServer, ApiServer], own_etcd: Etcd,
        tmp_path: Path) -> None:
    first, _ = two_apiservers
    name = unique("kept")
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
        await eventually(lambda: default_namespace_ready(client), what="namespace default")
        made = await client.post(SERVICES, json={"metadata": {"name": name}, "spec": {
            "ports": [{"port": 80}], "clusterIP": "10.96.0.50"}})
        assert made.status_code == 201, made.text
    restarted = plain_apiserver(own_etcd, tmp_path, "alloc-restarted").start()
    try:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as client:
            again = await client.post(SERVICES, json={"metadata": {"name": unique("again")},
                                                      "spec": {"ports": [{"port": 80}],
                                                               "clusterIP": "10.96.0.50"}})
            assert again.status_code == 422
            assert "provided IP is already allocated" in again.json()["message"]
    finally:
        restarted.stop()


async def put_bitmap(etcd: Etcd, name: str, offsets: set[int]) -> None:
    """Overwrite a RangeAllocation's bitmap in etcd, as a crash or a bug would leave it."""
    key = base64.b64encode(f"/registry/ranges/{name}".encode()).decode()
    async with httpx.AsyncClient(base_url=etcd.endpoint, timeout=10) as client:
        found = (await client.post("/v3/kv/range", json={"key": key})).json()["kvs"][0]
        stored = json.loads(base64.b64decode(found["value"]))
        bits = sum(1 << offset for offset in offsets)
        stored["data"] = base64.b64encode(
            bits.to_bytes((bits.bit_length() + 7) // 8, "big")).decode()
        answer = await client.post("/v3/kv/put", json={
            "key": key, "value": base64.b64encode(json.dumps(stored).encode()).decode()})
        answer.raise_for_status()


async def test_repair_marks_what_services_hold_and_frees_leaks(
        two_apiservers: tuple[ApiServer, ApiServer], own_etcd: Etcd) -> None:
    first, _ = two_apiservers
    name = unique("held")
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
        await eventually(lambda: default_namespace_ready(client), what="namespace default")
        made = (await client.post(SERVICES, json={"metadata": {"name": name}, "spec": {
            "ports": [{"port": 80}]}})).json()
    held = ip_offset(made["spec"]["clusterIP"])
    leaked = ip_offset("10.96.0.222")
    others = await bitmap(own_etcd, "serviceips") - {held}
    # the Service's bit lost, a bit nobody holds set
    await put_bitmap(own_etcd, "serviceips", others | {leaked})

    async def repaired() -> bool:
        offsets = await bitmap(own_etcd, "serviceips")
        return held in offsets and leaked not in offsets

    await eventually(repaired, timeout=30, what="the repair pass")
    assert await bitmap(own_etcd, "serviceips") == others | {held}
