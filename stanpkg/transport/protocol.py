"""One TCP/TLS connection to a NATS server: the asyncio Protocol half of NatsConnection.

A new ``ClientProtocol`` is made for every (re)connect; the long-lived state (subscriptions,
the outgoing buffer, callbacks) lives in :class:`~stanpkg.transport.connection.NatsConnection`,
which it tells what happens through :class:`ConnectionEvents`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol, cast

from stanpkg.transport.errors import (
    DisconnectedError,
    NatsError,
    PermissionsViolationError,
    ProtocolError,
    error_from_server,
)
from stanpkg.transport.parser import ProtocolParser, Subscription
from stanpkg.transport.tls import remote_alert_text

PONG = b"PONG\r\n"


class ConnectionEvents(Protocol):
    """What a protocol tells the connection that owns it: NatsConnection. A Protocol, so
    that this lower module does not import the connection that imports it."""

    def _connection_lost(self, proto: ClientProtocol, exc: Exception | None) -> None: ...

    def _writes_paused(self, paused: bool) -> None: ...

    def _async_info(self, info: dict[str, Any]) -> None: ...

    def _pong_received(self) -> None: ...

    def _report(self, error: Exception) -> None: ...


class ClientProtocol(ProtocolParser, asyncio.Protocol):
    def __init__(self, conn: ConnectionEvents, subs: dict[bytes, Subscription]) -> None:
        ProtocolParser.__init__(self, subs)
        self._conn = conn
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.info: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        # One entry per PING written on this connection, in order: a waiter, or None for
        # the keep-alive pings whose only effect is resetting the outstanding count.
        self.pongs: deque[asyncio.Future[None] | None] = deque()
        self.ready = False  # handshake done; installed as the connection's current protocol
        self.write_paused = False
        self.error: NatsError | None = None  # why the connection is going down, if known

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.feed(data)
        except ProtocolError as exc:
            self.fail(exc)

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.resume_writing()  # release the read holds this connection's writes placed
        if self.error is None and (alert := remote_alert_text(exc)) is not None:
            self.error = NatsError(alert)  # why the server refused us, not just "closed"
        error = self.error or DisconnectedError("nats: connection closed")
        if not self.info.done():
            self.info.set_exception(error)
        self.fail_pongs(error)
        if not self.lost.done():
            self.lost.set_result(None)
        self._conn._connection_lost(self, exc)

    def pause_writing(self) -> None:
        if not self.write_paused:
            self.write_paused = True
            self._conn._writes_paused(True)

    def resume_writing(self) -> None:
        if self.write_paused:
            self.write_paused = False
            self._conn._writes_paused(False)

    # -- helpers ---------------------------------------------------------------------------
    def fail(self, error: NatsError) -> None:
        """Record why the connection must go and abort it (reconnect logic follows)."""
        if self.error is None:
            self.error = error
        if not self.info.done():
            self.info.set_exception(error)
        self.fail_pongs(error)
        if self.transport is not None:
            self.transport.abort()

    def fail_pongs(self, error: Exception) -> None:
        pongs = self.pongs
        while pongs:
            waiter = pongs.popleft()
            if waiter is not None and not waiter.done():
                waiter.set_exception(error)

    # -- parser hooks ----------------------------------------------------------------------
    def _on_info(self, info: dict[str, Any]) -> None:
        if not self.info.done():
            self.info.set_result(info)
        else:
            self._conn._async_info(info)

    def _on_ping(self) -> None:
        if self.transport is not None:
            self.transport.write(PONG)

    def _on_pong(self) -> None:
        self._conn._pong_received()
        if self.pongs:
            waiter = self.pongs.popleft()
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _on_err(self, text: str) -> None:
        error = error_from_server(text)
        if isinstance(error, PermissionsViolationError):
            self._conn._report(error)  # the connection stays up
            return
        # Every other -ERR is followed by the server closing the connection.
        if self.error is None:
            self.error = error
        self.fail_pongs(error)
        if self.ready:
            self._conn._report(error)

    def _on_handler_error(self, exc: Exception) -> None:
        self._conn._report(exc)

    def _on_sub_done(self, sub: Subscription) -> None:
        self._subs.pop(sub.sid_bytes, None)
