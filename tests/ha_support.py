"""What the HA tests share (tests/test_ha.py on `hack/up.py --ha`, tests/test_e2e_compose_ha.py
on compose's profile ha): pods created through an outage, the leaders found from their
metrics, and Docker checked for a duplicate or orphaned container."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tests.docker_support import BUSYBOX_IMAGE, docker_problems

NS = "default"
LABEL = {"ha": "1"}
LONG_RUNNER = "trap 'exit 0' TERM; sleep 3600 & wait"
# pods created after each kill; KUBELITE_HA_BATCH=75 makes test_ha's four batches the
# issue's 300-pod storm (README "Tests")
BATCH = int(os.environ.get("KUBELITE_HA_BATCH", "8"))


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": LABEL},
            "spec": {"terminationGracePeriodSeconds": 2, "containers": [
                {"name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", LONG_RUNNER]}]}}


async def create_batch(http: httpx.AsyncClient, prefix: str, acknowledged: list[str],
                       count: int = BATCH) -> None:
    """Create `count` pods, each retried through the outage until the cluster answers: a
    201 is an acknowledged write, a 409 on a retry one whose answer was lost on the way."""
    for i in range(count):
        name = f"{prefix}-{i}"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = await http.post(f"/api/v1/namespaces/{NS}/pods", json=pod(name))
                if response.status_code in (201, 409):
                    acknowledged.append(name)
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"create {name}: no answer for 60 s"
            await asyncio.sleep(0.3)


def running(pod_object: dict[str, Any]) -> bool:
    return (pod_object.get("status") or {}).get("phase") == "Running"


async def all_running(http: httpx.AsyncClient,
                      acknowledged: Sequence[str]) -> dict[str, dict[str, Any]] | None:
    """Every labelled pod by name, once all acknowledged ones exist and all are Running."""
    response = await http.get(f"/api/v1/namespaces/{NS}/pods",
                              params={"labelSelector": "ha=1"})
    if response.status_code != 200:
        return None
    pods = {p["metadata"]["name"]: p for p in response.json()["items"]}
    return pods if set(acknowledged) <= set(pods) and all(
        running(p) for p in pods.values()) else None


def leader(addresses: Mapping[str, str], port: int) -> str:
    """The member (name -> address) whose /metrics says it leads
    (leader_election_master_status 1), or ""."""
    for name, address in addresses.items():
        try:
            text = httpx.get(f"http://{address}:{port}/metrics", timeout=3).text
        except httpx.HTTPError:
            continue
        if re.search(r'^leader_election_master_status\{name="[^"]+"\} 1', text, re.M):
            return name
    return ""


async def no_docker_problems(nodes: Sequence[str], pods: Mapping[str, dict[str, Any]]) -> bool:
    """For `eventually`: True, or an AssertionError that names what is still wrong."""
    problems = await asyncio.to_thread(docker_problems, nodes, pods)
    assert not problems, problems[:10]
    return True


async def no_pods_left(http: httpx.AsyncClient) -> bool:
    """The labelled pods of an earlier test are gone (their graceful deletion over)."""
    response = await http.get(f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": "ha=1"})
    return response.status_code == 200 and not response.json()["items"]
