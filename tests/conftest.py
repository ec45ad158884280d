"""Shared fixtures: a real etcd and a real apiserver process, on loopback; the apiserver
serves only HTTPS with the session PKI, authenticating and authorizing (Node,RBAC) every
request, and `http` is a client with the admin certificate. A controller-manager running
only the namespace controller (kube's: it empties and finalizes deleted namespaces) comes
with the session apiserver, unelected, so that tests' own controller-managers still win
the `kube-controller-manager` lease."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.cm_support import ControllerManagerProcess
from tests.support import ApiServer, Etcd


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    server = Etcd(tmp_path_factory.mktemp("etcd")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("apiserver"))).start()
    namespaces = ControllerManagerProcess(
        server, Path(tmp_path_factory.mktemp("controller-manager")),
        name="namespace-controller-manager",
        extra_args=("--leader-elect=false", "--controllers=namespace-controller")).start()
    server.namespace_controller = namespaces  # type: ignore[attr-defined]
    yield server
    namespaces.stop()
    server.stop()


@pytest.fixture(scope="session")
def controller_manager(apiserver: ApiServer) -> ControllerManagerProcess:
    """The session apiserver's namespace-controller-only controller-manager."""
    found: ControllerManagerProcess = apiserver.namespace_controller  # type: ignore[attr-defined]
    return found


@pytest.fixture
async def http(apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    """The session apiserver as the cluster admin (the PKI's admin certificate)."""
    async with apiserver.client() as client:
        yield client
