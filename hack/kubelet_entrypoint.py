"""The compose kubelet's entrypoint: run the kubelet; when stopped, take its pods' containers
down with it.

    python hack/kubelet_entrypoint.py -- --kubeconfig FILE --node-name node1 [kubelet flags...]

`docker compose down` stops each service with SIGTERM and removes its container, but it
knows nothing of the pod containers a kubelet asked the Docker daemon for. The kubelet
itself leaves its pods running when it stops, as the real one does (a restarted kubelet
adopts them; `make up` relies on that), so this wrapper does the node's teardown: it
forwards SIGTERM/SIGINT to the kubelet, waits for it to exit, then force-removes every
container labelled `io.kubelite.managed=true` and `io.kubelite.node=<its node>`, nothing
else, and the pods' files under its --root-dir (their volumes: tokens, ConfigMap and Secret
copies). Pods stay in etcd: the next `docker compose up` runs them again.
A kubelet that exits on its own (a crash) is not cleaned up after, so its pods survive.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pod_containers import (  # noqa: E402
    DEFAULT_DOCKER_SOCKET,
    DockerUnavailable,
    remove_pod_containers,
)

log = logging.getLogger("kubelet-entrypoint")


def kubelet_flag(args: list[str], name: str, default: str | None = None) -> str | None:
    """The value of `--name V` or `--name=V` among the kubelet's arguments."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kubelet_args", nargs=argparse.REMAINDER,
                        help="-- then the kubelet's own arguments")
    kubelet_args = [a for a in parser.parse_args(argv).kubelet_args if a != "--"]
    node = kubelet_flag(kubelet_args, "--node-name")
    if not node:
        parser.error("the kubelet arguments need --node-name")
    docker_socket = kubelet_flag(kubelet_args, "--docker-socket", DEFAULT_DOCKER_SOCKET)
    assert docker_socket is not None

    kubelet = subprocess.Popen([sys.executable, "-m", "kubelet", *kubelet_args])
    stopping: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        kubelet.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    code = kubelet.wait()
    if not stopping:
        log.error("kubelet %s exited by itself (code %s): its pods are left running",
                  node, code)
        return code
    try:
        removed = remove_pod_containers(docker_socket, [node])
    except DockerUnavailable as e:
        log.error("node %s: could not remove its pods' containers: %s", node, e)
        return 1
    log.info("node %s stopped: removed %d pod container(s)%s", node, len(removed),
             f": {', '.join(sorted(removed))}" if removed else "")
    root_dir = kubelet_flag(kubelet_args, "--root-dir")
    if root_dir:
        shutil.rmtree(Path(root_dir) / "pods", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
