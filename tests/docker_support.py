"""Docker for integration tests: a daemon, the local images, and kubelet processes.

`ensure_docker()` makes sure a daemon answers and the offline images exist (it runs
hack/ensure-docker.sh and hack/build-images.sh, which start dockerd / build images
only when needed) and fails with a clear message when that is impossible.
Only containers carrying a test node's labels are ever removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from kubelet.runtime import LABEL_CONTAINER_TYPE, LABEL_POD_UID, TYPE_CONTAINER, TYPE_SANDBOX
from tests.cm_support import ControllerManagerProcess
from tests.support import (
    PYTHON,
    REPO,
    ApiServer,
    Etcd,
    Kubectl,
    Process,
    SchedulerProcess,
    free_port,
    node_pki,
    unique,
    wait_http_ok,
)

DOCKER_SOCKET = os.environ.get("DOCKER_SOCKET", "/var/run/docker.sock")
BUSYBOX_IMAGE = "kubelite/busybox:1.35"
KUBELITE_IMAGE = "kubelite/kubelite:dev"  # python 3.11 and grpcio (hack/build-compose-images.sh)
PAUSE_IMAGE = "kubelite/pause:3.10"
# A registry nobody listens on: pulls fail fast, without leaving the machine.
UNREACHABLE_IMAGE = "127.0.0.1:5999/missing:1"

_HTTP_OK_V2 = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Docker-Distribution-API-Version: registry/2.0\r\nContent-Length: 2\r\n\r\n{}")
_HTTP_NOT_TLS = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

_ready = False


def _run_script(script: str) -> None:
    path = REPO / "hack" / script
    try:
        done = subprocess.run(["bash", str(path)], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "DOCKER_SOCKET": DOCKER_SOCKET})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{path} could not run: {e}") from e
    if done.returncode != 0:
        raise RuntimeError(
            f"{path} failed (exit {done.returncode}); Docker is needed for the kubelet tests.\n"
            f"stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-4000:]}")


def ensure_docker() -> None:
    """A Docker daemon that answers, with kubelite/busybox and kubelite/pause built."""
    global _ready
    if _ready:
        return
    _run_script("ensure-docker.sh")
    _run_script("build-images.sh")
    _ready = True


def docker_api() -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=DOCKER_SOCKET),
                        base_url="http://docker", timeout=60)


def containers_with_labels(labels: dict[str, str], *, all_: bool = True) -> list[dict[str, Any]]:
    filters = json.dumps({"label": [f"{k}={v}" for k, v in labels.items()]})
    with docker_api() as api:
        response = api.get("/containers/json",
                           params={"all": str(all_).lower(), "filters": filters})
        response.raise_for_status()
        return list(response.json())


def node_containers(node_name: str, **labels: str) -> list[dict[str, Any]]:
    return containers_with_labels({"io.kubelite.node": node_name, **labels})


def unmount_under(directory: Path) -> None:
    """Test cleanup: unmount what a stopped test kubelet left mounted below its root dir
    (a pod's `medium: Memory` emptyDir is a tmpfs the kubelet unmounts when the pod goes;
    a kubelet stopped first leaves it for its next start, which a test never makes)."""
    with open("/proc/self/mounts") as mounts:
        targets = [line.split()[1] for line in mounts]
    root = str(directory.resolve())
    for target in sorted(targets, key=len, reverse=True):
        if target == root or target.startswith(root + "/"):
            subprocess.run(["umount", target], capture_output=True, timeout=30)


def remove_node_containers(node_name: str) -> None:
    """Test cleanup: force-remove the containers a test kubelet made (and nothing else)."""
    with docker_api() as api:
        for container in node_containers(node_name):
            api.delete(f"/containers/{container['Id']}", params={"force": "true"})


def run_container(name: str, *, labels: dict[str, str]) -> str:
    """`docker run -d --network none --label ... busybox sleep 3600`."""
    with docker_api() as api:
        created = api.post("/containers/create", params={"name": name}, json={
            "Image": BUSYBOX_IMAGE, "Cmd": ["sleep", "3600"], "Labels": labels,
            "HostConfig": {"NetworkMode": "none"}})
        created.raise_for_status()
        container_id = str(created.json()["Id"])
        api.post(f"/containers/{container_id}/start").raise_for_status()
        return container_id


def run_unrelated_container(name: str, *, label: str) -> str:
    """A container no kubelet owns, as a user's `docker run` would make."""
    return run_container(name, labels={"kubelite.test": label})


def inspect_container(container_id: str) -> dict[str, Any] | None:
    with docker_api() as api:
        response = api.get(f"/containers/{container_id}/json")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return dict(response.json())


def remove_container(container_id: str) -> None:
    with docker_api() as api:
        api.delete(f"/containers/{container_id}", params={"force": "true"})


class KubeletProcess:
    """`python -m kubelet` for one node, on a free loopback port, with the local pause image."""

    def __init__(self, apiserver: ApiServer, workdir: Path, *, node_name: str,
                 node_labels: str = "", extra_args: list[str] | None = None) -> None:
        """On a secure ApiServer as a node runs in a cluster: its kubeconfig has the
        node's own identity (system:node:NAME in system:nodes, minted in the session PKI),
        and its port serves HTTPS with its serving certificate, authenticating callers
        (client certificates, TokenReview) and authorizing them with SubjectAccessReview,
        as kubeadm sets a kubelet up. On a plain ApiServer: plain HTTP, no auth."""
        self.node_name = node_name
        self.port = free_port()
        self.apiserver = apiserver
        if apiserver.plain:
            self.url = f"http://127.0.0.1:{self.port}"
            connect = ["--apiserver", apiserver.url]
        else:
            certs = node_pki(node_name)
            self.url = f"https://127.0.0.1:{self.port}"
            config = apiserver.kubeconfig(
                workdir / f"kubelet-{node_name}.kubeconfig", cert=f"kubelet-client-{node_name}",
                user=f"system:node:{node_name}", namespace=None)
            connect = ["--kubeconfig", str(config),
                       "--tls-cert-file", str(certs / f"kubelet-{node_name}.crt"),
                       "--tls-private-key-file", str(certs / f"kubelet-{node_name}.key"),
                       "--client-ca-file", str(certs / "ca.crt"), "--anonymous-auth=false",
                       "--authentication-token-webhook", "--authorization-mode", "Webhook"]
        args = [PYTHON, "-m", "kubelet", *connect,
                "--node-name", node_name, "--node-ip", "127.0.0.1",
                "--address", "127.0.0.1", "--port", str(self.port),
                "--docker-socket", DOCKER_SOCKET,
                "--pod-infra-container-image", PAUSE_IMAGE, *(extra_args or [])]
        if node_labels:
            args += ["--node-labels", node_labels]
        self.process = Process(f"kubelet-{node_name}", args,
                               workdir / f"kubelet-{node_name}.log")

    def start(self) -> KubeletProcess:
        self.process.start()
        # the cluster admin may call any kubelet (a SubjectAccessReview on nodes/healthz)
        wait_http_ok(f"{self.url}/healthz", process=self.process,
                     verify=self.apiserver.ssl_context())
        return self

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def log(self) -> str:
        return self.process.log()


@contextlib.contextmanager
def running_kubelet(apiserver: ApiServer, workdir: Path, *, prefix: str
                    ) -> Iterator[KubeletProcess]:
    """A kubelet on Docker for a fresh node named after `prefix` (a test module's
    fixture); stopped, and its containers removed, after."""
    ensure_docker()
    node = unique(prefix)
    process = KubeletProcess(apiserver, workdir, node_name=node).start()
    try:
        yield process
    finally:
        process.stop()
        remove_node_containers(node)


class StalledRegistry:
    """A registry on a loopback port that never answers for a manifest: a pull of `image`
    stays in progress until `close()` (Docker sets no deadline on that request).

    Docker speaks TLS first; a plain-HTTP answer to its hello makes it fall back to HTTP
    at once (loopback registries are insecure by default). `GET /v2/` gets 200, and the
    manifest request then waits. `stalled` counts the manifest requests being held.
    """

    def __init__(self) -> None:
        self.stalled = 0
        self.requests: list[str] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> StalledRegistry:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def image(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}/stalled:1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            first = await reader.read(1)
            if first == b"\x16":  # a TLS ClientHello
                writer.write(_HTTP_NOT_TLS)
                return
            head = first + await reader.readuntil(b"\r\n\r\n")
            while True:
                line = head.split(b"\r\n", 1)[0].decode(errors="replace")
                self.requests.append(line)
                if " /v2/ " not in f"{line} ":
                    break
                writer.write(_HTTP_OK_V2)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
            self.stalled += 1
            try:
                await reader.read()  # until the client goes away
            finally:
                self.stalled -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)


@contextlib.contextmanager
def docker_cluster(workdir: Path, nodes: Sequence[str], *,
                   controllers: str | None = None) -> Iterator[tuple[ApiServer, Kubectl]]:
    """A whole cluster on Docker: etcd, the secure apiserver, the scheduler, the
    controller-manager when `controllers` are named (`--controllers`), a kubelet per node,
    every node Ready; all stopped after, and the nodes' containers removed."""
    ensure_docker()
    etcd = Etcd(workdir).start()
    started: list[ApiServer | SchedulerProcess | KubeletProcess | ControllerManagerProcess] = []
    try:
        apiserver = ApiServer(etcd, workdir).start()
        started.append(apiserver)
        started.append(SchedulerProcess(apiserver, workdir, port=0).start())
        if controllers:
            started.append(ControllerManagerProcess(apiserver, workdir, extra_args=(
                "--leader-elect=false", f"--controllers={controllers}")).start())
        for node in nodes:
            # configured as a kubeadm cluster's kubelets are (no MissingClusterDNS events)
            started.append(KubeletProcess(apiserver, workdir, node_name=node, extra_args=[
                "--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local"]).start())
        kubectl = Kubectl(apiserver, workdir / "kubectl")
        wanted = sorted(f"{node}=True" for node in nodes)
        deadline = time.monotonic() + 90
        ready: list[str] = []
        while ready != wanted:  # a kubelet answers /healthz before it registers
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes not Ready after 90s: {ready} (want {wanted})")
            time.sleep(0.5)
            ready = sorted(kubectl("get", "nodes", "-o", "jsonpath={range .items[*]}"
                                   "{.metadata.name}={.status.conditions[?(@.type=="
                                   "\"Ready\")].status} {end}").split())
        yield apiserver, kubectl
    finally:
        for process in reversed(started):
            process.stop()
        etcd.stop()
        for node in nodes:
            remove_node_containers(node)


def docker_problems(nodes: Sequence[str], pods: Mapping[str, dict[str, Any]]) -> list[str]:
    """Everything wrong with the containers labelled with `nodes`, given the live pods (by
    name): an orphan, a pod running on a node it is not bound to, or anything but one
    running sandbox and one running app container per pod."""
    by_uid = {pod["metadata"]["uid"]: pod for pod in pods.values()}
    problems: list[str] = []
    seen: Counter[tuple[str, str, str]] = Counter()  # (uid, type, state)
    for node in nodes:
        for container in node_containers(node):
            labels = container.get("Labels") or {}
            uid = labels.get(LABEL_POD_UID, "")
            kind = labels.get(LABEL_CONTAINER_TYPE, "")
            pod = by_uid.get(uid)
            what = f"{container['Id'][:12]} {container['Names']} {kind} {container['State']}"
            if pod is None:
                problems.append(f"orphan on {node}: {what} (pod uid {uid!r})")
                continue
            if pod["spec"].get("nodeName") != node:
                problems.append(f"{pod['metadata']['name']} is bound to "
                                f"{pod['spec'].get('nodeName')} but runs on {node}: {what}")
            seen[(uid, kind, container["State"])] += 1
    for uid, pod in by_uid.items():
        name = pod["metadata"]["name"]
        for kind in (TYPE_SANDBOX, TYPE_CONTAINER):
            states = {state: n for (u, k, state), n in seen.items() if u == uid and k == kind}
            if states != {"running": 1}:
                problems.append(f"{name}: {kind} containers by state {states}, "
                                "want exactly one, running")
    return problems
