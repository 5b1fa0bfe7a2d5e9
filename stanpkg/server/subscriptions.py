"""Subscription and queue-group state held in memory by the server.

The hot fields (inbox, last_sent, pending, max_inflight, ack_wait) live directly on the
object for the delivery loop; ``record`` is the persisted form, refreshed from them by
:meth:`Subscription.to_record` whenever the store must be told.

``pending`` maps each unacknowledged sequence to its expiration (event-loop time).
Entries are kept in non-decreasing expiration order (a dict keeps insertion order):
new sends expire last, a redelivery re-inserts at the end, and messages handed over by
a departing queue member are placed in front. The ack timer can therefore stop at the
first entry that has not expired instead of sorting.

Compiled in the compiled build (``stanpkg/hot_path.py``): delivery reads these fields for
every message and ack, and compiled code reads a compiled class's fields directly, not
through Python's attribute lookup (fan-out: 15 % less CPU, bench/README.md).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from stanpkg.stores.base import MessageStore, SubRecord, SubscriptionStore

if TYPE_CHECKING:
    from stanpkg.transport.connection import NatsConnection

__all__ = ["QueueGroup", "SubscribedChannel", "Subscriber", "Subscription", "durable_key"]


class SubscribedChannel(Protocol):
    """What a subscription and its delivery reach of the channel it is on (``Channel``
    in channels.py). Protocols here keep this module below channels and clients, which
    hold subscriptions: neither is imported back."""

    name: str
    ack_prefix: bytes
    msgs: MessageStore
    subs_store: SubscriptionStore
    plain: list[Subscription]  # plain subscriptions and online durables
    durables: dict[str, Subscription]
    groups: dict[str, QueueGroup]

    def unindex_sub(self, sub: Subscription) -> None: ...


class Subscriber(Protocol):
    """The client a live subscription belongs to (``Client`` in clients.py)."""

    subs: list[Subscription]
    out: NatsConnection | None  # its link, when it has one (client_links.py)


def durable_key(client_id: str, channel: str, durable_name: str) -> str:
    return f"{client_id}-{channel}-{durable_name}"


class Subscription:
    __slots__ = (
        "ack_sid",
        "ack_timer",
        "ack_wait",
        "channel",
        "client",
        "group",
        "hb_failed",
        "hold_new",
        "inbox",
        "last_sent",
        "max_inflight",
        "out",
        "pending",
        "ready",
        "record",
        "redeliveries",
        "removed",
        "stalled",
    )

    def __init__(self, record: SubRecord, channel: SubscribedChannel) -> None:
        self.record = record
        self.channel = channel
        self.inbox = record.inbox
        self.max_inflight = record.max_inflight
        self.ack_wait = float(record.ack_wait_secs)
        self.last_sent = record.last_sent
        self.pending: dict[int, float] = {}
        # Redelivery counts of this subscription's messages (a queue group shares one,
        # see join()).
        self.redeliveries: dict[int, int] = {}
        self.client: Subscriber | None = None
        self.group: QueueGroup | None = None
        self.stalled = False
        self.ready = False  # no delivery before the SubscriptionResponse went out
        self.hold_new = False  # new messages wait until pending ones were redelivered
        self.hb_failed = False
        self.removed = False
        self.ack_timer: asyncio.TimerHandle | None = None
        self.ack_sid: int | None = None
        # The connection its messages go out on and its ack inbox is subscribed on, when
        # not the server's own two: the link to its client's NATS server, if the client
        # had one when it subscribed (client_links.py). Fixed for the subscription's life
        # (until the link is lost): one path keeps its messages in order.
        self.out: NatsConnection | None = None

    @property
    def id(self) -> int:
        return self.record.id

    @property
    def ack_inbox(self) -> str:
        return self.record.ack_inbox

    @property
    def client_id(self) -> str:
        return self.record.client_id

    @property
    def is_durable(self) -> bool:
        """A plain durable (not a durable queue member)."""
        return bool(self.record.durable_name)

    @property
    def is_offline(self) -> bool:
        return self.client is None

    def durable_key(self) -> str:
        return durable_key(self.record.client_id, self.channel.name, self.record.durable_name)

    def to_record(self) -> SubRecord:
        rec = self.record
        rec.inbox = self.inbox
        rec.max_inflight = self.max_inflight
        rec.ack_wait_secs = int(self.ack_wait)
        rec.last_sent = self.last_sent
        return rec

    def join(self, group: QueueGroup) -> None:
        """Become a member of ``group`` (redelivery counts are the group's)."""
        self.group = group
        self.redeliveries = group.redeliveries

    def cancel_ack_timer(self) -> None:
        if self.ack_timer is not None:
            self.ack_timer.cancel()
            self.ack_timer = None


class QueueGroup:
    """Members sharing one stream of messages; ``last_sent`` is the group's position."""

    __slots__ = (
        "durable",
        "last_sent",
        "members",
        "name",
        "redeliveries",
        "shadow",
        "shadow_client_id",
    )

    def __init__(self, name: str, durable: bool) -> None:
        self.name = name
        self.durable = durable
        self.members: list[Subscription] = []
        self.last_sent = 0
        # Last member of a durable group that closed: keeps the position and pending.
        self.shadow: Subscription | None = None
        # The shadow's stored record has no client ID; monitoring still shows the last
        # member's (empty for a shadow recovered from the store, as the reference).
        self.shadow_client_id = ""
        self.redeliveries: dict[int, int] = {}
