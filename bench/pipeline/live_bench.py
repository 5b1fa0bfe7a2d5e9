"""End-to-end rate of a live-to-Parquet query: ``spark.readStream.format("stan")`` on a
live server (stanpkg, memory store; ``--server go`` for the Go reference), for 1 and 10
channels of 128-byte messages.

A first query in the Spark session pays the JVM's warm-up and the Python workers' start
(seconds, once per Spark application): it is run first on a small backlog and printed
apart. Then, per channel count and round (fresh channels each round):
* backlog: N messages published first, then one availableNow query drains them into
  Parquet; msgs/s over its micro-batches (Spark's triggerExecution times);
* the source alone: the same ranges read by the source's reader into Arrow, no Spark (the
  reference the Spark figure is a ratio of);
Min/median/max over the rounds. Then, once per channel count, latency: a processing-time
query runs while messages are published at --rate msgs/s; per message, the sink file's
modification time minus the server's timestamp (p50/p99).

    .venv/bin/python bench/pipeline/live_bench.py [--messages 200000] [--channels 1,10]
        [--rounds 3] [--server stanpkg|go]   # go: STANPKG_REFERENCE_DIR (build.sh output)
"""

from __future__ import annotations

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

from bench_session import print_table, round_options, start_spark  # noqa: E402
from processes import free_port, stop_server  # noqa: E402

from stanpkg.client import StanBenchClient  # noqa: E402
from stanpkg.pipeline.live_client import RangeRead, channel_bounds, iter_ranges  # noqa: E402
from stanpkg.pipeline.live_options import LiveOptions  # noqa: E402
from stanpkg.pipeline.live_source import to_record_batch  # noqa: E402
from stanpkg.transport import NatsConnection  # noqa: E402

RUNNER = (
    "import sys\n"
    "from stanpkg.plan.compile import compile_args\n"
    "from stanpkg.node import run\n"
    "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
)


def go_server_binary() -> Path:
    ref = os.environ.get("STANPKG_REFERENCE_DIR", "")
    binary = Path(ref) / "nats-streaming-server"
    if not ref or not binary.exists():
        sys.exit(
            "--server go needs STANPKG_REFERENCE_DIR, the directory where "
            "../shared/reference/build.sh put nats-streaming-server (bench/README.md)"
        )
    return binary


class Server:
    def __init__(self, workdir: Path, kind: str = "stanpkg") -> None:
        self.cluster_id = "live-bench"
        self.port, self.http = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = workdir / "server.log"
        argv = ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http)]
        argv += ["-cid", self.cluster_id, "-mm", "0", "-mb", "0", "-mc", "0"]
        start = [str(go_server_binary())] if kind == "go" else [sys.executable, "-c", RUNNER]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([*start, *argv], stdout=out, stderr=subprocess.STDOUT)
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


def source_alone(options: LiveOptions) -> float:
    """Msgs/s of the source's reader (subscription, decoding, Arrow) without Spark, one
    range per channel in turn on one connection."""
    bounds = channel_bounds(options)
    started = time.monotonic()
    total = 0
    ranges = [(channel, 0, b.last, RangeRead()) for channel, b in bounds.items()]
    for channel, batch in iter_ranges(options, ranges, 8192):
        total += to_record_batch(channel, batch).num_rows
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


def spread(values: list[float]) -> str:
    """min / median / max."""
    return " / ".join(f"{v:,.0f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = round_options(__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=5000, help="latency run, msgs/s")
    parser.add_argument("--seconds", type=float, default=10, help="latency run length")
    args = parser.parse_args()
    spark = start_spark(args, {"spark.sql.shuffle.partitions": "2"})
    rows_out = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = Server(work, args.server)
        try:
            # One task per slot, so that every Python worker has started.
            slots = spark.sparkContext.defaultParallelism
            warm = [f"warmup.c{i}" for i in range(slots)]
            asyncio.run(publish(server, warm, 20_000 * slots, args.size, 0))
            warm_options = server.options("warmup.*") | {"maxMessagesPerPartition": "20000"}
            rows, wall, in_triggers = drain(spark, warm_options, work / "warmup")
            print(
                f"  first query of the session (JVM warm-up, Python workers' start): {rows:,} "
                f"messages in {in_triggers:.1f} s of micro-batch, {wall:.1f} s with its start",
                flush=True,
            )
            for n in (int(c) for c in args.channels.split(",")):
                alone_rates, spark_rates = [], []
                for r in range(args.rounds):
                    prefix = f"bench{n}r{r}"
                    channels = [f"{prefix}.c{i}" for i in range(n)]
                    asyncio.run(publish(server, channels, args.messages, args.size, 0))
                    options = server.options(f"{prefix}.*")
                    alone_rates.append(source_alone(LiveOptions.parse(options)))
                    rows, wall, in_triggers = drain(spark, options, work / f"drain-{prefix}")
                    assert rows == args.messages, (rows, args.messages)
                    spark_rates.append(rows / in_triggers)
                    print(
                        f"  {n} channel(s), round {r + 1}: alone {alone_rates[-1]:,.0f}/s, "
                        f"Spark {spark_rates[-1]:,.0f}/s in its micro-batches "
                        f"({in_triggers:.1f} s; {wall:.1f} s with the query's start)",
                        flush=True,
                    )
                channels = [f"latency{n}.c{i}" for i in range(n)]
                delays = latency(spark, server, channels, args, work / f"latency{n}")
                p50 = statistics.median(delays)
                p99 = delays[int(len(delays) * 0.99) - 1]
                ratio = statistics.median(spark_rates) / statistics.median(alone_rates)
                rows_out.append(
                    f"| {n} | {spread(alone_rates)} | {spread(spark_rates)} | {ratio:.2f} | "
                    f"{p50:.2f} | {p99:.2f} |"
                )
                print(f"  {n} channel(s): latency p50 {p50:.2f} s, p99 {p99:.2f} s", flush=True)
        finally:
            stop_server(server.proc)
            spark.stop()
    print_table(
        [
            "channels",
            "source alone msgs/s (min / median / max)",
            "Spark to Parquet msgs/s (min / median / max)",
            "ratio of medians",
            "latency p50 s",
            "p99 s",
        ],
        rows_out,
    )


if __name__ == "__main__":
    main()
