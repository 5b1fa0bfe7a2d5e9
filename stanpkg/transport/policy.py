"""How a NATS connection reconnects, keeps alive and buffers, and whom it tells: one value
per connection, fixed when it is made (NatsConnection.connect)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ConnectionPolicy"]

log = logging.getLogger("stanpkg.transport")


@dataclass(frozen=True)
class ConnectionPolicy:
    """Reconnection, keep-alive and buffering behaviour, plus the owner's callbacks."""

    max_reconnect: int
    reconnect_wait: float
    ping_interval: float
    max_pings_out: int
    pending_limit: int
    on_disconnected: Callable[[], None] | None
    on_reconnected: Callable[[], None] | None
    on_closed: Callable[[Exception | None], None] | None
    on_error: Callable[[Exception], None] | None
    on_discovered_servers: Callable[[], None] | None = None

    def call(self, callback: Callable[[], None] | None) -> None:
        """Run one of the owner's callbacks; what it raises goes to :meth:`report`."""
        if callback is not None:
            try:
                callback()
            except Exception as exc:
                self.report(exc)

    def report(self, error: Exception) -> None:
        """An asynchronous error: to ``on_error``, or logged without one."""
        if self.on_error is not None:
            try:
                self.on_error(error)
                return
            except Exception:
                log.exception("NATS error callback failed")
        log.error("NATS asynchronous error: %s", error, exc_info=error)
