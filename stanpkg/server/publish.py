"""Publishing: PubMsg intake, batched storage, delivery and PubAcks (protocol.md §7).

The NATS read loop calls :meth:`PublishPipeline.on_publish` for every PubMsg; it only
validates and queues. One task drains the queue once per event-loop turn, in batches of
``io_batch_size``: store every message of the batch (one store call per channel), flush
the touched message stores, deliver, flush the subscription stores, then send the
PubAcks — the reference's order, so a subscriber may see a message before its
publisher sees the ack.

With a store whose writes are network round trips (a ``PipeliningStore``: the
clustered store) the batches overlap: each batch's writes start as soon as it is stored,
and its commit — deliveries, subscription state, PubAcks — waits for the batch before.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, NamedTuple

from google.protobuf.message import DecodeError

from stanpkg.hot_path import is_compiled
from stanpkg.plan.subjects import is_valid_channel_name
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors, non_utf8_requests
from stanpkg.server.channels import Channel, ChannelError, ChannelRegistry
from stanpkg.server.clients import ClientRegistry
from stanpkg.server.delivery import Delivery
from stanpkg.server.wire import decode_pub_msg, encode_pub_ack, is_ctrl_msg
from stanpkg.stores.base import PIPELINES_WRITES, MessageBatch, StoreError

if TYPE_CHECKING:
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.log import Logger
    from stanpkg.stores.base import Store
    from stanpkg.transport.connection import NatsConnection

__all__ = ["PublishPipeline"]

_VALID_NAMES_CACHE = 4096
_CLIENT_WAIT = 1.0  # partitioning: how long a publish waits for its client's connect
_MAX_COMMITS_IN_FLIGHT = 8  # batches written at once by a pipelining store
# Queued publishes are all processed in the turn of the event loop that finds them, up to
# this many seconds: what one turn finds is what the reads of the turn before brought, so
# the queue does not build up. One batch per turn (as before) let fan-out deliveries
# outpace ingestion: 15,000 publishes waited, and publishers got their PubAcks at half
# the rate (bench/README.md, 2026-11-26).
_TURN_BUDGET = 0.1


# (channel, guid, PubAck reply subject, PubMsg.reply copied into the MsgProto, data, the
# connection the PubAck goes out on when not the general one): a plain tuple, the
# cheapest record to build once per message.
_Pending = tuple[str, str, str, str, bytes, "NatsConnection | None"]


class _Parked(NamedTuple):
    msg: _Pending
    client_id: str
    conn_id: bytes


_PubMsg = pb.PubMsg
# The hand scan of a PubMsg pays compiled only (0.3 of protobuf's time); interpreted it
# costs what protobuf's C decoder does (bench/README.md), so plain Python keeps protobuf.
_SCAN_PUB_MSG = is_compiled("stanpkg.server.wire")


class PublishPipeline:
    def __init__(
        self,
        context: HandlerContext,
        *,
        channels: ChannelRegistry,
        delivery: Delivery,
        partitioned: bool,
    ) -> None:
        plan, log, store, clients = context.plan, context.log, context.store, context.clients
        self.log: Logger = log
        self.store: Store = store
        self.clients: ClientRegistry = clients
        self.channels = channels
        self.delivery = delivery
        # PubAcks and deliveries go out on the general connection.
        self.conn: NatsConnection = context.conn
        # Partitioning: a publish may overtake its client's connect (another server's).
        self.partitioned = partitioned
        self.in_msgs = 0
        self.in_bytes = 0
        self._queue: list[_Pending] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy = False
        self._valid_names: set[str] = set()
        self._trace = log.trace_enabled
        self._by_id = clients.by_id
        self._by_conn_id = clients.by_conn_id
        self._batch_size = max(1, plan.io_batch_size)
        self._sleep = max(0, plan.io_sleep_time) / 1e6
        # Partitioning: publishes from a client not registered yet, in arrival order.
        self._parked: deque[_Parked] = deque()
        self._parked_task: asyncio.Task[None] | None = None
        # Channel deletions requested by the inactivity timer, done between batches.
        self._deletions: list[Channel] = []
        # A store that writes over the network: batches overlap, committed in order.
        self._pipelined = store.capability(PIPELINES_WRITES) is not None
        self._commits: deque[asyncio.Task[None]] = deque()
        # Publishes to channels the store is still loading (a clustered promotion), in
        # arrival order by channel: queued again, ahead of the rest, once loaded.
        self._held: dict[str, list[_Pending]] = {}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="stan-publish")

    async def drain(self, timeout: float) -> None:
        """Wait until every queued publish was stored, delivered and acknowledged."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (self._queue or self._parked or self._busy or self._held) and (
            loop.time() < deadline
        ):
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        for task in (self._task, self._parked_task, *self._commits):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._parked_task = None

    # -- intake (called from the NATS read loop) --------------------------------------

    def on_publish(self, subject: str, reply: str, payload: bytes) -> None:
        fields = decode_pub_msg(payload) if _SCAN_PUB_MSG else None
        if fields is None:  # not the form clients write: protobuf decodes or refuses it
            try:
                pm = _PubMsg.FromString(payload)
            except DecodeError:
                try:
                    pm = non_utf8_requests.parse(_PubMsg, payload)  # the rare slow path
                except DecodeError:
                    self._undecodable(subject, reply, payload)
                    return
            fields = (pm.clientID, pm.guid, pm.subject, pm.reply, pm.data, pm.connID)
        client_id, guid, channel, msg_reply, data, conn_id = fields
        # Counted once decoded, before any other validation (monitoring.md §2).
        self.in_msgs += 1
        self.in_bytes += len(payload)
        if not guid or (channel not in self._valid_names and not self._valid_channel(channel)):
            self.log.error(
                f"Received invalid client publish message (guid={guid!r} subject={channel!r})"
            )
            self._reply_error(reply, guid, errors.INVALID_PUB_REQ)
            return
        if self._trace:
            self.log.trace(
                f"[Client:{client_id}] Received message from publisher subj={channel} guid={guid}"
            )
        # protocol.md §3.2: by connID when the message carries one, else by client ID.
        client = self._by_conn_id.get(conn_id) if conn_id else self._by_id.get(client_id)
        if client is None or self._parked:
            self._invalid_publisher(
                (channel, guid, reply, msg_reply, data, None), client_id, conn_id
            )
            return
        self._queue.append((channel, guid, reply, msg_reply, data, client.out))
        self._wakeup.set()

    def _undecodable(self, subject: str, reply: str, payload: bytes) -> None:
        refusal = non_utf8_requests.refused_publish(payload)
        if refusal is not None:  # a PubMsg for the reference: counted, refused
            self.in_msgs += 1
            self.in_bytes += len(payload)
        elif is_ctrl_msg(payload):
            return  # legacy control message: dropped silently
        self.log.error(f"Received invalid client publish message on {subject}")
        if reply:
            self.conn.publish(reply, refusal or encode_pub_ack("", errors.INVALID_PUB_REQ))

    def _invalid_publisher(self, msg: _Pending, client_id: str, conn_id: bytes) -> None:
        if self.partitioned:
            self._park(_Parked(msg, client_id, conn_id))
            return
        self.log.error(f"[Client:{client_id}] Received publish message from unknown client")
        self._reply_error(msg[2], msg[1], errors.INVALID_PUB_REQ)

    def _valid_channel(self, name: str) -> bool:
        if name in self._valid_names:
            return True
        if not is_valid_channel_name(name, allow_wildcards=False):
            return False
        if len(self._valid_names) < _VALID_NAMES_CACHE:
            self._valid_names.add(name)
        return True

    def _reply_error(self, reply: str, guid: str, error: str) -> None:
        if reply:
            self.conn.publish(reply, encode_pub_ack(guid, error))

    # -- partitioning: wait for the client's connect ----------------------------------

    def _park(self, parked: _Parked) -> None:
        self._parked.append(parked)
        if self._parked_task is None or self._parked_task.done():
            self._parked_task = asyncio.get_running_loop().create_task(self._unpark())

    async def _unpark(self) -> None:
        clients = self.clients
        while self._parked:
            msg, client_id, conn_id = self._parked[0]
            valid = clients.is_valid_publisher(client_id, conn_id)
            if not valid:
                await clients.wait_registered(client_id, _CLIENT_WAIT)
                valid = clients.is_valid_publisher(client_id, conn_id)
            self._parked.popleft()
            if valid:
                self._queue.append(msg)
                self._wakeup.set()
            else:
                self._reply_error(msg[2], msg[1], errors.INVALID_PUB_REQ)

    # -- channel deletion (max_inactivity) --------------------------------------------

    def request_deletion(self, channel: Channel) -> None:
        self._deletions.append(channel)
        self._wakeup.set()

    def _delete_channel(self, channel: Channel) -> None:
        """Between batches: delete the channel unless it got active subscriptions meanwhile."""
        registry = self.channels
        if registry.get(channel.name) is not channel:
            return
        if channel.has_active_subs():
            channel.deleting = False
            registry.start_inactivity_timer(channel)
            return
        for sub in list(channel.all_subscriptions()):
            sub.removed = True
            sub.cancel_ack_timer()
        registry.remove(channel)
        try:
            self.store.delete_channel(channel.name)
        except StoreError as exc:
            self.log.error(f'Error deleting channel "{channel.name}": {exc}')
        self.log.notice(f'Channel "{channel.name}" has been deleted')

    # -- the batch loop ---------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue and not self._deletions:
                if self._commits:
                    await self._next_work_or_commit()
                    continue
                self._busy = False
                await self._wakeup.wait()
            if self._sleep and len(self._queue) < self._batch_size:
                await asyncio.sleep(self._sleep)
            self._wakeup.clear()
            self._busy = True
            turn_start = loop.time()
            while self._queue:
                batch = self._queue[: self._batch_size]
                del self._queue[: self._batch_size]
                try:
                    if self._pipelined:
                        self._dispatch(batch)
                        await self._limit_commits(_MAX_COMMITS_IN_FLIGHT)
                    else:
                        await self._process(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.log.error(f"Error processing publish batch: {exc!r}")
                if self._queue and (self._pipelined or loop.time() - turn_start >= _TURN_BUDGET):
                    # Let acks and requests in between batches: a long turn of the loop
                    # would delay every subscriber waiting for room in its window. A
                    # pipelining store's batches go out one per turn, their writes sent.
                    await asyncio.sleep(0)
                    turn_start = loop.time()
            if self._deletions:
                await self._limit_commits(1)  # a channel is deleted once it is quiet
            while self._deletions:
                try:
                    self._delete_channel(self._deletions.pop(0))
                except Exception as exc:
                    self.log.error(f"Error deleting channel: {exc!r}")

    # -- pipelined commits (a store whose writes are network round trips) ------------

    def _dispatch(self, batch: list[_Pending]) -> None:
        """Store the batch and start its writes now; its commit (deliveries, PubAcks)
        follows the commits of the batches before it."""
        groups, stored = self._stage(batch)
        flushes = [group.channel.begin_flush() for group in stored]
        previous = self._commits[-1] if self._commits else None
        task = asyncio.get_running_loop().create_task(
            self._logged(self._commit(groups, stored, flushes, previous))
        )
        self._commits.append(task)

    async def _logged(self, commit: Awaitable[None]) -> None:
        try:
            await commit
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.error(f"Error processing publish batch: {exc!r}")

    def _reap_commits(self) -> None:
        commits = self._commits
        while commits and commits[0].done():
            commits.popleft()

    async def _limit_commits(self, limit: int) -> None:
        """Until fewer than ``limit`` commits are in flight."""
        self._reap_commits()
        while len(self._commits) >= limit:
            await asyncio.wait((self._commits[0],))
            self._reap_commits()

    async def _next_work_or_commit(self) -> None:
        waiter = asyncio.get_running_loop().create_task(self._wakeup.wait())
        try:
            await asyncio.wait((waiter, self._commits[0]), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        self._reap_commits()

    async def _process(self, batch: list[_Pending]) -> None:
        groups, stored = self._stage(batch)
        await self._commit(groups, stored, [g.channel.begin_flush() for g in stored], None)

    def _stage(self, batch: list[_Pending]) -> tuple[list[_ChannelBatch], list[_ChannelBatch]]:
        """Store the batch's messages, by channel: (every group, the stored)."""
        log = self.log
        registry = self.channels
        now = time.time_ns()
        groups: dict[str, _ChannelBatch] = {}
        held = self._held
        for msg in batch:
            name, guid, reply, msg_reply, data, out = msg
            group = groups.get(name)
            if group is None:
                waiting = held.get(name) if held else None
                if waiting is not None:
                    waiting.append(msg)  # behind the publishes held before it
                    continue
                try:
                    channel = registry.lookup_or_create(name)
                except ChannelError as exc:
                    log.error(f"Error processing message for subject {name!r}: {exc}")
                    self._reply_error(reply, guid, str(exc))
                    continue
                if channel.msgs.loading:
                    self._hold(channel, msg)
                    continue
                group = groups[name] = _ChannelBatch(channel, now)
            if group.dedupe is not None and guid:
                if guid in group.seen or group.dedupe(guid):
                    # A resend of a message the store already has (a clustered store
                    # keeps recent publish IDs across a failover): acknowledged with
                    # the batch, not stored again.
                    group.acks.append((reply, guid, out))
                    continue
                group.seen.add(guid)
            group.messages.append((msg_reply, data))
            group.acks.append((reply, guid, out))
            group.guids.append(guid)
        stored: list[_ChannelBatch] = []
        for group in groups.values():
            channel = group.channel
            try:
                channel.msgs.store(MessageBatch(group.stamp, group.messages, group.guids))
            except StoreError as exc:
                group.error = str(exc)
                log.error(f"Unable to store messages in channel {channel.name!r}: {exc}")
                continue
            stored.append(group)
            registry.arm_age_timer(channel)
            channel.last_activity = group.stamp
        return list(groups.values()), stored

    def _hold(self, channel: Channel, msg: _Pending) -> None:
        self._held[channel.name] = [msg]
        asyncio.get_running_loop().create_task(self._release(channel))

    async def _release(self, channel: Channel) -> None:
        """Once the channel is loaded: its held publishes queued again, first."""
        failure = ""
        try:
            await channel.msgs.wait_loaded()
        except StoreError as exc:
            failure = str(exc)
        held = self._held.pop(channel.name, [])
        if failure:
            self.log.error(f"Unable to store messages in channel {channel.name!r}: {failure}")
            for _, guid, reply, _, _, _ in held:
                self._reply_error(reply, guid, failure)
            return
        # Its timestamps go on after the last stored one, now known.
        channel.last_ts = max(channel.last_ts, channel.msgs.last_timestamp)
        self._queue[:0] = held
        self._wakeup.set()

    async def _commit(
        self,
        groups: list[_ChannelBatch],
        stored: list[_ChannelBatch],
        flushes: list[Awaitable[None]],
        previous: asyncio.Task[None] | None,
    ) -> None:
        """Wait for the batch's writes, then (after the batch before, if still being
        committed) deliver it and send its PubAcks."""
        log, conn = self.log, self.conn
        committed: list[Channel] = []
        for group, flush in zip(stored, flushes, strict=True):
            try:
                await flush
            except StoreError as exc:
                # Not committed (an SQL write failed): the publishers get the error and
                # may retry; nothing unacknowledged is delivered from this batch.
                group.error = str(exc)
                log.error(f"Unable to store messages in channel {group.channel.name!r}: {exc}")
                continue
            committed.append(group.channel)
        if previous is not None:
            await previous  # deliveries and PubAcks in publish order
        delivery = self.delivery
        for channel in committed:
            delivery.deliver_channel(channel)
        for channel in committed:
            try:
                await channel.subs_store.flush()
            except StoreError as exc:  # the messages are stored: their PubAcks stand
                log.error(f"Unable to store subscriptions of channel {channel.name!r}: {exc}")
        acks: list[tuple[str, bytes]] = []
        elsewhere: dict[NatsConnection, list[tuple[str, bytes]]] = {}
        for group in groups:
            error = group.error
            for reply, guid, out in group.acks:
                if reply:
                    ack = (reply, encode_pub_ack(guid, error))
                    if out is None or out.is_closed:
                        acks.append(ack)
                    else:  # through the link to the publisher's own NATS server
                        elsewhere.setdefault(out, []).append(ack)
        conn.publish_each(acks)
        # The PubAcks end the batch: send them (and the deliveries) without waiting for the
        # end of the loop turn, which matters to synchronous publishers.
        for out, link_acks in elsewhere.items():
            out.publish_each(link_acks)
            out.write_now()
        conn.write_now()


class _ChannelBatch:
    """The messages of one publish batch for one channel (stored by ``_stage``)."""

    __slots__ = ("acks", "channel", "dedupe", "error", "guids", "messages", "seen", "stamp")

    def __init__(self, channel: Channel, now: int) -> None:
        self.channel = channel
        # protocol.md §7.3: never before the channel's previous timestamp. One clock
        # reading per batch: its messages arrived in the same event-loop turn.
        self.stamp = max(now, channel.last_ts)
        channel.last_ts = self.stamp
        self.messages: list[tuple[str, bytes]] = []  # (reply, data), in publish order
        self.guids: list[str] = []
        self.acks: list[tuple[str, str, NatsConnection | None]] = []  # reply, guid, out
        self.dedupe = channel.dedupe
        self.seen: set[str] = set()
        self.error = ""
