"""DefaultTolerationSeconds admission: pods tolerate not-ready/unreachable for 300 s."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apiserver.resources.pod_admission import default_toleration_seconds
from tests.support import unique

NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
               "effect": "NoExecute", "tolerationSeconds": 300}


@pytest.mark.parametrize(("name", "given", "want"), [
    ("none: both added", [], [NOT_READY, UNREACHABLE]),
    ("own not-ready kept, unreachable added",
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
       "tolerationSeconds": 5}],
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
       "tolerationSeconds": 5}, UNREACHABLE]),
    ("an empty key tolerates both", [{"operator": "Exists"}], [{"operator": "Exists"}]),
    ("a NoSchedule toleration does not count",
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}],
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"},
      NOT_READY, UNREACHABLE]),
    ("no effect means every effect",
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}],
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, NOT_READY]),
])
def test_default_toleration_seconds(name: str, given: list[dict[str, Any]],
                                    want: list[dict[str, Any]]) -> None:
    pod: dict[str, Any] = {"spec": {"tolerations": given}}
    default_toleration_seconds(pod)
    assert pod["spec"]["tolerations"] == want, name


async def test_the_apiserver_adds_them_on_create_only(http: httpx.AsyncClient) -> None:
    name = unique("tolerate")
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "kubelite/busybox:1.35"}]}}
    created = await http.post("/api/v1/namespaces/default/pods", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
    patched = await http.patch(f"/api/v1/namespaces/default/pods/{name}",
                               json={"metadata": {"labels": {"a": "b"}}},
                               headers={"Content-Type": "application/merge-patch+json"})
    assert patched.json()["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
    await http.delete(f"/api/v1/namespaces/default/pods/{name}",
                      params={"gracePeriodSeconds": "0"})
