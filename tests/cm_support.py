"""`python -m controller_manager` for tests (kept out of tests/support.py on purpose)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import PYTHON, ApiServer, Process, eventually, free_port


class ControllerManagerProcess:
    """The controller-manager against `apiserver`, its endpoint on a free port."""

    def __init__(self, apiserver: ApiServer | None, workdir: Path, *,
                 name: str = "controller-manager", kubeconfig: Path | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process(name, [
            PYTHON, "-m", "controller_manager",
            *(["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else
              self.connection_args(apiserver, workdir / f"{name}.kubeconfig")),
            "--port", str(self.port), "--log-level", "info",
            # kube's own timings: a leader whose renewal took over 3 s on a loaded machine
            # gave up its lease and exited mid-test; a killed one is succeeded in <= 15 s
            "--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s",
            "--leader-elect-retry-period", "2s", *extra_args,
        ], workdir / f"{name}.log")

    @staticmethod
    def connection_args(apiserver: ApiServer | None, kubeconfig: Path) -> list[str]:
        """How it reaches the apiserver: its own identity, as kubeadm's
        controller-manager.conf (system:kube-controller-manager); the plain dev port as is."""
        assert apiserver is not None, "an apiserver or a kubeconfig"
        if apiserver.plain:
            return ["--apiserver", apiserver.url]
        return ["--kubeconfig", str(apiserver.kubeconfig(
            kubeconfig, cert="controller-manager", user="system:kube-controller-manager",
            namespace=None))]

    def start(self) -> ControllerManagerProcess:
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def log(self) -> str:
        return self.process.log()

    async def wait_synced(self, *, times: int = 1) -> None:
        async def synced() -> bool:
            assert self.process.alive(), self.process.log()[-3000:]
            return self.process.log().count("caches synced:") >= times
        await eventually(synced, timeout=60, what=f"{self.process.name} to sync")

    def identity(self) -> str | None:
        found = re.findall(r"leader election on lease \S+ as (\S+)", self.process.log())
        return found[-1] if found else None
