"""Pod volumes (after pkg/volume/* and pkg/kubelet/volumemanager): see `manager`."""

from kubelet.volumes.manager import (
    SUPPORTED_VOLUME_TYPES,
    VolumeError,
    VolumeManager,
    container_mounts,
)

__all__ = ["SUPPORTED_VOLUME_TYPES", "VolumeError", "VolumeManager", "container_mounts"]
