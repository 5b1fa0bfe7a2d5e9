"""Bad input from the network never crashes or wedges the server."""

from __future__ import annotations

import asyncio
import os
import random

import nats

from stanpkg.proto import protocol_pb2 as pb
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
        assert server.channels.get("big").msgs.last_sequence == 2  # type: ignore[union-attr]
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
        assert server.channels.get("b").msgs.last_sequence == 2  # type: ignore[union-attr]
        await client.close()
