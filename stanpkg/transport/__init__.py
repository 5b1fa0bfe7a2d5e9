"""stanpkg.transport: the NATS I/O layer of the streaming server.

* :class:`NatsConnection` — a low-overhead NATS client (asyncio Protocol, synchronous
  per-message dispatch, batched writes).
* :class:`EmbeddedNatsServer` — the ``nats-server`` child process.
* :func:`next_nuid` / :class:`Nuid` — identifiers for inboxes, server and client IDs.
"""

from stanpkg.transport.connection import MsgHandler, NatsConnection
from stanpkg.transport.embedded import (
    EmbeddedNatsConfig,
    EmbeddedNatsServer,
    NatsServerNotFoundError,
    NatsServerStartError,
    check_config,
    find_nats_server_binary,
    split_log_line,
)
from stanpkg.transport.errors import (
    AuthorizationError,
    BadSubjectError,
    ConnectionClosedError,
    MaxPayloadError,
    NatsError,
    NatsTimeoutError,
    NoRespondersError,
    NoServersError,
    ProtocolError,
    SecureConnectionWantedError,
    TlsConfigError,
)
from stanpkg.transport.nuid import Nuid, next_nuid
from stanpkg.transport.tls import build_tls_context, tls_context_from_options

__all__ = [
    "AuthorizationError",
    "BadSubjectError",
    "ConnectionClosedError",
    "EmbeddedNatsConfig",
    "EmbeddedNatsServer",
    "MaxPayloadError",
    "MsgHandler",
    "NatsConnection",
    "NatsError",
    "NatsServerNotFoundError",
    "NatsServerStartError",
    "NatsTimeoutError",
    "NoRespondersError",
    "NoServersError",
    "Nuid",
    "ProtocolError",
    "SecureConnectionWantedError",
    "TlsConfigError",
    "build_tls_context",
    "check_config",
    "find_nats_server_binary",
    "next_nuid",
    "split_log_line",
    "tls_context_from_options",
]
