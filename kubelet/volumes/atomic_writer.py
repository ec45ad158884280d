"""The atomic writer of configMap, secret, downwardAPI and projected volumes (after kube's
pkg/volume/util/atomic_writer.go).

A volume directory holds the payload in a hidden timestamped directory
(`..2026_12_02_04_30_00.123456789`), a symlink `..data` to it, and for each top-level
user-visible entry a symlink `name -> ..data/name`. An update writes a new timestamped
directory, then swaps `..data` with one rename (a reader sees the old or the new payload,
never a mix), then adds and removes the user-visible symlinks, then removes the old
directory. Nothing is written when the payload is unchanged. Every path is checked by
`kubelet.volumes.paths` first; synchronous, the kubelet runs it in a thread.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kubelet.volumes.paths import UnsafePath, check_relative

DATA_DIR = "..data"
DATA_DIR_TMP = "..data_tmp"


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int = 0o644


Payload = Mapping[str, FileProjection]


def checked_payload(payload: Payload) -> dict[str, FileProjection]:
    """The payload with normalised paths; UnsafePath for a bad one, or one whose
    directory is another entry's file."""
    clean = {check_relative(path, "item path"): file for path, file in payload.items()}
    for path in clean:
        parent = os.path.dirname(path)
        while parent:
            if parent in clean:
                raise UnsafePath(f"item path {path!r} is inside the file {parent!r}")
            parent = os.path.dirname(parent)
    return clean


def top_level(payload: Mapping[str, FileProjection]) -> set[str]:
    return {path.split("/", 1)[0] for path in payload}


def _timestamped_name() -> str:
    now = time.time_ns()
    seconds = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(now // 1_000_000_000))
    return f"..{seconds}.{now % 1_000_000_000:09d}{secrets.token_hex(2)}"


def _current(target: str) -> str | None:
    """The timestamped directory `..data` points at (None: none yet)."""
    try:
        link = os.readlink(os.path.join(target, DATA_DIR))
    except (FileNotFoundError, OSError):
        return None
    if "/" in link or not link.startswith(".."):
        return None
    return os.path.join(target, link)


def _read_current(directory: str) -> dict[str, FileProjection]:
    found = {}
    for root, _dirs, files in os.walk(directory):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                data = f.read()
            found[os.path.relpath(full, directory)] = FileProjection(
                data, os.stat(full).st_mode & 0o7777)
    return found


def _write_payload(directory: str, payload: Mapping[str, FileProjection]) -> None:
    os.mkdir(directory, 0o755)
    for path, file in sorted(payload.items()):
        full = os.path.join(directory, path)
        os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(file.data)
        os.chmod(full, file.mode)


def write(target: str, payload: Payload) -> bool:
    """Make `target` show exactly `payload`; whether anything changed."""
    clean = checked_payload(payload)
    os.makedirs(target, mode=0o755, exist_ok=True)
    old = _current(target)
    if old is not None and os.path.isdir(old) and _read_current(old) == clean:
        return False
    new = os.path.join(target, _timestamped_name())
    _write_payload(new, clean)
    tmp = os.path.join(target, DATA_DIR_TMP)
    with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
    os.symlink(os.path.basename(new), tmp)
    os.rename(tmp, os.path.join(target, DATA_DIR))
    wanted = top_level(clean)
    for name in wanted:
        link = os.path.join(target, name)
        if not os.path.islink(link):
            if os.path.lexists(link):  # not ours: a plain file or directory is in the way
                raise UnsafePath(f"{link} exists and is not the writer's symlink")
            os.symlink(os.path.join(DATA_DIR, name), link)
    for name in os.listdir(target):
        if name.startswith(".."):
            continue
        link = os.path.join(target, name)
        if name not in wanted and os.path.islink(link):
            os.remove(link)
    if old is not None and os.path.isdir(old):
        shutil.rmtree(old, ignore_errors=True)
    return True
