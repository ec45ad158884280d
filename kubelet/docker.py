"""The Docker Engine API over its unix socket (httpx), and the kubelet runtime built on it.

Two layers, both small:
- `DockerClient`: the Engine API endpoints the kubelet uses, returning Docker's JSON.
  Errors raise `DockerError` (404 -> `NotFoundError`, 409 -> `ConflictError`).
- `DockerRuntime`: `kubelet.runtime.Runtime` on top of it; pod specs become Docker
  create bodies through the pure `sandbox_create_body` / `container_create_body`.
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from kubelet import resources
from kubelet.runtime import (
    LABEL_ATTEMPT,
    LABEL_CONTAINER_NAME,
    LABEL_CONTAINER_TYPE,
    LABEL_GRACE_PERIOD,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    LABEL_SPEC_HASH,
    SANDBOX_CONTAINER_NAME,
    TYPE_SANDBOX,
    ContainerInfo,
    ContainerState,
    ContainerSummary,
    CreateContainerError,
    ImageInfo,
    ImageNotPresent,
    ImagePullError,
    PodObservation,
    PodRef,
    RuntimeVersion,
    SandboxInfo,
    StartContainerError,
    build_observation,
    container_name,
    container_spec_hash,
    node_selector_labels,
    parse_image,
    pod_labels,
    pod_ref,
    sandbox_name,
)

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/run/docker.sock"
_STREAM_HEADER = struct.Struct(">BxxxL")  # stream type (1 stdout, 2 stderr), 3 pad, size


class DockerError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


class NotFoundError(DockerError):
    pass


class ConflictError(DockerError):
    pass


def _error_for(response_status: int, body: bytes) -> DockerError:
    try:
        message = str(json.loads(body).get("message") or "")
    except (ValueError, AttributeError):
        message = body.decode(errors="replace").strip()
    message = message or f"Docker answered HTTP {response_status}"
    if response_status == 404:
        return NotFoundError(response_status, message)
    if response_status == 409:
        return ConflictError(response_status, message)
    return DockerError(response_status, message)


def label_filters(labels: Mapping[str, str]) -> str:
    return json.dumps({"label": [f"{k}={v}" for k, v in sorted(labels.items())]})


class DockerClient:
    """The Docker Engine API endpoints the kubelet needs (unversioned paths: the daemon's own)."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, *, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        # No cap on connections: pulls, stops (up to a grace period) and followed logs hold
        # one each for a long time, and a capped pool would then starve the PLEG relist
        # and the node heartbeat (local unix-socket connections are cheap).
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
        self._http = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(uds=socket_path, limits=limits),
            base_url="http://docker", timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> DockerClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                    body: Any = None, request_timeout: float | None = None,
                    ok: tuple[int, ...] = ()) -> Any:
        response = await self._http.request(
            method, path, params=params, json=body,
            timeout=self.timeout if request_timeout is None else request_timeout)
        if response.status_code >= 400 and response.status_code not in ok:
            raise _error_for(response.status_code, response.content)
        if not response.content or response.status_code in (204, 304):
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    # --- daemon ---
    async def ping(self) -> bool:
        try:
            response = await self._http.get("/_ping", timeout=5)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def version(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/version"))

    async def info(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/info"))

    # --- images ---
    async def inspect_image(self, image: str) -> dict[str, Any] | None:
        try:
            return dict(await self._call("GET", f"/images/{quote(image, safe='/:@')}/json"))
        except NotFoundError:
            return None

    async def pull_image(self, image: str) -> None:
        """Pull and wait for the end of the progress stream; a failure raises DockerError.

        Docker reports some failures as an HTTP error and others as an `error` line in
        the middle of a 200 stream, so both are checked.
        """
        ref = parse_image(image)
        params = {"fromImage": ref.repository, "tag": ref.digest or ref.tag}
        # Pulls can take minutes: no read timeout, the progress stream keeps coming.
        timeout = httpx.Timeout(self.timeout, read=None)
        async with self._http.stream("POST", "/images/create", params=params,
                                     timeout=timeout) as response:
            if response.status_code >= 400:
                raise _error_for(response.status_code, await response.aread())
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                try:
                    progress = json.loads(line)
                except ValueError:
                    continue
                if progress.get("error"):
                    raise DockerError(500, str(progress["error"]))
                log.debug("pull %s: %s %s", image, progress.get("status", ""),
                          progress.get("progress", ""))

    # --- containers ---
    async def create_container(self, name: str, body: Mapping[str, Any]) -> str:
        created = await self._call("POST", "/containers/create", params={"name": name},
                                   body=dict(body))
        for warning in created.get("Warnings") or []:
            log.warning("docker create %s: %s", name, warning)
        return str(created["Id"])

    async def start_container(self, container_id: str) -> None:
        await self._call("POST", f"/containers/{container_id}/start")

    async def stop_container(self, container_id: str, *, timeout_seconds: int) -> None:
        """SIGTERM (or the image's StopSignal), then SIGKILL after the timeout; Docker waits."""
        await self._call("POST", f"/containers/{container_id}/stop",
                         params={"t": str(max(timeout_seconds, 0))},
                         request_timeout=self.timeout + max(timeout_seconds, 0))

    async def kill_container(self, container_id: str, *, signal: str = "SIGKILL") -> None:
        await self._call("POST", f"/containers/{container_id}/kill", params={"signal": signal},
                         ok=(409,))  # 409: not running

    async def remove_container(self, container_id: str, *, force: bool = True) -> None:
        try:
            await self._call("DELETE", f"/containers/{container_id}",
                             params={"force": str(force).lower(), "v": "true"})
        except NotFoundError:
            pass

    async def inspect_container(self, container_id: str) -> dict[str, Any] | None:
        try:
            return dict(await self._call("GET", f"/containers/{container_id}/json"))
        except NotFoundError:
            return None

    async def list_containers(self, *, labels: Mapping[str, str],
                              all_: bool = True) -> list[dict[str, Any]]:
        params = {"all": "true" if all_ else "false", "filters": label_filters(labels)}
        return list(await self._call("GET", "/containers/json", params=params) or [])

    async def logs(self, container_id: str, *, follow: bool = False,
                   tail: int | None = None, timestamps: bool = False,
                   since: int | None = None, tty: bool = False) -> AsyncIterator[bytes]:
        """The container's stdout+stderr, demultiplexed unless it has a TTY."""
        params = {"stdout": "true", "stderr": "true", "follow": str(follow).lower(),
                  "timestamps": str(timestamps).lower(),
                  "tail": "all" if tail is None else str(max(tail, 0))}
        if since is not None:
            params["since"] = str(since)
        timeout = httpx.Timeout(self.timeout, read=None if follow else self.timeout)
        async with self._http.stream("GET", f"/containers/{container_id}/logs", params=params,
                                     timeout=timeout) as response:
            if response.status_code >= 400:
                raise _error_for(response.status_code, await response.aread())
            if tty:
                async for chunk in response.aiter_bytes():
                    yield chunk
                return
            async for payload in demultiplex(response.aiter_bytes()):
                yield payload


async def demultiplex(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Strip Docker's 8-byte frame headers from a non-TTY attach/logs stream."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        while len(buffer) >= _STREAM_HEADER.size:
            _stream, size = _STREAM_HEADER.unpack_from(buffer)
            end = _STREAM_HEADER.size + size
            if len(buffer) < end:
                break
            yield buffer[_STREAM_HEADER.size:end]
            buffer = buffer[end:]
    if buffer:
        yield buffer  # a truncated frame: better shown than lost


# --- pure conversions between pod specs and Docker -------------------------------------

def parse_docker_time(value: str | None) -> datetime | None:
    """Docker's RFC 3339 nanosecond timestamps; its zero time means "never"."""
    if not value or value.startswith("0001-01-01"):
        return None
    text = value.replace("Z", "+00:00")
    if "." in text:  # Python keeps microseconds: cut the nanoseconds, keep the offset
        whole, frac = text.split(".", 1)
        digits = "".join(ch for ch in frac if ch.isdigit())
        text = f"{whole}.{digits[:6].ljust(6, '0')}{frac[len(digits):]}"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _state_of(docker_state: str) -> ContainerState:
    if docker_state in ("running", "paused", "restarting"):
        return "running"
    if docker_state in ("exited", "dead"):
        return "exited"
    if docker_state == "created":
        return "created"
    return "unknown"


def _pod_ref_from_labels(labels: Mapping[str, str]) -> PodRef:
    return PodRef(uid=labels.get(LABEL_POD_UID, ""), name=labels.get(LABEL_POD_NAME, ""),
                  namespace=labels.get(LABEL_POD_NAMESPACE, ""))


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    try:
        return int(labels[key])
    except (KeyError, ValueError):
        return None


def summary_from_list(item: Mapping[str, Any]) -> ContainerSummary:
    labels = item.get("Labels") or {}
    return ContainerSummary(
        id=str(item["Id"]), pod=_pod_ref_from_labels(labels),
        name=labels.get(LABEL_CONTAINER_NAME, ""),
        is_sandbox=labels.get(LABEL_CONTAINER_TYPE) == TYPE_SANDBOX,
        state=_state_of(str(item.get("State") or "")),
        grace_period=_int_label(labels, LABEL_GRACE_PERIOD))


def container_from_inspect(data: Mapping[str, Any]) -> ContainerInfo:
    labels = (data.get("Config") or {}).get("Labels") or {}
    state = data.get("State") or {}
    status = _state_of(str(state.get("Status") or ""))
    created_at = parse_docker_time(data.get("Created"))
    finished_at = parse_docker_time(state.get("FinishedAt"))
    error = str(state.get("Error") or "")
    if status == "created" and error:
        # Docker leaves a container whose start failed (bad command...) in "created",
        # with the error and exit code 127: for the kubelet it ran and failed.
        status, finished_at = "exited", finished_at or created_at
    return ContainerInfo(
        id=str(data["Id"]), name=labels.get(LABEL_CONTAINER_NAME, ""),
        pod=_pod_ref_from_labels(labels), attempt=_int_label(labels, LABEL_ATTEMPT) or 0,
        image=(data.get("Config") or {}).get("Image", ""), image_id=str(data.get("Image") or ""),
        state=status,
        exit_code=int(state.get("ExitCode") or 0), oom_killed=bool(state.get("OOMKilled")),
        error=error, created_at=created_at,
        started_at=parse_docker_time(state.get("StartedAt")),
        finished_at=finished_at,
        spec_hash=labels.get(LABEL_SPEC_HASH, ""),
        grace_period=_int_label(labels, LABEL_GRACE_PERIOD))


def sandbox_from_inspect(data: Mapping[str, Any]) -> SandboxInfo:
    labels = (data.get("Config") or {}).get("Labels") or {}
    host_config = data.get("HostConfig") or {}
    settings = data.get("NetworkSettings") or {}
    ip = str(settings.get("IPAddress") or "")
    if not ip:
        for network in (settings.get("Networks") or {}).values():
            if network and network.get("IPAddress"):
                ip = str(network["IPAddress"])
                break
    return SandboxInfo(
        id=str(data["Id"]), pod=_pod_ref_from_labels(labels),
        attempt=_int_label(labels, LABEL_ATTEMPT) or 0,
        state=_state_of(str((data.get("State") or {}).get("Status") or "")),
        ip=ip, host_network=host_config.get("NetworkMode") == "host",
        created_at=parse_docker_time(data.get("Created")),
        grace_period=_int_label(labels, LABEL_GRACE_PERIOD))


def _env_list(container: Mapping[str, Any]) -> list[str]:
    """Plain `value` env vars; `valueFrom` needs API objects we do not serve, so it is empty."""
    env = []
    for var in container.get("env") or []:
        env.append(f"{var['name']}={var.get('value', '')}")
    return env


def host_port_bindings(pod: Mapping[str, Any], *,
                       node_ip: str) -> dict[str, list[dict[str, str]]]:
    """hostPort -> a Docker port binding on the node's address (or the port's hostIP).

    The node advertises `--node-ip`, so that is where a hostPort is reachable, as on a
    real node; binding there rather than on 0.0.0.0 keeps a loopback-only node loopback-only.
    """
    bindings: dict[str, list[dict[str, str]]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if not port.get("hostPort"):
                continue
            key = port_key(port)
            bindings.setdefault(key, []).append(
                {"HostIp": str(port.get("hostIP") or node_ip), "HostPort": str(port["hostPort"])})
    return bindings


def is_host_network(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("hostNetwork"))


def sandbox_create_body(pod: Mapping[str, Any], *, node_name: str, image: str, attempt: int,
                        node_ip: str) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    bindings = host_port_bindings(pod, node_ip=node_ip)
    host_config: dict[str, Any] = {
        "NetworkMode": "host" if is_host_network(pod) else "bridge",
        "RestartPolicy": {"Name": "no"},
        "IpcMode": "host" if spec.get("hostIPC") else "shareable",
    }
    if spec.get("hostPID"):
        host_config["PidMode"] = "host"
    body: dict[str, Any] = {
        "Image": image,
        "Labels": pod_labels(pod, node_name=node_name, container=SANDBOX_CONTAINER_NAME,
                             attempt=attempt, kind=TYPE_SANDBOX),
        "HostConfig": host_config,
    }
    if not is_host_network(pod):
        body["Hostname"] = str(spec.get("hostname") or pod_ref(pod).name)[:63]
        # The pod's ports belong to its network namespace, i.e. to the sandbox: Docker
        # refuses exposed ports on a container that joins another's network.
        exposed: dict[str, dict[str, Any]] = {port_key(port): {} for container in spec.get("containers") or []
                   for port in container.get("ports") or []}
        if exposed:
            body["ExposedPorts"] = exposed
        if bindings:
            host_config["PortBindings"] = bindings
    return body


def port_key(port: Mapping[str, Any]) -> str:
    """Docker's name of a container port: `80/tcp`."""
    return f"{port['containerPort']}/{str(port.get('protocol') or 'TCP').lower()}"


def container_create_body(pod: Mapping[str, Any], container: Mapping[str, Any], *,
                          node_name: str, sandbox_id: str, attempt: int,
                          pid_target: str | None = None) -> dict[str, Any]:
    """A Docker create body for one pod container joining the sandbox's namespaces (and,
    for an ephemeral container with a target, the target's PID namespace).

    command -> Entrypoint and args -> Cmd, which gives Kubernetes' override rules: an
    Entrypoint set without Cmd drops the image's CMD, args alone keep its ENTRYPOINT.
    """
    limits = (container.get("resources") or {}).get("limits") or {}
    spec = pod.get("spec") or {}
    shared = f"container:{sandbox_id}"
    host_config: dict[str, Any] = {
        "NetworkMode": shared,
        "IpcMode": "host" if spec.get("hostIPC") else shared,
        "RestartPolicy": {"Name": "no"},
    }
    if spec.get("hostPID"):
        host_config["PidMode"] = "host"
    elif pid_target:
        host_config["PidMode"] = f"container:{pid_target}"
    elif spec.get("shareProcessNamespace"):
        host_config["PidMode"] = shared
    if "cpu" in limits:
        host_config["NanoCpus"] = resources.nano_cpus(limits["cpu"])
    if "memory" in limits:
        host_config["Memory"] = resources.memory_bytes(limits["memory"])
    labels = pod_labels(pod, node_name=node_name, container=str(container["name"]),
                        attempt=attempt, kind="container")
    labels[LABEL_SPEC_HASH] = container_spec_hash(container)
    body: dict[str, Any] = {
        "Image": container["image"],
        "Env": _env_list(container),
        "Labels": labels,
        "Tty": bool(container.get("tty")),
        "OpenStdin": bool(container.get("stdin")),
        "StdinOnce": bool(container.get("stdinOnce")),
        "HostConfig": host_config,
    }
    if container.get("command"):
        body["Entrypoint"] = list(container["command"])
        body["Cmd"] = list(container.get("args") or [])
    elif container.get("args"):
        body["Cmd"] = list(container["args"])
    if container.get("workingDir"):
        body["WorkingDir"] = container["workingDir"]
    apply_security_context(body, pod, container)
    return body


def apply_security_context(body: dict[str, Any], pod: Mapping[str, Any],
                           container: Mapping[str, Any]) -> None:
    """The security settings the kubelet honours (the apiserver refuses the others, see
    apiserver/resources/pod_admission.py): the container's own, else the pod's."""
    pod_security = (pod.get("spec") or {}).get("securityContext") or {}
    security = container.get("securityContext") or {}
    host_config = body["HostConfig"]
    user = security.get("runAsUser", pod_security.get("runAsUser"))
    group = security.get("runAsGroup", pod_security.get("runAsGroup"))
    if user is not None:
        body["User"] = f"{user}:{group}" if group is not None else str(user)
    groups = [*(pod_security.get("supplementalGroups") or [])]
    if pod_security.get("fsGroup") is not None:
        groups.append(pod_security["fsGroup"])
    if groups:
        host_config["GroupAdd"] = [str(g) for g in groups]
    if security.get("privileged"):
        host_config["Privileged"] = True
    if security.get("readOnlyRootFilesystem"):
        host_config["ReadonlyRootfs"] = True
    capabilities = security.get("capabilities") or {}
    if capabilities.get("add"):
        host_config["CapAdd"] = [str(c) for c in capabilities["add"]]
    if capabilities.get("drop"):
        host_config["CapDrop"] = [str(c) for c in capabilities["drop"]]
    if security.get("allowPrivilegeEscalation") is False:
        host_config["SecurityOpt"] = ["no-new-privileges"]


def image_info(data: Mapping[str, Any]) -> ImageInfo:
    return ImageInfo(id=str(data.get("Id") or ""), repo_tags=tuple(data.get("RepoTags") or ()),
                     size=int(data.get("Size") or 0))


class DockerRuntime:
    """`kubelet.runtime.Runtime` on the Docker Engine API, scoped to one node's containers."""

    def __init__(self, client: DockerClient, *, node_name: str, sandbox_image: str) -> None:
        self.client = client
        self.node_name = node_name
        self.sandbox_image = sandbox_image

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
        return [summary_from_list(item) for item in listed]

    async def observe_pod(self, pod_uid: str) -> PodObservation:
        labels = {**node_selector_labels(self.node_name), LABEL_POD_UID: pod_uid}
        listed = await self.client.list_containers(labels=labels)
        found = [await self.inspect(summary_from_list(item)) for item in listed]
        return build_observation(item for item in found if item is not None)

    async def inspect(self, summary: ContainerSummary) -> ContainerInfo | SandboxInfo | None:
        data = await self.client.inspect_container(summary.id)
        if data is None:  # removed between list and inspect
            return None
        return sandbox_from_inspect(data) if summary.is_sandbox else container_from_inspect(data)

    async def inspect_image(self, image: str) -> ImageInfo | None:
        data = await self.client.inspect_image(str(parse_image(image)))
        return image_info(data) if data is not None else None

    async def pull_image(self, image: str) -> ImageInfo:
        try:
            await self.client.pull_image(image)
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

    async def run_sandbox(self, pod: Mapping[str, Any], *, attempt: int, node_ip: str) -> str:
        await self.ensure_sandbox_image()
        body = sandbox_create_body(pod, node_name=self.node_name, image=self.sandbox_image,
                                   attempt=attempt, node_ip=node_ip)
        name = sandbox_name(pod=pod_ref(pod), attempt=attempt)
        sandbox_id = await self._create(name, body)
        try:
            await self.client.start_container(sandbox_id)
        except DockerError as e:
            raise StartContainerError(f"failed to start pod sandbox: {e.message}") from e
        return sandbox_id

    async def create_container(self, pod: Mapping[str, Any], container: Mapping[str, Any], *,
                               sandbox: SandboxInfo, attempt: int,
                               pid_target: str | None = None) -> str:
        body = container_create_body(pod, container, node_name=self.node_name,
                                     sandbox_id=sandbox.id, attempt=attempt,
                                     pid_target=pid_target)
        name = container_name(container=str(container["name"]), pod=pod_ref(pod),
                              attempt=attempt)
        return await self._create(name, body)

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
        await self.client.remove_container(container_id, force=True)

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
