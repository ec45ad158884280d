"""Path safety for everything a pod names inside a volume: item paths, `subPath`, keys.

A user path is relative, has no `..` element and does not start with `..` (the atomic
writer's own `..data` and `..TIMESTAMP` entries), as kube's validateLocalDescendingPath
and atomic_writer.go's validatePath require. `resolve_inside` follows symlinks the way
the kernel would and refuses a result outside the base directory: a container that made
`sub -> /etc` in its volume does not get the host's /etc bound by a later `subPath: sub`.
Pure functions, except `resolve_inside` (which reads the filesystem).
"""

from __future__ import annotations

import os

from common.volume_paths import path_errors


class UnsafePath(ValueError):
    """A user path that would leave its directory."""


def check_relative(path: str, what: str = "path", *, reserved: bool = True) -> str:
    """`path` normalised (no `.` or empty elements); UnsafePath when it may not be used
    (`reserved`: nor start with `..`)."""
    errors = path_errors(path, reserved=reserved)
    if errors:
        raise UnsafePath(f"invalid {what} {path!r}: {'; '.join(errors)}")
    normal = os.path.normpath(path)
    if normal in (".", "") or normal == ".." or normal.startswith("../"):
        raise UnsafePath(f"invalid {what} {path!r}: must name something inside the volume")
    return normal


def is_inside(base: str, path: str) -> bool:
    base = os.path.normpath(base)
    return path == base or path.startswith(base + os.sep)


def resolve_inside(base: str, relative: str, what: str = "subPath") -> str:
    """The real path of `base/relative` (symlinks followed); UnsafePath when that is not
    inside `base`'s real path."""
    root = os.path.realpath(base)
    target = os.path.realpath(os.path.join(root, check_relative(relative, what,
                                                                reserved=False)))
    if not is_inside(root, target):
        raise UnsafePath(f"{what} {relative!r} resolves to {target}, outside the volume")
    return target
