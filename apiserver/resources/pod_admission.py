"""Pods the kubelet cannot run as asked are invalid, not run without what they asked for.

kubelite's kubelet honours a pod's host namespaces (hostNetwork, hostPID, hostIPC),
privileged containers and part of its security settings (runAsUser, runAsGroup,
supplementalGroups, fsGroup as a supplemental group, readOnlyRootFilesystem,
capabilities.add and .drop, allowPrivilegeEscalation: false, the runtime's default seccomp
profile), and the volumes of kubelet/volumes (emptyDir, hostPath, configMap, secret,
downwardAPI, projected with configMap/secret/downwardAPI sources). A pod asking for
anything else that changes what its containers may do (a user namespace; or less, that it
cannot enforce: runAsNonRoot without a user, sysctls, SELinux/AppArmor/custom seccomp
profiles, a non-default procMount, mount propagation) or a volume it cannot provide (a
PersistentVolumeClaim, nfs, csi, ...: nothing here would ever attach it, the pod would
stay ContainerCreating forever) fails validation (422) with the field named, so nothing
runs with a silently different security posture or without its storage. Whether the pod's namespace allows what it asks is Pod Security admission's
question (apiserver/auth/podsecurity.py), asked after this one as in kube.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from apiserver.validation import Cause, forbidden

HONOURED_CONTAINER_SECURITY = frozenset({
    "runAsUser", "runAsGroup", "readOnlyRootFilesystem", "allowPrivilegeEscalation",
    "capabilities", "privileged", "runAsNonRoot", "seccompProfile", "procMount",
    "windowsOptions"})
HONOURED_POD_SECURITY = frozenset({
    "runAsUser", "runAsGroup", "runAsNonRoot", "supplementalGroups", "fsGroup",
    "fsGroupChangePolicy", "seccompProfile", "windowsOptions", "supplementalGroupsPolicy"})
NOT_IMPLEMENTED = "kubelite's kubelet does not implement "


def unsupported_fields(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field path, what is not implemented) for each thing the kubelet would not honour."""
    return list(_unsupported(pod.get("spec") or {}))


def unimplemented_causes(pod: Mapping[str, Any]) -> list[Cause]:
    """One FieldValueForbidden cause per field the kubelet does not implement."""
    return [forbidden(path, NOT_IMPLEMENTED + what) for path, what in unsupported_fields(pod)]


def _unsupported(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if spec.get("hostUsers") is False:
        yield "spec.hostUsers", "user namespaces (hostUsers=false)"
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping):
            yield from _volume(volume, f"spec.volumes[{i}]")
    pod_security = spec.get("securityContext") or {}
    yield from _security_context(pod_security, "spec.securityContext", HONOURED_POD_SECURITY)
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            lifecycle = container.get("lifecycle") if isinstance(container, Mapping) else None
            if isinstance(lifecycle, Mapping) and lifecycle.get("stopSignal"):
                yield f"spec.{group}[{i}].lifecycle.stopSignal", "lifecycle.stopSignal"
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(spec.get(group) or []):
            if isinstance(container, Mapping):
                yield from _volume_mounts(container, f"spec.{group}[{i}]")
    pod_user = pod_security.get("runAsUser")
    pod_non_root = pod_security.get("runAsNonRoot")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(spec.get(group) or []):
            if not isinstance(container, Mapping):
                continue
            path = f"spec.{group}[{i}].securityContext"
            security = container.get("securityContext") or {}
            yield from _security_context(security, path, HONOURED_CONTAINER_SECURITY)
            if security.get("procMount") not in (None, "Default"):
                yield f"{path}.procMount", "a procMount other than Default"
            user = security.get("runAsUser", pod_user)
            if user is None and security.get("runAsGroup",
                                             pod_security.get("runAsGroup")) is not None:
                yield f"{path}.runAsGroup", "runAsGroup without runAsUser"
            non_root = security.get("runAsNonRoot", pod_non_root)
            if non_root and user is None:
                yield (f"{path}.runAsNonRoot", "checking the image's user for runAsNonRoot; "
                       "set runAsUser to a non-zero user")
            elif non_root and user == 0:
                yield f"{path}.runAsUser", "runAsNonRoot with runAsUser 0 (it would run as root)"


def _security_context(security: Mapping[str, Any], path: str,
                      honoured: frozenset[str]) -> Iterator[tuple[str, str]]:
    for key in security:
        if key not in honoured:
            yield f"{path}.{key}", f"securityContext.{key}"
    profile = security.get("seccompProfile") or {}
    if profile.get("type") not in (None, "RuntimeDefault"):
        yield f"{path}.seccompProfile.type", "seccomp profiles other than RuntimeDefault"


# --- DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds) ----------------

NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
# kube-apiserver's --default-not-ready-toleration-seconds and
# --default-unreachable-toleration-seconds
DEFAULT_TOLERATION_SECONDS = 300


def _tolerates_no_execute(toleration: Any, key: str) -> bool:
    """Whether a toleration already covers `key`'s NoExecute taint (the plugin's test)."""
    if not isinstance(toleration, Mapping):
        return False
    return (toleration.get("effect") in (None, "", "NoExecute")
            and toleration.get("key") in (None, "", key))


def default_toleration_seconds(pod: dict[str, Any]) -> None:
    """On create, tolerate the not-ready and unreachable NoExecute taints for 300 s unless
    the pod already says how it tolerates them, as kube's admission plugin does."""
    spec = pod.setdefault("spec", {})
    tolerations = list(spec.get("tolerations") or [])
    for key in (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY):
        if not any(_tolerates_no_execute(t, key) for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    spec["tolerations"] = tolerations


SUPPORTED_VOLUMES = frozenset({"emptyDir", "hostPath", "configMap", "secret", "downwardAPI",
                               "projected"})
SUPPORTED_PROJECTIONS = frozenset({"configMap", "secret", "downwardAPI", "serviceAccountToken"})


def _volume(volume: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """A volume the kubelet cannot set up (kubelet/volumes)."""
    for kind in volume:
        if kind == "name":
            continue
        if kind not in SUPPORTED_VOLUMES:
            yield f"{path}.{kind}", f"{kind} volumes"
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, Mapping) and empty_dir.get("medium") not in (None, "", "Memory"):
        yield f"{path}.emptyDir.medium", f"emptyDir medium {empty_dir.get('medium')}"
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for j, source in enumerate(projected.get("sources") or []):
            for kind in source if isinstance(source, Mapping) else ():
                if kind not in SUPPORTED_PROJECTIONS:
                    yield f"{path}.projected.sources[{j}].{kind}", f"projected {kind} sources"


def _volume_mounts(container: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for j, mount in enumerate(container.get("volumeMounts") or []):
        if not isinstance(mount, Mapping):
            continue
        if mount.get("mountPropagation") not in (None, "None"):
            yield (f"{path}.volumeMounts[{j}].mountPropagation",
                   f"mountPropagation {mount.get('mountPropagation')}")
        if mount.get("recursiveReadOnly") == "Enabled":
            yield f"{path}.volumeMounts[{j}].recursiveReadOnly", "recursiveReadOnly Enabled"
