"""The Docker containers a kubelite cluster's kubelets made, found and removed by label only.

Shared by `make down` (hack/up.py) and the compose kubelet's entrypoint
(hack/kubelet_entrypoint.py). Every container a kubelet creates carries
`io.kubelite.managed=true` and `io.kubelite.node=<node name>` (kubelet/runtime.py), so
filtering on both, per node of this cluster, never touches anything else on the daemon.
Standard library only: the entrypoint runs it inside the component image.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any

DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock"
LABEL_MANAGED = "io.kubelite.managed"
LABEL_NODE = "io.kubelite.node"


class DockerUnavailable(Exception):
    """No Docker daemon answers on the socket."""


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, timeout: float) -> None:
        super().__init__("docker", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def docker_request(socket_path: str, method: str, path: str, *,
                   query: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, Any]:
    """One Engine API call: (status, decoded JSON body or None)."""
    url = path + ("?" + urllib.parse.urlencode(query) if query else "")
    connection = _UnixHTTPConnection(socket_path, timeout)
    try:
        connection.request(method, url)
        response = connection.getresponse()
        body = response.read()
    except OSError as e:
        raise DockerUnavailable(f"no Docker daemon answers on {socket_path}: {e}") from e
    finally:
        connection.close()
    try:
        return response.status, json.loads(body) if body else None
    except ValueError:
        return response.status, body.decode(errors="replace")


def docker_answers(socket_path: str) -> bool:
    try:
        status, _ = docker_request(socket_path, "GET", "/_ping", timeout=3)
    except DockerUnavailable:
        return False
    return status == 200


def image_exists(socket_path: str, image: str) -> bool:
    status, _ = docker_request(socket_path, "GET", f"/images/{image}/json", timeout=10)
    return status == 200


def node_label_filter(node_name: str) -> str:
    """The Engine API `filters` value that selects one kubelet's containers."""
    return json.dumps({"label": [f"{LABEL_MANAGED}=true", f"{LABEL_NODE}={node_name}"]})


def pod_containers(socket_path: str, node_names: list[str]) -> list[dict[str, Any]]:
    """Every container (running or not) the kubelets of these nodes made."""
    found: list[dict[str, Any]] = []
    for node in node_names:
        status, body = docker_request(socket_path, "GET", "/containers/json",
                                      query={"all": "true", "filters": node_label_filter(node)})
        if status != 200:
            raise DockerUnavailable(f"listing containers failed: HTTP {status}: {body}")
        found.extend(body or [])
    return found


def remove_pod_containers(socket_path: str, node_names: list[str]) -> list[str]:
    """Force-remove the containers the kubelets of these nodes made; returns their names."""
    removed: list[str] = []
    containers = pod_containers(socket_path, node_names)
    # App containers first, then the sandboxes they share namespaces with.
    containers.sort(key=lambda c: (c.get("Labels") or {}).get("io.kubernetes.docker.type")
                    == "podsandbox")
    for container in containers:
        status, body = docker_request(socket_path, "DELETE", f"/containers/{container['Id']}",
                                      query={"force": "true", "v": "true"})
        if status in (204, 404):
            removed.append(str((container.get("Names") or [container["Id"][:12]])[0]).lstrip("/"))
        elif status != 409:  # 409: removal already in progress
            raise DockerUnavailable(f"removing {container['Id'][:12]} failed: HTTP {status}: "
                                    f"{body}")
    return removed
