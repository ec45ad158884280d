"""`GET pods/{name}/log`: forwarded to the kubelet of the pod's node, as kube-apiserver does.

The kubelet is found from the Node: its InternalIP address and
`status.daemonEndpoints.kubeletEndpoint.Port`. With `--kubelet-client-certificate` (or
`--kubelet-certificate-authority`) it is called over HTTPS, presenting that certificate
(kubeadm's apiserver-kubelet-client) and verifying the kubelet's against that CA (without
one, unverified, as kube-apiserver does); else over plain HTTP. Its plain-text errors come back as
Status errors with the same message; a kubelet that cannot be reached is a 500 with
the dial error, like kube-apiserver's. With `follow=true` the answer is streamed for
as long as the kubelet streams it, and dropping the client drops the upstream stream.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from starlette.responses import Response, StreamingResponse

from apiserver.validation import is_dns1123_subdomain
from common import errors

FORWARDED_PARAMS = ("follow", "tailLines", "timestamps", "previous", "sinceSeconds",
                    "limitBytes")
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 60.0


def choose_container(pod: Mapping[str, Any], requested: str | None) -> str:
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or "")
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if requested:
        spec = pod.get("spec") or {}
        others = [str(c.get("name")) for key in ("initContainers", "ephemeralContainers")
                  for c in spec.get(key) or []]
        if requested not in names and requested not in others:
            raise errors.BadRequest(f"container {requested} is not valid for pod {name}")
        return requested
    if len(names) == 1:
        return names[0]
    if not names:
        raise errors.BadRequest(f"pod {name} has no containers")
    raise errors.BadRequest(f"a container name must be specified for pod {name}, "
                            f"choose one of: [{' '.join(names)}]")


def kubelet_base_url(node: Mapping[str, Any], *, scheme: str = "http") -> str:
    """SCHEME://HOST:PORT of the node's kubelet, built only from parts that parse as an IP
    address (or a DNS name) and a port: nothing else a Node says reaches the URL."""
    status = node.get("status") or {}
    node_name = (node.get("metadata") or {}).get("name", "")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    host = None
    for kind in ("InternalIP", "ExternalIP", "Hostname"):
        host = kubelet_host(kind, addresses.get(kind))
        if host is not None:
            break
    if host is None or not isinstance(port, int) or isinstance(port, bool) \
            or not 0 < port <= 65535:
        # kube answers a 500 here (no preferred addresses found); it is the Node the client
        # wrote, like a pod without a host (a 400), that keeps the logs out of reach
        raise errors.BadRequest(f"node {node_name} does not report a kubelet address "
                                f"(status.addresses / daemonEndpoints.kubeletEndpoint)")
    return f"{scheme}://{host}:{port}"


def kubelet_host(kind: str, address: Any) -> str | None:
    """The URL host of one node address, or None when it is not a valid one."""
    if not isinstance(address, str) or not address:
        return None
    if kind == "Hostname":
        return address if not is_dns1123_subdomain(address) else None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed


def kubelet_log_url(pod: Mapping[str, Any], node: Mapping[str, Any], container: str, *,
                    scheme: str = "http") -> str:
    meta = pod.get("metadata") or {}
    namespace = quote(str(meta.get("namespace") or "default"), safe="")
    name = quote(str(meta.get("name") or ""), safe="")
    return (f"{kubelet_base_url(node, scheme=scheme)}/containerLogs/{namespace}/{name}/"
            f"{quote(container, safe='')}")


def forwarded_params(params: Mapping[str, str]) -> dict[str, str]:
    return {key: str(params[key]) for key in FORWARDED_PARAMS if params.get(key) not in (None, "")}


def error_from_kubelet(status_code: int, body: bytes) -> errors.ApiError:
    message = body.decode(errors="replace").strip() or f"the kubelet answered HTTP {status_code}"
    if status_code == 404:
        return errors.NotFound(message)
    if status_code == 400:
        return errors.BadRequest(message)
    if status_code == 403:
        return errors.Forbidden(message)
    return errors.InternalError(message)


def _is_follow(params: Mapping[str, str]) -> bool:
    return str(params.get("follow") or "").lower() in ("true", "1")


async def proxy_pod_log(pod: dict, node: dict, params: Mapping[str, str], *,
                        tls: ssl.SSLContext | None = None) -> Response:
    """`tls`: the kubelet client's context (HTTPS); None: plain HTTP."""
    container = choose_container(pod, params.get("container"))
    url = kubelet_log_url(pod, node, container, scheme="http" if tls is None else "https")
    follow = _is_follow(params)
    timeout = httpx.Timeout(READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS,
                            read=None if follow else READ_TIMEOUT_SECONDS)
    client = httpx.AsyncClient(timeout=timeout, verify=tls if tls is not None else True)
    try:
        request = client.build_request("GET", url, params=forwarded_params(params))
        upstream = await client.send(request, stream=True)
    except httpx.HTTPError as e:
        await client.aclose()
        raise errors.InternalError(f'Get "{url}": {e}') from e
    if upstream.status_code >= 300:
        body = await upstream.aread()
        await upstream.aclose()
        await client.aclose()
        raise error_from_kubelet(upstream.status_code, body)

    if not follow:
        try:
            data = await upstream.aread()
        except httpx.HTTPError as e:
            raise errors.InternalError(f'Get "{url}": {e}') from e
        finally:
            await upstream.aclose()
            await client.aclose()
        return Response(data, media_type="text/plain")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.HTTPError:
            return  # the kubelet went away mid-stream: end the log
        finally:
            await upstream.aclose()
            await client.aclose()

    return StreamingResponse(relay(), media_type="text/plain")
