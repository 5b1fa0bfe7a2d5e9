"""``df.write`` / ``df.writeStream.format("stan")`` in local mode against stanpkg (memory
and FILE stores) and the Go reference server; what a wrong server, cluster ID or column
does to a Spark job; the aggregation job of docs/pipeline.md."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline import register
from tests.pipeline import sink_scenarios as scenarios
from tests.pipeline.live_helpers import LiveServer, free_port
from tests.pipeline.sink_helpers import received, server_fixture, sink_options

pytestmark = pytest.mark.slow


def test_batch_write_to_two_channels_by_column(spark: Any, sink_server: LiveServer) -> None:
    scenarios.batch_write_by_column(spark, sink_server)


def test_batch_write_task_retried(spark: Any, sink_server: LiveServer) -> None:
    scenarios.batch_write_retried(spark, sink_server)


def test_stream_from_files_available_now_and_restarted(
    spark: Any, sink_server: LiveServer, tmp_path: Path
) -> None:
    scenarios.stream_from_files(spark, sink_server, tmp_path)


def test_stream_task_retried(spark: Any, sink_server: LiveServer, tmp_path: Path) -> None:
    scenarios.stream_retried(spark, sink_server, tmp_path)


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from server_fixture("memory", tmp_path_factory)


def test_wrong_server_cluster_or_column_fails_the_job_at_once(
    spark: Any, memory_server: LiveServer, tmp_path: Path
) -> None:
    register(spark)
    frame = spark.createDataFrame([("c", b"x")], "channel string, data binary")

    def failure(df: Any, **options: object) -> tuple[str, float]:
        """The error of a batch write, and the seconds it took to come."""
        started = time.monotonic()
        with pytest.raises(Exception) as err:
            writer = df.write.format("stan").options(**sink_options(memory_server, **options))
            writer.mode("append").save()
        return str(err.value), time.monotonic() - started

    error, seconds = failure(frame, servers=f"nats://127.0.0.1:{free_port()}", connectTimeout=1)
    assert "servers: cannot connect to NATS at nats://127.0.0.1" in error and seconds < 15
    error, seconds = failure(frame, cluster_id="not-this-one", connectTimeout=1)
    assert "cluster_id: no STAN server of cluster 'not-this-one'" in error and seconds < 15
    error, _ = failure(frame.select("channel"))
    assert "missing column data: the stan sink takes data (binary or string" in error
    error, _ = failure(frame.withColumn("extra", frame.channel))
    assert "does not take column(s) extra" in error
    error, _ = failure(frame.select("data"))
    assert "channel: give option channel or a channel column" in error
    with pytest.raises(Exception, match="a STAN channel cannot be overwritten"):
        writer = frame.write.format("stan").options(**sink_options(memory_server))
        writer.mode("overwrite").save()

    # A streaming write is planned with its first micro-batch: give it one.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.json").write_text('{"channel": "c", "data": "x"}\n')
    stream = spark.readStream.schema("channel string, data string").json(str(tmp_path / "in"))
    options = sink_options(memory_server, cluster_id="nope", connectTimeout=1)
    with pytest.raises(Exception, match="cluster_id: no STAN server of cluster 'nope'"):
        writer = stream.writeStream.format("stan").options(**options)
        writer.option("checkpointLocation", str(tmp_path / "cp")).start().awaitTermination()


def test_documented_aggregation_job(spark: Any, memory_server: LiveServer, tmp_path: Path) -> None:
    """docs/pipeline.md's example: orders per minute from one channel into another, each
    minute published once the watermark has passed it (append mode). Event time comes from
    the payload here (the messages are all stored in the same second)."""
    from pyspark.sql import functions as F

    register(spark)
    server = memory_server
    minute = 1_700_000_000 // 60 * 60
    # Three orders in one minute, three in the next.
    orders = [{"id": n, "amount": 10.0 * n, "at": minute + 15 * n} for n in range(1, 7)]
    orders.append({"id": 7, "amount": 1.0, "at": minute + 600})  # moves the watermark on
    server.publish("shop.orders", [json.dumps(o).encode() for o in orders])

    source = sink_options(server) | {"channels": "shop.orders"}
    orders_df = spark.readStream.format("stan").options(**source).load()
    payload = F.col("data").cast("string")
    per_minute = (
        orders_df.withColumn(
            "timestamp", F.timestamp_seconds(F.get_json_object(payload, "$.at").cast("long"))
        )
        .withWatermark("timestamp", "1 minute")
        .groupBy(F.window("timestamp", "1 minute"))
        .agg(
            F.count("*").alias("orders"),
            F.sum(F.get_json_object(payload, "$.amount").cast("double")).alias("amount"),
        )
        .select(
            F.to_json(F.struct(F.col("window.start").alias("minute"), "orders", "amount")).alias(
                "data"
            )
        )
    )
    query = (
        per_minute.writeStream.format("stan")
        .options(**sink_options(server))
        .option("channel", "shop.orders_per_minute")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    published = [json.loads(d) for d in received(server, "shop.orders_per_minute")]
    # The two minutes the watermark passed; the marker's minute stays open.
    assert sorted((p["orders"], p["amount"]) for p in published) == [(3, 60.0), (3, 150.0)]
