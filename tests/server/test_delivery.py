"""Acks, max in flight, redelivery and queue groups."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

from stanpkg.proto import protocol_pb2 as pb
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient, nats_flush


async def _publish_n(client: StanClient, channel: str, n: int, start: int = 1) -> None:
    for i in range(start, start + n):
        await client.publish(channel, f"m{i}".encode())


async def test_redelivery_after_ack_wait_with_counts(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", ack_wait=1, manual_acks=True)
        await client.publish("foo", b"x")
        first = await sub.next()
        assert (first.redelivered, first.redeliveryCount) == (False, 0)
        again = await sub.next(timeout=2)
        assert (again.sequence, again.redelivered, again.redeliveryCount) == (1, True, 1)
        third = await sub.next(timeout=2)
        assert (third.redelivered, third.redeliveryCount) == (True, 2)
        await sub.ack(third)
        await sub.assert_nothing(1.3)
        await client.close()


async def test_acked_messages_are_not_redelivered(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", ack_wait=1)  # auto ack
        await _publish_n(client, "foo", 3)
        assert len(await sub.collect(3)) == 3
        await sub.assert_nothing(1.3)
        await client.close()


async def test_max_inflight_stalls_and_acks_resume(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", max_inflight=2, manual_acks=True)
        await _publish_n(client, "foo", 5)
        got = await sub.collect(2)
        assert [m.sequence for m in got] == [1, 2]
        await sub.assert_nothing(0.2)
        await sub.ack(got[0])
        assert (await sub.next()).sequence == 3
        await sub.assert_nothing(0.2)
        await sub.ack(got[1])
        await sub.ack(3)
        assert [m.sequence for m in await sub.collect(2)] == [4, 5]
        await client.close()


async def test_redeliveries_ignore_max_inflight(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", max_inflight=1, ack_wait=1, manual_acks=True)
        await _publish_n(client, "foo", 2)
        assert (await sub.next()).sequence == 1
        again = await sub.next(timeout=2)
        assert (again.sequence, again.redelivered) == (1, True)
        await sub.ack(1)
        assert (await sub.next()).sequence == 2
        await client.close()


async def test_bad_acks_are_dropped(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", manual_acks=True, max_inflight=1)
        await client.publish("foo", b"x")
        await sub.next()
        await client.nc.publish(sub.ack_inbox, b"\xff\xff\xff\xff")
        await client.nc.publish(
            sub.ack_inbox, pb.Ack(subject="other", sequence=1).SerializeToString()
        )
        await client.nc.publish(
            sub.ack_inbox, pb.Ack(subject="foo", sequence=99).SerializeToString()
        )
        await nats_flush(client.nc)
        await asyncio.sleep(0.05)
        channel = server.handlers.channels.get("foo")
        assert channel is not None and list(channel.plain[0].pending) == [1]
        await sub.ack(1)
        await client.publish("foo", b"y")
        assert (await sub.next()).sequence == 2
        await client.close()


async def test_queue_group_shares_messages(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        a = await client.subscribe("foo", queue="q")
        b = await client.subscribe("foo", queue="q")
        await _publish_n(client, "foo", 10)
        await asyncio.sleep(0.3)
        seqs_a = [m.sequence for m in a.received]
        seqs_b = [m.sequence for m in b.received]
        assert sorted(seqs_a + seqs_b) == list(range(1, 11))
        assert seqs_a and seqs_b
        await client.close()


async def test_queue_member_joins_at_group_position(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await _publish_n(client, "foo", 3)
        a = await client.subscribe("foo", queue="q", start=pb.First)
        assert len(await a.collect(3)) == 3
        b = await client.subscribe("foo", queue="q", start=pb.First)  # start ignored
        await b.assert_nothing(0.2)
        await client.close()


async def test_leaving_queue_member_hands_over_unacked(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        a = await client.subscribe("foo", queue="q", manual_acks=True, max_inflight=10)
        await _publish_n(client, "foo", 3)
        assert len(await a.collect(3)) == 3
        b = await client.subscribe("foo", queue="q", max_inflight=10)
        await a.close()  # leaves with 1..3 unacked
        got = await b.collect(3, timeout=2)
        assert sorted(m.sequence for m in got) == [1, 2, 3]
        assert all(m.redelivered for m in got)
        await client.close()


async def test_queue_redelivery_may_go_to_another_member(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        slow = await client.subscribe("foo", queue="q", manual_acks=True, ack_wait=1)
        await client.publish("foo", b"x")
        assert (await slow.next()).sequence == 1
        fast = await client.subscribe("foo", queue="q", ack_wait=10)
        msg = await fast.next(timeout=3)
        assert (msg.sequence, msg.redelivered) == (1, True)
        await asyncio.sleep(0.1)
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        group = channel.groups["q"]
        assert all(not m.pending for m in group.members)  # implicit ack on `slow`
        await client.close()


async def test_durable_queue_group_shadow(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        a = await client.subscribe("foo", queue="q", durable="d", manual_acks=True)
        await _publish_n(client, "foo", 2)
        got = await a.collect(2)
        await a.ack(got[0])
        await asyncio.sleep(0.05)
        await a.close()  # last member closes: the group survives as a shadow
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        group = channel.groups["d:q"]
        assert group.shadow is not None and group.shadow.record.client_id == ""
        assert not group.shadow.record.is_closed
        await _publish_n(client, "foo", 1, start=3)
        other = await StanClient.connect(nats_url, plan.cluster_id, "other")
        b = await other.subscribe("foo", queue="q", durable="d", start=pb.First)
        got = await b.collect(2)
        assert [(m.sequence, m.redelivered) for m in got] == [(2, True), (3, False)]
        await b.unsubscribe()  # last member unsubscribes: group gone
        assert "d:q" not in channel.groups
        await client.close()
        await other.close()


async def test_connection_close_effects_per_kind(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.subscribe("foo")
        await client.subscribe("foo", durable="dur")
        await client.subscribe("foo", queue="q")
        await client.subscribe("foo", queue="dq", durable="d")
        await client.close()
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        assert channel.plain == []
        assert list(channel.durables) == ["c-foo-dur"]
        assert "q" not in channel.groups
        assert channel.groups["d:dq"].shadow is not None
        assert channel.by_ack_inbox == {}


async def test_acks_sent_before_a_close_are_applied_first(nats_url: str) -> None:
    """Acks arrive on another connection than requests: the server's barrier keeps a
    client's ack-then-close order."""
    plan = make_plan()
    count = 5000
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", durable="d", manual_acks=True, max_inflight=count)
        acks = [await client.publish_async("foo", b"x") for _ in range(count)]
        await asyncio.gather(*acks)
        got = await sub.collect(count)
        for msg in got:
            await sub.ack(msg)
        await sub.close()  # published right after the acks, no flush in between
        again = await client.subscribe("foo", durable="d", manual_acks=True)
        await again.assert_nothing(0.2)
        await client.close()


async def test_first_acks_reach_a_registered_ack_inbox(nats_url: str) -> None:
    """The ack inbox is subscribed on the acks connection, the reply and the deliveries go
    out on the general one. Holding the acks connection's own writes back shows whether
    the server waits for NATS to know the ack inbox before it answers: if not, the first
    acks are dropped and the messages come back after ack_wait."""
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await _publish_n(client, "foo", 3)
        acks_conn = server.acks_conn
        held = _HeldWrites(acks_conn._transport, hold=0.5)
        acks_conn._transport = held  # the writes of subscriptions and publishes
        assert acks_conn._proto is not None
        acks_conn._proto.transport = held  # the PINGs of flush(), after them
        sub = await client.subscribe("foo", start=pb.First, ack_wait=1)
        assert [m.sequence for m in await sub.collect(3)] == [1, 2, 3]
        await sub.assert_nothing(1.5)
        channel = server.handlers.channels.channels["foo"]
        assert all(not s.pending for s in channel.plain)
        await client.close()


class _HeldWrites:
    """A transport whose writes go out ``hold`` seconds late, in order. (It stands in for
    the connection's transport: a compiled connection's methods cannot be replaced.)"""

    def __init__(self, transport: Any, hold: float) -> None:
        self._transport = transport
        self._hold = hold
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            asyncio.get_running_loop().call_later(self._hold, self._release)
        self._held.append(bytes(data))

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _release(self) -> None:
        held, self._held = self._held, []
        if not self._transport.is_closing():
            self._transport.write(b"".join(held))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


async def test_an_emptied_pending_map_gives_its_memory_back(nats_url: str) -> None:
    """A subscription's map of unacknowledged messages grows to what was in flight; once
    all are acknowledged it must not keep that table (a dict never shrinks as keys go):
    after a fan-out to 1,000 subscriptions, the emptied tables held ~9 MB."""
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await asyncio.gather(*[await client.publish_async("foo", b"x") for _ in range(300)])
        sub = await client.subscribe("foo", start=pb.First, manual_acks=True)
        got = await sub.collect(300)
        (server_sub,) = server.handlers.channels.channels["foo"].plain
        assert len(server_sub.pending) == 300
        for msg in got:
            await sub.ack(msg)
        await nats_flush(client.nc)
        for _ in range(100):
            if not server_sub.pending:
                break
            await asyncio.sleep(0.02)
        assert not server_sub.pending
        assert sys.getsizeof(server_sub.pending) <= 1024
        await client.close()
