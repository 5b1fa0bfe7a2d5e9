"""Rebuilding clients, channels and subscriptions from a store's recovered state
(protocol.md §3.4, §9.5 item 3, §10.6)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.channels import Channel
from stanpkg.server.subscriptions import QueueGroup, Subscription, durable_key
from stanpkg.stores.base import RecoveredChannel, RecoveredState

if TYPE_CHECKING:
    import asyncio

    from stanpkg.server.channels import ChannelRegistry
    from stanpkg.server.clients import ClientRegistry
    from stanpkg.server.delivery import Delivery

__all__ = ["rebuild", "start_recovered"]


def rebuild(
    clients: ClientRegistry, channels: ChannelRegistry, state: RecoveredState
) -> list[Subscription]:
    """Register recovered clients and channels; return the online subscriptions (to be
    attached to NATS and started once the server is ready)."""
    for record in state.clients:
        clients.register(record)
    online: list[Subscription] = []
    for recovered in state.channels:
        channel = channels.attach(recovered.store)
        online.extend(_rebuild_channel(clients, channel, recovered))
    return online


def _rebuild_channel(
    clients: ClientRegistry, channel: Channel, recovered: RecoveredChannel
) -> list[Subscription]:
    online: list[Subscription] = []
    for item in recovered.subscriptions:
        record = item.record
        if record.durable_name:
            record.is_durable = True  # very old stores did not set it
        sub = Subscription(record, channel)
        sub.pending = dict.fromkeys(item.pending, 0.0)
        client = clients.get(record.client_id) if record.client_id else None
        if record.qgroup:
            group = channel.groups.get(record.qgroup)
            if group is None:
                group = channel.groups[record.qgroup] = QueueGroup(record.qgroup, record.is_durable)
            if record.is_durable and not record.client_id:
                group.shadow = sub
            elif client is None:
                if record.is_durable:  # a "ghost" member of a durable group
                    channel.subs_store.delete(record.id)
                if not group.members and group.shadow is None:
                    del channel.groups[record.qgroup]
                continue
            else:
                group.members.append(sub)
            sub.join(group)
            group.last_sent = max(group.last_sent, record.last_sent)
        elif record.durable_name:
            channel.durables[durable_key(record.client_id, channel.name, record.durable_name)] = sub
            if record.is_closed or client is None:
                continue  # offline durable
            channel.plain.append(sub)
        elif client is None:
            continue
        else:
            channel.plain.append(sub)
        if sub.group is not None and sub is sub.group.shadow:
            continue
        assert client is not None
        sub.client = client
        client.subs.append(sub)
        channel.index_sub(sub)
        sub.hold_new = bool(sub.pending)
        sub.stalled = len(sub.pending) >= sub.max_inflight
        online.append(sub)
    return online


def start_recovered(
    loop: asyncio.AbstractEventLoop, delivery: Delivery, subs: list[Subscription]
) -> None:
    """After the server is ready: pending messages expire ``ackWait`` after their
    timestamp; the expired ones go out now (to the same queue member), and only then
    are new messages released."""
    loop_now = loop.time()
    wall_now = time.time_ns()
    for sub in subs:
        if sub.removed or sub.client is None:
            continue
        sub.ready = True
        if sub.pending:
            expirations: dict[int, float] = {}
            msgs = sub.channel.msgs
            ack_wait_ns = int(sub.ack_wait * 1e9)
            for seq in sorted(sub.pending):
                if msgs.readable_until(seq, seq) < seq:
                    expirations[seq] = loop_now  # not read yet: redelivered once it is
                    continue
                record = msgs.lookup(seq)
                if record is None:
                    sub.channel.subs_store.record_ack(sub.id, seq)
                    continue
                stamp = pb.MsgProto.FromString(record).timestamp
                expirations[seq] = loop_now + (stamp + ack_wait_ns - wall_now) / 1e9
            sub.pending = expirations
            delivery.redeliver_expired(sub, startup=True)
            sub.stalled = len(sub.pending) >= sub.max_inflight
        sub.hold_new = False
    for sub in subs:
        if not sub.removed and sub.client is not None:
            delivery.feed(sub)
