"""`make up` end to end: the launcher (hack/up.py) run as a user runs it, then the seeds.

The seeds (examples/*.yaml): 1. a pod with `nodeName` runs on node1 with the kubelet's
events only; 2. nodes labelled shuai=a / shuai=b, a pod with `nodeSelector: shuai=b` is
Scheduled to node2 and runs; 3. a pod whose selector matches nothing stays Pending with
FailedScheduling until a node gets the label; 4. deleting the three removes their
containers. Then Ctrl-C stops every process and exits 0, the etcd state survives a
restart, and `hack/up.py down` stops a running cluster and removes its pods' containers.

Each cluster gets a temporary state directory, free ports and node names of its own
(kubelets own the containers labelled with their node name, so sharing `node1` with a
user's cluster on the same dockerd would be a fight); the seeds' `node1`/`node2` are
mapped to them. The seeds and the launcher live in tests/seeds.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import yaml

from tests.docker_support import BUSYBOX_IMAGE, ensure_docker, node_containers
from tests.seeds import Launcher, alive, example, kubectl, label_node, run_seeds, running_on
from tests.support import REPO, eventually

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_ready() -> None:
    ensure_docker()


@pytest.fixture
def launcher(docker_ready: None, tmp_path: Path) -> Iterator[Launcher]:
    launched = Launcher.fresh(tmp_path / "state")
    yield launched
    launched.cleanup()


# --- the launcher's pure parts ---------------------------------------------------------


def load_hack_module(name: str) -> ModuleType:
    """hack/ holds scripts, not a package: load one by path (its siblings import too)."""
    sys.path.insert(0, str(REPO / "hack"))
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / "hack" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "hack"))


@pytest.mark.parametrize(("component", "line", "shown"), [
    ("scheduler", "2026-11-29 17:58:11,123 scheduler INFO Successfully assigned default/a to n2",
     "17:58:11 [scheduler] Successfully assigned default/a to n2"),
    ("kubelet-n1", "2026-11-29 17:58:12,001 INFO kubelet.node: node n1: registered",
     "17:58:12 [kubelet-n1] node n1: registered"),
    ("kubelet-n1", "2026-11-29 17:58:12,001 WARNING kubelet: relist failed: boom",
     "17:58:12 [kubelet-n1] WARNING relist failed: boom"),
    ("scheduler", "2026-11-29 17:58:11,123 scheduler DEBUG queue: 3 pods", None),
    ("apiserver", "2026-11-29 17:58:11,123 apiserver INFO created events default/a.1f", None),
    ("apiserver", "2026-11-29 17:58:11,123 uvicorn.error INFO Uvicorn running on http://x", None),
    ("etcd", '{"level":"warn","ts":"2026-11-29T17:56:15.038Z","msg":"slow fdatasync"}',
     "17:56:15 [etcd] WARNING slow fdatasync"),
    ("etcd", '{"level":"info","ts":"2026-11-29T17:56:15.038Z","msg":"ready to serve"}', None),
    ("etcd", '{"level":"warn","ts":"2026-11-29T17:56:15Z","msg":"simple token is not '
     'cryptographically signed"}', None),
    ("apiserver", "INFO:     127.0.0.1:5000 - GET /readyz 200", None),
])
def test_console_shows_one_line_per_event_worth_seeing(component: str, line: str,
                                                       shown: str | None) -> None:
    console = load_hack_module("up_console")
    formatted = console.ConsoleFilter().format(component, line, width=0)
    assert (formatted and " ".join(formatted.split())) == shown


def test_console_shows_a_traceback_under_its_error_only() -> None:
    console = load_hack_module("up_console")
    lines = ["2026-11-29 17:58:11,123 ERROR kubelet: sync failed", "Traceback (most recent "
             "call last):", "ValueError: x", "2026-11-29 17:58:12,000 INFO kubelet: fine",
             "a stray print"]
    console_filter = console.ConsoleFilter()
    shown = [console_filter.format("kubelet-n1", line, width=10) for line in lines]
    assert [s is not None for s in shown] == [True, True, True, True, False]
    assert "ERROR sync failed" in shown[0] and shown[1].strip().endswith("Traceback (most "
                                                                        "recent call last):")


def test_components_start_in_order_and_stop_kubelets_first() -> None:
    up = load_hack_module("up")
    options = up.Options(state_dir=Path("/tmp/state"), nodes=("a", "b"),
                         kubelet_ports=(1, 2))
    components = up.plan(options)
    assert [c.name for c in components] == [
        "etcd", "apiserver", "scheduler", "controller-manager", "cluster-dns",
        "kube-proxy-a", "kube-proxy-b", "kubelet-a", "kubelet-b"]
    children = [up.Child(c, process=None, log_path=Path("/dev/null")) for c in components]
    assert [[c.name for c in group] for group in up.stop_groups(children)] == [
        ["kubelet-a", "kubelet-b"], ["kube-proxy-a", "kube-proxy-b"], ["cluster-dns"],
        ["controller-manager"], ["scheduler"], ["apiserver"], ["etcd"]]
    # each node's kube-proxy owns chains of its own; the kubelets point pods at the DNS
    proxies = {c.name: c.args for c in components if c.kind == "kube-proxy"}
    assert [args[args.index("--iptables-chain-prefix") + 1] for args in proxies.values()] == [
        "KUBE", "KUBE2"]
    assert [args[args.index("--healthz-bind-address") + 1] for args in proxies.values()] == [
        "127.0.0.1:10256", "127.0.0.1:10258"]
    kubelet = components[-1].args
    assert kubelet[kubelet.index("--cluster-dns") + 1] == "10.96.0.10"
    assert kubelet[kubelet.index("--cluster-domain") + 1] == "cluster.local"
    dns = components[4]
    assert dns.args[dns.args.index("--cluster-ip") + 1] == "10.96.0.10"
    assert dns.health_url == "http://127.0.0.1:10055/readyz"
    assert "--data-dir" in components[0].args
    assert components[0].args[components[0].args.index("--data-dir") + 1] == "/tmp/state/etcd"
    scheduler = components[2]
    assert scheduler.args[-2:] == ("--port", "10259")  # kube-scheduler's port
    assert scheduler.health_url == "http://127.0.0.1:10259/readyz"
    assert scheduler.ports == (("scheduler", 10259),)


def test_secure_by_default_https_only_and_each_component_with_its_kubeconfig(tmp_path: Path) -> None:
    up = load_hack_module("up")
    _, options = up.parse_args(["--secure-port", "16443", "--state-dir",
                                str(tmp_path), "--nodes", "a", "--kubelet-ports", "1",
                                "--authorization-mode", "AlwaysAllow"])
    etcd, apiserver, scheduler, controller_manager, dns, proxy, kubelet = up.plan(options)
    args = apiserver.args
    assert args[args.index("--port") + 1] == "0"  # no plain-HTTP port
    assert args[args.index("--secure-port") + 1] == "16443"
    assert args[args.index("--client-ca-file") + 1] == str(tmp_path / "pki" / "ca.crt")
    assert apiserver.health_url == "https://127.0.0.1:16443/readyz"
    # etcd: TLS, only its own CA's client certificates; the apiserver presents its own
    pki_dir = tmp_path / "pki"
    assert args[args.index("--etcd-servers") + 1] == "https://127.0.0.1:2379"
    assert args[args.index("--etcd-cafile") + 1] == str(pki_dir / "etcd" / "ca.crt")
    assert args[args.index("--etcd-certfile") + 1] == str(pki_dir / "apiserver-etcd-client.crt")
    assert args[args.index("--etcd-keyfile") + 1] == str(pki_dir / "apiserver-etcd-client.key")
    assert "--client-cert-auth" in etcd.args
    assert etcd.args[etcd.args.index("--trusted-ca-file") + 1] == str(pki_dir / "etcd" / "ca.crt")
    assert etcd.args[etcd.args.index("--cert-file") + 1] == str(pki_dir / "etcd" / "server.crt")
    for flag in ("--listen-client-urls", "--advertise-client-urls"):
        assert etcd.args[etcd.args.index(flag) + 1] == "https://127.0.0.1:2379"
    assert etcd.health_url == "https://127.0.0.1:2379/health"
    assert scheduler.args[scheduler.args.index("--kubeconfig") + 1] == str(
        tmp_path / "pki" / "scheduler.conf")
    assert kubelet.args[kubelet.args.index("--kubeconfig") + 1] == str(
        tmp_path / "pki" / "kubelet-a.conf")
    assert controller_manager.args[controller_manager.args.index("--kubeconfig") + 1] == str(
        tmp_path / "pki" / "controller-manager.conf")
    assert dns.args[dns.args.index("--kubeconfig") + 1] == str(tmp_path / "pki" / "kube-dns.conf")
    assert proxy.args[proxy.args.index("--kubeconfig") + 1] == str(
        tmp_path / "pki" / "kube-proxy.conf")
    assert "--apiserver" not in (scheduler.args + kubelet.args + controller_manager.args
                                 + dns.args + proxy.args)
    up.write_secure_files(options)
    config = (tmp_path / "kubeconfig").read_text()
    assert "https://127.0.0.1:16443" in config and "client-certificate-data" in config
    assert (tmp_path / "pki" / "kubelet-a.conf").exists()
    steps = up.next_steps(options)
    assert "--cacert" in steps and "timeline pod/pod-selector" in steps
    assert "http://127.0.0.1:8001/dashboard/" in steps
    _, insecure = up.parse_args(["--no-secure", "--state-dir", str(tmp_path), "--nodes", "a",
                                 "--kubelet-ports", "1"])
    plain = up.plan(insecure)
    assert "--secure-port" not in plain[1].args  # development mode: plain HTTP on --port
    assert plain[1].args[plain[1].args.index("--port") + 1] == "8080"
    assert "--client-cert-auth" not in plain[0].args
    assert plain[1].args[plain[1].args.index("--etcd-servers") + 1].startswith("http://")
    assert "--apiserver" in plain[2].args


def test_scheduler_port_zero_means_no_endpoint_to_wait_for() -> None:
    up = load_hack_module("up")
    command, options = up.parse_args(["--scheduler-port", "0"])
    scheduler = up.scheduler_component(options)
    assert (command, scheduler.args[-2:]) == ("up", ("--port", "0"))
    assert (scheduler.health_url, scheduler.ports) == (None, ())


def test_the_compose_entrypoint_reads_the_kubelets_flags() -> None:
    entrypoint = load_hack_module("kubelet_entrypoint")
    args = ["--apiserver=http://127.0.0.1:8080", "--node-name", "node1",
            "--docker-socket=/run/d.sock"]
    assert entrypoint.kubelet_flag(args, "--node-name") == "node1"
    assert entrypoint.kubelet_flag(args, "--docker-socket") == "/run/d.sock"
    assert entrypoint.kubelet_flag(args, "--port", "10250") == "10250"


# --- tests -------------------------------------------------------------------------------


async def test_make_up_runs_the_seeds(launcher: Launcher) -> None:
    launcher.start()
    console = launcher.console()
    assert f"export KUBECONFIG={launcher.state_dir / 'kubeconfig'}" in console
    assert f"[kubelet-{launcher.nodes.node1}]" in console  # components' lines, prefixed
    kubeconfig = yaml.safe_load((launcher.state_dir / "kubeconfig").read_text())
    assert kubeconfig["current-context"] == "kubernetes-admin@kubernetes"  # kubeadm's
    assert kubeconfig["clusters"][0]["cluster"]["server"] == launcher.apiserver  # HTTPS
    for component in ("etcd", "apiserver", "scheduler", f"kubelet-{launcher.nodes.node2}"):
        assert (launcher.state_dir / "logs" / f"{component}.log").exists()

    await run_seeds(launcher.server, launcher.nodes)

    assert "[apiserver]" in launcher.console() and "[scheduler]" in launcher.console()
    async with httpx.AsyncClient(base_url=launcher.scheduler, timeout=30) as http:
        assert (await http.get("/readyz")).text == "ok"  # `up` waited for it
        metrics = (await http.get("/metrics")).text
    # pod-selector, then pod-ssd once labelled: two binds (pod-example has a nodeName).
    assert ('scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 2'
            in metrics.splitlines()), metrics
    # a next step `up` prints: a pod's flow, through kubectl's plugin lookup
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin",
           "KUBECONFIG": str(launcher.state_dir / "kubeconfig"), "HOME": "/nonexistent"}

    def user_kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(REPO / ".venv" / "bin" / "kubectl"), *args], env=env,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        return done

    user_kubectl("run", "flow", f"--image={BUSYBOX_IMAGE}", "--", "sleep", "3600")
    user_kubectl("wait", "--for=condition=Ready", "pod/flow", "--timeout=60s")
    flow = user_kubectl("timeline", "pod/flow").stdout
    assert ": Ready after " in flow.splitlines()[0], flow
    user_kubectl("delete", "pod", "flow", "--wait=false")

    # The README's Services walkthrough: expose a Deployment, reach it by name from a pod
    # (the kubelet's resolv.conf -> this cluster's DNS -> its ClusterIP -> kube-proxy).
    serve = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"
    user_kubectl("create", "deployment", "web", f"--image={BUSYBOX_IMAGE}", "--replicas=2",
                 "--", "sh", "-c", serve)
    user_kubectl("expose", "deployment", "web", "--port=80", "--target-port=8080")
    user_kubectl("rollout", "status", "deployment/web", "--timeout=90s")
    replicas = set(user_kubectl("get", "pods", "-l", "app=web", "-o",
                                "jsonpath={.items[*].metadata.name}").stdout.split())
    assert len(replicas) == 2, replicas

    async def answered_by_name() -> str | None:
        done = await asyncio.to_thread(
            subprocess.run, [str(REPO / ".venv" / "bin" / "kubectl"), "run", "-i", "--rm", "client",
             f"--image={BUSYBOX_IMAGE}", "--restart=Never", "--", "wget", "-qO-", "web"],
            env=env, capture_output=True, text=True, timeout=90)
        answer = done.stdout.split()[0] if done.returncode == 0 and done.stdout else ""
        return answer if answer in replicas else None

    # a retry only while the new slice reaches the kube-proxies and the DNS
    assert await eventually(answered_by_name, timeout=60, interval=1,
                            what="`wget -qO- web` from a pod answered by a replica")
    user_kubectl("delete", "deployment", "web")
    user_kubectl("delete", "service", "web")


async def test_ctrl_c_stops_everything_state_survives_and_down_cleans_up(
        launcher: Launcher) -> None:
    launcher.start()
    children = launcher.children()
    async with httpx.AsyncClient(base_url=launcher.server, timeout=30) as http:
        await label_node(http, launcher.nodes.node1, "shuai", "a")
        kubectl(launcher.server, "create", "-f", "-",
                stdin=json.dumps(example("nodename.yaml", launcher.nodes)))
        await running_on(http, "pod-example", launcher.nodes.node1)

    assert launcher.interrupt() == 0
    assert [pid for pid in children if alive(pid)] == []
    assert "stopping kubelet-" in launcher.console() and "stopped" in launcher.console()
    assert not (launcher.state_dir / "up.pid").exists()
    # The kubelet leaves its pods running when it stops, as the real one does.
    assert node_containers(launcher.nodes.node1, **{"io.kubernetes.pod.name": "pod-example"})

    launcher.start()  # same state directory: etcd kept the node's label and the pod
    async with httpx.AsyncClient(base_url=launcher.server, timeout=30) as http:
        node = (await http.get(f"/api/v1/nodes/{launcher.nodes.node1}")).json()
        assert node["metadata"]["labels"]["shuai"] == "a"
        await running_on(http, "pod-example", launcher.nodes.node1)

    children = launcher.children()
    down = await asyncio.to_thread(subprocess.run, launcher.args("down"), capture_output=True,
                                   text=True, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "removed 2 pod container(s)" in down.stdout, down.stdout
    assert launcher.process is not None and launcher.process.proc is not None
    assert launcher.process.proc.wait(timeout=30) == 0
    assert [pid for pid in children if alive(pid)] == []
    assert node_containers(launcher.nodes.node1) == []


def test_a_port_in_use_is_one_clear_line(launcher: Launcher) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", launcher.port))
        holder.listen()
        done = subprocess.run(launcher.args(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"kubelite: port {launcher.port} (apiserver) on 127.0.0.1 is "
                               "already in use"), lines[0]
