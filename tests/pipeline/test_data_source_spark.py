"""The ``stan`` data source through a real local Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline import register
from stanpkg.pipeline.data_source import SCHEMA
from tests.pipeline.helpers import BASE_TS, TS_STEP, copy_fixture, manifest_rows, write_store

pytestmark = pytest.mark.slow

COLUMNS = ["channel", "sequence", "subject", "reply", "data", "timestamp_ns"]


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in frame.select(*COLUMNS).collect())


@pytest.mark.parametrize("name", ["plain", "aes", "chacha", "expired"])
def test_fixture_datastores(spark: Any, tmp_path: Path, name: str) -> None:
    register(spark)
    copy = copy_fixture(name, tmp_path)
    frame = spark.read.format("stan").option("config", str(copy.config)).load()
    assert frame.schema == SCHEMA
    assert rows(frame) == manifest_rows(copy)


def test_encryption_key_option_and_redaction(spark: Any, tmp_path: Path) -> None:
    register(spark)
    copy = copy_fixture("chacha", tmp_path)
    key = copy.manifest["encryption"]["key"]
    frame = (
        spark.read.format("stan")
        .option("path", str(copy.datastore))
        .option("encryptionKey", key)
        .option("channels", "sealed.audit")
        .load()
    )
    expected = [r for r in manifest_rows(copy) if r[0] == "sealed.audit"]
    assert rows(frame) == expected
    plan_text = frame._jdf.queryExecution().toString()
    assert key not in plan_text


def test_truncated_failfast_names_file_and_offset(spark: Any, tmp_path: Path) -> None:
    register(spark)
    copy = copy_fixture("truncated", tmp_path)
    with pytest.raises(Exception) as err:
        spark.read.format("stan").option("config", str(copy.config)).load().collect()
    text = str(err.value)
    assert "unexpected EOF" in text
    assert f'file "{copy.datastore}/ticks.cpu/msgs.2.dat", offset 3133' in text


def test_truncated_permissive_skips_and_counts(spark: Any, tmp_path: Path) -> None:
    registration = register(spark)
    assert registration.metrics is not None
    copy = copy_fixture("truncated", tmp_path)
    frame = (
        spark.read.format("stan")
        .option("config", str(copy.config))
        .option("mode", "PERMISSIVE")
        .load()
    )
    assert rows(frame) == manifest_rows(copy)
    messages, _, bad = registration.metrics.snapshot()
    assert (messages, bad) == (8, 1)


def test_store_written_by_our_writers(spark: Any, tmp_path: Path) -> None:
    register(spark)
    root = write_store(tmp_path / "ds", {"orders.eu": 30, "orders.us": 25, "audit": 10})
    frame = spark.read.format("stan").option("path", str(root)).load()
    # One partition per slice file (4 messages a slice).
    assert frame.rdd.getNumPartitions() == 8 + 7 + 3
    frame.createOrReplaceTempView("messages")
    counts = spark.sql(
        "SELECT channel, count(*) AS n, min(sequence) AS lo, max(sequence) AS hi "
        "FROM messages WHERE channel LIKE 'orders.%' GROUP BY channel ORDER BY channel"
    ).collect()
    assert [tuple(r) for r in counts] == [("orders.eu", 30, 1, 30), ("orders.us", 25, 1, 25)]
    first = spark.sql("SELECT * FROM messages WHERE channel = 'audit' AND sequence = 5").first()
    assert first is not None
    assert first.reply == "audit.reply.5" and first.timestamp_ns == BASE_TS + 5 * TS_STEP
    assert first.timestamp == datetime.fromtimestamp((BASE_TS + 5 * TS_STEP) / 1e9, UTC).replace(
        tzinfo=None
    )
    assert (first.redelivered, first.crc32, first.slice) == (False, 0, 2)
    # The same view again without a filter: every row (no stale pushed-down state).
    assert spark.sql("SELECT count(*) FROM messages").first()[0] == 65


def test_options_prune_slices(spark: Any, tmp_path: Path) -> None:
    registration = register(spark)
    assert registration.metrics is not None
    root = write_store(tmp_path / "ds", {"a": 40, "b": 40}, slice_max_msgs=10)
    before = registration.metrics.snapshot()
    frame = (
        spark.read.format("stan")
        .option("path", str(root))
        .option("channels", "a")
        .option("fromSequence", "12")
        .option("toTime", str(BASE_TS + 25 * TS_STEP))
        .load()
    )
    assert frame.rdd.getNumPartitions() == 2
    # (Not orderBy: its range partitioning samples the input, i.e. reads it twice.)
    assert sorted(r.sequence for r in frame.collect()) == list(range(12, 26))
    read = registration.metrics.snapshot()[0] - before[0]
    assert read == 14  # one collect, rows of slices 2-3 of "a" only (b not planned)


def test_filter_pushdown_prunes_when_enabled(spark: Any, tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.datasource", reason="needs Spark >= 4.1").EqualTo  # noqa: B018
    registration = register(spark, pushdown=True)
    assert registration.pushdown and registration.metrics is not None
    root = write_store(tmp_path / "ds", {"a": 40, "b": 40}, slice_max_msgs=10)
    before = registration.metrics.snapshot()[0]
    frame = spark.read.format("stan").option("path", str(root)).load()
    got = frame.where("channel = 'b' AND sequence > 30").select("sequence").collect()
    assert sorted(r.sequence for r in got) == list(range(31, 41))
    assert registration.metrics.snapshot()[0] - before == 10  # only slice 4 of b was read
    register(spark)  # back to the default for the other tests
