"""The README's scheduling sections, each run against a fresh etcd, apiserver and scheduler
with the real kubectl (each section registers its own API-only Nodes):
- `scheduling`: resources, node affinity, taints, pod (anti-)affinity, topology spread;
- `scheduling-priority`: PriorityClasses, a low-priority pod filling an API-only Node, a
  high-priority pod preempting it (Preempted event, DisruptionTarget, nominated node, then
  bound), a `preemptionPolicy: Never` pod waiting, an unknown class refused."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import readme
from tests.support import REPO, ApiServer, Etcd, Kubectl, SchedulerProcess


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    etcd = Etcd(tmp_path).start()
    server = ApiServer(etcd, tmp_path).start()
    scheduler = SchedulerProcess(server, tmp_path).start()
    yield Kubectl(server.url, tmp_path / "kubectl").kubeconfig
    scheduler.stop()
    server.stop()
    etcd.stop()


@pytest.mark.parametrize("section, at_least", [("scheduling", 15),
                                               ("scheduling-priority", 15)])
def test_readme_scheduling_examples(kubeconfig: Path, section: str, at_least: int) -> None:
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
           "KUBECONFIG": str(kubeconfig)}
    examples = readme.examples(section)
    assert len(examples) >= at_least
    for example in examples:
        output = readme.drift(example, example.expected, cwd=REPO, replacements={}, env=env)
        assert output is None, (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(example.expected) + f"\n--- actual:\n{output}")
