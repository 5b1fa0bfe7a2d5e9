"""What the sink must do under Spark, written once for local mode (test_sink_spark.py) and
the standalone cluster (test_spark_cluster.py): each scenario runs its jobs on the session
given and checks, with an independent STAN client, that every row arrived."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from stanpkg.pipeline import register
from tests.pipeline.live_helpers import LiveServer
from tests.pipeline.sink_helpers import received, sink_options

_ids = iter(range(1, 1_000_000))


def tag(name: str) -> str:
    """A channel prefix of its own for each run (servers are shared by a module)."""
    return f"{name}{next(_ids)}t{time.monotonic_ns() % 1_000_000}"


def frame_of(spark: Any, pairs: list[tuple[str, bytes]], partitions: int) -> Any:
    """(channel, data) rows in ``partitions`` partitions, in order within each."""
    numbered = [(n, channel, data) for n, (channel, data) in enumerate(pairs)]
    frame = spark.createDataFrame(numbered, "n long, channel string, data binary")
    return frame.repartition(partitions, "channel").sortWithinPartitions("n").drop("n")


def batch_write_by_column(spark: Any, server: LiveServer) -> None:
    """Two channels by column, two tasks: every row once, in order on its channel."""
    register(spark)
    prefix = tag("batch")
    even, odd = f"{prefix}.even", f"{prefix}.odd"
    pairs = [(even if n % 2 == 0 else odd, f"{prefix}:{n}".encode()) for n in range(600)]
    frame_of(spark, pairs, 2).write.format("stan").options(**sink_options(server)).mode(
        "append"
    ).save()
    assert received(server, even) == [d for c, d in pairs if c == even]
    assert received(server, odd) == [d for c, d in pairs if c == odd]


def batch_write_retried(spark: Any, server: LiveServer) -> None:
    """Each task's first attempt fails after 40 acknowledged rows; Spark retries it: every
    row arrives, the failed attempts' rows twice (at least once)."""
    register(spark)
    channel = tag("retry")
    pairs = [(channel, f"{channel}:{n}".encode()) for n in range(300)]
    frame = spark.createDataFrame(pairs, "channel string, data binary").repartition(2)
    options = sink_options(server, testOnlyFailFirstAttemptAfter=40)
    frame.write.format("stan").options(**options).mode("append").save()
    got = Counter(received(server, channel))
    assert set(got) == {d for _, d in pairs}  # none lost
    assert sum(got.values()) == len(pairs) + 2 * 40  # duplicates: the failed attempts' rows
    assert set(got.values()) <= {1, 2}


def _write_file(directory: Path, name: str, items: list[tuple[str, str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    temp = directory / f".{name}.tmp"  # hidden while written: the file source skips it
    temp.write_text("".join(json.dumps({"channel": c, "data": d}) + "\n" for c, d in items))
    temp.rename(directory / f"{name}.json")


def stream_from_files(spark: Any, server: LiveServer, work: Path) -> None:
    """A file source into the sink: availableNow, then a processing-time query stopped
    and started again from the same checkpoint. Every row exactly once (no failure)."""
    register(spark)
    prefix = tag("stream")
    a, b = f"{prefix}.a", f"{prefix}.b"
    inbox, checkpoint = work / "in", work / "checkpoint"
    sent: list[tuple[str, str]] = []

    def add(name: str, first: int, last: int) -> None:
        items = [(a if n % 3 else b, f"{prefix}:{n}") for n in range(first, last + 1)]
        sent.extend(items)
        _write_file(inbox, name, items)

    def start(**trigger: Any) -> Any:
        frame = spark.readStream.schema("channel string, data string").json(str(inbox))
        return (
            frame.writeStream.format("stan")
            .options(**sink_options(server))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    def check() -> None:
        for channel in (a, b):
            want = sorted(d.encode() for c, d in sent if c == channel)
            assert sorted(received(server, channel)) == want, channel

    add("f1", 1, 120)
    add("f2", 121, 200)
    start(availableNow=True).awaitTermination()
    check()
    query = start(processingTime="300 milliseconds")
    try:
        add("f3", 201, 260)
        query.processAllAvailable()
        add("f4", 261, 300)
        query.processAllAvailable()
    finally:
        query.stop()
    check()
    add("f5", 301, 350)  # while no query runs
    query = start(processingTime="300 milliseconds")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    check()  # f1..f4 not published again after the restart


def stream_retried(spark: Any, server: LiveServer, work: Path) -> None:
    """A micro-batch whose task fails its first attempt after 10 rows: retried, all there."""
    register(spark)
    channel = tag("sretry")
    items = [(channel, f"{channel}:{n}") for n in range(1, 101)]
    _write_file(work / "in", "f1", items)
    frame = spark.readStream.schema("channel string, data string").json(str(work / "in"))
    query = (
        frame.writeStream.format("stan")
        .options(**sink_options(server, testOnlyFailFirstAttemptAfter=10))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    got = Counter(received(server, channel))
    assert set(got) == {d.encode() for _, d in items}
    assert sum(got.values()) >= len(items) + 10
