"""The apiserver's /metrics, with kube-apiserver's names and labels.

    apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}
    apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,
                                       component}   (not WATCH nor CONNECT: see below)
    apiserver_current_inflight_requests{request_kind}     readOnly / mutating
    apiserver_longrunning_requests{verb,group,version,resource,subresource,scope,component}
    apiserver_registered_watchers{resource}    watchers served from the watch cache
    apiserver_watch_events_total{group,version,kind}
    apiserver_storage_objects{resource}        objects in the watch cache, per resource
    etcd_request_duration_seconds{operation,type}
    kubelite_apiserver_etcd_watches, kubelite_apiserver_list_pages_total{source},
    kubelite_apiserver_tasks                   kubelite's own (no kube counterpart)

Verbs as kube's endpoint instrumentation reports them: GET, LIST, WATCH, POST, PUT,
PATCH, APPLY (a server-side apply patch), DELETE, DELETECOLLECTION, CONNECT (exec,
attach, port-forward). A watch or a CONNECT lasts as long as its client wants: its
duration says nothing about the apiserver, so, as kube's SLI histogram
(apiserver_request_sli_duration_seconds) does, they are counted in
apiserver_request_total when they end and tracked in apiserver_longrunning_requests
while open, never observed in the latency histogram.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from apiserver import listing
from apiserver.registry import Registry
from apiserver.resources import RESOURCES, Resource, collection_prefix
from common.metrics import Labels, Metrics

__all__ = ["ApiserverMetrics", "REQUEST_BUCKETS", "request_verb", "request_scope"]

# kube's apiserver_request_duration_seconds and etcd_request_duration_seconds buckets
REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6,
                   8, 10, 15, 20, 30, 45, 60)
COMPONENT = "apiserver"  # kube's `component` label for what the apiserver itself serves
LONG_RUNNING = frozenset({"WATCH", "CONNECT"})
READ_ONLY = frozenset({"GET", "LIST", "WATCH"})
APPLY_PATCH = "application/apply-patch+yaml"
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


def request_verb(method: str, *, named: bool, subresource: str | None, watch: bool,
                 content_type: str, collection_delete: bool) -> str:
    """The `verb` label kube's endpoint metrics report for a resource request."""
    if subresource in CONNECT_SUBRESOURCES:
        return "CONNECT"
    if method == "GET":
        if named:
            return "GET"
        return "WATCH" if watch else "LIST"
    if method == "PATCH" and content_type.startswith(APPLY_PATCH):
        return "APPLY"
    if method == "DELETE" and collection_delete:
        return "DELETECOLLECTION"
    return method


def request_scope(namespace: str | None, name: str | None) -> str:
    """kube's CleanScope: namespace, resource (a named cluster-scoped object) or cluster."""
    if namespace:
        return "namespace"
    return "resource" if name else "cluster"


def is_watch(query_string: bytes) -> bool:
    """`watch=true` (or 1) in a query string, without parsing all of it."""
    at = query_string.find(b"watch=")
    if at < 0 or (at > 0 and query_string[at - 1] != ord("&")):
        return False
    value = query_string[at + 6:].split(b"&", 1)[0].lower()
    return value not in (b"", b"0", b"false")


class ApiserverMetrics:
    """Everything the apiserver counts; the request path calls `started` and `finished`,
    the storage times its etcd calls into `etcd_durations`."""

    def __init__(self, registry: Registry) -> None:
        self.metrics = metrics = Metrics()
        self.requests = metrics.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
             "component", "code"))
        self.durations = metrics.histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
             "component"), REQUEST_BUCKETS)
        self.inflight = {"readOnly": 0, "mutating": 0}
        metrics.gauge("apiserver_current_inflight_requests",
                      "Number of requests this apiserver is serving right now, per request "
                      "kind.", ("request_kind",),
                      lambda: [((kind,), count) for kind, count in self.inflight.items()])
        self.longrunning: dict[Labels, int] = {}
        metrics.gauge("apiserver_longrunning_requests",
                      "Gauge of all active long-running apiserver requests broken out by "
                      "verb, group, version, resource, scope and component.",
                      ("verb", "group", "version", "resource", "subresource", "scope",
                       "component"), lambda: self.longrunning.items())
        self.watch_events = metrics.counter(
            "apiserver_watch_events_total", "Number of events sent in watch clients",
            ("group", "version", "kind"))
        storage = registry.storage
        storage.request_duration = metrics.histogram(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            ("operation", "type"), REQUEST_BUCKETS)
        storage.key_offset = len(registry.prefix) + 1
        storage.types = {resource.storage_name: resource.qualified
                         for resource in RESOURCES.values()}
        metrics.gauge("apiserver_storage_objects",
                      "Number of stored objects at the time of last check split by kind.",
                      ("resource",), lambda: stored_objects(registry))
        metrics.gauge("apiserver_registered_watchers", "Watchers served from the watch cache.",
                      ("resource",), lambda: [
                          ((prefix.rstrip("/").rsplit("/", 1)[-1],), count) for prefix, count
                          in sorted(registry.cacher.watcher_count().items())])
        metrics.gauge("kubelite_apiserver_etcd_watches", "etcd watch streams open.", (),
                      lambda: [((), storage.open_watches)])
        metrics.counter_func("kubelite_apiserver_list_pages_total",
                             "LIST pages served, by source.", ("source",),
                             lambda: [((s,), listing.SERVED[s]) for s in ("cache", "etcd")])
        metrics.gauge("kubelite_apiserver_tasks", "asyncio tasks alive.", (),
                      lambda: [((), len(asyncio.all_tasks()))])

    def started(self, verb: str) -> None:
        self.inflight["readOnly" if verb in READ_ONLY else "mutating"] += 1

    def finished(self, verb: str, dry_run: str, resource: Resource, subresource: str,
                 scope: str, code: int, seconds: float) -> None:
        self.inflight["readOnly" if verb in READ_ONLY else "mutating"] -= 1
        self.requests.inc((verb, dry_run, resource.group, resource.version, resource.plural,
                           subresource, scope, COMPONENT, str(code)))
        if verb not in LONG_RUNNING:
            self.durations.observe(seconds, (verb, dry_run, resource.group, resource.version,
                                             resource.plural, subresource, scope, COMPONENT))

    def long_running(self, verb: str, resource: Resource, subresource: str, scope: str,
                     change: int) -> None:
        labels = (verb, resource.group, resource.version, resource.plural, subresource, scope,
                  COMPONENT)
        self.longrunning[labels] = self.longrunning.get(labels, 0) + change

    def count_watch_event(self, resource: Resource) -> Callable[[], None]:
        """What a watch calls for each event it sends."""
        counter, labels = self.watch_events, (resource.group, resource.version, resource.kind)
        return lambda: counter.inc(labels)

    def render(self) -> bytes:
        return self.metrics.render()


def stored_objects(registry: Registry) -> list[tuple[Labels, float]]:
    """Objects per resource, as the watch caches (which hold every one) count them; kube
    counts them in etcd once a minute. Resources sharing a key prefix (Events of both
    groups) are counted once."""
    seen: set[str] = set()
    samples: list[tuple[Labels, float]] = []
    for resource in RESOURCES.values():
        prefix = collection_prefix(registry.prefix, resource, None)
        cache = registry.cacher.caches.get(prefix)
        if cache is not None and cache.ready and prefix not in seen:
            seen.add(prefix)
            samples.append(((resource.qualified,), len(cache.store)))
    return sorted(samples)
