"""End-to-end rate of a live-to-Parquet query: ``spark.readStream.format("stan")`` on a
stanpkg server (memory store), for 1 and 10 channels of 128-byte messages.

Per channel count:
* backlog: N messages published first, then one availableNow query drains them into
  Parquet; msgs/s over its micro-batches (Spark's triggerExecution times; the query's
  start, a few seconds, is printed apart);
* the source alone: the same ranges read by the source's reader into Arrow, no Spark (the
  reference the Spark figure is a ratio of);
* latency: a processing-time query runs while messages are published at --rate msgs/s;
  per message, the sink file's modification time minus the server's timestamp (p50/p99).

    .venv/bin/python bench/pipeline/live_bench.py [--messages 200000] [--channels 1,10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from processes import free_port, stop_server  # noqa: E402

from stanpkg.client import StanBenchClient  # noqa: E402
from stanpkg.pipeline import register  # noqa: E402
from stanpkg.pipeline.live_client import RangeRead, channel_bounds, iter_range  # noqa: E402
from stanpkg.pipeline.live_options import LiveOptions  # noqa: E402
from stanpkg.pipeline.live_source import to_record_batch  # noqa: E402
from stanpkg.transport import NatsConnection  # noqa: E402

RUNNER = (
    "import sys\n"
    "from stanpkg.plan.compile import compile_args\n"
    "from stanpkg.node import run\n"
    "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
)


class Server:
    def __init__(self, workdir: Path) -> None:
        self.cluster_id = "live-bench"
        self.port, self.http = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = workdir / "server.log"
        argv = ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http)]
        argv += ["-cid", self.cluster_id, "-mm", "0", "-mb", "0", "-mc", "0"]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", RUNNER, *argv], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while b"Streaming Server is ready" not in self.log.read_bytes():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text())
            time.sleep(0.1)

    def options(self, channels: str) -> dict[str, str]:
        return {
            "servers": self.url,
            "cluster_id": self.cluster_id,
            "channels": channels,
            "monitor": f"http://127.0.0.1:{self.http}",
        }


async def publish(server: Server, channels: list[str], count: int, size: int, rate: float) -> None:
    """``count`` messages round-robin over ``channels`` (at ``rate`` msgs/s when > 0)."""
    nc = await NatsConnection.connect(server.url)
    stan = await StanBenchClient.connect(nc, server.cluster_id, f"pub-{time.monotonic_ns()}")
    data = os.urandom(size)
    started = time.monotonic()
    for i in range(count):
        await stan.wait_for_window()
        stan.publish_async(channels[i % len(channels)], data)
        if rate > 0 and i % 100 == 99:
            ahead = started + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
    await stan.wait_all_acked(120)
    await stan.close()
    await nc.close()


def source_alone(options: LiveOptions, start: dict[str, int]) -> float:
    """Msgs/s of the source's reader (subscription, decoding, Arrow) without Spark."""
    bounds = channel_bounds(options)
    started = time.monotonic()
    total = 0
    for channel, b in bounds.items():
        for msgs in iter_range(options, channel, start.get(channel, 0), b.last, 8192, RangeRead()):
            total += to_record_batch(channel, msgs).num_rows
    return total / (time.monotonic() - started)


def drain(spark: Any, options: dict[str, str], out: Path) -> tuple[int, float, float]:
    frame = spark.readStream.format("stan").options(**options).load()
    started = time.monotonic()
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out / "sink"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.monotonic() - started
    batches = [p for p in query.recentProgress if p.numInputRows]
    in_triggers = sum(p.durationMs["triggerExecution"] for p in batches) / 1000
    return sum(p.numInputRows for p in batches), wall, in_triggers


def latency(spark: Any, server: Server, channels: list[str], args: Any, out: Path) -> list[float]:
    options = server.options(",".join(channels)) | {"startingOffsets": "latest"}
    frame = spark.readStream.format("stan").options(**options).load()
    query = (
        frame.select("timestamp_ns")
        .writeStream.format("parquet")
        .option("path", str(out / "sink"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while not query.recentProgress:  # the first trigger fixed the starting offsets
            time.sleep(0.2)
        count = int(args.rate * args.seconds)
        asyncio.run(publish(server, channels, count, args.size, args.rate))
        query.processAllAvailable()
    finally:
        query.stop()
    import pyarrow.parquet as pq

    delays = []
    for path in (out / "sink").glob("*.parquet"):
        written_ns = path.stat().st_mtime_ns
        for ts in pq.read_table(path).column("timestamp_ns").to_pylist():
            delays.append((written_ns - ts) / 1e9)
    return sorted(delays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--channels", default="1,10")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rate", type=float, default=5000, help="latency run, msgs/s")
    parser.add_argument("--seconds", type=float, default=10, help="latency run length")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    print(f"{args.messages} messages of {args.size} B, master {args.master}, memory store")
    print("| channels | source alone msgs/s | Spark to Parquet msgs/s | ratio | p50 s | p99 s |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = Server(work)
        try:
            for n in (int(c) for c in args.channels.split(",")):
                channels = [f"bench{n}.c{i}" for i in range(n)]
                asyncio.run(publish(server, channels, args.messages, args.size, 0))
                options = server.options(f"bench{n}.*")
                alone = source_alone(LiveOptions.parse(options), {})
                rows, wall, in_triggers = drain(spark, options, work / f"drain{n}")
                assert rows == args.messages, (rows, args.messages)
                rate = rows / in_triggers
                print(
                    f"  {n} channel(s): alone {alone:,.0f}/s, Spark {rate:,.0f}/s in its "
                    f"micro-batches ({in_triggers:.1f} s; {wall:.1f} s with the query's start)",
                    flush=True,
                )
                delays = latency(spark, server, channels, args, work / f"latency{n}")
                p50 = statistics.median(delays)
                p99 = delays[int(len(delays) * 0.99) - 1]
                print(
                    f"| {n} | {alone:,.0f} | {rate:,.0f} | {rate / alone:.2f} | "
                    f"{p50:.2f} | {p99:.2f} |",
                    flush=True,
                )
        finally:
            stop_server(server.proc)
            spark.stop()


if __name__ == "__main__":
    main()
