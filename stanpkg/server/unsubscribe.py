"""Unsubscribe, subscription close, what leaving means for each kind of subscription,
and closing a client, whose subscriptions all leave (protocol.md §4, §10, §11.1)."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors, non_utf8_requests
from stanpkg.server.clients import Client
from stanpkg.server.subscription_handler import SubscriptionHandler
from stanpkg.server.subscriptions import QueueGroup, SubscribedChannel, Subscription
from stanpkg.stores.base import StoreError

__all__ = ["Removals"]


class Removals(SubscriptionHandler):
    """Unsubscribe and close requests, closing clients, and what a departure leaves."""

    # -- requests ---------------------------------------------------------------------

    def on_unsubscribe(self, subject: str, reply: str, payload: bytes) -> None:
        self.control.submit(lambda: self._request(reply, payload, unsubscribe=True))

    def on_sub_close(self, subject: str, reply: str, payload: bytes) -> None:
        self.control.submit(lambda: self._request(reply, payload, unsubscribe=False))

    def _reply(self, reply: str, error: str | None) -> None:
        if reply:
            payload = pb.SubscriptionResponse(error=error).SerializeToString() if error else b""
            self.conn.publish(reply, payload)

    async def _request(self, reply: str, payload: bytes, unsubscribe: bool) -> None:
        log = self.log
        action = "unsub" if unsubscribe else "sub close"
        try:
            req = non_utf8_requests.parse(pb.UnsubscribeRequest, payload)
        except DecodeError:
            log.error(f"Invalid {action} request")
            self._reply(
                reply,
                non_utf8_requests.unsubscribe_error(payload, self._has_channel, self._has_sub),
            )
            return
        if self.partitions is not None and not self.partitions.handles(req.subject):
            return  # another server of the partition answers
        await self.ack_barrier()
        channel = self.channels.get(req.subject)
        if channel is None:
            log.error(f"[Client:{req.clientID}] {action} request for unknown channel")
            self._reply(reply, errors.UNKNOWN_CHANNEL)
            return
        sub = channel.by_ack_inbox.get(req.inbox) or channel.by_inbox.get(req.inbox)
        if sub is None:
            log.error(f"[Client:{req.clientID}] {action} request for missing inbox {req.inbox}")
            self._reply(reply, errors.INVALID_SUB)
            return
        client = self.clients.get(req.clientID)
        if client is None or sub.client is not client:
            log.error(f"[Client:{req.clientID}] {action} request for missing client")
            self._reply(reply, errors.UNKNOWN_CLIENT)
            return
        self.remove(sub, unsubscribe)
        await channel.subs_store.flush()
        self.channels.start_inactivity_timer(channel)
        self._reply(reply, None)

    def _has_channel(self, name: str) -> bool:
        return self.channels.get(name) is not None

    def _has_sub(self, name: str, inbox: str) -> bool:
        channel = self.channels.get(name)
        return channel is not None and (inbox in channel.by_ack_inbox or inbox in channel.by_inbox)

    # -- closing a client -------------------------------------------------------------

    async def close_client(self, client_id: str, expected: Client | None = None) -> str | None:
        """Close a client like a CloseRequest does (the close request, a connect replacing
        a client that no longer answers, heartbeats timing out); ``expected`` guards
        against closing a client that replaced the one a timer or probe was about."""
        log = self.log
        client = self.clients.get(client_id)
        if client is None or (expected is not None and client is not expected):
            log.error(f"Unknown client {client_id!r} in close request")
            return errors.UNKNOWN_CLIENT
        # v0.25: unregister first, so a reconnecting client cannot race the removals.
        self.clients.unregister(client_id)
        client.stop_heartbeats()
        try:
            self.store.delete_client(client_id)
        except StoreError as exc:
            log.error(f"Error unregistering client {client_id!r}: {exc}")
        await self.remove_client_subscriptions(client)
        log.debug(f"[Client:{client_id}] Closed (Inbox={client.hb_inbox})")
        return None

    async def remove_client_subscriptions(self, client: Client) -> None:
        """Connection closed or lost: every subscription of the client leaves."""
        channels: dict[str, SubscribedChannel] = {}
        for sub in list(client.subs):
            channels[sub.channel.name] = sub.channel
            self.remove(sub, unsubscribe=False)
        registry = self.channels
        for name, channel in channels.items():
            await channel.subs_store.flush()
            live = registry.get(name)
            if live is channel:  # a deleted channel has no timer to start
                registry.start_inactivity_timer(live)

    # -- removal ----------------------------------------------------------------------

    def _detach(self, sub: Subscription) -> None:
        """Stop deliveries and acks: common to every kind of departure."""
        sub.ready = False
        sub.cancel_ack_timer()
        if sub.ack_sid is not None:
            (self.acks_conn if sub.out is None else sub.out).unsubscribe(sub.ack_sid)
            sub.ack_sid = None
            sub.out = None
        sub.channel.unindex_sub(sub)
        client = sub.client
        if client is not None:
            if sub in client.subs:
                client.subs.remove(sub)
            sub.client = None
        sub.hb_failed = False
        sub.stalled = False

    def remove(self, sub: Subscription, unsubscribe: bool) -> None:
        """Unsubscribe (``unsubscribe=True``) or close per the subscription's kind."""
        channel = sub.channel
        store = channel.subs_store
        self._detach(sub)
        group = sub.group
        if group is not None:
            self._leave_group(channel, group, sub, unsubscribe)
            return
        if sub in channel.plain:
            channel.plain.remove(sub)
        if sub.is_durable and not unsubscribe:
            # Offline durable: kept with its pending messages and its client ID.
            sub.record.is_closed = True
            store.update(sub.to_record())
            return
        if sub.is_durable:
            channel.durables.pop(sub.durable_key(), None)
        sub.removed = True
        store.delete(sub.id)

    def _leave_group(
        self, channel: SubscribedChannel, group: QueueGroup, sub: Subscription, unsubscribe: bool
    ) -> None:
        store = channel.subs_store
        if sub in group.members:
            group.members.remove(sub)
        if group.members:
            moved = set(sub.pending)
            held_last = sub.last_sent == group.last_sent
            self.delivery.transfer_pending(sub, group)
            sub.removed = True
            store.delete(sub.id)
            if held_last and group.last_sent not in moved:
                heir = group.members[0]
                heir.last_sent = group.last_sent
                store.update(heir.to_record())
            return
        if group.durable and not unsubscribe:
            # The group survives as a shadow: position and pending messages kept.
            group.shadow_client_id = sub.record.client_id
            sub.record.client_id = ""
            sub.last_sent = group.last_sent
            store.update(sub.to_record())
            group.shadow = sub
            return
        sub.removed = True
        store.delete(sub.id)
        if channel.groups.get(group.name) is group:
            del channel.groups[group.name]
