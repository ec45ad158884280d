"""The ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount) for pods:
the pod's ServiceAccount must exist, and unless the pod or its ServiceAccount opts out
(`automountServiceAccountToken: false`), every init and app container gets the
`kube-api-access-<5 chars>` projected volume at /var/run/secrets/kubernetes.io/
serviceaccount: a bound token (`token`), the cluster's CA (`ca.crt`, from the
`kube-root-ca.crt` ConfigMap) and the pod's namespace (`namespace`): what in-cluster
clients (client-go's InClusterConfig, the Python client's load_incluster_config) read.

kubelite runs it when the apiserver can mint tokens (--service-account-signing-key-file),
as every kube-apiserver can; the development apiserver without a signing key only
defaults the ServiceAccount's name. Mirror pods are left alone, as in kube.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

from apiserver.resources.configmaps import ROOT_CA_CONFIG_MAP
from apiserver.resources.pod_validation import MIRROR_POD_ANNOTATION
from apiserver.resources.serviceaccounts import DEFAULT_SERVICE_ACCOUNT, SERVICE_ACCOUNTS
from common import errors

VOLUME_PREFIX = "kube-api-access-"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# serviceaccount.WarnOnlyBoundTokenExpirationSeconds: an hour and 7 s, so the token's
# users are seen refreshing it
TOKEN_EXPIRATION_SECONDS = 3607
# utilrand.String's alphabet: no vowels (no words), no look-alikes (0/o, 1/l, 3/e)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The default ServiceAccount is made by a controller just after its namespace: a pod
# created at once waits for it a little (as kube's admission retries its lookup).
DEFAULT_LOOKUP_ATTEMPTS = 10


def service_account_name(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount")
               or DEFAULT_SERVICE_ACCOUNT)


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def should_automount(service_account: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """shouldAutomount: the pod's field wins, then the ServiceAccount's; default yes."""
    pod_says = (pod.get("spec") or {}).get("automountServiceAccountToken")
    if pod_says is not None:
        return bool(pod_says)
    sa_says = service_account.get("automountServiceAccountToken")
    return True if sa_says is None else bool(sa_says)


def token_volume_source() -> dict[str, Any]:
    """TokenVolumeSource: the token, the root CA and the namespace, mode 0644."""
    return {"projected": {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                                 "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIG_MAP,
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


def random_suffix(length: int = 5) -> str:
    return "".join(random.choice(_NAME_ALPHABET) for _ in range(length))


def mount_service_account_token(pod: dict[str, Any], *,
                                suffix: Callable[[], str] = random_suffix) -> None:
    """mountServiceAccountToken: each init and app container without a mount at the
    ServiceAccount path gets one of the pod's `kube-api-access-*` volume (read-only); the
    volume is added when one was needed and the pod has none yet."""
    spec = pod.setdefault("spec", {})
    volumes = spec.get("volumes") or []
    existing = next((v["name"] for v in volumes if isinstance(v, Mapping)
                     and str(v.get("name") or "").startswith(VOLUME_PREFIX)), None)
    name = existing or VOLUME_PREFIX + suffix()
    needed = False
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            mounts = container.get("volumeMounts") or []
            if any(isinstance(m, Mapping) and m.get("mountPath") == MOUNT_PATH for m in mounts):
                continue
            container["volumeMounts"] = [*mounts, {"name": name, "readOnly": True,
                                                   "mountPath": MOUNT_PATH}]
            needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, {"name": name, **token_volume_source()}]


async def admit_service_account(pod: dict[str, Any], registry: Any) -> None:
    """The plugin's Admit for a pod create: Forbidden when its ServiceAccount does not
    exist (after NamespaceLifecycle had its say: a missing or terminating namespace is
    that plugin's refusal); the token volume when it should be mounted."""
    if not registry.mount_service_account_tokens or is_mirror_pod(pod):
        return
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    name = service_account_name(pod)
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    service_account = await _service_account(registry, namespace, name, pod_name)
    if service_account is None:
        raise errors.Forbidden(
            f'pods "{pod_name}" is forbidden: error looking up service account '
            f'{namespace}/{name}: serviceaccount "{name}" not found',
            details={"name": pod_name, "kind": "pods"})
    if should_automount(service_account, pod):
        mount_service_account_token(pod)


async def _service_account(registry: Any, namespace: str, name: str, pod_name: str
                           ) -> dict[str, Any] | None:
    """The ServiceAccount, from the watch cache (etcd for one it has not seen yet); the
    default one is waited for a little. A miss first lets NamespaceLifecycle refuse a
    namespace that is missing or going (kube runs that plugin first)."""
    attempts = DEFAULT_LOOKUP_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT else 1
    for attempt in range(attempts):
        found: dict[str, Any] | None = await registry.get_recent(SERVICE_ACCOUNTS, namespace,
                                                                 name)
        if found is not None:
            return found
        if attempt == 0:
            await registry.check_namespace_admits("pods", namespace, pod_name)
        if attempt + 1 < attempts:
            await asyncio.sleep(random.uniform(0.1, 0.2))
    return None
