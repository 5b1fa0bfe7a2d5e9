"""Restoring state from a store that recovered it (protocol.md §3.4, §9.5, §10.6).

The MEMORY store never recovers anything, so a test store hands the server a prepared
:class:`RecoveredState`, as a durable store would after a restart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import nats
import nats.aio.msg
import pytest

from stanpkg.plan.model import Plan
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.errors import StartupError
from stanpkg.server.log import Logger
from stanpkg.server.server import fresh_server_info
from stanpkg.stores.base import (
    ClientRecord,
    MessageBatch,
    RecoveredChannel,
    RecoveredState,
    RecoveredSubscription,
    ServerInfo,
    SubRecord,
)
from stanpkg.stores.memory import MemoryStore
from tests.server.conftest import LogCapture, make_plan, running
from tests.server.stan_client import StanClient, nats_flush


class RecoveringStore(MemoryStore):
    """A memory store that pretends to have recovered ``state`` from disk."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan.store_limits, Logger(stream=LogCapture()))
        self.state: RecoveredState | None = None
        self.deleted_subs: list[int] = []
        self.inits: list[ServerInfo] = []

    def recover(self) -> RecoveredState | None:
        return self.state

    def init(self, info: ServerInfo) -> None:
        self.inits.append(dataclasses.replace(info))
        super().init(info)


def _store_messages(
    store: RecoveringStore, channel: str, count: int, age: float
) -> RecoveredChannel:
    cs = store.create_channel(channel)
    stamp = time.time_ns() - int(age * 1e9)
    cs.msgs.store(MessageBatch(stamp, [("", f"m{i}".encode()) for i in range(1, count + 1)]))
    original_delete = cs.subs.delete

    def delete(sub_id: int) -> None:
        store.deleted_subs.append(sub_id)
        original_delete(sub_id)

    cs.subs.delete = delete  # type: ignore[method-assign]
    return RecoveredChannel(cs)


def _sub(store_channel: RecoveredChannel, record: SubRecord, pending: list[int]) -> SubRecord:
    store_channel.store.subs.create(record)
    store_channel.subscriptions.append(RecoveredSubscription(record, pending))
    return record


async def test_recovered_clients_and_subscriptions(nats_url: str) -> None:
    plan = make_plan("-hbi", "200ms", "-hbt", "100ms", "-hbf", "1")
    store = RecoveringStore(plan)
    nc = await nats.connect(nats_url)
    hb_inbox = nc.new_inbox()
    heartbeats = 0

    async def answer(msg: nats.aio.msg.Msg) -> None:
        nonlocal heartbeats
        heartbeats += 1
        await nc.publish(msg.reply, b"")

    await nc.subscribe(hb_inbox, cb=answer)
    delivered = nc.new_inbox()
    got: asyncio.Queue[pb.MsgProto] = asyncio.Queue()

    async def on_msg(msg: nats.aio.msg.Msg) -> None:
        got.put_nowait(pb.MsgProto.FromString(msg.data))

    await nc.subscribe(delivered, cb=on_msg)
    conn_id = b"conn-1"
    foo = _store_messages(store, "foo", 4, age=5.0)
    plain = _sub(
        foo,
        SubRecord("alive", delivered, "_INBOX.ackplain", 10, 2, last_sent=3),
        pending=[2, 3],  # sent 5 s ago with a 2 s ack wait: expired, redelivered at start
    )
    _sub(
        foo,
        SubRecord(
            "alive",
            "x",
            "_INBOX.ackdur",
            10,
            30,
            durable_name="dur",
            last_sent=4,
            is_durable=True,
            is_closed=True,
        ),
        pending=[4],
    )
    _sub(
        foo,
        SubRecord("", "x", "_INBOX.shadow", 10, 30, qgroup="d:q", last_sent=4, is_durable=True),
        pending=[],
    )
    ghost = _sub(
        foo,
        SubRecord("gone", "x", "_INBOX.ghost", 10, 30, qgroup="d:q", last_sent=2, is_durable=True),
        pending=[],
    )
    _sub(foo, SubRecord("gone", "x", "_INBOX.plain-ghost", 10, 30), pending=[])
    store.state = RecoveredState(
        info=fresh_server_info(plan),
        clients=[
            ClientRecord("alive", hb_inbox, conn_id, 1, 5, 88),
            ClientRecord("dead", "_INBOX.nobody-listens"),
        ],
        channels=[foo],
    )
    async with running(plan, nats_url, store=store) as (server, log):
        assert log.contains("Recovered 1 channel(s)")
        # Expired pending messages are redelivered first, in order, flagged; then new.
        first = [await asyncio.wait_for(got.get(), 3) for _ in range(3)]
        assert [(m.sequence, m.redelivered, m.redeliveryCount) for m in first] == [
            (2, True, 1),
            (3, True, 1),
            (4, False, 0),
        ]
        channel = server.handlers.channels.get("foo")
        assert channel is not None
        assert channel.by_ack_inbox["_INBOX.ackplain"].id == plain.id
        # The stored ack inbox works.
        await nc.publish("_INBOX.ackplain", pb.Ack(subject="foo", sequence=2).SerializeToString())
        await nats_flush(nc)
        await asyncio.sleep(0.05)
        assert 2 not in channel.by_ack_inbox["_INBOX.ackplain"].pending
        # Offline durable, shadow group, ghost removed, non-durable of a lost client ignored.
        assert channel.durables["alive-foo-dur"].client is None
        assert channel.groups["d:q"].shadow is not None
        assert channel.groups["d:q"].last_sent == 4
        assert ghost.id in store.deleted_subs
        assert "_INBOX.plain-ghost" not in channel.by_ack_inbox
        # Recovered clients get heartbeats; the one that does not answer is closed.
        await asyncio.sleep(0.9)
        assert heartbeats >= 2
        assert server.clients.get("alive") is not None
        assert server.clients.get("dead") is None
        # A publish from the recovered client (validated by its connID) works.
        pm = pb.PubMsg(clientID="alive", guid="g", subject="foo", data=b"new", connID=conn_id)
        raw = await nc.request(
            f"_STAN.pub.{plan.cluster_id}.foo", pm.SerializeToString(), timeout=2
        )
        assert pb.PubAck.FromString(raw.data).error == ""
        assert (await asyncio.wait_for(got.get(), 3)).sequence == 5
    await nc.close()


async def test_recovered_cluster_id_must_match(nats_url: str) -> None:
    plan = make_plan()
    store = RecoveringStore(plan)
    info = fresh_server_info(plan)
    info.cluster_id = "other"
    store.state = RecoveredState(info=info, clients=[], channels=[])
    with pytest.raises(StartupError) as err:
        async with running(plan, nats_url, store=store):
            pass
    assert str(err.value) == (
        f'cluster ID "{plan.cluster_id}" does not match recovered value of "other"'
    )


async def test_recovered_subjects_are_kept_and_subclose_filled(nats_url: str) -> None:
    plan = make_plan()
    store = RecoveringStore(plan)
    info = fresh_server_info(plan)
    info.publish = "_STAN.pub.Y6HX3p7cKkbqLZpgbz5Q7A"  # a pre-0.20 store: NUID subjects
    info.sub_close = ""
    store.state = RecoveredState(info=info, clients=[], channels=[])
    async with running(plan, nats_url, store=store):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c")
        assert client.resp.pubPrefix == "_STAN.pub.Y6HX3p7cKkbqLZpgbz5Q7A"
        assert client.resp.subCloseRequests == f"_STAN.subclose.{plan.cluster_id}"
        assert store.inits and store.inits[-1].sub_close == f"_STAN.subclose.{plan.cluster_id}"
        await client.publish("foo", b"x")
        await client.close()
