"""Pieces shared by the scheduler and the kubelet: API client, informer, events, errors."""

from common.client import ApiClient
from common.events import EventRecorder
from common.informer import Informer, object_key

__all__ = ["ApiClient", "EventRecorder", "Informer", "object_key"]
