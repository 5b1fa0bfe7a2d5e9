"""The interface every serving mode implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stanpkg.server.host import ModeHost
    from stanpkg.transport.connection import MsgHandler, NatsConnection

__all__ = ["ServingMode"]


class ServingMode(ABC):
    """Called by :meth:`StreamingServer.start` and :meth:`StreamingServer.stop` only.

    Hooks run with the server's NATS connections open; they raise
    :class:`~stanpkg.server.errors.StartupError` to refuse to start.
    """

    @property
    @abstractmethod
    def state_name(self) -> str:
        """The reference's state name while running (monitoring's ``state``)."""

    @property
    def promotions(self) -> int:
        """How many times this node became the cluster's serving node."""
        return 0

    @property
    def role(self) -> str:
        """The Raft-style role monitoring reports (``Leader``/``Follower``); "" when the
        mode has none."""
        return ""

    @property
    def standing_by(self) -> bool:
        """Running but not serving: the store is not read, clients are not answered."""
        return False

    # The private HTTP monitor port of the node's embedded nats-server, while it has one
    # (set by the node, again when the supervisor restarts nats-server).
    nats_monitor_port: int | None = None

    # Hooks a mode may leave as they are: doing nothing is the standalone default.
    async def before_recovery(self, server: ModeHost) -> None:  # noqa: B027
        """Returns when this server may read the store."""

    async def before_listening(self, server: ModeHost) -> None:  # noqa: B027
        """Returns when this server, with its store recovered, may answer clients."""

    def subscribe_for_clients(self, conn: NatsConnection, subject: str, handler: MsgHandler) -> int:
        """The server's subscription to a subject clients send requests to."""
        return conn.subscribe(subject, handler)

    def listening(self, server: ModeHost) -> None:  # noqa: B027
        """The server has subscribed to every request subject: it answers clients now."""

    async def stop(self) -> None:  # noqa: B027
        """Stops what the mode runs beside the server (heartbeats, listeners)."""
