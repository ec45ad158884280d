"""The root CA certificate publisher: every active namespace has a `kube-root-ca.crt`
ConfigMap whose `ca.crt` is the CA bundle that verifies the apiserver (kube-controller-
manager's root-ca-cert-publisher, pkg/controller/certificates/rootcacertpublisher). The
`kube-api-access-*` volume the ServiceAccount admission gives pods projects it as
`/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`, which in-cluster clients trust.

A namespace added or updated, or that ConfigMap changed or deleted, syncs the namespace:
a missing ConfigMap is created, a changed one put back. kubelite runs it in the
apiserver's controller process, beside the ServiceAccounts controller, when the apiserver
has a root CA (--root-ca-file, by default its --client-ca-file).
"""

from __future__ import annotations

import logging
from typing import Any

from apiserver.registry import Registry
from apiserver.resources.configmaps import CONFIG_MAPS, ROOT_CA_CONFIG_MAP
from apiserver.resources.namespaces import NAMESPACES
from apiserver.serviceaccount_controller import PerNamespaceController, namespace_to_sync
from apiserver.watch import Change
from common import errors

log = logging.getLogger("apiserver.rootca")

ROOT_CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.")


def wanted_config_map(ca_pem: str, current: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ConfigMap to write so the namespace holds the root CA (None: it already does);
    labels and other annotations someone added are kept."""
    data = {ROOT_CA_KEY: ca_pem}
    if current is None:
        return {"metadata": {"name": ROOT_CA_CONFIG_MAP,
                             "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": data}
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    if current.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
        return None
    metadata = dict(current["metadata"])
    metadata["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
    return {**current, "metadata": metadata, "data": data}


class RootCAPublisher(PerNamespaceController):
    def __init__(self, registry: Registry, ca_pem: str) -> None:
        self.ca_pem = ca_pem
        super().__init__(registry, [(NAMESPACES, namespace_to_sync),
                                    (CONFIG_MAPS, self.config_map_to_sync)])

    def config_map_to_sync(self, change: Change) -> str | None:
        """The namespace whose root CA ConfigMap went or changed."""
        obj = change.item.obj
        meta = obj["metadata"]
        if meta.get("name") != ROOT_CA_CONFIG_MAP:
            return None
        if change.type == "DELETED" or wanted_config_map(self.ca_pem, obj) is not None:
            return str(meta["namespace"])
        return None

    async def sync(self, namespace: str) -> None:
        if namespace in self.registry.terminating_namespaces:
            return
        try:
            current: dict[str, Any] | None = await self.registry.get(
                CONFIG_MAPS, namespace, ROOT_CA_CONFIG_MAP)
        except errors.NotFound:
            current = None
        wanted = wanted_config_map(self.ca_pem, current)
        if wanted is None:
            return
        try:
            if current is None:
                await self.registry.create(CONFIG_MAPS, namespace, wanted,
                                           manager="kube-controller-manager")
                log.info("created configmap %s/%s", namespace, ROOT_CA_CONFIG_MAP)
            else:
                await self.registry.update(CONFIG_MAPS, namespace, ROOT_CA_CONFIG_MAP, wanted,
                                           manager="kube-controller-manager")
                log.info("updated configmap %s/%s", namespace, ROOT_CA_CONFIG_MAP)
        except (errors.AlreadyExists, errors.Conflict, errors.Forbidden, errors.NotFound):
            pass  # written meanwhile (its watch event syncs again), or the namespace goes
        except errors.ApiError as e:  # made immutable with other data, say
            log.warning("configmap %s/%s: %s", namespace, ROOT_CA_CONFIG_MAP, e.message)
