"""The dnsmasq supervisor (cluster_dns/dnsmasq.py) on the real dnsmasq, on loopback: a
hosts file changed under it is answered without a signal, a conf file change needs (and
gets) a restart, a dnsmasq killed is started again, a port in use fails the start."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator

import dns.asyncquery
import dns.exception
import dns.message
import dns.rcode
import pytest

from cluster_dns.dnsmasq import Dnsmasq, DnsmasqConfig, DnsmasqFailed, answers
from cluster_dns.main import StateDirError, prepare_state_dir, write_atomically
from tests.support import eventually, free_port


async def ask(config: DnsmasqConfig, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    reply = await dns.asyncquery.udp(dns.message.make_query(name, rdtype),
                                     config.listen_address, port=config.port, timeout=2)
    return (dns.rcode.to_text(reply.rcode()),
            sorted(r.to_text() for rrset in reply.answer for r in rrset))


@pytest.fixture
async def config() -> AsyncIterator[DnsmasqConfig]:
    state = tempfile.mkdtemp(prefix="kubelite-dnsmasq-")
    hosts_dir, conf_file = prepare_state_dir(state)
    write_atomically(state, "records.conf", "")
    yield DnsmasqConfig(listen_address="127.0.0.1", port=free_port(), domain="cluster.local",
                        hosts_dir=hosts_dir, conf_file=conf_file)
    shutil.rmtree(state, ignore_errors=True)


async def test_hosts_files_apply_live_and_the_conf_file_on_restart(config: DnsmasqConfig):
    server = Dnsmasq(config)
    await server.start()
    try:
        assert await ask(config, "web.team.svc.cluster.local") == ("NXDOMAIN", [])
        write_atomically(config.hosts_dir, "team_web", "10.96.0.20 web.team.svc.cluster.local\n")
        async def answered() -> bool:
            return await ask(config, "web.team.svc.cluster.local") == ("NOERROR", ["10.96.0.20"])
        await eventually(answered, timeout=10, interval=0.05)
        write_atomically(os.path.dirname(config.conf_file), "records.conf",
                         "srv-host=_http._tcp.web.team.svc.cluster.local,"
                         "web.team.svc.cluster.local,80,0,100\n")
        assert await ask(config, "_http._tcp.web.team.svc.cluster.local", "SRV") == (
            "NXDOMAIN", [])  # read at start only
        await server.restart()
        assert await ask(config, "_http._tcp.web.team.svc.cluster.local", "SRV") == (
            "NOERROR", ["0 100 80 web.team.svc.cluster.local."])
        assert server.restarts == 1 and server.crashes == 0
    finally:
        await server.stop()
    assert not answers(config.listen_address, config.port, "probe.cluster.local", 0.3)


async def test_a_killed_dnsmasq_is_started_again(config: DnsmasqConfig):
    server = Dnsmasq(config)
    await server.start()
    try:
        assert server.process is not None
        first = server.process.pid
        os.kill(first, signal.SIGKILL)

        async def back() -> bool:
            if server.process is None or server.process.pid == first:
                return False
            try:
                return await ask(config, "absent.cluster.local") == ("NXDOMAIN", [])
            except dns.exception.Timeout:
                return False  # the new dnsmasq is not listening yet
        await eventually(back, timeout=15, interval=0.1)
        assert server.crashes == 1
    finally:
        await server.stop()


async def test_a_port_in_use_fails_the_start(config: DnsmasqConfig):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind((config.listen_address, config.port))
        server = Dnsmasq(config)
        with pytest.raises(DnsmasqFailed, match="exited with status"):
            await server.start()
        await server.stop()


def test_a_state_dir_dnsmasq_cannot_reach_is_refused():
    closed = tempfile.mkdtemp(prefix="kubelite-closed-")  # mkdtemp: mode 0700
    try:
        with pytest.raises(StateDirError, match=f"cannot enter {closed}"):
            prepare_state_dir(os.path.join(closed, "dns"))
        hosts_dir, _ = prepare_state_dir(os.path.join(closed, "dns"), unprivileged=False)
        assert os.path.isdir(hosts_dir)
    finally:
        shutil.rmtree(closed)
