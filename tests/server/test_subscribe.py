"""Subscription requests: validation order and strings, start positions, durables."""

from __future__ import annotations

import asyncio
import time

from stanpkg.proto import protocol_pb2 as pb
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient, StanError


def _req(**fields: object) -> pb.SubscriptionRequest:
    base: dict[str, object] = dict(
        clientID="c", subject="foo", inbox="_INBOX.x", maxInFlight=10, ackWaitInSecs=30
    )
    base.update(fields)
    return pb.SubscriptionRequest(**base)  # type: ignore[arg-type]


async def test_subscription_validation_errors(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        cases: list[tuple[pb.SubscriptionRequest | bytes, str]] = [
            (b"\xff\xff\xff", "stan: invalid subscription request"),
            (_req(clientID=""), "stan: clientID missing"),
            (_req(ackWaitInSecs=0), "stan: invalid ack wait time, should be >= 1s"),
            (_req(ackWaitInSecs=-3), "stan: invalid ack wait time, should be >= 1s"),
            (_req(maxInFlight=0), "stan: invalid MaxInflight, should be >= 1"),
            (_req(startPosition=7), "stan: invalid start position"),
            (_req(startPosition=-1), "stan: invalid start position"),
            (_req(subject="foo.*"), "stan: invalid subject"),
            (_req(subject=""), "stan: invalid subject"),
            (_req(clientID="ghost"), "stan: unknown clientID"),
            (
                _req(qGroup="q", durableName="a:b"),
                "stan: durable name of a durable queue subscriber can't contain the character ':'",
            ),
            # Order: clientID is checked before ack wait, ack wait before max in flight...
            (_req(clientID="", ackWaitInSecs=0), "stan: clientID missing"),
            (_req(ackWaitInSecs=0, maxInFlight=0), "stan: invalid ack wait time, should be >= 1s"),
            (_req(maxInFlight=0, startPosition=9), "stan: invalid MaxInflight, should be >= 1"),
            (_req(startPosition=9, subject="*"), "stan: invalid start position"),
            (_req(subject="*", clientID="ghost"), "stan: invalid subject"),
        ]
        for req, expected in cases:
            resp = await client.sub_request(req)
            assert (resp.error, resp.ackInbox) == (expected, ""), req
        await client.close()


async def test_successful_response_carries_fresh_ack_inbox(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        a = await client.subscribe("foo")
        b = await client.subscribe("foo")
        for sub in (a, b):
            assert sub.ack_inbox.startswith("_INBOX.") and len(sub.ack_inbox) == 29
        assert a.ack_inbox != b.ack_inbox
        await client.close()


async def _publish_n(client: StanClient, channel: str, n: int) -> None:
    for i in range(1, n + 1):
        await client.publish(channel, f"m{i}".encode())


async def test_start_positions(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        # Empty channel: every position starts from nothing.
        for start in (pb.NewOnly, pb.LastReceived, pb.First, pb.SequenceStart):
            sub = await client.subscribe("empty", start=start, start_sequence=5)
            await sub.assert_nothing(0.1)
        await _publish_n(client, "foo", 5)

        async def first_seqs(count: int, **opts: object) -> list[int]:
            sub = await client.subscribe("foo", **opts)  # type: ignore[arg-type]
            msgs = await sub.collect(count) if count else []
            await sub.assert_nothing(0.15)
            await sub.unsubscribe()
            return [m.sequence for m in msgs]

        assert await first_seqs(0, start=pb.NewOnly) == []
        assert await first_seqs(1, start=pb.LastReceived) == [5]
        assert await first_seqs(5, start=pb.First) == [1, 2, 3, 4, 5]
        assert await first_seqs(3, start=pb.SequenceStart, start_sequence=3) == [3, 4, 5]
        assert await first_seqs(5, start=pb.SequenceStart, start_sequence=0) == [1, 2, 3, 4, 5]
        assert await first_seqs(0, start=pb.SequenceStart, start_sequence=99) == []
        # Time delta: everything published within the last minute...
        assert len(await first_seqs(5, start=pb.TimeDeltaStart, start_time_delta=60 * 10**9)) == 5
        await asyncio.sleep(0.3)
        await client.publish("foo", b"m6")
        # ...and only the message of the last 200 ms.
        assert await first_seqs(1, start=pb.TimeDeltaStart, start_time_delta=200_000_000) == [6]
        await client.close()


async def test_sequence_start_before_first_available(nats_url: str) -> None:
    plan = make_plan("-mm", "3")
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await _publish_n(client, "foo", 6)  # 4..6 kept
        sub = await client.subscribe("foo", start=pb.SequenceStart, start_sequence=2)
        assert [m.sequence for m in await sub.collect(3)] == [4, 5, 6]
        sub = await client.subscribe("foo", start=pb.First)
        assert [m.sequence for m in await sub.collect(3)] == [4, 5, 6]
        await client.close()


async def test_durable_resume_keeps_position_and_redelivers_pending(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        sub = await client.subscribe("foo", durable="dur", manual_acks=True, start=pb.First)
        await _publish_n(client, "foo", 4)
        msgs = await sub.collect(4)
        await sub.ack(msgs[0])
        await sub.ack(msgs[1])
        await asyncio.sleep(0.05)
        await sub.close()
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        (durable,) = channel.durables.values()
        assert durable.record.is_closed and durable.record.client_id == "c"
        await _publish_n(client, "foo", 2)  # 5 and 6 while offline
        again = await client.subscribe("foo", durable="dur", start=pb.First, manual_acks=True)
        assert again.ack_inbox != sub.ack_inbox
        got = await again.collect(4)
        # Pending 3 and 4 are redelivered first, then the new messages; start ignored.
        assert [(m.sequence, m.redelivered) for m in got] == [
            (3, True),
            (4, True),
            (5, False),
            (6, False),
        ]
        assert got[0].redeliveryCount == 1
        await again.unsubscribe()
        assert not channel.durables
        fresh = await client.subscribe("foo", durable="dur", start=pb.NewOnly)
        await fresh.assert_nothing(0.2)
        await client.close()


async def test_duplicate_durable(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.subscribe("foo", durable="dur")
        try:
            await client.subscribe("foo", durable="dur")
        except StanError as exc:
            assert str(exc) == "stan: duplicate durable registration"
        else:
            raise AssertionError("duplicate durable accepted")
        # Another client may use the same durable name: the key includes the client ID.
        other = await StanClient.connect(nats_url, plan.cluster_id, "other")
        await other.subscribe("foo", durable="dur")
        await client.close()
        await other.close()


async def test_replace_durable(nats_url: str) -> None:
    plan = make_plan("--replace_durable")
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        first = await client.subscribe("foo", durable="dur")
        second = await client.subscribe("foo", durable="dur")
        channel = server.handlers.channels.get("foo")
        assert channel is not None and len(channel.plain) == 1
        assert channel.plain[0].ack_inbox == second.ack_inbox != first.ack_inbox
        await client.publish("foo", b"x")
        assert (await second.next()).data == b"x"
        await first.assert_nothing(0.1)
        await client.close()


async def test_durable_survives_connection_close(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.subscribe("foo", durable="dur")
        await client.publish("foo", b"1")
        await client.close()
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await client.publish("foo", b"2")
        sub = await client.subscribe("foo", durable="dur", start=pb.First)
        assert [m.data for m in await sub.collect(1)] == [b"2"]
        await client.close()


async def test_max_subscriptions(nats_url: str) -> None:
    plan = make_plan("-msu", "2")
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        a = await client.subscribe("foo")
        await client.subscribe("foo")
        try:
            await client.subscribe("foo")
        except StanError as exc:
            assert str(exc) == "too many subscriptions per channel"
        else:
            raise AssertionError("max_subs not enforced")
        await client.subscribe("bar")  # per channel
        await a.unsubscribe()
        await client.subscribe("foo")
        await client.close()


async def test_unsubscribe_and_close_errors(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        other = await StanClient.connect(nats_url, plan.cluster_id, "other")
        sub = await client.subscribe("foo")

        async def unsub(subject: str, payload: bytes) -> str:
            raw = await client.request(subject, payload)
            return pb.SubscriptionResponse.FromString(raw).error

        for subject in (client.resp.unsubRequests, client.resp.subCloseRequests):
            assert await unsub(subject, b"\xff\xff") == "stan: invalid unsubscribe request"
            req = pb.UnsubscribeRequest(clientID="c", subject="nochannel", inbox=sub.ack_inbox)
            assert await unsub(subject, req.SerializeToString()) == "stan: unknown channel"
            req = pb.UnsubscribeRequest(clientID="c", subject="foo", inbox="nope")
            assert await unsub(subject, req.SerializeToString()) == "stan: invalid subscription"
            req = pb.UnsubscribeRequest(clientID="other", subject="foo", inbox=sub.ack_inbox)
            assert await unsub(subject, req.SerializeToString()) == "stan: unknown clientID"
        # The delivery inbox is accepted as well (Go client's fallback after a timeout).
        req = pb.UnsubscribeRequest(clientID="c", subject="foo", inbox=sub.inbox)
        assert await client.request(client.resp.unsubRequests, req.SerializeToString()) == b""
        await client.close()
        await other.close()


async def test_subscription_start_is_after_response(nats_url: str) -> None:
    """Messages available at subscribe time arrive only after the response."""
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        await _publish_n(client, "foo", 3)
        sub = await client.subscribe("foo", start=pb.First)
        assert len(await sub.collect(3)) == 3
        started = time.monotonic()
        await client.close()
        assert time.monotonic() - started < 1
