"""Serving HTTPS as kube-apiserver (and the kubelet's port) does: a serving certificate, and client certificates
requested but optional, verified by the x509 authenticator rather than by the handshake.

Go's `tls.RequestClientCert` asks for a certificate and lets any through, so that one from
an unknown CA, or expired, gets kube's 401 rather than a TLS alert. Python's ssl module
either skips the request (CERT_NONE) or fails the handshake on a certificate it cannot
verify (CERT_OPTIONAL); the verify callback OpenSSL takes is not exposed. It is set here
through ctypes on the context's SSL_CTX; where that is not possible, the handshake itself
refuses what does not verify against the client CA, which is as safe, only less polite.

uvicorn does not put the peer's certificate in the ASGI scope: `TLSHttpToolsProtocol`
reads it from the connection and puts it where the ASGI TLS extension says
(`scope["extensions"]["tls"]["client_cert_chain"]`, PEM).
"""

from __future__ import annotations

import ctypes
import logging
import platform
import ssl
import sys
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("tls")

SSL_VERIFY_PEER = 0x01
_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
# kept alive for the life of the process: OpenSSL calls it on every handshake
_ACCEPT_ANY = _VerifyCallback(lambda _preverify_ok, _store: 1)


def request_any_client_certificate(context: ssl.SSLContext) -> bool:
    """Ask clients for a certificate and let the handshake pass whatever they present
    (verified later, per request). False when this Python does not allow it."""
    # the SSL_CTX pointer is read from CPython's PySSLContext, laid out as below in 3.11-3.13
    if platform.python_implementation() != "CPython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return False
    try:
        import _ssl

        libssl = ctypes.CDLL(_ssl.__file__)
        set_verify = libssl.SSL_CTX_set_verify
        get_mode = libssl.SSL_CTX_get_verify_mode
    except (OSError, AttributeError, ImportError):
        return False
    set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    set_verify.restype = None
    get_mode.argtypes = [ctypes.c_void_p]
    get_mode.restype = ctypes.c_int
    # CPython's PySSLContext: PyObject_HEAD, then the SSL_CTX pointer
    ctx = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not ctx or get_mode(ctx) != SSL_VERIFY_PEER:  # what CERT_OPTIONAL set
        return False
    set_verify(ctx, SSL_VERIFY_PEER, _ACCEPT_ANY)
    return True


def server_context(cert_file: str, key_file: str, client_ca_file: str | None,
                   ) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
        if not request_any_client_certificate(context):
            log.warning("client certificates that do not verify fail the TLS handshake "
                        "(no 401): this Python cannot defer their verification")
    return context


class TLSHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the client's certificate in each request's scope."""

    client_cert_pem: str | None = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        self.client_cert_pem = ssl.DER_cert_to_PEM_cert(der) if der else None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        tls: dict[str, Any] = {
            "client_cert_chain": [self.client_cert_pem] if self.client_cert_pem else [],
            "client_cert_error": None}
        scope: dict[str, Any] = self.scope  # type: ignore[assignment]
        scope["extensions"] = {**(scope.get("extensions") or {}), "tls": tls}
