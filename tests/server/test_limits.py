"""Channel limits: max_msgs, max_bytes, max_age, max_inactivity, per-channel overrides."""

from __future__ import annotations

import asyncio
from pathlib import Path

from stanpkg.proto import protocol_pb2 as pb
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient


async def test_max_msgs_drops_oldest(nats_url: str) -> None:
    plan = make_plan("-mm", "3")
    async with running(plan, nats_url) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        for i in range(5):
            await client.publish("foo", f"{i}".encode())
        msgs = server.handlers.channels.get("foo").msgs  # type: ignore[union-attr]
        assert (msgs.first_sequence, msgs.last_sequence, msgs.state()[0]) == (3, 5, 3)
        assert log.contains('Reached limits for store "foo" (msgs=4/3')
        sub = await client.subscribe("foo", start=pb.First)
        assert [m.sequence for m in await sub.collect(3)] == [3, 4, 5]
        await client.close()


async def test_max_bytes_drops_oldest_keeps_newest(nats_url: str) -> None:
    plan = make_plan("-mb", "300")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        for _ in range(4):
            await client.publish("foo", b"x" * 100)
        msgs = server.handlers.channels.get("foo").msgs  # type: ignore[union-attr]
        count, size = msgs.state()
        assert count == 2 and size <= 300 and msgs.last_sequence == 4
        await client.publish("foo", b"y" * 1000)  # alone above the limit: still stored
        assert msgs.state()[0] == 1 and msgs.first_sequence == 5
        await client.close()


async def test_max_age_expires_messages(nats_url: str) -> None:
    plan = make_plan("-ma", "500ms")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.publish("foo", b"old")
        await asyncio.sleep(0.3)
        await client.publish("foo", b"newer")
        msgs = server.handlers.channels.get("foo").msgs  # type: ignore[union-attr]
        await asyncio.sleep(0.35)
        assert (msgs.first_sequence, msgs.state()[0]) == (2, 1)
        await asyncio.sleep(0.35)
        assert msgs.state()[0] == 0
        assert (msgs.first_sequence, msgs.last_sequence) == (3, 2)
        await client.publish("foo", b"next")
        assert msgs.last_sequence == 3
        sub = await client.subscribe("foo", start=pb.First)
        assert [m.data for m in await sub.collect(1)] == [b"next"]
        await client.close()


async def test_pending_message_removed_by_limits_is_acked_on_redelivery(nats_url: str) -> None:
    plan = make_plan("-mm", "1")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", manual_acks=True, ack_wait=1)
        await client.publish("foo", b"1")
        await sub.next()
        await client.publish("foo", b"2")  # seq 1 dropped while pending
        await sub.next()
        again = await sub.next(timeout=2.5)
        assert (again.sequence, again.redelivered) == (2, True)
        channel = server.handlers.channels.get("foo")
        assert channel is not None and list(channel.plain[0].pending) == [2]
        await client.close()


async def test_per_channel_limits_from_config(nats_url: str, tmp_path: Path) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text('store_limits: { max_msgs: 100, channels: { "small.>": { max_msgs: 2 } } }\n')
    plan = make_plan("-sc", str(conf))
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        for _ in range(5):
            await client.publish("small.one", b"x")
            await client.publish("big", b"x")
        assert server.handlers.channels.get("small.one").msgs.state()[0] == 2  # type: ignore[union-attr]
        assert server.handlers.channels.get("big").msgs.state()[0] == 5  # type: ignore[union-attr]
        await client.close()


async def test_max_inactivity_deletes_idle_channels(nats_url: str) -> None:
    plan = make_plan("-mi", "400ms")
    async with running(plan, nats_url) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.publish("idle", b"x")
        sub = await client.subscribe("busy")
        await client.subscribe("busy", durable="d")
        await asyncio.sleep(0.25)
        await client.publish("idle", b"activity pushes the deadline")
        await asyncio.sleep(0.25)
        assert server.handlers.channels.get("idle") is not None
        await asyncio.sleep(0.4)
        assert server.handlers.channels.get("idle") is None
        assert log.contains('Channel "idle" has been deleted')
        assert server.handlers.channels.get("busy") is not None  # active subscription
        await sub.unsubscribe()
        await client.close()  # the durable goes offline: it does not keep the channel
        await asyncio.sleep(0.7)
        assert server.handlers.channels.get("busy") is None
        # Publishing again creates a fresh channel starting at sequence 1.
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.publish("idle", b"y")
        assert server.handlers.channels.get("idle").msgs.last_sequence == 1  # type: ignore[union-attr]
        await client.close()
