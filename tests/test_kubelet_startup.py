"""The kubelet with a credential it cannot use (its kubeconfig, --tls-cert-file and key,
--client-ca-file) ends at once with one clear line and exit code 1, no traceback, before
it talks to Docker or the apiserver."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from common import pki
from tests.support import PYTHON, Process

NODE = "startup-node"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("startup-pki")
    pki.init(directory, [NODE])
    # a server nobody listens on: the kubelet must fail before it tries
    pki.write_kubeconfigs(directory, directory, [NODE], server="https://127.0.0.1:1")
    (directory / "garbage.pem").write_text("not a certificate\n")
    (directory / "list.yaml").write_text("- just\n- a list\n")
    broken = yaml.safe_load((directory / f"kubelet-{NODE}.conf").read_text())
    broken["users"][0]["user"]["client-certificate-data"] = base64.b64encode(
        b"not a certificate").decode()
    (directory / "broken-cert.conf").write_text(yaml.safe_dump(broken))
    return directory


def kubelet_flags(certs: Path, **files: str) -> list[str]:
    """A secure kubelet's flags, with `files` ({flag: file name in certs}) replaced."""
    flags = {"--kubeconfig": f"kubelet-{NODE}.conf", "--tls-cert-file": f"kubelet-{NODE}.crt",
             "--tls-private-key-file": f"kubelet-{NODE}.key", "--client-ca-file": "ca.crt"}
    flags.update(files)
    args = [arg for flag, name in flags.items() for arg in (flag, str(certs / name))]
    return [*args, "--node-name", NODE, "--docker-socket", str(certs / "no-docker.sock"),
            "--anonymous-auth=false", "--authentication-token-webhook",
            "--authorization-mode", "Webhook"]


@pytest.mark.parametrize(("files", "message"), [
    ({"--kubeconfig": "missing.conf"}, "--kubeconfig {certs}/missing.conf: No such file or "
                                       "directory"),
    ({"--kubeconfig": "list.yaml"}, "--kubeconfig {certs}/list.yaml: kubeconfig "
                                    "{certs}/list.yaml is not a YAML mapping"),
    ({"--kubeconfig": "broken-cert.conf"}, "--kubeconfig {certs}/broken-cert.conf: "),
    ({"--tls-cert-file": "missing.crt"}, "--tls-cert-file {certs}/missing.crt: No such file "
                                         "or directory"),
    ({"--tls-cert-file": "garbage.pem"}, "--tls-cert-file {certs}/garbage.pem: not a PEM "
                                         "certificate"),
    ({"--tls-private-key-file": "missing.key"}, "--tls-private-key-file {certs}/missing.key: "
                                                "No such file or directory"),
    ({"--tls-private-key-file": "garbage.pem"}, "--tls-private-key-file {certs}/garbage.pem: "
                                                "not a PEM private key"),
    ({"--tls-private-key-file": "admin.key"},
     f"--tls-private-key-file {{certs}}/admin.key is not the key of --tls-cert-file "
     f"{{certs}}/kubelet-{NODE}.crt"),
    ({"--client-ca-file": "garbage.pem"}, "--client-ca-file {certs}/garbage.pem: no PEM "
                                          "certificate in it"),
    ({"--client-ca-file": "missing.crt"}, "--client-ca-file {certs}/missing.crt: No such file "
                                          "or directory"),
])
def test_an_unusable_credential_is_one_clear_line(certs: Path, tmp_path: Path,
                                                  files: dict[str, str], message: str) -> None:
    kubelet = Process(f"kubelet-{NODE}", [PYTHON, "-m", "kubelet",
                                          *kubelet_flags(certs, **files)],
                      tmp_path / "kubelet.log").start()
    assert kubelet.proc is not None
    assert kubelet.proc.wait(timeout=60) == 1
    lines = kubelet.log().splitlines()
    assert len(lines) == 1, lines
    assert f"ERROR kubelet: kubelet {NODE} cannot start: " in lines[0]
    assert message.format(certs=certs) in lines[0], lines[0]


def test_the_good_credentials_pass_the_check(certs: Path) -> None:
    """The same check with the PKI's files as they are raises nothing (the kubelet would
    go on to start): the cases above fail for the one file they break."""
    from kubelet.main import check_credentials, parse_args

    check_credentials(parse_args(kubelet_flags(certs)))
