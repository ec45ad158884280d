"""dnsmasq as a supervised child process: started in the foreground, bound to the listen
address only, with no upstream (`--no-resolv`, no `server=`: names outside the cluster
domain are answered REFUSED, never forwarded) and no /etc/hosts; names under the cluster
domain are `--local`, so an unknown one is NXDOMAIN.

It reads Services' addresses from hosts files in `--hostsdir` (inotify: changes apply
without a signal) and the SRV/CNAME records from a `--conf-file` read at start only, so
`restart()` is how those change. A dnsmasq that exits on its own is started again with a
capped back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
import struct
import time
from dataclasses import dataclass

from common.backoff import Backoff

log = logging.getLogger(__name__)

DEFAULT_BINARY = "/usr/sbin/dnsmasq"
READY_TIMEOUT_SECONDS = 5.0
STOP_TIMEOUT_SECONDS = 5.0


class DnsmasqFailed(Exception):
    """dnsmasq exited, or never answered, when started."""


@dataclass(frozen=True)
class DnsmasqConfig:
    listen_address: str
    port: int
    domain: str
    hosts_dir: str
    conf_file: str
    binary: str = DEFAULT_BINARY
    ttl: int = 5  # CoreDNS's kubernetes plugin's default
    user: str = ""  # dnsmasq's --user ("": its default, nobody)


def dnsmasq_args(config: DnsmasqConfig) -> list[str]:
    args = [config.binary, "--keep-in-foreground", "--no-resolv", "--no-hosts",
            "--no-poll", f"--listen-address={config.listen_address}", "--bind-interfaces",
            f"--port={config.port}", f"--local=/{config.domain}/",
            f"--hostsdir={config.hosts_dir}", f"--conf-file={config.conf_file}",
            f"--local-ttl={config.ttl}", "--pid-file=", "--log-facility=-"]
    if config.user:
        args.append(f"--user={config.user}")
    return args


def probe_query(name: str) -> tuple[int, bytes]:
    """(id, a DNS query for `name` A): enough to see that a server answers."""
    query_id = random.randrange(1 << 16)
    header = struct.pack("!HHHHHH", query_id, 0x0100, 1, 0, 0, 0)
    labels = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".") if label)
    return query_id, header + labels + b"\0" + struct.pack("!HH", 1, 1)


def answers(address: str, port: int, name: str, timeout: float) -> bool:
    """Whether a DNS server answers a query on address:port (blocking: in a thread)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    query_id, packet = probe_query(name)
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(packet, (address, port))
            reply = sock.recv(512)
        except OSError:
            return False
    return len(reply) >= 2 and struct.unpack("!H", reply[:2])[0] == query_id


def stop_leftover(pid_file: str, conf_file: str) -> None:
    """End the dnsmasq a previous watcher started with this conf file, if it still runs
    (blocking: in a thread). Its command line must name our conf file: a reused pid of
    another process is left alone."""
    try:
        with open(pid_file, encoding="ascii") as f:
            pid = int(f.read().strip() or 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().split(b"\0")
    except (OSError, ValueError):
        return
    if f"--conf-file={conf_file}".encode() not in cmdline:
        return
    log.warning("ending dnsmasq (pid %d) left running by a previous cluster DNS", pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    for _ in range(50):
        if not os.path.exists(f"/proc/{pid}"):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def write_pid(pid_file: str, pid: int) -> None:
    with open(pid_file, "w", encoding="ascii") as f:
        f.write(f"{pid}\n")


class Dnsmasq:
    """One dnsmasq child: start, restart, stop, and started again should it die."""

    def __init__(self, config: DnsmasqConfig) -> None:
        self.config = config
        # Our child's pid, beside its conf file: a watcher killed with -9 leaves its dnsmasq
        # holding the port, and the next one ends it.
        self.pid_file = os.path.join(os.path.dirname(config.conf_file), "dnsmasq.pid")
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0  # restarts asked for (config changes)
        self.crashes = 0  # exits it was not asked for
        self._stopping = False
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        """Start dnsmasq and wait until it answers; DnsmasqFailed when it exits first
        (a port in use) or stays silent."""
        self._stopping = False
        await self._spawn()
        if self._supervisor is None or self._supervisor.done():
            self._supervisor = asyncio.create_task(self._supervise(), name="dnsmasq supervisor")

    async def restart(self) -> None:
        """Stop and start again: how it reads a changed --conf-file."""
        started = time.monotonic()
        self.restarts += 1
        await self._terminate()
        await self._spawn()
        log.info("dnsmasq restarted for new SRV/CNAME records in %.0f ms",
                 (time.monotonic() - started) * 1000)

    async def stop(self) -> None:
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        await self._terminate()

    async def _spawn(self) -> None:
        args = dnsmasq_args(self.config)
        await asyncio.to_thread(stop_leftover, self.pid_file, self.config.conf_file)
        # In the watcher's process group: what stops the group (a supervisor, a test
        # fixture, Ctrl-C) stops dnsmasq with it.
        self.process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL)
        await asyncio.to_thread(write_pid, self.pid_file, self.process.pid)
        log.info("dnsmasq (pid %d) serving %s on %s:%d", self.process.pid,
                 self.config.domain, self.config.listen_address, self.config.port)
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise DnsmasqFailed(f"dnsmasq exited with status {self.process.returncode} "
                                    f"at start (its message is above)")
            if await asyncio.to_thread(answers, self.config.listen_address, self.config.port,
                                       f"probe.{self.config.domain}", 0.05):
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self.process.wait()
        await self._terminate()
        raise DnsmasqFailed(f"dnsmasq did not answer on {self.config.listen_address}:"
                            f"{self.config.port} within {READY_TIMEOUT_SECONDS:.0f}s")

    async def _terminate(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_TIMEOUT_SECONDS):
                await process.wait()
        except TimeoutError:
            log.warning("dnsmasq (pid %d) ignored SIGTERM for %.0fs: killing it", process.pid,
                        STOP_TIMEOUT_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def _supervise(self) -> None:
        backoff = Backoff(initial=0.5, cap=30.0)
        while not self._stopping:
            process = self.process
            if process is None:
                await asyncio.sleep(0.1)  # between a restart's stop and start
                continue
            code = await process.wait()
            if self._stopping or self.process is not process:
                continue  # stopped or restarted on purpose
            self.crashes += 1
            delay = backoff.next()
            log.error("dnsmasq (pid %d) exited with status %s; starting it again in %.1fs",
                      process.pid, code, delay)
            await asyncio.sleep(delay)
            try:
                await self._spawn()
                backoff.reset()
            except DnsmasqFailed as e:
                log.error("%s", e)
