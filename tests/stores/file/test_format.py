"""What the FILE store writes is the Go server's format.

The Go binary is not available here, so "the Go server can read it" is established by:
byte-level invariants checked by an independent parser below (version headers, record
framing, CRCs, 32-byte index records), reading everything back with ``open_datastore``,
and byte equality with the codec's writers, whose output is tested byte-identical to
datastores written by the reference (tests/stores/test_writers.py).
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, MessageBatch, SubRecord
from stanpkg.stores.file.format import ChannelWriter, SliceLimits, open_datastore
from tests.stores.file.helpers import T0, fresh_store, open_store, payload, store_messages
from tests.stores.file.test_recovery import fixture_store
from tests.stores.filestore_helpers import message_record

V1 = b"\x01\x00\x00\x00"


def check_untyped(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == V1, path
    out, pos = [], 4
    while pos < len(data):
        size, crc = struct.unpack_from("<II", data, pos)
        payload = data[pos + 8 : pos + 8 + size]
        assert len(payload) == size and zlib.crc32(payload) == crc, (path, pos)
        out.append(payload)
        pos += 8 + size
    return out


def check_typed(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    assert data[:4] == V1, path
    out, pos = [], 4
    while pos < len(data):
        first, crc = struct.unpack_from("<II", data, pos)
        size = first & 0xFFFFFF
        payload = data[pos + 8 : pos + 8 + size]
        assert len(payload) == size and zlib.crc32(payload) == crc, (path, pos)
        out.append((first >> 24, payload))
        pos += 8 + size
    return out


def check_slice(dat: Path, idx: Path) -> list[int]:
    data = dat.read_bytes()
    index = idx.read_bytes()
    assert index[:4] == V1 and (len(index) - 4) % 32 == 0
    payloads = check_untyped(dat)
    seqs = []
    expected_offset = 4
    for i in range(len(payloads)):
        rec = index[4 + 32 * i : 36 + 32 * i]
        seq, offset, stamp, size, crc = struct.unpack("<QQqII", rec)
        assert zlib.crc32(rec[:28]) == crc
        assert offset == expected_offset and size == len(payloads[i])
        msg = pb.MsgProto.FromString(data[offset + 8 : offset + 8 + size])
        assert (msg.sequence, msg.timestamp) == (seq, stamp)
        assert msg.SerializeToString() == payloads[i]  # canonical protobuf encoding
        seqs.append(seq)
        expected_offset += 8 + size
    assert len(index) == 4 + 32 * len(payloads)
    return seqs


def write_varied_store(root: Path, *args: str) -> dict[str, list[bytes]]:
    store, _ = fresh_store(root, "--file_slice_max_msgs", "3", *args)
    store.add_client(ClientRecord("c1", "hb1", b"conn", 1, 5, 3))
    store.add_client(ClientRecord("c2", "hb2"))
    store.delete_client("c2")
    written = {}
    for name in ("alpha", "beta.gamma"):
        ch = store.create_channel(name)
        messages = [("", payload(seq)) for seq in range(1, 8)]
        messages[2] = ("r", b"")  # a reply, no data
        ch.msgs.store(MessageBatch(T0 + 4, messages[:4]))  # two publish batches
        ch.msgs.store(MessageBatch(T0 + 7, messages[4:]))
        recs = [
            pb.MsgProto(
                sequence=seq, subject=name, reply=reply, data=data, timestamp=T0 + stamp
            ).SerializeToString()
            for seq, (reply, data) in enumerate(messages, 1)
            for stamp in [4 if seq <= 4 else 7]
        ]
        sub = SubRecord("c1", "in", "ack", 5, 30, durable_name="d", is_durable=True)
        ch.subs.create(sub)
        ch.subs.record_sent(sub.id, [1, 2, 3])
        ch.subs.record_ack(sub.id, 2)
        asyncio.run(ch.subs.flush())
        written[name] = recs
    store.close()
    return written


def test_layout_and_framing(tmp_path: Path) -> None:
    written = write_varied_store(tmp_path)
    (server,) = check_untyped(tmp_path / "server.dat")
    assert (tmp_path / "server.dat").stat().st_size == 12 + len(server)
    assert spb.ServerInfo.FromString(server).ClusterID == "test"
    clients = check_typed(tmp_path / "clients.dat")
    assert [t for t, _ in clients] == [1, 1, 2]
    for name in written:
        ch = tmp_path / name
        assert sorted(p.name for p in ch.iterdir()) == [
            "msgs.1.dat",
            "msgs.1.idx",
            "msgs.2.dat",
            "msgs.2.idx",
            "msgs.3.dat",
            "msgs.3.idx",
            "subs.dat",
        ]
        seqs = [
            s for n in (1, 2, 3) for s in check_slice(ch / f"msgs.{n}.dat", ch / f"msgs.{n}.idx")
        ]
        assert seqs == list(range(1, 8))
        assert [t for t, _ in check_typed(ch / "subs.dat")] == [1, 5, 5, 5, 4]
    ds = open_datastore(tmp_path)
    assert set(ds.clients) == {"c1"} and ds.cluster_id == "test"
    for name, recs in written.items():
        got = [m for m in ds.iter_messages(name)]
        assert [message_record(m) for m in got] == recs
        sub = ds.channel(name).subscriptions[1]
        assert sub.pending == [1, 3]
        assert sub.record.durable_name == "d" and sub.record.last_sent == 3


def test_message_files_equal_the_codec_writer(tmp_path: Path) -> None:
    written = write_varied_store(tmp_path / "store")
    ref = tmp_path / "ref"
    with ChannelWriter(str(ref), "alpha", slice_limits=SliceLimits(max_msgs=3)) as writer:
        for rec in written["alpha"]:
            msg = pb.MsgProto.FromString(rec)
            writer.append_record(msg.sequence, msg.timestamp, rec)
    for n in (1, 2, 3):
        for ext in ("dat", "idx"):
            name = f"msgs.{n}.{ext}"
            assert (tmp_path / "store" / "alpha" / name).read_bytes() == (ref / name).read_bytes()


def test_appending_to_a_reference_datastore(tmp_path: Path) -> None:
    store, _, root, _ = fixture_store("plain", tmp_path)
    state = store.recover()
    assert state is not None
    ch = next(c for c in state.channels if c.store.name == "audit.trail")
    last = ch.store.msgs.last_sequence
    store_messages(ch.store.msgs, "audit.trail", last + 1, 5)
    store.close()
    chdir = root / "audit.trail"
    for dat in sorted(chdir.glob("msgs.*.dat")):
        check_slice(dat, dat.with_suffix(".idx"))
    ds = open_datastore(root)
    assert [msg.sequence for msg in ds.iter_messages("audit.trail")] == list(range(1, last + 6))
    # and reopening gives the reference's messages plus ours
    store, _ = open_store(root, "--file_slice_max_msgs", "4")
    state = store.recover()
    assert state is not None
    msgs = next(c for c in state.channels if c.store.name == "audit.trail").store.msgs
    assert msgs.last_sequence == last + 5 and msgs.lookup(1) is not None
    store.close()


def test_index_summary_both_column_paths(monkeypatch: object) -> None:
    """summarize_index reads columns in place on little-endian hosts; the portable path
    must give the same answers (zero tail, gaps, CRC errors)."""
    import pytest

    from stanpkg.stores.file.format import index as index_module
    from stanpkg.stores.file.format.errors import IndexFileError
    from stanpkg.stores.file.format.framing import crc32_func

    crc = crc32_func()
    body = b"".join(
        index_module.encode_index_record(seq, 4 + 50 * i, T0 + seq, 42, crc)
        for i, seq in enumerate([5, 6, 7, 9])
    )
    image = V1 + body + bytes(64)  # zero tail
    corrupt = bytearray(V1 + body)
    corrupt[4 + 32 + 3] ^= 1
    results = []
    for order in ("little", "big"):
        monkeypatch.setattr(index_module.sys, "byteorder", order)  # type: ignore[attr-defined]
        summary = index_module.summarize_index(image, "x.idx", crc)
        with pytest.raises(IndexFileError) as err:
            index_module.summarize_index(bytes(corrupt), "x.idx", crc)
        results.append((summary, err.value.offset))
    assert results[0] == results[1]
    summary, offset = results[0]
    assert (summary.count, summary.first_seq, summary.last_seq) == (4, 5, 9)
    assert summary.zero_tail_at == 4 + 4 * 32 and not summary.contiguous and offset == 36
    assert summary.total_bytes == 4 * (42 + 40)


def test_ieee_crc_is_isal_where_installed_and_zlib_otherwise() -> None:
    """The default polynomial's CRC is ISA-L's when the crc extra is installed (as for
    the tests), zlib's otherwise, and the two agree on every input form the store hands
    over: bytes, bytearray, memoryview slices (mmap'ed files), empty."""
    import os
    import subprocess
    import sys

    from stanpkg.stores.file.format.framing import crc32_func

    crc = crc32_func()
    assert crc.__module__ == "isal.isal_zlib"
    for size in (0, 1, 7, 24, 150, 1100, 65536):
        data = os.urandom(size)
        view = memoryview(b"xx" + data + b"yy")[2 : 2 + size]
        assert crc(data) == crc(bytearray(data)) == crc(view) == zlib.crc32(data), size
    without = "import sys; sys.modules['isal'] = None\n" + (
        "import zlib; from stanpkg.stores.file.format.framing import crc32_func\n"
        "assert crc32_func() is zlib.crc32"
    )
    subprocess.run([sys.executable, "-c", without], check=True, timeout=60)
