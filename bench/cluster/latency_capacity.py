"""Publish latency and channel capacity of 3-node clusters: stanpkg's (on JetStream) and
the Go reference's, started with the same Go flags on this host (bench/cluster/
cluster_bench.py's start_cluster), measured through a follower's URL.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/cluster/latency_capacity.py

* latency: synchronous publishes of 128 B, one at a time (the PubAck of each awaited):
  p50 / p99 / max in milliseconds, alternating the servers over the rounds;
* capacity: channels created one message each, in steps, and after each step the
  cluster's resident memory (every process of the cluster) and its CPU while idle for
  5 s: what each channel costs when it is a Raft group of its own (a JetStream stream)
  or one more entry of the Go server's single Raft log.
Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "cluster"))
from cluster_bench import servers as cluster_servers  # noqa: E402 - a sibling script
from cluster_bench import start_cluster, stop  # noqa: E402

from stanpkg.client import StanBenchClient  # noqa: E402
from stanpkg.transport.connection import NatsConnection  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


def cluster_pids(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    """The cluster's processes: the servers and their children (embedded nats-servers)."""
    pids = [p.pid for p in procs]
    for proc in procs:
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        pids += [int(c) for c in children]
    return pids


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / CLK_TCK


async def client(url: str, name: str) -> StanBenchClient:
    nc = await NatsConnection.connect(url)
    return await StanBenchClient.connect(nc, "bench", name, timeout=10)


async def latencies(url: str, count: int) -> list[float]:
    stan = await client(url, "latency")
    payload = bytes(128)
    await stan.publish("lat", payload)  # the channel exists before the clock starts
    out = []
    for _ in range(count):
        started = time.perf_counter()
        await stan.publish("lat", payload)
        out.append((time.perf_counter() - started) * 1000)
    await stan.nc.close()
    return out


async def fill_channels(url: str, first: int, last: int) -> float:
    stan = await client(url, f"fill{first}")
    started = time.perf_counter()
    for n in range(first, last):
        await stan.publish(f"cap.{n}", b"x", timeout=60)
    elapsed = time.perf_counter() - started
    await stan.nc.close()
    return elapsed


def with_cluster(command: list[str], work: Callable[[list[subprocess.Popen[bytes]], str], T]) -> T:
    workdir = Path(tempfile.mkdtemp(prefix="cluster-lat-"))
    procs, followers, _ = start_cluster([*command, "-mc", "0"], workdir)
    try:
        time.sleep(2)
        return work(procs, f"nats://127.0.0.1:{followers[0]}")
    finally:
        stop(procs)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", "--count", type=int, default=2000, help="publishes per round")
    parser.add_argument("--channels", default="100,500,1000,2000", help="capacity steps")
    parser.add_argument("--skip-capacity", action="store_true")
    args = parser.parse_args()
    found = cluster_servers()
    if found is None:
        return 2
    servers = found[1]
    samples: dict[str, list[float]] = {name: [] for name in servers}
    for round_no in range(args.rounds):
        for name in list(servers) if round_no % 2 == 0 else list(servers)[::-1]:
            got = with_cluster(
                servers[name], lambda _p, url: asyncio.run(latencies(url, args.count))
            )
            samples[name] += got
    for name, values in samples.items():
        values.sort()
        print(
            json.dumps(
                {
                    "latency_ms": name,
                    "p50": round(statistics.median(values), 2),
                    "p99": round(values[int(len(values) * 0.99)], 2),
                    "max": round(values[-1], 2),
                    "n": len(values),
                }
            ),
            flush=True,
        )
    if args.skip_capacity:
        return 0
    steps = [int(s) for s in args.channels.split(",")]
    for name, command in servers.items():

        def grow(procs: list[subprocess.Popen[bytes]], url: str, name: str = name) -> None:
            done = 0
            for step in steps:
                try:
                    elapsed = asyncio.run(fill_channels(url, done, step))
                except Exception as exc:
                    print(json.dumps({"capacity": name, "channels": step, "error": str(exc)}))
                    return
                done = step
                pids = cluster_pids(procs)
                before = cpu_seconds(pids)
                time.sleep(5)
                idle = (cpu_seconds(pids) - before) / 5 * 100
                print(
                    json.dumps(
                        {
                            "capacity": name,
                            "channels": step,
                            "create_s": round(elapsed, 1),
                            "rss_mib": round(rss_mib(pids)),
                            "idle_cpu_pct": round(idle, 1),
                        }
                    ),
                    flush=True,
                )

        with_cluster(command, grow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
