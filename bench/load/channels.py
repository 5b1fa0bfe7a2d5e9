"""Many channels: publish one message to each of ``--channels`` channels, then idle.

MEMORY store: the server's RSS before and after, and its CPU while idle for ``--idle``
seconds with every channel in place (a server with many quiet channels should cost
nothing). FILE store: the same channels written to a datastore, the server stopped, then
started again on it: the time from exec to "Streaming Server is ready" (recovery of every
channel), beside the same time for an empty datastore, and the RSS after recovery.

Usage: ``python bench/load/channels.py [--channels 2000] [--idle 30]``; samples in
bench/results/load/channels.jsonl, the summary on stdout and channels.json beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    DATA,
    Sampler,
    close_client,
    cpu_seconds,
    emit,
    monitor,
    open_files,
    rss_mb,
    servers,
    stan_client,
    start_stan,
)
from processes import stop_server

LIMITS = ["-mc", "0", "-msu", "0"]


def names(count: int) -> list[str]:
    return [f"load.{i // 100:03d}.chan-{i:05d}" for i in range(count)]


async def fill(nats_url: str, count: int) -> float:
    """One message to each channel; seconds taken."""
    client = await stan_client(nats_url, "channels-pub")
    began = time.perf_counter()
    for channel in names(count):
        client.publish_async(channel, b"x" * 128)
        await client.wait_for_window(timeout=120)
    await client.wait_all_acked(timeout=120)
    elapsed = time.perf_counter() - began
    if client.ack_errors:
        raise RuntimeError(f"publish errors: {client.ack_errors[:3]}")
    await close_client(client)
    return elapsed


async def memory_store(args: argparse.Namespace) -> dict[str, Any]:
    with servers(LIMITS) as srv:
        pid = srv.stan.pid
        rss0, fds0 = rss_mb(pid), open_files(pid)
        with Sampler(pid, 1.0) as sampler:
            fill_seconds = await fill(srv.nats_url, args.channels)
            rss_filled = rss_mb(pid)
            await asyncio.sleep(1)  # the last acks and their bookkeeping
            cpu0, idle0 = cpu_seconds(pid), time.perf_counter()
            await asyncio.sleep(args.idle)
            idle_cpu = (cpu_seconds(pid) - cpu0) / (time.perf_counter() - idle0)
        stored = monitor(srv.monitor_url, "/streaming/storez")
        sampler.write(DATA / "channels.jsonl")
        return {
            "channels": args.channels,
            "fill_seconds": round(fill_seconds, 2),
            "rss_mb": {
                "start": round(rss0, 1),
                "filled": round(rss_filled, 1),
                "after_idle": round(rss_mb(pid), 1),
            },
            "kb_per_channel": round((rss_filled - rss0) * 1024 / args.channels, 1),
            "open_files": {"start": fds0, "end": open_files(pid)},
            "idle_cpu_percent": round(100 * idle_cpu, 2),
            "storez_total_msgs": stored["total_msgs"],
        }


async def file_store(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="stanpkg-load-file-") as tmp:
        work = Path(tmp)
        store = ["-store", "file", "-dir", str(work / "datastore"), *LIMITS]
        with servers(store, work) as srv:
            empty_ready = srv.ready_seconds
            fill_seconds = await fill(srv.nats_url, args.channels)
            files_open = open_files(srv.stan.pid)
            nats_url = srv.nats_url
            # Stop only stanpkg; the nats-server stays up for the restart below.
            stop_server(srv.stan)
            restarted = start_stan(nats_url, store, work)
            try:
                pid = restarted.stan.pid
                recovered = monitor(restarted.monitor_url, "/streaming/storez")
                result = {
                    "empty_ready_seconds": round(empty_ready, 2),
                    "fill_seconds": round(fill_seconds, 2),
                    "open_files_filled": files_open,
                    "recovery_ready_seconds": round(restarted.ready_seconds, 2),
                    "rss_mb_after_recovery": round(rss_mb(pid), 1),
                    "open_files_after_recovery": open_files(pid),
                    "recovered_msgs": recovered["total_msgs"],
                }
            finally:
                stop_server(restarted.stan)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--channels", type=int, default=2000)
    parser.add_argument("--idle", type=float, default=30)
    args = parser.parse_args()
    result = {
        "memory": asyncio.run(memory_store(args)),
        "file": asyncio.run(file_store(args)),
    }
    emit(result, DATA / "channels.json")


if __name__ == "__main__":
    main()
