"""A container's probes and lifecycle hooks: kube's defaults (SetDefaults_Probe,
SetDefaults_HTTPGetAction) and validation (validateProbe, validateLivenessProbe,
validateReadinessProbe, validateStartupProbe, validateLifecycle, validateHandler in
pkg/apis/core/validation), with kube-apiserver's wording."""

from __future__ import annotations

import re
from typing import Any

from apiserver.validation import (
    IS_NEGATIVE_MSG,
    Cause,
    forbidden,
    invalid,
    not_supported,
    regex_error,
    required,
    validate_port_num_or_name,
)

PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
PROBE_DEFAULTS = (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                  ("failureThreshold", 3))
PROBE_COUNTS = ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                "failureThreshold")
HTTP_SCHEMES = ("HTTP", "HTTPS")
HTTP_HEADER_NAME_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_NAME = re.compile(HTTP_HEADER_NAME_FMT)
HTTP_HEADER_NAME_MSG = "a valid HTTP header must consist of alphanumeric characters or '-'"
NOT_FOR_INIT = "may not be set for init containers without restartPolicy=Always"


# --- defaults ------------------------------------------------------------------------------

def default_handlers(container: dict[str, Any]) -> None:
    """A probe's zero counts become kube's defaults; an httpGet's path and scheme too, and
    a grpc probe's service "" (the `+default=""` of GRPCAction: `kubectl describe` reads it
    without a nil check and panics on a probe without it)."""
    for key in PROBES:
        probe = container.get(key)
        if isinstance(probe, dict):
            for field, value in PROBE_DEFAULTS:
                if not probe.get(field):
                    probe[field] = value
            default_http_get(probe.get("httpGet"))
            grpc = probe.get("grpc")
            if isinstance(grpc, dict) and grpc.get("service") is None:
                grpc["service"] = ""
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                default_http_get(handler.get("httpGet"))


def default_http_get(get: Any) -> None:
    if isinstance(get, dict):
        if not get.get("path"):
            get["path"] = "/"
        if not get.get("scheme"):
            get["scheme"] = "HTTP"


# --- validation ----------------------------------------------------------------------------

def validate_container_handlers(container: dict[str, Any], path: str, *,
                                grace_period: int | None, init: bool) -> list[Cause]:
    """The probes and hooks of one container; an init container (not a sidecar) may have
    neither."""
    if init and container.get("restartPolicy") != "Always":
        return [forbidden(f"{path}.{key}", NOT_FOR_INIT)
                for key in ("lifecycle", *PROBES) if container.get(key) is not None]
    errs = []
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                errs += validate_handler(handler, LIFECYCLE_HANDLERS, f"{path}.lifecycle.{hook}",
                                         grace_period)
    for key in PROBES:
        probe = container.get(key)
        if isinstance(probe, dict):
            errs += validate_probe(probe, key, f"{path}.{key}", grace_period)
    return errs


def validate_probe(probe: dict[str, Any], kind: str, path: str,
                   grace_period: int | None) -> list[Cause]:
    errs = validate_handler(probe, PROBE_HANDLERS, path, grace_period)
    for key in PROBE_COUNTS:
        value = probe.get(key)
        if isinstance(value, int) and value < 0:
            errs.append(invalid(f"{path}.{key}", value, IS_NEGATIVE_MSG))
    grace = probe.get("terminationGracePeriodSeconds")
    if kind == "readinessProbe" and grace is not None:
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                            "must not be set for readinessProbes"))
    elif isinstance(grace, int) and grace <= 0:
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                            "must be greater than 0"))
    threshold = probe.get("successThreshold")
    if kind != "readinessProbe" and threshold is not None and threshold != 1:
        errs.append(invalid(f"{path}.successThreshold", threshold, "must be 1"))
    return errs


def validate_handler(handler: dict[str, Any], kinds: tuple[str, ...], path: str,
                     grace_period: int | None) -> list[Cause]:
    """Exactly one handler; the first one set counts, every other one is forbidden."""
    errs: list[Cause] = []
    chosen = ""
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        here = f"{path}.{kind}"
        if chosen:
            errs.append(forbidden(here, "may not specify more than 1 handler type"))
            continue
        chosen = kind
        errs += validate_action(kind, action if isinstance(action, dict) else {}, here,
                                grace_period)
    if not chosen:
        errs.append(required(path, "must specify a handler type"))
    return errs


def validate_action(kind: str, action: dict[str, Any], path: str,
                    grace_period: int | None) -> list[Cause]:
    if kind == "exec":
        return [] if action.get("command") else [required(f"{path}.command")]
    if kind == "httpGet":
        return validate_http_get(action, path)
    if kind == "tcpSocket":
        return validate_port_num_or_name(action.get("port", 0), f"{path}.port")
    if kind == "grpc":
        return validate_port_num_or_name(action.get("port") or 0, f"{path}.port")
    seconds = action.get("seconds") or 0  # sleep
    if grace_period is not None and not 0 <= seconds <= grace_period:
        return [invalid(path, seconds, "must be non-negative and less than "
                                       f"terminationGracePeriodSeconds ({grace_period})")]
    return []


def validate_http_get(get: dict[str, Any], path: str) -> list[Cause]:
    errs = []
    if not get.get("path"):
        errs.append(required(f"{path}.path"))
    errs += validate_port_num_or_name(get.get("port", 0), f"{path}.port")
    scheme = get.get("scheme") or ""
    if scheme not in HTTP_SCHEMES:
        errs.append(not_supported(f"{path}.scheme", scheme, HTTP_SCHEMES))
    for header in get.get("httpHeaders") or []:
        name = str((header or {}).get("name") or "")
        if not _HTTP_HEADER_NAME.fullmatch(name):
            errs.append(invalid(f"{path}.httpHeaders", name, regex_error(
                HTTP_HEADER_NAME_MSG, HTTP_HEADER_NAME_FMT, "X-Header-Name")))
    return errs
