"""You cannot grant what you do not hold: kube's escalation check on writes of Roles,
ClusterRoles and their bindings (pkg/registry/rbac/escalation_check.go, role/policybased,
rolebinding/policybased; pkg/registry/rbac/validation/policy_comparator.go Covers and
rule.go ConfirmNoEscalation).

A Role or ClusterRole may be written by a user who holds every permission in it, or who may
`escalate` on it; a binding by a user who holds every permission of the role it refers to,
or who may `bind` that role. Members of system:masters may always (kube-apiserver uses that
group for its own loopback client).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from apiserver.auth import Attributes, Authorizer, Decision, UserInfo
from apiserver.auth.rbac import Rule

SYSTEM_MASTERS = "system:masters"
RBAC_GROUP = "rbac.authorization.k8s.io"


# --- Covers ------------------------------------------------------------------------------------

def breakdown_rule(rule: Rule) -> list[dict[str, list[str]]]:
    """BreakdownRule: one rule per group, resource, name and verb (or per URL and verb)."""
    out: list[dict[str, list[str]]] = []
    verbs = list(rule.get("verbs") or [])
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            names = list(rule.get("resourceNames") or [])
            for name in names or [None]:
                for verb in verbs:
                    broken: dict[str, list[str]] = {"apiGroups": [group], "resources": [resource],
                                                    "verbs": [verb]}
                    if name is not None:
                        broken["resourceNames"] = [name]
                    out.append(broken)
    for url in rule.get("nonResourceURLs") or []:
        out += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return out


def _resource_covers_all(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    if "*" in owned or all(r in owned for r in wanted):
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource or f"*/{resource.split('/', 1)[1]}" not in owned:
            return False
    return True


def _url_covers(owned: str, wanted: str) -> bool:
    return owned == wanted or (owned.endswith("*") and wanted.startswith(owned.rstrip("*")))


def rule_covers(owner: Rule, wanted: Rule) -> bool:
    """ruleCovers: `owner` allows everything `wanted` does (wanted broken down)."""
    owner_verbs = owner.get("verbs") or []
    if "*" not in owner_verbs and not all(v in owner_verbs for v in wanted.get("verbs") or []):
        return False
    owner_groups = owner.get("apiGroups") or []
    if "*" not in owner_groups and not all(g in owner_groups for g in wanted.get("apiGroups") or []):
        return False
    if not _resource_covers_all(owner.get("resources") or [], wanted.get("resources") or []):
        return False
    owner_urls = owner.get("nonResourceURLs") or []
    if not all(any(_url_covers(o, w) for o in owner_urls)
               for w in wanted.get("nonResourceURLs") or []):
        return False
    owner_names = owner.get("resourceNames") or []
    wanted_names = wanted.get("resourceNames") or []
    if not wanted_names:  # all names: only an owner rule for all names covers it
        return not owner_names
    return not owner_names or all(n in owner_names for n in wanted_names)


def covers(owned: Sequence[Rule], wanted: Sequence[Rule]) -> tuple[bool, list[dict[str, Any]]]:
    """Covers: whether `owned` allows all of `wanted`, and the broken-down rules it lacks."""
    missing = [sub for rule in wanted for sub in breakdown_rule(rule)
               if not any(rule_covers(owner, sub) for owner in owned)]
    return not missing, missing


def compact_rules(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CompactRules: rules of one group and one resource, without names, differing only by
    verb, merged into one."""
    out: list[dict[str, Any]] = []
    simple: dict[tuple[str, str], dict[str, Any]] = {}
    for rule in rules:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        if (len(groups) == 1 and len(resources) == 1 and not rule.get("resourceNames")
                and not rule.get("nonResourceURLs")):
            key = (groups[0], resources[0])
            if key in simple:
                simple[key]["verbs"] = [*simple[key]["verbs"],
                                        *(v for v in rule.get("verbs") or []
                                          if v not in simple[key]["verbs"])]
                continue
            simple[key] = {**rule, "verbs": list(rule.get("verbs") or [])}
            out.append(simple[key])
        else:
            out.append(rule)
    return out


def go_strings(values: Sequence[str]) -> str:
    """fmt's %q of a []string: `["" "apps"]`."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def compact_string(rule: Mapping[str, Any]) -> str:
    """rbacv1helpers.CompactString."""
    parts = [f"{label}:{go_strings(rule[key])}" for key, label in (
        ("apiGroups", "APIGroups"), ("resources", "Resources"),
        ("nonResourceURLs", "NonResourceURLs"), ("resourceNames", "ResourceNames"),
        ("verbs", "Verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, missing: list[dict[str, Any]],
                       resolution_errors: Sequence[str] = ()) -> str:
    """ConfirmNoEscalation's error."""
    descriptions = sorted({compact_string(rule) for rule in compact_rules(missing)})
    message = (f"user {json.dumps(user.name)} (groups={go_strings(user.groups)}) is attempting "
               f"to grant RBAC permissions not currently held:\n" + "\n".join(descriptions))
    if resolution_errors:
        message += f"; resolution errors: [{', '.join(resolution_errors)}]"
    return message


def confirm_no_escalation(user: UserInfo, owned: Sequence[Rule], wanted: Sequence[Rule],
                          resolution_errors: Sequence[str] = ()) -> str | None:
    """None when `owned` covers `wanted`, else why not."""
    ok, missing = covers(owned, wanted)
    return None if ok else escalation_message(user, missing, resolution_errors)


# --- the checks on writes ----------------------------------------------------------------------

def escalation_allowed(user: UserInfo) -> bool:
    return SYSTEM_MASTERS in user.groups


async def may(authorizer: Authorizer, attributes: Attributes) -> bool:
    decision, _ = await authorizer.authorize(attributes)
    return decision is Decision.ALLOW


def escalate_attributes(user: UserInfo, resource: str, namespace: str, name: str) -> Attributes:
    """RoleEscalationAuthorized's question."""
    return Attributes(user=user, verb="escalate", resource_request=True, api_group=RBAC_GROUP,
                      api_version="*", resource=resource, namespace=namespace, name=name)


def bind_attributes(user: UserInfo, role_ref: Mapping[str, Any], namespace: str) -> Attributes:
    """BindingAuthorized's question: `bind` on the referenced role, in the binding's namespace
    (none for a ClusterRoleBinding)."""
    resource = "clusterroles" if role_ref.get("kind") == "ClusterRole" else "roles"
    return Attributes(user=user, verb="bind", resource_request=True,
                      api_group=role_ref.get("apiGroup", ""), resource=resource,
                      namespace=namespace, name=role_ref.get("name", ""))
