"""Pods the kubelet cannot run as asked are refused, not run without what they asked for.

kubelite's kubelet honours part of a pod's security settings (runAsUser, runAsGroup,
supplementalGroups, fsGroup as a supplemental group, readOnlyRootFilesystem,
capabilities.add and .drop, allowPrivilegeEscalation: false, the runtime's default seccomp
profile). A pod asking for anything else that changes what its containers may do (more
privilege: privileged, the host's PID or IPC namespace, a hostPath
volume; or less, that it cannot enforce: runAsNonRoot without a user, sysctls,
SELinux/AppArmor/custom seccomp profiles) is refused at admission with the field named,
so nothing runs with a silently different security posture.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from common import errors

HONOURED_CONTAINER_SECURITY = frozenset({
    "runAsUser", "runAsGroup", "readOnlyRootFilesystem", "allowPrivilegeEscalation",
    "capabilities", "privileged", "runAsNonRoot", "seccompProfile", "procMount",
    "windowsOptions"})
HONOURED_POD_SECURITY = frozenset({
    "runAsUser", "runAsGroup", "runAsNonRoot", "supplementalGroups", "fsGroup",
    "fsGroupChangePolicy", "seccompProfile", "windowsOptions", "supplementalGroupsPolicy"})


def unsupported_fields(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field path, why) for each thing in the pod the kubelet would not honour."""
    return list(_unsupported(pod.get("spec") or {}))


def _unsupported(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for flag in ("hostPID", "hostIPC", "hostUsers"):
        value = spec.get(flag)
        if (flag == "hostUsers" and value is False) or (flag != "hostUsers" and value):
            yield f"spec.{flag}", "sharing the host's namespaces is not supported"
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and "hostPath" in volume:
            yield f"spec.volumes[{i}].hostPath", "hostPath volumes are not supported"
    pod_security = spec.get("securityContext") or {}
    yield from _security_context(pod_security, "spec.securityContext", HONOURED_POD_SECURITY)
    pod_user = pod_security.get("runAsUser")
    pod_non_root = pod_security.get("runAsNonRoot")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(spec.get(group) or []):
            if not isinstance(container, Mapping):
                continue
            path = f"spec.{group}[{i}].securityContext"
            security = container.get("securityContext") or {}
            yield from _security_context(security, path, HONOURED_CONTAINER_SECURITY)
            if security.get("privileged"):
                yield f"{path}.privileged", "privileged containers are not supported"
            if security.get("procMount") not in (None, "Default"):
                yield f"{path}.procMount", "only the Default procMount is supported"
            user = security.get("runAsUser", pod_user)
            if user is None and security.get("runAsGroup",
                                             pod_security.get("runAsGroup")) is not None:
                yield f"{path}.runAsGroup", "runAsGroup needs runAsUser here"
            non_root = security.get("runAsNonRoot", pod_non_root)
            if non_root and user is None:
                yield (f"{path}.runAsNonRoot", "the image's user cannot be checked yet; set "
                       "runAsUser to a non-zero user")


def _security_context(security: Mapping[str, Any], path: str,
                      honoured: frozenset[str]) -> Iterator[tuple[str, str]]:
    for key in security:
        if key not in honoured:
            yield f"{path}.{key}", "this setting is not supported"
    profile = security.get("seccompProfile") or {}
    if profile.get("type") not in (None, "RuntimeDefault"):
        yield f"{path}.seccompProfile.type", "only the RuntimeDefault seccomp profile is supported"


def admit(pod: Mapping[str, Any]) -> None:
    """Forbidden (403, as an admission plugin's denial) naming every unsupported field."""
    problems = unsupported_fields(pod)
    if problems:
        name = (pod.get("metadata") or {}).get("name") or ""
        listed = "; ".join(f"{path}: {why}" for path, why in problems)
        raise errors.Forbidden(
            f'pods "{name}" is forbidden: kubelite\'s kubelet cannot run this pod as asked: '
            f"{listed}", details={"name": name, "kind": "pods"})
