"""What configMap, secret, downwardAPI and projected volumes contain (after kube's
pkg/volume/configmap, secret, downwardapi and projected MakePayload): a map of relative
path to bytes and mode, for the atomic writer. Pure functions.

- configMap / secret: every key (`data`, and a ConfigMap's `binaryData`) as a file of its
  name, or only the `items` (key -> path, mode); a missing object is an error unless
  `optional`, and so is an item whose key is missing;
- downwardAPI: fieldRef (metadata.name, namespace, uid, labels, annotations, one label or
  annotation) and resourceFieldRef (of a named container);
- projected: the sources' files together, with the volume's `defaultMode`; a
  serviceAccountToken source is the token the kubelet's token manager got for it.
Modes: the item's `mode`, else the volume's `defaultMode`, else 0644.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from kubelet.env import (
    CONFIGMAP,
    SECRET,
    EnvError,
    PodContext,
    field_ref_value,
    not_found,
    resource_field_value,
    secret_values,
)
from kubelet.volumes.atomic_writer import FileProjection

DEFAULT_MODE = 0o644
Objects = Mapping[str, Mapping[str, Any] | None]


class PayloadError(ValueError):
    """A volume the kubelet cannot set up (kube's MountVolume.SetUp failure message)."""


def _mode(value: Any, default: int) -> int:
    return value if isinstance(value, int) and 0 <= value <= 0o777 else default


def object_values(kind: str, obj: Mapping[str, Any]) -> dict[str, bytes]:
    if kind == SECRET:
        return secret_values(obj)
    values = {str(k): str(v).encode() for k, v in (obj.get("data") or {}).items()}
    for key, value in (obj.get("binaryData") or {}).items():
        try:
            values[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            continue
    return values


def keyed_payload(kind: str, source: Mapping[str, Any], obj: Mapping[str, Any] | None,
                  default_mode: int) -> dict[str, FileProjection]:
    """configMap / secret (a volume or a projected source)."""
    name = str(source.get("secretName" if kind == SECRET and "secretName" in source
                          else "name") or "")
    if obj is None:
        if source.get("optional"):
            return {}
        raise PayloadError(not_found(kind, name))
    values = object_values(kind, obj)
    items = source.get("items")
    if not items:
        return {key: FileProjection(value, default_mode) for key, value in values.items()}
    payload = {}
    for item in items:
        key = str(item.get("key") or "")
        if key not in values:
            if source.get("optional"):
                continue
            what = "config" if kind == CONFIGMAP else "secret"
            raise PayloadError(f"{kind} references non-existent {what} key: {key}")
        payload[str(item.get("path") or key)] = FileProjection(
            values[key], _mode(item.get("mode"), default_mode))
    return payload


def format_map(values: Mapping[str, Any]) -> str:
    """fieldpath.FormatMap: `key="value"` lines, sorted, values quoted as Go's %q."""
    return "\n".join(f"{k}={json.dumps(str(v), ensure_ascii=False)}"
                     for k, v in sorted(values.items()))


def downward_value(pod: Mapping[str, Any], item: Mapping[str, Any],
                   context: PodContext) -> str:
    meta = pod.get("metadata") or {}
    field = item.get("fieldRef")
    if field:
        path = str(field.get("fieldPath") or "")
        if path in ("metadata.labels", "metadata.annotations"):
            return format_map(meta.get(path.split(".", 1)[1]) or {})
        return field_ref_value(pod, path, context)
    resource = item.get("resourceFieldRef")
    if resource:
        name = str(resource.get("containerName") or "")
        spec = pod.get("spec") or {}
        container = next((c for key in ("containers", "initContainers")
                          for c in spec.get(key) or [] if c.get("name") == name), None)
        if container is None:
            raise EnvError(f"container {name} not found")
        return resource_field_value(pod, container, resource, context)
    raise EnvError("a downwardAPI item needs a fieldRef or a resourceFieldRef")


def downward_payload(pod: Mapping[str, Any], source: Mapping[str, Any], context: PodContext,
                     default_mode: int) -> dict[str, FileProjection]:
    payload = {}
    for item in source.get("items") or []:
        try:
            value = downward_value(pod, item, context)
        except EnvError as e:
            raise PayloadError(str(e)) from e
        payload[str(item.get("path") or "")] = FileProjection(
            value.encode(), _mode(item.get("mode"), default_mode))
    return payload


def volume_payload(pod: Mapping[str, Any], volume: Mapping[str, Any], context: PodContext,
                   configmaps: Objects, secrets: Objects,
                   tokens: Mapping[int, str] | None = None) -> dict[str, FileProjection]:
    """The files of one configMap / secret / downwardAPI / projected volume (`tokens`: the
    token of each serviceAccountToken source, by its index)."""
    for kind, key, objects in ((CONFIGMAP, "configMap", configmaps),
                               (SECRET, "secret", secrets)):
        source = volume.get(key)
        if isinstance(source, Mapping):
            name = str(source.get("secretName" if kind == SECRET else "name") or "")
            return keyed_payload(kind, source, objects.get(name),
                                 _mode(source.get("defaultMode"), DEFAULT_MODE))
    if isinstance(volume.get("downwardAPI"), Mapping):
        source = volume["downwardAPI"]
        return downward_payload(pod, source, context,
                                _mode(source.get("defaultMode"), DEFAULT_MODE))
    projected = volume.get("projected") or {}
    default_mode = _mode(projected.get("defaultMode"), DEFAULT_MODE)
    payload: dict[str, FileProjection] = {}
    for i, source in enumerate(projected.get("sources") or []):
        if source.get("configMap"):
            ref = source["configMap"]
            payload.update(keyed_payload(CONFIGMAP, ref, configmaps.get(str(ref.get("name"))),
                                         default_mode))
        elif source.get("secret"):
            ref = source["secret"]
            payload.update(keyed_payload(SECRET, ref, secrets.get(str(ref.get("name"))),
                                         default_mode))
        elif source.get("downwardAPI"):
            payload.update(downward_payload(pod, source["downwardAPI"], context, default_mode))
        elif source.get("serviceAccountToken"):
            token = (tokens or {}).get(i)
            if token is None:
                raise PayloadError("failed to fetch token: no token for this source")
            path = str(source["serviceAccountToken"].get("path") or "")
            payload[path] = FileProjection(token.encode(), default_mode)
        else:
            raise PayloadError(f"unsupported projected source {sorted(source)}")
    return payload
