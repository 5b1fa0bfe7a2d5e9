"""Errors of the NATS transport.

Messages match the Go client's (``nats.go``) where the reference server prints them, because
operators and tests grep for them (e.g. ``Failed to start: nats: no servers available for
connection``).
"""

from __future__ import annotations


class NatsError(Exception):
    """Base class of every transport error."""


class NoServersError(NatsError):
    def __init__(self, message: str = "nats: no servers available for connection") -> None:
        super().__init__(message)


class SecureConnectionWantedError(NatsError):
    def __init__(self, message: str = "nats: secure connection not available") -> None:
        super().__init__(message)


class SecureConnectionRequiredError(NatsError):
    def __init__(self, message: str = "nats: secure connection required") -> None:
        super().__init__(message)


class TlsConfigError(NatsError):
    """Client certificate / CA files could not be loaded."""


class AuthorizationError(NatsError):
    def __init__(self, message: str = "nats: authorization violation") -> None:
        super().__init__(message)


class BadSubjectError(NatsError):
    def __init__(self, message: str = "nats: invalid subject") -> None:
        super().__init__(message)


class MaxPayloadError(NatsError):
    def __init__(self, message: str = "nats: maximum payload exceeded") -> None:
        super().__init__(message)


class NatsTimeoutError(NatsError, TimeoutError):
    """Also a ``TimeoutError`` so callers may catch either."""

    def __init__(self, message: str = "nats: timeout") -> None:
        super().__init__(message)


class NoRespondersError(NatsError):
    def __init__(self, message: str = "nats: no responders available for request") -> None:
        super().__init__(message)


class ConnectionClosedError(NatsError):
    def __init__(self, message: str = "nats: connection closed") -> None:
        super().__init__(message)


class DisconnectedError(NatsError):
    """The connection was lost while an operation (flush, drain) was waiting on it."""

    def __init__(self, message: str = "nats: connection reconnecting") -> None:
        super().__init__(message)


class OutboundBufferError(NatsError):
    """Too much data was published while disconnected (Go: reconnect buffer exceeded)."""

    def __init__(self, message: str = "nats: outbound buffer limit exceeded") -> None:
        super().__init__(message)


class ProtocolError(NatsError):
    """The server sent something that is not the NATS protocol."""


class StaleConnectionError(NatsError):
    def __init__(self, message: str = "nats: stale connection") -> None:
        super().__init__(message)


class PermissionsViolationError(NatsError):
    """Non-fatal: a publish or subscribe was refused by the server's permissions."""


def error_from_server(text: str) -> NatsError:
    """Map a server ``-ERR '...'`` text to the Go client's error."""
    low = text.lower()
    if "authorization violation" in low or "user authentication" in low:
        return AuthorizationError()
    if "authentication expired" in low:
        return AuthorizationError("nats: authentication expired")
    if "permissions violation" in low:
        return PermissionsViolationError(f"nats: {text}")
    if "stale connection" in low:
        return StaleConnectionError()
    if "secure connection" in low and "required" in low:
        return SecureConnectionRequiredError()
    if "maximum connections exceeded" in low:
        return NatsError("nats: server maximum connections exceeded")
    return NatsError(f"nats: {text}")
