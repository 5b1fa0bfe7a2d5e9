"""The SQL store through the store interface, against each driver: what is written, what
a restart recovers, limits, and the rows it leaves (reference layout)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import TOO_MANY_CHANNELS, TOO_MANY_SUBS, StoreError
from stanpkg.stores.sql import SqlStore
from stanpkg.stores.sql.store import SUB_FLUSH_INTERVAL
from tests.stores.sql.conftest import Target
from tests.stores.sql.helpers import client, payload, publish, server_info, sub_record


def fresh(target: Target, *args: str) -> SqlStore:
    """An empty store, recovered and initialised as the server does on a first start."""
    store = target.open(*args)
    store.recover()
    store.init(server_info())
    return store


def reopen(target: Target, store: SqlStore, *args: str) -> SqlStore:
    store.close()
    return target.open(*args)


async def test_fresh_store_then_recovery_of_info_and_clients(target: Target) -> None:
    store = target.open()
    assert store.type_name == "SQL"
    assert store.recover() is None
    store.init(server_info())
    store.add_client(client("a"))
    store.add_client(client("b"))
    store.add_client(client("a"))  # replaced, not duplicated
    store.delete_client("b")
    store = reopen(target, store)
    state = store.recover()
    assert state is not None
    assert state.info == server_info()
    assert state.clients == [client("a")]
    assert state.channels == []
    assert target.query("SELECT id, version FROM ServerInfo") == [("test-cluster", 1)]
    store.close()


async def test_messages_survive_a_restart(target: Target) -> None:
    store = fresh(target)
    msgs = store.create_channel("foo").msgs
    assert (msgs.first_sequence, msgs.last_sequence) == (0, 0)
    assert publish(msgs, [b"one", b"two"], stamp=100) == [1, 2]
    assert publish(msgs, [b"three"], stamp=200) == [3]
    await msgs.flush()
    assert [payload(msgs, s) for s in (0, 1, 2, 3, 4)] == [None, b"one", b"two", b"three", None]
    store = reopen(target, store)
    state = store.recover()
    assert state is not None
    [channel] = state.channels
    msgs = channel.store.msgs
    assert channel.store.name == "foo"
    assert (msgs.first_sequence, msgs.last_sequence, msgs.last_timestamp) == (1, 3, 200)
    assert msgs.state() == (3, sum(len(msgs.lookup(s) or b"") for s in (1, 2, 3)))
    assert [payload(msgs, s) for s in (1, 2, 3)] == [b"one", b"two", b"three"]
    assert (
        msgs.lookup(1)
        == pb.MsgProto(sequence=1, subject="foo", data=b"one", timestamp=100).SerializeToString()
    )
    assert (msgs.sequence_at_or_after(0), msgs.sequence_at_or_after(150)) == (1, 3)
    assert msgs.sequence_at_or_after(201) == 4
    assert publish(msgs, [b"four"]) == [4]
    await msgs.flush()
    rows = target.query("SELECT id, seq, timestamp, size FROM Messages ORDER BY seq")
    assert [r[1] for r in rows] == [1, 2, 3, 4]
    assert rows[0][3] == len(msgs.lookup(1) or b"")
    store.close()


async def test_many_messages_read_back_in_order(target: Target) -> None:
    store = fresh(target, "--sql_bulk_insert_limit", "100")
    msgs = store.create_channel("foo").msgs
    for batch in range(10):
        publish(msgs, [f"m{batch * 100 + i}".encode() for i in range(100)])
        await msgs.flush()
    store = reopen(target, store)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert [payload(msgs, s) for s in range(1, 1001)] == [f"m{i}".encode() for i in range(1000)]
    store.close()


async def test_max_msgs_and_max_bytes_drop_the_oldest(target: Target) -> None:
    store = fresh(target, "-mm", "3")
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"a", b"b"])
    await msgs.flush()
    publish(msgs, [b"c", b"d", b"e"])
    await msgs.flush()
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()[0]) == (3, 5, 3)
    assert msgs.lookup(2) is None
    assert 'Reached limits for store "foo" (msgs=5/3' in target.log.text()
    assert [r[0] for r in target.query("SELECT seq FROM Messages ORDER BY seq")] == [3, 4, 5]
    # A lower limit at restart applies to what was stored.
    store = reopen(target, store, "-mm", "1")
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert (msgs.first_sequence, msgs.last_sequence) == (5, 5)
    assert [r[0] for r in target.query("SELECT seq FROM Messages")] == [5]
    assert target.query("SELECT maxmsgs FROM Channels") == [(1,)]
    store.close()


async def test_max_bytes_keeps_at_least_the_newest(target: Target) -> None:
    store = fresh(target, "-mb", "100")
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"x" * 30, b"y" * 30])
    publish(msgs, [b"z" * 200])
    await msgs.flush()
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()[0]) == (3, 3, 1)
    assert [r[0] for r in target.query("SELECT seq FROM Messages")] == [3]
    store.close()


async def test_expiry_of_everything_keeps_the_last_sequence(target: Target) -> None:
    store = fresh(target, "-ma", "1s")
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"a"], stamp=1_000_000_000)
    publish(msgs, [b"b"], stamp=2_000_000_000)
    await msgs.flush()
    assert msgs.expire(2_500_000_000) == 2_000_000_000
    assert (msgs.first_sequence, msgs.state()[0]) == (2, 1)
    assert msgs.expire(3_000_000_000) == 0
    await msgs.flush()
    assert (msgs.first_sequence, msgs.last_sequence) == (3, 2)
    assert msgs.sequence_at_or_after(0) == 3
    assert target.query("SELECT seq FROM Messages") == []
    assert target.query("SELECT maxseq FROM Channels") == [(2,)]
    store = reopen(target, store, "-ma", "1s")
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()) == (3, 2, (0, 0))
    assert publish(msgs, [b"c"]) == [3]
    store.close()


async def test_channel_and_subscription_limits(target: Target) -> None:
    store = fresh(target, "-mc", "1", "-msu", "1")
    channel = store.create_channel("foo")
    assert store.create_channel("foo") is channel
    with pytest.raises(StoreError, match=f"^{TOO_MANY_CHANNELS}$"):
        store.create_channel("bar")
    record = sub_record()
    channel.subs.create(record)
    with pytest.raises(StoreError, match=f"^{TOO_MANY_SUBS}$"):
        channel.subs.create(sub_record())
    channel.subs.delete(record.id)
    channel.subs.create(sub_record())
    store.close()


@pytest.mark.parametrize("caching", [True, False], ids=["caching", "write-through"])
async def test_subscriptions_and_pending_state_survive(target: Target, caching: bool) -> None:
    args = () if caching else ("--sql_no_caching",)
    store = fresh(target, *args)
    store.add_client(client())
    channel = store.create_channel("foo")
    publish(channel.msgs, [b"m"] * 6)
    durable, plain = sub_record(durable="dur"), sub_record()
    channel.subs.create(durable)
    channel.subs.create(plain)
    assert (durable.id, plain.id) == (1, 2)
    channel.subs.record_sent(durable.id, [1, 2, 3])
    channel.subs.record_ack(durable.id, 1)  # acked before any flush
    await channel.subs.flush()
    channel.subs.record_sent(durable.id, [4, 5])
    channel.subs.record_ack(durable.id, 3)  # acked after its flush
    channel.subs.record_sent(plain.id, [6])
    durable.last_sent = 5
    durable.is_closed = True
    channel.subs.update(durable)
    await channel.subs.flush()
    store = reopen(target, store, *args)
    state = store.recover()
    assert state is not None
    subs = {s.record.id: s for s in state.channels[0].subscriptions}
    assert subs[1].record == durable
    assert subs[1].pending == [2, 4, 5]
    assert subs[2].pending == [6]
    assert subs[2].record.last_sent == 6
    # Acks after a restart, then another restart.
    channel = state.channels[0].store
    for seq in (2, 4, 5):
        channel.subs.record_ack(1, seq)
    channel.subs.delete(2)
    await channel.subs.flush()
    store = reopen(target, store, *args)
    state = store.recover()
    assert state is not None
    [recovered] = state.channels[0].subscriptions
    assert (recovered.record.id, recovered.pending, recovered.record.last_sent) == (1, [], 5)
    assert target.query("SELECT subid FROM SubsPending") == []
    store.close()


async def test_subscription_ids_are_global_and_not_reused(target: Target) -> None:
    store = fresh(target)
    foo, bar = store.create_channel("foo"), store.create_channel("bar")
    first, second = sub_record(), sub_record()
    foo.subs.create(first)
    bar.subs.create(second)
    assert (first.id, second.id) == (1, 2)
    bar.subs.delete(second.id)  # the largest ID: only marked deleted
    await bar.subs.flush()
    assert target.query("SELECT subid, deleted FROM Subscriptions WHERE subid=2") == [(2, True)]
    store = reopen(target, store)
    state = store.recover()
    assert state is not None
    channels = {c.store.name: c for c in state.channels}
    assert [s.record.id for s in channels["foo"].subscriptions] == [1]
    assert channels["bar"].subscriptions == []
    third = sub_record()
    channels["bar"].store.subs.create(third)
    assert third.id == 3
    await channels["bar"].store.subs.flush()
    assert target.query("SELECT subid FROM Subscriptions ORDER BY subid") == [(1,), (3,)]
    store.close()


async def test_deleted_channel_leaves_no_rows(target: Target) -> None:
    store = fresh(target)
    channel = store.create_channel("foo")
    publish(channel.msgs, [b"a", b"b"])
    record = sub_record()
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1])
    await channel.subs.flush()
    store.delete_channel("foo")
    again = store.create_channel("foo")
    assert again.msgs.last_sequence == 0
    publish(again.msgs, [b"new"])
    await again.msgs.flush()
    store = reopen(target, store)
    state = store.recover()
    assert state is not None
    [channel_state] = state.channels
    assert channel_state.subscriptions == []
    assert payload(channel_state.store.msgs, 1) == b"new"
    assert target.query("SELECT name FROM Channels") == [("foo",)]
    assert target.query("SELECT COUNT(*) FROM SubsPending") == [(0,)]
    store.close()


async def test_encryption_at_rest(target: Target) -> None:
    args = ("--encrypt", "--encryption_key", "secret")
    store = fresh(target, *args)
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"plain text payload", b""])
    await msgs.flush()
    [(data,), (empty,)] = target.query("SELECT data FROM Messages ORDER BY seq")
    stored = pb.MsgProto.FromString(bytes(data)).data
    assert b"plain text payload" not in bytes(data)
    assert stored[0] in (1, 2)  # cipher code
    assert pb.MsgProto.FromString(bytes(empty)).data == b""
    store = reopen(target, store, *args)
    state = store.recover()
    assert state is not None
    assert payload(state.channels[0].store.msgs, 1) == b"plain text payload"
    store.close()


async def test_caching_batches_pending_rows_in_reference_format(target: Target) -> None:
    store = fresh(target)
    channel = store.create_channel("foo")
    record = sub_record()
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1, 2, 3])
    await channel.subs.flush()
    channel.subs.record_ack(record.id, 2)
    channel.subs.record_sent(record.id, [4])
    await channel.subs.flush()
    rows = target.query(
        "SELECT {row}, seq, lastsent, pending, acks FROM SubsPending ORDER BY {row}"
    )
    decoded = [
        (row, seq, last, json.loads(bytes(p)) if p else None, json.loads(bytes(a)) if a else None)
        for row, seq, last, p, a in rows
    ]
    assert decoded == [(1, 0, 3, [1, 2, 3], None), (2, 0, 4, [4], [2])]
    channel.subs.record_ack(record.id, 1)
    channel.subs.record_ack(record.id, 3)
    await channel.subs.flush()
    # Row 1 is fully acknowledged: gone, and the ack in row 2 is no longer needed.
    assert [r[0] for r in target.query("SELECT {row} FROM SubsPending")] == [2]
    store.close()


async def test_write_through_rows(target: Target) -> None:
    store = fresh(target, "--sql_no_caching")
    channel = store.create_channel("foo")
    record = sub_record()
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1, 2])
    channel.subs.record_ack(record.id, 2)
    await channel.subs.flush()
    assert target.query("SELECT seq FROM SubsPending") == [(1,)]
    assert target.query("SELECT lastsent FROM Subscriptions") == [(2,)]
    store.close()


@pytest.mark.parametrize("first", ["caching", "write-through"])
async def test_switching_caching_mode_keeps_pending(target: Target, first: str) -> None:
    modes = {"caching": (), "write-through": ("--sql_no_caching",)}
    second = "write-through" if first == "caching" else "caching"
    store = fresh(target, *modes[first])
    channel = store.create_channel("foo")
    publish(channel.msgs, [b"m"] * 4)
    record = sub_record(durable="d")
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1, 2, 3])
    await channel.subs.flush()
    channel.subs.record_ack(record.id, 2)
    await channel.subs.flush()
    store = reopen(target, store, *modes[second])
    state = store.recover()
    assert state is not None
    [sub] = state.channels[0].subscriptions
    assert sub.pending == [1, 3]
    subs = state.channels[0].store.subs
    subs.record_ack(record.id, 1)
    subs.record_sent(record.id, [4])
    await subs.flush()
    store = reopen(target, store, *modes[first])
    state = store.recover()
    assert state is not None
    [sub] = state.channels[0].subscriptions
    assert (sub.pending, sub.record.last_sent) == ([3, 4], 4)
    store.close()


async def test_max_open_conns_one_shares_the_connection(target: Target) -> None:
    store = target.open("--sql_max_open_conns", "1")
    assert store.db.reader is store.db.writer
    store.recover()
    store.init(server_info())
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"a"])
    await msgs.flush()
    store = reopen(target, store, "--sql_max_open_conns", "1")
    state = store.recover()
    assert state is not None
    assert payload(state.channels[0].store.msgs, 1) == b"a"
    store.close()


async def test_acks_reach_the_table_within_a_second_without_a_flush(tmp_path: Path) -> None:
    target = Target("sqlite", str(tmp_path / "store.db"))  # the timer is the store's
    store = fresh(target)
    channel = store.create_channel("foo")
    record = sub_record()
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1, 2])
    await channel.subs.flush()
    channel.subs.record_ack(record.id, 1)
    channel.subs.record_ack(record.id, 2)
    await asyncio.sleep(SUB_FLUSH_INTERVAL + 0.3)
    assert target.query("SELECT COUNT(*) FROM SubsPending") == [(0,)]
    store.close()


async def test_connections_lost_to_a_database_restart_are_replaced(server_target: Target) -> None:
    target = server_target
    store = target.open("--sql_no_caching")  # look-ups read the table
    store.recover()
    store.init(server_info())
    msgs = store.create_channel("foo").msgs
    publish(msgs, [b"before"])
    await msgs.flush()
    assert payload(msgs, 1) == b"before"
    assert target.kill_connections() >= 2  # writer and reader (and the lock's)
    assert payload(msgs, 1) == b"before"
    publish(msgs, [b"after"])
    await msgs.flush()
    assert target.query("SELECT seq FROM Messages ORDER BY seq") == [(1,), (2,)]
    assert payload(msgs, 2) == b"after"
    assert "Unable to read" not in target.log.text()
    store.close()
