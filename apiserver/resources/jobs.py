"""Jobs (batch/v1): the strategy of pkg/registry/batch/job (SetDefaults_Job, the generated
selector, ValidateJob/ValidateJobUpdate, the Table of printJob), as one `Resource` with the
status subresource. batch/v1 Jobs orphan their pods on a DELETE that names no propagation
policy (kube's DefaultGarbageCollectionPolicy, kept for compatibility), with kube's warning."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.resources.workloads import (
    CONTAINERS_DOC,
    IMAGES_DOC,
    default_template,
    go_selector,
    nonnegative,
    selector_is_empty,
    selector_matches,
    template_cells,
    template_merge_keys,
    validate_label_selector,
    validate_selector_immutable,
    validate_template,
)
from apiserver.tables import (
    CREATION_TIMESTAMP_DOC,
    NAME_DOC,
    column,
    format_age,
    human_duration,
    parse_time,
)
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    Cause,
    GoPrinted,
    invalid,
    name_is_dns_subdomain,
    not_supported,
    required,
    validate_object_meta,
)
from common.models import Job

BATCH_GROUP = "batch"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
COMPLETION_MODES = ("NonIndexed", "Indexed")
RESTART_POLICIES = ("OnFailure", "Never")
POD_REPLACEMENT_POLICIES = ("TerminatingOrFailed", "Failed")
DEFAULT_BACKOFF_LIMIT = 6
MAX_INT32 = 2**31 - 1
DELETE_WARNING = ("child pods are preserved by default when jobs are deleted; set "
                  "propagationPolicy=Background to remove them or set propagationPolicy=Orphan "
                  "to suppress this warning")


# --- defaults (batch/v1 SetDefaults_Job, the strategy's generateSelector) ----------------------

def default_job(job: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = (MAX_INT32 if spec.get("backoffLimitPerIndex") is not None
                                else DEFAULT_BACKOFF_LIMIT)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy",
                    "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    default_template(spec)
    if old is None and not spec.get("manualSelector"):
        generate_selector(job)
    meta = job.setdefault("metadata", {})
    template_labels = (spec["template"].get("metadata") or {}).get("labels")
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)


def generate_selector(job: dict[str, Any]) -> None:
    """generateSelector: the template gets the job-name and controller-uid labels (unless the
    user set them: validation then refuses a wrong one) and the selector selects the uid."""
    meta = job.get("metadata") or {}
    spec = job["spec"]
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, meta.get("name") or "")
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, meta.get("uid") or "")
    selector = spec.get("selector") or {}
    match = selector.get("matchLabels") or {}
    match.setdefault(CONTROLLER_UID_LABEL, meta.get("uid") or "")
    spec["selector"] = {**selector, "matchLabels": match}


# --- validation (ValidateJob, ValidateJobUpdate) ---------------------------------------------

def validate_job(job: dict[str, Any]) -> list[Cause]:
    errs = validate_object_meta(job.get("metadata") or {}, namespaced=True,
                                name_check=name_is_dns_subdomain)
    errs += validate_generated_selector(job)
    return errs + validate_job_spec(job.get("spec") or {})


def validate_generated_selector(job: dict[str, Any]) -> list[Cause]:
    """ValidateGeneratedSelector: without manualSelector the selector is the generated one."""
    spec = job.get("spec") or {}
    if spec.get("manualSelector"):
        return []
    uid = (job.get("metadata") or {}).get("uid") or ""
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    errs = []
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            errs.append(required(path, f"must be '{uid}'"))
        elif labels[key] != uid:
            errs.append(invalid(path, labels[key], f"must be '{uid}'"))
    selector = spec.get("selector")
    if selector is None:
        errs.append(required("spec.selector", ""))
    elif not selector_matches(selector, {CONTROLLER_UID_LABEL: uid}):
        errs.append(invalid("spec.selector", go_selector(selector),
                            "`selector` not auto-generated"))
    return errs


def validate_job_spec(spec: dict[str, Any]) -> list[Cause]:
    errs: list[Cause] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                "ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"):
        errs += nonnegative(spec, key)
    mode = spec.get("completionMode")
    if mode is not None and mode not in COMPLETION_MODES:
        errs.append(not_supported("spec.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        errs.append(required("spec.completions", "when completion mode is Indexed"))
    policy = spec.get("podReplacementPolicy")
    if policy is not None and policy not in POD_REPLACEMENT_POLICIES:
        errs.append(not_supported("spec.podReplacementPolicy", policy,
                                  POD_REPLACEMENT_POLICIES))
    selector = spec.get("selector")
    if selector is None:
        errs.append(required("spec.selector", ""))
    else:
        errs += validate_label_selector(selector, "spec.selector")
    if selector is not None and selector_is_empty(selector):
        errs.append(invalid("spec.selector", go_selector(selector),
                            "empty selector is invalid for job"))
    return errs + validate_template(spec, restart_policies=RESTART_POLICIES)


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    """ValidateJobSpecUpdate: selector, template, completion mode and the failure policies
    are fixed at create."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs = validate_job_spec(new_spec) + validate_selector_immutable(new, old)
    if new_spec.get("template") != old_spec.get("template"):
        errs.append(invalid("spec.template", GoPrinted("core.PodTemplateSpec{...}"),
                            FIELD_IMMUTABLE_MSG))
    for key in ("completions", "completionMode", "podFailurePolicy", "backoffLimitPerIndex",
                "managedBy", "successPolicy"):
        if new_spec.get(key) != old_spec.get(key):
            if key == "completions" and elastic_indexed(new_spec, old_spec):
                continue
            errs.append(invalid(f"spec.{key}", new_spec.get(key), FIELD_IMMUTABLE_MSG))
    return errs


def elastic_indexed(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> bool:
    """An Indexed job may change completions together with parallelism (elastic jobs)."""
    return (new_spec.get("completionMode") == "Indexed"
            and new_spec.get("completions") == new_spec.get("parallelism")
            and old_spec.get("completions") == old_spec.get("parallelism"))


# --- the Table (printJob) --------------------------------------------------------------------

SUCCEEDED_DOC = ("The number of pods which reached phase Succeeded. The value increases "
                 "monotonically for a given spec. However, it may decrease in reaction to "
                 "scale down of elastic indexed jobs.")
SELECTOR_DOC = ("A label query over pods that should match the pod count. Normally, the system "
                "sets this field for you. More info: https://kubernetes.io/docs/concepts/"
                "overview/working-with-objects/labels/#label-selectors")
COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Status", "Status of the job."),
    column("Completions", SUCCEEDED_DOC),
    column("Duration", "Time required to complete the job."),
    column("Age", CREATION_TIMESTAMP_DOC),
    column("Containers", CONTAINERS_DOC, priority=1),
    column("Images", IMAGES_DOC, priority=1),
    column("Selector", SELECTOR_DOC, priority=1),
]
# printJob's order: the first condition that is True names the status.
STATUS_CONDITIONS = (("Complete", "Complete"), ("Failed", "Failed"))
LATER_CONDITIONS = (("Suspended", "Suspended"), ("FailureTarget", "FailureTarget"),
                    ("SuccessCriteriaMet", "SuccessCriteriaMet"))


def has_condition(job: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def job_status(job: dict[str, Any]) -> str:
    for kind, text in STATUS_CONDITIONS:
        if has_condition(job, kind):
            return text
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for kind, text in LATER_CONDITIONS:
        if has_condition(job, kind):
            return text
    return "Running"


def job_completions(job: dict[str, Any]) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = spec.get("parallelism") or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(job: dict[str, Any], now: datetime) -> str:
    status = job.get("status") or {}
    started = parse_time(status.get("startTime"))
    if started is None:
        return ""
    finished = parse_time(status.get("completionTime")) or now
    return human_duration((finished - started).total_seconds())


def job_cells(job: dict[str, Any], now: datetime) -> list[Any]:
    metadata = job.get("metadata") or {}
    return [metadata.get("name", ""), job_status(job), job_completions(job),
            job_duration(job, now), format_age(metadata.get("creationTimestamp"), now),
            *template_cells(job.get("spec") or {})]


JOBS = Resource(
    plural="jobs", singular="job", kind="Job", namespaced=True, model=Job,
    storage_name="jobs", group=BATCH_GROUP, subresources=frozenset({"status"}),
    categories=("all",),
    descriptions={"Job": "Job represents the configuration of a single job.",
                  "JobSpec": "JobSpec describes how the job execution will look like."},
    default=default_job, validate=validate_job, validate_update=validate_update,
    gc_policy="Orphan", gc_default_warning=DELETE_WARNING,
    columns=COLUMNS, cells=job_cells,
    merge_keys={**template_merge_keys(), "status.conditions": "type"},
)
