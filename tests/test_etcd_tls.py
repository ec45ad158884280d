"""etcd on TLS with client-certificate auth, as kubeadm runs it: the apiserver reaches it
with --etcd-cafile/--etcd-certfile/--etcd-keyfile and its apiserver-etcd-client
certificate; nothing else (no certificate, another CA's, the cluster CA's admin, plain
HTTP) can read or write it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from aetcd import rpc

from apiserver.storage import EtcdTLS, open_channel
from common import pki
from tests.support import ApiServer, TlsEtcd, etcd_ssl_context, unique

PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    pki.init(directory, ["node1"])
    return directory


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another cluster's PKI: its etcd CA is not ours."""
    directory = tmp_path_factory.mktemp("other-pki")
    pki.init(directory, [])
    return directory


@pytest.fixture(scope="module")
def tls_etcd(pki_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsEtcd]:
    server = TlsEtcd(tmp_path_factory.mktemp("tls-etcd"), pki_dir).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def apiserver_on_tls(tls_etcd: TlsEtcd,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(tls_etcd, tmp_path_factory.mktemp("apiserver-tls-etcd"),
                       name="apiserver-tls-etcd",
                       extra_args=list(tls_etcd.apiserver_args())).start()
    yield server
    server.stop()


def tls_of(directory: Path, name: str | None, *, ca_dir: Path) -> EtcdTLS:
    """Trusting ca_dir's etcd CA, presenting directory's `name` certificate (None: none)."""
    ca = (ca_dir / "etcd" / "ca.crt").read_bytes()
    if name is None:
        return EtcdTLS(ca=ca)
    return EtcdTLS(ca=ca, cert=(directory / f"{name}.crt").read_bytes(),
                   key=(directory / f"{name}.key").read_bytes())


async def range_all(endpoint: str, tls: EtcdTLS | None) -> int:
    """A range read of every key through a channel of its own; the keys' count."""
    async with open_channel([endpoint], tls) as channel:
        resp = await rpc.KVStub(channel).Range(
            rpc.RangeRequest(key=b"\0", range_end=b"\0", count_only=True), timeout=5)
        return int(resp.count)


async def refused(endpoint: str, tls: EtcdTLS | None) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await range_all(endpoint, tls)
    return caught.value.code()


# --- (a) the apiserver with the etcd flags --------------------------------------------


async def test_the_apiserver_stores_and_reads_a_pod_over_tls(apiserver_on_tls: ApiServer,
                                                             tls_etcd: TlsEtcd,
                                                             pki_dir: Path) -> None:
    name = unique("tls-pod")
    async with apiserver_on_tls.client(timeout=30) as http:
        assert (await http.get("/readyz")).status_code == 200
        created = await http.post(PODS, json={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        assert created.status_code == 201, created.text
        got = await http.get(f"{PODS}/{name}")
        assert got.status_code == 200 and got.json()["metadata"]["name"] == name
    # it is in etcd, read with the apiserver's certificate
    async with open_channel([tls_etcd.endpoint], tls_of(
            pki_dir, "apiserver-etcd-client", ca_dir=pki_dir)) as channel:
        resp = await rpc.KVStub(channel).Range(rpc.RangeRequest(
            key=f"/registry/pods/default/{name}".encode()), timeout=5)
    assert len(resp.kvs) == 1
    assert f"using etcd at 127.0.0.1:{tls_etcd.client_port} over TLS" in (
        apiserver_on_tls.process.log())


def test_workers_each_open_a_tls_channel(tls_etcd: TlsEtcd, tmp_path: Path) -> None:
    server = ApiServer(tls_etcd, tmp_path, name="apiserver-tls-workers",
                       extra_args=[*tls_etcd.apiserver_args(), "--workers", "2"]).start()
    try:
        for _ in range(6):  # new connections, spread over both workers
            with server.sync_client(timeout=10) as http:
                assert http.get(f"{PODS}?limit=1").status_code == 200
    finally:
        server.stop()


# --- (b) and (c) nothing else gets in -------------------------------------------------


async def test_the_apiservers_client_certificate_gets_in(tls_etcd: TlsEtcd,
                                                         pki_dir: Path) -> None:
    assert await range_all(tls_etcd.endpoint, tls_of(
        pki_dir, "apiserver-etcd-client", ca_dir=pki_dir)) >= 0


@pytest.mark.parametrize("who", ["no certificate", "another CA's", "the cluster CA's admin"])
async def test_other_clients_are_refused(tls_etcd: TlsEtcd, pki_dir: Path, other_pki: Path,
                                         who: str) -> None:
    tls = {"no certificate": tls_of(pki_dir, None, ca_dir=pki_dir),
           # a valid etcd client certificate, of another cluster's etcd CA
           "another CA's": tls_of(other_pki, "apiserver-etcd-client", ca_dir=pki_dir),
           # system:masters of this cluster: the apiserver's CA is not etcd's
           "the cluster CA's admin": tls_of(pki_dir, "admin", ca_dir=pki_dir)}[who]
    assert await refused(tls_etcd.endpoint, tls) == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("who", ["no certificate", "the cluster CA's admin"])
def test_the_http_gateway_refuses_them_too(tls_etcd: TlsEtcd, pki_dir: Path,
                                           who: str) -> None:
    context = etcd_ssl_context(pki_dir, None if who == "no certificate" else "admin")
    with pytest.raises((httpx.HTTPError, ssl.SSLError)):
        response = httpx.post(f"{tls_etcd.endpoint}/v3/kv/range", verify=context, timeout=5,
                              json={"key": "AA==", "range_end": "AA=="})
        # TLS 1.3: the refusal may arrive after the handshake, as a failed read
        raise AssertionError(f"etcd answered {response.status_code}: {response.text[:200]}")


async def test_plaintext_is_refused(tls_etcd: TlsEtcd) -> None:
    plain = tls_etcd.endpoint.replace("https://", "http://")
    assert await refused(plain, None) == grpc.StatusCode.UNAVAILABLE
    async with httpx.AsyncClient(timeout=5) as http:
        with pytest.raises(httpx.HTTPError):
            await http.get(f"{plain}/health")


# --- (d) unusable files end the apiserver with one clear line ----------------------------


@pytest.mark.parametrize(("flag", "content", "message"), [
    ("--etcd-certfile", None, "--etcd-certfile {path}: No such file or directory"),
    ("--etcd-keyfile", b"not a key\n", "--etcd-keyfile {path}: not a PEM private key"),
    ("--etcd-cafile", b"", "--etcd-cafile {path}: not a PEM certificate"),
])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_unusable_etcd_file_is_a_clear_startup_error(tls_etcd: TlsEtcd, tmp_path: Path,
                                                        flag: str, content: bytes | None,
                                                        message: str, workers: int) -> None:
    path = tmp_path / "bad.pem"
    if content is not None:
        path.write_bytes(content)
    args = list(tls_etcd.apiserver_args())
    args[args.index(flag) + 1] = str(path)
    server = ApiServer(tls_etcd, tmp_path, name="apiserver-bad-etcd-file",
                       extra_args=[*args, "--workers", str(workers)])
    server.process.start()
    assert server.process.proc is not None
    assert server.process.proc.wait(timeout=30) == 1
    log = server.process.log()
    assert "cannot load its etcd client credentials" in log
    assert message.format(path=path) in log
    assert "Traceback" not in log


def test_a_certificate_without_its_key_is_refused(tls_etcd: TlsEtcd, tmp_path: Path) -> None:
    args = list(tls_etcd.apiserver_args())
    i = args.index("--etcd-keyfile")
    del args[i:i + 2]
    server = ApiServer(tls_etcd, tmp_path, name="apiserver-no-key", extra_args=args)
    server.process.start()
    assert server.process.proc is not None and server.process.proc.wait(timeout=30) == 1
    assert "--etcd-certfile and --etcd-keyfile go together" in server.process.log()


async def test_several_https_endpoints_share_one_tls_channel(tls_etcd: TlsEtcd,
                                                             pki_dir: Path) -> None:
    tls = tls_of(pki_dir, "apiserver-etcd-client", ca_dir=pki_dir)
    async with open_channel([tls_etcd.endpoint, tls_etcd.endpoint], tls) as channel:
        resp = await rpc.KVStub(channel).Range(
            rpc.RangeRequest(key=b"\0", range_end=b"\0", count_only=True), timeout=5)
    assert resp.count >= 0
    with pytest.raises(ValueError, match="mix"):
        open_channel([tls_etcd.endpoint, tls_etcd.endpoint.replace("https", "http")], tls)
