"""Termination messages (after kuberuntime_container.go's getTerminationMessage and
readLastStringFromContainerLogs): what a container wrote to its
`terminationMessagePath` (default /dev/termination-log, a file of the kubelet's bind
mounted there) becomes `state.terminated.message`, its last 4096 bytes; with
`terminationMessagePolicy: FallbackToLogsOnError`, a container that failed and wrote
nothing there gets the tail of its log instead (the last 80 lines, at most 2048 bytes,
keeping the end). Pure functions; `kubelet.docker.runtime` does the reading."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

MAX_MESSAGE_BYTES = 4 * 1024  # kubecontainer.MaxContainerTerminationMessageLength
MAX_LOG_MESSAGE_BYTES = 2 * 1024  # MaxContainerTerminationMessageLogLength
MAX_LOG_MESSAGE_LINES = 80  # MaxContainerTerminationMessageLogLines
FALLBACK_TO_LOGS_ON_ERROR = "FallbackToLogsOnError"

LABEL_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
LABEL_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"


def message_labels(container: Mapping[str, Any]) -> dict[str, str]:
    """The labels that say, after a kubelet restart too, where the message is and how."""
    path = str(container.get("terminationMessagePath") or "")
    if not path:
        return {}
    return {LABEL_MESSAGE_PATH: path,
            LABEL_MESSAGE_POLICY: str(container.get("terminationMessagePolicy") or "File")}


def host_file(pods_dir: str, *, pod_uid: str, container: str, token: str) -> str:
    """Where the kubelet keeps one container instance's termination-log file."""
    return os.path.join(pods_dir, pod_uid, "containers", container, token)


def message_file(inspect: Mapping[str, Any]) -> str:
    """The host file mounted at the container's terminationMessagePath ("" if none)."""
    labels = (inspect.get("Config") or {}).get("Labels") or {}
    target = labels.get(LABEL_MESSAGE_PATH)
    if not target:
        return ""
    for mount in inspect.get("Mounts") or []:
        if mount.get("Destination") == target and mount.get("Type") == "bind":
            return str(mount.get("Source") or "")
    return ""


def falls_back_to_logs(inspect: Mapping[str, Any], *, exit_code: int, error: str) -> bool:
    """FallbackToLogsOnError, for a container that ran and failed (one that could not even
    start has no logs)."""
    labels = (inspect.get("Config") or {}).get("Labels") or {}
    return (labels.get(LABEL_MESSAGE_POLICY) == FALLBACK_TO_LOGS_ON_ERROR
            and exit_code != 0 and not error)


def tail_bytes(data: bytes, limit: int) -> str:
    """The last `limit` bytes, as text (a cut multi-byte character is replaced)."""
    return data[-limit:].decode(errors="replace")


def read_message_file(path: str) -> str | None:
    """tail.ReadAtMost: the file's last 4096 bytes; None when it does not exist (nothing
    written: the logs may stand in), kube's message when it cannot be read. Blocking: run
    it in a thread."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - MAX_MESSAGE_BYTES, 0))
            return tail_bytes(f.read(), MAX_MESSAGE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"Error on reading termination log {path}: {e}"


def with_message(error: str, message: str) -> str:
    """The status message: the runtime's error, then what the application wrote."""
    if not message:
        return error
    return f"{error}: {message}" if error else message
