"""Serving HTTPS as kube-apiserver does: common/tls.py (shared with the kubelet's port)."""

from common.tls import TLSHttpToolsProtocol as TLSHttpToolsProtocol
from common.tls import request_any_client_certificate as request_any_client_certificate
from common.tls import server_context as server_context
