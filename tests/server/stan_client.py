"""A small STAN client on nats-py, for what the Node client cannot express: raw requests,
garbage payloads, protocol 0, heartbeat control, exact error strings."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as Nats
from nats.aio.msg import Msg

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport.nuid import next_nuid

REQUEST_TIMEOUT = 2.0


async def nats_flush(nc: Nats) -> None:
    """A round trip that comes back only after everything published before reached the
    NATS server. nats-py's ``flush()`` alone does not promise that: it writes its PING
    straight to the socket, ahead of publishes still in its own buffer (nats-py 2.16),
    which then go out behind it. The first round trip gets them written; the second
    PING follows them."""
    await nc.flush()
    await nc.flush()


class StanError(Exception):
    pass


@dataclass
class StanSub:
    client: StanClient
    channel: str
    inbox: str
    ack_inbox: str
    manual_acks: bool
    messages: asyncio.Queue[pb.MsgProto] = field(default_factory=asyncio.Queue)
    received: list[pb.MsgProto] = field(default_factory=list)
    nats_sub: Any = None

    async def next(self, timeout: float = 3.0) -> pb.MsgProto:
        return await asyncio.wait_for(self.messages.get(), timeout)

    async def collect(self, count: int, timeout: float = 5.0) -> list[pb.MsgProto]:
        return [await self.next(timeout) for _ in range(count)]

    async def collect_until_quiet(self, wait: float = 0.5) -> list[pb.MsgProto]:
        """Every message that comes before ``wait`` seconds pass without one."""
        got: list[pb.MsgProto] = []
        with contextlib.suppress(TimeoutError):
            while True:
                got.append(await asyncio.wait_for(self.messages.get(), wait))
        return got

    async def assert_nothing(self, wait: float = 0.5) -> None:
        with contextlib.suppress(TimeoutError):
            msg = await asyncio.wait_for(self.messages.get(), wait)
            raise AssertionError(f"unexpected message seq={msg.sequence}")

    async def ack(self, msg: pb.MsgProto | int) -> None:
        seq = msg if isinstance(msg, int) else msg.sequence
        ack = pb.Ack(subject=self.channel, sequence=seq)
        await self.client.nc.publish(self.ack_inbox, ack.SerializeToString())

    async def unsubscribe(self) -> None:
        await self._end(self.client.resp.unsubRequests)

    async def close(self) -> None:
        await self._end(self.client.resp.subCloseRequests)

    async def _end(self, subject: str) -> None:
        req = pb.UnsubscribeRequest(
            clientID=self.client.client_id, subject=self.channel, inbox=self.ack_inbox
        )
        raw = await self.client.request(subject, req.SerializeToString())
        if raw:
            error = pb.SubscriptionResponse.FromString(raw).error
            if error:
                raise StanError(error)
        if self.nats_sub is not None:
            await self.nats_sub.unsubscribe()


class StanClient:
    """``await StanClient.connect(url, cluster_id, client_id)``."""

    def __init__(self, nc: Nats, cluster_id: str, client_id: str) -> None:
        self.nc = nc
        self.cluster_id = cluster_id
        self.client_id = client_id
        self.discover = f"_STAN.discover.{cluster_id}"
        self.conn_id = next_nuid().encode()
        self.hb_inbox = nc.new_inbox()
        self.answer_heartbeats = True
        self.heartbeats = 0
        self.resp = pb.ConnectResponse()
        self._acks: dict[str, asyncio.Future[pb.PubAck]] = {}
        self.ack_inbox = nc.new_inbox()

    @classmethod
    async def connect(
        cls,
        url: str,
        cluster_id: str,
        client_id: str,
        *,
        protocol: int = 1,
        ping_interval: int = 5,
        ping_max_out: int = 88,
        nc: Nats | None = None,
    ) -> StanClient:
        nc = nc or await nats.connect(url, name=f"test-{client_id}")
        client = cls(nc, cluster_id, client_id)
        await nc.subscribe(client.hb_inbox, cb=client._on_heartbeat)
        await nc.subscribe(client.ack_inbox, cb=client._on_pub_ack)
        req = pb.ConnectRequest(
            clientID=client_id,
            heartbeatInbox=client.hb_inbox,
            protocol=protocol,
            connID=client.conn_id if protocol >= 1 else b"",
            pingInterval=ping_interval,
            pingMaxOut=ping_max_out,
        )
        raw = await client.request(client.discover, req.SerializeToString())
        resp = pb.ConnectResponse.FromString(raw)
        if resp.error:
            await nc.close()
            raise StanError(resp.error)
        client.resp = resp
        return client

    async def request(
        self, subject: str, payload: bytes, timeout: float = REQUEST_TIMEOUT
    ) -> bytes:
        msg = await self.nc.request(subject, payload, timeout=timeout)
        return bytes(msg.data)

    async def _on_heartbeat(self, msg: Msg) -> None:
        self.heartbeats += 1
        if self.answer_heartbeats and msg.reply:
            await self.nc.publish(msg.reply, b"")

    async def _on_pub_ack(self, msg: Msg) -> None:
        ack = pb.PubAck.FromString(msg.data)
        waiter = self._acks.pop(ack.guid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(ack)

    def pub_msg(
        self, channel: str, data: bytes, *, guid: str = "", conn_id: bool = True
    ) -> pb.PubMsg:
        return pb.PubMsg(
            clientID=self.client_id,
            guid=guid or next_nuid(),
            subject=channel,
            data=data,
            connID=self.conn_id if conn_id and self.resp.pingRequests else b"",
        )

    async def publish_async(self, channel: str, data: bytes) -> asyncio.Future[pb.PubAck]:
        pm = self.pub_msg(channel, data)
        waiter: asyncio.Future[pb.PubAck] = asyncio.get_running_loop().create_future()
        self._acks[pm.guid] = waiter
        await self.nc.publish(
            f"{self.resp.pubPrefix}.{channel}", pm.SerializeToString(), reply=self.ack_inbox
        )
        return waiter

    async def publish(self, channel: str, data: bytes, timeout: float = REQUEST_TIMEOUT) -> int:
        """Publish and wait for the PubAck; returns nothing useful but raises on error."""
        ack = await asyncio.wait_for(await self.publish_async(channel, data), timeout)
        if ack.error:
            raise StanError(ack.error)
        return 0

    async def raw_publish(self, pm: pb.PubMsg | bytes, subject: str = "") -> pb.PubAck:
        payload = pm if isinstance(pm, bytes) else pm.SerializeToString()
        raw = await self.request(subject or f"{self.resp.pubPrefix}.x", payload)
        return pb.PubAck.FromString(raw)

    async def subscribe(
        self,
        channel: str,
        *,
        queue: str = "",
        durable: str = "",
        max_inflight: int = 1024,
        ack_wait: int = 30,
        start: int = pb.NewOnly,
        start_sequence: int = 0,
        start_time_delta: int = 0,
        manual_acks: bool = False,
        inbox: str = "",
        timeout: float = REQUEST_TIMEOUT,
    ) -> StanSub:
        inbox = inbox or self.nc.new_inbox()
        sub = StanSub(self, channel, inbox, "", manual_acks)

        async def on_msg(msg: Msg) -> None:
            m = pb.MsgProto.FromString(msg.data)
            sub.received.append(m)
            sub.messages.put_nowait(m)
            if not sub.manual_acks and sub.ack_inbox:
                await sub.ack(m)

        sub.nats_sub = await self.nc.subscribe(inbox, cb=on_msg)
        req = pb.SubscriptionRequest(
            clientID=self.client_id,
            subject=channel,
            qGroup=queue,
            inbox=inbox,
            maxInFlight=max_inflight,
            ackWaitInSecs=ack_wait,
            durableName=durable,
            startPosition=start,  # type: ignore[arg-type]
            startSequence=start_sequence,
            startTimeDelta=start_time_delta,
        )
        raw = await self.request(self.resp.subRequests, req.SerializeToString(), timeout)
        resp = pb.SubscriptionResponse.FromString(raw)
        if resp.error:
            await sub.nats_sub.unsubscribe()
            raise StanError(resp.error)
        sub.ack_inbox = resp.ackInbox
        if not manual_acks:
            # Messages can arrive before the response that names the ack inbox: ack them now.
            for early in list(sub.received):
                await sub.ack(early)
        return sub

    async def sub_request(self, req: pb.SubscriptionRequest | bytes) -> pb.SubscriptionResponse:
        payload = req if isinstance(req, bytes) else req.SerializeToString()
        return pb.SubscriptionResponse.FromString(
            await self.request(self.resp.subRequests, payload)
        )

    async def close(self, *, keep_nats: bool = False) -> None:
        raw = await self.request(
            self.resp.closeRequests, pb.CloseRequest(clientID=self.client_id).SerializeToString()
        )
        if raw and pb.CloseResponse.FromString(raw).error:
            raise StanError(pb.CloseResponse.FromString(raw).error)
        if not keep_nats:
            await self.nc.close()

    async def ping(self) -> bytes:
        return await self.request(
            self.resp.pingRequests, pb.Ping(connID=self.conn_id).SerializeToString()
        )
