"""The kubelet's volumes (after pkg/kubelet/volumemanager and the in-tree plugins of
pkg/volume): set up before a pod's containers start, again at every sync (so a changed
ConfigMap or Secret shows in the pod, atomically), torn down once its containers are gone.

Layout, as kube's: `ROOT/pods/UID/volumes/kubernetes.io~PLUGIN/NAME`.
- emptyDir: a directory (mode 0777); `medium: Memory` a tmpfs mounted there on the host
  (sized by `sizeLimit`), so every container of the pod shares it, as in kube;
- hostPath: the host path itself, after the `type` check (DirectoryOrCreate, Directory,
  FileOrCreate, File, Socket, CharDevice, BlockDevice; "" checks nothing). Whether a pod
  may have one is Pod Security admission's question;
- configMap, secret, downwardAPI, projected: written by the atomic writer, mounted
  read-only (kube's ReadOnlyAPIDataVolumes); a projected serviceAccountToken's token
  comes from the token manager (`kubelet.token_manager`), refreshed at a sync when due.
`container_mounts` turns a container's volumeMounts into Docker bind mounts: `subPath`
(or `subPathExpr`, expanded with the container's variables) resolved inside the volume,
symlinks followed and checked not to leave it (`kubelet.volumes.paths`). Every other
volume type is refused by the apiserver (apiserver/resources/pod_admission.py).

Each pod directory carries a `.node` file with the node's name: at start the kubelet
removes only the orphaned directories of its own node (several test kubelets share a
root directory), and never follows a symlink out of one while doing so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import httpx

from common.errors import ApiError
from common.quantity import QuantityError, parse_quantity
from kubelet.env import CONFIGMAP, SECRET, PodContext, expand
from kubelet.objects import ObjectError, ObjectManager
from kubelet.token_manager import TokenKey, TokenManager
from kubelet.volumes import atomic_writer
from kubelet.volumes.paths import UnsafePath, check_relative, resolve_inside
from kubelet.volumes.payload import PayloadError, volume_payload

log = logging.getLogger(__name__)

PLUGINS = {"emptyDir": "empty-dir", "hostPath": "host-path", "configMap": "configmap",
           "secret": "secret", "downwardAPI": "downward-api", "projected": "projected"}
SUPPORTED_VOLUME_TYPES = frozenset(PLUGINS)
API_DATA = frozenset({"configMap", "secret", "downwardAPI", "projected"})
NODE_FILE = ".node"
DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600  # the apiserver's default of expirationSeconds
_UID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class VolumeError(Exception):
    """A volume that cannot be set up (the FailedMount event's message)."""


def volume_type(volume: Mapping[str, Any]) -> str:
    return next((k for k in volume if k != "name"), "")


def host_path_check(path: str, kind: str) -> str | None:
    """hostPath's type check (host_path.go's checkType): an error, or None. Creates
    what the *OrCreate types ask for."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if kind == "DirectoryOrCreate":
        if info is None:
            os.makedirs(path, mode=0o755, exist_ok=True)
            return None
        kind = "Directory"
    if kind == "FileOrCreate":
        if info is None:
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            os.close(fd)
            return None
        kind = "File"
    checks = {"Directory": (stat.S_ISDIR, "a directory"), "File": (stat.S_ISREG, "a file"),
              "Socket": (stat.S_ISSOCK, "a socket file"),
              "CharDevice": (stat.S_ISCHR, "a character device"),
              "BlockDevice": (stat.S_ISBLK, "a block device")}
    if kind not in checks:
        return None
    test, what = checks[kind]
    if info is None or not test(info.st_mode):
        return f"hostPath type check failed: {path} is not {what}"
    return None


def tmpfs_options(size_limit: Any) -> str:
    """The tmpfs mount options of a Memory emptyDir (its sizeLimit in bytes)."""
    if size_limit is None:
        return "mode=0777"
    try:
        size = int(parse_quantity(str(size_limit)).to_integral_value())
    except (QuantityError, ArithmeticError):
        return "mode=0777"
    return f"mode=0777,size={max(size, 4096)}"


def container_mounts(pod: Mapping[str, Any], container: Mapping[str, Any],
                     paths: Mapping[str, str], variables: Mapping[str, str],
                     ) -> list[dict[str, Any]]:
    """Docker bind mounts of a container's volumeMounts (reads the filesystem: subPath
    symlinks). UnsafePath for a subPath leaving its volume, VolumeError otherwise."""
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        name = str(mount.get("name") or "")
        if name not in paths:
            raise VolumeError(f"volume {name!r} is not set up")
        source = paths[name]
        sub = str(mount.get("subPath") or "")
        if mount.get("subPathExpr"):
            sub = expand(str(mount["subPathExpr"]), variables)
        if sub:
            source = resolve_inside(source, sub)
            if not os.path.lexists(source):
                os.makedirs(source, mode=0o755, exist_ok=True)
                source = resolve_inside(paths[name], sub)
        read_only = bool(mount.get("readOnly")) or volume_type(volumes.get(name, {})) in API_DATA
        mounts.append({"Type": "bind", "Source": source, "Target": str(mount["mountPath"]),
                       "ReadOnly": read_only, "BindOptions": {"Propagation": "rprivate"}})
    return mounts


class VolumeManager:
    """The volumes of one kubelet's pods under `pods_dir`."""

    def __init__(self, pods_dir: str, objects: ObjectManager | None, *, node_name: str,
                 allocatable: Mapping[str, Decimal] | None = None,
                 tokens: TokenManager | None = None) -> None:
        self.pods_dir = pods_dir
        self.objects = objects
        self.tokens = tokens
        self.node_name = node_name
        self.allocatable = dict(allocatable or {})

    def pod_dir(self, uid: str) -> str:
        if not _UID.match(uid):
            raise UnsafePath(f"invalid pod uid {uid!r}")
        return os.path.join(self.pods_dir, uid)

    def volume_dir(self, uid: str, volume: Mapping[str, Any]) -> str:
        name = check_relative(str(volume.get("name") or ""), "volume name")
        if "/" in name:
            raise UnsafePath(f"invalid volume name {name!r}")
        plugin = PLUGINS[volume_type(volume)]
        return os.path.join(self.pod_dir(uid), "volumes", f"kubernetes.io~{plugin}", name)

    async def setup(self, pod: Mapping[str, Any], *, host_ip: str = "") -> dict[str, str]:
        """Set up (or refresh) every volume of the pod; volume name -> host path."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        volumes = list((pod.get("spec") or {}).get("volumes") or [])
        if not volumes:
            return {}
        await asyncio.to_thread(self._mark, uid)
        paths: dict[str, str] = {}
        context = PodContext(host_ip=host_ip, allocatable=self.allocatable)
        for volume in volumes:
            name = str(volume.get("name") or "")
            try:
                paths[name] = await self._setup_one(pod, uid, volume, context)
            except (PayloadError, ObjectError, UnsafePath, OSError) as e:
                raise VolumeError(f'MountVolume.SetUp failed for volume "{name}" : {e}') from e
        return paths

    def _mark(self, uid: str) -> None:
        directory = self.pod_dir(uid)
        os.makedirs(directory, mode=0o750, exist_ok=True)
        marker = os.path.join(directory, NODE_FILE)
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(self.node_name)

    async def _setup_one(self, pod: Mapping[str, Any], uid: str, volume: Mapping[str, Any],
                         context: PodContext) -> str:
        kind = volume_type(volume)
        if kind not in PLUGINS:
            raise PayloadError(f"volume type {kind!r} is not supported by kubelite")
        if kind == "hostPath":
            source = volume["hostPath"]
            path = posixpath.normpath(str(source.get("path") or ""))
            if not path.startswith("/"):
                raise PayloadError(f"hostPath {path!r} is not absolute")
            error = await asyncio.to_thread(host_path_check, path, str(source.get("type") or ""))
            if error:
                raise PayloadError(error)
            return path
        target = self.volume_dir(uid, volume)
        if kind == "emptyDir":
            source = volume.get("emptyDir") or {}
            memory = source.get("medium") == "Memory"
            await asyncio.to_thread(self._empty_dir, target, memory, source.get("sizeLimit"))
            return target
        configmaps, secrets = await self._objects_of(pod, volume)
        tokens = await self._tokens_of(pod, volume)
        payload = volume_payload(pod, volume, context, configmaps, secrets, tokens)
        if await asyncio.to_thread(atomic_writer.write, target, payload):
            log.info("%s/%s: volume %s written (%d files)", pod["metadata"].get("namespace"),
                     pod["metadata"].get("name"), volume.get("name"), len(payload))
        return target

    async def _objects_of(self, pod: Mapping[str, Any], volume: Mapping[str, Any],
                          ) -> tuple[dict[str, Any], dict[str, Any]]:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        names: list[tuple[str, str]] = []
        if volume.get("configMap"):
            names.append((CONFIGMAP, str(volume["configMap"].get("name") or "")))
        if volume.get("secret"):
            names.append((SECRET, str(volume["secret"].get("secretName") or "")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if source.get("configMap"):
                names.append((CONFIGMAP, str(source["configMap"].get("name") or "")))
            if source.get("secret"):
                names.append((SECRET, str(source["secret"].get("name") or "")))
        configmaps: dict[str, Any] = {}
        secrets: dict[str, Any] = {}
        for kind, name in names:
            if self.objects is None:
                raise ObjectError(f"{kind} {namespace}/{name}: no API to read it from")
            found = await self.objects.get(kind, namespace, name)
            (configmaps if kind == CONFIGMAP else secrets)[name] = found
        return configmaps, secrets

    async def _tokens_of(self, pod: Mapping[str, Any], volume: Mapping[str, Any],
                         ) -> dict[int, str]:
        """The token of each serviceAccountToken source of a projected volume, bound to
        the pod and requested as the pod's ServiceAccount."""
        meta = pod.get("metadata") or {}
        tokens: dict[int, str] = {}
        for i, source in enumerate((volume.get("projected") or {}).get("sources") or []):
            projection = source.get("serviceAccountToken")
            if not isinstance(projection, Mapping):
                continue
            if self.tokens is None:
                raise PayloadError("failed to fetch token: no API to request it from")
            audience = str(projection.get("audience") or "")
            key = TokenKey(
                namespace=str(meta.get("namespace") or ""),
                service_account=str((pod.get("spec") or {}).get("serviceAccountName")
                                    or "default"),
                audiences=(audience,) if audience else (),
                expiration_seconds=int(projection.get("expirationSeconds")
                                       or DEFAULT_TOKEN_EXPIRATION_SECONDS),
                pod_name=str(meta.get("name") or ""), pod_uid=str(meta.get("uid") or ""))
            try:
                tokens[i] = await self.tokens.get(key)
            except (ApiError, ValueError, OSError, httpx.HTTPError) as e:
                raise PayloadError(f"failed to fetch token: {e}") from e
        return tokens

    @staticmethod
    def _empty_dir(target: str, memory: bool, size_limit: Any) -> None:
        os.makedirs(target, exist_ok=True)
        os.chmod(target, 0o777)
        if memory and not os.path.ismount(target):
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", tmpfs_options(size_limit),
                                   "tmpfs", target], capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise OSError(f"mounting a tmpfs at {target}: {done.stderr.strip()}")

    # --- teardown ------------------------------------------------------------------------
    async def teardown(self, uid: str) -> None:
        """Remove the pod's directory (its volumes unmounted first; hostPaths untouched)."""
        if self.tokens is not None:
            self.tokens.forget_pod(uid)
        await asyncio.to_thread(self._remove_pod_dir, self.pod_dir(uid))

    def _remove_pod_dir(self, directory: str) -> None:
        empty_dirs = os.path.join(directory, "volumes", "kubernetes.io~empty-dir")
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(empty_dirs):
                path = os.path.join(empty_dirs, name)
                if os.path.ismount(path):
                    subprocess.run(["umount", path], capture_output=True, timeout=30)
                    if os.path.ismount(path):
                        log.warning("%s is still mounted: leaving it", path)
                        return
        # rmtree never follows symlinks: a container's link to / stays a link
        shutil.rmtree(directory, ignore_errors=True)

    def _own_pod_dirs(self) -> list[str]:
        found = []
        with contextlib.suppress(FileNotFoundError):
            for uid in os.listdir(self.pods_dir):
                marker = os.path.join(self.pods_dir, uid, NODE_FILE)
                with contextlib.suppress(OSError):
                    with open(marker) as f:
                        if f.read() == self.node_name and _UID.match(uid):
                            found.append(uid)
        return found

    async def cleanup_orphans(self, active_uids: Iterable[str]) -> list[str]:
        """Remove this node's pod directories whose pods it no longer has (and whose
        containers are gone); the uids removed."""
        active = set(active_uids)
        orphans = [uid for uid in await asyncio.to_thread(self._own_pod_dirs)
                   if uid not in active]
        for uid in orphans:
            log.info("pod %s: removing the orphaned pod directory", uid)
            await self.teardown(uid)
        return orphans
