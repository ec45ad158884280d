"""The scheduler's HTTP endpoint (`common.endpoint`, shared with the controller-manager):
/healthz, /livez, /readyz and /metrics, plain HTTP on 127.0.0.1:10259 by default
(kube-scheduler serves HTTPS on that port); `--port 0` turns it off."""

from __future__ import annotations

DEFAULT_PORT = 10259
DEFAULT_BIND_ADDRESS = "127.0.0.1"
