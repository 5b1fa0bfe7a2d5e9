"""Client churn: many clients connecting and leaving, ``--concurrency`` at a time.

Each client is a separate application: its own NATS connection, a STAN connect, one
subscription (left open), one publish waiting for its PubAck, a STAN close (which must
drop the subscription too), and the NATS connection closed. ``--clients`` of them in
waves. Every second the server's RSS, open files and CPU are sampled. At the end, after
``--idle`` seconds, /streaming/clientsz must say 0 clients and /streaming/channelsz 0
subscriptions, and RSS and open files should be back near where the first wave left them
(the first wave brings in code paths and buffers once).

Usage: ``python bench/load/churn.py [--clients 10000] [--concurrency 200]``; samples in
bench/results/load/churn.jsonl, the summary on stdout and churn.json beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
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
)

CHANNELS = 50


async def one_client(nats_url: str, index: int) -> None:
    client = await stan_client(nats_url, f"churn-{index}")
    channel = f"churn.{index % CHANNELS}"
    await client.subscribe(channel, lambda _seq: None, ack_wait=30, timeout=30)
    await client.publish(channel, b"x" * 128)
    await close_client(client)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with servers(["-mc", "0", "-msu", "0"]) as srv:
        pid = srv.stan.pid
        done = 0
        with Sampler(pid, 1.0, lambda: {"clients_done": done}) as sampler:
            start = {"rss_mb": rss_mb(pid), "open_files": open_files(pid)}
            cpu0, began = cpu_seconds(pid), time.perf_counter()
            after_first: dict[str, Any] = {}
            for first in range(0, args.clients, args.concurrency):
                last = min(first + args.concurrency, args.clients)
                await asyncio.gather(*(one_client(srv.nats_url, i) for i in range(first, last)))
                done = last
                if not after_first:
                    after_first = {"rss_mb": rss_mb(pid), "open_files": open_files(pid)}
            elapsed = time.perf_counter() - began
            cpu = cpu_seconds(pid) - cpu0
            await asyncio.sleep(args.idle)
        clients = monitor(srv.monitor_url, "/streaming/clientsz")
        channels = monitor(srv.monitor_url, "/streaming/channelsz?subs=1")
        subs_left = sum(len(c.get("subscriptions") or []) for c in channels.get("channels", []))
        end = {"rss_mb": rss_mb(pid), "open_files": open_files(pid)}
        sampler.write(DATA / "churn.jsonl")
        peak = max(s.rss_mb for s in sampler.samples)
        return {
            "clients": args.clients,
            "concurrency": args.concurrency,
            "seconds": round(elapsed, 1),
            "clients_per_s": round(args.clients / elapsed),
            "server_cpu_ms_per_client": round(1000 * cpu / args.clients, 2),
            "rss_mb": {
                "start": round(start["rss_mb"], 1),
                "after_first_wave": round(after_first["rss_mb"], 1),
                "peak": round(peak, 1),
                "end_after_idle": round(end["rss_mb"], 1),
            },
            "open_files": {
                "start": start["open_files"],
                "after_first_wave": after_first["open_files"],
                "peak": max(s.open_files for s in sampler.samples),
                "end_after_idle": end["open_files"],
            },
            "clientsz_total_at_end": clients["total"],
            "subscriptions_left": subs_left,
            "messages_stored": sum(c["msgs"] for c in channels.get("channels", [])),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10)
    args = parser.parse_args()
    emit(asyncio.run(run(args)), DATA / "churn.json")


if __name__ == "__main__":
    main()
