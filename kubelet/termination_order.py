"""The order a pod's containers stop in (after kuberuntime_termination_order.go): the app
(and ephemeral) containers all at once, then the sidecars in the reverse of their spec
order, each once everything it may serve has exited. So a proxy or log shipper sidecar
outlives the app it serves, within the one grace period of the pod.

`prerequisites` is the pure decision; `TerminationOrdering` the asyncio shell a kill waits
on (after its preStop hook, which runs at once for every container, as kube's does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any

from kubelet.runtime import is_sidecar


def prerequisites(pod: Mapping[str, Any], stopping: Collection[str]) -> dict[str, set[str]]:
    """For each of the `stopping` containers that must wait, the names of those it waits
    for: a sidecar waits for every stopping non-sidecar and for the sidecars after it."""
    sidecars = [str(c["name"]) for c in (pod.get("spec") or {}).get("initContainers") or []
                if is_sidecar(c)]
    others = {name for name in stopping if name not in sidecars}
    waits: dict[str, set[str]] = {}
    for i, name in enumerate(sidecars):
        if name in stopping:
            waits[name] = others | {later for later in sidecars[i + 1:] if later in stopping}
    return {name: before for name, before in waits.items() if before}


class TerminationOrdering:
    def __init__(self, pod: Mapping[str, Any], stopping: Collection[str]) -> None:
        self._waits = prerequisites(pod, stopping)
        self._exited = {name: asyncio.Event() for name in stopping}

    async def wait_for_turn(self, name: str, timeout: float) -> None:
        """Until every container `name` waits for has exited, or `timeout` seconds."""
        events = [self._exited[other].wait() for other in self._waits.get(name, ())]
        if not events:
            return
        try:
            async with asyncio.timeout(max(timeout, 0)):
                await asyncio.gather(*events)
        except TimeoutError:
            pass

    def exited(self, name: str) -> None:
        event = self._exited.get(name)
        if event is not None:
            event.set()
