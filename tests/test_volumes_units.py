"""Volumes, pure parts and the filesystem in a temporary directory (issue 14,
"Configuration and volumes" and "Safety"): path safety (kube's
validateLocalDescendingPath), the atomic writer (after atomic_writer_test.go), the
payloads of configMap / secret / downwardAPI / projected volumes, hostPath type checks,
container mounts with subPath, and the env from ConfigMaps and Secrets
(kubelet_pods_test.go's TestMakeEnvironmentVariables cases)."""

from __future__ import annotations

import base64
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from common.volume_paths import path_errors
from kubelet.env import EnvError, EnvSources, PodContext, container_env, env_from
from kubelet.volumes import atomic_writer
from kubelet.volumes.atomic_writer import FileProjection
from kubelet.volumes.manager import (
    VolumeError,
    VolumeManager,
    container_mounts,
    host_path_check,
    tmpfs_options,
)
from kubelet.volumes.paths import UnsafePath, check_relative, resolve_inside
from kubelet.volumes.payload import PayloadError, format_map, volume_payload


@pytest.mark.parametrize(("path", "errors"), [
    ("a", []), ("a/b/c", []), ("a/.b", []), ("..a", ["must not start with '..'"]),
    ("..data/x", ["must not start with '..'"]), ("", ["must not be empty"]),
    ("/etc/passwd", ["must be a relative path"]), ("../x", ["must not contain '..'"]),
    ("a/../../x", ["must not contain '..'"]), ("a/..", ["must not contain '..'"]),
    ("a\x00b", ["must not contain a NUL byte"]),
    ("x" * 256, ["must not have an element longer than 255 characters"]),
])
def test_path_rules(path: str, errors: list[str]) -> None:
    assert path_errors(path) == errors


@pytest.mark.parametrize("path", ["../x", "/abs", "a/../..", "..data", "", ".", "./"])
def test_unsafe_relative_paths_are_refused(path: str) -> None:
    with pytest.raises(UnsafePath):
        check_relative(path)


def test_a_subpath_symlink_out_of_the_volume_is_refused(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    (volume / "inside").mkdir(parents=True)
    (volume / "escape").symlink_to("/etc")
    (volume / "relative-escape").symlink_to("../../..")
    (volume / "fine").symlink_to("inside")
    assert resolve_inside(str(volume), "fine") == str(volume / "inside")
    for sub in ("escape", "escape/passwd", "relative-escape", "../vol2"):
        with pytest.raises(UnsafePath):
            resolve_inside(str(volume), sub)


def read_tree(target: Path) -> dict[str, bytes]:
    return {str(p.relative_to(target)): p.read_bytes()
            for p in sorted(target.rglob("*")) if p.is_file() and not p.is_symlink()
            and not str(p.relative_to(target)).startswith("..")}


def test_atomic_writer_layout_and_update(tmp_path: Path) -> None:
    target = tmp_path / "v"
    assert atomic_writer.write(str(target), {
        "a": FileProjection(b"1"), "dir/b": FileProjection(b"2", 0o400)})
    data_link = os.readlink(target / "..data")
    assert data_link.startswith("..") and (target / data_link).is_dir()
    assert os.readlink(target / "a") == "..data/a"
    assert os.readlink(target / "dir") == "..data/dir"
    assert (target / "dir" / "b").read_bytes() == b"2"
    assert (target / "dir" / "b").stat().st_mode & 0o777 == 0o400
    # unchanged: nothing written
    assert not atomic_writer.write(str(target), {
        "a": FileProjection(b"1"), "dir/b": FileProjection(b"2", 0o400)})
    assert os.readlink(target / "..data") == data_link
    # changed: a new directory, the old one gone, removed names unlinked
    assert atomic_writer.write(str(target), {"a": FileProjection(b"new"),
                                             "c": FileProjection(b"3")})
    assert os.readlink(target / "..data") != data_link
    assert not (target / data_link).exists()
    assert (target / "a").read_bytes() == b"new"
    assert not os.path.lexists(target / "dir")
    assert sorted(n for n in os.listdir(target) if not n.startswith("..")) == ["a", "c"]
    assert len([n for n in os.listdir(target) if n.startswith("..2")]) == 1


@pytest.mark.parametrize("payload", [
    {"../escape": FileProjection(b"x")}, {"/etc/cron.d/x": FileProjection(b"x")},
    {"..data": FileProjection(b"x")}, {"a": FileProjection(b"1"), "a/b": FileProjection(b"2")},
])
def test_atomic_writer_refuses_unsafe_payloads(tmp_path: Path,
                                               payload: dict[str, FileProjection]) -> None:
    with pytest.raises(UnsafePath):
        atomic_writer.write(str(tmp_path / "v"), payload)
    assert not (tmp_path / "escape").exists()
    assert not (tmp_path / "v" / "..data").exists()


def test_atomic_writer_never_replaces_what_is_not_its_symlink(tmp_path: Path) -> None:
    target = tmp_path / "v"
    target.mkdir()
    (target / "a").write_text("someone's file")
    with pytest.raises(UnsafePath):
        atomic_writer.write(str(target), {"a": FileProjection(b"1")})
    assert (target / "a").read_text() == "someone's file"


POD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "u-1",
                 "labels": {"app": "web", "tier": "front"}, "annotations": {"a": 'say "hi"'}},
    "spec": {"containers": [{"name": "app", "image": "i",
                             "resources": {"limits": {"memory": "64Mi"}}}]},
}
CM = {"metadata": {"name": "cfg", "namespace": "ns"}, "data": {"k1": "v1", "k2": "v2"},
      "binaryData": {"bin": base64.b64encode(b"\x00\x01").decode()}}
SECRET = {"metadata": {"name": "sec", "namespace": "ns"},
          "data": {"password": base64.b64encode(b"hunter2").decode()}}
CONTEXT = PodContext()


def payload(volume: dict[str, Any], configmaps: dict[str, Any] | None = None,
            secrets: dict[str, Any] | None = None) -> dict[str, tuple[bytes, int]]:
    files = volume_payload(POD, volume, CONTEXT, configmaps or {"cfg": CM},
                           secrets or {"sec": SECRET})
    return {path: (f.data, f.mode) for path, f in files.items()}


def test_configmap_and_secret_payloads() -> None:
    assert payload({"configMap": {"name": "cfg"}}) == {
        "k1": (b"v1", 0o644), "k2": (b"v2", 0o644), "bin": (b"\x00\x01", 0o644)}
    assert payload({"configMap": {"name": "cfg", "defaultMode": 0o400, "items": [
        {"key": "k1", "path": "conf/one"}, {"key": "k2", "path": "two", "mode": 0o600}]}}) == {
        "conf/one": (b"v1", 0o400), "two": (b"v2", 0o600)}
    assert payload({"secret": {"secretName": "sec"}}) == {"password": (b"hunter2", 0o644)}
    assert payload({"configMap": {"name": "gone", "optional": True}}) == {}
    assert payload({"configMap": {"name": "cfg", "optional": True, "items": [
        {"key": "missing", "path": "m"}]}}) == {}


@pytest.mark.parametrize(("volume", "message"), [
    ({"configMap": {"name": "gone"}}, 'configmap "gone" not found'),
    ({"secret": {"secretName": "gone"}}, 'secret "gone" not found'),
    ({"configMap": {"name": "cfg", "items": [{"key": "nope", "path": "n"}]}},
     "configmap references non-existent config key: nope"),
    ({"secret": {"secretName": "sec", "items": [{"key": "nope", "path": "n"}]}},
     "secret references non-existent secret key: nope"),
])
def test_missing_objects_and_keys(volume: dict[str, Any], message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        payload(volume)


def test_downward_api_and_projected_payloads() -> None:
    assert payload({"downwardAPI": {"items": [
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app",
                                             "resource": "limits.memory", "divisor": "1Mi"}},
    ]}}) == {"name": (b"web", 0o644), "labels": (b'app="web"\ntier="front"', 0o644),
             "annotations": (b'a="say \\"hi\\""', 0o644), "mem": (b"64", 0o644)}
    assert payload({"projected": {"defaultMode": 0o440, "sources": [
        {"configMap": {"name": "cfg", "items": [{"key": "k1", "path": "k1"}]}},
        {"secret": {"name": "sec"}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {
            "fieldPath": "metadata.namespace"}}]}}]}}) == {
        "k1": (b"v1", 0o440), "password": (b"hunter2", 0o440), "ns": (b"ns", 0o440)}


def test_format_map_quotes_like_go() -> None:
    assert format_map({"b": "2", "a": "x\ny"}) == 'a="x\\ny"\nb="2"'


def test_host_path_types(tmp_path: Path) -> None:
    directory, file = tmp_path / "d", tmp_path / "f"
    assert host_path_check(str(directory), "DirectoryOrCreate") is None
    assert directory.is_dir()
    assert host_path_check(str(file), "FileOrCreate") is None
    assert file.is_file()
    assert host_path_check(str(directory), "Directory") is None
    assert host_path_check(str(file), "File") is None
    assert host_path_check(str(file), "Directory") == (
        f"hostPath type check failed: {file} is not a directory")
    assert host_path_check(str(directory), "File") == (
        f"hostPath type check failed: {directory} is not a file")
    assert host_path_check(str(tmp_path / "none"), "Directory") is not None
    assert not (tmp_path / "none").exists()
    assert host_path_check(str(file), "Socket") == (
        f"hostPath type check failed: {file} is not a socket file")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert host_path_check(str(sock_path), "Socket") is None
    assert host_path_check(str(tmp_path / "none"), "") is None  # no check


def test_tmpfs_size_from_size_limit() -> None:
    assert tmpfs_options(None) == "mode=0777"
    assert tmpfs_options("1Mi") == "mode=0777,size=1048576"


def test_container_mounts_with_sub_paths(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "link-out").symlink_to("/")
    pod = {"spec": {"volumes": [{"name": "data", "emptyDir": {}},
                                {"name": "cfg", "configMap": {"name": "c"}}]}}
    paths = {"data": str(data), "cfg": str(tmp_path / "cfg")}
    container = {"volumeMounts": [
        {"name": "data", "mountPath": "/data"},
        {"name": "data", "mountPath": "/logs", "subPathExpr": "$(POD)/logs", "readOnly": True},
        {"name": "cfg", "mountPath": "/etc/app"}]}
    mounts = container_mounts(pod, container, paths, {"POD": "web"})
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in mounts] == [
        (str(data), "/data", False), (str(data / "web" / "logs"), "/logs", True),
        (str(tmp_path / "cfg"), "/etc/app", True)]  # API data: always read-only
    assert (data / "web" / "logs").is_dir()
    for sub in ("link-out", "../", "link-out/etc"):
        with pytest.raises(UnsafePath):
            container_mounts(pod, {"volumeMounts": [
                {"name": "data", "mountPath": "/x", "subPath": sub}]}, paths, {})
    with pytest.raises(UnsafePath):  # an expansion cannot escape either
        container_mounts(pod, {"volumeMounts": [
            {"name": "data", "mountPath": "/x", "subPathExpr": "$(X)"}]}, paths, {"X": ".."})


async def test_manager_setup_teardown_and_orphans(tmp_path: Path) -> None:
    manager = VolumeManager(str(tmp_path / "pods"), None, node_name="n1")
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
           "spec": {"volumes": [{"name": "scratch", "emptyDir": {}},
                                {"name": "info", "downwardAPI": {"items": [
                                    {"path": "name", "fieldRef": {
                                        "fieldPath": "metadata.name"}}]}}]}}
    paths = await manager.setup(pod)
    base = tmp_path / "pods" / "uid-1" / "volumes"
    assert paths == {"scratch": str(base / "kubernetes.io~empty-dir" / "scratch"),
                     "info": str(base / "kubernetes.io~downward-api" / "info")}
    assert (Path(paths["info"]) / "name").read_text() == "p"
    outside = tmp_path / "keep"
    outside.mkdir()
    (Path(paths["scratch"]) / "link").symlink_to(outside)
    # another node's directory in the same root is never touched
    other = tmp_path / "pods" / "uid-2"
    other.mkdir()
    (other / ".node").write_text("n2")
    assert await manager.cleanup_orphans({"uid-1"}) == []
    assert await manager.cleanup_orphans(set()) == ["uid-1"]
    assert not (tmp_path / "pods" / "uid-1").exists()
    assert outside.is_dir() and other.is_dir()
    with pytest.raises(VolumeError, match='volume "c" : configmap ns/x: no API'):
        await manager.setup({**pod, "spec": {"volumes": [
            {"name": "c", "configMap": {"name": "x"}}]}})
    with pytest.raises(UnsafePath):
        manager.pod_dir("../etc")


SOURCES = EnvSources(configmaps={"cfg": CM, "absent": None},
                     secrets={"sec": SECRET})


def env(container: dict[str, Any]) -> dict[str, str]:
    return container_env(POD, container, PodContext(sources=SOURCES))


def test_env_from_configmaps_and_secrets() -> None:
    assert env({"envFrom": [{"configMapRef": {"name": "cfg"}},
                            {"secretRef": {"name": "sec"}, "prefix": "S_"}],
                "env": [{"name": "k1", "value": "overridden"},
                        {"name": "ONE", "valueFrom": {"configMapKeyRef": {
                            "name": "cfg", "key": "k2"}}},
                        {"name": "PW", "valueFrom": {"secretKeyRef": {
                            "name": "sec", "key": "password"}}},
                        {"name": "OPT", "valueFrom": {"configMapKeyRef": {
                            "name": "absent", "key": "x", "optional": True}}}]}) == {
        "k1": "overridden", "k2": "v2", "S_password": "hunter2", "ONE": "v2", "PW": "hunter2"}
    assert env({"envFrom": [{"configMapRef": {"name": "absent", "optional": True}}]}) == {}


@pytest.mark.parametrize(("container", "message"), [
    ({"envFrom": [{"configMapRef": {"name": "absent"}}]}, 'configmap "absent" not found'),
    ({"envFrom": [{"secretRef": {"name": "nope"}}]}, 'secret "nope" not found'),
    ({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "zz"}}}]},
     "couldn't find key zz in ConfigMap ns/cfg"),
    ({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "zz"}}}]},
     "couldn't find key zz in Secret ns/sec"),
])
def test_env_errors_are_kubes(container: dict[str, Any], message: str) -> None:
    with pytest.raises(EnvError) as caught:
        env(container)
    assert str(caught.value) == message


def test_invalid_env_from_keys_are_skipped_and_reported() -> None:
    bad = {"metadata": {"name": "bad", "namespace": "ns"}, "data": {"ok": "1", "a=b": "2"}}
    variables, skipped = env_from({"envFrom": [{"configMapRef": {"name": "bad"}}]},
                                  PodContext(sources=EnvSources(configmaps={"bad": bad})))
    assert variables == {"ok": "1"}
    assert skipped == ["Keys [a=b] from the EnvFrom configmap ns/bad were skipped since they "
                       "are considered invalid environment variable names."]
