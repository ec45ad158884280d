"""Pod Security admission (k8s.io/pod-security-admission): the Pod Security Standards'
checks, each a small pure function of a pod returning a `Violation` worded as kube words it,
and the namespace labels that choose the level enforced, warned about and audited.

Every level and version is evaluated as `latest`: kubelite has one set of checks, the
newest. A namespace without an `enforce` label is enforced at `baseline`, except
kube-system (`privileged`). kubelite keeps no audit log: the `audit` labels are validated
and otherwise ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver.validation import Cause, invalid

Pod = Mapping[str, Any]

PRIVILEGED = "privileged"
BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LATEST = "latest"
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
DEFAULT_LEVEL = BASELINE
PRIVILEGED_NAMESPACES = frozenset({"kube-system"})
_VERSION = re.compile(r"v1\.(0|[1-9][0-9]*)")

CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})
RESTRICTED_VOLUME_TYPES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
    "persistentVolumeClaim", "projected", "secret"})
KNOWN_VOLUME_TYPES = frozenset({
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
    "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
    "vsphereVolume", "quobyte", "azureDisk", "portworxVolume", "photonPersistentDisk",
    "scaleIO", "storageos"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                           "container_engine_t"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


@dataclass(frozen=True, slots=True)
class Violation:
    """policy.CheckResult of a failed check."""

    reason: str
    detail: str

    def text(self) -> str:
        return f"{self.reason} ({self.detail})"


Check = Callable[[Pod], Violation | None]


# --- wording helpers ---------------------------------------------------------------------------

def pluralize(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def join_quote(items: list[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def containers_phrase(names: list[str]) -> str:
    return f'{pluralize("container", "containers", len(names))} {join_quote(names)}'


# --- walking a pod -----------------------------------------------------------------------------

def spec_of(pod: Pod) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def containers(pod: Pod) -> Iterator[Mapping[str, Any]]:
    """visitContainers: init containers, containers, then ephemeral containers."""
    for group in CONTAINER_GROUPS:
        for container in spec_of(pod).get(group) or []:
            if isinstance(container, Mapping):
                yield container


def security(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return container.get("securityContext") or {}


def pod_security(pod: Pod) -> Mapping[str, Any]:
    return spec_of(pod).get("securityContext") or {}


def name_of(container: Mapping[str, Any]) -> str:
    return str(container.get("name") or "")


def setters(pod_is_bad: bool, bad_containers: list[str]) -> str:
    """`pod`, `container "a"`, or both joined with " and "."""
    parts = ["pod"] if pod_is_bad else []
    if bad_containers:
        parts.append(containers_phrase(bad_containers))
    return " and ".join(parts)


# --- baseline ----------------------------------------------------------------------------------

def check_app_armor_profile(pod: Pod) -> Violation | None:
    """appArmorProfile: no Unconfined profile, in the fields or the beta annotations."""
    bad: list[str] = []

    def unconfined(context: Mapping[str, Any]) -> bool:
        return bool((context.get("appArmorProfile") or {}).get("type") == "Unconfined")

    pod_bad = unconfined(pod_security(pod))
    bad_containers = [name_of(c) for c in containers(pod) if unconfined(security(c))]
    if pod_bad or bad_containers:
        bad.append(f'{setters(pod_bad, bad_containers)} must not set AppArmor profile type to '
                   '"Unconfined"')
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    for key in sorted(annotations):
        value = str(annotations[key])
        if key.startswith(APPARMOR_ANNOTATION_PREFIX) and value and \
                value != "runtime/default" and not value.startswith("localhost/"):
            bad.append(f'{key}="{value}"')
    if not bad:
        return None
    return Violation(pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles",
                               len(bad)), ", ".join(bad))


def check_capabilities_baseline(pod: Pod) -> Violation | None:
    """capabilities_baseline: only the runtime's default capabilities may be added."""
    bad_containers: list[str] = []
    bad_capabilities: set[str] = set()
    for container in containers(pod):
        added = [str(c) for c in (security(container).get("capabilities") or {}).get("add") or []]
        forbidden = {c for c in added if c not in BASELINE_CAPABILITIES}
        if forbidden:
            bad_containers.append(name_of(container))
            bad_capabilities |= forbidden
    if not bad_containers:
        return None
    return Violation("non-default capabilities",
                     f"{containers_phrase(bad_containers)} must not include "
                     f"{join_quote(sorted(bad_capabilities))} in securityContext.capabilities.add")


def check_host_namespaces(pod: Pod) -> Violation | None:
    """hostNamespaces: no hostNetwork, hostPID or hostIPC."""
    spec = spec_of(pod)
    shared = [f"{flag}=true" for flag in ("hostNetwork", "hostPID", "hostIPC") if spec.get(flag)]
    return Violation("host namespaces", ", ".join(shared)) if shared else None


def check_host_path_volumes(pod: Pod) -> Violation | None:
    """hostPathVolumes: no hostPath volumes."""
    names = [str(v.get("name") or "") for v in spec_of(pod).get("volumes") or []
             if isinstance(v, Mapping) and v.get("hostPath") is not None]
    if not names:
        return None
    return Violation("hostPath volumes",
                     f'{pluralize("volume", "volumes", len(names))} {join_quote(names)}')


def check_host_ports(pod: Pod) -> Violation | None:
    """hostPorts: no container port bound on the host."""
    bad_containers: list[str] = []
    ports: set[str] = set()
    for container in containers(pod):
        used = [str(p["hostPort"]) for p in container.get("ports") or []
                if isinstance(p, Mapping) and p.get("hostPort")]
        if used:
            bad_containers.append(name_of(container))
            ports.update(used)
    if not bad_containers:
        return None
    return Violation("hostPort", " ".join((
        containers_phrase(bad_containers), pluralize("uses", "use", len(bad_containers)),
        pluralize("hostPort", "hostPorts", len(ports)), ", ".join(sorted(ports)))))


def check_privileged(pod: Pod) -> Violation | None:
    """privileged: no privileged container."""
    names = [name_of(c) for c in containers(pod) if security(c).get("privileged")]
    if not names:
        return None
    return Violation("privileged",
                     f"{containers_phrase(names)} must not set securityContext.privileged=true")


def check_proc_mount(pod: Pod) -> Violation | None:
    """procMount: only the Default proc mount."""
    names: list[str] = []
    values: list[str] = []
    for container in containers(pod):
        mount = security(container).get("procMount")
        if mount is not None and mount != "Default":
            names.append(name_of(container))
            if str(mount) not in values:
                values.append(str(mount))
    if not names:
        return None
    return Violation("procMount", f"{containers_phrase(names)} must not set "
                                  f"securityContext.procMount to {join_quote(sorted(values))}")


def _selinux_bad(options: Mapping[str, Any]) -> tuple[str | None, bool, bool]:
    """(the forbidden type, user set, role set) of one seLinuxOptions."""
    kind = str(options.get("type") or "")
    return (None if kind in SELINUX_TYPES else kind, bool(options.get("user")),
            bool(options.get("role")))


def check_selinux_options(pod: Pod) -> Violation | None:
    """seLinuxOptions: only the container types, no user or role."""
    types: set[str] = set()
    user = role = False

    def bad(context: Mapping[str, Any]) -> bool:
        nonlocal user, role
        kind, set_user, set_role = _selinux_bad(context.get("seLinuxOptions") or {})
        if kind is not None:
            types.add(kind)
        user, role = user or set_user, role or set_role
        return kind is not None or set_user or set_role

    pod_bad = bad(pod_security(pod))
    bad_containers = [name_of(c) for c in containers(pod) if bad(security(c))]
    if not pod_bad and not bad_containers:
        return None
    problems = [f'{pluralize("type", "types", len(types))} {join_quote(sorted(types))}'] \
        if types else []
    problems += ["user may not be set"] if user else []
    problems += ["role may not be set"] if role else []
    return Violation("seLinuxOptions", f"{setters(pod_bad, bad_containers)} set forbidden "
                                       f"securityContext.seLinuxOptions: {'; '.join(problems)}")


def _seccomp_type(context: Mapping[str, Any]) -> str | None:
    profile = context.get("seccompProfile")
    return None if not isinstance(profile, Mapping) else profile.get("type")


def check_seccomp_profile_baseline(pod: Pod) -> Violation | None:
    """seccompProfile_baseline: no Unconfined seccomp profile."""
    pod_bad = _seccomp_type(pod_security(pod)) == "Unconfined"
    bad_containers = [name_of(c) for c in containers(pod)
                      if _seccomp_type(security(c)) == "Unconfined"]
    if not pod_bad and not bad_containers:
        return None
    return Violation("seccompProfile", f"{setters(pod_bad, bad_containers)} must not set "
                                       'securityContext.seccompProfile.type to "Unconfined"')


def check_sysctls(pod: Pod) -> Violation | None:
    """sysctls: only the namespaced, safe sysctls."""
    names = [str(s.get("name") or "") for s in pod_security(pod).get("sysctls") or []
             if isinstance(s, Mapping) and s.get("name") not in SAFE_SYSCTLS]
    return Violation("forbidden sysctls", ", ".join(names)) if names else None


def check_windows_host_process(pod: Pod) -> Violation | None:
    """windowsHostProcess: no Windows HostProcess containers."""
    def host_process(context: Mapping[str, Any]) -> bool:
        return bool((context.get("windowsOptions") or {}).get("hostProcess"))

    pod_bad = host_process(pod_security(pod))
    bad_containers = [name_of(c) for c in containers(pod) if host_process(security(c))]
    if not pod_bad and not bad_containers:
        return None
    return Violation("hostProcess", f"{setters(pod_bad, bad_containers)} must not set "
                                    "securityContext.windowsOptions.hostProcess=true")


# --- restricted --------------------------------------------------------------------------------

def check_allow_privilege_escalation(pod: Pod) -> Violation | None:
    """allowPrivilegeEscalation: every container sets it to false."""
    names = [name_of(c) for c in containers(pod)
             if security(c).get("allowPrivilegeEscalation") is not False]
    if not names:
        return None
    return Violation("allowPrivilegeEscalation != false", f"{containers_phrase(names)} must set "
                                                          "securityContext.allowPrivilegeEscalation=false")


def check_capabilities_restricted(pod: Pod) -> Violation | None:
    """capabilities_restricted: drop ALL, add at most NET_BIND_SERVICE."""
    missing_drop: list[str] = []
    adding: list[str] = []
    added: set[str] = set()
    for container in containers(pod):
        capabilities = security(container).get("capabilities") or {}
        if "ALL" not in [str(c) for c in capabilities.get("drop") or []]:
            missing_drop.append(name_of(container))
        forbidden = {str(c) for c in capabilities.get("add") or []} - {"NET_BIND_SERVICE"}
        if forbidden:
            adding.append(name_of(container))
            added |= forbidden
    details = []
    if missing_drop:
        details.append(f'{containers_phrase(missing_drop)} must set '
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{containers_phrase(adding)} must not include "
                       f"{join_quote(sorted(added))} in securityContext.capabilities.add")
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


def volume_type(volume: Mapping[str, Any]) -> str:
    for key in volume:
        if key != "name" and volume[key] is not None:
            return key if key in RESTRICTED_VOLUME_TYPES | KNOWN_VOLUME_TYPES else "unknown"
    return "unknown"


def check_restricted_volumes(pod: Pod) -> Violation | None:
    """restrictedVolumes: only the volume types that hold no host or network storage."""
    names: list[str] = []
    types: set[str] = set()
    for volume in spec_of(pod).get("volumes") or []:
        if not isinstance(volume, Mapping):
            continue
        kind = volume_type(volume)
        if kind not in RESTRICTED_VOLUME_TYPES:
            names.append(str(volume.get("name") or ""))
            types.add(kind)
    if not names:
        return None
    return Violation("restricted volume types", " ".join((
        pluralize("volume", "volumes", len(names)), join_quote(names),
        pluralize("uses", "use", len(names)),
        pluralize("restricted volume type", "restricted volume types", len(types)),
        join_quote(sorted(types)))))


def check_run_as_non_root(pod: Pod) -> Violation | None:
    """runAsNonRoot: true on the pod, or on every container."""
    pod_value = pod_security(pod).get("runAsNonRoot")
    explicit: list[str] = []
    implicit: list[str] = []
    for container in containers(pod):
        value = security(container).get("runAsNonRoot")
        if value is not None:
            if not value:
                explicit.append(name_of(container))
        elif pod_value is not True:
            implicit.append(name_of(container))
    if pod_value is False or explicit:
        return Violation("runAsNonRoot != true", f"{setters(pod_value is False, explicit)} "
                                                 "must not set securityContext.runAsNonRoot=false")
    if implicit:
        return Violation("runAsNonRoot != true", f"pod or {containers_phrase(implicit)} must "
                                                 "set securityContext.runAsNonRoot=true")
    return None


def check_run_as_user(pod: Pod) -> Violation | None:
    """runAsUser: never 0."""
    pod_bad = pod_security(pod).get("runAsUser") == 0
    bad_containers = [name_of(c) for c in containers(pod) if security(c).get("runAsUser") == 0]
    if not pod_bad and not bad_containers:
        return None
    return Violation("runAsUser=0", f"{setters(pod_bad, bad_containers)} must not set "
                                    "runAsUser=0")


def check_seccomp_profile_restricted(pod: Pod) -> Violation | None:
    """seccompProfile_restricted: RuntimeDefault or Localhost, on the pod or every container."""
    allowed = ("RuntimeDefault", "Localhost")
    pod_type = _seccomp_type(pod_security(pod))
    pod_bad = pod_type is not None and pod_type not in allowed
    bad_values: list[str] = [pod_type] if pod_bad and pod_type else []
    explicit: list[str] = []
    implicit: list[str] = []
    for container in containers(pod):
        kind = _seccomp_type(security(container))
        if kind is not None:
            if kind not in allowed:
                explicit.append(name_of(container))
                if kind not in bad_values:
                    bad_values.append(kind)
        elif pod_type not in allowed:
            implicit.append(name_of(container))
    if pod_bad or explicit:
        return Violation("seccompProfile", f"{setters(pod_bad, explicit)} must not set "
                                           "securityContext.seccompProfile.type to "
                                           f"{join_quote(sorted(bad_values))}")
    if implicit:
        return Violation("seccompProfile", f"pod or {containers_phrase(implicit)} must set "
                                           'securityContext.seccompProfile.type to '
                                           '"RuntimeDefault" or "Localhost"')
    return None


# --- the levels --------------------------------------------------------------------------------

# policy.DefaultChecks: each level's checks in the order of their IDs; a restricted check
# that overrides a baseline one replaces it at the restricted level.
BASELINE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("appArmorProfile", check_app_armor_profile),
    ("capabilities_baseline", check_capabilities_baseline),
    ("hostNamespaces", check_host_namespaces),
    ("hostPathVolumes", check_host_path_volumes),
    ("hostPorts", check_host_ports),
    ("privileged", check_privileged),
    ("procMount", check_proc_mount),
    ("seLinuxOptions", check_selinux_options),
    ("seccompProfile_baseline", check_seccomp_profile_baseline),
    ("sysctls", check_sysctls),
    ("windowsHostProcess", check_windows_host_process),
)
RESTRICTED_CHECKS: tuple[tuple[str, Check], ...] = (
    ("allowPrivilegeEscalation", check_allow_privilege_escalation),
    ("capabilities_restricted", check_capabilities_restricted),
    ("restrictedVolumes", check_restricted_volumes),
    ("runAsNonRoot", check_run_as_non_root),
    ("runAsUser", check_run_as_user),
    ("seccompProfile_restricted", check_seccomp_profile_restricted),
)
OVERRIDDEN_AT_RESTRICTED = frozenset({"capabilities_baseline", "seccompProfile_baseline"})


def checks_for(level: str) -> list[Check]:
    if level == PRIVILEGED:
        return []
    if level == BASELINE:
        return [check for _, check in BASELINE_CHECKS]
    return [check for check_id, check in BASELINE_CHECKS
            if check_id not in OVERRIDDEN_AT_RESTRICTED] + [c for _, c in RESTRICTED_CHECKS]


def evaluate(level: str, pod: Pod) -> list[Violation]:
    """Every violation of the level's checks, in kube's order."""
    return [v for v in (check(pod) for check in checks_for(level)) if v is not None]


def violations_text(violations: list[Violation]) -> str:
    return ", ".join(v.text() for v in violations)


# --- namespace labels --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LevelVersion:
    level: str
    version: str = LATEST

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


@dataclass(frozen=True, slots=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion


def default_level(namespace: str) -> str:
    return PRIVILEGED if namespace in PRIVILEGED_NAMESPACES else DEFAULT_LEVEL


def label_field(key: str) -> str:
    return f"metadata.labels[{key}]"


def parse_level(key: str, value: str) -> tuple[str, list[Cause]]:
    """api.ParseLevel: an unknown level is evaluated as restricted, and is an error."""
    if value in LEVELS:
        return value, []
    return RESTRICTED, [invalid(label_field(key), value,
                                "must be one of " + ", ".join(LEVELS))]


def parse_version(key: str, value: str) -> tuple[str, list[Cause]]:
    """api.ParseVersion: `latest` or `v1.N`."""
    if value == LATEST or _VERSION.fullmatch(value):
        return value, []
    return LATEST, [invalid(label_field(key), value, 'must be "latest" or "v1.x"')]


def policy_from_labels(labels: Mapping[str, str], namespace: str,
                       ) -> tuple[Policy, list[Cause]]:
    """api.PolicyToEvaluate over kubelite's defaults; an `enforce` level set without a
    `warn` one is warned about too."""
    default = LevelVersion(default_level(namespace))
    chosen: dict[str, LevelVersion] = {}
    causes: list[Cause] = []
    explicit: set[str] = set()
    for mode in MODES:
        level_key, version_key = LABEL_PREFIX + mode, f"{LABEL_PREFIX}{mode}-version"
        level, version = default.level, default.version
        if level_key in labels:
            level, errs = parse_level(level_key, str(labels[level_key]))
            causes += errs
            if not errs:
                explicit.add(mode)
        if version_key in labels:
            version, errs = parse_version(version_key, str(labels[version_key]))
            causes += errs
        chosen[mode] = LevelVersion(level, version)
    if "enforce" in explicit and "warn" not in explicit:
        warn_version = chosen["enforce"].version if f"{LABEL_PREFIX}warn-version" not in labels \
            else chosen["warn"].version
        chosen["warn"] = LevelVersion(chosen["enforce"].level, warn_version)
    return Policy(enforce=chosen["enforce"], audit=chosen["audit"], warn=chosen["warn"]), causes


def policy_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(LABEL_PREFIX)}


@dataclass(frozen=True, slots=True)
class Decision:
    """What admission does with a pod: refuse it (`denied`) or send these warnings."""

    denied: str | None
    warnings: tuple[str, ...]


def decide(policy: Policy, pod: Pod) -> Decision:
    """Admission.EvaluatePod: enforce refuses; warn warns only about a pod it lets in."""
    enforced = evaluate(policy.enforce.level, pod)
    if enforced:
        return Decision(f'violates PodSecurity "{policy.enforce}": '
                        f"{violations_text(enforced)}", ())
    if policy.warn == policy.enforce:
        return Decision(None, ())
    warned = evaluate(policy.warn.level, pod)
    if not warned:
        return Decision(None, ())
    return Decision(None, (f'would violate PodSecurity "{policy.warn}": '
                           f"{violations_text(warned)}",))


def existing_pod_warnings(namespace: str, enforce: LevelVersion,
                          pods: Sequence[Pod]) -> list[str]:
    """Admission.EvaluatePodsInNamespace: what a namespace update that tightens `enforce`
    warns about the pods already running there, one line per set of reasons."""
    counts: dict[str, tuple[str, int]] = {}
    for pod in pods:
        violations = evaluate(enforce.level, pod)
        if not violations:
            continue
        reasons = ", ".join(v.reason for v in violations)
        sample, count = counts.get(reasons, (str((pod.get("metadata") or {}).get("name")), 0))
        counts[reasons] = (sample, count + 1)
    if not counts:
        return []
    warnings = [f'existing pods in namespace "{namespace}" violate the new PodSecurity '
                f'enforce level "{enforce}"']
    for reasons, (sample, count) in counts.items():
        if count == 1:
            warnings.append(f"{sample}: {reasons}")
        else:
            others = "1 other pod" if count == 2 else f"{count - 1} other pods"
            warnings.append(f"{sample} (and {others}): {reasons}")
    return warnings
