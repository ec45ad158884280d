"""`--authorization-mode=RBAC`: kube's RBACAuthorizer (plugin/pkg/auth/authorizer/rbac) and
its rule resolver (pkg/registry/rbac/validation: VisitRulesFor, appliesTo).

Roles and bindings are read from the registry's watch caches, never from etcd per request:
a `Policy` snapshot (the decoded objects and a per-subject index of the bindings) is rebuilt
only when one of the four caches has changed since the last one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apiserver.auth import Attributes, Decision, UserInfo

Object = dict[str, Any]
Rule = Mapping[str, Any]

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


# --- rule matching (rbac.go RuleAllows and rbacv1helpers) -------------------------------------

def verb_matches(rule: Rule, verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    return "*" in verbs or verb in verbs


def api_group_matches(rule: Rule, group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    return "*" in groups or group in groups


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    """`*`, the exact `resource` or `resource/subresource`, or `*/subresource`."""
    for resource in rule.get("resources") or ():
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Rule, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: Rule, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*"))):
            return True
    return False


def rule_allows(attributes: Attributes, rule: Rule) -> bool:
    if not verb_matches(rule, attributes.verb):
        return False
    if not attributes.resource_request:
        return non_resource_url_matches(rule, attributes.path)
    combined = attributes.resource
    if attributes.subresource:
        combined = f"{attributes.resource}/{attributes.subresource}"
    return (api_group_matches(rule, attributes.api_group)
            and resource_matches(rule, combined, attributes.subresource)
            and resource_name_matches(rule, attributes.name))


def rules_allow(attributes: Attributes, rules: Sequence[Rule]) -> bool:
    return any(rule_allows(attributes, rule) for rule in rules)


# --- subjects ---------------------------------------------------------------------------------

def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def applies_to(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    """appliesToUser: a ServiceAccount subject without a namespace is the binding's."""
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == service_account_username(sa_namespace, name)
    return False


def subject_keys(subject: Mapping[str, Any], namespace: str) -> list[str]:
    """The index keys a subject is found under: `user:NAME` or `group:NAME`."""
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return [f"user:{name}"]
    if kind == "Group":
        return [f"group:{name}"]
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return [f"user:{service_account_username(sa_namespace, name)}"] if sa_namespace else []
    return []


def user_keys(user: UserInfo) -> list[str]:
    return [f"user:{user.name}", *(f"group:{g}" for g in user.groups)]


def describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def describe_binding(binding: Object, subject: Mapping[str, Any]) -> str:
    """clusterRoleBindingDescriber / roleBindingDescriber, for "RBAC: allowed by ..."."""
    meta = binding.get("metadata") or {}
    role_ref = binding.get("roleRef") or {}
    namespace = meta.get("namespace") or ""
    if namespace:
        head = f'RoleBinding "{meta.get("name", "")}/{namespace}"'
    else:
        head = f'ClusterRoleBinding "{meta.get("name", "")}"'
    return (f'{head} of {role_ref.get("kind", "")} "{role_ref.get("name", "")}" to '
            f"{describe_subject(subject, namespace)}")


# --- the policy: roles and bindings, indexed -------------------------------------------------

@dataclass
class Policy:
    """Every Role, ClusterRole, RoleBinding and ClusterRoleBinding, with the bindings indexed
    by the subjects they name."""

    cluster_roles: dict[str, Object] = field(default_factory=dict)
    roles: dict[tuple[str, str], Object] = field(default_factory=dict)  # (namespace, name)
    # subject key -> bindings naming it, in name order (cluster ones under namespace "")
    index: dict[tuple[str, str], list[Object]] = field(default_factory=dict)

    @classmethod
    def build(cls, roles: list[Object], cluster_roles: list[Object],
              role_bindings: list[Object], cluster_role_bindings: list[Object]) -> Policy:
        policy = cls()
        for role in cluster_roles:
            policy.cluster_roles[role["metadata"]["name"]] = role
        for role in roles:
            meta = role["metadata"]
            policy.roles[(meta.get("namespace", ""), meta["name"])] = role
        for binding in [*cluster_role_bindings, *role_bindings]:
            namespace = binding["metadata"].get("namespace") or ""
            seen: set[str] = set()
            for subject in binding.get("subjects") or []:
                for key in subject_keys(subject, namespace):
                    if key not in seen:
                        seen.add(key)
                        policy.index.setdefault((namespace, key), []).append(binding)
        return policy

    def bindings_for(self, user: UserInfo, namespace: str) -> list[Object]:
        """The bindings that may apply to `user` in `namespace` ("" : cluster bindings only),
        cluster bindings first, as VisitRulesFor walks them."""
        found: list[Object] = []
        seen: set[int] = set()
        for scope in ("", namespace) if namespace else ("",):
            for key in user_keys(user):
                for binding in self.index.get((scope, key), ()):
                    if id(binding) not in seen:
                        seen.add(id(binding))
                        found.append(binding)
        return found

    def role_rules(self, role_ref: Mapping[str, Any], namespace: str,
                   ) -> tuple[list[Rule], str | None]:
        """GetRoleReferenceRules: the rules of a roleRef, or the error of a missing role."""
        kind, name = role_ref.get("kind"), role_ref.get("name", "")
        if kind == "ClusterRole":
            role = self.cluster_roles.get(name)
            if role is None:
                return [], f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        elif kind == "Role":
            role = self.roles.get((namespace, name))
            if role is None:
                return [], f'role.rbac.authorization.k8s.io "{name}" not found'
        else:
            return [], f"unsupported role reference kind: {kind!r}"
        return list(role.get("rules") or []), None

    def visit(self, user: UserInfo, namespace: str,
              ) -> Iterator[tuple[str, list[Rule], str | None]]:
        """(source description, rules, error) of every binding that applies to `user`."""
        for binding in self.bindings_for(user, namespace):
            binding_namespace = binding["metadata"].get("namespace") or ""
            subject = next((s for s in binding.get("subjects") or []
                            if applies_to(user, s, binding_namespace)), None)
            if subject is None:
                continue
            rules, error = self.role_rules(binding.get("roleRef") or {}, binding_namespace)
            yield describe_binding(binding, subject), rules, error

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        """RulesFor: every rule that applies to `user` in `namespace`, and resolution errors."""
        rules: list[Rule] = []
        errors: list[str] = []
        for _, found, error in self.visit(user, namespace):
            rules += found
            if error:
                errors.append(error)
        return rules, errors

    def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        errors: list[str] = []
        for source, rules, error in self.visit(attributes.user, attributes.namespace):
            if error:
                errors.append(error)
            if rules_allow(attributes, rules):
                return Decision.ALLOW, f"RBAC: allowed by {source}"
        return Decision.NO_OPINION, f"RBAC: {aggregate(errors)}" if errors else ""


def aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# --- over the registry's caches ----------------------------------------------------------------

CACHE_WAIT = 10.0


class CachedPolicy:
    """The Policy of the registry's four RBAC watch caches, rebuilt when one has changed."""

    def __init__(self, registry: Any) -> None:
        from apiserver.resources.rbac import (
            CLUSTER_ROLE_BINDINGS,
            CLUSTER_ROLES,
            ROLE_BINDINGS,
            ROLES,
        )

        self.registry = registry
        self.resources = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)
        self._policy = Policy()
        self._stamp: tuple[Any, ...] = ()

    async def policy(self) -> Policy:
        caches = [self.registry.cache(resource) for resource in self.resources]
        if not self._stamp:  # only the first answer waits: later ones use what is known
            for cache in caches:
                await cache.wait_ready(CACHE_WAIT)
        # every applied change moves last_change; a relist replaces the store
        stamp = tuple((id(cache.store), cache.last_change, len(cache.store)) for cache in caches)
        if stamp != self._stamp:
            objects = [[item.obj for item in cache.store.values()] for cache in caches]
            self._policy = Policy.build(*objects)
            self._stamp = stamp
        return self._policy

    async def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        return (await self.policy()).rules_for(user, namespace)

    async def role_rules(self, role_ref: Mapping[str, Any], namespace: str,
                         ) -> tuple[list[Rule], str | None]:
        return (await self.policy()).role_rules(role_ref, namespace)


def cached_policy(registry: Any) -> CachedPolicy:
    """The registry's one CachedPolicy (the authorizer and the escalation check share it)."""
    policy = getattr(registry, "rbac_policy", None)
    if policy is None:
        policy = registry.rbac_policy = CachedPolicy(registry)
    return policy


class RBACAuthorizer:
    def __init__(self, policy: CachedPolicy) -> None:
        self.cached = policy

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return (await self.cached.policy()).authorize(attributes)

    async def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        return await self.cached.rules_for(user, namespace)
