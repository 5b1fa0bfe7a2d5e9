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
