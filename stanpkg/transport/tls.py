"""Client TLS contexts for the server's connection to NATS (plan fields ``secure``/``tls``)."""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING

from stanpkg.transport.errors import TlsConfigError

if TYPE_CHECKING:
    from stanpkg.plan.model import TlsOptions


def _describe(path: str, exc: BaseException) -> str:
    # Go prints "open <path>: no such file or directory"; keep that shape for missing files.
    if isinstance(exc, FileNotFoundError) or (path and not os.path.exists(path)):
        return f"open {path}: no such file or directory"
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return str(exc)


def build_tls_context(
    *,
    cert_file: str = "",
    key_file: str = "",
    ca_file: str = "",
    skip_verify: bool = False,
) -> ssl.SSLContext:
    """A client context: optional client certificate, optional CA bundle, optional no-verify.

    Without ``ca_file`` the system trust store is used, like Go's ``tls.Config`` default.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_file:
        try:
            ctx.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"nats: error loading or parsing rootCA file: {_describe(ca_file, exc)}"
            ) from exc
    if cert_file or key_file:
        try:
            ctx.load_cert_chain(cert_file, key_file or None)
        except (OSError, ssl.SSLError) as exc:
            missing = cert_file if not os.path.exists(cert_file) else key_file
            raise TlsConfigError(
                f"nats: error loading client certificate: {_describe(missing, exc)}"
            ) from exc
    if skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def tls_context_from_options(tls: TlsOptions, *, secure: bool) -> ssl.SSLContext | None:
    """The context for the plan's ``tls { ... }`` block and ``secure`` flag, or None (plain).

    The plan's ``server_name`` is not part of the context: pass it as ``tls_hostname`` to
    :meth:`NatsConnection.connect`.
    """
    if not (secure or tls.configured or tls.skip_verify):
        return None
    return build_tls_context(
        cert_file=tls.client_cert,
        key_file=tls.client_key,
        ca_file=tls.client_ca,
        skip_verify=tls.skip_verify,
    )


# Go's texts (crypto/tls alert.go) for the alerts a NATS server sends a rejected client;
# OpenSSL names them e.g. TLSV13_ALERT_CERTIFICATE_REQUIRED.
_GO_ALERT_TEXTS = {
    "BAD_CERTIFICATE": "bad certificate",
    "CERTIFICATE_REQUIRED": "certificate required",
    "CERTIFICATE_EXPIRED": "expired certificate",
    "CERTIFICATE_REVOKED": "revoked certificate",
    "CERTIFICATE_UNKNOWN": "unknown certificate",
    "UNSUPPORTED_CERTIFICATE": "unsupported certificate",
    "UNKNOWN_CA": "unknown certificate authority",
    "HANDSHAKE_FAILURE": "handshake failure",
    "PROTOCOL_VERSION": "protocol version not supported",
    "ACCESS_DENIED": "access denied",
}


def remote_alert_text(exc: BaseException | None) -> str | None:
    """``remote error: tls: certificate required`` (as the Go client says) when ``exc`` is
    a TLS alert from the server, else None. TLS 1.3 servers reject a client certificate
    after the handshake, so the alert surfaces when the connection is lost."""
    if not isinstance(exc, ssl.SSLError) or "_ALERT_" not in (exc.reason or ""):
        return None
    alert = exc.reason.split("_ALERT_", 1)[1]
    return f"remote error: tls: {_GO_ALERT_TEXTS.get(alert, alert.lower().replace('_', ' '))}"
