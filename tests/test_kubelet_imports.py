"""The kubelet is its own program: it authenticates callers with common/ (authn, tls), not
with the apiserver's package."""

from __future__ import annotations

import subprocess

from tests.support import PYTHON, REPO


def test_the_kubelet_imports_nothing_of_the_apiserver() -> None:
    script = ("import sys, kubelet.main, kubelet.auth\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'apiserver'))\n")
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_apiserver_and_the_kubelet_share_one_user_type() -> None:
    from apiserver.auth import UserInfo as ApiserverUser
    from apiserver.auth.authn import verify_client_certificate as apiserver_verify
    from common.authn import UserInfo, verify_client_certificate
    from kubelet.auth import UserInfo as KubeletUser

    assert ApiserverUser is UserInfo is KubeletUser
    assert apiserver_verify is verify_client_certificate
