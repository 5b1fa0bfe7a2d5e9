"""The clustered store's standby state (monitoring on a follower) on real nats-servers: a
standby reads what the lease holder replicated (each channel's figures exactly as the
leader has them), follows its changes when asked, reads nothing while nobody asks, keeps
the last reading when JetStream stops answering, and reads nothing once it leads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from stanpkg.server.log import Logger
from stanpkg.stores.base import (
    ClientRecord,
    MessageBatch,
    ServerInfo,
    StandbyState,
    SubRecord,
)
from stanpkg.stores.jetstream import standby_view
from stanpkg.stores.jetstream.connection import connect
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.replicated_subs import ReplicatedSubscriptions
from stanpkg.stores.jetstream.standby_view import READ_TTL, read_standby_state
from stanpkg.stores.jetstream.store import ClusteredStore, ClusterSettings
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, make_plan, new_cluster_id
from tests.stores.jetstream.conftest import start_jetstream_server, stop_nats


def _store(cluster_id: str, node: str, log: LogCapture | None = None) -> ClusteredStore:
    args = ("-st", "file", "-dir", "unused", "-clustered", "-cluster_node_id", node)
    plan = make_plan(*args, cluster_id=cluster_id)
    settings = ClusterSettings(cluster_id, node, (), replicas=1, lease_ttl=2.0)
    logger = Logger(stream=log or LogCapture(), debug=False, trace=False)
    return ClusteredStore(plan, logger, settings)


async def _leader(url: str, cluster_id: str) -> ClusteredStore:
    store = _store(cluster_id, "a")
    await store.connect(NatsEndpoint(url))
    assert await store.acquire_exclusive_lock(lambda _reason: None)
    await store.wait_loaded()  # its streams answer: channels are created at once
    assert store.recover() is None
    store.init(ServerInfo.for_cluster(cluster_id, "_STAN.discover"))
    return store


async def _publish(store: ClusteredStore, channel: str, count: int) -> None:
    msgs = store.create_channel(channel).msgs
    msgs.store(MessageBatch(time.time_ns(), [("", b"x" * 10)] * count))
    await msgs.flush()


async def _wait_for(
    store: ClusteredStore, done: Callable[[StandbyState], bool], timeout: float = 15
) -> StandbyState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = store.standby_state()
        if state is not None and done(state):
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"no such standby state within {timeout} s: {store.standby_state()}")


@asynccontextmanager
async def _standing_by(url: str, cluster_id: str, log: LogCapture) -> AsyncIterator[ClusteredStore]:
    follower = _store(cluster_id, "b", log)
    await follower.connect(NatsEndpoint(url))
    waiting = asyncio.get_running_loop().create_task(
        follower.acquire_exclusive_lock(lambda _reason: None)
    )
    try:
        yield follower
    finally:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        follower.close()
        await asyncio.sleep(0.2)  # its connections close in the background


async def test_a_standby_reads_the_leaders_records_and_figures(jetstream_url: str) -> None:
    cluster_id = new_cluster_id()
    leader = await _leader(jetstream_url, cluster_id)
    try:
        leader.add_client(ClientRecord("me", "hb.me"))
        leader.add_client(ClientRecord("gone", "hb.gone"))
        await _publish(leader, "orders", 5)
        await _publish(leader, "b.ünïcode", 2)
        subs = leader.create_channel("orders").subs
        plain = SubRecord("me", "in.1", "ack.1", max_inflight=10, ack_wait_secs=30)
        durable = SubRecord("me", "in.2", "ack.2", 2, 5, durable_name="dur", is_durable=True)
        subs.create(plain)
        subs.create(durable)
        subs.record_sent(plain.id, [1, 2, 3])
        subs.record_ack(plain.id, 2)
        subs.record_sent(durable.id, [1, 2])
        leader.delete_client("gone")
        assert isinstance(subs, ReplicatedSubscriptions)
        subs.write_changed()  # the lazy replication's step
        await subs.flush()
        async with _standing_by(jetstream_url, cluster_id, LogCapture()) as follower:
            # The figures are replicated each second, the channels at once.
            state = await _wait_for(follower, lambda s: [c.msgs for c in s.channels] == [2, 5])
            assert state.info.cluster_id == cluster_id
            assert [c.id for c in state.clients] == ["me"]
            assert [c.name for c in state.channels] == ["b.ünïcode", "orders"]
            orders = state.channels[1]
            assert (orders.msgs, orders.first_seq, orders.last_seq) == (5, 1, 5)
            leaders = leader.create_channel("orders").msgs
            assert isinstance(leaders, ReplicatedMessages)
            assert orders.bytes == leaders.state()[1] > 0  # exactly the leader's
            assert (state.channels[0].msgs, state.channels[0].last_seq) == (2, 2)
            got = {
                s.record.inbox: (s.record.last_sent, s.pending_count) for s in orders.subscriptions
            }
            assert got == {"in.1": (3, 2), "in.2": (2, 2)}
            assert orders.subscriptions[1].record.durable_name == "dur"
            # Later changes show within a few readings.
            await _publish(leader, "orders", 3)
            leader.delete_channel("b.ünïcode")
            await asyncio.sleep(0.1)
            state = await _wait_for(follower, lambda s: len(s.channels) == 1)
            state = await _wait_for(follower, lambda s: s.channels[0].last_seq == 8)
            assert state.channels[0].msgs == 8
    finally:
        leader.close()
        await asyncio.sleep(0.2)


async def test_no_state_before_the_leader_wrote_any(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="standby-test")
    try:
        records = await ReplicatedMap.open(conn, f"STAN_{new_cluster_id()}_x", replicas=1)
        assert await read_standby_state(records, 0.0) is None
    finally:
        await conn.close()


@pytest.mark.slow
async def test_a_standby_keeps_its_last_reading_when_jetstream_is_gone(tmp_path: Path) -> None:
    started = [start_jetstream_server(tmp_path)]
    url = started[0][1]
    cluster_id = new_cluster_id()
    log = LogCapture()
    try:
        leader = await _leader(url, cluster_id)
        await _publish(leader, "orders", 4)
        async with _standing_by(url, cluster_id, log) as follower:
            known = await _wait_for(follower, lambda s: len(s.channels) == 1)
            stop_nats(started)
            deadline = time.monotonic() + 40  # a reading gives up after READ_TIMEOUT
            while "Unable to read the cluster's state" not in log.getvalue():
                assert time.monotonic() < deadline, log.getvalue()
                assert follower.standby_state() is known  # monitoring asks: a reading
                await asyncio.sleep(0.2)
            for _ in range(20):  # more readings that fail
                assert follower.standby_state() is known
                await asyncio.sleep(READ_TTL / 2)
            assert log.getvalue().count("Unable to read the cluster's state") == 1
        leader.close()
    finally:
        stop_nats(started)


async def test_a_standby_reads_only_when_asked(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle, a standby reads nothing (whatever the number of channels); asked again and
    again, it reads at most once per READ_TTL, and never makes monitoring wait."""
    cluster_id = new_cluster_id()
    leader = await _leader(jetstream_url, cluster_id)
    readings: list[float] = []
    real = ReplicatedMap.load

    async def counted(self: ReplicatedMap, leader_timeout: float = 5.0) -> dict[str, bytes]:
        readings.append(time.monotonic())
        return await real(self, leader_timeout)

    try:
        for n in range(20):
            await _publish(leader, f"idle.{n}", 1)
        async with _standing_by(jetstream_url, cluster_id, LogCapture()) as follower:
            await _wait_for(follower, lambda s: len(s.channels) == 20)
            monkeypatch.setattr(ReplicatedMap, "load", counted)
            await asyncio.sleep(3 * standby_view.RETRY_INTERVAL)
            assert readings == []  # nobody asked
            started = time.monotonic()
            for _ in range(30):
                assert follower.standby_state() is not None  # at once, the last reading
                await asyncio.sleep(0.1)
            assert time.monotonic() - started < 3.5
            assert 1 <= len(readings) <= 3 / READ_TTL + 1
    finally:
        leader.close()
        await asyncio.sleep(0.2)


async def test_the_lease_holder_has_no_standby_state(jetstream_url: str) -> None:
    cluster_id = new_cluster_id()
    leader = await _leader(jetstream_url, cluster_id)
    await _publish(leader, "orders", 1)
    assert leader.standby_state() is None
    async with _standing_by(jetstream_url, cluster_id, LogCapture()) as follower:
        await _wait_for(follower, lambda s: len(s.channels) == 1)
        leader.close()  # releases the lease: the standby takes over and reads no more
        deadline = time.monotonic() + 15
        while follower.standby_state() is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert follower.standby_state() is None
