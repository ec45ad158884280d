"""The scheduler process: informers in, bindings and explanations out.

One pod's way through this file: the unbound-pods informer hands it to the queue
(`_on_pod_added`); the loop (`run_loop`) pops it, `schedule_one` picks a node from
the cache's snapshot, the pod is assumed on that node and bound in the background
(`_bind`), which ends with the `Scheduled` event. When no node fits, the pod backs
off in the queue and the user is told why (`_explain_unschedulable`): a
`FailedScheduling` event, the `PodScheduled=False` condition, and an annotation naming
each node's reason. A cluster event that one of the plugins that rejected a waiting pod
registers for (a node's labels, taints or allocatable changing, a pod placed or deleted)
moves it back at once when it now fits that node (`_retry_pods_fitting`).

With leader election (the default, as kube-scheduler), every instance runs its informers
but only the holder of the `kube-system/kube-scheduler` Lease schedules; an instance that
loses the lease exits with status 1, for its supervisor to restart it as a candidate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from common import component
from common.client import GROUP_VERSIONS as client_group_versions
from common.client import ApiClient
from common.errors import ApiError, Conflict, Invalid, NotFound
from common.event_queue import EventQueue
from common.events import EventRecorder
from common.http_pool import FastApiClient
from common.informer import BY_NAMESPACE, SharedInformerFactory, indexed_by_namespace
from common.leaderelection import LeaderElectionConfig, LeaderElector
from common.timeline import scheduling_instants
from common.timestamps import rfc3339
from scheduler import metrics
from scheduler.cache import ClusterCache
from scheduler.framework import (
    Cluster,
    FilterPlugin,
    ScorePlugin,
    per_node_reasons,
    run_filters,
    schedule_one,
    score_summary,
)
from scheduler.hints import pod_event_could_help
from scheduler.labels import Selector, pod_namespace
from scheduler.plugins import FILTERS, SCORERS
from scheduler.plugins.topology_spread import workload_selector
from scheduler.pods import (
    UNSCHEDULABLE_NODES_ANNOTATION,
    annotation_patch,
    is_bound,
    is_deleting,
    pod_key,
    unschedulable_condition_patch,
)
from scheduler.preemption import (
    Candidate,
    Outcome,
    lower_priority_nominated,
    nomination,
    preempt,
    preempted_message,
    with_nominated,
)
from scheduler.queue import (
    NODE_ADDED,
    NODE_CHANGED,
    POD_ADDED,
    POD_DELETED,
    QueuedPod,
    SchedulingQueue,
    node_change_could_help,
)
from scheduler.server import DEFAULT_BIND_ADDRESS, DEFAULT_PORT

log = logging.getLogger("scheduler")

DEFAULT_SCHEDULER_NAME = "default-scheduler"
# The resources outside the core group the scheduler reads or writes.
GROUP_VERSIONS = {**client_group_versions, "replicasets": "apps/v1"}


@dataclass(frozen=True)
class Options:
    apiserver: str  # a plain-HTTP URL; or, with `kubeconfig`, overriding its server
    kubeconfig: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    # Binds (and failure reports) in flight at once; the loop waits when all are busy.
    # More is slower here: httpx's pool costs grow with concurrent requests.
    parallelism: int = 8
    # 0: kube's adaptive default (all nodes below 100, then 50% down to 5%).
    percentage_of_nodes_to_score: int = 0
    # The health and metrics endpoint (scheduler.server); port 0 turns it off.
    bind_address: str = DEFAULT_BIND_ADDRESS
    port: int = DEFAULT_PORT
    # Only the holder of the lease schedules (kube-scheduler's --leader-elect, on by default).
    leader_elect: bool = True
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)


def unbound_pods_selector(scheduler_name: str) -> str:
    return f"spec.nodeName=,spec.schedulerName={scheduler_name}"


# Terminated pods no longer occupy their node (kube-scheduler's informer skips them too).
ASSIGNED_PODS_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class Scheduler:
    """The scheduler's state and its thin async shell around the pure decisions."""

    def __init__(self, client: ApiClient, *, options: Options,
                 filters: list[FilterPlugin] | None = None,
                 scorers: list[ScorePlugin] | None = None) -> None:
        self.client = client
        self.options = options
        self.filters = filters if filters is not None else FILTERS
        self.scorers = scorers if scorers is not None else SCORERS
        self.recorder = EventRecorder(client, component=options.scheduler_name)
        # Events never hold up a bind: queued, written one at a time (kube's broadcaster).
        self.events = EventQueue(self.recorder.event, self.recorder.source)
        self.cache = ClusterCache()
        self.queue = SchedulingQueue()
        self.rng = random.Random()
        self.next_start_index = 0
        self.slots = asyncio.Semaphore(options.parallelism)
        self.background: set[asyncio.Task[None]] = set()
        self.attempts: Counter[str] = Counter()  # result -> scheduling attempts (/metrics)
        # the leader elector /metrics reports on (set by SchedulerProcess.metrics)
        self.elector: LeaderElector | None = None
        self.prometheus = metrics.SchedulerMetrics(lambda: self.metrics_snapshot(self.elector))
        client.add_metrics(self.prometheus.metrics)
        # One shared informer per watch (common.informer), each feeding its handler.
        self.informers = SharedInformerFactory(client)
        self.nodes = self.informers.informer("nodes", name="nodes")
        self.assigned = self.informers.informer("pods", field_selector=ASSIGNED_PODS_SELECTOR,
                                                name="assigned pods")
        self.unbound = self.informers.informer(
            "pods", field_selector=unbound_pods_selector(options.scheduler_name),
            name="unbound pods")
        # Namespace labels, for pod (anti-)affinity terms with a namespaceSelector.
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.namespaces = self.informers.informer("namespaces", name="namespaces")
        # What a pod belongs to, for PodTopologySpread's system default constraints.
        self.services = indexed_by_namespace(self.informers.informer("services",
                                                                     name="services"))
        self.replica_sets = self.informers.informer("replicasets", name="replicasets")
        # Pods nominated to a node by their preemption, until bound or gone (kube's
        # nominator): pod key -> (node, pod).
        self.nominated: dict[str, tuple[str, dict[str, Any]]] = {}
        self.handlers = [
            self.nodes.add_event_handler(on_add=self._on_node_added,
                                         on_update=self._on_node_updated,
                                         on_delete=self.cache.remove_node, name="nodes"),
            self.assigned.add_event_handler(on_add=self._on_assigned_pod_added,
                                            on_update=lambda _old, new: self.cache.set_pod(new),
                                            on_delete=self._on_assigned_pod_deleted,
                                            name="assigned pods"),
            self.namespaces.add_event_handler(on_add=self._on_namespace,
                                              on_update=lambda _old, new: self._on_namespace(new),
                                              on_delete=self._on_namespace_deleted,
                                              name="namespaces"),
            self.unbound.add_event_handler(on_add=self._on_pod_added,
                                           on_update=self._on_pod_updated,
                                           on_delete=self._on_pod_deleted, name="unbound pods")]

    # -- informer handlers (quick: they only update the cache and the queue) ------------

    def _on_pod_added(self, pod: dict[str, Any]) -> None:
        self._on_pod_updated(None, pod)

    def _on_pod_updated(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if is_bound(new) or is_deleting(new):
            self.nominated.pop(pod_key(new), None)
            self.queue.delete(new)
            return
        if self._known_bound(new) and pod_key(new) not in self.queue:
            # A late event from before our binding: not ours to schedule again.
            return
        nominated_node = (new.get("status") or {}).get("nominatedNodeName")
        if nominated_node:  # also after a restart: the nomination is in the status
            self.nominated[pod_key(new)] = (str(nominated_node), new)
        if old is None:
            self.queue.add(new)
        else:
            self.queue.update(old, new)

    def _on_pod_deleted(self, pod: dict[str, Any]) -> None:
        self.nominated.pop(pod_key(pod), None)
        self.queue.delete(pod)

    def _known_bound(self, pod: dict[str, Any]) -> bool:
        """Whether we bound this very pod, or the assigned-pods informer saw it bound."""
        if self.cache.is_assumed(pod):
            return True
        seen = self.assigned.get(pod_key(pod))
        uid = (pod.get("metadata") or {}).get("uid")
        return seen is not None and (seen.get("metadata") or {}).get("uid") == uid

    def _on_namespace(self, namespace: dict[str, Any]) -> None:
        meta = namespace.get("metadata") or {}
        self.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})

    def _on_namespace_deleted(self, namespace: dict[str, Any]) -> None:
        self.namespace_labels.pop(str((namespace.get("metadata") or {}).get("name")), None)

    def cluster(self) -> Cluster:
        return Cluster(self.cache.node_infos(), self.namespace_labels,
                       default_selector=self.workload_selector, facts=self.cache.facts)

    def workload_selector(self, pod: Mapping[str, Any]) -> Selector:
        namespace = pod_namespace(pod)
        return workload_selector(pod, self.services.by_index(BY_NAMESPACE, namespace),
                                 lambda name: self.replica_sets.get(f"{namespace}/{name}"))

    def _on_node_added(self, node: dict[str, Any]) -> None:
        self.cache.set_node(node)
        self._retry_pods_fitting(str(node["metadata"]["name"]), NODE_ADDED,
                                 f"node {node['metadata']['name']} changed")

    def _on_node_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cache.set_node(new)
        if node_change_could_help(old, new):
            self._retry_pods_fitting(str(new["metadata"]["name"]), NODE_CHANGED,
                                     f"node {new['metadata']['name']} changed")

    def _on_assigned_pod_added(self, pod: dict[str, Any]) -> None:
        self.cache.set_pod(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and self.queue.has_unschedulable():
            self._retry_pods_fitting(str(node), POD_ADDED,
                                     f"pod {pod_key(pod)} was placed on {node}", pod)

    def _on_assigned_pod_deleted(self, pod: dict[str, Any]) -> None:
        node = self.cache.remove_pod(pod)
        if node and self.queue.has_unschedulable():
            self._retry_pods_fitting(node, POD_DELETED, f"pod {pod_key(pod)} left {node}",
                                     pod)

    def _retry_pods_fitting(self, node_name: str, event: str, what: str,
                            changed: dict[str, Any] | None = None) -> None:
        """Move the waiting pods whose rejecting plugins care about `event` (for a pod
        event: whose hint says the `changed` pod matters to them) and that now fit the
        node it touched (kube's QueueingHint: Queue, or Skip)."""
        if not self.queue.has_waiting():
            return  # e.g. the initial list's nodes: nothing to retry, no snapshot needed
        info = self.cache.get_node(node_name)
        if info is None:
            return
        cluster = self.cluster()
        hint = None if changed is None else (
            lambda item: pod_event_could_help(item.pod, item.rejected_by, changed, event,
                                              self.namespace_labels))
        moved = self.queue.move_matching(
            lambda pod: run_filters(self.filters, pod, info, cluster).is_success,
            event=event, could_help=hint)
        if moved:
            log.info("%s: %d waiting pod(s) now fit it, retrying them", what, moved)

    # -- the loop -----------------------------------------------------------------------

    async def run(self, *, leading: asyncio.Event | None = None) -> None:
        """Start the informers, wait for nodes and placed pods (and for `leading`, when
        elections are on), then schedule forever."""
        self.informers.start()
        try:
            # The handlers' copies, not only the stores: the cache must hold them all.
            await asyncio.gather(*(handler.wait_synced() for handler in self.handlers[:3]))
            log.info("caches synced: %d node(s); scheduling pods with schedulerName=%s",
                     len(self.cache.node_infos()), self.options.scheduler_name)
            if leading is not None:
                await leading.wait()
            await self.run_loop()
        finally:
            await self.informers.shutdown()

    async def run_loop(self) -> None:
        while True:
            # A free slot first, so that a popped pod is scheduled at once.
            await self.slots.acquire()
            try:
                item = await self.queue.pop()
            except BaseException:
                self.slots.release()
                raise
            try:
                self.schedule(item)
            except Exception:
                self.slots.release()
                log.exception("scheduling %s failed", item.key)
                self.attempts[metrics.ERROR] += 1
                self.queue.failed(item, unschedulable=False)

    def schedule(self, item: QueuedPod) -> None:
        """One scheduling cycle (synchronous: the snapshot cannot change under it).

        Holds one of `slots`; the background task it starts releases it.
        """
        pod = item.pod
        started = time.time()
        self.cache.cleanup_expired()
        cluster = self.cluster()
        if self.nominated:
            cluster = dataclasses.replace(
                cluster, nodes=with_nominated(cluster.nodes, self.nominated, pod), facts=None)
        result = schedule_one(pod, cluster.nodes, filters=self.filters,
                              scorers=self.scorers, rng=self.rng,
                              start_index=self.next_start_index,
                              percentage_of_nodes_to_score=(
                                  self.options.percentage_of_nodes_to_score),
                              cluster=cluster)
        self.next_start_index = result.next_start_index
        instants = scheduling_instants(self.queue.clock() - item.first_queued, started)
        if result.node_name is None:
            unschedulable = result.error is None
            result_label = metrics.UNSCHEDULABLE if unschedulable else metrics.ERROR
            self.attempts[result_label] += 1
            rejected_by = frozenset(status.plugin for status in
                                    result.diagnosis.node_statuses.values())
            message, outcome = result.message, None
            if unschedulable and cluster.nodes:
                # PostFilter: kube's FitError gains the preemption message (" %v.").
                self.prometheus.preemption_attempts.inc()
                outcome = preempt(pod, cluster, self.filters, result.diagnosis)
                if outcome.candidate is not None:
                    self.nominated[item.key] = (outcome.candidate.node, pod)
                elif outcome.clear_nomination:
                    self.nominated.pop(item.key, None)
                if outcome.message:
                    message += f" {outcome.message}."
            retry_in = self.queue.failed(item, unschedulable=unschedulable,
                                         rejected_by=rejected_by)
            log.info("%s is unschedulable (attempt %d, retry in %.0fs): %s", item.key,
                     item.attempts, retry_in, message)
            reasons = per_node_reasons(result.diagnosis) if unschedulable else None
            self.attempt_ended(result_label, started)
            self._start(self._explain_unschedulable(pod, message, reasons, outcome,
                                                    instants=instants))
            return
        self.cache.assume(pod, result.node_name)
        self.nominated.pop(item.key, None)
        how = (f"{result.feasible_nodes} feasible of {result.evaluated_nodes} evaluated "
               f"node(s), attempt {item.attempts + 1}")
        self._start(self._bind(item, result.node_name, how,
                               score_summary(result.scores, result.node_name),
                               instants=instants, started=started))

    def attempt_ended(self, result: str, started: float) -> None:
        """scheduler_scheduling_attempt_duration_seconds: the cycle and, for a pod it
        places, its bind (`started`: the cycle's time.time())."""
        self.prometheus.attempt_duration.observe(time.time() - started,
                                                 (self.options.scheduler_name, result))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.create_task(self._in_slot(work))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _in_slot(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:
            log.exception("background scheduler work failed")
        finally:
            self.slots.release()

    # -- API writes -----------------------------------------------------------------------

    async def _bind(self, item: QueuedPod, node: str, how: str, scores: str = "", *,
                    instants: dict[str, str] | None = None,
                    started: float | None = None) -> None:
        pod = item.pod
        namespace, name = item.key.split("/", 1)
        try:
            await self.client.bind(namespace, name, node)
        except Conflict as e:
            self.attempts[metrics.ERROR] += 1
            self.attempt_ended(metrics.ERROR, started or time.time())
            self.cache.forget(pod)
            self.queue.done(item)
            log.info("%s was bound by someone else, dropping it (%s)", item.key, e.message)
            return
        except (NotFound, Invalid) as e:
            # The pod is gone (its informer delete drops it from the queue), or the
            # node vanished between filter and bind: try again after a back-off.
            self.attempts[metrics.ERROR] += 1
            self.attempt_ended(metrics.ERROR, started or time.time())
            self.cache.forget(pod)
            retry_in = self.queue.failed(item, unschedulable=False)
            log.warning("binding %s to %s failed, retry in %.0fs: %s", item.key, node,
                        retry_in, e.message)
            return
        except (ApiError, httpx.HTTPError) as e:
            self.attempts[metrics.ERROR] += 1
            self.attempt_ended(metrics.ERROR, started or time.time())
            self.cache.forget(pod)
            retry_in = self.queue.failed(item, unschedulable=False)
            log.warning("binding %s to %s failed, retry in %.0fs: %s: %s", item.key, node,
                        retry_in, type(e).__name__, e)
            return
        self.attempts[metrics.SCHEDULED] += 1
        self.attempt_ended(metrics.SCHEDULED, started or time.time())
        since_queued = self.queue.clock() - item.first_queued
        self.prometheus.sli_duration.observe(since_queued, (str(item.attempts + 1),))
        self.prometheus.pod_attempts.observe(item.attempts + 1)
        self.cache.finish_binding(pod)
        self.queue.done(item)
        message = f"Successfully assigned {item.key} to {node}"
        log.info("%s (%s, %.2fs after it was queued)%s", message, how, since_queued,
                 f"; {scores}" if scores else "")
        # kube's first sentence, unchanged; then, beyond kube, how the nodes scored.
        self.events.emit(pod, "Normal", "Scheduled",
                         f"{message}. {scores}" if scores else message,
                         action="Binding", annotations=instants)
        if annotation_patch(pod, None) is not None:
            await self._patch(pod, {"metadata": {"annotations": {
                UNSCHEDULABLE_NODES_ANNOTATION: None}}})

    async def _explain_unschedulable(self, pod: dict[str, Any], message: str,
                                     reasons: dict[str, str] | None,
                                     outcome: Outcome | None = None, *,
                                     instants: dict[str, str] | None = None) -> None:
        reason = "Unschedulable" if reasons is not None else "SchedulerError"
        condition = unschedulable_condition_patch(pod, message, rfc3339(), reason=reason)
        nominated = nomination(pod, outcome)
        if nominated != ((pod.get("status") or {}).get("nominatedNodeName") or None):
            condition = condition or {"status": {}}
            condition["status"]["nominatedNodeName"] = nominated
        # The nomination is written before the victims go: once they are gone the pod
        # may be bound at once, and binding clears it.
        if condition is not None:
            await self._patch(pod, condition, subresource="status")
        if outcome is not None and outcome.candidate is not None:
            await self._preempt(pod, outcome.candidate)
        self.events.emit(pod, "Warning", "FailedScheduling", message,
                         action="Scheduling", annotations=instants)
        if reasons is not None:
            annotation = annotation_patch(pod, reasons)
            if annotation is not None:
                await self._patch(pod, annotation)

    async def _preempt(self, pod: dict[str, Any], candidate: Candidate) -> None:
        """prepareCandidate: each victim gets the DisruptionTarget condition, is deleted
        (gracefully, as it asked) and told why in a `Preempted` event; the less important
        pods nominated to the node lose their nomination."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        for key, other in lower_priority_nominated(self.nominated, pod, candidate.node):
            log.info("%s is no longer nominated to %s: %s takes its room", key,
                     candidate.node, pod_key(pod))
            self.nominated.pop(key, None)
            await self._patch(dict(other), {"status": {"nominatedNodeName": None}},
                              subresource="status")
        log.info("%s preempts %d pod(s) on node %s: %s", pod_key(pod), len(candidate.victims),
                 candidate.node, ", ".join(
                     f"{pod_key(v)} (priority {(v.get('spec') or {}).get('priority') or 0})"
                     for v in candidate.victims))
        for victim in map(dict, candidate.victims):
            namespace, name = pod_key(victim).split("/", 1)
            condition = {"type": "DisruptionTarget", "status": "True",
                         "reason": "PreemptionByScheduler",
                         "message": f"{self.options.scheduler_name}: preempting to "
                                    "accommodate a higher priority pod",
                         "lastTransitionTime": rfc3339()}
            await self._patch(victim, {"status": {"conditions": [condition]}},
                              subresource="status", patch_type="strategic")
            try:
                await self.client.delete("pods", name, namespace=namespace, preconditions={
                    "uid": str((victim.get("metadata") or {}).get("uid") or "")})
            except (NotFound, Conflict):
                continue  # gone already, or another pod of that name
            except (ApiError, httpx.HTTPError) as e:
                log.warning("could not preempt %s: %s: %s", pod_key(victim),
                            type(e).__name__, e)
                continue
            self.events.emit(victim, "Normal", "Preempted",
                             preempted_message(uid, candidate.node), action="Preempting")

    async def _patch(self, pod: dict[str, Any], patch: dict[str, Any], *,
                     subresource: str | None = None, patch_type: str = "merge") -> None:
        namespace, name = pod_key(pod).split("/", 1)
        try:
            await self.client.patch("pods", name, patch, namespace=namespace,
                                     subresource=subresource, patch_type=patch_type)
        except NotFound:
            pass  # deleted meanwhile: nothing left to explain
        except (ApiError, httpx.HTTPError) as e:
            what = "status" if subresource else "annotations"
            log.warning("could not update the %s of %s: %s: %s", what, pod_key(pod),
                        type(e).__name__, e)

    # -- what the HTTP endpoint reports ----------------------------------------------------

    def unsynced_informers(self) -> list[str]:
        return self.informers.unsynced()

    def metrics_snapshot(self, elector: LeaderElector | None = None
                         ) -> metrics.MetricsSnapshot:
        counts = self.queue.counts()
        leader = (None if elector is None
                  else (elector.config.name, elector.leading.is_set()))
        return metrics.MetricsSnapshot(
            profile=self.options.scheduler_name,
            pending={q: counts[q] for q in metrics.PENDING_QUEUES},
            in_flight=counts["in_flight"], attempts=dict(self.attempts),
            cache=self.cache.sizes(), leader=leader)

    async def drain(self, *, seconds: float) -> None:
        """Let binds and reports in flight finish, then their events be written (up to
        `seconds` each)."""
        if self.background:
            await asyncio.wait(set(self.background), timeout=seconds)
        await self.events.close(seconds=seconds)


class SchedulerProcess:
    """The scheduler as `common.component.serve` runs it."""

    def __init__(self, client: ApiClient, options: Options) -> None:
        self.scheduler = Scheduler(client, options=options)
        self.options = options

    def describe(self) -> str:
        return (f"{self.options.scheduler_name} with filters "
                f"{json.dumps([p.name for p in self.scheduler.filters])} and scores "
                f"{json.dumps([p.name for p in self.scheduler.scorers])}")

    def run(self, *, leading: asyncio.Event | None = None) -> Coroutine[Any, Any, None]:
        return self.scheduler.run(leading=leading)

    def liveness(self, running: asyncio.Task[None]) -> dict[str, str | None]:
        return {"ping": None, "scheduling-loop": "stopped" if running.done() else None}

    def readiness(self, stopping: asyncio.Event) -> dict[str, str | None]:
        """kube-scheduler's /readyz checks: informers synced, not shutting down."""
        unsynced = self.scheduler.unsynced_informers()
        return {"ping": None,
                "informer-sync": f"not synced yet: {', '.join(unsynced)}" if unsynced else None,
                "shutdown": "shutting down" if stopping.is_set() else None}

    def metrics(self, elector: LeaderElector | None) -> bytes:
        self.scheduler.elector = elector
        return self.scheduler.prometheus.render()

    def stopping(self) -> str:
        return (f"shutting down: {len(self.scheduler.queue)} pod(s) still queued, "
                f"{len(self.scheduler.background)} bind/report task(s) in flight")

    async def drain(self) -> None:
        await self.scheduler.drain(seconds=5)


async def serve(options: Options) -> None:
    """Run until SIGTERM/SIGINT, then finish what is in flight and stop."""
    await component.serve(
        options, component.Client(
            user_agent=f"kube-scheduler/{options.scheduler_name}",
            make_api=lambda conn, agent: FastApiClient(conn, user_agent=agent,
                                                       group_versions=GROUP_VERSIONS)),
        lambda client: SchedulerProcess(client, options), log)
