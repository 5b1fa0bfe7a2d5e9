"""A trivial stand-in for the streaming server, to test and measure the bench tool alone.

    python -m stanpkg.loadgen.fake_server -s nats://127.0.0.1:4222 -c test-cluster

It answers connect/subscribe/unsubscribe/close requests, acks every PubMsg at once and
forwards it as a MsgProto to the channel's subscriptions (one member per queue group,
round-robin). Nothing is stored, nothing is redelivered, acks from subscribers are only
counted. Prints ``READY`` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass, field

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import MsgEncoder, encode_pub_ack
from stanpkg.transport import NatsConnection


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def pubmsg_fields(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(guid, channel, payload) of a PubMsg, by walking the wire format."""
    guid = channel = payload = b""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _read_varint(data, pos)
            continue
        if wire != 2:
            raise ValueError("unexpected wire type")
        size, pos = _read_varint(data, pos)
        value = data[pos : pos + size]
        pos += size
        if number == 2:
            guid = value
        elif number == 3:
            channel = value
        elif number == 5:
            payload = value
    return guid, channel, payload


@dataclass
class Channel:
    encoder: MsgEncoder  # the channel's MsgProtos (no timestamp)
    sequence: int = 0
    plain: list[str] = field(default_factory=list)  # delivery inboxes
    groups: dict[str, list[str]] = field(default_factory=dict)
    turn: dict[str, int] = field(default_factory=dict)


class FakeStanServer:
    def __init__(self, nc: NatsConnection, cluster_id: str) -> None:
        self.nc = nc
        self.cluster_id = cluster_id
        self.channels: dict[bytes, Channel] = {}
        self.acks_received = 0
        self.published = 0
        self.by_ack_inbox: dict[str, tuple[bytes, str, str]] = {}  # → channel, queue, inbox
        self.response = pb.ConnectResponse(
            pubPrefix=f"_STAN.pub.{cluster_id}",
            subRequests=f"_STAN.sub.{cluster_id}",
            unsubRequests=f"_STAN.unsub.{cluster_id}",
            closeRequests=f"_STAN.close.{cluster_id}",
            subCloseRequests=f"_STAN.subclose.{cluster_id}",
            pingRequests=f"_STAN.discover.{cluster_id}.pings",
            pingInterval=5,
            pingMaxOut=88,
            protocol=1,
        ).SerializeToString()

    def start(self) -> None:
        r = pb.ConnectResponse.FromString(self.response)
        self.nc.subscribe(f"_STAN.discover.{self.cluster_id}", self.on_connect)
        self.nc.subscribe(r.pingRequests, lambda s, reply, p: self.nc.publish(reply, b""))
        self.nc.subscribe(r.pubPrefix + ".>", self.on_publish)
        self.nc.subscribe(r.subRequests, self.on_subscribe)
        self.nc.subscribe(r.unsubRequests, self.on_unsubscribe)
        self.nc.subscribe(r.subCloseRequests, self.on_unsubscribe)
        self.nc.subscribe(r.closeRequests, lambda s, reply, p: self.nc.publish(reply, b""))

    def on_connect(self, subject: str, reply: str, payload: bytes) -> None:
        self.nc.publish(reply, self.response)

    def on_publish(self, subject: str, reply: str, payload: bytes) -> None:
        guid, channel_name, data = pubmsg_fields(payload)
        self.published += 1
        self.nc.publish(reply, encode_pub_ack(guid.decode()))
        channel = self.channels.get(channel_name)
        if channel is None:
            return
        channel.sequence += 1
        [msg] = channel.encoder.encode_run(channel.sequence, [("", data)])
        for inbox in channel.plain:
            self.nc.publish(inbox, msg)
        for name, members in channel.groups.items():
            turn = channel.turn.get(name, 0)
            self.nc.publish(members[turn % len(members)], msg)
            channel.turn[name] = turn + 1

    def on_subscribe(self, subject: str, reply: str, payload: bytes) -> None:
        request = pb.SubscriptionRequest.FromString(payload)
        name = request.subject.encode()
        channel = self.channels.get(name)
        if channel is None:
            channel = self.channels[name] = Channel(MsgEncoder(request.subject, 0))
        if request.qGroup:
            channel.groups.setdefault(request.qGroup, []).append(request.inbox)
        else:
            channel.plain.append(request.inbox)
        ack_inbox = self.nc.new_inbox()
        self.by_ack_inbox[ack_inbox] = (name, request.qGroup, request.inbox)
        self.nc.subscribe(ack_inbox, self.on_ack)
        self.nc.publish(reply, pb.SubscriptionResponse(ackInbox=ack_inbox).SerializeToString())

    def on_unsubscribe(self, subject: str, reply: str, payload: bytes) -> None:
        request = pb.UnsubscribeRequest.FromString(payload)
        found = self.by_ack_inbox.pop(request.inbox, None)
        if found is not None:
            name, queue, inbox = found
            channel = self.channels[name]
            members = channel.groups.get(queue, []) if queue else channel.plain
            with contextlib.suppress(ValueError):
                members.remove(inbox)
            if queue and not members:
                channel.groups.pop(queue, None)
        self.nc.publish(reply, b"")

    def on_ack(self, subject: str, reply: str, payload: bytes) -> None:
        self.acks_received += 1


async def serve(url: str, cluster_id: str) -> None:
    nc = await NatsConnection.connect(url, name="stanpkg fake streaming server")
    server = FakeStanServer(nc, cluster_id)
    server.start()
    await nc.flush()
    print("READY", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await nc.close()
    print(f"published={server.published} acks={server.acks_received}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stanpkg.loadgen.fake_server")
    parser.add_argument("-s", dest="url", default="nats://127.0.0.1:4222")
    parser.add_argument("-c", dest="cluster_id", default="test-cluster")
    args = parser.parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(serve(args.url, args.cluster_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
