"""The README's "ConfigMaps, Secrets and volumes" section, run against a fresh etcd,
secure apiserver, scheduler and a real kubelet on real Docker with the real kubectl."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import readme
from tests.docker_support import (
    KubeletProcess,
    ensure_docker,
    remove_node_containers,
    unmount_under,
)
from tests.support import REPO, ApiServer, Etcd, Kubectl, SchedulerProcess, unique

SECTION = "volumes"


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    ensure_docker()
    etcd = Etcd(tmp_path).start()
    server = ApiServer(etcd, tmp_path).start()
    scheduler = SchedulerProcess(server, tmp_path).start()
    node = unique("readme-vol")
    kubelet = KubeletProcess(server, tmp_path, node_name=node,
                             extra_args=["--root-dir", str(tmp_path / "kubelet-root")]).start()
    yield Kubectl(server.url, tmp_path / "kubectl").kubeconfig
    kubelet.stop()
    remove_node_containers(node)
    unmount_under(tmp_path / "kubelet-root")
    scheduler.stop()
    server.stop()
    etcd.stop()


def test_readme_volumes_examples(kubeconfig: Path) -> None:
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
           "KUBECONFIG": str(kubeconfig)}
    examples = readme.examples(SECTION)
    assert len(examples) >= 10
    for example in examples:
        output = readme.drift(example, example.expected, cwd=REPO, replacements={}, env=env,
                              settle=60)
        assert output is None, (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(example.expected) + f"\n--- actual:\n{output}")
