"""Publishing: validation, channel choice, sequences, timestamps, channel creation."""

from __future__ import annotations

import asyncio
import time

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient, StanError

INVALID = "stan: invalid publish request"


async def test_publish_stores_and_delivers_in_order(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        sub = await client.subscribe("foo")
        before = time.time_ns()
        for i in range(5):
            await client.publish("foo", f"m{i}".encode())
        msgs = await sub.collect(5)
        assert [m.sequence for m in msgs] == [1, 2, 3, 4, 5]
        assert [m.data for m in msgs] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert all(m.subject == "foo" and not m.redelivered for m in msgs)
        stamps = [m.timestamp for m in msgs]
        assert stamps == sorted(stamps) and stamps[0] >= before
        assert server.handlers.channels.get("foo").msgs.state()[0] == 5  # type: ignore[union-attr]
        assert server.handlers.publisher.in_msgs == 5
        await client.close()


async def test_channel_comes_from_pubmsg_subject(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        ack = await client.raw_publish(
            client.pub_msg("bar", b"x"), subject=f"{client.resp.pubPrefix}.whatever"
        )
        assert ack.error == ""
        assert server.handlers.channels.get("bar") is not None
        assert server.handlers.channels.get("whatever") is None
        await client.close()


async def test_publish_validation_errors(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        # Garbage payload: error with an empty guid.
        ack = await client.raw_publish(b"\xff\xff\xff\xff")
        assert (ack.guid, ack.error) == ("", INVALID)
        # Missing guid.
        pm = client.pub_msg("foo", b"x")
        pm.guid = ""
        assert (await client.raw_publish(pm)).error == INVALID
        # Invalid channel names.
        for name in ("", ".foo", "foo.", "foo..bar", "foo.*", "foo.>", "a/b", "*", ">"):
            ack = await client.raw_publish(client.pub_msg(name, b"x", guid="g1"))
            assert (ack.guid, ack.error) == ("g1", INVALID), name
        # Unknown client, and a valid client ID with a wrong connID.
        pm = client.pub_msg("foo", b"x")
        pm.clientID = "nobody"
        pm.connID = b""
        assert (await client.raw_publish(pm)).error == INVALID
        pm = client.pub_msg("foo", b"x")
        pm.connID = b"not-the-right-conn-id"
        assert (await client.raw_publish(pm)).error == INVALID
        # A legacy control message on the publish subject is dropped silently.
        ctrl = spb.CtrlMsg(MsgType=spb.CtrlMsg.ConnClose, ServerID="x").SerializeToString()
        await client.nc.publish(f"{client.resp.pubPrefix}.foo", ctrl, reply=client.ack_inbox)
        # Everything still works afterwards.
        await client.publish("foo", b"fine")
        await client.close()


async def test_unusual_but_valid_channel_names(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        for name in ("a.b.c", "dash-ed_under", "ünïcode", "x" * 200):
            await client.publish(name, b"x")
            assert server.handlers.channels.get(name) is not None
        await client.close()


async def test_max_channels(nats_url: str) -> None:
    plan = make_plan("-mc", "2")
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        await client.publish("a", b"x")
        await client.publish("b", b"x")
        ack = await client.raw_publish(client.pub_msg("c", b"x"))
        assert ack.error == "too many channels"
        resp = await client.sub_request(
            pb.SubscriptionRequest(
                clientID="pub", subject="d", inbox="i", maxInFlight=1, ackWaitInSecs=1
            )
        )
        assert resp.error == "too many channels"
        await client.publish("a", b"still fine")
        await client.close()


async def test_channel_names_differing_by_case_are_refused(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        await client.publish("foo", b"x")
        ack = await client.raw_publish(client.pub_msg("Foo", b"x"))
        assert ack.error == (
            'rejecting channel "Foo" because channel "foo" alreay exists '
            "(different cases not allowed)"
        )
        try:
            await client.subscribe("FOO")
        except StanError as exc:
            assert "alreay exists" in str(exc)
        else:
            raise AssertionError("subscribe on FOO should fail")
        await client.close()


async def test_no_dedup_by_guid_and_sequences_continue(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        pm = client.pub_msg("foo", b"same", guid="same-guid")
        for _ in range(3):
            assert (await client.raw_publish(pm)).guid == "same-guid"
        msgs = server.handlers.channels.get("foo").msgs  # type: ignore[union-attr]
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 3)
        await client.close()


async def test_publish_without_reply_is_stored(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        pm = client.pub_msg("noreply", b"x")
        await client.nc.publish(f"{client.resp.pubPrefix}.noreply", pm.SerializeToString())
        await client.publish("noreply", b"y")  # acked after the first was stored
        assert server.handlers.channels.get("noreply").msgs.last_sequence == 2  # type: ignore[union-attr]
        await client.close()


async def test_publishes_received_before_stop_are_acknowledged(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        acks = [await client.publish_async("foo", b"x") for _ in range(2000)]
        # The server answers the ping after reading every publish sent before it.
        await client.ping()
        await server.stop()
        results = await asyncio.wait_for(asyncio.gather(*acks), 5)
        assert all(ack.error == "" for ack in results)
        await client.nc.close()


async def test_queued_publishes_are_processed_in_the_turn_that_finds_them(nats_url: str) -> None:
    """Publishes queued beyond one batch are all stored in the event-loop turn that finds
    them, not one batch per turn: deliveries to many subscribers, done between turns,
    would otherwise keep a backlog of publishes waiting for their PubAcks."""
    plan = make_plan("--io_batch_size", "4")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        await client.publish("foo", b"first")  # the channel exists, the pipeline is idle
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        for i in range(12):  # three batches, queued as one read of the NATS socket would
            pm = client.pub_msg("foo", f"m{i}".encode())
            server.handlers.publisher.on_publish("ignored", "", pm.SerializeToString())
        # The pipeline was woken first: this runs right after its turn.
        after_its_turn = asyncio.get_running_loop().create_future()
        after_its_turn.get_loop().call_soon(
            lambda: after_its_turn.set_result(channel.msgs.last_sequence)
        )
        assert await after_its_turn == 13
        await client.close()
