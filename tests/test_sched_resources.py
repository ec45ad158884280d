"""Table tests of pod requests, NodeResourcesFit and its scores (kube's `fit_test.go`,
`least_allocated_test.go`, `balanced_allocation_test.go` and `resource_helpers_test`)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cache import ClusterCache
from scheduler.framework import Code, NodeInfo, run_filters
from scheduler.plugins import node_resources
from scheduler.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Resources,
    node_allocatable,
    pod_requests,
)

Mi = 1024 * 1024


def container(name: str = "c", *, cpu: str | None = None, memory: str | None = None,
              storage: str | None = None, extra: dict[str, str] | None = None,
              restart_policy: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = dict(extra or {})
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    if storage is not None:
        requests["ephemeral-storage"] = storage
    body: dict[str, Any] = {"name": name, "image": "busybox"}
    if requests:
        body["resources"] = {"requests": requests}
    if restart_policy:
        body["restartPolicy"] = restart_policy
    return body


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None,
        overhead: dict[str, str] | None = None, name: str = "p") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}


def node(name: str = "n", **allocatable: str) -> NodeInfo:
    body: dict[str, Any] = {"metadata": {"name": name}, "status": {}}
    if allocatable:
        body["status"]["allocatable"] = {k.replace("_", "-"): v for k, v in allocatable.items()}
    return NodeInfo(body)


def with_pods(info: NodeInfo, *pods: dict[str, Any]) -> NodeInfo:
    for i, placed in enumerate(pods):
        info.add_pod(f"default/placed-{i}", placed)
    return info


REQUEST_CASES = [
    ("nothing requested", pod(), Resources()),
    ("containers add up", pod(container(cpu="100m", memory="1Mi"),
                              container(cpu="1", memory="2Mi")),
     Resources(1100, 3 * Mi)),
    ("an init container larger than the sum wins",
     pod(container(cpu="1"), init=[container(cpu="2", memory="1Mi")]), Resources(2000, Mi)),
    ("init containers are not added up",
     pod(container(cpu="500m"), init=[container(cpu="1"), container(cpu="1")]),
     Resources(1000)),
    ("a sidecar adds to the app containers",
     pod(container(cpu="1"), init=[container(cpu="500m", restart_policy="Always")]),
     Resources(1500)),
    ("a sidecar adds to the init containers after it",
     pod(container(cpu="100m"), init=[container(cpu="500m", restart_policy="Always"),
                                      container(cpu="2")]),
     Resources(2500)),
    ("overhead on top", pod(container(cpu="1"), overhead={"cpu": "250m", "memory": "10Mi"}),
     Resources(1250, 10 * Mi)),
    ("ephemeral storage and extended resources",
     pod(container(storage="1Gi", extra={"example.com/gpu": "2"})),
     Resources(0, 0, 1024 * Mi, {"example.com/gpu": 2})),
    ("fractional cpu rounds up to a milli-cpu", pod(container(cpu="0.0001")), Resources(1)),
]


@pytest.mark.parametrize(("case", "spec", "expected"), REQUEST_CASES,
                         ids=[c[0] for c in REQUEST_CASES])
def test_pod_requests(case: str, spec: dict[str, Any], expected: Resources) -> None:
    assert pod_requests(spec) == expected


def test_non_zero_requests_fill_in_kubes_defaults_per_container() -> None:
    assert pod_requests(pod(container(), container(cpu="1")), non_zero=True) == Resources(
        1000 + DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST)
    assert pod_requests(pod(container(memory="1Mi")), non_zero=True) == Resources(
        DEFAULT_MILLI_CPU_REQUEST, Mi)


def test_node_allocatable() -> None:
    alloc = node_allocatable({"status": {"allocatable": {"cpu": "2", "memory": "1Gi",
                                                         "pods": "110"}}})
    assert (alloc.limited, alloc.resources, alloc.pods) == (True, Resources(2000, 1024 * Mi),
                                                            110)
    assert node_allocatable({"status": {}}).limited is False


BIG = {"cpu": "10", "memory": "20Mi", "pods": "32"}
FIT_CASES: list[tuple[str, dict[str, Any], NodeInfo, tuple[str, ...]]] = [
    ("no resources requested always fits", pod(),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="10", memory="20Mi"))),
     ()),
    ("too many resources fails", pod(container(cpu="1", memory="1Mi")),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="10", memory="20Mi"))),
     ("Insufficient cpu", "Insufficient memory")),
    ("too many resources fails due to init container cpu",
     pod(container(cpu="1", memory="1Mi"), init=[container(cpu="3", memory="1Mi")]),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="8", memory="19Mi"))),
     ("Insufficient cpu",)),
    ("init container fits because it is the max, not the sum",
     pod(container(cpu="1", memory="1Mi"),
         init=[container(cpu="2", memory="1Mi"), container(cpu="2", memory="1Mi")]),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="8", memory="19Mi"))),
     ()),
    ("both resources fit", pod(container(cpu="1", memory="1Mi")),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="5", memory="5Mi"))),
     ()),
    ("one resource memory fits", pod(container(cpu="2", memory="1Mi")),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="9", memory="5Mi"))),
     ("Insufficient cpu",)),
    ("equal edge case", pod(container(cpu="5", memory="1Mi")),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(cpu="5", memory="19Mi"))),
     ()),
    ("overhead counts", pod(container(cpu="1"), overhead={"memory": "16Mi"}),
     with_pods(node(cpu="10", memory="20Mi", pods="32"), pod(container(memory="5Mi"))),
     ("Insufficient memory",)),
    ("ephemeral storage", pod(container(storage="2Gi")),
     node(cpu="1", memory="1Gi", ephemeral_storage="1Gi", pods="10"),
     ("Insufficient ephemeral-storage",)),
    ("an extended resource the node lacks", pod(container(extra={"example.com/gpu": "1"})),
     node(cpu="1", pods="10"), ("Insufficient example.com/gpu",)),
    ("too many pods, even requesting nothing", pod(),
     with_pods(node(cpu="10", pods="1"), pod()), ("Too many pods",)),
    ("too many pods and insufficient cpu", pod(container(cpu="20")),
     with_pods(node(cpu="10", pods="1"), pod()), ("Too many pods", "Insufficient cpu")),
    ("a node with a resource list lacking cpu has none", pod(container(cpu="1")),
     node(memory="1Gi", pods="10"), ("Insufficient cpu",)),
    ("a node reporting no allocatable at all is not checked", pod(container(cpu="100")),
     with_pods(node(), pod(container(cpu="100"))), ()),
]


@pytest.mark.parametrize(("case", "spec", "info", "reasons"), FIT_CASES,
                         ids=[c[0] for c in FIT_CASES])
def test_node_resources_fit(case: str, spec: dict[str, Any], info: NodeInfo,
                            reasons: tuple[str, ...]) -> None:
    status = run_filters([node_resources.FIT_PLUGIN], spec, info)
    assert status.reasons == reasons
    if reasons:
        # Fewer pods could make it fit: preemption may help, unlike a label mismatch.
        assert status.code is Code.UNSCHEDULABLE
        assert status.plugin == "NodeResourcesFit"


def scores(plugin: Any, spec: dict[str, Any], *infos: NodeInfo) -> dict[str, int]:
    score = plugin.prepare(spec, list(infos))
    if score is None:
        return {}
    return {i.name: score(spec, i) for i in infos}


LEAST_CASES = [
    ("nothing scheduled, nothing requested", pod(),
     [node("a", cpu="4", memory="10000Mi"), node("b", cpu="4", memory="10000Mi")],
     # kube's non-zero defaults: 100m of 4 cpu, 200Mi of 10000Mi
     {"a": (3900 * 100 // 4000 + 9800 * 100 // 10000) // 2,
      "b": (3900 * 100 // 4000 + 9800 * 100 // 10000) // 2}),
    ("nothing scheduled, resources requested, differently sized nodes",
     pod(container(cpu="3", memory="5000Mi")),
     [node("a", cpu="4", memory="10000Mi"), node("b", cpu="6", memory="10000Mi")],
     {"a": 37, "b": 50}),
    ("resources requested, pods scheduled with resources",
     pod(container(cpu="3", memory="5000Mi")),
     [with_pods(node("a", cpu="10", memory="20000Mi"), pod(container(cpu="3", memory="0"))),
      node("b", cpu="10", memory="20000Mi")],
     {"a": (40 + 75) // 2, "b": (70 + 75) // 2}),
    ("requested beyond capacity scores 0", pod(container(cpu="8", memory="1Mi")),
     [node("a", cpu="4", memory="100Mi")], {"a": (0 + 99) // 2}),
    ("no node reports allocatable: skipped", pod(container(cpu="1")), [node("a")], {}),
    ("a node without allocatable among sized ones scores 0", pod(container(cpu="1")),
     [node("a"), node("b", cpu="2", memory="1Gi")], {"a": 0, "b": (50 + 80) // 2}),
]


@pytest.mark.parametrize(("case", "spec", "infos", "expected"), LEAST_CASES,
                         ids=[c[0] for c in LEAST_CASES])
def test_least_allocated(case: str, spec: dict[str, Any], infos: list[NodeInfo],
                         expected: dict[str, int]) -> None:
    assert scores(node_resources.LEAST_ALLOCATED_PLUGIN, spec, *infos) == expected


BALANCED_CASES = [
    ("nothing requested: skipped", pod(), [node("a", cpu="4", memory="10000Mi")], {}),
    ("nothing scheduled, resources requested, differently sized nodes",
     pod(container(cpu="3", memory="5000Mi")),
     [node("a", cpu="4", memory="10000Mi"), node("b", cpu="6", memory="10000Mi")],
     {"a": 87, "b": 100}),
    ("pods scheduled: the fractions include them",
     pod(container(cpu="1", memory="1000Mi")),
     [with_pods(node("a", cpu="4", memory="4000Mi"), pod(container(cpu="2"))),
      with_pods(node("b", cpu="4", memory="4000Mi"), pod(container(cpu="1", memory="1000Mi")))],
     {"a": int((1 - abs(0.75 - 0.25) / 2) * 100), "b": 100}),
    ("fractions are capped at 1", pod(container(cpu="8", memory="1000Mi")),
     [node("a", cpu="4", memory="1000Mi")], {"a": 100}),
]


@pytest.mark.parametrize(("case", "spec", "infos", "expected"), BALANCED_CASES,
                         ids=[c[0] for c in BALANCED_CASES])
def test_balanced_allocation(case: str, spec: dict[str, Any], infos: list[NodeInfo],
                             expected: dict[str, int]) -> None:
    assert scores(node_resources.BALANCED_PLUGIN, spec, *infos) == expected


def bound(spec: dict[str, Any], node_name: str) -> dict[str, Any]:
    return {**spec, "spec": {**spec["spec"], "nodeName": node_name}}


def test_cache_tracks_requests_of_bound_and_assumed_pods() -> None:
    cache = ClusterCache()
    info = cache.set_node({"metadata": {"name": "n1"},
                           "status": {"allocatable": {"cpu": "2", "pods": "3"}}})
    small, large = pod(container(cpu="500m"), name="small"), pod(container(cpu="1"), name="large")
    cache.set_pod(bound(small, "n1"))
    cache.assume(large, "n1")
    assert info.requested == Resources(1500) and info.pod_count == 2
    assert info.non_zero_requested == Resources(1500, 2 * DEFAULT_MEMORY_REQUEST)
    cache.forget(large)
    assert info.requested == Resources(500)
    # A pod seen before its node: counted once the node arrives.
    cache.set_pod(bound(large, "n2"))
    later = cache.set_node({"metadata": {"name": "n2"}})
    assert later.requested == Resources(1000)
    # Deleting a pod gives its share back; re-adding the node keeps its pods.
    cache.remove_pod(bound(small, "n1"))
    assert info.requested == Resources() and info.pod_count == 0
    cache.remove_node({"metadata": {"name": "n2"}})
    assert [i.name for i in cache.node_infos()] == ["n1"]
    assert cache.set_node({"metadata": {"name": "n2"}}).requested == Resources(1000)


def test_cache_counts_the_facts_plugins_skip_on() -> None:
    cache = ClusterCache()
    sized = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2"}},
             "spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}
    cache.set_node(sized)
    cache.set_node({"metadata": {"name": "n2"}})
    anti = pod(name="anti")
    anti["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "x"}]}}
    cache.set_pod(bound(anti, "n2"))
    facts = cache.facts
    assert (facts.limited_nodes, facts.prefer_no_schedule_nodes, facts.pods_with_affinity,
            facts.pods_with_required_anti_affinity) == (1, 1, 1, 1)
    cache.set_node({"metadata": {"name": "n1"}})  # allocatable and taint gone
    cache.remove_pod(bound(anti, "n2"))
    assert (facts.limited_nodes, facts.prefer_no_schedule_nodes, facts.pods_with_affinity,
            facts.pods_with_required_anti_affinity) == (0, 0, 0, 0)
    cache.assume(anti, "n1")
    cache.remove_node({"metadata": {"name": "n1"}})  # its pods leave the counts with it
    assert facts.pods_with_affinity == 0
