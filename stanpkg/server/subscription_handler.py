"""What the subscribe handler and the unsubscribe/close handler both start from: the
channels, deliveries and partitions they act on, and the context fields they read."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stanpkg.server.channels import ChannelRegistry
    from stanpkg.server.delivery import Delivery
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.host import ChannelPartitions

__all__ = ["SubscriptionHandler"]


class SubscriptionHandler:
    """Base of :class:`~stanpkg.server.subscribe.SubscribeRequests` and
    :class:`~stanpkg.server.unsubscribe.Removals`."""

    def __init__(
        self,
        context: HandlerContext,
        *,
        channels: ChannelRegistry,
        delivery: Delivery,
        partitions: ChannelPartitions | None,
    ) -> None:
        self.log = context.log
        self.clients = context.clients
        self.store = context.store  # Removals deletes a closed client from it
        self.channels = channels
        self.delivery = delivery
        self.partitions = partitions
        self.control = context.control
        self.conn = context.conn
        self.acks_conn = context.acks_conn  # where the subscriptions' ack inboxes are subscribed
        self.ack_barrier = context.ack_barrier
