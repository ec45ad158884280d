"""The rule for every relative path a pod names inside a volume (an item's `path`, a
mount's `subPath`): kube's validateLocalDescendingPath and validateLocalNonReservedPath,
and atomic_writer.go's validatePath. Shared by the apiserver's validation (422 with these
messages) and the kubelet (which checks again before touching the filesystem). Pure."""

from __future__ import annotations

MAX_PATH_LENGTH = 4096
MAX_SEGMENT_LENGTH = 255


def path_errors(path: str, *, reserved: bool = True) -> list[str]:
    """What is wrong with a relative path (kube's messages); [] when fine. `reserved`:
    also refuse a leading `..` (the atomic writer's own entries)."""
    if not path:
        return ["must not be empty"]
    errors = []
    if "\x00" in path:
        errors.append("must not contain a NUL byte")
    if path.startswith("/"):
        errors.append("must be a relative path")
    parts = path.split("/")
    if ".." in parts:
        errors.append("must not contain '..'")
    elif reserved and path.startswith(".."):
        errors.append("must not start with '..'")
    if len(path) > MAX_PATH_LENGTH:
        errors.append(f"must not be longer than {MAX_PATH_LENGTH} characters")
    if any(len(p) > MAX_SEGMENT_LENGTH for p in parts):
        errors.append(f"must not have an element longer than {MAX_SEGMENT_LENGTH} characters")
    return errors
