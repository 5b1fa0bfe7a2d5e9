"""Writers: byte-identical to the reference's files, and full round trips."""

from __future__ import annotations

import os
import pickle
import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, RecoveredSubscription, ServerInfo, SubRecord
from stanpkg.stores.crypto import CIPHER_AES, CIPHER_CHACHA, channel_cipher
from stanpkg.stores.file.format import (
    NO_LIMITS,
    ChannelWriter,
    ClientsFileWriter,
    CorruptedRecordError,
    IndexFileError,
    MessageSliceWriter,
    RecordScan,
    SliceLimits,
    SubsFileWriter,
    auto_slice_limits,
    compact_clients_file,
    compact_subs_file,
    crc32_func,
    discover_slices,
    open_datastore,
    read_server_file,
    replay_clients,
    replay_subs,
    write_server_file,
)
from stanpkg.stores.file.format.index import index_position, read_index_entry
from stanpkg.stores.file.format.subsfile import SUB_DELETE, SUB_NEW, SUB_SENT, SUB_UPDATE
from stanpkg.stores.record_protos import client_from_proto, sub_from_proto
from tests.stores.filestore_helpers import datastore_dir, message_record

CASTAGNOLI = 0x82F63B78


def _records(path: Path, typed: bool) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    return [
        (t, data[s : s + n]) for _, t, s, n in RecordScan(data, str(path), typed=typed, crc=None)
    ]


@pytest.mark.parametrize("name", ["plain", "aes", "chacha"])
def test_writers_reproduce_reference_files(name: str, tmp_path: Path) -> None:
    src = datastore_dir(name)
    # server.dat
    info = read_server_file(str(src / "server.dat"))
    assert info is not None
    write_server_file(str(tmp_path / "server.dat"), info)
    assert (tmp_path / "server.dat").read_bytes() == (src / "server.dat").read_bytes()
    # clients.dat, record by record through the typed writer API
    with ClientsFileWriter(str(tmp_path / "clients.dat")) as cw:
        for rec_type, payload in _records(src / "clients.dat", typed=True):
            if rec_type == 1:
                cw.add(client_from_proto(spb.ClientInfo.FromString(payload)))
            else:
                cw.delete(spb.ClientDelete.FromString(payload).ID)
    assert (tmp_path / "clients.dat").read_bytes() == (src / "clients.dat").read_bytes()
    for channel_dir in sorted(p for p in src.iterdir() if p.is_dir()):
        out = tmp_path / channel_dir.name
        out.mkdir()
        with SubsFileWriter(str(out / "subs.dat")) as sw:
            for rec_type, payload in _records(channel_dir / "subs.dat", typed=True):
                if rec_type in (SUB_NEW, SUB_UPDATE):
                    state = sub_from_proto(spb.SubState.FromString(payload))
                    (sw.new if rec_type == SUB_NEW else sw.update)(state)
                elif rec_type == SUB_DELETE:
                    sw.delete(spb.SubStateDelete.FromString(payload).ID)
                else:
                    upd = spb.SubStateUpdate.FromString(payload)
                    (sw.sent if rec_type == SUB_SENT else sw.acked)(upd.ID, upd.seqno)
        assert (out / "subs.dat").read_bytes() == (channel_dir / "subs.dat").read_bytes()
        for number in discover_slices(str(channel_dir)):
            writer = MessageSliceWriter(str(out), number, buffer_size=300)
            for _, payload in _records(channel_dir / f"msgs.{number}.dat", typed=False):
                msg = pb.MsgProto.FromString(payload)
                writer.append(msg.sequence, msg.timestamp, msg.SerializeToString())
            writer.close()
            for ext in ("dat", "idx"):
                f = f"msgs.{number}.{ext}"
                assert (out / f).read_bytes() == (channel_dir / f).read_bytes(), f


def _write_store(root: Path, *, key: bytes | None, cipher: int, poly: int | None = None) -> dict:
    """A datastore with several channels, slices, subs with acks, clients added/removed."""
    crc = crc32_func(poly) if poly else None
    root.mkdir()
    info = ServerInfo.for_cluster("rt", "_STAN.discover")
    write_server_file(str(root / "server.dat"), info, crc=crc)
    with ClientsFileWriter(str(root / "clients.dat"), crc=crc) as cw:
        for cid in ("a", "b", "c"):
            cw.add(ClientRecord(cid, f"hb.{cid}", conn_id=cid.encode(), protocol=1))
        cw.delete("b")
        cw.add(ClientRecord("b", "hb.b2", protocol=1, ping_interval=5))
        cw.delete("c")
    expected_msgs: dict[str, list[tuple[int, str, bytes, int]]] = {}
    plan = {"alpha": 11, "beta.x": 4, "empty": 0}
    for channel, n in plan.items():
        cipher_obj = channel_cipher(key, channel, cipher) if key else None
        with ChannelWriter(
            str(root / channel),
            channel,
            slice_limits=SliceLimits(max_msgs=3, max_bytes=0),
            crc=crc,
            buffer_size=64,
            cipher=cipher_obj,
        ) as w:
            msgs = []
            for seq in range(1, n + 1):
                data = b"" if seq == 2 else bytes([seq % 3]) + os.urandom(seq * 7)
                reply = f"r.{seq}" if seq % 2 else ""
                ts = 1_700_000_000_000_000_000 + seq * 1000
                w.append(seq, data, ts, reply=reply)
                msgs.append((seq, reply, data, ts))
                if seq % 4 == 0:
                    w.sync()
            expected_msgs[channel] = msgs
        with SubsFileWriter(str(root / channel / "subs.dat"), crc=crc, buffer_size=100) as sw:
            dur = SubRecord("a", "in.1", "ack.1", 5, 0, durable_name="d", is_durable=True, id=1)
            sw.new(dur)
            for seq in range(1, n + 1):
                sw.sent(1, seq)
            for seq in range(1, n + 1, 2):
                sw.acked(1, seq)
            dur.is_closed, dur.last_sent = True, n  # the server passes its last_sent
            sw.update(dur)
            sw.new(SubRecord("b", "in.2", "ack.2", 0, 0, qgroup="q", id=2))
            sw.sent(2, 1)
            sw.delete(2)
            sw.new(SubRecord("a", "in.3", "ack.3", 0, 0, id=3))
            sw.sent(99, 1)  # unknown ID: ignored
    return expected_msgs


@pytest.mark.parametrize(
    ("key", "cipher"), [(None, 0), (b"secret", CIPHER_AES), (b"secret", CIPHER_CHACHA)]
)
def test_round_trip(tmp_path: Path, key: bytes | None, cipher: int) -> None:
    root = tmp_path / "store"
    expected = _write_store(root, key=key, cipher=cipher)
    ds = open_datastore(root, encryption_key=key)
    assert ds.cluster_id == "rt" and ds.log == []
    assert {c: r.hb_inbox for c, r in ds.clients.items()} == {"a": "hb.a", "b": "hb.b2"}
    assert ds.clients["b"].ping_interval == 5 and ds.clients["a"].conn_id == b"a"
    for channel, msgs in expected.items():
        info = ds.channel(channel)
        got = [(m.sequence, m.reply, m.data, m.timestamp) for m in ds.iter_messages(channel)]
        assert got == msgs
        assert all(m.subject == channel for m in ds.iter_messages(channel))
        n = len(msgs)
        assert (info.first_seq, info.last_seq, info.msg_count) == ((1, n, n) if n else (0, 0, 0))
        assert [s.number for s in info.slices] == list(range(1, (n + 2) // 3 + 1))
        assert [s.count for s in info.slices] == [
            min(3, n - 3 * i) for i in range(len(info.slices))
        ]
        raw = open_datastore(root)  # without the key: payloads as stored
        assert info.total_bytes == sum(
            len(message_record(m)) + 40 for m in raw.iter_messages(channel)
        )
        subs = info.subscriptions
        assert sorted(subs) == [1, 3] and info.max_sub_id == 3
        assert subs[1].record.is_closed and subs[1].record.durable_name == "d"
        assert subs[1].pending == list(range(2, n + 1, 2))
        assert subs[1].record.last_sent == n
        assert subs[3].pending == [] and subs[3].record.last_sent == 0
        for seq, reply, data, ts in msgs:
            m = ds.get_message(channel, seq)
            assert m is not None and (m.reply, m.data, m.timestamp) == (reply, data, ts)


def test_byte_layout(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write_store(root, key=None, cipher=0)
    for path in root.rglob("*"):
        if path.is_file():
            assert path.read_bytes()[:4] == b"\x01\x00\x00\x00", path
    server = (root / "server.dat").read_bytes()
    size, crc = struct.unpack_from("<II", server, 4)
    assert len(server) == 12 + size and crc == zlib.crc32(server[12:])
    clients = (root / "clients.dat").read_bytes()
    first, crc = struct.unpack_from("<II", clients, 4)
    assert first >> 24 == 1 and clients[7] == 1  # type in the high byte (byte 3 on disk)
    assert crc == zlib.crc32(clients[12 : 12 + (first & 0xFFFFFF)])
    dat = (root / "alpha" / "msgs.2.dat").read_bytes()
    idx = (root / "alpha" / "msgs.2.idx").read_bytes()
    assert len(idx) == 4 + 3 * 32
    offset = 4
    for i in range(3):
        seq, off, ts, size, crc = struct.unpack_from("<QQqII", idx, 4 + 32 * i)
        assert (seq, off) == (4 + i, offset)
        assert crc == zlib.crc32(idx[4 + 32 * i : 4 + 32 * i + 28])
        rec_size, rec_crc = struct.unpack_from("<II", dat, off)
        assert rec_size == size and rec_crc == zlib.crc32(dat[off + 8 : off + 8 + size])
        msg = pb.MsgProto.FromString(dat[off + 8 : off + 8 + size])
        assert (msg.sequence, msg.timestamp) == (seq, ts)
        offset += 8 + size
    assert offset == len(dat)


def test_resume_appends_and_rolls(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write_store(root, key=None, cipher=0)
    ds = open_datastore(root)
    last = ds.slices("alpha")[-1]
    assert (last.number, last.count) == (4, 2)
    with ChannelWriter(
        str(root / "alpha"), "alpha", slice_limits=SliceLimits(max_msgs=3), last_slice=last
    ) as w:
        for seq in (12, 13):
            w.append(seq, b"more", 1_800_000_000_000_000_000 + seq)
    again = open_datastore(root)
    assert [(s.number, s.first_seq, s.last_seq) for s in again.slices("alpha")][-2:] == [
        (4, 10, 12),
        (5, 13, 13),
    ]
    assert [m.sequence for m in again.iter_messages("alpha", 11)] == [11, 12, 13]


def test_custom_crc_polynomial(tmp_path: Path) -> None:
    root = tmp_path / "store"
    expected = _write_store(root, key=None, cipher=0, poly=CASTAGNOLI)
    ds = open_datastore(root, crc_poly=CASTAGNOLI)
    assert [m.data for m in ds.iter_messages("alpha")] == [d for _, _, d, _ in expected["alpha"]]
    with pytest.raises(CorruptedRecordError):
        open_datastore(root)  # the polynomial is not recorded: IEEE readers reject the data
    nocheck = open_datastore(root, do_crc=False)
    assert nocheck.cluster_id == "rt"


def test_crc_table_matches_references() -> None:
    assert crc32_func(CASTAGNOLI)(b"123456789") == 0xE3069283
    table_ieee = type(crc32_func(CASTAGNOLI))(0xEDB88320)
    assert table_ieee(b"123456789") == zlib.crc32(b"123456789") == 0xCBF43926
    assert crc32_func()(b"123456789") == 0xCBF43926  # IEEE: ISA-L's or zlib's, in C


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_table_crc_equals_zlib(data: bytes) -> None:
    table_ieee = type(crc32_func(CASTAGNOLI))(0xEDB88320)
    assert table_ieee(data) == zlib.crc32(data)


def test_compaction_keeps_state(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write_store(root, key=None, cipher=0)
    before_clients = replay_clients(str(root / "clients.dat")).clients
    size = compact_clients_file(str(root), before_clients.values())
    after = replay_clients(str(root / "clients.dat"))
    assert after.clients == before_clients and after.delete_records == 0
    assert after.records_size == size
    before_subs = replay_subs(str(root / "alpha" / "subs.dat"))
    compact_subs_file(str(root), "alpha", before_subs.subs.values())
    after_subs = replay_subs(str(root / "alpha" / "subs.dat"))
    assert after_subs.subs == before_subs.subs
    assert after_subs.del_recs == 0
    assert not [
        p
        for p in root.iterdir()
        if p.name.startswith(("subs", "clients.dat")) and p.is_file() and p.name != "clients.dat"
    ]
    assert isinstance(next(iter(after_subs.subs.values())), RecoveredSubscription)


def test_subs_bookkeeping(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write_store(root, key=None, cipher=0)
    rep = replay_subs(str(root / "alpha" / "subs.dat"))
    # numRecs: 3 new + 1 update + 12 sent (11 + 1 on sub 2)
    # delRecs: 6 acks + 1 update + 1 delete + 1 pending of the deleted sub
    assert (rep.num_recs, rep.del_recs, rep.max_sub_id) == (16, 9, 3)
    assert rep.records_size == (root / "alpha" / "subs.dat").stat().st_size - 4


def test_auto_slice_limits() -> None:
    none = SliceLimits(max_msgs=0, max_bytes=0, max_age_ns=0)
    channel = replace(NO_LIMITS, max_msgs=8, max_bytes=3, max_age=2 * 10**9)
    got = auto_slice_limits(none, channel)
    assert got == SliceLimits(max_msgs=2, max_bytes=1, max_age_ns=10**9)
    assert auto_slice_limits(SliceLimits(), replace(NO_LIMITS, max_msgs=8)) == SliceLimits()
    assert not auto_slice_limits(none, NO_LIMITS).has_limits


def test_slices_are_ordered_numerically(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    write_server_file(str(root / "server.dat"), ServerInfo.for_cluster("n", "_STAN.discover"))
    with ChannelWriter(str(root / "c"), "c", slice_limits=SliceLimits(max_msgs=1)) as w:
        for seq in range(1, 13):
            w.append(seq, b"%d" % seq, seq)
    assert discover_slices(str(root / "c")) == list(range(1, 13))
    ds = open_datastore(root)
    assert [s.number for s in ds.slices("c")] == list(range(1, 13))
    assert [m.data for m in ds.iter_messages("c", 9, 11)] == [b"9", b"10", b"11"]
    assert [m.slice for m in ds.iter_messages("c", 9, 11)] == [9, 10, 11]


def test_slice_reader_is_picklable(tmp_path: Path) -> None:
    """What a Spark driver ships to executors: the reader config + SliceInfo objects."""
    root = tmp_path / "store"
    _write_store(root, key=b"secret", cipher=CIPHER_AES)
    ds = open_datastore(root, encryption_key=b"secret")
    reader, slices = pickle.loads(pickle.dumps((ds.reader, ds.slices("alpha"))))
    remote = [m for sl in slices for m in reader.iter_messages(sl)]
    assert remote == list(ds.iter_messages("alpha"))
    sl = slices[1]
    assert reader.read_message(sl, sl.first_seq) == ds.get_message("alpha", sl.first_seq)
    assert reader.read_message(sl, sl.last_seq + 1) is None


def test_single_index_entry(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _write_store(root, key=None, cipher=0)
    sl = open_datastore(root).slices("alpha")[1]
    idx = Path(sl.idx_path).read_bytes()
    entry = read_index_entry(idx, index_position(1), sl.idx_path, zlib.crc32)
    msg = open_datastore(root).get_message("alpha", sl.first_seq + 1)
    assert msg is not None and (entry.seq, entry.offset) == (msg.sequence, msg.offset)
    assert entry.timestamp == msg.timestamp
    with pytest.raises(IndexFileError):
        read_index_entry(idx[:-1], index_position(2), sl.idx_path, None)
