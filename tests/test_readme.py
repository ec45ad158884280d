"""The README's curl examples, run against a fresh apiserver on a real etcd."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import readme
from tests.docker_support import ensure_docker
from tests.seeds import Launcher
from tests.support import REPO, ApiServer, Etcd


@pytest.fixture(scope="module")
def fresh_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    workdir = Path(tmp_path_factory.mktemp("readme"))
    etcd = Etcd(workdir).start()
    # plain: this section of the README is "The apiserver on its own", started by hand on
    # the development --port 8080, and its curl examples are about that port
    server = ApiServer(etcd, workdir, plain=True).start()
    yield server
    server.stop()
    etcd.stop()


def test_readme_has_apiserver_examples() -> None:
    assert len(readme.examples("apiserver")) >= 4


def test_readme_apiserver_examples(fresh_apiserver: ApiServer) -> None:
    for example in readme.examples("apiserver"):
        output = readme.drift(example, example.expected, cwd=REPO,
                              replacements={"http://127.0.0.1:8080": fresh_apiserver.url})
        assert output is None, (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(example.expected) + f"\n--- actual:\n{output}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    """A cluster started by the `make up` launcher, with node names of its own."""
    ensure_docker()
    launched = Launcher.fresh(Path(tmp_path_factory.mktemp("readme-cluster")) / "state")
    launched.start()
    yield launched
    launched.cleanup()


def test_readme_cluster_examples(cluster: Launcher, tmp_path: Path) -> None:
    """The seeds with curl and kubectl, exactly as the README shows them."""
    nodename = yaml.safe_load((REPO / "examples" / "nodename.yaml").read_text())
    nodename["spec"]["nodeName"] = cluster.nodes.node1
    manifest = tmp_path / "nodename.yaml"
    manifest.write_text(yaml.safe_dump(nodename))
    nodes = {"node1": cluster.nodes.node1, "node2": cluster.nodes.node2}
    replacements = {"examples/nodename.yaml": str(manifest),
                    "http://127.0.0.1:8001": cluster.server, **nodes}  # kubectl proxy
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
           "KUBECONFIG": str(cluster.state_dir / "kubeconfig")}
    examples = readme.examples("cluster")
    assert len(examples) >= 20
    for example in examples:
        expected = [readme.replace_all(line, nodes) for line in example.expected]
        output = readme.drift(example, expected, cwd=REPO, replacements=replacements, env=env,
                              timeout=120)
        assert output is None, (
            f"README example drifted:\n$ {example.command}\n--- README says:\n"
            + "\n".join(expected) + f"\n--- actual:\n{output}")


def test_matcher_catches_drift() -> None:
    """The comparison is not vacuous: changed output fails, volatile values do not."""
    expected = ['{"name": "web", "uid": "7b460d4d-4a6e-4c0d-9da2-313be8131c4d"}']
    assert readme.matches(expected, '{"name": "web", "uid": "00000000-1111-2222-3333-444444444444"}')
    assert not readme.matches(expected, '{"name": "api", "uid": "7b460d4d-4a6e-4c0d-9da2-313be8131c4d"}')
    assert readme.matches(["a", "...", "z"], "a\nb\nc\nz")
    assert not readme.matches(["a"], "a\nb")


def test_only_commands_that_change_nothing_are_run_again() -> None:
    assert readme.read_only("kubectl describe pod web | sed -n '/^Events:/,$p'")
    assert readme.read_only("curl -s 'http://127.0.0.1:8080/api/v1/pods' | jq -r '.items | length'")
    assert readme.read_only("sleep 2; kubectl get pod web -o wide 2>/dev/null")
    assert readme.read_only("docker ps -a --format '{{.Names}}'")
    assert not readme.read_only("curl -s -X DELETE http://127.0.0.1:8080/api/v1/pods/web | jq .")
    assert not readme.read_only("curl -s http://x/api/v1/nodes -d '{}'")
    assert not readme.read_only("kubectl get pods; kubectl delete pod web")
    assert not readme.read_only("kubectl label nodes node1 a=b")
    assert not readme.read_only("kubectl get pods -w")
    assert not readme.read_only("kubectl get pods > pods.txt")
    assert not readme.read_only("cat <<EOF | kubectl apply -f -\nkind: Pod\nEOF")
    assert not readme.read_only("rm -rf .kubelite")


def test_volatile_values_are_normalised_and_nothing_else() -> None:
    assert readme.normalise("Container ID: docker://" + "ab" * 31 + "6d") == "Container ID: docker://<id>"
    assert readme.normalise("web 1/1 Running 0 5m3s") == "web 1/1 Running 0 <age>"
    assert readme.normalise("Reason: Started") == "Reason: Started"
