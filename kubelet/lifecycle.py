"""Container lifecycle hooks (after kubelet's `pkg/kubelet/lifecycle/handlers.go` and
kuberuntime_container.go's startContainer / killContainer / executePreStopHook).

`postStart` runs right after the container started; if it fails the kubelet records a
`FailedPostStartHook` event and kills the container (which then restarts per the pod's
restartPolicy). `preStop` runs before the stop signal, within the grace period: whatever
time it takes is taken off the grace period (never below kube's 2 s minimum), and a failed
or timed out one records `FailedPreStopHook` (the container is stopped all the same).
Handlers: exec (in the container), httpGet (to the pod's IP unless `host` says else) and
sleep. Each returns kube's message on failure, None on success.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from typing import Any

import httpx

from kubelet.prober.run import Exec, http_url, resolve_port
from kubelet.runtime import RuntimeFailure

MINIMUM_GRACE_PERIOD_SECONDS = 2  # kuberuntime's minimumGracePeriodInSeconds
# kube runs postStart without a timeout; a bound here keeps a hung hook from holding the
# pod worker forever.
POST_START_TIMEOUT_SECONDS = 300.0


def go_strings(values: list[str]) -> str:
    """A []string as Go's %v prints it: [sh -c exit 3]."""
    return "[" + " ".join(values) + "]"


def go_quote(text: str) -> str:
    """A string as Go's %q prints it (close enough: JSON's escapes)."""
    return json.dumps(text, ensure_ascii=False)


def exec_failure(command: list[str], *, container: str, pod: str, error: str,
                 output: str) -> str:
    return (f"Exec lifecycle hook ({go_strings(command)}) for Container {go_quote(container)} "
            f"in Pod {go_quote(pod)} failed - error: {error}, message: {go_quote(output)}")


def http_failure(path: str, *, container: str, pod: str, error: str) -> str:
    return (f"HTTP lifecycle hook ({path}) for Container {go_quote(container)} in Pod "
            f"{go_quote(pod)} failed - error: {error}")


def handler_kind(handler: Mapping[str, Any]) -> str:
    for kind in ("exec", "httpGet", "sleep", "tcpSocket"):
        if handler.get(kind) is not None:
            return kind
    return ""


def remaining_grace(grace_seconds: int, hook_seconds: float) -> int:
    """killContainer: the grace period left once preStop took `hook_seconds`, at least
    the minimum shutdown window."""
    return max(grace_seconds - int(hook_seconds), MINIMUM_GRACE_PERIOD_SECONDS)


async def run_handler(handler: Mapping[str, Any], *, container: Mapping[str, Any],
                      container_id: str, pod_name: str, pod_ip: str, runtime: Exec,
                      timeout: float) -> str | None:
    """Run one lifecycle handler; None when it succeeded, else kube's message."""
    name = str(container.get("name") or "")
    kind = handler_kind(handler)
    if kind == "exec":
        command = [str(c) for c in (handler["exec"] or {}).get("command") or []]
        try:
            code, output = await runtime.exec_sync(container_id, command,
                                                   timeout_seconds=timeout)
        except TimeoutError:
            return exec_failure(command, container=name, pod=pod_name, output="",
                                error=f"command {' '.join(command)!r} timed out")
        except RuntimeFailure as e:
            return exec_failure(command, container=name, pod=pod_name, error=e.message,
                                output="")
        if code != 0:
            return exec_failure(command, container=name, pod=pod_name, output=output,
                                error=f"command '{' '.join(command)}' exited with {code}: ")
        return None
    if kind == "httpGet":
        get = handler["httpGet"] or {}
        path = str(get.get("path") or "")
        try:
            port = resolve_port(get.get("port"), container)
        except ValueError as e:
            return http_failure(path, container=name, pod=pod_name, error=str(e))
        url = http_url(get, host=str(get.get("host") or pod_ip), port=port)
        headers = {str(h["name"]): str(h.get("value", "")) for h in get.get("httpHeaders") or []}
        try:
            async with httpx.AsyncClient(verify=False, timeout=timeout) as client:
                response = await client.get(url, headers=headers)
        except httpx.HTTPError as e:
            return http_failure(path, container=name, pod=pod_name,
                                error=f'Get "{url}": {e or type(e).__name__}')
        if not 200 <= response.status_code < 400:
            return http_failure(path, container=name, pod=pod_name,
                                error=f"HTTP lifecycle hook failed with statuscode: "
                                      f"{response.status_code}")
        return None
    if kind == "sleep":
        seconds = float((handler["sleep"] or {}).get("seconds") or 0)
        await asyncio.sleep(min(seconds, timeout) if math.isfinite(timeout) else seconds)
        return None
    return f"Cannot run handler: unsupported lifecycle handler {kind or 'without an action'}"
