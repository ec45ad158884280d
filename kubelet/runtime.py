"""The narrow container-runtime surface the kubelet needs, as plain dataclasses.

Mirrors the shape of kubelet's `container.Runtime` / CRI split: a pod is a sandbox
(holding the network namespace) plus its containers. Everything the pod workers see
of the runtime is one of these values; `kubelet.docker.runtime` is the only implementation.

Containers are found again after a kubelet restart through their labels (never by
name), and each kubelet only ever sees containers labelled with its own node name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from kubelet.dns import DnsConfig
from kubelet.env import EnvSources

# Labels every container we create carries. The io.kubernetes.* ones are the names
# dockershim used, so `docker ps --filter label=io.kubernetes.pod.name=web` works as usual.
LABEL_MANAGED = "io.kubelite.managed"
LABEL_NODE = "io.kubelite.node"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
LABEL_CONTAINER_TYPE = "io.kubernetes.docker.type"  # "podsandbox" | "container"
LABEL_ATTEMPT = "io.kubernetes.container.restartCount"
LABEL_SPEC_HASH = "io.kubernetes.container.hash"
LABEL_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod"

TYPE_SANDBOX = "podsandbox"
TYPE_CONTAINER = "container"
SANDBOX_CONTAINER_NAME = "POD"

ContainerState = Literal["created", "running", "exited", "unknown"]
# States after which a container's inspect data no longer changes while its listed
# state stays the same. A "created" container may have failed to start without its
# listed state moving, so it is always inspected again.
SETTLED_STATES: tuple[ContainerState, ...] = ("running", "exited")


@dataclass(frozen=True)
class PodRef:
    uid: str
    name: str
    namespace: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ContainerInfo:
    """One runtime container of a pod (an application container, not the sandbox)."""

    id: str
    name: str  # the container's name in the pod spec
    pod: PodRef
    attempt: int
    image: str  # the image as the pod spec names it
    image_id: str  # what the runtime resolved it to (sha256:...)
    state: ContainerState
    exit_code: int = 0
    oom_killed: bool = False
    error: str = ""
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    spec_hash: str = ""
    grace_period: int | None = None
    termination_message: str = ""  # from terminationMessagePath (or the logs), once exited


@dataclass(frozen=True)
class SandboxInfo:
    """The pod's sandbox ("pause") container, which owns the network namespace."""

    id: str
    pod: PodRef
    attempt: int
    state: ContainerState
    ip: str = ""
    host_network: bool = False
    created_at: datetime | None = None
    grace_period: int | None = None

    @property
    def ready(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True)
class ContainerSummary:
    """What a cheap `list` says about a container: enough to notice that it changed."""

    id: str
    pod: PodRef
    name: str
    is_sandbox: bool
    state: ContainerState
    grace_period: int | None = None


@dataclass(frozen=True)
class ImageInfo:
    id: str
    repo_tags: tuple[str, ...] = ()
    size: int = 0


@dataclass(frozen=True)
class RuntimeVersion:
    name: str  # "docker"
    version: str  # "20.10.24+dfsg1"
    api_version: str
    os: str = ""
    kernel_version: str = ""
    operating_system: str = ""
    architecture: str = ""
    cpus: int = 0
    memory_bytes: int = 0


@dataclass
class PodObservation:
    """Everything the runtime has for one pod, newest first."""

    sandboxes: list[SandboxInfo] = field(default_factory=list)
    containers: list[ContainerInfo] = field(default_factory=list)

    def latest_sandbox(self) -> SandboxInfo | None:
        return self.sandboxes[0] if self.sandboxes else None

    def containers_named(self, name: str) -> list[ContainerInfo]:
        return [c for c in self.containers if c.name == name]

    def latest(self, name: str) -> ContainerInfo | None:
        found = self.containers_named(name)
        return found[0] if found else None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def build_observation(found: Iterable[ContainerInfo | SandboxInfo]) -> PodObservation:
    """A pod's observation from its inspected containers and sandboxes, newest first
    (by attempt, then creation time)."""
    observation = PodObservation()
    for item in found:
        if isinstance(item, SandboxInfo):
            observation.sandboxes.append(item)
        else:
            observation.containers.append(item)
    observation.sandboxes.sort(key=lambda s: (s.attempt, s.created_at or _EPOCH), reverse=True)
    observation.containers.sort(key=lambda c: (c.attempt, c.created_at or _EPOCH), reverse=True)
    return observation


@dataclass(frozen=True)
class ContainerExtras:
    """What the kubelet's managers give a container beyond its spec."""

    sources: EnvSources = field(default_factory=EnvSources)
    mounts: tuple[Mapping[str, Any], ...] = ()


class RuntimeFailure(Exception):
    """A runtime call failed; `reason` is the Kubernetes waiting reason it maps to."""

    reason = "RuntimeError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ImagePullError(RuntimeFailure):
    reason = "ErrImagePull"


class ImageNotPresent(RuntimeFailure):
    reason = "ErrImageNeverPull"


class CreateContainerError(RuntimeFailure):
    reason = "CreateContainerError"


class CreateContainerConfigError(RuntimeFailure):
    """The container's configuration cannot be made (an env var it asks for)."""

    reason = "CreateContainerConfigError"


class StartContainerError(RuntimeFailure):
    reason = "RunContainerError"


class Runtime(Protocol):
    async def version(self) -> RuntimeVersion: ...

    async def ping(self) -> bool: ...

    async def list_summaries(self) -> list[ContainerSummary]: ...

    async def observe_pod(self, pod_uid: str) -> PodObservation: ...

    async def inspect(self, summary: ContainerSummary) -> ContainerInfo | SandboxInfo | None:
        """The details of one listed container; None when it is gone."""

    async def inspect_image(self, image: str) -> ImageInfo | None: ...

    async def pull_image(self, image: str, *, registry_auth: str | None = None) -> ImageInfo:
        ...

    async def run_sandbox(self, pod: Mapping[str, Any], *, attempt: int,
                          node_ip: str, dns: DnsConfig | None = None) -> str:
        """Create and start the pod's sandbox; `dns`: its resolv.conf (None: the
        runtime's default)."""
        ...

    async def create_container(self, pod: Mapping[str, Any], container: Mapping[str, Any], *,
                               sandbox: SandboxInfo, attempt: int,
                               pid_target: str | None = None,
                               extras: ContainerExtras | None = None) -> str:
        """Create (not start) a container in the sandbox's namespaces; with `pid_target`
        (an ephemeral container's target) in that container's PID namespace; `extras`:
        its env's ConfigMaps and Secrets, and its volume mounts."""

    async def start_container(self, container_id: str) -> None: ...

    async def stop_container(self, container_id: str, *, grace_seconds: int) -> None: ...

    async def remove_container(self, container_id: str) -> None: ...

    async def exec_sync(self, container_id: str, cmd: list[str], *,
                        timeout_seconds: float) -> tuple[int, str]:
        """Run a command in a running container to its end: (exit code, output)."""

    def container_logs(self, container_id: str, *, follow: bool = False,
                       tail_lines: int | None = None, timestamps: bool = False,
                       since_seconds: int | None = None) -> AsyncIterator[bytes]: ...


# --- naming and labels (pure) ---------------------------------------------------------

def container_name(*, container: str, pod: PodRef, attempt: int) -> str:
    """Kubernetes-style runtime name: k8s_<container>_<pod>_<namespace>_<uid>_<attempt>."""
    return f"k8s_{container}_{pod.name}_{pod.namespace}_{pod.uid}_{attempt}"


def sandbox_name(*, pod: PodRef, attempt: int) -> str:
    return container_name(container=SANDBOX_CONTAINER_NAME, pod=pod, attempt=attempt)


def pod_ref(pod: Mapping[str, Any]) -> PodRef:
    meta = pod.get("metadata") or {}
    return PodRef(uid=str(meta.get("uid") or ""), name=str(meta.get("name") or ""),
                  namespace=str(meta.get("namespace") or "default"))


def is_sidecar(spec: Mapping[str, Any]) -> bool:
    """A restartable init container (`restartPolicy: Always`): started in order with the
    init containers, it keeps running beside the app containers."""
    return spec.get("restartPolicy") == "Always"


def grace_period_of(pod: Mapping[str, Any]) -> int:
    """The grace period to stop this pod with: the deletion's, else the spec's (default 30)."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionGracePeriodSeconds") is not None:
        return max(int(meta["deletionGracePeriodSeconds"]), 0)
    spec_grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return max(int(spec_grace), 0) if spec_grace is not None else 30


def node_selector_labels(node_name: str) -> dict[str, str]:
    """The labels that select every container one kubelet owns (and nothing else)."""
    return {LABEL_MANAGED: "true", LABEL_NODE: node_name}


def pod_labels(pod: Mapping[str, Any], *, node_name: str, container: str, attempt: int,
               kind: str) -> dict[str, str]:
    ref = pod_ref(pod)
    return {
        **node_selector_labels(node_name),
        LABEL_POD_UID: ref.uid,
        LABEL_POD_NAME: ref.name,
        LABEL_POD_NAMESPACE: ref.namespace,
        LABEL_CONTAINER_NAME: container,
        LABEL_CONTAINER_TYPE: kind,
        LABEL_ATTEMPT: str(attempt),
        LABEL_GRACE_PERIOD: str((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)),
    }


# The container fields that, when changed, mean the running container is not the one
# the spec asks for (kubelet's container hash).
_HASHED_FIELDS = ("image", "command", "args", "env", "workingDir", "ports", "resources",
                  "tty", "stdin")


def container_spec_hash(container: Mapping[str, Any]) -> str:
    subset = {k: container.get(k) for k in _HASHED_FIELDS if container.get(k) not in (None, [], {})}
    encoded = json.dumps(subset, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


# --- image references (pure) ----------------------------------------------------------

# docker/distribution's reference grammar, condensed: [host[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)


class InvalidImageName(ValueError):
    pass


@dataclass(frozen=True)
class ImageReference:
    repository: str  # with the registry host when there is one
    tag: str = ""
    digest: str = ""

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse_image(image: str) -> ImageReference:
    """Parse an image reference, defaulting the tag to `latest` like the kubelet does.

    Raises InvalidImageName with the kubelet's wording when it cannot be parsed.
    """
    match = _REFERENCE.match(image or "")
    domain = match.group("domain") if match else None
    # A first component without a dot, colon or "localhost" is part of the path (docker.io),
    # so it must be a lowercase path component.
    is_path = domain is not None and not ("." in domain or ":" in domain
                                          or domain == "localhost")
    if match is None or len(image) > 255 or (
            is_path and not re.fullmatch(_COMPONENT, str(domain))):
        quoted = json.dumps(image)  # Go's %q
        raise InvalidImageName(f"Failed to apply default image tag {quoted}: couldn't parse "
                               f"image reference {quoted}: invalid reference format")
    path = match.group("path")
    if is_path:
        path, domain = f"{domain}/{path}", None
    repository = f"{domain}/{path}" if domain else path
    tag, digest = match.group("tag") or "", match.group("digest") or ""
    if not tag and not digest:
        tag = "latest"
    return ImageReference(repository=repository, tag=tag, digest=digest)


# --- lifecycle events as a pure diff of two snapshots (PLEG) -----------------------------

def changed_pods(old: Mapping[str, ContainerSummary],
                 new: Mapping[str, ContainerSummary]) -> set[str]:
    """Pod uids whose containers appeared, disappeared or changed state between relists."""
    changed: set[str] = set()
    for cid, summary in new.items():
        before = old.get(cid)
        if before is None or before.state != summary.state:
            changed.add(summary.pod.uid)
    for cid, summary in old.items():
        if cid not in new:
            changed.add(summary.pod.uid)
    return changed
