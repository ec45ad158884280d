"""Prometheus metrics with kube's names: the shared pure parts (common.metrics, the
apiserver's verb and scope labels) and the apiserver's /metrics after real requests on
the session apiserver (real etcd), read with prometheus_client's own parser.

The scheduler's, kubelet's and controller-manager's pages are tested in
tests/test_metrics_components.py."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from apiserver.metrics import REQUEST_BUCKETS, is_watch, request_scope, request_verb
from common.metrics import Histogram, Merged, Metrics, exponential_buckets, go_float
from common.workqueue import DURATION_BUCKETS, QUEUE_DURATION, WorkQueue
from tests.support import unique

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a /metrics page, keyed by (sample name, its labels)."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    """The sum of the samples of `metric` whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == metric and wanted <= have)


# --- common.metrics ---------------------------------------------------------------------------

def test_counters_histograms_and_gauges_parse_back_with_prometheus_clients_parser() -> None:
    metrics = Metrics()
    requests = metrics.counter("demo_requests_total", "Requests.", ("verb", "code"))
    latency = metrics.histogram("demo_duration_seconds", "Latency.", ("verb",), (0.1, 1.0))
    pods = {"a": 1, "b": 2}
    metrics.gauge("demo_pods", "Pods.", (), lambda: [((), len(pods))])
    for _ in range(3):
        requests.inc(("GET", "200"))
    requests.inc(("POST", "201"))
    latency.observe(0.1, ("GET",))  # on a bound: in that bucket (le is "less or equal")
    latency.observe(0.5, ("GET",))
    latency.observe(7, ("GET",))
    pods["c"] = 3

    samples = parse(metrics.render().decode())
    assert value(samples, "demo_requests_total", verb="GET", code="200") == 3
    assert value(samples, "demo_requests_total", verb="POST", code="201") == 1
    assert [value(samples, "demo_duration_seconds_bucket", verb="GET", le=le)
            for le in ("0.1", "1", "+Inf")] == [1, 2, 3]
    assert value(samples, "demo_duration_seconds_count", verb="GET") == 3
    assert math.isclose(value(samples, "demo_duration_seconds_sum", verb="GET"), 7.6)
    assert value(samples, "demo_pods") == 3  # read at scrape time


def test_the_page_is_written_as_kubes_go_components_write_it() -> None:
    metrics = Metrics()
    metrics.counter("x_total", "Has a \\ and a\nnewline.", ("zone", "app")).inc(('b"', "w"))
    metrics.histogram("y_seconds", "Y.", (), (0.005, 1)).observe(0.5)
    assert metrics.render().decode().splitlines() == [
        "# HELP x_total Has a \\\\ and a\\nnewline.",
        "# TYPE x_total counter",
        'x_total{app="w",zone="b\\""} 1',  # labels sorted by name, values escaped
        "# HELP y_seconds Y.",
        "# TYPE y_seconds histogram",
        'y_seconds_bucket{le="0.005"} 0',
        'y_seconds_bucket{le="1"} 1',
        'y_seconds_bucket{le="+Inf"} 1',
        "y_seconds_count 1",
        "y_seconds_sum 0.5",
    ]


@pytest.mark.parametrize(("number", "written"), [
    (0, "0"), (3.0, "3"), (0.025, "0.025"), (1.25, "1.25"), (999999, "999999"),
    (1e6, "1e+06"), (1234567.5, "1.2345675e+06"), (2.5e-05, "2.5e-05"), (-2e7, "-2e+07"),
    (0.0001, "0.0001"), (123456.75, "123456.75"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN")])
def test_numbers_are_gos(number: float, written: str) -> None:
    assert go_float(number) == written


def test_a_metric_name_is_registered_once_and_registries_are_per_component() -> None:
    first, second = Metrics(), Metrics()
    first.counter("same_total", "A.")
    second.counter("same_total", "B.")  # another component in the same process: fine
    with pytest.raises(ValueError, match="registered twice"):
        first.counter("same_total", "A again.")


def test_exponential_buckets_are_prometheus() -> None:
    assert exponential_buckets(0.001, 2, 4) == (0.001, 0.002, 0.004, 0.008)
    # client-go's workqueue buckets, with the digits kube's own pages show
    assert [go_float(b) for b in exponential_buckets(10e-9, 10, 10)] == [
        "1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05",
        "0.001", "0.01", "0.1", "1", "10"]


# --- the apiserver's labels (pure) -------------------------------------------------------------

@pytest.mark.parametrize(("method", "named", "subresource", "watch", "content_type",
                          "verb"), [
    ("GET", True, None, False, "", "GET"),
    ("GET", False, None, False, "", "LIST"),
    ("GET", False, None, True, "", "WATCH"),
    ("POST", False, None, False, "", "POST"),
    ("POST", True, "binding", False, "", "POST"),
    ("PUT", True, "status", False, "", "PUT"),
    ("PATCH", True, None, False, "application/merge-patch+json", "PATCH"),
    ("PATCH", True, None, False, "application/apply-patch+yaml", "APPLY"),
    ("DELETE", True, None, False, "", "DELETE"),
    ("DELETE", False, None, False, "", "DELETECOLLECTION"),
    ("POST", True, "exec", False, "", "CONNECT"),
    ("GET", True, "log", False, "", "GET"),
])
def test_request_verbs_are_kubes(method: str, named: bool, subresource: str | None,
                                 watch: bool, content_type: str, verb: str) -> None:
    assert request_verb(method, named=named, subresource=subresource, watch=watch,
                        content_type=content_type, collection_delete=not named) == verb


@pytest.mark.parametrize(("query", "watching"), [
    (b"watch=true", True), (b"watch=1", True), (b"limit=5&watch=True&x=1", True),
    (b"watch=false", False), (b"watch=0", False), (b"", False), (b"nowatch=true", False),
    (b"watch=", False)])
def test_watch_query(query: bytes, watching: bool) -> None:
    assert is_watch(query) is watching


def test_scopes_are_kubes() -> None:
    assert [request_scope("default", "web"), request_scope("default", None),
            request_scope(None, "node-1"), request_scope(None, None)] == [
        "namespace", "namespace", "resource", "cluster"]


# --- the apiserver's /metrics after real requests -----------------------------------------------

async def test_apiserver_metrics_count_and_time_real_requests(http: httpx.AsyncClient) -> None:
    name = unique("metrics-pod")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeName": unique("nowhere"),
                    "containers": [{"name": "app", "image": "busybox"}]}}
    before = parse((await http.get("/metrics")).text)

    async def watch_one_event() -> None:
        async with http.stream("GET", "/api/v1/namespaces/default/pods",
                               params={"watch": "true", "fieldSelector": f"metadata.name={name}",
                                       "timeoutSeconds": "30"}) as stream:
            async for _ in stream.aiter_lines():
                return

    watch = asyncio.create_task(watch_one_event())
    created = await http.post("/api/v1/namespaces/default/pods", json=pod)
    assert created.status_code == 201, created.text
    assert (await http.post("/api/v1/namespaces/default/pods", json=pod)).status_code == 409
    assert (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 200
    assert (await http.get("/api/v1/nodes")).status_code == 200
    await asyncio.wait_for(watch, 30)
    response = await http.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    after = parse(response.text)
    await http.delete(f"/api/v1/namespaces/default/pods/{name}",
                      params={"gracePeriodSeconds": "0"})

    def grew(metric: str, **labels: str) -> float:
        return value(after, metric, **labels) - value(before, metric, **labels)

    core = {"group": "", "version": "v1", "component": "apiserver"}
    assert grew("apiserver_request_total", verb="POST", resource="pods", code="201",
                scope="namespace", subresource="", dry_run="", **core) >= 1
    assert grew("apiserver_request_total", verb="POST", resource="pods", code="409") >= 1
    assert grew("apiserver_request_total", verb="GET", resource="pods", code="200") >= 1
    assert grew("apiserver_request_total", verb="LIST", resource="nodes", code="200",
                scope="cluster") >= 1
    assert grew("apiserver_request_total", verb="WATCH", resource="pods", code="200") >= 1
    assert grew("apiserver_request_duration_seconds_count", verb="POST", resource="pods") >= 2
    assert grew("apiserver_request_duration_seconds_sum", verb="POST", resource="pods") > 0
    # a watch is never observed in the latency histogram (it lasts as long as its client)
    assert value(after, "apiserver_request_duration_seconds_count", verb="WATCH") == 0
    buckets = {labels for (n, labels) in after
               if n == "apiserver_request_duration_seconds_bucket"
               and ("verb", "POST") in labels and ("resource", "pods") in labels}
    assert {dict(labels)["le"] for labels in buckets} == {
        *(go_float(b) for b in REQUEST_BUCKETS), "+Inf"}
    assert grew("apiserver_watch_events_total", group="", version="v1", kind="Pod") >= 1
    # etcd: the create's transaction, the GET's range, by kube's groupResource type
    assert grew("etcd_request_duration_seconds_count", operation="create", type="pods") >= 2
    assert grew("etcd_request_duration_seconds_count", operation="get", type="pods") >= 1
    assert value(after, "apiserver_storage_objects", resource="pods") >= 1
    assert value(after, "apiserver_storage_objects", resource="namespaces") >= 3
    # this /metrics GET itself is the only request in flight (it is not a resource request)
    assert value(after, "apiserver_current_inflight_requests", request_kind="mutating") == 0
    assert ("apiserver_current_inflight_requests",
            frozenset({("request_kind", "readOnly")})) in after
    # what existed before prometheus-client, still there
    for kept in ("kubelite_apiserver_etcd_watches", "kubelite_apiserver_tasks"):
        assert value(after, kept) >= 1
    assert value(after, "kubelite_apiserver_list_pages_total", source="cache") >= 1


async def test_an_update_of_a_cached_object_is_one_etcd_transaction(
        http: httpx.AsyncClient) -> None:
    """As kube's Cacher.GuaranteedUpdate: once the watch cache holds the object, an update
    starts from that copy and costs etcd one transaction, no read."""
    name = unique("metrics-pc")
    base = "/apis/scheduling.k8s.io/v1/priorityclasses"
    created = await http.post(base, json={"apiVersion": "scheduling.k8s.io/v1",
                                          "kind": "PriorityClass",
                                          "metadata": {"name": name}, "value": 7})
    assert created.status_code == 201, created.text
    try:
        async with http.stream("GET", base, params={
                "watch": "true", "fieldSelector": f"metadata.name={name}",
                "resourceVersion": created.json()["metadata"]["resourceVersion"],
                "allowWatchBookmarks": "false", "timeoutSeconds": "1"}) as stream:
            async for _ in stream.aiter_lines():  # served from the cache: it has the object
                pass
        before = parse((await http.get("/metrics")).text)
        for description in ("first", "second"):
            patched = await http.patch(f"{base}/{name}", json={"description": description},
                                       headers={"Content-Type": "application/merge-patch+json"})
            assert patched.status_code == 200, patched.text
            assert patched.json()["description"] == description
        after = parse((await http.get("/metrics")).text)

        def grew(operation: str) -> float:
            labels = {"operation": operation, "type": "priorityclasses.scheduling.k8s.io"}
            return (value(after, "etcd_request_duration_seconds_count", **labels)
                    - value(before, "etcd_request_duration_seconds_count", **labels))
        # the second patch starts from a copy the first one's write may not have reached
        # in the cache yet: then the transaction finds it stale and retries with etcd's
        assert grew("update") in (2, 3)
        assert grew("get") == 0
    finally:
        await http.delete(f"{base}/{name}")


async def test_open_watches_are_long_running_requests(http: httpx.AsyncClient) -> None:
    labels = {"verb": "WATCH", "resource": "configmaps", "scope": "namespace"}
    namespace = unique("metrics-ns")
    assert (await http.post("/api/v1/namespaces", json={
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace}})).status_code == 201
    try:
        async with http.stream("GET", f"/api/v1/namespaces/{namespace}/configmaps",
                               params={"watch": "1", "timeoutSeconds": "30"}):
            samples = parse((await http.get("/metrics")).text)
            assert value(samples, "apiserver_longrunning_requests", **labels) >= 1
            assert value(samples, "apiserver_registered_watchers", resource="configmaps") >= 1
        for _ in range(100):  # the server notices the closed stream soon after
            samples = parse((await http.get("/metrics")).text)
            if value(samples, "apiserver_longrunning_requests", **labels) == 0:
                break
            await asyncio.sleep(0.1)
        assert value(samples, "apiserver_longrunning_requests", **labels) == 0
    finally:
        await http.delete(f"/api/v1/namespaces/{namespace}")


# --- client-go's workqueue metrics --------------------------------------------------------------

async def test_a_work_queue_times_each_key_queued_and_worked_on() -> None:
    first, second = WorkQueue("first"), WorkQueue("second")
    first.add("a")
    first.add("a")  # already queued: one add, one wait
    assert await first.get() == "a"
    assert (first.queue_duration.count(("first",)), first.work_duration.count(("first",))) \
        == (1, 0)
    assert first.longest_running() >= 0 and first.unfinished_work() >= 0
    first.add("a")  # while a worker has it: queued again when it is done
    first.done("a")
    assert first.work_duration.count(("first",)) == 1
    assert await first.get() == "a"
    first.done("a")
    assert (first.queue_duration.count(("first",)), first.work_duration.count(("first",))) \
        == (2, 2)
    assert (first.adds, first.longest_running(), first.unfinished_work()) == (2, 0.0, 0.0)
    second.add("b")
    assert await second.get() == "b"

    # one family for every queue, each its own series, as the controller-manager serves it
    metrics = Metrics()
    template = Histogram(*QUEUE_DURATION, ("name",), DURATION_BUCKETS)
    metrics.add(Merged(template, lambda: [first.queue_duration, second.queue_duration]))
    samples = parse(metrics.render().decode())
    assert value(samples, "workqueue_queue_duration_seconds_count", name="first") == 2
    assert value(samples, "workqueue_queue_duration_seconds_count", name="second") == 1
    assert value(samples, "workqueue_queue_duration_seconds_bucket", name="first",
                 le="+Inf") == 2
