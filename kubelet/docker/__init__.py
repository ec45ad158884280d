"""The kubelet's Docker: the Engine API client, the conversions between pods and Docker,
and the runtime built on both.

- `client`: `DockerClient`, the Engine API endpoints the kubelet uses (httpx over the
  unix socket), returning Docker's JSON.
- `convert`: pure functions, pod spec -> container create body and inspect JSON ->
  `ContainerInfo` / `SandboxInfo`.
- `runtime`: `DockerRuntime`, `kubelet.runtime.Runtime` on top of the two.
"""

from kubelet.docker.client import (
    DEFAULT_SOCKET,
    ConflictError,
    DockerClient,
    DockerError,
    NotFoundError,
    demultiplex,
    label_filters,
)
from kubelet.docker.convert import (
    apply_security_context,
    container_create_body,
    container_from_inspect,
    host_port_bindings,
    image_info,
    is_host_network,
    parse_docker_time,
    port_key,
    sandbox_create_body,
    sandbox_from_inspect,
    summary_from_list,
)
from kubelet.docker.runtime import DockerRuntime

__all__ = [
    "DEFAULT_SOCKET", "ConflictError", "DockerClient", "DockerError", "DockerRuntime",
    "NotFoundError", "apply_security_context", "container_create_body",
    "container_from_inspect", "demultiplex", "host_port_bindings", "image_info",
    "is_host_network", "label_filters", "parse_docker_time", "port_key",
    "sandbox_create_body", "sandbox_from_inspect", "summary_from_list",
]
