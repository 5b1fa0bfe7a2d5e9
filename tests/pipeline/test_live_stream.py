"""``spark.readStream.format("stan")`` on a real stanpkg server, into a Parquet sink."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline import register
from stanpkg.pipeline.data_source import SCHEMA
from tests.pipeline.live_helpers import LiveServer, parquet_query, parquet_rows, payloads

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live-mem"), "-mm", "5", "-mc", "0")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def file_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("live-file")
    server = LiveServer(root, "-st", "FILE", "--dir", str(root / "datastore"))
    yield server
    server.stop()


def stream(spark: Any, options: dict[str, str]) -> Any:
    register(spark)
    frame = spark.readStream.format("stan").options(**options).load()
    assert frame.schema == SCHEMA
    return frame


def expected(channel: str, first: int, last: int) -> list[tuple[str, int, bytes]]:
    return [(channel, seq, data) for seq, data in enumerate(payloads(channel, first, last), first)]


def test_published_before_and_while_running_land_once_across_restarts(
    spark: Any, file_server: LiveServer, tmp_path: Path
) -> None:
    """FILE store; processing-time query (a new channel matching the pattern found while it
    runs), stopped, then an availableNow restart from the checkpoint."""
    server = file_server
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    server.publish("orders.eu", payloads("orders.eu", 1, 300))
    server.publish("audit", payloads("audit", 1, 5))  # not selected
    frame = stream(spark, server.options(channels="orders.*"))

    query = parquet_query(frame, out, checkpoint, available_now=False)
    try:
        query.processAllAvailable()
        server.publish("orders.eu", payloads("orders.eu", 301, 400))
        server.publish("orders.us", payloads("orders.us", 1, 50))  # discovered while running
        query.processAllAvailable()
        query.processAllAvailable()  # the new channel joins, then is read
    finally:
        query.stop()
    want = expected("orders.eu", 1, 400) + expected("orders.us", 1, 50)
    assert sorted(parquet_rows(spark, out)) == want

    server.publish("orders.eu", payloads("orders.eu", 401, 420))
    server.publish("orders.us", payloads("orders.us", 51, 60))
    parquet_query(frame, out, checkpoint, available_now=True)
    want = expected("orders.eu", 1, 420) + expected("orders.us", 1, 60)
    assert sorted(parquet_rows(spark, out)) == want  # nothing of the first run read twice


def test_max_messages_per_trigger_and_lag_in_progress(
    spark: Any, memory_server: LiveServer, tmp_path: Path
) -> None:
    server = memory_server
    for channel in ("m.one", "m.two"):
        server.publish(channel, payloads(channel, 1, 5))  # the server keeps 5 per channel
    options = server.options(channels="m.one,m.two", maxMessagesPerTrigger=3, monitor="")
    query = parquet_query(
        stream(spark, options), tmp_path / "out", tmp_path / "cp", available_now=True
    )
    batches = [p for p in query.recentProgress if p.numInputRows]
    assert [p.numInputRows for p in batches] == [3, 3, 3, 1]
    first = batches[0].sources[0]
    # Spark's progress carries where each trigger ended and the server's last sequences.
    assert json.loads(first.latestOffset) == {"m.one": 5, "m.two": 5}
    assert sorted(json.loads(first.endOffset).values()) == [1, 2]  # 3 shared out
    want = expected("m.one", 1, 5) + expected("m.two", 1, 5)
    assert sorted(parquet_rows(spark, tmp_path / "out")) == want


def test_fail_on_data_loss_names_channel_and_sequences(
    spark: Any, memory_server: LiveServer, tmp_path: Path
) -> None:
    server = memory_server
    server.publish("lossy", payloads("lossy", 1, 12))  # 1..7 removed by max_msgs 5
    options = server.options(channels="lossy", startingOffsets='{"lossy": 2}')
    with pytest.raises(Exception) as err:
        parquet_query(stream(spark, options), tmp_path / "out", tmp_path / "cp", available_now=True)
    assert "channel lossy: messages 3..7 were removed" in str(err.value)

    options["failOnDataLoss"] = "false"
    parquet_query(stream(spark, options), tmp_path / "out2", tmp_path / "cp2", available_now=True)
    assert sorted(parquet_rows(spark, tmp_path / "out2")) == expected("lossy", 8, 12)


def test_batch_read_between_offsets(spark: Any, memory_server: LiveServer) -> None:
    server = memory_server
    server.publish("ranged", payloads("ranged", 1, 5))
    register(spark)
    frame = (
        spark.read.format("stan")
        .options(**server.options(channels="ranged", monitor=""))
        .option("startingOffsets", '{"ranged": 1}')
        .option("endingOffsets", '{"ranged": 4}')
        .load()
    )
    got = [(r.channel, r.sequence, bytes(r.data)) for r in frame.collect()]
    assert sorted(got) == expected("ranged", 2, 4)
