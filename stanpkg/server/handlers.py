"""The server's handlers, built together: :func:`build_handlers` makes every one of them
from the :class:`~stanpkg.server.handler_context.HandlerContext` they share and returns
them as one :class:`Handlers` value, which the server holds from its start to its stop.

Each handler gets the context and, beside it, only the siblings it uses, in the order
their dependencies allow:

- the delivery (sends on the general connection) and the channel registry, which hands a
  channel past ``max_inactivity`` to the publish pipeline (deleted between two batches)
  while the pipeline stores into the registry's channels: the one cycle, broken by a
  callback reaching the pipeline built after it;
- the partitions, when partitioning, and the publish pipeline;
- removals, which close clients for the heartbeats (which time them out) and for the
  connections (which start their heartbeats), so those two need not know each other;
  subscriptions replace durables with it.

A sibling is passed as a bound method or typed as a narrow Protocol (``host.py``:
``HeartbeatControl``, ``ChannelPartitions``); no handler holds the server or imports
another handler, and nothing here starts: the server starts them when it serves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from stanpkg.server.channels import Channel, ChannelRegistry
from stanpkg.server.connect import ConnectionRequests
from stanpkg.server.delivery import Delivery
from stanpkg.server.heartbeats import Heartbeats
from stanpkg.server.partitioning import Partitions
from stanpkg.server.publish import PublishPipeline
from stanpkg.server.subscribe import SubscribeRequests
from stanpkg.server.unsubscribe import Removals

if TYPE_CHECKING:
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.log import Logger
    from stanpkg.stores.base import ServerInfo

__all__ = ["Handlers", "build_handlers"]


@dataclass(frozen=True, slots=True)
class Handlers:
    context: HandlerContext  # what they were built with
    delivery: Delivery
    channels: ChannelRegistry
    partitions: Partitions | None  # partitioning only
    publisher: PublishPipeline
    removals: Removals
    heartbeats: Heartbeats
    connections: ConnectionRequests
    subscriptions: SubscribeRequests

    async def close(self) -> None:
        """Stop what runs beside the requests: the partitions' exchanges, the duplicate
        probes of connects, the publish tasks."""
        if self.partitions is not None:
            self.partitions.stop()
        await self.connections.close()
        await self.publisher.close()


def _log_created(log: Logger, channel: Channel) -> None:
    log.debug(f'Channel "{channel.name}" has been created')


def build_handlers(
    context: HandlerContext, *, info: ServerInfo, server_id: str, fatal: Callable[[str], None]
) -> Handlers:
    """Every handler of a server, none started. ``info``: the subjects connects are
    answered with until the server says others (``ConnectionRequests.answer_with``);
    ``server_id`` and ``fatal`` are the partitions' (a conflict found later is fatal)."""
    plan, store, log = context.plan, context.store, context.log
    delivery = Delivery(context)
    publisher: PublishPipeline

    def delete_between_batches(channel: Channel) -> None:
        publisher.request_deletion(channel)

    channels = ChannelRegistry(
        store,
        context.loop,
        delete_between_batches,
        partial(_log_created, log),
        on_readable=delivery.deliver_channel,
    )
    partitions = None
    if plan.partitioning:
        partitions = Partitions(
            [channel.name for channel in plan.store_limits.channels],
            cluster_id=plan.cluster_id,
            server_id=server_id,
            conn=context.conn,
            fatal=fatal,
        )
    publisher = PublishPipeline(
        context, channels=channels, delivery=delivery, partitioned=partitions is not None
    )
    removals = Removals(context, channels=channels, delivery=delivery, partitions=partitions)
    heartbeats = Heartbeats(context, close_client=removals.close_client)
    connections = ConnectionRequests(
        context, info=info, heartbeats=heartbeats, close_client=removals.close_client
    )
    subscriptions = SubscribeRequests(
        context,
        channels=channels,
        delivery=delivery,
        partitions=partitions,
        remove=removals.remove,
    )
    return Handlers(
        context=context,
        delivery=delivery,
        channels=channels,
        partitions=partitions,
        publisher=publisher,
        removals=removals,
        heartbeats=heartbeats,
        connections=connections,
        subscriptions=subscriptions,
    )
