"""Planning and reading without Spark: slices chosen, pruning, removed/archived data,
damaged records. The Spark tests then check the same paths through Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.pipeline.batches import ARROW_SCHEMA, SliceReadStats, read_task_batches
from stanpkg.pipeline.options import ReadOptions
from stanpkg.pipeline.planning import plan_read
from stanpkg.stores.file.format import UnexpectedEOFError
from tests.pipeline.helpers import (
    BASE_TS,
    TS_STEP,
    DiscardedSlice,
    copy_fixture,
    discard_first_slice,
    manifest_rows,
    message_payload,
    write_store,
)
from tests.stores.filestore_helpers import tree_digest

Row = tuple[str, int, str, str, bytes, int]


def read_all(options: ReadOptions) -> tuple[list[Row], SliceReadStats]:
    plan = plan_read(options)
    stats = SliceReadStats()
    rows: list[Row] = []
    for task in plan.tasks:
        for batch in read_task_batches(
            task, plan.reader, permissive=options.permissive, batch_rows=3, stats=stats
        ):
            assert batch.schema == ARROW_SCHEMA
            d = batch.to_pydict()
            rows += zip(
                d["channel"], d["sequence"], d["subject"], d["reply"], d["data"],
                d["timestamp_ns"], strict=True,
            )  # fmt: skip
    return sorted(rows), stats


@pytest.mark.parametrize("name", ["plain", "aes", "chacha", "expired"])
def test_fixture_reads_exactly_the_manifest(tmp_path: Path, name: str) -> None:
    copy = copy_fixture(name, tmp_path)
    before = tree_digest(copy.datastore)
    rows, stats = read_all(ReadOptions.parse({"config": str(copy.config)}, environ={}))
    assert rows == manifest_rows(copy)
    assert stats.messages == len(rows) and stats.bad_records == 0
    assert tree_digest(copy.datastore) == before  # reading never writes


def test_one_task_per_slice_clipped_to_the_live_range(tmp_path: Path) -> None:
    copy = copy_fixture("plain", tmp_path)
    plan = plan_read(ReadOptions.parse({"config": str(copy.config)}, environ={}))
    got = [(t.slice.channel, t.slice.number, t.from_seq, t.to_seq) for t in plan.tasks]
    assert got == [
        ("audit.trail", 1, 1, 4),
        ("audit.trail", 2, 5, 7),
        ("orders.created", 2, 6, 8),  # sequence 5 is on disk but removed (max_msgs 10)
        ("orders.created", 3, 9, 12),
        ("orders.created", 4, 13, 15),
        ("payments.settled", 1, 1, 4),
        ("payments.settled", 2, 5, 7),
    ]
    assert plan.cluster_id == "ledger-east"


def test_include_removed_reads_what_limits_removed(tmp_path: Path) -> None:
    copy = copy_fixture("plain", tmp_path)
    options = ReadOptions.parse(
        {"config": str(copy.config), "channels": "orders.created", "includeRemoved": "true"},
        environ={},
    )
    rows, _ = read_all(options)
    assert [r[1] for r in rows] == list(range(5, 16))


def test_include_removed_reads_expired_messages(tmp_path: Path) -> None:
    copy = copy_fixture("expired", tmp_path)
    opts = {"config": str(copy.config), "channels": "ephemeral.readings"}
    assert read_all(ReadOptions.parse(opts, environ={}))[0] == []
    rows, _ = read_all(ReadOptions.parse({**opts, "includeRemoved": "true"}, environ={}))
    assert [r[1] for r in rows] == [5]


def test_without_config_the_server_defaults_apply(tmp_path: Path) -> None:
    copy = copy_fixture("plain", tmp_path)
    options = ReadOptions.parse(
        {"path": str(copy.datastore), "channels": "orders.created"}, environ={}
    )
    rows, _ = read_all(options)
    assert [r[1] for r in rows] == list(range(5, 16))  # no max_msgs 10 known


def test_sequence_and_channel_pruning(tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"a.x": 20, "a.y": 20, "b": 20}, slice_max_msgs=5)
    options = ReadOptions.parse(
        {"path": str(root), "channels": "a.*", "fromSequence": "7", "toSequence": "12"},
        environ={},
    )
    plan = plan_read(options)
    assert [(t.slice.channel, t.slice.number, t.from_seq, t.to_seq) for t in plan.tasks] == [
        ("a.x", 2, 7, 10),
        ("a.x", 3, 11, 12),
        ("a.y", 2, 7, 10),
        ("a.y", 3, 11, 12),
    ]
    rows, _ = read_all(options)
    assert rows[0] == ("a.x", 7, "a.x", "", message_payload("a.x", 7), BASE_TS + 7 * TS_STEP)
    assert len(rows) == 12


def test_time_pruning_and_exact_time_filter(tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"t": 40}, slice_max_msgs=10)
    lo, hi = BASE_TS + 15 * TS_STEP, BASE_TS + 24 * TS_STEP
    options = ReadOptions.parse(
        {"path": str(root), "fromTime": str(lo), "toTime": str(hi)}, environ={}
    )
    assert [t.slice.number for t in plan_read(options).tasks] == [2, 3]
    rows, _ = read_all(options)
    assert [r[1] for r in rows] == list(range(15, 25))


def test_truncated_failfast_names_file_and_offset(tmp_path: Path) -> None:
    copy = copy_fixture("truncated", tmp_path)
    cut = copy.manifest["cut"]
    with pytest.raises(UnexpectedEOFError) as err:
        plan_read(ReadOptions.parse({"config": str(copy.config)}, environ={}))
    assert err.value.path is not None and err.value.path.endswith("ticks.cpu/msgs.2.dat")
    assert err.value.offset == cut["cut_record"]["record_offset"]


def test_truncated_permissive_skips_and_counts(tmp_path: Path) -> None:
    copy = copy_fixture("truncated", tmp_path)
    before = tree_digest(copy.datastore)
    options = ReadOptions.parse({"config": str(copy.config), "mode": "permissive"}, environ={})
    rows, stats = read_all(options)
    assert rows == manifest_rows(copy)
    assert stats.bad_records == 1 and "offset" in stats.first_bad
    assert tree_digest(copy.datastore) == before  # nothing truncated


def test_crc_damage_in_the_middle_permissive(tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"c": 8}, slice_max_msgs=8)
    dat = root / "c" / "msgs.1.dat"
    data = bytearray(dat.read_bytes())
    data[30] ^= 0xFF  # inside the first record's payload
    dat.write_bytes(bytes(data))
    with pytest.raises(Exception, match=r"expected crc.*msgs\.1\.dat.*offset 4"):
        read_all(ReadOptions.parse({"path": str(root)}, environ={}))
    rows, stats = read_all(ReadOptions.parse({"path": str(root), "mode": "PERMISSIVE"}, {}))
    assert [r[1] for r in rows] == list(range(2, 9)) and stats.bad_records == 1


def test_archived_and_bak_slices(tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"c": 12}, slice_max_msgs=4)
    discard_first_slice(root, "c")  # left as .bak in the channel directory
    archive = tmp_path / "arch"
    (archive / "c").mkdir(parents=True)
    for suffix in ("dat", "idx"):  # slice 2 already moved by the script
        (root / "c" / f"msgs.2.{suffix}").rename(archive / "c" / f"msgs.2.{suffix}")
    base = {"path": str(root), "archiveDir": str(archive)}
    live, _ = read_all(ReadOptions.parse(base, environ={}))
    assert [r[1] for r in live] == list(range(9, 13))
    everything = ReadOptions.parse({**base, "includeArchived": "true"}, environ={})
    origins = {(t.slice.number, t.origin) for t in plan_read(everything).tasks}
    assert origins == {(1, "archived"), (2, "archived"), (3, "live")}
    rows, _ = read_all(everything)
    assert [r[1] for r in rows] == list(range(1, 13))


def test_archived_slice_without_index_is_scanned(discarded_slice: DiscardedSlice) -> None:
    root, dat_bak, idx_bak, _ = discarded_slice
    idx_bak.unlink()
    options = ReadOptions.parse({"path": str(root), "includeArchived": "true"}, environ={})
    rows, _ = read_all(options)
    assert [r[1] for r in rows] == list(range(1, 9))
    assert dat_bak.exists()


def test_slice_moved_while_reading_is_found_in_the_archive(tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"c": 8}, slice_max_msgs=4)
    options = ReadOptions.parse({"path": str(root)}, environ={})
    plan = plan_read(options)
    # After planning, the server discards slice 1 and the script archives it.
    dat_bak, idx_bak = discard_first_slice(root, "c")
    archive = Path(options.archive_dir) / "c"
    archive.mkdir(parents=True)
    dat_bak.rename(archive / "msgs.1.dat")
    idx_bak.rename(archive / "msgs.1.idx")
    got = []
    for task in plan.tasks:
        for batch in read_task_batches(task, plan.reader, permissive=False):
            got += batch.column("sequence").to_pylist()
    assert got == list(range(1, 9))
