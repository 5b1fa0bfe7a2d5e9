"""The narrow Protocols between the server, its serving modes and its handlers.

:class:`~stanpkg.server.server.StreamingServer` builds its handlers in ``start()``, once
its two NATS connections are open, all together (``handlers.py``): each gets the
:class:`~stanpkg.server.handler_context.HandlerContext` they share and the siblings it
uses. No handler holds the server or imports another handler: where one uses a sibling
it is given the sibling's bound method, or the sibling typed as one of the Protocols
below (``HeartbeatControl``, ``ChannelPartitions``), so mypy holds it to that surface.

The serving modes (``modes/``) are the exception: they are given the server itself,
typed as :class:`ModeHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.server.client_links import Locate
    from stanpkg.server.clients import Client
    from stanpkg.server.log import Logger
    from stanpkg.stores.base import RecoveredState, ServerInfo, Store
    from stanpkg.transport.connection import NatsConnection

__all__ = ["ChannelPartitions", "HeartbeatControl", "ModeHost"]


class ChannelPartitions(Protocol):
    """The channels this server serves when partitioned (partitioning.Partitions)."""

    def handles(self, channel: str) -> bool: ...


class HeartbeatControl(Protocol):
    """The heartbeats of registered clients (heartbeats.Heartbeats); a client's are
    stopped by ``Client.stop_heartbeats``."""

    def start(self, client: Client, delay: float | None = None) -> None: ...

    def fire_soon(self, client: Client) -> None: ...


class ModeHost(Protocol):
    """What a serving mode's hooks use of the server (modes/)."""

    plan: Plan
    log: Logger
    store: Store
    info: ServerInfo
    server_id: str
    on_standby: Callable[[], None] | None

    @property
    def conn(self) -> NatsConnection: ...

    @property
    def acks_conn(self) -> NatsConnection: ...

    def new_inbox(self) -> str: ...

    def fatal(self, reason: str) -> None: ...

    def step_down(self, reason: str) -> None: ...

    def log_store_banner(self) -> None: ...

    def recover_state(self, *, quiet: bool = False) -> None: ...

    def adopt_state(self, state: RecoveredState) -> int: ...

    def route_clients_through(self, locate: Locate) -> None: ...
