"""Bad input from the network never crashes or wedges the server."""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import nats

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient, nats_flush


async def test_garbage_on_every_subject(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", manual_acks=True)
        resp = client.resp
        subjects = [
            f"_STAN.discover.{plan.cluster_id}",
            resp.pingRequests,
            f"{resp.pubPrefix}.foo",
            resp.subRequests,
            resp.unsubRequests,
            resp.subCloseRequests,
            resp.closeRequests,
            sub.ack_inbox,
        ]
        rng = random.Random(7)
        nc = client.nc
        inbox = nc.new_inbox()
        await nc.subscribe(inbox)
        for _ in range(300):
            payload = rng.randbytes(rng.randrange(0, 64))
            for subject in subjects:
                await nc.publish(subject, payload, reply=inbox if rng.random() < 0.7 else "")
        # Wrong message types are decoded leniently; none of them may hurt.
        for subject in subjects:
            await nc.publish(
                subject, pb.MsgProto(sequence=3, data=b"z").SerializeToString(), reply=inbox
            )
        await nats_flush(nc)
        await asyncio.sleep(0.3)
        # Still fully working.
        await client.publish("foo", b"after")
        msg = await sub.next()
        assert msg.data == b"after"
        await sub.ack(msg)
        assert await client.ping() == b""
        assert server.clients.get("c") is not None
        await client.close()
        assert not log.contains("Traceback")


async def test_connect_flood(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        nc = await nats.connect(nats_url)
        discover = f"_STAN.discover.{plan.cluster_id}"
        inbox = nc.new_inbox()
        replies = 0

        async def count(_msg: object) -> None:
            nonlocal replies
            replies += 1

        await nc.subscribe(inbox, cb=count)
        for i in range(2000):
            req = pb.ConnectRequest(clientID=f"flood-{i % 500}", heartbeatInbox=f"hb.{i}")
            await nc.publish(discover, req.SerializeToString(), reply=inbox)
        await nats_flush(nc)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while replies < 2000 and loop.time() < deadline:
            await asyncio.sleep(0.1)
        # 500 IDs registered; repeats probe the registered one (no responder: replaced).
        assert replies == 2000
        assert len(server.clients) == 500
        other = await StanClient.connect(nats_url, plan.cluster_id, "after-flood")
        await other.publish("foo", b"x")
        await other.close()
        await nc.close()


async def test_oversized_and_empty_payloads(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("big", start=pb.First)
        max_payload = client.nc.max_payload
        # A payload close to NATS's max payload: the MsgProto may even be a bit larger
        # than the PubMsg; the server must not wedge either way.
        big = os.urandom(max_payload - 200)
        await client.publish("big", big, timeout=5)
        await client.publish("big", b"")  # empty payload: data absent in the MsgProto
        got = await sub.collect(2)
        assert got[0].data == big and got[1].data == b""
        assert server.handlers.channels.get("big").msgs.last_sequence == 2  # type: ignore[union-attr]
        await client.close()


async def test_message_too_big_to_deliver_does_not_wedge(nats_url: str) -> None:
    """A compact PubMsg at NATS's max payload makes a slightly larger MsgProto, which
    NATS cannot carry: the server skips it for delivery and keeps going."""
    plan = make_plan()
    async with running(plan, nats_url) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c", protocol=0)
        sub = await client.subscribe("b")
        max_payload = client.nc.max_payload
        pm = pb.PubMsg(clientID="c", guid="g", subject="b")
        overhead = len(pm.SerializeToString()) + 5  # data field tag + 4-byte length
        pm.data = b"x" * (max_payload - overhead)
        assert len(pm.SerializeToString()) <= max_payload
        ack = await client.raw_publish(pm, subject=f"{client.resp.pubPrefix}.b")
        assert ack.error == ""
        await client.publish("b", b"small")
        assert (await sub.next()).data == b"small"
        assert log.contains("too large")
        assert server.handlers.channels.get("b").msgs.last_sequence == 2  # type: ignore[union-attr]
        await client.close()


async def test_strings_that_are_not_utf8_get_the_references_answers(nats_url: str) -> None:
    """The reference's decoder takes any bytes as a string; its next check answers
    (protocol.md §3.1, §8.1, §11). Python's protobuf refuses them: stanpkg reads such a
    request again with bytes for strings to answer the same."""
    plan = make_plan()
    async with running(plan, nats_url) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo")
        resp = client.resp
        bad = b"\xc3\x28"

        def field(number: int, raw: bytes) -> bytes:
            return bytes((number << 3 | 2, len(raw))) + raw

        def varint(number: int, value: int) -> bytes:
            return bytes((number << 3, value))

        async def answer(subject: str, payload: bytes, kind: type[Any]) -> str:
            return str(kind.FromString(await client.request(subject, payload)).error)

        discover = f"_STAN.discover.{plan.cluster_id}"
        connect = field(1, bad) + field(2, b"_INBOX.x")
        assert await answer(discover, connect, pb.ConnectResponse) == errors.INVALID_CLIENT_ID
        no_inbox = field(1, bad)
        assert await answer(discover, no_inbox, pb.ConnectResponse) == errors.INVALID_CONN_REQ
        close = field(1, bad)
        assert await answer(resp.closeRequests, close, pb.CloseResponse) == errors.UNKNOWN_CLIENT
        valid = varint(5, 1) + varint(6, 1)  # maxInFlight, ackWaitInSecs
        subscribe = field(1, bad) + field(2, b"foo") + field(4, b"in") + valid
        got = await answer(resp.subRequests, subscribe, pb.SubscriptionResponse)
        assert got == errors.UNKNOWN_CLIENT
        wildcard = field(1, bad) + field(2, b"foo.*") + valid
        got = await answer(resp.subRequests, wildcard, pb.SubscriptionResponse)
        assert got == errors.INVALID_SUBJECT
        for subject in (resp.unsubRequests, resp.subCloseRequests):
            unknown_channel = field(1, b"c") + field(2, bad)
            got = await answer(subject, unknown_channel, pb.SubscriptionResponse)
            assert got == errors.UNKNOWN_CHANNEL
            unknown_inbox = field(1, b"c") + field(2, b"foo") + field(3, bad)
            got = await answer(subject, unknown_inbox, pb.SubscriptionResponse)
            assert got == errors.INVALID_SUB
            not_owner = field(1, bad) + field(2, b"foo") + field(3, sub.ack_inbox.encode())
            got = await answer(subject, not_owner, pb.SubscriptionResponse)
            assert got == errors.UNKNOWN_CLIENT
        # A PubMsg with a guid that is not UTF-8: refused, the guid echoed byte for byte.
        publish = field(2, bad) + field(3, b"foo") + field(6, client.conn_id)
        got_raw = await client.request(f"{resp.pubPrefix}.foo", publish)
        assert got_raw == field(1, bad) + field(2, errors.INVALID_PUB_REQ.encode())
        # Only the last value of a field counts: one that is not UTF-8 and replaced by a
        # later one does not make the request invalid.
        replaced = field(1, bad) + field(2, b"_INBOX.y") + field(1, b"d")
        connected = pb.ConnectResponse.FromString(await client.request(discover, replaced))
        assert connected.error == "" and connected.pubPrefix == resp.pubPrefix
        publish = field(1, bad) + field(2, b"g") + field(3, b"foo") + field(1, b"d")
        got_raw = await client.request(f"{resp.pubPrefix}.foo", publish)
        assert pb.PubAck.FromString(got_raw) == pb.PubAck(guid="g")
        assert (await sub.next()).sequence == 1
        # Truly malformed requests keep the "invalid ... request" answers.
        cut = field(1, b"abc")[:-1]
        assert await answer(discover, cut, pb.ConnectResponse) == errors.INVALID_CONN_REQ
        assert await answer(resp.closeRequests, cut, pb.CloseResponse) == errors.INVALID_CLOSE_REQ
        got = await answer(resp.unsubRequests, cut, pb.SubscriptionResponse)
        assert got == errors.INVALID_UNSUB_REQ
        # The subscription is still there and served.
        await client.publish("foo", b"still")
        assert (await sub.next()).data == b"still"
        assert server.clients.get("d") is not None
        await client.close()
        assert not log.contains("Traceback")


async def test_subscriptions_with_inboxes_nats_cannot_carry(nats_url: str) -> None:
    """The reference does not check delivery inboxes. A subscription whose inbox NATS
    refuses (empty, blanks, a line break that would inject protocol) is accepted as
    there, and must not stop the channel's PubAcks nor its other subscribers'
    deliveries."""
    plan = make_plan()
    async with running(plan, nats_url) as (_, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        for inbox in ("", "bad inbox", "a\r\nPUB b 1"):
            req = pb.SubscriptionRequest(
                clientID="c", subject="foo", inbox=inbox, maxInFlight=2, ackWaitInSecs=1
            )
            assert (await client.sub_request(req)).error == ""
        queue_bad = pb.SubscriptionRequest(
            clientID="c",
            subject="foo",
            qGroup="q",
            inbox="q inbox",
            maxInFlight=5,
            ackWaitInSecs=1,
        )
        assert (await client.sub_request(queue_bad)).error == ""
        good = await client.subscribe("foo")
        good_member = await client.subscribe("foo", queue="q")
        for i in range(6):
            await client.publish("foo", f"m{i}".encode())  # raises without a PubAck
        assert [m.data for m in await good.collect(6)] == [f"m{i}".encode() for i in range(6)]
        # The queue group's messages sent to nowhere are redelivered to the good member.
        got = {m.data for m in await good_member.collect(6, timeout=10)}
        assert got == {f"m{i}".encode() for i in range(6)}
        assert log.contains("err=nats: invalid subject 'bad inbox'")
        await client.close()
        assert not log.contains("Traceback")
        assert not log.contains("Error processing publish batch")
