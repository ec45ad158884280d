"""The iptables, sysctl and conntrack commands, run without blocking the event loop."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from kube_proxy.rules import TABLES, Existing, Names, parse_save

log = logging.getLogger("kube-proxy")

ROUTE_LOCALNET = Path("/proc/sys/net/ipv4/conf/all/route_localnet")


class CommandFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


async def run(*argv: str, stdin: str | None = None) -> Result:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    return Result(process.returncode if process.returncode is not None else -1,
                  out.decode(errors="replace"), err.decode(errors="replace"))


async def save(table: str) -> str:
    result = await run("iptables-save", "-t", table)
    if result.returncode != 0:
        raise CommandFailed(f"iptables-save -t {table}: {result.stderr.strip()}")
    return result.stdout


async def existing(names: Names) -> Existing:
    """Our chains and jump rules as the kernel has them now."""
    texts = await asyncio.gather(*(save(table) for table in TABLES))
    chains: dict[str, frozenset[str]] = {}
    jumps: dict[str, tuple[str, ...]] = {}
    for table, text in zip(TABLES, texts, strict=True):
        chains[table], jumps[table] = parse_save(text, names, table)
    return Existing(chains=chains, jumps=jumps)


async def restore(text: str) -> None:
    """`iptables-restore --noflush`: one atomic transaction per table; only the chains
    the text declares are flushed."""
    if not text:
        return
    result = await run("iptables-restore", "--noflush", "-w", "5", stdin=text)
    if result.returncode != 0:
        raise CommandFailed(f"iptables-restore: {result.stderr.strip()}")


def enable_route_localnet() -> None:
    """Node ports on 127.0.0.1 need routing of loopback-sourced packets (kube sets it)."""
    try:
        if ROUTE_LOCALNET.read_text().strip() != "1":
            ROUTE_LOCALNET.write_text("1\n")
            log.info("set sysctl net.ipv4.conf.all.route_localnet=1 (node ports on localhost)")
    except OSError as e:
        log.warning("cannot set route_localnet (%s): node ports will not answer on 127.0.0.1",
                    e)


async def conntrack_delete(args: list[str]) -> None:
    """`conntrack -D ...`; no matching entry is not an error (conntrack exits 1 then)."""
    result = await run("conntrack", "-D", *args)
    if result.returncode != 0 and "0 flow entries" not in result.stderr:
        log.warning("conntrack -D %s: %s", " ".join(args), result.stderr.strip())
