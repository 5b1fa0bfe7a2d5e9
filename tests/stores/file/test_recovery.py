"""Recovery by the FILE store: the reference's datastores whole, damaged files, the
truncate_bad_eof flag, the empty server.dat fix, parallel recovery and its progress log."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import RecoveredState, StoreError, SubRecord
from stanpkg.stores.file import FileStore, config_from_plan
from stanpkg.stores.file.format import open_datastore
from tests.stores.file.helpers import (
    T0,
    LogCapture,
    config_for,
    encrypting,
    fresh_store,
    open_store,
    records,
    server_info,
    store_messages,
)
from tests.stores.filestore_helpers import copy_datastore, manifest

FIXTURES = ("plain", "aes", "chacha", "expired")


def fixture_store(
    name: str, tmp_path: Path, *extra: str
) -> tuple[FileStore, LogCapture, Path, dict[str, Any]]:
    """A FileStore on a copy of a reference datastore, with its production config."""
    from stanpkg.plan.compile import compile_args

    m = manifest(name)
    root = copy_datastore(name, tmp_path)
    conf = tmp_path / "stan.conf"
    conf.write_text(m["production"]["server_config"].replace("{DATASTORE}", str(root)))
    compiled = compile_args(["-sc", str(conf), *extra], env={})
    assert compiled.plan is not None, compiled.diagnostics
    log = LogCapture()
    store = FileStore(config_from_plan(compiled.plan), log)
    return encrypting(store, compiled.plan, log), log, root, m


def delivered(state: RecoveredState) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for ch in state.channels:
        msgs = ch.store.msgs
        seen = []
        for seq in range(msgs.first_sequence, msgs.last_sequence + 1):
            raw = msgs.lookup(seq)
            assert raw is not None, (ch.store.name, seq)
            m = pb.MsgProto.FromString(raw)
            seen.append(
                {
                    "sequence": m.sequence,
                    "subject": m.subject,
                    "reply": m.reply,
                    "data_b64": base64.b64encode(m.data).decode(),
                    "data_len": len(m.data),
                    "timestamp_ns": str(m.timestamp),
                    "redelivered": m.redelivered,
                }
            )
        out[ch.store.name] = seen
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_reference_datastore_recovers_whole(name: str, tmp_path: Path) -> None:
    store, log, _, m = fixture_store(name, tmp_path)
    state = store.recover()
    assert state is not None
    expected = m["expected"]
    assert state.info.cluster_id == m["cluster_id"]
    assert sorted(c.id for c in state.clients) == sorted(c["id"] for c in expected["clients"])
    hb = {c["id"]: c["hb_inbox"] for c in expected["clients"]}
    assert {c.id: c.hb_inbox for c in state.clients} == hb
    by_name = {c["name"]: c for c in expected["channels"]}
    assert sorted(ch.store.name for ch in state.channels) == sorted(by_name)
    for ch in state.channels:
        want = by_name[ch.store.name]
        msgs = ch.store.msgs
        got = (msgs.first_sequence, msgs.last_sequence, *msgs.state())
        assert got == (want["first_seq"], want["last_seq"], want["msgs"], want["bytes"])
        subs = {
            (s.record.client_id, s.record.durable_name, s.record.qgroup): s
            for s in ch.subscriptions
        }
        for sub in want["subscriptions"]:
            key = (sub["client_id"], sub.get("durable_name", ""), sub.get("queue_name", ""))
            rec = subs.pop(key)
            assert rec.record.inbox == sub["inbox"] and rec.record.ack_inbox == sub["ack_inbox"]
            assert rec.record.last_sent == sub["last_sent"]
            assert len(rec.pending) == sub["pending_count"]
            assert rec.record.max_inflight == sub["max_inflight"]
            assert rec.record.ack_wait_secs == sub["ack_wait"]
        # What the monitoring does not list: closed durables are still recovered as such.
        assert all(s.record.durable_name and s.record.is_closed for s in subs.values()), subs
    assert delivered(state) == expected["messages"]
    assert [t for lv, t in log.lines if lv != "INF"] == []
    store.close()


def test_truncated_datastore_without_option(tmp_path: Path) -> None:
    store, log, root, m = fixture_store("truncated", tmp_path)
    with pytest.raises(StoreError) as err:
        store.recover()
    store.close()
    cut = m["cut"]
    text = str(err.value)
    assert text.startswith(
        'unable to recover message store for [ticks.cpu](file: "ticks.cpu/msgs.2.idx"): '
        "unexpected EOF"
    )
    assert f'file "{root / cut["file"]}", offset {cut["cut_record"]["record_offset"]}' in text
    reference = [
        line.split("STREAM: ", 1)[1].replace("{DATASTORE}", str(root))
        for line in m["start_without_option"]["log"]
        if line.startswith("[ERR] STREAM: ")
    ]
    assert log.texts("ERR") == reference


def test_truncated_datastore_with_option_then_guard(tmp_path: Path) -> None:
    store, log, root, m = fixture_store("truncated", tmp_path, "--file_truncate_bad_eof")
    state = store.recover()
    assert state is not None
    assert delivered(state) == m["expected"]["messages"]
    reference = [
        (line[1:4], line.split("STREAM: ", 1)[1].replace("{DATASTORE}", str(root)))
        for line in m["expected"]["recovery_log"]
        if "STREAM: " in line
    ]
    start = next(i for i, (_, t) in enumerate(reference) if t.startswith("Verification"))
    end = next(i for i, (_, t) in enumerate(reference) if t == "Recovery resumes...")
    assert log.lines == reference[start : end + 1]
    store.close()
    after = {f["path"]: f["sha256"] for f in m["expected"]["files_after_recovery"]["files"]}
    for rel in ("ticks.cpu/msgs.2.dat", "ticks.cpu/msgs.2.idx", ".truncate.lck"):
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == after[rel], rel
    # the same copy, again with the option: refused; then without: fine, witness gone
    with pytest.raises(StoreError, match="should not be opened consecutively"):
        open_store(root, "--file_truncate_bad_eof")
    store, _ = open_store(root, "--file_slice_max_msgs", "4")
    assert not (root / ".truncate.lck").exists()
    state = store.recover()
    assert state is not None and delivered(state) == m["expected"]["messages"]
    store.close()


def make_store(root: Path, channels: int = 1, count: int = 5, *args: str) -> list[bytes]:
    store, _ = fresh_store(root, "--file_slice_max_msgs", "3", *args)
    recs: list[bytes] = []
    for c in range(channels):
        ch = store.create_channel(f"ch{c}")
        recs = store_messages(ch.msgs, f"ch{c}", 1, count)  # one batch each: T0 + seq
        ch.subs.create(SubRecord("me", "inbox", "ack", 10, 30, durable_name="d", is_durable=True))
        ch.subs.record_sent(1, list(range(1, count + 1)))
    store.close()
    return recs


def recover_error(root: Path, *args: str) -> tuple[str, LogCapture]:
    store, log = open_store(root, *args)
    try:
        with pytest.raises(StoreError) as err:
            store.recover()
    finally:
        store.close()
    return str(err.value), log


class _Killed(BaseException):
    """The process dying at this point (nothing after it runs)."""


def test_a_kill_while_a_slice_is_created_leaves_no_empty_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new slice file appears with its version header or not at all: a zero-length one
    (left by a kill between the create and the header's write, as a CI run's SIGKILL test
    hit) would stop the next start with "unable to verify file version: EOF"."""
    from stanpkg.stores.file.format import appender

    make_store(tmp_path)  # slices 1 (1-3) and 2 (4-5) of at most 3 messages
    store, _ = open_store(tmp_path, "--file_slice_max_msgs", "3")
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    store_messages(msgs, "ch0", 6, 1)  # slice 2 is full now
    real_write = appender.write_all

    def dying(fd: int, data: bytes) -> None:
        raise _Killed

    monkeypatch.setattr(appender, "write_all", dying)
    with pytest.raises(_Killed):  # slice 3 is created for message 7, and the process dies
        store_messages(msgs, "ch0", 7, 1)
    monkeypatch.setattr(appender, "write_all", real_write)
    store._lock.release()  # the kernel's part of the process's death
    channel_dir = tmp_path / "ch0"
    assert not (channel_dir / "msgs.3.dat").exists()
    assert (channel_dir / ".msgs.3.dat.new").exists()  # the leftover, ignored
    store2, _ = open_store(tmp_path, "--file_slice_max_msgs", "3")
    state = store2.recover()
    assert state is not None
    again = state.channels[0].store.msgs
    assert again.last_sequence in (5, 6)  # 6 was buffered, not flushed, when it died
    last = again.last_sequence
    store_messages(again, "ch0", last + 1, 2)
    store2.close()
    store3, _ = open_store(tmp_path, "--file_slice_max_msgs", "3")
    state = store3.recover()
    assert state is not None and state.channels[0].store.msgs.last_sequence == last + 2
    assert (channel_dir / "msgs.3.dat").read_bytes()[:4] == b"\x01\x00\x00\x00"
    store3.close()


def test_cut_data_record_names_file_and_offset(tmp_path: Path) -> None:
    recs = make_store(tmp_path)
    dat = tmp_path / "ch0" / "msgs.2.dat"  # holds 4 and 5
    size = dat.stat().st_size
    os.truncate(dat, size - 3)
    offset = size - (8 + len(recs[4]))
    text, log = recover_error(tmp_path)
    assert f'unexpected EOF (file "{dat}", offset {offset})' in text
    restart = "Restart with the ContinueOnUnexpectedEOF flag to truncate this file to this offset"
    assert log.has(f"{restart}: {offset}.")
    store, log = open_store(tmp_path, "--file_truncate_bad_eof")
    state = store.recover()
    assert state is not None and state.channels[0].store.msgs.last_sequence == 4
    assert log.has(f'File "{dat}" has been truncated to offset: {offset}')
    store.close()


@pytest.mark.parametrize(
    ("rel", "wrapper"),
    [
        ("ch0/msgs.1.dat", "unable to recover message store for [ch0]"),
        ("ch0/subs.dat", "unable to recover subscription store for [ch0]"),
        ("clients.dat", "unable to recover client file"),
        ("server.dat", "unable to recover server file"),
    ],
)
def test_zero_length_and_wrong_version_files(tmp_path: Path, rel: str, wrapper: str) -> None:
    make_store(tmp_path)
    path = tmp_path / rel
    original = path.read_bytes()
    path.write_bytes(b"")
    text, _ = recover_error(tmp_path)
    assert text.startswith(wrapper)
    assert f'unable to verify file version: EOF (file "{path}", offset 0)' in text
    path.write_bytes(b"\x02\x00\x00\x00" + original[4:])
    text, _ = recover_error(tmp_path)
    assert f'unsupported file version: 2 (supports [1..1]) (file "{path}", offset 0)' in text


def test_bit_flips(tmp_path: Path) -> None:
    recs = make_store(tmp_path, count=6)
    # last record of the write slice: the index verification fails, the data scan finds it
    dat = tmp_path / "ch0" / "msgs.2.dat"
    data = bytearray(dat.read_bytes())
    data[-1] ^= 0x40
    dat.write_bytes(bytes(data))
    offset = len(data) - 8 - len(recs[5])
    text, log = recover_error(tmp_path)
    assert "corrupted data, expected crc to be" in text
    assert f'(file "{dat}", offset {offset})' in text
    assert log.has(f'Corrupted record in file "{dat}": corrupted data')
    data[-1] ^= 0x40
    dat.write_bytes(bytes(data))
    # a record in the middle: found when read (the reference does not scan it at start)
    first = tmp_path / "ch0" / "msgs.1.dat"
    data = bytearray(first.read_bytes())
    data[4 + 8 + 3] ^= 0x01
    first.write_bytes(bytes(data))
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert msgs.lookup(1) is None and msgs.lookup(2) == recs[1]
    assert log.has("Error looking up message ch0:1 (corrupted data, expected crc to be")
    assert log.has(f'(file "{first}", offset 4)')
    store.close()
    # subs.dat: fatal, with the dump
    subs = tmp_path / "ch0" / "subs.dat"
    data = bytearray(subs.read_bytes())
    data[-1] ^= 0x01
    subs.write_bytes(bytes(data))
    text, log = recover_error(tmp_path)
    assert text.startswith("unable to recover subscription store for [ch0]: corrupted data")
    assert log.has("Record header:")


def test_index_damage_is_rebuilt(tmp_path: Path) -> None:
    recs = make_store(tmp_path)
    idx = tmp_path / "ch0" / "msgs.1.idx"
    data = bytearray(idx.read_bytes())
    data[10] ^= 0xFF
    idx.write_bytes(bytes(data))
    (tmp_path / "ch0" / "msgs.2.idx").unlink()
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert [msgs.lookup(s) for s in range(1, 6)] == recs
    assert log.has(f'Error with index file "{idx}"')
    store.close()
    assert open_datastore(tmp_path).channel("ch0").slices[0].index_usable


def test_record_cut_short_after_the_index_is_dropped(tmp_path: Path) -> None:
    make_store(tmp_path)
    dat = tmp_path / "ch0" / "msgs.2.dat"
    good = dat.stat().st_size
    with open(dat, "ab") as f:  # a record whose write was cut short (crash): never acked
        f.write(b"\x20\x00\x00\x00\x00\x00\x00\x00" + b"\x08\x06" + b"x" * 10)
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    assert log.has(f'File "{dat}" held 20 bytes after its last complete message')
    assert dat.stat().st_size == good
    msgs = state.channels[0].store.msgs
    store_messages(msgs, "ch0", 6, 1)
    store.close()
    ds = open_datastore(tmp_path)
    assert [m.sequence for m in ds.iter_messages("ch0")] == [1, 2, 3, 4, 5, 6]


def test_whole_records_after_the_index_are_indexed_again(tmp_path: Path) -> None:
    recs = make_store(tmp_path)  # slices of 3: msgs.1 (1-3), msgs.2 (4-5)
    idx = tmp_path / "ch0" / "msgs.2.idx"
    idx.write_bytes(idx.read_bytes()[:-32])  # lost its last entry
    dat = tmp_path / "ch0" / "msgs.2.dat"
    size = dat.stat().st_size
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert [msgs.lookup(s) for s in range(1, 6)] == recs
    assert log.has(f'Error with index file "{idx}": the data file holds 1 message(s)')
    store.close()
    assert dat.stat().st_size == size and idx.stat().st_size == 4 + 2 * 32


def test_damaged_record_after_the_index_is_refused_and_kept(tmp_path: Path) -> None:
    make_store(tmp_path)
    idx = tmp_path / "ch0" / "msgs.2.idx"
    idx.write_bytes(idx.read_bytes()[:-32])
    dat = tmp_path / "ch0" / "msgs.2.dat"
    data = bytearray(dat.read_bytes())
    data[-1] ^= 0x01  # the unindexed record now fails its CRC
    dat.write_bytes(bytes(data))
    text, _ = recover_error(tmp_path)
    assert "corrupted data, expected crc to be" in text and f'file "{dat}"' in text
    assert dat.read_bytes() == bytes(data)


def test_empty_server_file_with_channels_is_recovered(tmp_path: Path) -> None:
    recs = make_store(tmp_path)
    os.truncate(tmp_path / "server.dat", 4)  # a crash between truncate and write
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    assert log.has("Server information was not recovered, however channels are present.")
    assert state.info.cluster_id == "test" and state.info.publish == "_STAN.pub.test"
    msgs = state.channels[0].store.msgs
    assert msgs.last_sequence == 5 and msgs.lookup(5) == recs[4]
    store.close()
    assert open_datastore(tmp_path).cluster_id == "test"


@pytest.mark.parametrize("processes", [False, True])
def test_parallel_recovery_and_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: bool
) -> None:
    from stanpkg.stores.file import recovery
    from stanpkg.stores.file import store as store_module

    make_store(tmp_path, channels=6, count=7)
    monkeypatch.setattr(store_module, "SUMMARY_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(recovery, "PROGRESS_INTERVAL", 0.0)
    if processes:
        monkeypatch.setattr(recovery, "PROCESS_THRESHOLD", 0)
    store, log = open_store(tmp_path, "--file_parallel_recovery", "3")
    state = store.recover()
    assert state is not None
    assert [ch.store.name for ch in state.channels] == [f"ch{i}" for i in range(6)]
    for ch in state.channels:
        assert ch.store.msgs.state()[0] == 7 and len(ch.subscriptions) == 1
        assert ch.subscriptions[0].pending == list(range(1, 8))
    assert any(t.startswith("Recovery in progress: ") for t in log.texts("INF"))
    assert any(
        t.startswith("Recovered 42 messages of 6 channel(s) in ") and t.endswith("msgs/s)")
        for t in log.texts("INF")
    )
    store.close()


def test_parallel_recovery_stops_at_first_error(tmp_path: Path) -> None:
    make_store(tmp_path, channels=4)
    (tmp_path / "ch2" / "msgs.1.dat").write_bytes(b"")
    text, _ = recover_error(tmp_path, "--file_parallel_recovery", "4")
    assert text.startswith("unable to recover message store for [ch2]")


def test_invalid_slice_name(tmp_path: Path) -> None:
    make_store(tmp_path)
    (tmp_path / "ch0" / "msgs.x.dat").write_bytes(b"\x01\x00\x00\x00")
    text, _ = recover_error(tmp_path)
    assert "message log has an invalid name: msgs.x.dat" in text


def test_slice_with_gaps_from_old_servers(tmp_path: Path) -> None:
    from stanpkg.stores.file.format import ChannelWriter, write_server_file

    tmp_path.mkdir(exist_ok=True)
    write_server_file(str(tmp_path / "server.dat"), server_info())
    recs = {s: records("old", s, 1)[0] for s in (1, 2, 5, 6)}
    with ChannelWriter(str(tmp_path / "old"), "old") as writer:
        for seq, rec in recs.items():
            writer.append_record(seq, T0 + seq, rec)
    store, _ = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()[0]) == (1, 6, 4)
    assert [msgs.lookup(s) for s in range(1, 7)] == [recs[1], recs[2], None, None, recs[5], recs[6]]
    new = store_messages(msgs, "old", 7, 2)
    msgs._cache.clear()  # type: ignore[attr-defined]
    assert [msgs.lookup(s) for s in (6, 7, 8)] == [recs[6], *new]
    assert msgs.sequence_at_or_after(T0 + 3) == 5
    store.close()


def test_root_directory_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    # validate refuses such a dir before any start; the store's own check stands for a
    # directory that changed since (the plan is compiled on a good one, then pointed here)
    config = replace(config_for(tmp_path / "good"), root=str(blocker / "store"))
    with pytest.raises(StoreError) as err:
        FileStore(config, LogCapture())
    assert str(err.value) == (
        f"unable to create the root directory [{blocker / 'store'}]: "
        f"mkdir {blocker / 'store'}: not a directory"
    )
