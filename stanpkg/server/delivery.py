"""Sending messages to subscriptions, acknowledgements and redelivery (protocol.md §9).

Everything here is synchronous and runs inside the connection's read loop or a timer
callback: no task or future per message. Messages go out as the stored MsgProto bytes;
a redelivery appends the ``redelivered``/``redeliveryCount`` fields (``wire.redelivered``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import non_utf8_requests
from stanpkg.server.subscriptions import QueueGroup, SubscribedChannel, Subscription
from stanpkg.server.wire import ack_sequence, is_ctrl_msg, redelivered
from stanpkg.transport.errors import BadSubjectError, MaxPayloadError

if TYPE_CHECKING:
    from stanpkg.server.channels import Channel
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.log import Logger
    from stanpkg.transport.connection import NatsConnection

__all__ = ["Delivery", "DeliveryStats"]

# A pending message expiring within this margin is resent with the expired ones, so the
# timer does not fire again a few milliseconds later (the reference's 15 ms).
_EXPIRY_MARGIN = 0.015
# Messages handed over by a departing queue member go out again this much later.
_TRANSFER_DELAY = 0.1
# A pending message the store is still reading (the clustered store reads on demand) is
# looked at again this much later.
_UNREAD_RETRY = 0.05
_MAX_UNREACHABLE_REPORTS = 1000  # subscriptions reported; then silent (a flood of them)

_Ack = pb.Ack


_EMPTY_DICT_KEPT = 1024  # bytes: a table for a few dozen entries is kept, a larger one goes


class DeliveryStats:
    """Counters read by monitoring: every MsgProto sent, and how many were resends."""

    __slots__ = ("out_bytes", "out_msgs", "redelivered_msgs")

    def __init__(self) -> None:
        self.out_msgs = 0
        self.out_bytes = 0
        self.redelivered_msgs = 0


class Delivery:
    def __init__(self, context: HandlerContext) -> None:
        # Messages go out on the general connection, or on the link to the subscriber's
        # own NATS server (client_links.py).
        self.conn: NatsConnection = context.conn
        self.loop: asyncio.AbstractEventLoop = context.loop
        self.log: Logger = context.log
        self.stats = DeliveryStats()
        # Subscriptions un-stalled by acks, fed once at the end of the read chunk: one
        # send pass for many acks instead of one per ack.
        self._to_feed: list[Subscription] = []
        self._unreachable_reported: set[int] = set()
        # False while the server has lost NATS: a redelivery then could reach nobody, and
        # held in the connection's buffer one ack wait after another it would only grow.
        self.nats_up: Callable[[], bool] = context.nats_up

    # -- new messages -----------------------------------------------------------------

    def deliver_channel(self, channel: Channel) -> None:
        """After new messages were stored: feed every subscription of the channel."""
        for sub in channel.plain:
            if not sub.stalled:
                self.send_available(sub)
        for group in channel.groups.values():
            if group.members:
                self.send_available_to_group(channel, group)

    def send_available(self, sub: Subscription) -> None:
        """Send stored messages after ``last_sent`` while below max in-flight."""
        if not sub.ready or sub.hold_new or sub.stalled:
            return
        msgs = sub.channel.msgs
        last = msgs.last_sequence
        seq = sub.last_sent + 1
        if seq > last:
            return
        pending = sub.pending
        room = sub.max_inflight - len(pending)
        if room <= 0:
            sub.stalled = True
            return
        first = msgs.first_sequence
        if seq < first:
            seq = first
        expires = self.loop.time() + sub.ack_wait
        out = self._out(sub)
        inbox, lookup_run = sub.inbox, msgs.lookup_run
        sent: list[int] = []
        nbytes = 0
        while seq <= last and room > 0:
            # A run as long as the window has room for (missing records take none), of
            # what the store can answer now: the rest is sent once it is read.
            end = msgs.readable_until(seq, min(last, seq + room - 1))
            if end < seq:
                break
            run = lookup_run(seq, end)
            if None not in run:
                records = cast(list[bytes], run)
                try:
                    out.publish_run(inbox, records)  # all or nothing
                except (MaxPayloadError, BadSubjectError):
                    pass  # one by one below: each message gets its own treatment
                else:
                    count = len(run)
                    pending.update(dict.fromkeys(range(seq, seq + count), expires))
                    sent.extend(range(seq, seq + count))
                    nbytes += sum(map(len, records))
                    room -= count
                    seq += count
                    continue
            for record in run:
                if record is not None:
                    try:
                        out.publish(inbox, record)
                    except MaxPayloadError:
                        self._too_large(sub, seq)
                        seq += 1
                        continue
                    except BadSubjectError:
                        self._unreachable(sub)  # then counted as sent: see _unreachable
                    pending[seq] = expires
                    sent.append(seq)
                    nbytes += len(record)
                    room -= 1
                seq += 1
        sub.last_sent = seq - 1
        if room <= 0:
            sub.stalled = True
        if sent:
            sub.channel.subs_store.record_sent(sub.id, sent)
            self.stats.out_msgs += len(sent)
            self.stats.out_bytes += nbytes
            if sub.ack_timer is None:
                self._arm(sub, expires)
            if self.log.trace_enabled:
                self.log.trace(
                    f"[Client:{sub.client_id}] Delivering msgs to subid={sub.id}, "
                    f"subject={sub.channel.name}, seq={sent[0]}..{sent[-1]}"
                )

    def _out(self, sub: Subscription) -> NatsConnection:
        """The connection ``sub``'s messages go out on."""
        out = sub.out
        return self.conn if out is None else out

    @staticmethod
    def _pick(group: QueueGroup) -> Subscription | None:
        """protocol.md §9.6: fewest pending among members neither stalled nor with failed
        heartbeats, else the first member; the first member, once picked, rotates last."""
        members = group.members
        best: Subscription | None = None
        fallback: Subscription | None = None
        least = -1
        for member in members:
            if not member.ready or member.hold_new:
                continue
            if fallback is None:
                fallback = member
            if member.stalled or member.hb_failed:
                continue
            count = len(member.pending)
            if best is None or count < least:
                best, least = member, count
        chosen = best if best is not None else fallback
        if chosen is not None and len(members) > 1 and members[0] is chosen:
            members.append(members.pop(0))
        return chosen

    def send_available_to_group(self, channel: SubscribedChannel, group: QueueGroup) -> None:
        msgs = channel.msgs
        last = msgs.last_sequence
        seq = group.last_sent + 1
        if seq > last:
            return
        first = msgs.first_sequence
        if seq < first:
            seq = first
        now = self.loop.time()
        sent: dict[Subscription, list[int]] = {}
        lookup = msgs.lookup
        readable = seq - 1
        while seq <= last:
            member = self._pick(group)
            if member is None:
                break
            if len(member.pending) >= member.max_inflight:
                member.stalled = True
                break
            if seq > readable:
                readable = msgs.readable_until(seq, last)
                if readable < seq:
                    break  # sent once the store has read it
            record = lookup(seq)
            if record is not None:
                try:
                    self._out(member).publish(member.inbox, record)
                except MaxPayloadError:
                    self._too_large(member, seq)
                    group.last_sent = seq
                    seq += 1
                    continue
                except BadSubjectError:
                    self._unreachable(member)
                expires = now + member.ack_wait
                member.pending[seq] = expires
                member.last_sent = seq
                sent.setdefault(member, []).append(seq)
                self.stats.out_msgs += 1
                self.stats.out_bytes += len(record)
                if len(member.pending) >= member.max_inflight:
                    member.stalled = True
                if member.ack_timer is None:
                    self._arm(member, expires)
            group.last_sent = seq
            seq += 1
        for member, seqs in sent.items():
            channel.subs_store.record_sent(member.id, seqs)

    def resume(self, sub: Subscription) -> None:
        """A subscription became ready: redeliver what it has pending (durable resume,
        shadow revival), then send what is available."""
        if sub.pending:
            now = self.loop.time()
            for seq in sorted(sub.pending):
                if self._readable(sub, seq):
                    self._redeliver(sub, seq, now)
            self._arm(sub, next(iter(sub.pending.values()), now + sub.ack_wait))
            sub.stalled = len(sub.pending) >= sub.max_inflight
        sub.hold_new = False
        self.feed(sub)

    def feed(self, sub: Subscription) -> None:
        """Send available messages to the subscription (or its queue group)."""
        if sub.group is not None:
            self.send_available_to_group(sub.channel, sub.group)
        else:
            self.send_available(sub)

    # -- acknowledgements -------------------------------------------------------------

    def on_ack(self, sub: Subscription, _subject: str, _reply: str, payload: bytes) -> None:
        """NATS handler of a subscription's ack inbox (bound with ``functools.partial``)."""
        seq = ack_sequence(payload, sub.channel.ack_prefix)
        if seq < 0:
            seq = self._decode_ack(sub, payload)
            if seq < 0:
                return
        if sub.removed:
            return
        if self.log.trace_enabled:
            self.log.trace(
                f"[Client:{sub.client_id}] Processing ack for subid={sub.id}, "
                f"subject={sub.channel.name}, seq={seq}"
            )
        if seq in sub.pending:
            self.acknowledge(sub, seq)
        elif sub.group is not None:
            for member in sub.group.members:
                if member is not sub and seq in member.pending:
                    self.acknowledge(member, seq)
                    break

    def _decode_ack(self, sub: Subscription, payload: bytes) -> int:
        """An ack in a form :func:`ack_sequence` does not take: its sequence, or -1 when
        it is not an ack of this subscription's channel."""
        try:
            ack = _Ack.FromString(payload)  # never reuse upb messages: their arenas only grow
        except DecodeError:
            try:
                ack = non_utf8_requests.parse(_Ack, payload)  # the rare slow path
            except DecodeError:
                if not is_ctrl_msg(payload):
                    self.log.error(f"Unable to decode ack on {sub.ack_inbox}: invalid payload")
                return -1
        if ack.subject != sub.channel.name:
            return -1
        return int(ack.sequence)

    def acknowledge(self, sub: Subscription, seq: int) -> None:
        """Remove a pending sequence (client or implicit ack) and resume a stalled sub."""
        pending = sub.pending
        if pending.pop(seq, None) is None:
            return
        sub.channel.subs_store.record_ack(sub.id, seq)
        if sub.redeliveries:
            sub.redeliveries.pop(seq, None)
        if not pending and sys.getsizeof(pending) > _EMPTY_DICT_KEPT:
            # A dict never shrinks as keys go: emptied, it keeps the table it grew to
            # (after a fan-out to 1,000 subscriptions with 1,024 in flight, ~10 MB of
            # empty tables). clear() gives the table back.
            pending.clear()
            sub.redeliveries.clear()
        if sub.stalled and len(sub.pending) < sub.max_inflight:
            sub.stalled = False
            if not self._to_feed:
                self.loop.call_soon(self._feed_unstalled)
            self._to_feed.append(sub)

    def _feed_unstalled(self) -> None:
        subs, self._to_feed = self._to_feed, []
        for sub in subs:
            if not sub.removed and not sub.stalled:
                self.feed(sub)

    # -- redelivery -------------------------------------------------------------------

    def _arm(self, sub: Subscription, when: float) -> None:
        if sub.ack_timer is not None:
            if sub.ack_timer.when() <= when:
                return
            sub.ack_timer.cancel()
        sub.ack_timer = self.loop.call_at(when, self._ack_timer_fired, sub)

    def _ack_timer_fired(self, sub: Subscription) -> None:
        sub.ack_timer = None
        self.redeliver_expired(sub, startup=False)

    def redeliver_expired(self, sub: Subscription, startup: bool) -> None:
        if sub.removed or sub.client is None or not sub.pending:
            return
        now = self.loop.time()
        if sub.group is None and sub.hb_failed:
            self._arm(sub, now + sub.ack_wait)
            self.log.debug(
                f"[Client:{sub.client_id}] Skipping redelivery to subid={sub.id} "
                "due to missed client heartbeat"
            )
            return
        if not self.nats_up():
            self._arm(sub, now + sub.ack_wait)
            self.log.debug(
                f"[Client:{sub.client_id}] Skipping redelivery to subid={sub.id} "
                "while the connection to NATS is lost"
            )
            return
        limit = now + _EXPIRY_MARGIN
        expired: list[int] = []
        unread = False
        for seq, expires in sub.pending.items():
            if expires > limit:
                break
            if self._readable(sub, seq):
                expired.append(seq)
            else:
                unread = True
        if unread:  # asked again once the store has read them
            self._arm(sub, now + _UNREAD_RETRY)
        if expired:
            self.log.debug(f"[Client:{sub.client_id}] Redelivering to subid={sub.id}")
        group = sub.group
        for seq in expired:
            if group is not None and not startup:
                self._redeliver_in_group(sub, group, seq, now)
            else:
                self._redeliver(sub, seq, now)
        if sub.pending and not sub.removed and not unread:
            self._arm(sub, max(next(iter(sub.pending.values())), now + _EXPIRY_MARGIN))

    @staticmethod
    def _readable(sub: Subscription, seq: int) -> bool:
        """Whether the store can answer for ``seq`` now (else it starts reading it)."""
        return sub.channel.msgs.readable_until(seq, seq) >= seq

    def _redeliver(self, sub: Subscription, seq: int, now: float) -> bool:
        """Resend one pending message to ``sub``; a vanished message is acked instead."""
        record = sub.channel.msgs.lookup(seq)
        if record is None:
            self.acknowledge(sub, seq)
            return False
        counts = sub.redeliveries
        count = counts.get(seq, 0) + 1
        counts[seq] = count
        data = redelivered(record, count)
        try:
            self._out(sub).publish(sub.inbox, data)
        except MaxPayloadError:
            self._too_large(sub, seq)
            self.acknowledge(sub, seq)
            return False
        except BadSubjectError:
            self._unreachable(sub)
        self.stats.out_msgs += 1
        self.stats.out_bytes += len(data)
        self.stats.redelivered_msgs += 1
        sub.pending.pop(seq, None)
        sub.pending[seq] = now + sub.ack_wait
        return True

    def _unreachable(self, sub: Subscription) -> None:
        """A delivery inbox NATS cannot carry (empty, blanks): the reference does not
        check inboxes and its NATS client sends such a message somewhere or nowhere.
        Here it counts as sent and waits for its ack like any other (a queue group
        redelivers it to another member), so this subscription cannot stop the
        channel's other deliveries and PubAcks. Reported once per subscription."""
        reported = self._unreachable_reported
        if sub.id in reported or len(reported) >= _MAX_UNREACHABLE_REPORTS:
            return
        reported.add(sub.id)
        self.log.error(
            f"[Client:{sub.client_id}] Failed sending to subid={sub.id}, "
            f"subject={sub.channel.name}, err=nats: invalid subject {sub.inbox!r}"
        )

    def _too_large(self, sub: Subscription, seq: int) -> None:
        self.log.error(
            f"[Client:{sub.client_id}] Failed sending to subid={sub.id}, "
            f"subject={sub.channel.name}, seq={seq}, err=message too large for NATS"
        )

    def _redeliver_in_group(
        self, sub: Subscription, group: QueueGroup, seq: int, now: float
    ) -> None:
        """Ack-timeout redelivery in a queue group may go to another member; the
        original member then has the message implicitly acknowledged."""
        target = self._pick(group) or sub
        if target is sub:
            self._redeliver(sub, seq, now)
            return
        record = sub.channel.msgs.lookup(seq)
        if record is None:
            self.acknowledge(sub, seq)
            return
        count = group.redeliveries.get(seq, 0) + 1
        data = redelivered(record, count)
        try:
            self._out(target).publish(target.inbox, data)
        except MaxPayloadError:
            self._too_large(target, seq)
            self.acknowledge(sub, seq)
            return
        except BadSubjectError:
            self._unreachable(target)
        self.stats.out_msgs += 1
        self.stats.out_bytes += len(data)
        self.stats.redelivered_msgs += 1
        expires = now + target.ack_wait
        target.pending[seq] = expires
        if seq > target.last_sent:
            target.last_sent = seq
        sub.channel.subs_store.record_sent(target.id, [seq])
        if len(target.pending) >= target.max_inflight:
            target.stalled = True
        if target.ack_timer is None:
            self._arm(target, expires)
        # Implicit ack of the original member; the count stays with the group.
        self.acknowledge(sub, seq)
        group.redeliveries[seq] = count

    def transfer_pending(self, leaver: Subscription, group: QueueGroup) -> None:
        """protocol.md §10.3: a departing member's pending messages go round-robin to
        the remaining members, already expired, to be redelivered shortly."""
        members = group.members
        if not leaver.pending or not members:
            return
        now = self.loop.time()
        moved: dict[Subscription, list[int]] = {}
        for index, seq in enumerate(leaver.pending):
            member = members[index % len(members)]
            moved.setdefault(member, []).append(seq)
            if seq > member.last_sent:
                member.last_sent = seq
        leaver.pending.clear()
        store = leaver.channel.subs_store
        for member, seqs in moved.items():
            store.record_sent(member.id, seqs)
            merged = dict.fromkeys(seqs, now)
            merged.update(member.pending)
            member.pending = merged
            member.stalled = len(merged) >= member.max_inflight
            self._arm(member, now + _TRANSFER_DELAY)
