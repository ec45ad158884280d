"""Running one probe: exec in the container, an HTTP GET, a TCP connection or a gRPC
health check to the pod (after kubelet's `pkg/kubelet/prober/prober.go` and
`pkg/probe/*`). Each returns (success, output) with kube's wording for failures."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from kubelet.prober import grpc_health
from kubelet.prober.probes import Probe
from kubelet.runtime import RuntimeFailure


class Exec(Protocol):
    async def exec_sync(self, container_id: str, cmd: list[str], *,
                        timeout_seconds: float) -> tuple[int, str]: ...


def resolve_port(port: Any, container: Mapping[str, Any]) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    text = str(port)
    if text.isdigit():
        return int(text)
    for declared in container.get("ports") or []:
        if declared.get("name") == text:
            return int(declared["containerPort"])
    raise ValueError(f"couldn't find port: {text} in {container.get('name')}")


def http_url(get: Mapping[str, Any], *, host: str, port: int) -> str:
    scheme = str(get.get("scheme") or "HTTP").lower()
    path = str(get.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    return f"{scheme}://{host}:{port}{path}"


def http_outcome(status_code: int) -> tuple[bool, str]:
    """pkg/probe/http: 200-399 succeed; anything else fails with its status code."""
    if 200 <= status_code < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {status_code}"


async def run_probe(probe: Probe, *, container: Mapping[str, Any], container_id: str,
                    pod_ip: str, runtime: Exec) -> tuple[bool, str]:
    handler = probe.handler
    timeout = probe.timeout_seconds
    if "exec" in handler:
        command = [str(c) for c in (handler["exec"] or {}).get("command") or []]
        try:
            code, output = await runtime.exec_sync(container_id, command,
                                                   timeout_seconds=timeout)
        except TimeoutError:
            return False, f"command {' '.join(command)!r} timed out"
        except RuntimeFailure as e:
            return False, e.message
        return code == 0, output.strip() if code else output
    try:
        if "httpGet" in handler:
            get = handler["httpGet"] or {}
            port = resolve_port(get.get("port"), container)
            url = http_url(get, host=str(get.get("host") or pod_ip), port=port)
            headers = {"User-Agent": "kube-probe/1.37", "Accept": "*/*"}
            headers.update({str(h["name"]): str(h.get("value", ""))
                            for h in get.get("httpHeaders") or []})
            try:
                async with httpx.AsyncClient(verify=False, timeout=timeout) as client:
                    response = await client.get(url, headers=headers)
            except httpx.HTTPError as e:
                return False, f'Get "{url}": {e or type(e).__name__}'
            return http_outcome(response.status_code)
        if "tcpSocket" in handler:
            tcp = handler["tcpSocket"] or {}
            host = str(tcp.get("host") or pod_ip)
            port = resolve_port(tcp.get("port"), container)
            try:
                async with asyncio.timeout(timeout):
                    _reader, writer = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError) as e:
                return False, f"dial tcp {host}:{port}: {e or 'i/o timeout'}"
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True, ""
        if "grpc" in handler:
            grpc = handler["grpc"] or {}
            return await grpc_health.check(pod_ip, int(grpc.get("port") or 0),
                                           str(grpc.get("service") or ""), timeout)
    except ValueError as e:
        return False, str(e)
    return False, "probe has no handler"
