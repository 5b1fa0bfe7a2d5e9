"""Rate of the ``stan`` sink: ``df.write.format("stan")`` from Spark into a live server
(stanpkg, memory store; ``--server go`` for the Go reference), 1 and 10 channels of
128-byte messages.

A first write in the Spark session pays the JVM's warm-up and the Python workers' start
(once per Spark application): it runs first on a small frame and is printed apart. Then,
per channel count and round (fresh channels each round):
* Spark: a cached frame of N rows (``channel``, ``data``; one partition per task slot)
  written with ``mode("append").save()``; msgs/s over the job's wall time, every message
  acknowledged (the server's last sequences are checked against N);
* the publisher alone: the same rows as Arrow batches through the sink's task code on
  one connection in this process, no Spark (the reference the Spark figure is a ratio of).
Min/median/max over the rounds.

    .venv/bin/python bench/pipeline/sink_bench.py [--messages 200000] [--channels 1,10]
        [--rounds 3] [--server stanpkg|go]   # go: STANPKG_REFERENCE_DIR (build.sh output)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_session import print_table, round_options, start_spark  # noqa: E402
from live_bench import Server, spread  # noqa: E402
from processes import stop_server  # noqa: E402

from stanpkg.pipeline.sink_options import SinkOptions  # noqa: E402
from stanpkg.pipeline.sink_publish import publish_batches  # noqa: E402

_ARROW_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch


def sink_options(server: Server) -> dict[str, str]:
    return {"servers": server.url, "cluster_id": server.cluster_id}


def last_sequences(server: Server, prefix: str) -> int:
    """Sum of the last sequences of the channels named ``prefix.*`` (= messages stored)."""
    monitor = f"http://127.0.0.1:{server.http}/streaming/channelsz"
    with urllib.request.urlopen(f"{monitor}?limit=100000", timeout=30) as answer:
        names = json.loads(answer.read()).get("names") or []
    total = 0
    for name in names:
        if name.startswith(prefix + "."):
            one = f"{monitor}?channel={name}"
            with urllib.request.urlopen(one, timeout=30) as answer:
                total += int(json.loads(answer.read())["last_seq"])
    return total


def frame(spark: Any, prefix: str, channels: int, count: int, size: int) -> Any:
    """A cached frame: ``channel`` (round-robin over the channels), distinct ``data``."""
    from pyspark.sql import functions as F

    slots = spark.sparkContext.defaultParallelism
    channel = F.concat(F.lit(f"{prefix}.c"), (F.col("id") % channels).cast("string"))
    data = F.lpad(F.col("id").cast("string"), size, "x").cast("binary")
    df = spark.range(0, count, numPartitions=slots).select(
        channel.alias("channel"), data.alias("data")
    )
    df = df.cache()
    df.count()
    return df


def spark_write(spark: Any, server: Server, df: Any) -> float:
    started = time.monotonic()
    df.write.format("stan").options(**sink_options(server)).mode("append").save()
    return time.monotonic() - started


def publisher_alone(server: Server, prefix: str, channels: int, count: int, size: int) -> float:
    """Msgs/s of the sink's task code (Arrow batches to PubAcks) on one connection."""
    import pyarrow as pa

    names = [f"{prefix}.c{i}" for i in range(channels)]
    batches = []
    for start in range(0, count, _ARROW_ROWS):
        ids = range(start, min(count, start + _ARROW_ROWS))
        batches.append(
            pa.RecordBatch.from_pydict(
                {
                    "channel": pa.array([names[i % channels] for i in ids], pa.string()),
                    "data": pa.array([str(i).rjust(size, "x").encode() for i in ids]),
                }
            )
        )
    options = SinkOptions.parse(sink_options(server))
    started = time.monotonic()
    result = publish_batches(options, iter(batches))
    elapsed = time.monotonic() - started
    assert result.messages == count, result
    return count / elapsed


def main() -> None:
    args = round_options(__doc__.split("\n")[0]).parse_args()
    spark = start_spark(args, {"spark.ui.showConsoleProgress": "false"})
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), args.server)
        try:
            warm = frame(spark, "warmup", 2, 20_000, args.size)
            seconds = spark_write(spark, server, warm)
            print(f"  first write of the session (JVM warm-up, Python workers): {seconds:.1f} s")
            for n in (int(c) for c in args.channels.split(",")):
                alone, rates = [], []
                for r in range(args.rounds):
                    prefix = f"sink{n}r{r}"
                    alone.append(publisher_alone(server, f"{prefix}a", n, args.messages, args.size))
                    df = frame(spark, prefix, n, args.messages, args.size)
                    seconds = spark_write(spark, server, df)
                    df.unpersist()
                    stored = last_sequences(server, prefix)
                    assert stored == args.messages, (stored, args.messages)
                    rates.append(args.messages / seconds)
                    print(
                        f"  {n} channel(s), round {r + 1}: publisher alone {alone[-1]:,.0f}/s, "
                        f"Spark {rates[-1]:,.0f}/s ({seconds:.1f} s)",
                        flush=True,
                    )
                ratio = statistics.median(rates) / statistics.median(alone)
                table.append(f"| {n} | {spread(alone)} | {spread(rates)} | {ratio:.2f} |")
        finally:
            stop_server(server.proc)
            spark.stop()
    print_table(
        [
            "channels",
            "publisher alone msgs/s (min / median / max)",
            "Spark write msgs/s (min / median / max)",
            "ratio of medians",
        ],
        table,
    )


if __name__ == "__main__":
    main()
