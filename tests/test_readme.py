"""The README's curl examples, run against a fresh apiserver on a real etcd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import readme
from tests.support import REPO, ApiServer, Etcd


@pytest.fixture(scope="module")
def fresh_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    workdir = Path(tmp_path_factory.mktemp("readme"))
    etcd = Etcd(workdir).start()
    server = ApiServer(etcd, workdir).start()
    yield server
    server.stop()
    etcd.stop()


def test_readme_has_apiserver_examples() -> None:
    assert len(readme.examples("apiserver")) >= 4


def test_readme_apiserver_examples(fresh_apiserver: ApiServer) -> None:
    for example in readme.examples("apiserver"):
        output = readme.run(example, cwd=REPO,
                            replacements={"http://127.0.0.1:8080": fresh_apiserver.url})
        assert readme.matches(example.expected, output), (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(example.expected) + f"\n--- actual:\n{output}")


def test_matcher_catches_drift() -> None:
    """The comparison is not vacuous: changed output fails, volatile values do not."""
    expected = ['{"name": "web", "uid": "7b460d4d-4a6e-4c0d-9da2-313be8131c4d"}']
    assert readme.matches(expected, '{"name": "web", "uid": "00000000-1111-2222-3333-444444444444"}')
    assert not readme.matches(expected, '{"name": "api", "uid": "7b460d4d-4a6e-4c0d-9da2-313be8131c4d"}')
    assert readme.matches(["a", "...", "z"], "a\nb\nc\nz")
    assert not readme.matches(["a"], "a\nb")
