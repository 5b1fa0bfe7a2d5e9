"""The FILE message store: storing, reading back, slices, limits, expiration."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.format import open_datastore
from stanpkg.stores.file.messages import FileMessageStore
from tests.stores.file.helpers import T0, fresh_store, open_store, store_messages


def slice_files(channel_dir: Path) -> list[str]:
    return sorted(p.name for p in channel_dir.iterdir() if p.name.startswith("msgs."))


def test_store_lookup_and_restart(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 10, timestamp=T0 + 10)
    asyncio.run(ch.msgs.flush())
    assert (ch.msgs.first_sequence, ch.msgs.last_sequence) == (1, 10)
    assert ch.msgs.state() == (10, sum(len(r) + 40 for r in recs))
    assert [ch.msgs.lookup(s) for s in range(1, 11)] == recs
    assert ch.msgs.lookup(0) is None and ch.msgs.lookup(11) is None
    store.close()

    store, _ = open_store(tmp_path)
    state = store.recover()
    assert state is not None and state.info.cluster_id == "test"
    (recovered,) = state.channels
    msgs = recovered.store.msgs
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()[0]) == (1, 10, 10)
    assert msgs.last_timestamp == T0 + 10
    assert [msgs.lookup(s) for s in range(1, 11)] == recs  # read from disk this time
    store_messages(msgs, "foo", 11, 2, timestamp=T0 + 12)
    assert msgs.last_sequence == 12
    store.close()
    ds = open_datastore(tmp_path)
    assert [m.sequence for m in ds.iter_messages("foo")] == list(range(1, 13))


def test_locate_names_the_file_and_offset(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_slice_max_msgs", "2", "--max_msgs", "4")
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 3, timestamp=T0)
    msgs = ch.msgs
    assert isinstance(msgs, FileMessageStore)
    one, two = tmp_path / "foo" / "msgs.1.dat", tmp_path / "foo" / "msgs.2.dat"
    assert msgs.locate(1) == f'file "{one}", offset 4'
    assert msgs.locate(2) == f'file "{one}", offset {4 + 8 + len(recs[0])}'
    assert msgs.locate(3) == f'file "{two}", offset 4'
    assert msgs.locate(0) == msgs.locate(4) == ""
    store_messages(msgs, "foo", 4, 2, timestamp=T0)  # max_msgs 4: sequence 1 removed
    assert msgs.first_sequence == 2 and msgs.locate(1) == ""
    store.close()
    store, _ = open_store(tmp_path, "--file_slice_max_msgs", "2", "--max_msgs", "4")
    state = store.recover()
    assert state is not None
    recovered = state.channels[0].store.msgs
    assert isinstance(recovered, FileMessageStore)
    assert recovered.locate(3) == f'file "{two}", offset 4'
    store.close()


def test_reads_from_disk_past_the_cache(tmp_path: Path, monkeypatch: object) -> None:
    from stanpkg.stores.file import messages

    monkeypatch.setattr(messages, "CACHE_MAX_MSGS", 8)  # type: ignore[attr-defined]
    store, _ = fresh_store(tmp_path, "--file_read_buffer_size", "300")
    ch = store.create_channel("foo")
    recs = [
        record
        for first in range(1, 101, 10)
        for record in store_messages(ch.msgs, "foo", first, 10, size=50, timestamp=T0 + first)
    ]
    # sequential, backwards and random reads all go through the read-ahead window
    assert [ch.msgs.lookup(s) for s in range(1, 101)] == recs
    assert [ch.msgs.lookup(s) for s in range(100, 0, -1)] == recs[::-1]
    assert ch.msgs.lookup(37) == recs[36]
    store.close()


def test_sequence_at_or_after(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_slice_max_msgs", "3")
    ch = store.create_channel("foo")
    assert ch.msgs.sequence_at_or_after(T0) == 0
    store_messages(ch.msgs, "foo", 1, 10)  # one batch each: T0 + 1 … T0 + 10
    assert ch.msgs.sequence_at_or_after(0) == 1
    assert ch.msgs.sequence_at_or_after(T0 + 5) == 5
    assert ch.msgs.sequence_at_or_after(T0 + 7) == 7
    assert ch.msgs.sequence_at_or_after(T0 + 11) == 11
    store.close()


def test_slices_roll_by_count_and_bytes(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_slice_max_msgs", "4")
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 10, timestamp=T0)  # one batch over three slices
    assert slice_files(tmp_path / "foo") == [
        f"msgs.{n}.{ext}" for n in (1, 2, 3) for ext in ("dat", "idx")
    ]
    store.close()
    sizes = {
        sl.number: (sl.first_seq, sl.last_seq) for sl in open_datastore(tmp_path).slices("foo")
    }
    assert sizes == {1: (1, 4), 2: (5, 8), 3: (9, 10)}

    other = tmp_path / "bytes"
    store, _ = fresh_store(other, "--file_slice_max_bytes", "200")
    ch = store.create_channel("foo")
    # 51-byte records + 40 = 91 bytes each: a slice takes 3 (91, 182 < 200, then 273)
    recs = store_messages(ch.msgs, "foo", 1, 7, size=32, timestamp=T0)
    assert {len(r) for r in recs} == {51}
    store.close()
    counts = [sl.count for sl in open_datastore(other).slices("foo")]
    assert counts == [3, 3, 1]


def test_slice_rolls_by_age(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_slice_max_age", "1s", "--file_slice_max_bytes", "0")
    ch = store.create_channel("foo")
    now = time.time_ns()
    store_messages(ch.msgs, "foo", 1, 2, timestamp=now - 5_000_000_000)
    store_messages(ch.msgs, "foo", 3, 1, timestamp=now)
    store.close()
    assert [sl.count for sl in open_datastore(tmp_path).slices("foo")] == [2, 1]


def test_automatic_slice_limits_and_slice_removal(tmp_path: Path) -> None:
    # filestore.md §7.4: max_msgs 8, all slice limits 0 -> 2 messages per slice; after 10
    # messages slice 1 is gone, first 3, last 10.
    store, _ = fresh_store(tmp_path, "--max_msgs", "8", "--file_slice_max_bytes", "0")
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 10)  # one batch each
    assert (ch.msgs.first_sequence, ch.msgs.last_sequence, ch.msgs.state()[0]) == (3, 10, 8)
    assert slice_files(tmp_path / "foo") == [
        f"msgs.{n}.{ext}" for n in (2, 3, 4, 5) for ext in ("dat", "idx")
    ]
    assert ch.msgs.lookup(2) is None and ch.msgs.lookup(3) is not None
    store.close()
    store, _ = open_store(tmp_path, "--max_msgs", "8", "--file_slice_max_bytes", "0")
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert (msgs.first_sequence, msgs.last_sequence) == (3, 10)
    store.close()


def test_limits_keep_newest_and_warn_once(tmp_path: Path) -> None:
    store, log = fresh_store(tmp_path, "--max_msgs", "5", "--max_bytes", "0")
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 7, timestamp=T0 + 7)
    recs += store_messages(ch.msgs, "foo", 8, 5, timestamp=T0 + 12)
    assert (ch.msgs.first_sequence, ch.msgs.state()) == (8, (5, sum(len(r) + 40 for r in recs[7:])))
    warnings = [t for t in log.texts("WRN") if t.startswith("Reached limits")]
    total = sum(len(r) + 40 for r in recs[:7])
    assert warnings == [
        f'Reached limits for store "foo" (msgs=7/5 bytes={total} B/0 B), '
        "dropping old messages to make room for new ones"
    ]
    store.close()


def test_max_bytes_keeps_at_least_one(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--max_bytes", "10", "--max_msgs", "0")
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 3, timestamp=T0 + 3)
    assert ch.msgs.state()[0] == 1 and ch.msgs.first_sequence == 3
    store.close()


def test_expire_all_then_restart_keeps_last_sequence(tmp_path: Path) -> None:
    args = ("--max_age", "1s", "--file_slice_max_msgs", "2")
    store, _ = fresh_store(tmp_path, *args)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 5)  # one batch each: T0 + 1 … T0 + 5
    assert ch.msgs.expire(T0 + 3 + 1_000_000_000) == T0 + 4
    assert ch.msgs.first_sequence == 4
    assert ch.msgs.expire(T0 + 10**12) == 0
    assert (ch.msgs.first_sequence, ch.msgs.last_sequence, ch.msgs.state()) == (6, 5, (0, 0))
    assert slice_files(tmp_path / "foo") == ["msgs.3.dat", "msgs.3.idx"]  # last slice kept
    store.close()
    store, _ = open_store(tmp_path, *args)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert (msgs.first_sequence, msgs.last_sequence, msgs.state()) == (6, 5, (0, 0))
    store_messages(msgs, "foo", 6, 1)  # fills slice 3 (5 removed, 6 live)
    assert (msgs.first_sequence, msgs.last_sequence) == (6, 6)
    assert msgs.expire(T0 + 10**12) == 0
    # the emptied only slice is deleted when the next slice starts
    store_messages(msgs, "foo", 7, 1)
    assert slice_files(tmp_path / "foo") == ["msgs.4.dat", "msgs.4.idx"]
    assert (msgs.first_sequence, msgs.last_sequence) == (7, 7)
    store.close()


def test_archive_script_gets_the_removed_slices(tmp_path: Path) -> None:
    script = tmp_path / "archive.sh"
    out = tmp_path / "archived.txt"
    script.write_text(f'#!/bin/sh\necho "$1 $2 $3" >> {out}\nrm "$2" "$3"\necho done\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    root = tmp_path / "store"
    args = ("--max_msgs", "4", "--file_slice_max_msgs", "2", "--file_slice_archive_script")
    store, log = fresh_store(root, *args, str(script))
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 8, timestamp=T0)
    store.close()  # waits for the scripts
    lines = sorted(out.read_text().splitlines())
    assert lines == [f"foo {root}/foo/msgs.{n}.dat.bak {root}/foo/msgs.{n}.idx.bak" for n in (1, 2)]
    assert f"Output of archive script for foo ({root}/foo/msgs.1.dat.bak and " in "\n".join(
        log.texts("INF")
    )
    assert slice_files(root / "foo") == [f"msgs.{n}.{e}" for n in (3, 4) for e in ("dat", "idx")]


def test_archive_script_failure_is_logged(tmp_path: Path) -> None:
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho cannot archive\nexit 3\n")
    script.chmod(0o755)
    root = tmp_path / "store"
    store, log = fresh_store(
        root, "--max_msgs", "2", "--file_slice_max_msgs", "2", slice_archive_script=str(script)
    )
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 6, timestamp=T0)
    store.close()
    assert f'Error invoking archive script "{script}": exit status 3 (output=cannot archive\n)' in (
        log.texts("ERR")
    )
    assert (root / "foo" / "msgs.1.dat.bak").exists()  # left for the operator

    missing = tmp_path / "missing.sh"  # removed after the configuration was checked
    store, log = fresh_store(
        tmp_path / "other",
        "--max_msgs",
        "2",
        "--file_slice_max_msgs",
        "2",
        slice_archive_script=str(missing),
    )
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 6, timestamp=T0)
    store.close()
    assert any("no such file or directory" in t for t in log.texts("ERR"))


def test_unbuffered_and_no_crc(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_buffer_size", "0", "--file_crc=false")
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 5, timestamp=T0)
    store.close()
    # a flipped payload byte is not noticed when CRCs are not checked...
    dat = tmp_path / "foo" / "msgs.1.dat"
    data = bytearray(dat.read_bytes())
    data[4 + 8 + len(recs[0]) - 1] ^= 0x01  # last byte of message 1's payload
    dat.write_bytes(bytes(data))
    store, _ = open_store(tmp_path, "--file_crc=false")
    state = store.recover()
    assert state is not None
    assert state.channels[0].store.msgs.lookup(1) != recs[0]
    store.close()
    # ...and is reported (not delivered) when they are
    store, log = open_store(tmp_path)
    state = store.recover()
    assert state is not None
    assert state.channels[0].store.msgs.lookup(1) is None
    assert state.channels[0].store.msgs.lookup(2) == recs[1]
    assert log.has("Error looking up message foo:1 (corrupted data, expected crc")
    store.close()


def test_custom_crc_polynomial(tmp_path: Path) -> None:
    castagnoli = str(0x82F63B78)
    store, _ = fresh_store(tmp_path, "--file_crc_poly", castagnoli)
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 3, timestamp=T0)
    store.close()
    ds = open_datastore(tmp_path, crc_poly=0x82F63B78)
    assert [m.sequence for m in ds.iter_messages("foo")] == [1, 2, 3]
    store, _ = open_store(tmp_path, "--file_crc_poly", castagnoli)
    state = store.recover()
    assert state is not None and state.channels[0].store.msgs.lookup(2) == recs[1]
    store.close()


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the FILE store fsyncs from now on, in order (the fsyncs still happen)."""
    from stanpkg.stores.file import syncing

    paths: list[str] = []
    real = syncing.fsync_item

    def spy(item: int | str) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{item}") if isinstance(item, int) else item)
        real(item)

    monkeypatch.setattr(syncing, "fsync_item", spy)
    return paths


def test_flush_fsyncs_data_and_index(tmp_path: Path, synced: list[str]) -> None:
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 3, timestamp=T0)

    async def flush() -> None:
        await ch.msgs.flush()
        await ch.msgs.flush()  # nothing new: no second round

    asyncio.run(flush())
    names = sorted(os.path.basename(p) for p in synced)
    assert names == ["msgs.1.dat", "msgs.1.idx"]
    store.close()

    synced.clear()
    store, _ = open_store(tmp_path, "--file_sync=false")
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    store_messages(msgs, "foo", 4, 1)
    asyncio.run(msgs.flush())
    assert synced == []
    assert pb.MsgProto.FromString(msgs.lookup(4) or b"").sequence == 4
    store.close()


def test_auto_sync_fsyncs_in_the_background(
    tmp_path: Path, monkeypatch: object, synced: list[str]
) -> None:
    from stanpkg.stores.file import store as store_module

    monkeypatch.setattr(store_module, "TICK_SECONDS", 0.02)  # type: ignore[attr-defined]

    async def scenario() -> None:
        store, _ = fresh_store(tmp_path, "--file_sync=false", auto_sync=50_000_000)
        ch = store.create_channel("foo")
        store_messages(ch.msgs, "foo", 1, 2, timestamp=T0)
        ch.subs.record_sent(0, [1])
        await ch.msgs.flush()  # no fsync: sync_on_flush is off
        assert synced == []
        await asyncio.sleep(0.3)
        store.close()

    asyncio.run(scenario())
    assert sorted({os.path.basename(p) for p in synced}) == ["msgs.1.dat", "msgs.1.idx", "subs.dat"]


def test_fsync_failure_is_reported(tmp_path: Path, monkeypatch: object) -> None:
    from stanpkg.stores.base import StoreError
    from stanpkg.stores.file import syncing

    def broken(item: int | str) -> None:
        if isinstance(item, int):
            os.close(item)
        raise OSError(5, "Input/output error")

    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 1)
    monkeypatch.setattr(syncing, "fsync_item", broken)  # type: ignore[attr-defined]

    async def flush() -> str:
        try:
            await ch.msgs.flush()
        except StoreError as exc:
            return str(exc)
        return ""

    assert asyncio.run(flush()) == "unable to sync store files: [Errno 5] Input/output error"
    monkeypatch.undo()  # type: ignore[attr-defined]
    store.close()


def test_fsyncs_run_on_the_loop_while_the_disk_is_fast_and_in_threads_when_slow(
    tmp_path: Path, monkeypatch: object
) -> None:
    """A round runs on the loop thread while the recent rounds took under the budget
    (the reference's ioLoop also syncs in line); once a round is slow, the next ones run
    in worker threads, so the loop serves meanwhile; fast rounds bring the loop back.
    A failure is reported on either path."""
    import threading

    from stanpkg.stores.base import StoreError
    from stanpkg.stores.file import syncing

    threads: list[str] = []
    slow = [0.0]
    fail = [False]
    real = syncing.fsync_item

    def spy(item: int | str) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(slow[0])
        if fail[0]:
            if isinstance(item, int):
                os.close(item)
            raise OSError(5, "Input/output error")
        real(item)

    monkeypatch.setattr(syncing, "fsync_item", spy)  # type: ignore[attr-defined]
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    seq = iter(range(1, 1000))

    async def round_on() -> set[str]:
        n = next(seq)
        store_messages(ch.msgs, "foo", n, 1)
        threads.clear()
        await ch.msgs.flush()
        return {"loop" if t == threading.current_thread().name else "worker" for t in threads}

    async def scenario() -> None:
        assert await round_on() == {"loop"}  # a new store expects a fast disk
        slow[0] = syncing.INLINE_BUDGET * 10
        assert await round_on() == {"loop"}  # not known yet: this one blocks
        assert await round_on() == {"worker"}
        assert await round_on() == {"worker"}  # still slow
        fail[0] = True
        with pytest.raises(StoreError, match="Input/output error"):
            await round_on()
        fail[0], slow[0] = False, 0.0
        sides = [await round_on() for _ in range(30)]
        assert sides[0] == {"worker"} and sides[-1] == {"loop"}

    asyncio.run(scenario())
    monkeypatch.undo()  # type: ignore[attr-defined]
    store.close()


def test_cache_is_bounded_and_dropped_when_idle(tmp_path: Path) -> None:
    from stanpkg.stores.file import messages

    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    msgs = ch.msgs
    assert isinstance(msgs, messages.FileMessageStore)
    size = messages.CACHE_MAX_BYTES // 2
    big = store_messages(msgs, "foo", 1, 2, size=size, timestamp=T0 + 2)
    big += store_messages(msgs, "foo", 3, 1, size=size)  # over the byte cap: only it stays
    assert msgs._cache.records == big[2:]  # type: ignore[attr-defined]
    msgs.drop_cache_if_idle(time.monotonic() + messages.CACHE_IDLE_SECONDS)
    assert msgs._cache.records == []  # type: ignore[attr-defined]
    assert [msgs.lookup(s) for s in (1, 2, 3)] == big  # from disk
    store.close()
