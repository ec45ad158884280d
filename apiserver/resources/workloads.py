"""What the workload kinds (apps/v1 Deployments and ReplicaSets, batch/v1 Jobs) share: the
metav1.LabelSelector (validated, matched, printed), the pod template (defaulted and validated
like a pod's spec), the scale subresource (autoscaling/v1 Scale) and the Table cells of the
template. Pure functions; each kind's module (deployments.py, replicasets.py, jobs.py) uses
them as kube's apps and batch validation do (pkg/apis/apps/validation,
pkg/apis/batch/validation, pkg/registry/apps/*/storage's ScaleREST).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from apiserver.resources.pod_validation import validate_pod_spec
from apiserver.resources.pods import MERGE_KEYS as POD_MERGE_KEYS
from apiserver.resources.pods import default_pod
from apiserver.tables import NONE
from apiserver.validation import (
    FIELD_IMMUTABLE_MSG,
    IS_NEGATIVE_MSG,
    Cause,
    GoPrinted,
    forbidden,
    go_quote,
    invalid,
    is_qualified_name,
    not_supported,
    required,
    validate_annotations,
    validate_labels,
)

Object = dict[str, Any]

# metav1.LabelSelectorOperator
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
CONTAINERS_DOC = "Names of each container in the template."
IMAGES_DOC = "Images referenced by each container in the template."


# --- metav1.LabelSelector --------------------------------------------------------------------

def validate_label_selector(selector: Mapping[str, Any], path: str) -> list[Cause]:
    """ValidateLabelSelector: each expression's operator and values, and the match labels."""
    errs: list[Cause] = []
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        at = f"{path}.matchExpressions[{i}]"
        operator, values = expr.get("operator") or "", expr.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{at}.values",
                                     "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{at}.values", "may not be specified when `operator` "
                                                      "is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{at}.operator", operator, "not a valid selector operator"))
        key = expr.get("key") or ""
        errs += [invalid(f"{at}.key", key, m) for m in is_qualified_name(key)]
    return errs + validate_labels(selector.get("matchLabels") or {}, f"{path}.matchLabels")


def selector_is_empty(selector: Mapping[str, Any]) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str] | None) -> bool:
    """LabelSelectorAsSelector(selector).Matches(labels); an empty selector matches all."""
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def format_selector(selector: Mapping[str, Any] | None) -> str:
    """LabelSelectorAsSelector(selector).String(): requirements sorted by key, "" for none."""
    selector = selector or {}
    terms = [(key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, operator = expr.get("key", ""), expr.get("operator")
        values = ",".join(sorted(set(expr.get("values") or [])))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(operator or "", key)
        terms.append((key, text))
    return ",".join(text for _, text in sorted(terms, key=lambda term: term[0]))


def go_selector(selector: Mapping[str, Any] | None) -> GoPrinted | None:
    """A *metav1.LabelSelector as field.Invalid prints it (%#v of the struct)."""
    if selector is None:
        return None
    labels = selector.get("matchLabels")
    labels_text = ("map[string]string(nil)" if labels is None else "map[string]string{"
                   + ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in sorted(labels.items()))
                   + "}")
    exprs = selector.get("matchExpressions")
    if exprs is None:
        exprs_text = "[]v1.LabelSelectorRequirement(nil)"
    else:
        exprs_text = "[]v1.LabelSelectorRequirement{" + ", ".join(
            f"v1.LabelSelectorRequirement{{Key:{go_quote(e.get('key') or '')}, "
            f"Operator:{go_quote(e.get('operator') or '')}, Values:[]string{{"
            + ", ".join(go_quote(v) for v in e.get("values") or []) + "}}" for e in exprs) + "}"
    return GoPrinted(f"v1.LabelSelector{{MatchLabels:{labels_text}, "
                     f"MatchExpressions:{exprs_text}}}")


def go_labels(labels: Mapping[str, str] | None) -> GoPrinted:
    if labels is None:
        return GoPrinted("map[string]string(nil)")
    return GoPrinted("map[string]string{" + ", ".join(
        f"{go_quote(k)}:{go_quote(v)}" for k, v in sorted(labels.items())) + "}")


def validate_selector_immutable(new: Object, old: Object) -> list[Cause]:
    """apps/v1 and batch/v1: spec.selector cannot change after create."""
    new_selector = (new.get("spec") or {}).get("selector")
    if new_selector != (old.get("spec") or {}).get("selector"):
        return [invalid("spec.selector", go_selector(new_selector), FIELD_IMMUTABLE_MSG)]
    return []


# --- the pod template ------------------------------------------------------------------------

def default_template(spec: Object) -> None:
    """SetDefaults_PodSpec (and its containers') on `spec.template.spec`, in place: what a
    pod gets at decode, without SetDefaults_Pod's pod-only additions (enableServiceLinks)."""
    template = spec.setdefault("template", {})
    pod = {"spec": template.get("spec") or {}}
    default_pod(pod, {})  # an update's defaults: no priority, no status
    pod["spec"].pop("enableServiceLinks", None)
    template["spec"] = pod["spec"]


def validate_template(spec: Object, *, restart_policies: tuple[str, ...],
                      path: str = "spec") -> list[Cause]:
    """ValidatePodTemplateSpecForReplicaSet / the Job's template rules: the selector selects
    the template's labels, the template is a valid pod spec, and its restartPolicy is one of
    `restart_policies`. The selector itself was checked by the caller."""
    errs: list[Cause] = []
    template = spec.get("template")
    at = f"{path}.template"
    if template is None:
        return [required(at, "")]
    meta = template.get("metadata") or {}
    labels = meta.get("labels")
    selector = spec.get("selector")
    if selector and not selector_is_empty(selector) and not selector_matches(selector, labels):
        errs.append(invalid(f"{at}.metadata.labels", go_labels(labels),
                            "`selector` does not match template `labels`"))
    errs += validate_labels(labels or {}, f"{at}.metadata.labels")
    errs += validate_annotations(meta.get("annotations") or {}, f"{at}.metadata.annotations")
    pod_spec = template.get("spec") or {}
    errs += validate_pod_spec(pod_spec, f"{at}.spec")
    if pod_spec.get("ephemeralContainers"):
        errs.append(forbidden(f"{at}.spec.ephemeralContainers",
                              "ephemeral containers not allowed in pod template"))
    policy = pod_spec.get("restartPolicy")
    if policy and policy not in restart_policies:
        errs = [e for e in errs if e["field"] != f"{at}.spec.restartPolicy"]
        errs.append(not_supported(f"{at}.spec.restartPolicy", policy, restart_policies))
    return errs


def validate_selector_and_template(spec: Object, *, kind_word: str,
                                   restart_policies: tuple[str, ...]) -> list[Cause]:
    """ValidateDeploymentSpec/ValidateReplicaSetSpec's selector and template part."""
    errs: list[Cause] = []
    selector = spec.get("selector")
    if selector is None:
        errs.append(required("spec.selector", ""))
    else:
        selector_errs = validate_label_selector(selector, "spec.selector")
        errs += selector_errs
        if selector_is_empty(selector):
            errs.append(invalid("spec.selector", go_selector(selector),
                                f"empty selector is invalid for {kind_word}"))
        if selector_errs:  # LabelSelectorAsSelector failed: the template is not checked
            return [*errs, invalid("spec.selector", go_selector(selector),
                                   "invalid label selector")]
    return errs + validate_template(spec, restart_policies=restart_policies)


def nonnegative(spec: Object, key: str, path: str = "spec") -> list[Cause]:
    value = spec.get(key)
    if value is not None and value < 0:
        return [invalid(f"{path}.{key}", value, IS_NEGATIVE_MSG)]
    return []


def template_merge_keys() -> dict[str, str | None]:
    """core/v1's patch strategies inside `spec.template` (a pod's `spec.*` lists)."""
    return {f"spec.template.{path}": key for path, key in POD_MERGE_KEYS.items()
            if path.startswith("spec.")}


# --- Table cells shared by the workloads ------------------------------------------------------

def template_cells(spec: Object) -> list[str]:
    """The wide cells: the template's container names, images, and the selector."""
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = format_selector(spec.get("selector"))
    return [",".join(c.get("name") or "" for c in containers),
            ",".join(c.get("image") or "" for c in containers), selector or NONE]


# --- the scale subresource (autoscaling/v1 Scale) ----------------------------------------------

SCALE_GROUP_VERSION = "autoscaling/v1"


def scale_of(obj: Object) -> Object:
    """scaleFromDeployment / scaleFromReplicaSet: the object's replicas as a Scale."""
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scale_meta = {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                             "creationTimestamp") if key in meta}
    return {"kind": "Scale", "apiVersion": SCALE_GROUP_VERSION, "metadata": scale_meta,
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": format_selector(spec.get("selector"))}}


def validate_scale(scale: Object) -> list[Cause]:
    """ValidateScale: replicas not negative."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if replicas is not None and replicas < 0:
        return [invalid("spec.replicas", replicas, IS_NEGATIVE_MSG)]
    return []


def with_replicas(obj: Object, replicas: int) -> Object:
    """The object with spec.replicas replaced (what a Scale update changes, nothing else)."""
    out = copy.copy(obj)
    out["spec"] = {**(obj.get("spec") or {}), "replicas": replicas}
    return out


# --- intstr.IntOrString ----------------------------------------------------------------------

_PERCENT = re.compile(r"[0-9]+%")


def int_or_percent_value(value: int | str | None) -> int:
    """getIntOrPercentValue: the number, or the percentage's number (0 when unparsable)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return int(value[:-1])
    return 0


def validate_positive_int_or_percent(value: int | str | None, path: str) -> list[Cause]:
    """ValidatePositiveIntOrPercent."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    elif isinstance(value, int) and value < 0:
        return [invalid(path, value, IS_NEGATIVE_MSG)]
    return []


def not_more_than_100_percent(value: int | str | None, path: str) -> list[Cause]:
    """IsNotMoreThan100Percent: only a percentage is checked."""
    if isinstance(value, str) and _PERCENT.fullmatch(value) and int(value[:-1]) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []
