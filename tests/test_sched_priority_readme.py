"""The README's priority and preemption section, run against a fresh etcd, apiserver and
scheduler with the real kubectl: PriorityClasses, a low-priority pod filling an API-only
Node, a high-priority pod preempting it (Preempted event, DisruptionTarget, nominated
node, then bound), a `preemptionPolicy: Never` pod waiting, an unknown class refused."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import readme
from tests.support import REPO, ApiServer, Etcd, Kubectl, SchedulerProcess


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    workdir = Path(tmp_path_factory.mktemp("readme-priority"))
    etcd = Etcd(workdir).start()
    server = ApiServer(etcd, workdir).start()
    scheduler = SchedulerProcess(server, workdir).start()
    yield Kubectl(server.url, workdir / "kubectl").kubeconfig
    scheduler.stop()
    server.stop()
    etcd.stop()


def test_readme_priority_examples(kubeconfig: Path) -> None:
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
           "KUBECONFIG": str(kubeconfig)}
    examples = readme.examples("scheduling-priority")
    assert len(examples) == 15
    for example in examples:
        output = readme.drift(example, example.expected, cwd=REPO, replacements={}, env=env)
        assert output is None, (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(example.expected) + f"\n--- actual:\n{output}")
