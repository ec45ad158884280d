"""The Job controller (pkg/controller/job), its core: run pods from the template until
`completions` of them succeeded, at most `parallelism` at a time, and give up after
`backoffLimit` failed pods or `activeDeadlineSeconds`.

One sync: count the Job's pods (active, succeeded, failed); when it is finished, mark it
(`Complete` with `SuccessCriteriaMet`, or `Failed` with `FailureTarget`, in kube's words)
and delete what still runs; else create or delete pods to have
min(parallelism, completions - succeeded) active, with expectations as the ReplicaSet
controller. After failed pods, new ones wait kube's pod failure back-off (10 s doubled
per failure since the last success, at most 6 minutes, from the last failure); a Job with
`activeDeadlineSeconds` is synced again when its deadline comes. `completionMode:
Indexed` gives each pod an index 0..completions-1 (annotation and label
`batch.kubernetes.io/job-completion-index`, hostname `JOB-INDEX`, env
`JOB_COMPLETION_INDEX` through the downward API), creates the lowest missing indexes first
and completes when every index succeeded (`status.completedIndexes`). Events:
`SuccessfulCreate`, `SuccessfulDelete`, `Completed`, `BackoffLimitExceeded`,
`DeadlineExceeded`. `suspend: true` keeps no pod active (the running ones are deleted)
and sets the `Suspended` condition (`JobSuspended`, event `Suspended`); resuming sets it
False (`JobResumed`, event `Resumed`) and restarts the clock of `activeDeadlineSeconds`
(`startTime` is set when the Job first runs unsuspended, and reset on resume). Under
`restartPolicy: OnFailure` the kubelet restarts a failed container in place, so the
container restarts of the Job's pending and running pods count as retries too: the Job
fails once they reach `backoffLimit` (kube's pastBackoffLimitOnFailure).
`ttlSecondsAfterFinished` is the TTL-after-finished controller's (`ttlafterfinished`).

Not done: the job-tracking finalizer on pods (counts come from the pods that exist, so a
pod deleted by hand before it was counted is not counted), podFailurePolicy, successPolicy,
backoffLimitPerIndex.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.client import ApiClient
from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import (
    BY_NAMESPACE,
    SharedInformer,
    SharedInformerFactory,
    indexed_by_namespace,
)
from common.timestamps import rfc3339
from controller_manager.controller import QueueController, key_of
from controller_manager.podcontrol import PodControl
from controller_manager.pods import (
    Expectations,
    controller_of,
    controller_ref,
    parse_time,
    pods_to_delete,
)

log = logging.getLogger("controller_manager.job")

NAME = "job-controller"
API_VERSION = "batch/v1"
KIND = "Job"
Object = dict[str, Any]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
BACKOFF_BASE = 10.0  # DefaultJobPodFailureBackOff
BACKOFF_CAP = 360.0  # "capped at six minutes" (the Job docs)


# -- pure decisions ---------------------------------------------------------------------------


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def counts(pods: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int, int]:
    """(active pods, succeeded, failed) of a Job's pods."""
    active = [p for p in pods if phase(p) not in ("Succeeded", "Failed")
              and not (p.get("metadata") or {}).get("deletionTimestamp")]
    succeeded = sum(1 for p in pods if phase(p) == "Succeeded")
    failed = sum(1 for p in pods if phase(p) == "Failed")
    return active, succeeded, failed


def completions_of(job: Mapping[str, Any]) -> int | None:
    spec = job.get("spec") or {}
    value = spec.get("completions")
    return None if value is None else int(value)


def parallelism_of(job: Mapping[str, Any]) -> int:
    value = (job.get("spec") or {}).get("parallelism")
    return 1 if value is None else int(value)


def finished_condition(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def restarts_on_failure(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
    """The container restarts (init containers too) of the Job's pending and running pods
    when its template restarts containers on failure; 0 otherwise."""
    template = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return 0
    total = 0
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") not in ("Pending", "Running"):
            continue
        for key in ("initContainerStatuses", "containerStatuses"):
            total += sum(int(s.get("restartCount") or 0) for s in status.get(key) or [])
    return total


def outcome(job: Mapping[str, Any], succeeded: int, failed: int, active: int,
            now: datetime, restarts: int = 0) -> tuple[str, str, str] | None:
    """(condition, reason, message) when the Job is finished now, else None. `restarts`:
    restarts_on_failure's count, which fails the Job when it reaches the backoffLimit (any
    restart at all for a limit of 0), as failed pods do when they exceed it."""
    completions = completions_of(job)
    if completions is None:
        # No completions: done once one pod succeeded and none still runs.
        if succeeded > 0 and active == 0:
            return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
    elif succeeded >= completions:
        return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
    given = (job.get("spec") or {}).get("backoffLimit")
    limit = 6 if given is None else int(given)
    if failed > limit or (restarts > 0 and restarts >= max(limit, 1)):
        return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    left = deadline_left(job, now)
    if left is not None and left <= 0:
        return ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
    return None


def is_suspended(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("suspend") is True


def suspension(conditions: Sequence[Mapping[str, Any]], suspended: bool, stamp: str,
               ) -> tuple[list[Object], tuple[str, str] | None]:
    """ensureJobConditionStatus for `Suspended`: the conditions, and the event (reason,
    message) when the Job was just suspended or resumed. A Job never suspended gets no
    condition at all."""
    status, reason, message = (("True", "JobSuspended", "Job suspended") if suspended
                               else ("False", "JobResumed", "Job resumed"))
    found = next((c for c in conditions if c.get("type") == "Suspended"), None)
    unchanged = (found.get("status") == status) if found is not None else not suspended
    if unchanged:
        return [dict(c) for c in conditions], None
    updated = {"type": "Suspended", "status": status, "reason": reason, "message": message,
               "lastProbeTime": stamp, "lastTransitionTime": stamp}
    if found is None:
        return [*map(dict, conditions), updated], ("Suspended", message)
    return ([updated if c is found else dict(c) for c in conditions],
            ("Suspended" if suspended else "Resumed", message))


def wanted_active(job: Mapping[str, Any], succeeded: int) -> int:
    if is_suspended(job):
        return 0
    completions = completions_of(job)
    parallelism = parallelism_of(job)
    if completions is None:
        return 0 if succeeded > 0 else parallelism
    return max(0, min(parallelism, completions - succeeded))


def finished_conditions(kind: str, reason: str, message: str, stamp: str) -> list[Object]:
    """kube 1.31+: SuccessCriteriaMet (or FailureTarget) first, then Complete (or Failed)."""
    interim = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
    return [{"type": t, "status": "True", "reason": reason, "message": message,
             "lastProbeTime": stamp, "lastTransitionTime": stamp} for t in (interim, kind)]


def is_indexed(job: Mapping[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def completion_index(pod: Mapping[str, Any]) -> int | None:
    """The pod's index (its annotation), None when absent or not a number."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    if text is None or not str(text).isdigit():
        return None
    return int(text)


def succeeded_indexes(pods: Sequence[Mapping[str, Any]], completions: int) -> set[int]:
    found = set()
    for pod in pods:
        index = completion_index(pod)
        if phase(pod) == "Succeeded" and index is not None and index < completions:
            found.add(index)
    return found


def format_indexes(indexes: set[int]) -> str:
    """status.completedIndexes: `1,3-5,7`, ascending, runs of three or more... as kube:
    any run of consecutive numbers as `first-last`."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def indexes_to_create(completions: int, succeeded: set[int],
                      active: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """The lowest `count` indexes neither succeeded nor running."""
    running = {completion_index(p) for p in active}
    return [i for i in range(completions) if i not in succeeded and i not in running][:count]


def pod_for(job: Mapping[str, Any], index: int | None = None) -> Object:
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    meta = job.get("metadata") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    spec = template.get("spec") or {}
    name = str(meta.get("name"))
    if index is not None:
        annotations[COMPLETION_INDEX] = str(index)
        labels[COMPLETION_INDEX] = str(index)
        spec.setdefault("hostname", f"{name}-{index}")
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or []:
                env = container.setdefault("env", [])
                if not any(e.get("name") == INDEX_ENV for e in env):
                    env.append({"name": INDEX_ENV, "valueFrom": {"fieldRef": {
                        "apiVersion": "v1", "fieldPath":
                        f"metadata.annotations['{COMPLETION_INDEX}']"}}})
    pod_meta: Object = {"generateName": f"{name}-" if index is None else f"{name}-{index}-",
                        "namespace": meta.get("namespace"), "labels": labels,
                        "ownerReferences": [controller_ref(job, api_version=API_VERSION,
                                                           kind=KIND)]}
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def finished_at(pod: Mapping[str, Any]) -> datetime | None:
    """When a finished pod's last container ended (else its newest condition change)."""
    status = pod.get("status") or {}
    stamps = [((c.get("state") or {}).get("terminated") or {}).get("finishedAt")
              for c in status.get("containerStatuses") or []]
    if not any(stamps):
        stamps = [c.get("lastTransitionTime") for c in status.get("conditions") or []]
    times = [t for t in (parse_time(s) for s in stamps if s) if t is not None]
    return max(times) if times else None


def failure_backoff(pods: Sequence[Mapping[str, Any]], now: datetime) -> float:
    """Seconds new pods still wait after failures (the Job's backoffRecord): 10 s for
    the first failure since the last success, doubled for each further one, at most 6
    minutes, counted from the last failure."""
    last_success = max((t for p in pods if phase(p) == "Succeeded"
                        for t in [finished_at(p)] if t is not None), default=None)
    failures = [finished_at(p) or now for p in pods if phase(p) == "Failed"]
    failures = [t for t in failures if last_success is None or t > last_success]
    if not failures:
        return 0.0
    delay = min(BACKOFF_BASE * 2 ** (len(failures) - 1), BACKOFF_CAP)
    return max(0.0, delay - (now - max(failures)).total_seconds())


def deadline_left(job: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds until activeDeadlineSeconds passes (None without one)."""
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    started = parse_time((job.get("status") or {}).get("startTime"))
    if deadline is None or started is None or is_suspended(job):
        return None
    return int(deadline) - (now - started).total_seconds()


# -- the controller ---------------------------------------------------------------------------


class JobController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=workers, writer=writer)
        self.expectations = Expectations()
        self.pod_control = PodControl(self.writer, recorder, self.expectations,
                                      owner_kind=KIND)
        self.jobs = factory.informer("jobs")
        self.pods = indexed_by_namespace(factory.informer("pods"))
        self.jobs.add_event_handler(on_add=self._job, on_update=lambda _o, new: self._job(new),
                                    on_delete=self._job, name=f"{NAME} jobs")
        self.pods.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                    on_delete=self._pod_deleted, name=f"{NAME} pods")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.jobs, self.pods]

    def _job(self, job: Object) -> None:
        self.queue.add(key_of(job))

    def _owner(self, pod: Mapping[str, Any]) -> str | None:
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != KIND:
            return None
        return f"{(pod.get('metadata') or {}).get('namespace')}/{ref.get('name')}"

    def _pod_added(self, pod: Object) -> None:
        owner = self._owner(pod)
        if owner is not None:
            self.expectations.creation_observed(owner)
            self.queue.add(owner)

    def _pod_updated(self, _old: Object, new: Object) -> None:
        owner = self._owner(new)
        if owner is not None:
            if (new.get("metadata") or {}).get("deletionTimestamp"):
                self.expectations.deletion_observed(owner, str(new["metadata"].get("uid")))
            self.queue.add(owner)

    def _pod_deleted(self, pod: Object) -> None:
        owner = self._owner(pod)
        if owner is not None:
            self.expectations.deletion_observed(owner, str(pod["metadata"].get("uid")))
            self.queue.add(owner)

    async def sync(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None:
            self.expectations.forget(key)
            return
        if finished_condition(job) or job["metadata"].get("deletionTimestamp"):
            return
        uid = job["metadata"].get("uid")
        pods = [p for p in self.pods.by_index(BY_NAMESPACE, str(job["metadata"]["namespace"]))
                if (controller_of(p) or {}).get("uid") == uid]
        active, succeeded, failed = counts(pods)
        completed: set[int] | None = None
        if is_indexed(job):
            completed = succeeded_indexes(pods, completions_of(job) or 0)
            succeeded = len(completed)
        now = datetime.now(UTC)
        status = dict(job.get("status") or {})
        suspended = is_suspended(job)
        if not suspended:
            status.setdefault("startTime", rfc3339(now))
        conditions, suspend_event = suspension(status.get("conditions") or [], suspended,
                                               rfc3339(now))
        if suspend_event is not None:
            status["conditions"] = conditions
            if not suspended:
                status["startTime"] = rfc3339(now)  # the deadline counts from the resume
        if completed is not None:
            status["completedIndexes"] = format_indexes(completed)
        done = outcome({**job, "status": status}, succeeded, failed, len(active), now,
                       restarts_on_failure(job, active))
        if done is not None:
            kind, reason, message = done
            await self.pod_control.delete(job, key, active, expect=False)
            stamp = rfc3339(now)
            status.update(active=0, succeeded=succeeded, failed=failed,
                          conditions=[*(status.get("conditions") or []),
                                      *finished_conditions(kind, reason, message, stamp)])
            if kind == "Complete":
                status["completionTime"] = stamp
            status.pop("ready", None)
            await self._write(job, status)
            log.info("job %s: %s (%s): %d succeeded, %d failed", key, kind, reason,
                     succeeded, failed)
            if kind == "Complete":
                await self.recorder.event(job, "Normal", "Completed", "Job completed")
            else:
                await self.recorder.event(job, "Warning", reason, message)
            return
        left = deadline_left({**job, "status": status}, now)
        if left is not None:
            self.queue.add_after(key, left)
        if self.expectations.satisfied(key):
            diff = wanted_active(job, succeeded) - len(active)
            wait = failure_backoff(pods, now) if diff > 0 else 0.0
            if wait > 0:
                log.info("job %s: %d failed pod(s): next pod in %.1fs (back-off)", key,
                         failed, wait)
                self.queue.add_after(key, wait)
            elif diff > 0:
                log.info("job %s: %d active, %d succeeded: creating %d pod(s)", key,
                         len(active), succeeded, diff)
                new = ([pod_for(job) for _ in range(diff)] if completed is None else
                       [pod_for(job, i) for i in indexes_to_create(
                           completions_of(job) or 0, completed, active, diff)])
                await self.pod_control.create(job, key, new)
            elif diff < 0:
                victims = pods_to_delete([dict(p) for p in active], -diff)
                await self.pod_control.delete(job, key, victims)
        ready = sum(1 for p in active if any(c.get("type") == "Ready" and c.get("status") ==
                                             "True" for c in (p.get("status") or {}).get(
                                                 "conditions") or []))
        status.update(active=len(active), succeeded=succeeded, failed=failed, ready=ready)
        written = status == (job.get("status") or {}) or await self._write(job, status)
        if suspend_event is not None and written:
            # once the condition is stored: a write refused (409) is synced again, and
            # that sync tells it, not this one (no event twice)
            reason, message = suspend_event
            log.info("job %s: %s", key, message.lower())
            await self.recorder.event(job, "Normal", reason, message)

    async def _write(self, job: Object, status: Object) -> bool:
        """The status written (False: the job is gone, or changed meanwhile and queued)."""
        try:
            await self.client.update_status("jobs", {**job, "status": status})
        except NotFound:
            return False
        except Conflict:
            self.queue.add(key_of(job))
            return False
        return True
