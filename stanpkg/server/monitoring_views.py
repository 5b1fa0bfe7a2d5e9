"""Read-only views of the server state, for monitoring (``stanpkg.monitor``).

The monitor never reads the live objects itself: it asks :class:`ServerView` for plain
tuples, built on demand from the registries. Everything here is synchronous and must be
called from the event-loop thread; a caller that walks many channels may yield to the
loop between two channels (each channel is viewed in one go).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.stores.base import REPLICATED, StandbyChannel, StandbyState, StandbySubscription

if TYPE_CHECKING:
    from stanpkg.server.channels import Channel, ChannelRegistry
    from stanpkg.server.server import StreamingServer
    from stanpkg.server.subscriptions import QueueGroup, Subscription

__all__ = [
    "ChannelView",
    "ClientView",
    "NatsLinkView",
    "ServerTotals",
    "ServerView",
    "SubscriptionView",
]


class SubscriptionView(NamedTuple):
    client_id: str
    inbox: str
    ack_inbox: str
    durable_name: str  # plain durables only
    queue_name: str  # durable queue groups: "<durable>:<group>"
    is_durable: bool
    is_offline: bool  # offline durables and durable queue shadows
    max_inflight: int
    ack_wait: int  # seconds
    last_sent: int
    pending_count: int
    is_stalled: bool
    redelivered_pending: int  # unacknowledged messages redelivered at least once


class ChannelView(NamedTuple):
    name: str
    msgs: int
    bytes: int
    first_seq: int
    last_seq: int
    subs_count: int  # every subscription, offline durables and shadows included
    limits: Limits


class NatsLinkView(NamedTuple):
    """The server's connection to NATS (server/nats_link.py)."""

    connected: bool
    reconnects: int  # outages that ended
    disconnected_seconds: float  # every outage so far, the current one included
    error: str  # why it was lost, while it is


class ClientView(NamedTuple):
    id: str
    hb_inbox: str
    subs_count: int  # online subscriptions only


class ServerTotals(NamedTuple):
    clients: int
    subscriptions: int
    channels: int
    total_msgs: int
    total_bytes: int
    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    redelivered_msgs: int
    leader_promotions: int  # times this node became the cluster's serving node


def _redelivered_pending(sub: Subscription) -> int:
    # A queue group's members share one redelivery map: count this member's part.
    redeliveries = sub.redeliveries
    if not redeliveries:
        return 0
    pending = sub.pending
    small, large = (
        (redeliveries, pending) if len(redeliveries) < len(pending) else (pending, redeliveries)
    )
    return sum(1 for seq in small if seq in large)


def _view(sub: Subscription, client_id: str) -> SubscriptionView:
    record = sub.record
    return SubscriptionView(
        client_id,
        sub.inbox,
        record.ack_inbox,
        record.durable_name,
        record.qgroup,
        record.is_durable,
        sub.client is None,
        sub.max_inflight,
        int(sub.ack_wait),
        sub.last_sent,
        len(sub.pending),
        sub.stalled,
        _redelivered_pending(sub),
    )


def _count_subscriptions(channel: Channel) -> int:
    offline_durables = sum(1 for sub in channel.durables.values() if sub.client is None)
    grouped = sum(
        len(group.members) + (group.shadow is not None) for group in channel.groups.values()
    )
    return len(channel.plain) + offline_durables + grouped


def _shadow_view(group: QueueGroup, shadow: Subscription) -> SubscriptionView:
    return _view(shadow, shadow.record.client_id or group.shadow_client_id)


def view_channel(channel: Channel) -> ChannelView:
    msgs = channel.msgs
    count, size = msgs.state()
    return ChannelView(
        channel.name,
        count,
        size,
        msgs.first_sequence,
        msgs.last_sequence,
        _count_subscriptions(channel),
        channel.limits,
    )


def view_channel_subscriptions(channel: Channel) -> list[SubscriptionView]:
    """Plain subscriptions and online durables, then offline durables, then each queue
    group's members followed by its shadow (monitoring.md §5.3)."""
    views = [_view(sub, sub.record.client_id) for sub in channel.plain]
    views.extend(
        _view(sub, sub.record.client_id) for sub in channel.durables.values() if sub.client is None
    )
    for group in channel.groups.values():
        views.extend(_view(sub, sub.record.client_id) for sub in group.members)
        if group.shadow is not None:
            views.append(_shadow_view(group, group.shadow))
    return views


def _standby_view(sub: StandbySubscription, offline: bool) -> SubscriptionView:
    record, pending = sub.record, sub.pending_count
    return SubscriptionView(
        record.client_id,
        record.inbox,
        record.ack_inbox,
        record.durable_name,
        record.qgroup,
        record.is_durable,
        offline,
        record.max_inflight,
        record.ack_wait_secs,
        record.last_sent,
        pending,
        pending >= record.max_inflight,
        0,  # redeliveries are the serving node's own
    )


def _standby_channel_subscriptions(
    channel: StandbyChannel, client_ids: set[str]
) -> list[SubscriptionView]:
    """The records as the serving node holds them once recovered (``recovery.rebuild``),
    in :func:`view_channel_subscriptions`' order; members of gone clients are left out."""
    online: list[SubscriptionView] = []
    offline: list[SubscriptionView] = []
    groups: dict[str, tuple[list[SubscriptionView], list[SubscriptionView]]] = {}
    for sub in channel.subscriptions:
        record = sub.record
        has_client = record.client_id in client_ids
        if record.qgroup:
            members, shadows = groups.setdefault(record.qgroup, ([], []))
            if record.is_durable and not record.client_id:
                shadows.append(_standby_view(sub, True))
            elif has_client:
                members.append(_standby_view(sub, False))
        elif record.durable_name and (record.is_closed or not has_client):
            offline.append(_standby_view(sub, True))
        elif has_client:
            online.append(_standby_view(sub, False))
    views = online + offline
    for members, shadows in groups.values():
        views.extend(members)
        views.extend(shadows)
    return views


class _StandbyIndex:
    """One reading of the serving node's state (:meth:`Store.standby_state`) as the views
    of a standby node, built once per reading."""

    def __init__(self, state: StandbyState, limits: StoreLimits) -> None:
        self.state = state
        client_ids = {client.id for client in state.clients}
        self.channels: dict[str, tuple[ChannelView, list[SubscriptionView]]] = {}
        by_client: dict[str, dict[str, list[SubscriptionView]]] = {}
        for channel in state.channels:
            subs = _standby_channel_subscriptions(channel, client_ids)
            view = ChannelView(
                channel.name,
                channel.msgs,
                channel.bytes,
                channel.first_seq,
                channel.last_seq,
                len(subs),
                limits.for_channel(channel.name),
            )
            self.channels[channel.name] = (view, subs)
            for sub in subs:
                if not sub.is_offline:
                    by_client.setdefault(sub.client_id, {}).setdefault(channel.name, []).append(sub)
        self.clients = {
            client.id: (
                ClientView(
                    client.id,
                    client.hb_inbox,
                    sum(len(subs) for subs in by_client.get(client.id, {}).values()),
                ),
                by_client.get(client.id, {}),
            )
            for client in state.clients
        }


class ServerView:
    """What monitoring may read of one :class:`StreamingServer`.

    A standby node whose store can read the serving node's state (the clustered store's
    followers) answers with that state, as the reference's followers do; its own
    counters (messages in and out) stay its own."""

    def __init__(self, server: StreamingServer) -> None:
        self._server = server
        self._standby_index: _StandbyIndex | None = None

    def follow(self, server: StreamingServer) -> None:
        """Read ``server`` from now on: a clustered node that steps down runs a new one."""
        self._server = server
        self._standby_index = None

    def _standby(self) -> _StandbyIndex | None:
        server = self._server
        if not server.standing_by:
            return None
        replicated = server.store.capability(REPLICATED)
        state = replicated.standby_state() if replicated is not None else None
        if state is None:
            return None
        index = self._standby_index
        if index is None or index.state is not state:
            index = self._standby_index = _StandbyIndex(state, server.plan.store_limits)
        return index

    # -- identity and state ---------------------------------------------------------

    def nats_link(self) -> NatsLinkView:
        link = self._server.nats_link
        error = "" if link.up else link.last_error
        return NatsLinkView(link.up, link.reconnects, link.disconnected_seconds(), error)

    @property
    def server_id(self) -> str:
        return self._server.server_id

    @property
    def cluster_id(self) -> str:
        standby = self._standby()
        if standby is not None:
            return standby.state.info.cluster_id
        # As the reference: a standby has not read the store's server info yet.
        return "" if self._server.standing_by else self._server.info.cluster_id

    @property
    def state(self) -> str:
        return self._server.state

    @property
    def role(self) -> str:
        """Role of a clustered node (Leader, Follower); empty otherwise."""
        return self._server.mode.role

    @property
    def node_id(self) -> str:
        cluster = self._server.plan.cluster
        return cluster.node_id if cluster.clustered else ""

    @property
    def start_time_ns(self) -> int:
        return self._server.start_time_ns

    @property
    def uptime_seconds(self) -> float:
        return time.monotonic() - self._server.start_monotonic

    @property
    def store_type(self) -> str:
        return self._server.plan.store_label

    @property
    def store_limits(self) -> StoreLimits:
        return self._server.plan.store_limits

    # -- channels -------------------------------------------------------------------

    def _registry(self) -> ChannelRegistry | None:
        # Built by start(): a request may come in while the server connects.
        handlers = self._server.handlers
        return handlers.channels if handlers is not None else None

    def channel_names(self) -> list[str]:
        """Sorted byte-wise (code point order is UTF-8 byte order)."""
        standby = self._standby()
        if standby is not None:
            return list(standby.channels)  # read sorted
        registry = self._registry()
        return sorted(registry.channels) if registry is not None else []

    def channel(self, name: str) -> ChannelView | None:
        standby = self._standby()
        if standby is not None:
            found = standby.channels.get(name)
            return found[0] if found is not None else None
        registry = self._registry()
        channel = registry.get(name) if registry is not None else None
        return view_channel(channel) if channel is not None else None

    def channel_subscriptions(self, name: str) -> list[SubscriptionView]:
        standby = self._standby()
        if standby is not None:
            found = standby.channels.get(name)
            return list(found[1]) if found is not None else []
        registry = self._registry()
        channel = registry.get(name) if registry is not None else None
        return view_channel_subscriptions(channel) if channel is not None else []

    # -- clients --------------------------------------------------------------------

    def client_ids(self) -> list[str]:
        standby = self._standby()
        if standby is not None:
            return list(standby.clients)  # read sorted
        return sorted(self._server.clients.by_id)

    def client(self, client_id: str) -> ClientView | None:
        standby = self._standby()
        if standby is not None:
            found = standby.clients.get(client_id)
            return found[0] if found is not None else None
        client = self._server.clients.get(client_id)
        if client is None:
            return None
        return ClientView(client.id, client.hb_inbox, len(client.subs))

    def client_subscriptions(self, client_id: str) -> dict[str, list[SubscriptionView]]:
        """Channel name → the client's subscriptions on it, in the client's order."""
        standby = self._standby()
        if standby is not None:
            found = standby.clients.get(client_id)
            return {name: list(subs) for name, subs in found[1].items()} if found else {}
        client = self._server.clients.get(client_id)
        by_channel: dict[str, list[SubscriptionView]] = {}
        if client is not None:
            for sub in client.subs:
                view = _view(sub, sub.record.client_id)
                by_channel.setdefault(sub.channel.name, []).append(view)
        return by_channel

    # -- totals ---------------------------------------------------------------------

    def totals(self, channels: list[ChannelView] | None = None) -> ServerTotals:
        """Server-wide counts; summed over ``channels`` when the caller has just viewed
        every channel (saves a second walk), else over the registry."""
        server = self._server
        standby = self._standby()
        clients = len(server.clients)
        if standby is not None:
            clients = len(standby.clients)
            channels = [view for view, _ in standby.channels.values()]
        if channels is not None:
            count = len(channels)
            msgs = sum(channel.msgs for channel in channels)
            size = sum(channel.bytes for channel in channels)
            subs = sum(channel.subs_count for channel in channels)
        else:  # no view objects: this runs on every serverz/storez request
            registry = self._registry()
            live = list(registry.channels.values()) if registry is not None else []
            count, msgs, size, subs = len(live), 0, 0, 0
            for channel in live:
                stored, nbytes = channel.msgs.state()
                msgs += stored
                size += nbytes
                subs += _count_subscriptions(channel)
        # Built by start(): a request may come in while the server connects.
        handlers = server.handlers
        publisher = handlers.publisher if handlers is not None else None
        stats = handlers.delivery.stats if handlers is not None else None
        return ServerTotals(
            clients=clients,
            subscriptions=subs,
            channels=count,
            total_msgs=msgs,
            total_bytes=size,
            in_msgs=publisher.in_msgs if publisher is not None else 0,
            in_bytes=publisher.in_bytes if publisher is not None else 0,
            out_msgs=stats.out_msgs if stats is not None else 0,
            out_bytes=stats.out_bytes if stats is not None else 0,
            redelivered_msgs=stats.redelivered_msgs if stats is not None else 0,
            leader_promotions=server.mode.promotions,
        )
