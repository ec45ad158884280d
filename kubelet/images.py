"""The image manager (after kubelet's `pkg/kubelet/images/image_manager.go`): before a
container is created, make sure its image is there — honour the pull policy, pull, and
back off pulls that failed — with kube's events and waiting reasons. A pod's
`imagePullSecrets` give the pull its registry credentials (kubelet.credentials): each match
is tried in turn, as kube's puller does, and a Secret the kubelet cannot read is kube's
FailedToRetrieveImagePullSecret warning, not an error (the pull may not need it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelet import status as podstatus
from kubelet.actions import Backoff
from kubelet.credentials import Credential, credentials_for
from kubelet.env import SECRET
from kubelet.events import EventSink
from kubelet.objects import ObjectError, ObjectManager
from kubelet.runtime import InvalidImageName, PodRef, Runtime, RuntimeFailure, parse_image
from kubelet.status import Waiting

log = logging.getLogger(__name__)

# After a failed pull, look again this soon (to show ImagePullBackOff while it runs).
PULL_FAILED_RETRY_SECONDS = 2.0


def default_pull_policy(image: str) -> str:
    """Always for `:latest` or no tag, else IfNotPresent (the apiserver's defaulting)."""
    try:
        ref = parse_image(image)
    except InvalidImageName:
        return "IfNotPresent"
    return "Always" if ref.tag == "latest" and not ref.digest else "IfNotPresent"


def should_pull(policy: str, present: bool) -> bool:
    if policy == "Never":
        return False
    return policy == "Always" or not present


@dataclass(frozen=True)
class ImageNotReady:
    """Why a container cannot be created yet, and when to look again (None: at resync)."""

    waiting: Waiting
    retry_in: float | None = None


class ImageManager:
    """EnsureImageExists for the pods of one kubelet; the pull back-off is per pod+image."""

    def __init__(self, runtime: Runtime, events: EventSink, *,
                 clock: Callable[[], float] = time.monotonic,
                 objects: ObjectManager | None = None) -> None:
        self.runtime = runtime
        self.events = events
        self.clock = clock
        self.objects = objects
        self.backoff = Backoff()

    async def pull_secrets(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The pod's imagePullSecrets the kubelet could read; a warning names the others."""
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        namespace = str(metadata.get("namespace") or "")
        names = [str(ref.get("name") or "") for ref in spec.get("imagePullSecrets") or []
                 if isinstance(ref, Mapping) and ref.get("name")]
        found: list[Mapping[str, Any]] = []
        missing: list[str] = []
        for name in names:
            secret = None
            if self.objects is not None:
                try:
                    secret = await self.objects.get(SECRET, namespace, name)
                except ObjectError:
                    secret = None
            (found.append(secret) if secret is not None else missing.append(name))
        if missing:
            self.events.emit(pod, "Warning", "FailedToRetrieveImagePullSecret",
                             f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                             "attempting to pull the image may not succeed.")
        return found

    async def _pull(self, pod: Mapping[str, Any], image: str) -> None:
        """Pull with each matching credential in turn, then anonymously when none matched;
        the last failure is the one reported."""
        credentials: list[Credential | None] = list(
            credentials_for(parse_image(image).repository, await self.pull_secrets(pod)))
        failure: RuntimeFailure | None = None
        for credential in credentials or [None]:
            auth = credential.registry_auth_header() if credential is not None else None
            try:
                await self.runtime.pull_image(image, registry_auth=auth)
                return
            except RuntimeFailure as e:
                failure = e
        assert failure is not None
        raise failure

    def forget(self, uid: str) -> None:
        self.backoff.forget_prefix(uid)

    async def ensure_image(self, pod: Mapping[str, Any], ref: PodRef, spec: Mapping[str, Any],
                           *, before_pull: Callable[[], object]) -> ImageNotReady | None:
        """None when the image is present (pulled if it had to be); `before_pull` runs
        just before a pull starts (a pull can take long: the caller shows its status)."""
        name, image = str(spec["name"]), str(spec.get("image") or "")
        emit = self.events.emit
        try:
            parse_image(image)
        except InvalidImageName as e:
            emit(pod, "Warning", "InspectFailed", str(e), container=name)
            emit(pod, "Warning", "Failed", "Error: InvalidImageName", container=name)
            return ImageNotReady(Waiting(podstatus.INVALID_IMAGE_NAME, str(e)))
        policy = str(spec.get("imagePullPolicy") or default_pull_policy(image))
        present = await self.runtime.inspect_image(image) is not None
        if not should_pull(policy, present):
            if present:
                emit(pod, "Normal", "Pulled",
                     f'Container image "{image}" already present on machine', container=name)
                return None
            message = f'Container image "{image}" is not present with pull policy of Never'
            emit(pod, "Warning", "ErrImageNeverPull", message, container=name)
            emit(pod, "Warning", "Failed", "Error: ErrImageNeverPull", container=name)
            return ImageNotReady(Waiting(podstatus.ERR_IMAGE_NEVER_PULL, message))
        key = f"{ref.uid}_{image}"
        now = self.clock()
        if self.backoff.in_backoff_since_update(key, now):
            message = f'Back-off pulling image "{image}"'
            emit(pod, "Normal", "BackOff", message, container=name)
            emit(pod, "Warning", "Failed", "Error: ImagePullBackOff", container=name)
            entry = self.backoff.entries[key]
            return ImageNotReady(Waiting(podstatus.IMAGE_PULL_BACK_OFF, message),
                                 retry_in=entry.last_update + entry.delay - now + 0.05)
        emit(pod, "Normal", "Pulling", f'Pulling image "{image}"', container=name)
        before_pull()
        started = time.monotonic()
        try:
            await self._pull(pod, image)
        except RuntimeFailure as e:
            self.backoff.next(key, self.clock())
            emit(pod, "Warning", "Failed", f'Failed to pull image "{image}": {e.message}',
                 container=name)
            emit(pod, "Warning", "Failed", "Error: ErrImagePull", container=name)
            return ImageNotReady(Waiting(podstatus.ERR_IMAGE_PULL, e.message),
                                 retry_in=PULL_FAILED_RETRY_SECONDS)
        took = podstatus.go_duration(time.monotonic() - started)
        log.info("%s: pulled image %s in %s", ref.key, image, took)
        emit(pod, "Normal", "Pulled",
             f'Successfully pulled image "{image}" in {took} ({took} including waiting)',
             container=name)
        return None
