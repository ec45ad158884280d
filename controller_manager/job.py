"""The Job controller (pkg/controller/job), its core: run pods from the template until
`completions` of them succeeded, at most `parallelism` at a time, and give up after
`backoffLimit` failed pods or `activeDeadlineSeconds`.

One sync: count the Job's pods (active, succeeded, failed); when it is finished, mark it
(`Complete` with `SuccessCriteriaMet`, or `Failed` with `FailureTarget`, in kube's words)
and delete what still runs; else create or delete pods to have
min(parallelism, completions - succeeded) active, with expectations as the ReplicaSet
controller. Events: `SuccessfulCreate`, `SuccessfulDelete`, `Completed`,
`BackoffLimitExceeded`, `DeadlineExceeded`.

Not done: the job-tracking finalizer on pods (counts come from the pods that exist, so a
pod deleted by hand before it was counted is not counted), indexed completion,
podFailurePolicy, successPolicy, suspend, ttlSecondsAfterFinished, the exponential
back-off between failed pods.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from common.timestamps import rfc3339
from controller_manager.controller import QueueController, key_of
from controller_manager.podcontrol import PodControl
from controller_manager.pods import Expectations, controller_of, controller_ref, pods_to_delete

log = logging.getLogger("controller_manager.job")

NAME = "job-controller"
API_VERSION = "batch/v1"
KIND = "Job"
Object = dict[str, Any]


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


def outcome(job: Mapping[str, Any], succeeded: int, failed: int, active: int,
            now: datetime) -> tuple[str, str, str] | None:
    """(condition, reason, message) when the Job is finished now, else None."""
    completions = completions_of(job)
    if completions is None:
        # No completions: done once one pod succeeded and none still runs.
        if succeeded > 0 and active == 0:
            return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
    elif succeeded >= completions:
        return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
    limit = (job.get("spec") or {}).get("backoffLimit")
    if failed > (6 if limit is None else int(limit)):
        return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    started = (job.get("status") or {}).get("startTime")
    if deadline is not None and started:
        begun = datetime.fromisoformat(str(started).replace("Z", "+00:00"))
        if (now - begun).total_seconds() >= int(deadline):
            return ("Failed", "DeadlineExceeded",
                    "Job was active longer than specified deadline")
    return None


def wanted_active(job: Mapping[str, Any], succeeded: int) -> int:
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


def pod_for(job: Mapping[str, Any]) -> Object:
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    meta = job.get("metadata") or {}
    pod_meta: Object = {"generateName": f"{meta.get('name')}-",
                        "namespace": meta.get("namespace"),
                        "labels": (template.get("metadata") or {}).get("labels") or {},
                        "ownerReferences": [controller_ref(job, api_version=API_VERSION,
                                                           kind=KIND)]}
    annotations = (template.get("metadata") or {}).get("annotations")
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": template.get("spec") or {}}


# -- the controller ---------------------------------------------------------------------------


class JobController(QueueController):
    name = NAME

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 5) -> None:
        super().__init__(factory, recorder, workers=workers)
        self.expectations = Expectations()
        self.pod_control = PodControl(self.client, recorder, self.expectations,
                                      owner_kind=KIND)
        self.jobs = factory.informer("jobs")
        self.pods = factory.informer("pods")
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
        pods = [p for p in self.pods.list() if (controller_of(p) or {}).get("uid") == uid]
        active, succeeded, failed = counts(pods)
        now = datetime.now(UTC)
        status = dict(job.get("status") or {})
        status.setdefault("startTime", rfc3339(now))
        done = outcome({**job, "status": status}, succeeded, failed, len(active), now)
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
        if self.expectations.satisfied(key):
            diff = wanted_active(job, succeeded) - len(active)
            if diff > 0:
                log.info("job %s: %d active, %d succeeded: creating %d pod(s)", key,
                         len(active), succeeded, diff)
                await self.pod_control.create(job, key, [pod_for(job) for _ in range(diff)])
            elif diff < 0:
                victims = pods_to_delete([dict(p) for p in active], -diff)
                await self.pod_control.delete(job, key, victims)
        ready = sum(1 for p in active if any(c.get("type") == "Ready" and c.get("status") ==
                                             "True" for c in (p.get("status") or {}).get(
                                                 "conditions") or []))
        status.update(active=len(active), succeeded=succeeded, failed=failed, ready=ready)
        if status != (job.get("status") or {}):
            await self._write(job, status)

    async def _write(self, job: Object, status: Object) -> None:
        try:
            await self.client.update_status("jobs", {**job, "status": status})
        except NotFound:
            return
        except Conflict:
            self.queue.add(key_of(job))
