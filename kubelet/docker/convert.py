"""Pure conversions between pods and Docker: a pod spec becomes a container create body
(`sandbox_create_body`, `container_create_body`), and Docker's list and inspect JSON
becomes the runtime's dataclasses (`summary_from_list`, `container_from_inspect`,
`sandbox_from_inspect`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubelet import qos, resources
from kubelet.dns import DnsConfig, docker_dns
from kubelet.env import PodContext, container_env, expand_command
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
    ImageInfo,
    PodRef,
    SandboxInfo,
    container_spec_hash,
    pod_labels,
    pod_ref,
)
from kubelet.termination import message_labels


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


def _env_list(variables: Mapping[str, str]) -> list[str]:
    return [f"{name}={value}" for name, value in variables.items()]


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
                        node_ip: str, dns: DnsConfig | None = None) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    bindings = host_port_bindings(pod, node_ip=node_ip)
    host_config: dict[str, Any] = {
        "NetworkMode": "host" if is_host_network(pod) else "bridge",
        "RestartPolicy": {"Name": "no"},
        "IpcMode": "host" if spec.get("hostIPC") else "shareable",
    }
    if spec.get("hostPID"):
        host_config["PidMode"] = "host"
    if dns is not None:
        # The pod's containers join this network namespace and so share its resolv.conf.
        host_config.update(docker_dns(dns))
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
                          pid_target: str | None = None,
                          memory_capacity: int = 0,
                          termination_log: str = "",
                          env_context: PodContext | None = None,
                          mounts: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A Docker create body for one pod container joining the sandbox's namespaces (and,
    for an ephemeral container with a target, the target's PID namespace).

    command -> Entrypoint and args -> Cmd, which gives Kubernetes' override rules: an
    Entrypoint set without Cmd drops the image's CMD, args alone keep its ENTRYPOINT.
    Requests and limits become the cgroup settings kube gives them
    (`resources.container_resources`), the QoS class the OOM score (with the node's
    `memory_capacity`, for Burstable pods). `mounts`: the volume manager's bind mounts
    (`kubelet.volumes.container_mounts`), besides the termination-log file's.
    """
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
    host_config.update(resources.container_resources(container))
    if memory_capacity > 0:
        # kube gives Guaranteed containers -997; lowering a score below 0 takes
        # CAP_SYS_RESOURCE, which a Docker engine run in a container lacks (runc then fails
        # to start it), so they get 0: still below every Burstable (3..999) and BestEffort
        # (1000) container, which is what the score is for.
        host_config["OomScoreAdj"] = max(
            qos.oom_score_adj(pod, container, memory_capacity=memory_capacity), 0)
    # EnvError (CreateContainerConfigError) when a variable cannot be made.
    variables = container_env(pod, container, env_context or PodContext())
    labels = pod_labels(pod, node_name=node_name, container=str(container["name"]),
                        attempt=attempt, kind="container")
    labels[LABEL_SPEC_HASH] = container_spec_hash(container)
    binds = [dict(m) for m in mounts]
    if termination_log and container.get("terminationMessagePath"):
        # The kubelet's file at the container's terminationMessagePath, read once it exited.
        labels.update(message_labels(container))
        binds.append({"Type": "bind", "Source": termination_log,
                      "Target": str(container["terminationMessagePath"])})
    if binds:
        host_config["Mounts"] = binds
    body: dict[str, Any] = {
        "Image": container["image"],
        "Env": _env_list(variables),
        "Labels": labels,
        "Tty": bool(container.get("tty")),
        "OpenStdin": bool(container.get("stdin")),
        "StdinOnce": bool(container.get("stdinOnce")),
        "HostConfig": host_config,
    }
    if container.get("command"):
        body["Entrypoint"] = expand_command(list(container["command"]), variables)
        body["Cmd"] = expand_command(list(container.get("args") or []), variables)
    elif container.get("args"):
        body["Cmd"] = expand_command(list(container["args"]), variables)
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
