"""Server → client heartbeats with short settings, and what a lost client leaves behind."""

from __future__ import annotations

import asyncio

from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient

FAST_HB = ("-hbi", "100ms", "-hbt", "100ms", "-hbf", "2")


async def test_live_client_answers_heartbeats(nats_url: str) -> None:
    plan = make_plan(*FAST_HB)
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "alive")
        await asyncio.sleep(0.6)
        assert client.heartbeats >= 3
        assert server.clients.get("alive") is not None
        await client.close()


async def test_dead_client_is_closed_after_fail_count(nats_url: str) -> None:
    plan = make_plan(*FAST_HB)
    async with running(plan, nats_url, debug=True) as (server, log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "dead")
        await client.subscribe("foo")
        await client.subscribe("foo", durable="dur")
        await client.subscribe("foo", queue="q", durable="dq")
        client.answer_heartbeats = False
        # 3 failures (> hb_fail_count=2), each ~interval + timeout.
        await asyncio.sleep(0.25)
        assert server.clients.get("dead") is not None
        await asyncio.sleep(1.0)
        assert server.clients.get("dead") is None
        assert log.contains("[Client:dead] Timed out on heartbeats")
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        assert channel.plain == []
        assert channel.durables["dead-foo-dur"].record.is_closed
        assert channel.groups["dq:q"].shadow is not None
        # The durable can be resumed by a new connection with the same client ID.
        await client.nc.close()
        again = await StanClient.connect(nats_url, plan.cluster_id, "dead")
        await again.subscribe("foo", durable="dur")
        await again.close()


async def test_failed_heartbeats_pause_redelivery_and_ping_clears(nats_url: str) -> None:
    plan = make_plan("-hbi", "200ms", "-hbt", "100ms", "-hbf", "100")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "flaky")
        sub = await client.subscribe("foo", manual_acks=True, ack_wait=1)
        await client.publish("foo", b"x")
        await sub.next()
        client.answer_heartbeats = False
        await asyncio.sleep(0.5)
        channel = server.handlers.channels.get("foo")
        assert channel is not None and channel.plain[0].hb_failed
        # No redelivery to a plain subscription while its client misses heartbeats.
        await sub.assert_nothing(1.2)
        client.answer_heartbeats = True
        assert await client.ping() == b""  # a PING makes the next heartbeat come at once
        await asyncio.sleep(0.15)
        assert not channel.plain[0].hb_failed
        again = await sub.next(timeout=2)
        assert again.redelivered
        await client.close()


async def test_lost_queue_member_hands_over_to_others(nats_url: str) -> None:
    plan = make_plan(*FAST_HB)
    async with running(plan, nats_url):
        dying = await StanClient.connect(nats_url, plan.cluster_id, "dying")
        healthy = await StanClient.connect(nats_url, plan.cluster_id, "healthy")
        a = await dying.subscribe("foo", queue="q", manual_acks=True)
        await dying.publish("foo", b"1")
        assert (await a.next()).sequence == 1
        b = await healthy.subscribe("foo", queue="q")
        dying.answer_heartbeats = False
        msg = await b.next(timeout=3)
        assert (msg.sequence, msg.redelivered) == (1, True)
        await healthy.close()
        await dying.nc.close()
