"""The bootstrap-token controllers of kube-controller-manager (pkg/controller/bootstrap),
off by default there and here; kubeadm, and `hack/up.py`, turn them on
(`--controllers=*,bootstrapsigner,tokencleaner`):

- bootstrapsigner keeps `kube-public/cluster-info` signed: one `jws-kubeconfig-ID` per
  bootstrap token usable for signing, and none for a token that is gone or expired.
- tokencleaner deletes a bootstrap token's Secret once it has expired.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from common.bootstraptoken import (
    CLUSTER_INFO,
    EXPIRATION_KEY,
    JWS_PREFIX,
    PUBLIC_NAMESPACE,
    SECRET_TYPE,
    SYSTEM_NAMESPACE,
    USAGE_SIGNING,
    Token,
    parse_time,
    secret_data,
    signatures,
    token_of_secret,
    usable_for,
)
from common.client import ApiClient
from common.errors import Conflict, NotFound
from common.events import EventRecorder
from common.informer import SharedInformer, SharedInformerFactory
from controller_manager.controller import QueueController, key_of, uid_of

log = logging.getLogger("controller_manager.bootstrap")

SIGNER = "bootstrapsigner"
CLEANER = "tokencleaner"
CLUSTER_INFO_KEY = f"{PUBLIC_NAMESPACE}/{CLUSTER_INFO}"

Object = dict[str, Any]


def signing_tokens(secrets: Sequence[Mapping[str, Any]],
                   now: datetime.datetime) -> list[Token]:
    """The tokens cluster-info is signed with: well-formed, for signing, not expired."""
    found = []
    for secret in secrets:
        token = token_of_secret(secret)
        if token is not None and usable_for(secret, USAGE_SIGNING, now):
            found.append(token)
    return sorted(found, key=lambda t: t.id)


def signed_cluster_info(cluster_info: Mapping[str, Any],
                        tokens: Sequence[Token]) -> Object | None:
    """cluster-info with exactly the signatures of `tokens`; None when it has them."""
    data = dict(cluster_info.get("data") or {})
    kept = {k: v for k, v in data.items() if not k.startswith(JWS_PREFIX)}
    wanted = {**kept, **signatures(cluster_info, tokens)}
    if wanted == data:
        return None
    return {**cluster_info, "data": wanted}


class BootstrapSignerController(QueueController):
    name = SIGNER

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 1, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=1, writer=writer)
        self.config_maps = factory.informer("configmaps", namespace=PUBLIC_NAMESPACE,
                                            field_selector=f"metadata.name={CLUSTER_INFO}")
        self.secrets = factory.informer("secrets", namespace=SYSTEM_NAMESPACE,
                                        field_selector=f"type={SECRET_TYPE}")
        for informer, what in ((self.config_maps, "configmaps"), (self.secrets, "secrets")):
            informer.add_event_handler(on_add=self._changed,
                                       on_update=lambda _old, _new: self._changed(None),
                                       on_delete=self._changed, name=f"{SIGNER} {what}")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.config_maps, self.secrets]

    def _changed(self, _obj: Object | None) -> None:
        self.queue.add(CLUSTER_INFO_KEY)

    async def sync(self, key: str) -> None:
        cluster_info = self.config_maps.get(CLUSTER_INFO_KEY)
        if cluster_info is None:
            return
        now = datetime.datetime.now(datetime.UTC)
        tokens = signing_tokens(self.secrets.list(), now)
        updated = signed_cluster_info(cluster_info, tokens)
        if updated is None:
            return
        try:
            await self.client.update("configmaps", updated, namespace=PUBLIC_NAMESPACE)
        except (NotFound, Conflict):
            return  # changed meanwhile: the informer brings it back
        log.info("cluster-info: signed with %d bootstrap token(s): %s", len(tokens),
                 ", ".join(t.id for t in tokens) or "none")
        # an expired token's signature goes when it expires
        next_expiry = min((when for s in self.secrets.list()
                           if (when := parse_time(secret_data(s, EXPIRATION_KEY) or "-"))
                           and when > now), default=None)
        if next_expiry is not None:
            self.queue.add_after(key, (next_expiry - now).total_seconds() + 1)


class TokenCleanerController(QueueController):
    name = CLEANER

    def __init__(self, factory: SharedInformerFactory, recorder: EventRecorder, *,
                 workers: int = 1, writer: ApiClient | None = None) -> None:
        super().__init__(factory, recorder, workers=1, writer=writer)
        self.secrets = factory.informer("secrets", namespace=SYSTEM_NAMESPACE,
                                        field_selector=f"type={SECRET_TYPE}")
        self.secrets.add_event_handler(on_add=self._changed,
                                       on_update=lambda _old, new: self._changed(new),
                                       name=f"{CLEANER} secrets")

    def synced_before_start(self) -> list[SharedInformer]:
        return [self.secrets]

    def _changed(self, secret: Object) -> None:
        if secret_data(secret, EXPIRATION_KEY):
            self.queue.add(key_of(secret))

    async def sync(self, key: str) -> None:
        secret = self.secrets.get(key)
        if secret is None:
            return
        when = parse_time(secret_data(secret, EXPIRATION_KEY) or "-")
        now = datetime.datetime.now(datetime.UTC)
        if when is not None and when > now:
            self.queue.add_after(key, (when - now).total_seconds() + 0.5)
            return
        meta = secret["metadata"]
        log.info("bootstrap token %s has expired: deleting it", key)
        try:
            await self.client.delete("secrets", str(meta["name"]), namespace=SYSTEM_NAMESPACE,
                                     preconditions={"uid": uid_of(secret)})
        except (NotFound, Conflict):
            return
