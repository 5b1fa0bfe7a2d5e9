"""A minimal, fast STAN client (protocol.md §2-§4, §9, §11): the load generator's
(``stanpkg bench``) and the live Spark source's (``pipeline/live_client.py``).

Connect, asynchronous publishing bounded by a window of unacknowledged messages,
subscriptions from a start position that ack every message, close. It is tuned so that
the tool using it is not the bottleneck: PubMsg and Ack are encoded by concatenating
precomputed protobuf fragments (proto/encoders.py) and the common PubAck/MsgProto shapes
are decoded by hand (falling back to the generated classes for anything else).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import ack_prefix, encode_varint, pub_msg_head, pub_msg_tail
from stanpkg.transport import NatsConnection, NatsError, NatsTimeoutError, NoRespondersError
from stanpkg.transport.nuid import TOTAL_LEN, Nuid

AckCallback = Callable[[str], None]
"""Called with the PubAck's error text ("" on success)."""
MessageCallback = Callable[[pb.MsgProto], None]
"""Called with a delivered message, decoded."""

_ACK_ALL = 1 << 64  # past any sequence

_MISSING: Any = object()


class StanError(Exception):
    pass


def _first_varint(data: bytes) -> int:
    """Field 1 as a varint at the start of ``data`` (MsgProto.sequence), or -1."""
    if not data or data[0] != 0x08:
        return -1
    value = shift = 0
    for i in range(1, min(len(data), 11)):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    return -1


class StanSubscription:
    def __init__(
        self,
        client: StanBenchClient,
        channel: str,
        on_msg: Callable[[int], None],
        on_message: MessageCallback | None = None,
        ack_through: int = _ACK_ALL,
    ) -> None:
        self.client = client
        self.channel = channel
        self.inbox = client.nc.new_inbox()
        self.ack_inbox = ""
        self.received = 0
        self._on_msg = on_msg
        self._on_message = on_message
        self._ack_through = ack_through
        self._ack_prefix = ack_prefix(channel)
        self._early: list[int] = []  # delivered before the SubscriptionResponse arrived
        self._acks: list[int] = []  # to be sent at the end of this loop turn
        # The NATS handler: decoding the whole message only when the caller wants it.
        self.handle: Callable[[str, str, bytes], None] = (
            self._handle_sequence if on_message is None else self._handle_message
        )

    def _handle_sequence(self, subject: str, reply: str, payload: bytes) -> None:
        sequence = _first_varint(payload)
        if sequence < 0:
            sequence = pb.MsgProto.FromString(payload).sequence
        self.received += 1
        if sequence <= self._ack_through:
            self._ack(sequence)
        self._on_msg(sequence)

    def _handle_message(self, subject: str, reply: str, payload: bytes) -> None:
        msg = pb.MsgProto.FromString(payload)
        self.received += 1
        if msg.sequence <= self._ack_through:
            self._ack(msg.sequence)
        self._on_message(msg)  # type: ignore[misc]  # set whenever this handler is

    def _ack(self, sequence: int) -> None:
        # Acks are gathered and framed in one pass once the socket read that delivered
        # their messages is handled: a third of the cost of one publish each.
        if not self.ack_inbox:
            self._early.append(sequence)
            return
        acks = self._acks
        acks.append(sequence)
        if len(acks) == 1:
            asyncio.get_running_loop().call_soon(self._send_acks)

    def _send_acks(self) -> None:
        acks, self._acks = self._acks, []
        prefix = self._ack_prefix
        with contextlib.suppress(NatsError):  # the connection is gone: acks mean nothing
            self.client.nc.publish_run(self.ack_inbox, [prefix + encode_varint(s) for s in acks])

    def set_ack_inbox(self, ack_inbox: str) -> None:
        self.ack_inbox = ack_inbox
        for sequence in self._early:
            self.client.nc.publish(ack_inbox, self._ack_prefix + encode_varint(sequence))
        self._early.clear()


class StanBenchClient:
    def __init__(self, nc: NatsConnection, cluster_id: str, client_id: str) -> None:
        self.nc = nc
        self.cluster_id = cluster_id
        self.client_id = client_id
        self.max_inflight = 16384
        self.acked = 0
        self.ack_errors: list[str] = []
        self._nuid = Nuid()
        self._conn_id = self._nuid.next().encode()
        self._hb_inbox = nc.new_inbox()
        self._ack_subject = "_STAN.acks." + self._nuid.next()
        self._pending: dict[bytes, AckCallback | None] = {}
        self._window: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._below: tuple[int, asyncio.Future[None]] | None = None  # wait_for_inflight's
        self._head = pub_msg_head(client_id.encode(), TOTAL_LEN)  # a NUID guid follows
        self._tail_channel = ""
        self._tail_data: bytes | None = None
        self._tail = b""
        self._pub_subject = ""
        self._response: Any = None

    @classmethod
    async def connect(
        cls,
        nc: NatsConnection,
        cluster_id: str,
        client_id: str,
        *,
        discover_prefix: str = "_STAN.discover",
        timeout: float = 2.0,
    ) -> StanBenchClient:
        client = cls(nc, cluster_id, client_id)
        nc.subscribe(client._hb_inbox, client._on_heartbeat)
        nc.subscribe(client._ack_subject, client._on_ack)
        request = pb.ConnectRequest(
            clientID=client_id,
            heartbeatInbox=client._hb_inbox,
            protocol=1,
            connID=client._conn_id,
            pingInterval=5,
            pingMaxOut=88,
        )
        try:
            raw = await nc.request(
                f"{discover_prefix}.{cluster_id}", request.SerializeToString(), timeout
            )
        except (NatsTimeoutError, NoRespondersError) as exc:
            raise StanError("stan: connect request timeout (possibly wrong cluster ID?)") from exc
        response = pb.ConnectResponse.FromString(raw)
        if response.error:
            raise StanError(response.error)
        client._response = response
        return client

    def _on_heartbeat(self, subject: str, reply: str, payload: bytes) -> None:
        if reply:
            self.nc.publish(reply, b"")

    # -- publishing ------------------------------------------------------------------------
    @property
    def inflight(self) -> int:
        return len(self._pending)

    def publish_async(self, channel: str, data: bytes, on_ack: AckCallback | None = None) -> str:
        """Send one PubMsg; ``on_ack`` runs when its PubAck arrives. Returns the guid."""
        if data is not self._tail_data or channel != self._tail_channel:
            # Everything after the guid only changes with the channel or the payload.
            self._tail = pub_msg_tail(channel.encode(), bytes(data), self._conn_id)
            self._tail_channel = channel
            self._tail_data = data
            self._pub_subject = f"{self._response.pubPrefix}.{channel}"
        guid = self._nuid.next()
        guid_b = guid.encode()
        self._pending[guid_b] = on_ack
        self.nc.publish(self._pub_subject, self._head + guid_b + self._tail, self._ack_subject)
        return guid

    async def publish(self, channel: str, data: bytes, timeout: float = 30.0) -> None:
        """Publish and wait for the PubAck (the ``-sync`` mode)."""
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def on_ack(error: str) -> None:
            # A PubAck that comes after the wait gave up finds the future cancelled.
            if not done.done():
                done.set_result(error)

        self.publish_async(channel, data, on_ack)
        try:
            error = await asyncio.wait_for(done, timeout)
        except TimeoutError as exc:
            raise StanError("stan: publish ack timeout") from exc
        if error:
            raise StanError(error)

    async def wait_for_window(self, timeout: float = 30.0) -> None:
        """Until fewer than ``max_inflight`` publishes are unacknowledged."""
        while len(self._pending) >= self.max_inflight:
            self._window = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._window, timeout)
            except TimeoutError as exc:
                raise StanError("stan: publish ack timeout") from exc

    async def wait_all_acked(self, timeout: float = 30.0) -> None:
        while self._pending:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._drained, timeout)
            except TimeoutError as exc:
                raise StanError("stan: publish ack timeout") from exc

    async def wait_for_inflight(self, at_most: int, timeout: float = 30.0) -> None:
        """Until at most ``at_most`` publishes are unacknowledged (a window refilled in
        chunks rather than one publish per PubAck, as ``wait_for_window`` does)."""
        while len(self._pending) > at_most:
            below = self._below = (at_most, asyncio.get_running_loop().create_future())
            try:
                await asyncio.wait_for(below[1], timeout)
            except TimeoutError as exc:
                raise StanError("stan: publish ack timeout") from exc
            finally:
                self._below = None

    def _on_ack(self, subject: str, reply: str, payload: bytes) -> None:
        if len(payload) == 24 and payload[0] == 0x0A and payload[1] == 0x16:
            guid, error = payload[2:], ""
        else:
            ack = pb.PubAck.FromString(payload)
            guid, error = ack.guid.encode(), ack.error
        callback = self._pending.pop(guid, _MISSING)
        if callback is _MISSING:
            return
        self.acked += 1
        if error:
            self.ack_errors.append(error)
        if callback is not None:
            callback(error)
        pending = len(self._pending)
        window = self._window
        if window is not None and pending < self.max_inflight and not window.done():
            window.set_result(None)
        drained = self._drained
        if drained is not None and not pending and not drained.done():
            drained.set_result(None)
        below = self._below
        if below is not None and pending <= below[0] and not below[1].done():
            below[1].set_result(None)

    # -- subscribing -----------------------------------------------------------------------
    async def subscribe(
        self,
        channel: str,
        on_msg: Callable[[int], None],
        *,
        queue: str = "",
        deliver_all: bool = False,
        start_position: pb.StartPosition | None = None,
        start_sequence: int = 0,
        start_time_delta: int = 0,
        on_message: MessageCallback | None = None,
        last_wanted: int = 0,
        max_inflight: int = 1024,
        ack_wait: int = 30,
        timeout: float = 2.0,
    ) -> StanSubscription:
        """Subscribe; ``start_position`` (a pb.StartPosition) overrides ``deliver_all``
        (``start_sequence`` goes with ``pb.SequenceStart``, ``start_time_delta``, in
        nanoseconds before now, with ``pb.TimeDeltaStart``).
        ``on_message``, when given, gets each decoded MsgProto instead of ``on_msg``.

        ``last_wanted`` (a sequence, the subscription is closed there): the messages after
        ``last_wanted - max_inflight`` are not acknowledged, so the server, which never has
        more than ``max_inflight`` unacknowledged, sends nothing past ``last_wanted``
        (``max_inflight`` is cut to the messages wanted from a start sequence). Otherwise
        every message is acknowledged."""
        ack_through = _ACK_ALL
        if last_wanted:
            if start_position == pb.SequenceStart:
                max_inflight = max(1, min(max_inflight, last_wanted - start_sequence + 1))
            ack_through = last_wanted - max_inflight
        sub = StanSubscription(self, channel, on_msg, on_message, ack_through)
        self.nc.subscribe(sub.inbox, sub.handle)
        request = pb.SubscriptionRequest(
            clientID=self.client_id,
            subject=channel,
            qGroup=queue,
            inbox=sub.inbox,
            maxInFlight=max_inflight,
            ackWaitInSecs=ack_wait,
            startPosition=(
                start_position
                if start_position is not None
                else (pb.First if deliver_all else pb.NewOnly)
            ),
            startSequence=start_sequence,
            startTimeDelta=start_time_delta,
        )
        try:
            raw = await self.nc.request(
                self._response.subRequests, request.SerializeToString(), timeout
            )
        except (NatsTimeoutError, NoRespondersError) as exc:
            raise StanError("stan: subscribe request timeout") from exc
        response = pb.SubscriptionResponse.FromString(raw)
        if response.error:
            raise StanError(response.error)
        sub.set_ack_inbox(response.ackInbox)
        return sub

    async def close_subscription(self, sub: StanSubscription, timeout: float = 2.0) -> None:
        request = pb.UnsubscribeRequest(
            clientID=self.client_id, subject=sub.channel, inbox=sub.ack_inbox
        )
        subject = self._response.subCloseRequests or self._response.unsubRequests
        raw = await self.nc.request(subject, request.SerializeToString(), timeout)
        if raw:
            error = pb.SubscriptionResponse.FromString(raw).error
            if error:
                raise StanError(error)

    async def close(self, timeout: float = 2.0) -> None:
        request = pb.CloseRequest(clientID=self.client_id)
        try:
            raw = await self.nc.request(
                self._response.closeRequests, request.SerializeToString(), timeout
            )
        except (NatsTimeoutError, NoRespondersError) as exc:
            raise StanError("stan: close request timeout") from exc
        if raw:
            error = pb.CloseResponse.FromString(raw).error
            if error:
                raise StanError(error)
