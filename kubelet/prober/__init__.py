"""The prober (after kubelet's `pkg/kubelet/prober`): liveness, readiness and startup
probes, one worker task per probe of a running container.

- `probes`: probes as data (kube's defaults) and the threshold rule, pure;
- `run`: running one probe (exec, httpGet, tcpSocket);
- `manager`: the workers and their results — readiness drives the container's `ready`
  (and so the Ready condition), startup its `started`, and a failed liveness or startup
  probe has the pod's sync restart the container (`Unhealthy`, `Killing` events).
"""

from kubelet.prober.manager import ProbeManager
from kubelet.prober.probes import Probe, ProbeStatus, Streak, advance, probe_of

__all__ = ["Probe", "ProbeManager", "ProbeStatus", "Streak", "advance", "probe_of"]
