"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding, as
pkg/registry/rbac and pkg/apis/rbac/validation have them (defaults of SetDefaults_Subject and
SetDefaults_*Binding, ValidatePolicyRule, ValidateRoleBindingSubject, roleRef immutable) and
with the Tables of printers.go. Who may write them (the escalation check) is
apiserver/auth/escalation.py's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from apiserver.resources.base import Resource
from apiserver.tables import CREATION_TIMESTAMP_DOC, NAME_DOC, column, format_age
from apiserver.validation import (
    Cause,
    invalid,
    is_dns1123_subdomain,
    not_supported,
    path_segment_name,
    required,
    validate_object_meta,
)
from common.models import ClusterRole, ClusterRoleBinding, Role, RoleBinding

RBAC_GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")
Object = dict[str, Any]


# --- defaults ---------------------------------------------------------------------------------

def default_binding(binding: Object, old: Object | None) -> None:
    """SetDefaults_RoleBinding / _ClusterRoleBinding / _Subject."""
    role_ref = binding.get("roleRef")
    if isinstance(role_ref, dict) and not role_ref.get("apiGroup"):
        role_ref["apiGroup"] = RBAC_GROUP
    for subject in binding.get("subjects") or []:
        if not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = RBAC_GROUP


# --- validation -------------------------------------------------------------------------------

def validate_policy_rule(rule: Object, *, namespaced: bool, path: str) -> list[Cause]:
    """ValidatePolicyRule."""
    errs = []
    if not rule.get("verbs"):
        errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        if namespaced:
            errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                "namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                "rules cannot apply to both regular resources and non-resource "
                                "URLs"))
        return errs
    if not rule.get("apiGroups"):
        errs.append(required(f"{path}.apiGroups",
                             "resource rules must supply at least one api group"))
    if not rule.get("resources"):
        errs.append(required(f"{path}.resources",
                             "resource rules must supply at least one resource"))
    return errs


def validate_rules(obj: Object, *, namespaced: bool) -> list[Cause]:
    errs = []
    for i, rule in enumerate(obj.get("rules") or []):
        errs += validate_policy_rule(rule, namespaced=namespaced, path=f"rules[{i}]")
    return errs


def rbac_meta(obj: Object, *, namespaced: bool) -> list[Cause]:
    """ValidateObjectMeta with ValidateRBACName (a path segment name)."""
    return validate_object_meta(obj.get("metadata") or {}, namespaced=namespaced,
                                name_check=path_segment_name)


def validate_role(role: Object) -> list[Cause]:
    return rbac_meta(role, namespaced=True) + validate_rules(role, namespaced=True)


def validate_cluster_role(role: Object) -> list[Cause]:
    errs = rbac_meta(role, namespaced=False) + validate_rules(role, namespaced=False)
    aggregation = role.get("aggregationRule")
    if aggregation is not None and not aggregation.get("clusterRoleSelectors"):
        errs.append(required("aggregationRule.clusterRoleSelectors",
                             "at least one clusterRoleSelector required if aggregationRule is "
                             "non-nil"))
    return errs


def validate_role_update(new: Object, old: Object) -> list[Cause]:
    return validate_role(new)


def validate_cluster_role_update(new: Object, old: Object) -> list[Cause]:
    return validate_cluster_role(new)


def validate_subject(subject: Object, *, namespaced: bool, path: str) -> list[Cause]:
    """ValidateRoleBindingSubject."""
    errs = []
    name = subject.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name"))
    kind = subject.get("kind") or ""
    group = subject.get("apiGroup") or ""
    if kind == "ServiceAccount":
        if name:
            errs += [invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(name)]
        if group:
            errs.append(not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not subject.get("namespace"):
            errs.append(required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != RBAC_GROUP:
            errs.append(not_supported(f"{path}.apiGroup", group, [RBAC_GROUP]))
    else:
        errs.append(not_supported(f"{path}.kind", kind, SUBJECT_KINDS))
    return errs


def validate_binding(binding: Object, *, namespaced: bool) -> list[Cause]:
    """ValidateRoleBinding / ValidateClusterRoleBinding."""
    errs = rbac_meta(binding, namespaced=namespaced)
    role_ref = binding.get("roleRef") or {}
    if role_ref.get("apiGroup", "") != RBAC_GROUP:
        errs.append(not_supported("roleRef.apiGroup", role_ref.get("apiGroup", ""), [RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if role_ref.get("kind", "") not in kinds:
        errs.append(not_supported("roleRef.kind", role_ref.get("kind", ""), kinds))
    name = role_ref.get("name") or ""
    if not name:
        errs.append(required("roleRef.name"))
    else:
        errs += [invalid("roleRef.name", name, m) for m in path_segment_name(name, False)]
    for i, subject in enumerate(binding.get("subjects") or []):
        errs += validate_subject(subject, namespaced=namespaced, path=f"subjects[{i}]")
    return errs


def binding_update_validator(namespaced: bool) -> Callable[[Object, Object], list[Cause]]:
    def validate_update(new: Object, old: Object) -> list[Cause]:
        errs = validate_binding(new, namespaced=namespaced)
        if (new.get("roleRef") or {}) != (old.get("roleRef") or {}):
            errs.append(invalid("roleRef", new.get("roleRef") or {}, "cannot change roleRef"))
        return errs

    return validate_update


# --- Tables -----------------------------------------------------------------------------------

ROLE_COLUMNS = [
    column("Name", NAME_DOC, format_="name"),
    column("Created At", CREATION_TIMESTAMP_DOC, type_="date"),
]
ROLE_REF_DOC = ("RoleRef can reference a Role in the current namespace or a ClusterRole in the "
                "global namespace. If the RoleRef cannot be resolved, the Authorizer must return "
                "an error. This field is immutable.")
CLUSTER_ROLE_REF_DOC = ("RoleRef can only reference a ClusterRole in the global namespace. If "
                        "the RoleRef cannot be resolved, the Authorizer must return an error. "
                        "This field is immutable.")


def binding_columns(kind: str, role_ref_doc: str) -> list[dict[str, Any]]:
    return [
        column("Name", NAME_DOC, format_="name"),
        column("Role", role_ref_doc),
        column("Age", CREATION_TIMESTAMP_DOC),
        column("Users", f"Users in the {kind}", priority=1),
        column("Groups", f"Groups in the {kind}", priority=1),
        column("ServiceAccounts", f"ServiceAccounts in the {kind}", priority=1),
    ]


def role_cells(role: Object, now: datetime) -> list[Any]:
    """printRole: the creation time as RFC 3339, not an age."""
    metadata = role.get("metadata") or {}
    return [metadata.get("name", ""), metadata.get("creationTimestamp") or ""]


def subjects_strings(subjects: list[Object]) -> tuple[list[str], list[str], list[str]]:
    """rbac.SubjectsStrings: users, groups, and service accounts as `namespace/name`."""
    users, groups, service_accounts = [], [], []
    for subject in subjects:
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            service_accounts.append(f"{subject.get('namespace', '')}/{name}")
    return users, groups, service_accounts


def binding_cells(binding: Object, now: datetime) -> list[Any]:
    metadata = binding.get("metadata") or {}
    role_ref = binding.get("roleRef") or {}
    users, groups, service_accounts = subjects_strings(binding.get("subjects") or [])
    return [metadata.get("name", ""), f"{role_ref.get('kind', '')}/{role_ref.get('name', '')}",
            format_age(metadata.get("creationTimestamp"), now),
            ", ".join(users), ", ".join(groups), ", ".join(service_accounts)]


ROLES = Resource(
    plural="roles", singular="role", kind="Role", namespaced=True, model=Role,
    storage_name="roles", group=RBAC_GROUP,
    descriptions={"Role": "Role is a namespaced, logical grouping of PolicyRules that can be "
                          "referenced as a unit by a RoleBinding."},
    validate=validate_role, validate_update=validate_role_update, tracks_generation=False,
    columns=ROLE_COLUMNS, cells=role_cells,
)

CLUSTER_ROLES = Resource(
    plural="clusterroles", singular="clusterrole", kind="ClusterRole", namespaced=False,
    model=ClusterRole, storage_name="clusterroles", group=RBAC_GROUP,
    descriptions={"ClusterRole": "ClusterRole is a cluster level, logical grouping of "
                                 "PolicyRules that can be referenced as a unit by a RoleBinding "
                                 "or ClusterRoleBinding."},
    validate=validate_cluster_role, validate_update=validate_cluster_role_update,
    tracks_generation=False, columns=ROLE_COLUMNS, cells=role_cells,
)

ROLE_BINDINGS = Resource(
    plural="rolebindings", singular="rolebinding", kind="RoleBinding", namespaced=True,
    model=RoleBinding, storage_name="rolebindings", group=RBAC_GROUP,
    descriptions={"RoleBinding": "RoleBinding references a role, but does not contain it.  It "
                                 "can reference a Role in the same namespace or a ClusterRole in "
                                 "the global namespace. It adds who information via Subjects "
                                 "and namespace information by which namespace it exists in.  "
                                 "RoleBindings in a given namespace only have effect in that "
                                 "namespace."},
    default=default_binding,
    validate=lambda obj: validate_binding(obj, namespaced=True),
    validate_update=binding_update_validator(True), tracks_generation=False,
    columns=binding_columns("roleBinding", ROLE_REF_DOC), cells=binding_cells,
)

CLUSTER_ROLE_BINDINGS = Resource(
    plural="clusterrolebindings", singular="clusterrolebinding", kind="ClusterRoleBinding",
    namespaced=False, model=ClusterRoleBinding, storage_name="clusterrolebindings",
    group=RBAC_GROUP,
    descriptions={"ClusterRoleBinding": "ClusterRoleBinding references a ClusterRole, but not "
                                        "contain it.  It can reference a ClusterRole in the "
                                        "global namespace, and adds who information via "
                                        "Subject."},
    default=default_binding,
    validate=lambda obj: validate_binding(obj, namespaced=False),
    validate_update=binding_update_validator(False), tracks_generation=False,
    columns=binding_columns("clusterRoleBinding", CLUSTER_ROLE_REF_DOC), cells=binding_cells,
)
