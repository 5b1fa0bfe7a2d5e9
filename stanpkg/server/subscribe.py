"""Subscription requests: validation, start positions, and the four kinds of
subscription (protocol.md §8, §10)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors, non_utf8_requests
from stanpkg.server.channels import Channel, ChannelError
from stanpkg.server.clients import Client
from stanpkg.server.sub_validation import request_error
from stanpkg.server.subscription_handler import SubscriptionHandler
from stanpkg.server.subscriptions import QueueGroup, Subscription, durable_key
from stanpkg.stores.base import MessageStore, StoreError, SubRecord

if TYPE_CHECKING:
    from stanpkg.server.channels import ChannelRegistry
    from stanpkg.server.delivery import Delivery
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.host import ChannelPartitions

__all__ = ["SubscribeRequests", "start_last_sent"]

_CLIENT_WAIT = 1.0  # partitioning: the subscribe may overtake its client's connect
# How long a subscription waits for its new client's placement (a locate round trip and,
# the first time, a link's connect: milliseconds); then it goes without the link.
PLACEMENT_WAIT = 0.25


def start_last_sent(msgs: MessageStore, req: pb.SubscriptionRequest) -> int:
    """protocol.md §8.2: the ``lastSent`` a new subscription starts from."""
    first, last = msgs.first_sequence, msgs.last_sequence
    position = req.startPosition
    if position == pb.NewOnly:
        return last
    if position == pb.LastReceived:
        return last - 1 if last > 0 else 0
    if position == pb.TimeDeltaStart:
        seq = msgs.sequence_at_or_after(time.time_ns() - req.startTimeDelta)
        return seq - 1 if seq > 0 else 0
    if position == pb.SequenceStart:
        start = req.startSequence
        if start < first:
            return first - 1
        if start > last:
            return last
        return start - 1 if start > 0 else 0
    return first - 1 if first > 0 else 0  # First


class SubscribeRequests(SubscriptionHandler):
    def __init__(
        self,
        context: HandlerContext,
        *,
        remove: Callable[[Subscription, bool], None],
        channels: ChannelRegistry,
        delivery: Delivery,
        partitions: ChannelPartitions | None,
    ) -> None:
        super().__init__(context, channels=channels, delivery=delivery, partitions=partitions)
        self.replace_durable = context.plan.replace_durable
        self.new_inbox = context.conn.new_inbox  # a subscription's ack inbox
        self.remove = remove  # unsubscribe.Removals.remove: a replaced durable leaves

    def on_subscribe(self, subject: str, reply: str, payload: bytes) -> None:
        self.control.submit(lambda: self._subscribe(reply, payload))

    def _reply_error(self, reply: str, error: str) -> None:
        if reply:
            payload = pb.SubscriptionResponse(error=error).SerializeToString()
            self.conn.publish(reply, payload)

    def _validate(self, req: pb.SubscriptionRequest) -> str | None:
        return request_error(
            bool(req.clientID), req.ackWaitInSecs, req.maxInFlight, req.startPosition, req.subject
        )

    async def _subscribe(self, reply: str, payload: bytes) -> None:
        log, clients = self.log, self.clients
        try:
            req = non_utf8_requests.parse(pb.SubscriptionRequest, payload)
        except DecodeError:
            log.error("Received invalid subscription request")
            registered = clients.get
            refusal = non_utf8_requests.subscription_error(
                payload, lambda cid: registered(cid) is not None
            )
            self._reply_error(reply, refusal)
            return
        error = self._validate(req)
        if error is not None:
            log.error(f"[Client:{req.clientID}] Invalid subscription request: {error}")
            self._reply_error(reply, error)
            return
        if self.partitions is not None:
            if not self.partitions.handles(req.subject):
                return  # another server of the partition answers
            if not await clients.wait_registered(req.clientID, _CLIENT_WAIT):
                self._reply_error(reply, errors.INVALID_SUB_REQ)
                return
        client = clients.get(req.clientID)
        if client is None:
            log.error(f"[Client:{req.clientID}] Subscription request for unknown client")
            self._reply_error(reply, errors.UNKNOWN_CLIENT)
            return
        placing = client.placing
        if placing is not None and not placing.done():
            # A client that just connected is being placed on its NATS server (clustered
            # mode, client_links.py): its subscription takes the link from the start.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(placing), PLACEMENT_WAIT)
        try:
            channel = self.channels.lookup_or_create(req.subject)
        except ChannelError as exc:
            self._reply_error(reply, str(exc))
            return
        try:
            # A clustered store's promotion: the channel's figures are being read.
            await channel.msgs.wait_loaded()
        except StoreError as exc:
            log.error(f"[Client:{req.clientID}] Subscription refused: {exc}")
            self._reply_error(reply, str(exc))
            return
        if req.startPosition == pb.TimeDeltaStart:
            # A store that reads on demand reads what the search by time needs first.
            await channel.msgs.find_time(time.time_ns() - req.startTimeDelta)
        try:
            sub, resumed = self._create_or_resume(req, client, channel)
        except (StoreError, _Refused) as exc:
            log.error(f"[Client:{req.clientID}] Subscription refused: {exc}")
            self._reply_error(reply, str(exc))
            return
        self._attach(sub, client, channel)
        # The client acks as soon as it sees a message: NATS must have the ack inbox's SUB
        # (sent on the acks connection) before the reply or a delivery leaves on ``conn``,
        # or the first acks are dropped and their messages wait out ack_wait.
        await asyncio.gather(channel.subs_store.flush(), self.ack_barrier())
        if sub.removed or sub.client is not client:
            return  # the client went away while the store flushed
        if reply:
            resp = pb.SubscriptionResponse(ackInbox=sub.ack_inbox).SerializeToString()
            (self.conn if sub.out is None else sub.out).publish(reply, resp)
        sub.ready = True
        kind = "durable " if sub.record.is_durable else ""
        log.debug(
            f"[Client:{req.clientID}] {'Resumed' if resumed else 'Started new'} {kind}"
            f"subscription, subject={channel.name}, inbox={sub.inbox}, subid={sub.id}"
        )
        self.delivery.resume(sub)

    def _create_or_resume(
        self, req: pb.SubscriptionRequest, client: Client, channel: Channel
    ) -> tuple[Subscription, bool]:
        """The subscription to attach and whether an existing one is resumed."""
        qgroup, durable = req.qGroup, req.durableName
        if qgroup:
            if durable:
                if ":" in durable:
                    raise _Refused(errors.INVALID_DURABLE_NAME)
                qgroup = f"{durable}:{qgroup}"
            group = channel.groups.get(qgroup)
            if group is not None and group.shadow is not None:
                sub = group.shadow
                group.shadow = None
                self._refresh(sub, req)
                group.members.append(sub)
                return sub, True
            if group is None:
                group = QueueGroup(qgroup, durable=bool(durable))
                last_sent = start_last_sent(channel.msgs, req)
                sub = self._new(
                    req, channel, qgroup=qgroup, last_sent=last_sent, is_durable=bool(durable)
                )
                group.last_sent = last_sent
                channel.groups[qgroup] = group
            else:
                sub = self._new(req, channel, qgroup=qgroup, last_sent=0, is_durable=bool(durable))
            sub.join(group)
            group.members.append(sub)
            return sub, False
        if durable:
            key = durable_key(req.clientID, channel.name, durable)
            existing = channel.durables.get(key)
            if existing is not None and existing.client is not None:
                if not self.replace_durable:
                    raise _Refused(errors.DUPLICATE_DURABLE)
                self.remove(existing, False)  # closed, not unsubscribed: resumed below
            if existing is not None:
                self._refresh(existing, req)
                channel.plain.append(existing)
                return existing, True
            sub = self._new(
                req,
                channel,
                durable_name=durable,
                last_sent=start_last_sent(channel.msgs, req),
                is_durable=True,
            )
            channel.durables[key] = sub
            channel.plain.append(sub)
            return sub, False
        sub = self._new(req, channel, last_sent=start_last_sent(channel.msgs, req))
        channel.plain.append(sub)
        return sub, False

    def _new(
        self,
        req: pb.SubscriptionRequest,
        channel: Channel,
        *,
        last_sent: int,
        qgroup: str = "",
        durable_name: str = "",
        is_durable: bool = False,
    ) -> Subscription:
        record = SubRecord(
            client_id=req.clientID,
            inbox=req.inbox,
            ack_inbox=self.new_inbox(),
            max_inflight=req.maxInFlight,
            ack_wait_secs=req.ackWaitInSecs,
            qgroup=qgroup,
            durable_name=durable_name,
            last_sent=last_sent,
            is_durable=is_durable,
        )
        channel.subs_store.create(record)  # raises StoreError (too many subscriptions)
        return Subscription(record, channel)

    def _refresh(self, sub: Subscription, req: pb.SubscriptionRequest) -> None:
        """Resume: new client, inboxes and flow settings; position and pending kept."""
        record = sub.record
        record.client_id = req.clientID
        record.ack_inbox = self.new_inbox()
        record.is_closed = False
        record.is_durable = True
        sub.inbox = req.inbox
        sub.max_inflight = req.maxInFlight
        sub.ack_wait = float(req.ackWaitInSecs)
        sub.stalled = False
        sub.hold_new = bool(sub.pending)
        sub.channel.subs_store.update(sub.to_record())

    def _attach(self, sub: Subscription, client: Client, channel: Channel) -> None:
        sub.client = client
        sub.hb_failed = client.failed_hbs > 0
        client.subs.append(sub)
        channel.index_sub(sub)
        # Messages, the reply and acks on the link to the client's NATS server if it has
        # one: the acks' interest is then local to that server, and the reply cannot be
        # overtaken by a message sent another way.
        sub.out = client.out
        acks_conn = self.acks_conn if sub.out is None else sub.out
        sub.ack_sid = acks_conn.subscribe(sub.ack_inbox, partial(self.delivery.on_ack, sub))
        self.channels.stop_inactivity_timer(channel)


class _Refused(Exception):
    """A validation failure found while creating the subscription."""
