"""The streaming server's link to NATS: up or down, and how its outages added up.

The server reconnects for as long as the plan says (``nats_max_reconnects``, forever by
default, as the reference). Meanwhile nothing reaches it, so nothing is stored; what it
would send (redeliveries, heartbeats) is held back (delivery.py, heartbeats.py), and
monitoring shows the outage (``/healthz``, ``nss_server_nats_*`` metrics).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["NatsLink"]


class NatsLink:
    """Outages of the server's NATS connections, as monitoring reports them: the link is
    down while any connection is; an outage ends once all are back."""

    def __init__(
        self, connected: Callable[[], bool], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._connected = connected  # all the server's connections are up now
        self._clock = clock
        self._down_since: float | None = None
        self._down_before = 0.0  # seconds of the outages that ended
        self.reconnects = 0  # outages that ended (the server got NATS back)
        self.last_error = ""

    @property
    def up(self) -> bool:
        return self._down_since is None

    def lost(self, error: str) -> None:
        """A connection was lost (each connection reports its own loss)."""
        if self._down_since is None:
            self._down_since = self._clock()
        self.last_error = error or "connection lost"

    def regained(self) -> bool:
        """A connection is back; True when that ended the outage."""
        if self._down_since is None or not self._connected():
            return False
        self._down_before += self._clock() - self._down_since
        self._down_since = None
        self.reconnects += 1
        return True

    def down_for(self) -> float:
        """Seconds of the outage in progress (0 while up)."""
        return 0.0 if self._down_since is None else self._clock() - self._down_since

    def disconnected_seconds(self) -> float:
        """Every second the link was down since the server started."""
        return self._down_before + self.down_for()
