"""What the request handlers reach of the server that runs them, as Protocols.

:class:`~stanpkg.server.server.StreamingServer` builds the handlers (connect, heartbeats,
subscribe, unsubscribe, publish, partitioning, recovery) and the serving modes, and is
what they are given; each handler types it as the Protocol of what it uses, and reaches a
sibling handler only through the one or two methods it calls. So no handler imports the
server or another handler, and mypy holds each to the surface it declares here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.server.channels import Channel, ChannelRegistry
    from stanpkg.server.clients import Client, ClientRegistry
    from stanpkg.server.delivery import Delivery
    from stanpkg.server.log import Logger
    from stanpkg.server.serial import SerialExecutor
    from stanpkg.server.subscriptions import Subscription
    from stanpkg.stores.base import ServerInfo, Store
    from stanpkg.transport.connection import NatsConnection

__all__ = [
    "ChannelHost",
    "ChannelPartitions",
    "ClientCloser",
    "ConnectHost",
    "HeartbeatControl",
    "HeartbeatHost",
    "ModeHost",
    "PartitionHost",
    "PublishHost",
    "RecoveryHost",
    "RequestHost",
    "SubscribeHost",
    "SubscriptionRemoval",
]


class RequestHost(Protocol):
    """What every handler of client requests uses: the plan, the log, the registered
    clients, the serial executor of protocol requests, and the two NATS connections
    (``conn`` answers; ``acks_conn`` carries acks and the server's own requests)."""

    plan: Plan
    log: Logger
    clients: ClientRegistry
    control: SerialExecutor
    conn: NatsConnection
    acks_conn: NatsConnection

    async def ack_barrier(self) -> None: ...


class ChannelPartitions(Protocol):
    """The channels this server serves when partitioned (partitioning.Partitions)."""

    def handles(self, channel: str) -> bool: ...


class ChannelHost(RequestHost, Protocol):
    """A handler that works on channels and their subscriptions."""

    channels: ChannelRegistry
    delivery: Delivery

    @property
    def partitions(self) -> ChannelPartitions | None: ...


class HeartbeatControl(Protocol):
    """The heartbeats of registered clients (heartbeats.Heartbeats)."""

    def start(self, client: Client, delay: float | None = None) -> None: ...

    def stop(self, client: Client) -> None: ...

    def fire_soon(self, client: Client) -> None: ...


class ClientCloser(Protocol):
    """Closing a client the server gave up on (connect.ConnectionRequests)."""

    async def close_client(self, client_id: str, client: Client) -> None: ...


class SubscriptionRemoval(Protocol):
    """Removing subscriptions (unsubscribe.Removals)."""

    def remove(self, sub: Subscription, unsubscribe: bool) -> None: ...

    async def remove_client_subscriptions(self, client: Client) -> None: ...


# Siblings are read-only properties here: the server holds the handler classes, which a
# property (covariant, unlike a plain attribute) accepts for these narrower types.
class ConnectHost(RequestHost, Protocol):
    store: Store
    info: ServerInfo

    @property
    def heartbeats(self) -> HeartbeatControl: ...

    @property
    def removals(self) -> SubscriptionRemoval: ...

    @property
    def ping_subject(self) -> str: ...


class HeartbeatHost(RequestHost, Protocol):
    @property
    def connections(self) -> ClientCloser: ...


class SubscribeHost(ChannelHost, Protocol):
    @property
    def removals(self) -> SubscriptionRemoval: ...

    def new_inbox(self) -> str: ...

    def attach_ack_inbox(self, sub: Subscription) -> None: ...


class PublishHost(ChannelHost, Protocol):
    store: Store

    async def delete_channel(self, channel: Channel) -> None: ...


class RecoveryHost(Protocol):
    loop: asyncio.AbstractEventLoop
    clients: ClientRegistry
    channels: ChannelRegistry
    delivery: Delivery


class PartitionHost(Protocol):
    plan: Plan
    conn: NatsConnection
    server_id: str

    def fatal(self, reason: str) -> None: ...


class ModeHost(Protocol):
    """What a serving mode's hooks use of the server (modes/)."""

    plan: Plan
    log: Logger
    store: Store
    info: ServerInfo
    conn: NatsConnection
    acks_conn: NatsConnection
    server_id: str
    on_standby: Callable[[], None] | None

    def new_inbox(self) -> str: ...

    def fatal(self, reason: str) -> None: ...

    def log_store_banner(self) -> None: ...

    def recover_state(self, *, quiet: bool = False) -> None: ...
