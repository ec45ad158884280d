"""PriorityClasses (scheduling.k8s.io/v1) and the Priority admission plugin: the validation
and the resolution tables (pure, in the style of kube's validation_test.go and
admission_test.go), then the session apiserver: the system classes created at start,
kube's errors, the Table through the real kubectl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.resources.priorityclasses import (
    admit_priority_class,
    resolve_pod_priority,
    validate_priority_class,
    validate_update,
)
from common import errors
from tests.support import ApiServer, Kubectl, eventually, unique

BASE = "/apis/scheduling.k8s.io/v1/priorityclasses"


def pc(name: str, value: int = 1000, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **extra}


# --- pure ------------------------------------------------------------------------------------

VALIDATION_CASES = [
    ("a user class", pc("high", 1000), []),
    ("the highest user value", pc("top", 1_000_000_000), []),
    ("above the highest user value", pc("too-high", 1_000_000_001),
     ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]),
    ("a system class as kube has it", pc("system-node-critical", 2000001000), []),
    ("an unknown system- name", pc("system-mine", 10),
     ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
      "system use only. error: system-mine is not a known system priority class"]),
    ("a system class with another value", pc("system-cluster-critical", 5),
     ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
      "system use only. error: value of system-cluster-critical PriorityClass must be "
      "2000000000"]),
    ("a bad preemptionPolicy", pc("p", preemptionPolicy="Sometimes"),
     ['preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", '
      '"PreemptLowerPriority"']),
    ("a bad name", pc("Bad_Name"), ["metadata.name: Invalid value"]),
]


def messages(causes: list[dict[str, str]]) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in causes]


@pytest.mark.parametrize(("case", "obj", "expected"), VALIDATION_CASES,
                         ids=[c[0] for c in VALIDATION_CASES])
def test_validate(case: str, obj: dict[str, Any], expected: list[str]) -> None:
    got = messages(validate_priority_class(obj))
    assert len(got) == len(expected)
    for message, prefix in zip(got, expected, strict=True):
        assert message.startswith(prefix), message


def test_value_and_preemption_policy_are_immutable() -> None:
    old = pc("p", 10, preemptionPolicy="Never")
    assert validate_update({**old, "description": "new"}, old) == []
    assert messages(validate_update({**old, "value": 11}, old)) == [
        "value: Forbidden: may not be changed in an update."]
    assert messages(validate_update({**old, "preemptionPolicy": "PreemptLowerPriority"},
                                    old)) == [
        'preemptionPolicy: Invalid value: "PreemptLowerPriority": field is immutable']


CLASSES = {"high": pc("high", 1000), "never": pc("never", 500, preemptionPolicy="Never"),
           "system-node-critical": pc("system-node-critical", 2000001000,
                                      preemptionPolicy="PreemptLowerPriority")}
DEFAULT = pc("default", 7, globalDefault=True, preemptionPolicy="PreemptLowerPriority")

RESOLVE_CASES = [
    ("no class, no default: 0", {}, CLASSES, (None, 0, "PreemptLowerPriority")),
    ("no class: the global default", {}, {**CLASSES, "default": DEFAULT},
     ("default", 7, "PreemptLowerPriority")),
    ("a class", {"priorityClassName": "high"}, CLASSES, ("high", 1000, "PreemptLowerPriority")),
    ("a class that never preempts", {"priorityClassName": "never"}, CLASSES,
     ("never", 500, "Never")),
    ("the same priority sent", {"priorityClassName": "high", "priority": 1000}, CLASSES,
     ("high", 1000, "PreemptLowerPriority")),
    ("a system class", {"priorityClassName": "system-node-critical"}, CLASSES,
     ("system-node-critical", 2000001000, "PreemptLowerPriority")),
]


@pytest.mark.parametrize(("case", "spec", "classes", "expected"), RESOLVE_CASES,
                         ids=[c[0] for c in RESOLVE_CASES])
def test_resolve(case: str, spec: dict[str, Any], classes: dict[str, Any],
                 expected: tuple[str | None, int, str]) -> None:
    pod = {"metadata": {"name": "p"}, "spec": dict(spec)}
    resolve_pod_priority(pod, classes)
    got = pod["spec"]
    assert (got.get("priorityClassName"), got["priority"], got["preemptionPolicy"]) == expected


REFUSE_CASES = [
    ("an unknown class", {"priorityClassName": "nope"},
     'pods "p" is forbidden: no PriorityClass with name nope was found'),
    ("another priority", {"priorityClassName": "high", "priority": 5},
     'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod '
     "spec; priority admission controller computed 1000 from the given PriorityClass name"),
    ("a priority without class", {"priority": 5},
     'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod '
     "spec; priority admission controller computed 0 from the given PriorityClass name"),
    ("another preemptionPolicy", {"priorityClassName": "never",
                                  "preemptionPolicy": "PreemptLowerPriority"},
     'pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must '
     "not be provided in pod spec; priority admission controller computed Never from the "
     "given PriorityClass name"),
]


@pytest.mark.parametrize(("case", "spec", "message"), REFUSE_CASES,
                         ids=[c[0] for c in REFUSE_CASES])
def test_resolve_refuses(case: str, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.Forbidden) as refused:
        resolve_pod_priority({"metadata": {"name": "p"}, "spec": dict(spec)}, CLASSES)
    assert refused.value.message == message


def test_one_global_default() -> None:
    admit_priority_class(pc("second", 1), [DEFAULT])  # not a default: fine
    admit_priority_class({**DEFAULT}, [DEFAULT])  # the same one again: fine
    with pytest.raises(errors.Forbidden) as refused:
        admit_priority_class(pc("second", 1, globalDefault=True), [DEFAULT])
    assert refused.value.message == (
        'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass default is '
        "already marked as default. Only one default can exist")


# --- the apiserver -------------------------------------------------------------------------

async def test_system_classes_exist(http: httpx.AsyncClient) -> None:
    got = (await http.get(f"{BASE}/system-node-critical")).json()
    assert (got["value"], got["preemptionPolicy"], got.get("globalDefault")) == (
        2000001000, "PreemptLowerPriority", None)
    assert (await http.get(f"{BASE}/system-cluster-critical")).json()["value"] == 2000000000


async def test_system_classes_cannot_be_deleted(http: httpx.AsyncClient) -> None:
    for name in ("system-node-critical", "system-cluster-critical"):
        refused = await http.delete(f"{BASE}/{name}")
        assert refused.status_code == 403, refused.text
        assert refused.json()["message"] == (
            f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: this is a system '
            "priority class and cannot be deleted")
        assert (await http.get(f"{BASE}/{name}")).status_code == 200
    mine = unique("prio")
    assert (await http.post(BASE, json=pc(mine, 7))).status_code == 201
    assert (await http.delete(f"{BASE}/{mine}")).status_code == 200  # a user class can


async def test_pods_get_their_class_priority(http: httpx.AsyncClient) -> None:
    name = unique("prio")
    created = await http.post(BASE, json=pc(name, 4242, preemptionPolicy="Never"))
    assert created.status_code == 201, created.text
    try:
        pods = "/api/v1/namespaces/default/pods"
        container = [{"name": "c", "image": "busybox"}]
        pod = await http.post(pods, json={"metadata": {"name": name}, "spec": {
            "priorityClassName": name, "containers": container}})
        assert pod.status_code == 201, pod.text
        assert (pod.json()["spec"]["priority"], pod.json()["spec"]["preemptionPolicy"]) == (
            4242, "Never")
        await http.delete(f"{pods}/{name}", params={"gracePeriodSeconds": "0"})
        plain = await http.post(pods, json={"metadata": {"name": name + "-0"},
                                            "spec": {"containers": container}})
        assert plain.json()["spec"]["priority"] == 0
        await http.delete(f"{pods}/{name}-0", params={"gracePeriodSeconds": "0"})
        unknown = await http.post(pods, json={"metadata": {"name": name + "-x"}, "spec": {
            "priorityClassName": "nope", "containers": container}})
        assert unknown.status_code == 403
        assert unknown.json()["message"] == (
            f'pods "{name}-x" is forbidden: no PriorityClass with name nope was found')
        changed = await http.patch(f"{BASE}/{name}", json={"value": 1},
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert changed.status_code == 422
        assert changed.json()["message"] == (
            f'PriorityClass.scheduling.k8s.io "{name}" is invalid: value: Forbidden: may not '
            "be changed in an update.")
    finally:
        await http.delete(f"{BASE}/{name}")


async def test_only_one_global_default(http: httpx.AsyncClient) -> None:
    first, second = unique("default"), unique("default")
    assert (await http.post(BASE, json=pc(first, 5, globalDefault=True))).status_code == 201
    try:
        refused = await http.post(BASE, json=pc(second, 6, globalDefault=True))
        assert refused.status_code == 403
        assert refused.json()["message"] == (
            f'priorityclasses.scheduling.k8s.io "{second}" is forbidden: PriorityClass '
            f"{first} is already marked as default. Only one default can exist")
        reserved = await http.post(BASE, json=pc("system-mine", 5))
        assert reserved.status_code == 422
        # Nor may an existing class become a second default, by a patch or a PUT.
        assert (await http.post(BASE, json=pc(second, 6))).status_code == 201
        patched = await http.patch(f"{BASE}/{second}", json={"globalDefault": True},
                                   headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 403, patched.text
        assert "is already marked as default. Only one default can exist" in (
            patched.json()["message"])
        stored = (await http.get(f"{BASE}/{second}")).json()
        assert not stored.get("globalDefault")
        stored["globalDefault"] = True
        assert (await http.put(f"{BASE}/{second}", json=stored)).status_code == 403
        # The default itself may be updated, and handed over once it is no longer one.
        described = await http.patch(f"{BASE}/{first}", json={"description": "the default"},
                                     headers={"Content-Type": "application/merge-patch+json"})
        assert described.status_code == 200, described.text
        assert (await http.patch(f"{BASE}/{first}", json={"globalDefault": False}, headers={
            "Content-Type": "application/merge-patch+json"})).status_code == 200

        async def handed_over() -> bool:  # once the watch cache admission reads has it
            return (await http.patch(f"{BASE}/{second}", json={"globalDefault": True}, headers={
                "Content-Type": "application/merge-patch+json"})).status_code == 200

        assert await eventually(handed_over, timeout=10, what="the default handed over")
    finally:
        await http.delete(f"{BASE}/{first}")
        await http.delete(f"{BASE}/{second}")


def test_kubectl_get_priorityclasses(apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl = Kubectl(apiserver, tmp_path)
    out = kubectl.run("get", "pc", "system-node-critical", "system-cluster-critical").stdout
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert [(row[0], row[1], row[2], row[-1]) for row in lines[1:]] == [
        ("system-node-critical", "2000001000", "false", "PreemptLowerPriority"),
        ("system-cluster-critical", "2000000000", "false", "PreemptLowerPriority")]
