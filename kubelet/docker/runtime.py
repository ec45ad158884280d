"""`kubelet.runtime.Runtime` on the Docker Engine API, scoped to one node's containers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar

import httpx

from kubelet.dns import DnsConfig
from kubelet.docker.client import ConflictError, DockerClient, DockerError, NotFoundError
from kubelet.docker.convert import (
    container_create_body,
    container_from_inspect,
    image_info,
    sandbox_create_body,
    sandbox_from_inspect,
    summary_from_list,
)
from kubelet.env import EnvError, PodContext
from kubelet.runtime import (
    LABEL_POD_UID,
    SETTLED_STATES,
    ContainerExtras,
    ContainerInfo,
    ContainerSummary,
    CreateContainerConfigError,
    CreateContainerError,
    ImageInfo,
    ImageNotPresent,
    ImagePullError,
    PodObservation,
    RuntimeFailure,
    RuntimeVersion,
    SandboxInfo,
    StartContainerError,
    build_observation,
    container_name,
    node_selector_labels,
    parse_image,
    pod_ref,
    sandbox_name,
)
from kubelet.termination import (
    MAX_LOG_MESSAGE_BYTES,
    MAX_LOG_MESSAGE_LINES,
    falls_back_to_logs,
    host_file,
    message_file,
    read_message_file,
    tail_bytes,
)

log = logging.getLogger(__name__)

Inspected = TypeVar("Inspected", ContainerInfo, SandboxInfo)


OOM_SETTLE_CHECKS = 4
OOM_SETTLE_INTERVAL = 0.25
OOM_SETTLE_WINDOW = 2.0  # seconds after the exit


def may_await_oom_flag(info: ContainerInfo, now: datetime) -> bool:
    """A container SIGKILLed (137) a moment ago, not (yet) flagged OOMKilled."""
    return (info.state == "exited" and info.exit_code == 137 and not info.oom_killed
            and info.finished_at is not None
            and (now - info.finished_at).total_seconds() < OOM_SETTLE_WINDOW)


class DockerRuntime:
    """`kubelet.runtime.Runtime` on the Docker Engine API, scoped to one node's containers."""

    def __init__(self, client: DockerClient, *, node_name: str, sandbox_image: str,
                 memory_capacity: int = 0, pods_dir: str = "", node_ip: str = "",
                 allocatable: Mapping[str, Decimal] | None = None) -> None:
        self.client = client
        self.node_name = node_name
        self.sandbox_image = sandbox_image
        self.memory_capacity = memory_capacity  # the node's, for Burstable OOM scores
        # Where the containers' termination-log files live ("": none are mounted).
        self.pods_dir = pods_dir
        self._messages: dict[str, str] = {}  # exited container id -> termination message
        # container id -> its inspect, taken while listed in that settled state
        self._settled: dict[str, ContainerInfo | SandboxInfo] = {}
        # For the env's fieldRefs (status.hostIP) and resourceFieldRefs (unset limits).
        self.node_ip = node_ip
        self.allocatable = dict(allocatable or {})

    async def ping(self) -> bool:
        return await self.client.ping()

    async def version(self) -> RuntimeVersion:
        version = await self.client.version()
        info = await self.client.info()
        return RuntimeVersion(
            name="docker", version=str(version.get("Version") or ""),
            api_version=str(version.get("ApiVersion") or ""),
            os=str(info.get("OperatingSystem") or ""),
            kernel_version=str(info.get("KernelVersion") or version.get("KernelVersion") or ""),
            operating_system=str(info.get("OSType") or version.get("Os") or "linux"),
            architecture=str(version.get("Arch") or ""),
            cpus=int(info.get("NCPU") or 0), memory_bytes=int(info.get("MemTotal") or 0))

    async def list_summaries(self) -> list[ContainerSummary]:
        listed = await self.client.list_containers(labels=node_selector_labels(self.node_name))
        summaries = [summary_from_list(item) for item in listed]
        present = {summary.id for summary in summaries}
        for gone in [cid for cid in self._settled if cid not in present]:
            del self._settled[gone]  # removed, by us or behind our back
        return summaries

    async def observe_pod(self, pod_uid: str) -> PodObservation:
        labels = {**node_selector_labels(self.node_name), LABEL_POD_UID: pod_uid}
        listed = await self.client.list_containers(labels=labels)
        found = await asyncio.gather(*(self._inspect_listed(summary_from_list(item))
                                       for item in listed))
        return build_observation(item for item in found if item is not None)

    async def _inspect_listed(self, summary: ContainerSummary
                              ) -> ContainerInfo | SandboxInfo | None:
        """`inspect` of a container just listed, reusing what an earlier inspect said when
        the list still shows it in the settled state (running or exited) that inspect saw:
        while that holds, what the kubelet reads from an inspect cannot change (the PLEG's
        rule too)."""
        settled = self._settled.get(summary.id)
        if settled is not None and settled.state == summary.state:
            return settled
        return await self.inspect(summary)

    async def inspect(self, summary: ContainerSummary) -> ContainerInfo | SandboxInfo | None:
        data = await self.client.inspect_container(summary.id)
        if data is None:  # removed between list and inspect
            return None
        if summary.is_sandbox:
            return self._remember(sandbox_from_inspect(data))
        info = container_from_inspect(data)
        if info.state != "exited":
            return self._remember(info)
        memory_limited = bool((data.get("HostConfig") or {}).get("Memory"))
        for _ in range(OOM_SETTLE_CHECKS):
            if not memory_limited or not may_await_oom_flag(info, datetime.now(UTC)):
                break
            # Docker sets OOMKilled when containerd's OOM event comes, which on a busy
            # machine can be just after the exit: an exited container is never inspected
            # again, so a SIGKILL a moment ago of a container with a memory limit (only
            # those are killed by their cgroup) waits for it a little (else "Error", not
            # "OOMKilled").
            await asyncio.sleep(OOM_SETTLE_INTERVAL)
            again = await self.client.inspect_container(summary.id)
            if again is None:
                return None
            data, info = again, container_from_inspect(again)
        message = self._messages.get(info.id)
        if message is None:
            message = await self._termination_message(info, data)
            self._messages[info.id] = message  # an exited container never changes
        return self._remember(dataclasses.replace(info, termination_message=message))

    def _remember(self, info: Inspected) -> Inspected:
        if info.state in SETTLED_STATES:
            self._settled[info.id] = info
        return info

    async def _termination_message(self, info: ContainerInfo, data: Mapping[str, Any]) -> str:
        """getTerminationMessage: the file, else (FallbackToLogsOnError, failed) the logs."""
        path = message_file(data)
        message = await asyncio.to_thread(read_message_file, path) if path else None
        if message or not falls_back_to_logs(data, exit_code=info.exit_code,
                                             error=info.error):
            return message or ""
        chunks = []
        try:
            async for chunk in self.container_logs(info.id, tail_lines=MAX_LOG_MESSAGE_LINES):
                chunks.append(chunk)
        except DockerError as e:
            return f"Error on reading termination message from logs: {e.message}"
        return tail_bytes(b"".join(chunks), MAX_LOG_MESSAGE_BYTES)

    async def inspect_image(self, image: str) -> ImageInfo | None:
        data = await self.client.inspect_image(str(parse_image(image)))
        return image_info(data) if data is not None else None

    async def pull_image(self, image: str, *, registry_auth: str | None = None) -> ImageInfo:
        try:
            await self.client.pull_image(image, registry_auth=registry_auth)
        except DockerError as e:
            raise ImagePullError(e.message) from e
        except httpx.HTTPError as e:
            raise ImagePullError(f"pulling {image}: {e}") from e
        pulled = await self.inspect_image(image)
        if pulled is None:
            raise ImagePullError(f"image {image} is not present after a successful pull")
        return pulled

    async def ensure_sandbox_image(self) -> None:
        if await self.inspect_image(self.sandbox_image) is None:
            try:
                await self.pull_image(self.sandbox_image)
            except ImagePullError as e:
                raise ImageNotPresent(
                    f"pod sandbox image {self.sandbox_image!r} is not present and cannot be "
                    f"pulled ({e.message}); build it with hack/build-images.sh or pass "
                    f"--pod-infra-container-image") from e

    async def run_sandbox(self, pod: Mapping[str, Any], *, attempt: int, node_ip: str,
                          dns: DnsConfig | None = None) -> str:
        await self.ensure_sandbox_image()
        body = sandbox_create_body(pod, node_name=self.node_name, image=self.sandbox_image,
                                   attempt=attempt, node_ip=node_ip, dns=dns)
        name = sandbox_name(pod=pod_ref(pod), attempt=attempt)
        sandbox_id = await self._create(name, body)
        try:
            await self.client.start_container(sandbox_id)
        except DockerError as e:
            raise StartContainerError(f"failed to start pod sandbox: {e.message}") from e
        return sandbox_id

    async def create_container(self, pod: Mapping[str, Any], container: Mapping[str, Any], *,
                               sandbox: SandboxInfo, attempt: int,
                               pid_target: str | None = None,
                               extras: ContainerExtras | None = None) -> str:
        extras = extras or ContainerExtras()
        termination_log = ""
        if self.pods_dir and container.get("terminationMessagePath"):
            termination_log = host_file(self.pods_dir, pod_uid=pod_ref(pod).uid,
                                        container=str(container["name"]),
                                        token=secrets.token_hex(4))
            await asyncio.to_thread(_create_empty_file, termination_log)
        host_network = bool((pod.get("spec") or {}).get("hostNetwork"))
        context = PodContext(pod_ip=self.node_ip if host_network else sandbox.ip,
                             host_ip=self.node_ip, allocatable=self.allocatable,
                             sources=extras.sources)
        try:
            body = container_create_body(pod, container, node_name=self.node_name,
                                         sandbox_id=sandbox.id, attempt=attempt,
                                         pid_target=pid_target,
                                         memory_capacity=self.memory_capacity,
                                         termination_log=termination_log, env_context=context,
                                         mounts=extras.mounts)
        except EnvError as e:
            if termination_log:
                await asyncio.to_thread(_remove_file, termination_log, self.pods_dir)
            raise CreateContainerConfigError(str(e)) from e
        name = container_name(container=str(container["name"]), pod=pod_ref(pod),
                              attempt=attempt)
        try:
            return await self._create(name, body)
        except CreateContainerError as e:
            if not termination_log or "bind source path does not exist" not in e.message:
                raise
        # The engine does not share the kubelet's filesystem (a kubelet in a container
        # with the host's Docker socket): no termination-log files from now on.
        log.warning("the Docker engine cannot see %s: termination messages are read from "
                    "the logs only (FallbackToLogsOnError)", self.pods_dir)
        self.pods_dir = ""
        await asyncio.to_thread(_remove_file, termination_log, os.path.dirname(termination_log))
        return await self.create_container(pod, container, sandbox=sandbox, attempt=attempt,
                                           pid_target=pid_target, extras=extras)

    async def _create(self, name: str, body: Mapping[str, Any]) -> str:
        try:
            return await self.client.create_container(name, body)
        except ConflictError:
            # Left over from an interrupted attempt (e.g. a kubelet killed mid-sync): the
            # labels say it is ours, so replace it rather than fail forever.
            log.info("replacing leftover container %s", name)
            await self.client.remove_container(name, force=True)
            try:
                return await self.client.create_container(name, body)
            except DockerError as e:
                raise CreateContainerError(e.message) from e
        except DockerError as e:
            raise CreateContainerError(e.message) from e

    async def start_container(self, container_id: str) -> None:
        try:
            await self.client.start_container(container_id)
        except DockerError as e:
            raise StartContainerError(e.message) from e

    async def stop_container(self, container_id: str, *, grace_seconds: int) -> None:
        try:
            await self.client.stop_container(container_id, timeout_seconds=grace_seconds)
        except NotFoundError:
            pass

    async def remove_container(self, container_id: str) -> None:
        data = await self.client.inspect_container(container_id) if self.pods_dir else None
        await self.client.remove_container(container_id, force=True)
        self._messages.pop(container_id, None)
        self._settled.pop(container_id, None)
        path = message_file(data) if data is not None else ""
        if path.startswith(self.pods_dir + os.sep):
            await asyncio.to_thread(_remove_file, path, self.pods_dir)

    async def exec_sync(self, container_id: str, cmd: list[str], *,
                        timeout_seconds: float) -> tuple[int, str]:
        """ExecSync (an exec probe): the exit code and the output; TimeoutError, or
        RuntimeFailure when Docker cannot run it."""
        try:
            code, output = await self.client.exec_run(container_id, cmd,
                                                      timeout_seconds=timeout_seconds)
        except DockerError as e:
            raise RuntimeFailure(e.message) from e
        return code, output.decode(errors="replace")

    async def container_logs(self, container_id: str, *, follow: bool = False,
                             tail_lines: int | None = None, timestamps: bool = False,
                             since_seconds: int | None = None) -> AsyncIterator[bytes]:
        data = await self.client.inspect_container(container_id)
        if data is None:
            raise NotFoundError(404, f"container {container_id} not found")
        tty = bool((data.get("Config") or {}).get("Tty"))
        since = None
        if since_seconds is not None:
            since = int(datetime.now(UTC).timestamp()) - since_seconds
        async for chunk in self.client.logs(container_id, follow=follow, tail=tail_lines,
                                            timestamps=timestamps, since=since, tty=tty):
            yield chunk


def _create_empty_file(path: str) -> None:
    """An empty termination-log file anyone in the container may write (as kube: 0666)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass
    os.chmod(path, 0o666)


def _remove_file(path: str, root: str) -> None:
    """The file, then its directories while they are empty (never `root` itself)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    directory = os.path.dirname(path)
    while directory.startswith(root + os.sep):
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = os.path.dirname(directory)
