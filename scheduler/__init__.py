"""kubelite's scheduler: watch unbound pods, filter and score nodes, bind, explain.

Reading order: `framework` (Status, plugins, schedule_one, the FitError message),
`plugins/` (one question each), `queue` (when to try a pod again), `cache` (nodes and
pod counts), `main` (informers in, bindings and explanations out), then `server` and
`metrics` (the /healthz, /readyz and /metrics endpoint).
"""

from scheduler.framework import Code, NodeInfo, ScheduleResult, Status, schedule_one
from scheduler.main import Options, Scheduler, serve

__all__ = ["Code", "NodeInfo", "Options", "ScheduleResult", "Scheduler", "Status",
           "schedule_one", "serve"]
