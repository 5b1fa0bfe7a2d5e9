"""subs.dat and clients.dat written by the FILE store: records, recovery, compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import TOO_MANY_SUBS, ClientRecord, StoreError, SubRecord
from stanpkg.stores.file.format import open_datastore, replay_clients, replay_subs
from stanpkg.stores.file.format.framing import RECORD_HEADER
from stanpkg.stores.file.subscriptions import update_payload
from tests.stores.file.helpers import T0, fresh_store, open_store, store_messages


def sub(client: str = "me", **kw: object) -> SubRecord:
    return SubRecord(client, "inbox", f"ack.{client}", 10, 30, **kw)  # type: ignore[arg-type]


def typed_records(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    assert data[:4] == b"\x01\x00\x00\x00"
    out, pos = [], 4
    while pos < len(data):
        first, _ = RECORD_HEADER.unpack_from(data, pos)
        size = first & 0xFFFFFF
        out.append((first >> 24, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    return out


# Every varint length's first and last value (the hand encoder unrolls 1 to 4 bytes).
_EDGES = [1, 127, 128, 300, 16383, 16384, 2**21 - 1, 2**21, 2**21 + 5, 2**28 - 1, 2**28]


@pytest.mark.parametrize("sub_id", [*_EDGES, 2**40])
@pytest.mark.parametrize("seq", [*_EDGES, 2**35, 2**64 - 1])
def test_update_payload_is_protobuf(sub_id: int, seq: int) -> None:
    expected = spb.SubStateUpdate(ID=sub_id, seqno=seq).SerializeToString()
    assert update_payload(sub_id, seq) == expected


@given(sub_id=st.integers(0, 2**64 - 1), seq=st.integers(0, 2**64 - 1))
def test_update_payload_is_protobuf_for_any_values(sub_id: int, seq: int) -> None:
    expected = spb.SubStateUpdate(ID=sub_id, seqno=seq).SerializeToString()
    assert update_payload(sub_id, seq) == expected


def test_subscription_records_and_recovery(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 5, timestamp=T0)
    durable = sub(durable_name="dur", is_durable=True)
    plain = sub("other")
    ch.subs.create(durable)
    ch.subs.create(plain)
    assert (durable.id, plain.id) == (1, 2)
    ch.subs.record_sent(1, [1, 2, 3])
    ch.subs.record_ack(1, 2)
    ch.subs.record_sent(2, [1])
    ch.subs.delete(2)
    durable.last_sent, durable.is_closed = 3, True
    ch.subs.update(durable)
    asyncio.run(ch.subs.flush())
    store.close()

    recs = typed_records(tmp_path / "foo" / "subs.dat")
    assert [t for t, _ in recs] == [1, 1, 5, 5, 5, 4, 5, 3, 2]
    assert recs[2][1] == spb.SubStateUpdate(ID=1, seqno=1).SerializeToString()
    assert spb.SubState.FromString(recs[0][1]) == spb.SubState(
        ID=1,
        clientID="me",
        inbox="inbox",
        ackInbox="ack.me",
        maxInFlight=10,
        ackWaitInSecs=30,
        durableName="dur",
        isDurable=True,
    )
    replay = replay_subs(str(tmp_path / "foo" / "subs.dat"))
    assert set(replay.subs) == {1} and replay.subs[1].pending == [1, 3]

    store, _ = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    (recovered,) = state.channels[0].subscriptions
    assert recovered.pending == [1, 3]
    assert recovered.record.durable_name == "dur" and recovered.record.is_closed
    assert recovered.record.last_sent == 3 and recovered.record.id == 1
    subs = state.channels[0].store.subs
    new = sub("third")
    subs.create(new)
    assert new.id == 3  # the deleted ID 2 is never reused
    store.close()


def test_acks_reach_the_file_in_their_order_at_every_write_point(tmp_path: Path) -> None:
    """Acks are framed in bulk: before the next record of any kind, and at write_out."""
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 300, timestamp=T0)
    ch.subs.create(sub("a"))
    ch.subs.create(sub("b"))
    ch.subs.record_sent(1, list(range(1, 201)))
    ch.subs.record_sent(2, [1, 2])
    for seq in range(1, 201):
        ch.subs.record_ack(1, seq)
    ch.subs.record_ack(2, 2)
    ch.subs.write_out()
    path = tmp_path / "foo" / "subs.dat"
    expected = [update_payload(1, seq) for seq in range(1, 201)] + [update_payload(2, 2)]
    assert [p for t, p in typed_records(path) if t == 4] == expected
    ch.subs.record_ack(2, 1)
    ch.subs.delete(2)  # the ack before the deletion, as they were recorded
    ch.subs.write_out()
    assert [t for t, _ in typed_records(path)][-2:] == [4, 3]
    store.close()
    replay = replay_subs(str(path))
    assert set(replay.subs) == {1} and replay.subs[1].pending == []


def test_max_subs(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--max_subs", "2")
    ch = store.create_channel("foo")
    ch.subs.create(sub("a"))
    second = sub("b")
    ch.subs.create(second)
    with pytest.raises(StoreError, match=TOO_MANY_SUBS):
        ch.subs.create(sub("c"))
    ch.subs.delete(second.id)
    ch.subs.create(sub("c"))
    store.close()


def test_subs_compaction(tmp_path: Path) -> None:
    args = ("--file_compact_min_size", "0", "--file_compact_interval", "1")
    store, _ = fresh_store(tmp_path, *args)
    ch = store.create_channel("foo")
    keep, gone = sub("keep"), sub("gone")
    ch.subs.create(keep)
    ch.subs.create(gone)
    ch.subs.record_sent(keep.id, [1, 2, 3, 4])
    ch.subs.record_sent(gone.id, [1, 2])
    path = tmp_path / "foo" / "subs.dat"
    for seq in (1, 2):
        ch.subs.record_ack(keep.id, seq)
    ch.subs.delete(gone.id)  # fragmentation now >= 50 %: rewritten
    asyncio.run(ch.subs.flush())
    recs = typed_records(path)
    assert [t for t, _ in recs] == [1, 5, 5]
    assert spb.SubState.FromString(recs[0][1]).lastSent == 4
    assert sorted(spb.SubStateUpdate.FromString(p).seqno for t, p in recs if t == 5) == [3, 4]
    ch.subs.record_ack(keep.id, 3)  # appends go to the new file
    store.close()
    replay = replay_subs(str(path))
    assert replay.subs[keep.id].pending == [4]
    assert not any(p.name.startswith("subs") for p in tmp_path.iterdir())  # no temp left


def test_subs_compaction_respects_interval_and_min_size(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)  # defaults: 1 MiB minimum
    ch = store.create_channel("foo")
    s = sub()
    ch.subs.create(s)
    ch.subs.record_sent(s.id, list(range(1, 101)))
    for seq in range(1, 101):
        ch.subs.record_ack(s.id, seq)
    store.close()
    assert len(typed_records(tmp_path / "foo" / "subs.dat")) == 201  # small: never compacted

    other = tmp_path / "interval"
    store, _ = fresh_store(other, "--file_compact_min_size", "0")  # interval 300 s
    ch = store.create_channel("foo")
    s = sub()
    ch.subs.create(s)
    for seq in range(1, 5):
        ch.subs.record_sent(s.id, [seq])
        ch.subs.record_ack(s.id, seq)  # compacts at the first ack (not delayed), then waits
    store.close()
    kinds = [t for t, _ in typed_records(other / "foo" / "subs.dat")]
    assert kinds == [1, 5, 4, 5, 4, 5, 4]


def test_clients_records_and_compaction(tmp_path: Path) -> None:
    args = ("--file_compact_min_size", "0")
    store, _ = fresh_store(tmp_path, *args)
    a = ClientRecord("a", "hb.a", b"conn-a", 1, 5, 3)
    b = ClientRecord("b", "hb.b")
    store.add_client(a)
    recs = typed_records(tmp_path / "clients.dat")
    assert recs == [
        (
            1,
            spb.ClientInfo(
                ID="a", HbInbox="hb.a", ConnID=b"conn-a", Protocol=1, PingInterval=5, PingMaxOut=3
            ).SerializeToString(),
        )
    ]
    store.add_client(b)
    store.delete_client("b")  # 1 delete / (1 + 1 live) = 50 %: compacted
    assert [t for t, _ in typed_records(tmp_path / "clients.dat")] == [1]
    store.add_client(b)
    store.delete_client("a")  # within compact_interval: appended
    store.close()
    assert [t for t, _ in typed_records(tmp_path / "clients.dat")] == [1, 1, 2]
    replay = replay_clients(str(tmp_path / "clients.dat"))
    assert list(replay.clients) == ["b"]
    store, _ = open_store(tmp_path)
    state = store.recover()
    assert state is not None and state.clients == [b]
    store.close()


def test_compaction_disabled(tmp_path: Path) -> None:
    args = ("--file_compact_enabled=false", "--file_compact_min_size", "0")
    store, _ = fresh_store(tmp_path, *args)
    store.add_client(ClientRecord("a", "hb"))
    store.delete_client("a")
    store.close()
    assert [t for t, _ in typed_records(tmp_path / "clients.dat")] == [1, 2]


def test_channel_deletion_removes_directory(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 2, timestamp=T0)
    store.delete_channel("foo")
    assert not (tmp_path / "foo").exists()
    again = store.create_channel("foo")
    assert again.msgs.last_sequence == 0
    store.close()
    assert open_datastore(tmp_path).channel("foo").last_seq == 0
