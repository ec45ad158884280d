"""Shared fixtures: a real etcd and a real apiserver process, on loopback; the apiserver
serves only HTTPS with the session PKI, authenticating and authorizing (Node,RBAC) every
request, and `http` is a client with the admin certificate."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ApiServer, Etcd


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    server = Etcd(tmp_path_factory.mktemp("etcd")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def apiserver(etcd: Etcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(etcd, Path(tmp_path_factory.mktemp("apiserver"))).start()
    yield server
    server.stop()


@pytest.fixture
async def http(apiserver: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    """The session apiserver as the cluster admin (the PKI's admin certificate)."""
    async with apiserver.client() as client:
        yield client
