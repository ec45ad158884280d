"""The kubelet's reading of its CertificateSigningRequest while it waits (kubelet/bootstrap.py):
pure, on CSR objects as the apiserver returns them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubelet.bootstrap import BootstrapError, certificate_outcome

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def csr(*conditions: tuple[str, str], certificate: bytes | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": t, "status": s} for t, s in conditions]}
    if certificate is not None:
        status["certificate"] = base64.b64encode(certificate).decode()
    return {"metadata": {"name": "csr-abc12"}, "status": status}


def test_pending_and_approved_but_not_yet_signed_keep_waiting() -> None:
    assert certificate_outcome(csr()) is None
    assert certificate_outcome(csr(("Approved", "True"))) is None


def test_an_issued_certificate_is_returned() -> None:
    assert certificate_outcome(csr(("Approved", "True"), certificate=PEM)) == PEM


@pytest.mark.parametrize("condition", ["Denied", "Failed"])
def test_denied_or_failed_ends_the_wait(condition: str) -> None:
    with pytest.raises(BootstrapError, match=f"certificate request csr-abc12 was "
                                             f"{condition.lower()}"):
        certificate_outcome(csr((condition, "True")))
    assert certificate_outcome(csr((condition, "False"))) is None
