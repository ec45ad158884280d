"""The Docker Engine API over its unix socket (httpx): the endpoints the kubelet uses,
returning Docker's JSON. Errors raise `DockerError` (404 -> `NotFoundError`, 409 ->
`ConflictError`). What the JSON means for a pod is `kubelet.docker.convert`'s."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from kubelet.metrics import KubeletMetrics, timed
from kubelet.runtime import parse_image

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
        # kubelet_runtime_operations_*: set by the kubelet to count and time each call
        self.runtime_metrics: KubeletMetrics | None = None
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

    @timed("version")
    async def version(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/version"))

    async def info(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/info"))

    # --- images ---
    @timed("image_status")
    async def inspect_image(self, image: str) -> dict[str, Any] | None:
        try:
            return dict(await self._call("GET", f"/images/{quote(image, safe='/:@')}/json"))
        except NotFoundError:
            return None

    @timed("pull_image")
    async def pull_image(self, image: str, *, registry_auth: str | None = None) -> None:
        """Pull and wait for the end of the progress stream; a failure raises DockerError.
        `registry_auth` is the `X-Registry-Auth` header (kubelet.credentials).

        Docker reports some failures as an HTTP error and others as an `error` line in
        the middle of a 200 stream, so both are checked.
        """
        ref = parse_image(image)
        params = {"fromImage": ref.repository, "tag": ref.digest or ref.tag}
        # Pulls can take minutes: no read timeout, the progress stream keeps coming.
        timeout = httpx.Timeout(self.timeout, read=None)
        headers = {"X-Registry-Auth": registry_auth} if registry_auth else {}
        async with self._http.stream("POST", "/images/create", params=params,
                                     headers=headers, timeout=timeout) as response:
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
    @timed("create_container")
    async def create_container(self, name: str, body: Mapping[str, Any]) -> str:
        created = await self._call("POST", "/containers/create", params={"name": name},
                                   body=dict(body))
        for warning in created.get("Warnings") or []:
            log.warning("docker create %s: %s", name, warning)
        return str(created["Id"])

    @timed("start_container")
    async def start_container(self, container_id: str) -> None:
        await self._call("POST", f"/containers/{container_id}/start")

    @timed("stop_container")
    async def stop_container(self, container_id: str, *, timeout_seconds: int) -> None:
        """SIGTERM (or the image's StopSignal), then SIGKILL after the timeout; Docker waits."""
        await self._call("POST", f"/containers/{container_id}/stop",
                         params={"t": str(max(timeout_seconds, 0))},
                         request_timeout=self.timeout + max(timeout_seconds, 0))

    @timed("kill_container")
    async def kill_container(self, container_id: str, *, signal: str = "SIGKILL") -> None:
        await self._call("POST", f"/containers/{container_id}/kill", params={"signal": signal},
                         ok=(409,))  # 409: not running

    @timed("remove_container")
    async def remove_container(self, container_id: str, *, force: bool = True) -> None:
        try:
            await self._call("DELETE", f"/containers/{container_id}",
                             params={"force": str(force).lower(), "v": "true"})
        except NotFoundError:
            pass

    @timed("container_status")
    async def inspect_container(self, container_id: str) -> dict[str, Any] | None:
        try:
            return dict(await self._call("GET", f"/containers/{container_id}/json"))
        except NotFoundError:
            return None

    @timed("list_containers")
    async def list_containers(self, *, labels: Mapping[str, str],
                              all_: bool = True) -> list[dict[str, Any]]:
        params = {"all": "true" if all_ else "false", "filters": label_filters(labels)}
        return list(await self._call("GET", "/containers/json", params=params) or [])

    @timed("exec_sync")
    async def exec_run(self, container_id: str, cmd: list[str], *,
                       timeout_seconds: float) -> tuple[int, bytes]:
        """Run `cmd` in the container to its end (an exec probe): (exit code, stdout and
        stderr as they came). TimeoutError when it takes longer than `timeout_seconds`."""
        created = await self._call("POST", f"/containers/{container_id}/exec", body={
            "Cmd": list(cmd), "AttachStdout": True, "AttachStderr": True, "Tty": False})
        exec_id = str(created["Id"])
        output = bytearray()
        async with asyncio.timeout(timeout_seconds):
            async with self._http.stream("POST", f"/exec/{exec_id}/start",
                                         json={"Detach": False, "Tty": False},
                                         timeout=httpx.Timeout(self.timeout, read=None)
                                         ) as response:
                if response.status_code >= 400:
                    raise _error_for(response.status_code, await response.aread())
                async for payload in demultiplex(response.aiter_bytes()):
                    output += payload
        inspected = await self._call("GET", f"/exec/{exec_id}/json")
        return int(inspected.get("ExitCode") or 0), bytes(output)

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
