"""A node joins a running `make up` cluster from nothing but a server URL, a bootstrap
token and the CA's hash (issue 18's "nodes that join"), on this machine: the kubelet has
its own root directory and its own loopback address, 127.0.0.2.

The flow a kubeadm user knows: `common.bootstraptoken create --print-join-command` on the
control plane; the kubelet verifies cluster-info with the token and the CA hash, requests
its client certificate (auto-approved by the controller-manager's csrapproving, signed by
csrsigning); the node registers and is Ready; its serving certificate waits Pending in
`kubectl get csr` until `kubectl certificate approve`, after which `kubectl logs` and
`kubectl exec` reach it. A restarted kubelet keeps its credentials; a wrong CA hash or an
unknown token never gets a certificate.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker_support import BUSYBOX_IMAGE, ensure_docker, remove_node_containers
from tests.seeds import Launcher
from tests.support import PYTHON, REPO, Process, eventually, free_port

pytestmark = pytest.mark.docker

JOIN_IP = "127.0.0.2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    ensure_docker()
    launched = Launcher.fresh(tmp_path_factory.mktemp("join") / "state")
    launched.start()
    yield launched
    launched.cleanup()


def run(launcher: Launcher, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A command as the user runs it, with the cluster's admin kubeconfig."""
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin",
           "KUBECONFIG": str(launcher.state_dir / "kubeconfig"), "HOME": "/nonexistent"}
    done = subprocess.run(list(args), env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=90)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def kubectl(launcher: Launcher, *args: str, check: bool = True) -> str:
    return run(launcher, str(REPO / ".venv" / "bin" / "kubectl"), *args, check=check).stdout


def join_command(launcher: Launcher) -> list[str]:
    printed = run(launcher, PYTHON, "-m", "common.bootstraptoken", "--kubeconfig",
                  str(launcher.state_dir / "kubeconfig"), "create",
                  "--print-join-command").stdout.split()
    assert printed[:3] == ["python", "-m", "kubelet"], printed
    assert printed[3:5] == ["--server", launcher.apiserver], printed
    return printed[3:-2]  # without --node-name NAME


def joining_kubelet(workdir: Path, name: str, flags: list[str], *,
                    discovery_timeout: float = 20) -> Process:
    """The kubelet with the join flags and only what any node needs of its own."""
    return Process(f"kubelet-{name}", [
        PYTHON, "-m", "kubelet", *flags, "--node-name", name, "--node-ip", JOIN_IP,
        "--address", JOIN_IP, "--port", str(free_port()), "--root-dir", str(workdir / name),
        "--pod-infra-container-image", "kubelite/pause:3.10", "--resolv-conf", "",
        "--discovery-timeout", str(discovery_timeout)], workdir / f"kubelet-{name}.log")


def csr_rows(launcher: Launcher, requestor: str) -> list[list[str]]:
    rows = [line.split() for line in kubectl(launcher, "get", "csr").splitlines()[1:]]
    return [row for row in rows if row[3] == requestor]


async def test_a_kubelet_joins_with_a_token_and_the_ca_hash(cluster: Launcher,
                                                            tmp_path: Path) -> None:
    flags = join_command(cluster)
    name = f"join-{uuid.uuid4().hex[:6]}"
    kubelet = joining_kubelet(tmp_path, name, flags).start()
    try:
        async def ready() -> bool:
            out = kubectl(cluster, "get", "node", name, "-o",
                          "jsonpath={.status.conditions[?(@.type=='Ready')].status} "
                          "{.status.addresses[0].address}", check=False)
            return out == f"True {JOIN_IP}"

        assert await eventually(ready, timeout=60, what=f"node {name} Ready at {JOIN_IP}")
        token_id = flags[flags.index("--token") + 1].split(".")[0]
        client = csr_rows(cluster, f"system:bootstrap:{token_id}")
        assert [row[2:] for row in client] == [[
            "kubernetes.io/kube-apiserver-client-kubelet", f"system:bootstrap:{token_id}",
            "<none>", "Approved,Issued"]], client
        # its client certificate is the node's own: the Node authorizer knows it
        assert "system:node:" + name in (tmp_path / name / "kubelet.conf").read_text()

        async def serving_pending() -> list[str] | None:
            rows = csr_rows(cluster, f"system:node:{name}")
            return rows[0] if rows and rows[0][-1] == "Pending" else None

        serving = await eventually(serving_pending, timeout=30, what="a Pending serving CSR")
        assert serving is not None
        assert serving[2] == "kubernetes.io/kubelet-serving", serving
        pod = f"on-{name}"
        kubectl(cluster, "run", pod, f"--image={BUSYBOX_IMAGE}", "--restart=Never",
                f'--overrides={{"spec":{{"nodeName":"{name}"}}}}', "--",
                "sh", "-c", "echo joined-node-says-hi; sleep 3600")
        kubectl(cluster, "wait", "--for=condition=Ready", f"pod/{pod}", "--timeout=60s")
        # until its serving certificate is approved, nothing reaches the kubelet's port
        refused = run(cluster, str(REPO / ".venv" / "bin" / "kubectl"), "logs", pod,
                      check=False)
        assert refused.returncode != 0, refused.stdout
        assert f"certificatesigningrequest.certificates.k8s.io/{serving[0]} approved" in \
            kubectl(cluster, "certificate", "approve", serving[0])

        async def logs() -> str | None:
            done = run(cluster, str(REPO / ".venv" / "bin" / "kubectl"), "logs", pod,
                       check=False)
            return done.stdout if done.returncode == 0 else None

        assert await eventually(logs, timeout=30, what="kubectl logs through the joined "
                                                       "kubelet") == "joined-node-says-hi\n"
        assert kubectl(cluster, "exec", pod, "--", "hostname").strip() == pod
        assert csr_rows(cluster, f"system:node:{name}")[0][-1] == "Approved,Issued"

        # a restart keeps what it obtained: no discovery, no new client CSR
        kubelet.stop()
        kubelet = joining_kubelet(tmp_path, name, flags).start()
        assert await eventually(logs, timeout=60, what="logs after a restart")
        assert len(csr_rows(cluster, f"system:bootstrap:{token_id}")) == 1
        assert "is valid: no bootstrap needed" in kubelet.log_path.read_text()
        kubectl(cluster, "delete", "pod", pod, "--grace-period=0", "--force", check=False)
    finally:
        kubelet.stop()
        remove_node_containers(name)


async def test_a_wrong_ca_hash_or_an_unknown_token_gets_no_certificate(
        cluster: Launcher, tmp_path: Path) -> None:
    flags = join_command(cluster)
    before = kubectl(cluster, "get", "csr", "-o", "name")
    at = flags.index("--discovery-token-ca-cert-hash") + 1
    wrong_hash = [*flags[:at], "sha256:" + "0" * 64, *flags[at + 1:]]
    at = flags.index("--token") + 1
    unknown_token = [*flags[:at], "abcdef.0123456789abcdef", *flags[at + 1:]]

    async def refused(flags_: list[str], why: str) -> None:
        name = f"nojoin-{uuid.uuid4().hex[:6]}"
        kubelet = joining_kubelet(tmp_path, name, flags_, discovery_timeout=4).start()
        assert kubelet.proc is not None
        code = await asyncio.to_thread(kubelet.proc.wait, 60)
        text = kubelet.log_path.read_text()
        assert code == 1 and why in text, text
        assert not (tmp_path / name / "kubelet.conf").exists()
        assert kubectl(cluster, "get", "node", name, check=False) == ""

    await asyncio.gather(refused(wrong_hash, "none of the public keys"),
                         refused(unknown_token,
                                 'token id "abcdef" is invalid for this cluster'))
    assert kubectl(cluster, "get", "csr", "-o", "name") == before
