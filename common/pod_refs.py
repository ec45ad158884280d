"""The API objects a pod references (after kube's graph_populator.go AddPod and
`pkg/api/v1/pod`'s VisitPodSecretNames / VisitPodConfigmapNames): its Secrets (image pull
secrets, secret and projected-secret volumes, env `secretKeyRef`, `envFrom.secretRef`,
the secret refs of CSI / flex / rbd / ... volumes), its ConfigMaps (configMap and
projected-configMap volumes, env `configMapKeyRef`, `envFrom.configMapRef`), its
ServiceAccount and its PersistentVolumeClaims (including the claims of generic ephemeral
volumes, named POD-VOLUME). Every container counts: init, regular and ephemeral.

The Node authorizer allows a node exactly these objects of the pods bound to it; the
kubelet's configmap/secret manager fetches exactly these. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["secrets", "configmaps", "serviceaccounts", "persistentvolumeclaims"]
CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
# volume sources whose secretRef (or one of these keys) names a Secret of the pod's namespace
_SECRET_REF_VOLUMES = {
    "azureFile": ("secretName",), "cephfs": ("secretRef",), "cinder": ("secretRef",),
    "flexVolume": ("secretRef",), "rbd": ("secretRef",), "scaleIO": ("secretRef",),
    "iscsi": ("secretRef",), "storageos": ("secretRef",), "csi": ("nodePublishSecretRef",),
}


@dataclass(frozen=True)
class PodReferences:
    secrets: frozenset[str]
    configmaps: frozenset[str]
    serviceaccounts: frozenset[str]
    persistentvolumeclaims: frozenset[str]

    def names(self, kind: str) -> frozenset[str]:
        return frozenset(getattr(self, kind, frozenset()))


def _name_of(ref: Any, key: str = "name") -> str:
    if isinstance(ref, Mapping):
        value = ref.get(key)
        if isinstance(value, str):
            return value
    return ""


def _value_from(var: Any) -> Mapping[str, Any]:
    source = var.get("valueFrom") if isinstance(var, Mapping) else None
    return source if isinstance(source, Mapping) else {}


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for group in CONTAINER_GROUPS:
        for container in spec.get(group) or []:
            if isinstance(container, Mapping):
                yield container


def _volumes(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for volume in spec.get("volumes") or []:
        if isinstance(volume, Mapping):
            yield volume


def _projected_sources(volume: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        for source in projected.get("sources") or []:
            if isinstance(source, Mapping):
                yield source


def secret_names(spec: Mapping[str, Any]) -> Iterator[str]:
    for ref in spec.get("imagePullSecrets") or []:
        yield _name_of(ref)
    for volume in _volumes(spec):
        yield _name_of(volume.get("secret"), "secretName")
        for source in _projected_sources(volume):
            yield _name_of(source.get("secret"))
        for kind, keys in _SECRET_REF_VOLUMES.items():
            driver = volume.get(kind)
            if isinstance(driver, Mapping):
                for key in keys:
                    value = driver.get(key)
                    yield value if isinstance(value, str) else _name_of(value)
    for container in _containers(spec):
        for env_from in container.get("envFrom") or []:
            if isinstance(env_from, Mapping):
                yield _name_of(env_from.get("secretRef"))
        for var in container.get("env") or []:
            yield _name_of(_value_from(var).get("secretKeyRef"))


def configmap_names(spec: Mapping[str, Any]) -> Iterator[str]:
    for volume in _volumes(spec):
        yield _name_of(volume.get("configMap"))
        for source in _projected_sources(volume):
            yield _name_of(source.get("configMap"))
    for container in _containers(spec):
        for env_from in container.get("envFrom") or []:
            if isinstance(env_from, Mapping):
                yield _name_of(env_from.get("configMapRef"))
        for var in container.get("env") or []:
            yield _name_of(_value_from(var).get("configMapKeyRef"))


def claim_names(pod: Mapping[str, Any]) -> Iterator[str]:
    pod_name = _name_of(pod.get("metadata"))
    for volume in _volumes(pod.get("spec") or {}):
        yield _name_of(volume.get("persistentVolumeClaim"), "claimName")
        if isinstance(volume.get("ephemeral"), Mapping) and pod_name:
            yield f"{pod_name}-{_name_of(volume)}"


def pod_references(pod: Mapping[str, Any]) -> PodReferences:
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        spec = {}
    account = spec.get("serviceAccountName")
    return PodReferences(
        secrets=frozenset(n for n in secret_names(spec) if n),
        configmaps=frozenset(n for n in configmap_names(spec) if n),
        serviceaccounts=frozenset([account] if isinstance(account, str) and account else []),
        persistentvolumeclaims=frozenset(n for n in claim_names(pod) if n))
