"""The probe workers of one kubelet and their results (after kubelet's prober_manager.go
and worker.go).

`sync_pod` is called by each pod sync with the pod and its runtime view: the probes of
every running app container and sidecar get a worker (one task per probe, tied to the
container's id, so a restarted container starts again from the initial results), and
workers of containers that no longer run end. A worker waits `initialDelaySeconds` after the container started,
then probes every `periodSeconds`; readiness and liveness wait for a startup probe to
succeed. Each failed attempt is an `Unhealthy` event; a settled result that changes
pokes the pod's worker, whose sync reads it through `status` (ready / started) and
`should_restart` (a failed liveness or startup probe).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubelet.events import EventSink
from kubelet.prober.probes import (
    INITIAL,
    KINDS,
    Kind,
    Probe,
    ProbeStatus,
    Streak,
    advance,
    probe_of,
)
from kubelet.prober.run import Exec, run_probe
from kubelet.runtime import ContainerInfo, PodObservation, is_sidecar, pod_ref

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    uid: str
    container: str
    container_id: str
    probe: Probe
    result: bool  # the settled result (the kind's initial value before one settles)
    failed: bool = False  # a liveness or startup failure settled: restart the container
    streak: Streak = field(default_factory=Streak)
    task: asyncio.Task[None] | None = None


class ProbeManager:
    def __init__(self, runtime: Exec, events: EventSink, *, on_change: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runtime = runtime
        self.events = events
        self.on_change = on_change
        self.clock = clock
        self.workers: dict[tuple[str, str, Kind], _Worker] = {}

    # --- what a sync asks --------------------------------------------------------------
    def _result(self, uid: str, container: ContainerInfo, kind: Kind) -> bool | None:
        """The settled result of that probe for this very container; None: no probe."""
        worker = self.workers.get((uid, container.name, kind))
        if worker is None:
            return None
        return worker.result if worker.container_id == container.id else INITIAL[kind]

    def status(self, uid: str, observation: PodObservation) -> dict[str, ProbeStatus]:
        """ready/started of each running container that has probes."""
        out: dict[str, ProbeStatus] = {}
        for container in observation.containers:
            if container.state != "running" or container.name in out:
                continue
            startup = self._result(uid, container, "startup")
            readiness = self._result(uid, container, "readiness")
            if startup is None and readiness is None:
                continue
            started = startup is not False
            out[container.name] = ProbeStatus(ready=started and readiness is not False,
                                              started=started)
        return out

    def started(self, uid: str, spec: Mapping[str, Any], container: ContainerInfo) -> bool:
        """Whether this running instance counts as started: it has no startup probe, or
        its startup probe passed (a probe not run yet, or run for an earlier instance, has
        not)."""
        if probe_of(spec, "startup") is None:
            return True
        worker = self.workers.get((uid, container.name, "startup"))
        return worker is not None and worker.container_id == container.id \
            and worker.result is True

    def should_restart(self, uid: str, container: ContainerInfo) -> Kind | None:
        """The probe ("liveness" or "startup") whose failure means a restart, if any."""
        for kind in ("liveness", "startup"):
            worker = self.workers.get((uid, container.name, kind))
            if worker is not None and worker.container_id == container.id and worker.failed:
                return kind
        return None

    # --- keeping the workers in step with the pod ----------------------------------------
    def sync_pod(self, pod: Mapping[str, Any], observation: PodObservation, *,
                 pod_ip: str) -> None:
        uid = pod_ref(pod).uid
        spec_ = pod.get("spec") or {}
        specs = {c["name"]: c for c in [*(spec_.get("containers") or []),
                                        *filter(is_sidecar, spec_.get("initContainers") or [])]}
        wanted: set[tuple[str, str, Kind]] = set()
        for name, spec in specs.items():
            latest = observation.latest(name)
            if latest is None or latest.state != "running":
                continue
            for kind in KINDS:
                probe = probe_of(spec, kind)
                if probe is None:
                    continue
                key = (uid, name, kind)
                wanted.add(key)
                current = self.workers.get(key)
                if current is not None and current.container_id == latest.id \
                        and current.probe == probe:
                    continue
                if current is not None and current.task is not None:
                    current.task.cancel()
                worker = _Worker(uid, name, latest.id, probe, INITIAL[kind])
                worker.task = asyncio.create_task(
                    self._run(worker, pod, spec, latest, pod_ip),
                    name=f"probe {pod_ref(pod).key} {name} {kind}")
                self.workers[key] = worker
        for key in [k for k in self.workers if k[0] == uid and k not in wanted]:
            self._stop(key)

    def forget(self, uid: str) -> None:
        for key in [k for k in self.workers if k[0] == uid]:
            self._stop(key)

    def _stop(self, key: tuple[str, str, Kind]) -> None:
        worker = self.workers.pop(key)
        if worker.task is not None:
            worker.task.cancel()

    async def stop(self) -> None:
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.workers.clear()

    # --- one worker ------------------------------------------------------------------------
    async def _run(self, worker: _Worker, pod: Mapping[str, Any], spec: Mapping[str, Any],
                   container: ContainerInfo, pod_ip: str) -> None:
        probe = worker.probe
        key = pod_ref(pod).key
        started_at = container.started_at or datetime.now(UTC)
        since = (datetime.now(UTC) - started_at).total_seconds()
        await asyncio.sleep(max(probe.initial_delay_seconds - since, 0))
        while True:
            if probe.kind != "startup" and not self._started(worker):
                await asyncio.sleep(probe.period_seconds)
                continue
            try:
                success, output = await run_probe(probe, container=spec,
                                                  container_id=worker.container_id,
                                                  pod_ip=pod_ip, runtime=self.runtime)
            except Exception as e:  # a probe that cannot even run has failed
                log.warning("%s: %s probe of %s could not run: %s", key, probe.kind,
                            worker.container, e)
                success, output = False, str(e) or type(e).__name__
            if not success:
                self.events.emit(pod, "Warning", "Unhealthy",
                                 f"{probe.title} probe failed: {output}",
                                 container=worker.container)
            worker.streak, settled = advance(worker.streak, success, probe)
            if settled is not None and settled != worker.result:
                worker.result = settled
                log.info("%s: %s probe of %s: %s", key, probe.kind, worker.container,
                         "success" if settled else "failure")
                self.on_change(worker.uid)
            if settled is False and probe.kind != "readiness":
                # The container is restarted; its successor gets a worker of its own.
                worker.failed = True
                self.on_change(worker.uid)
                return
            if settled is True and probe.kind == "startup":
                return  # started: its job is done
            await asyncio.sleep(probe.period_seconds)

    def _started(self, worker: _Worker) -> bool:
        startup = self.workers.get((worker.uid, worker.container, "startup"))
        return startup is None or startup.container_id != worker.container_id \
            or startup.result is True


