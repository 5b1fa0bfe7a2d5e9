"""Many subscriptions on one channel: ``--subs`` subscriptions, spread over
``--clients`` STAN clients (each on its own NATS connection), every one acking every
message; one publisher sends ``--messages`` messages; every subscription must get each
of them. Reports the delivery rate (messages delivered to subscriptions per second, from
the first publish to the last delivery), the server's CPU per delivery, and its RSS with
no subscription, with all of them, and after the run.

Usage: ``python bench/load/subs.py [--subs 1000] [--clients 20] [--messages 1000]``;
samples in bench/results/load/subs.jsonl, the summary on stdout and subs.json beside it.
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
    open_files,
    rss_mb,
    servers,
    stan_client,
)

CHANNEL = "fanout"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with servers(["-mc", "0", "-msu", "0"]) as srv:
        pid = srv.stan.pid
        rss0 = rss_mb(pid)
        clients = [await stan_client(srv.nats_url, f"sub-{i}") for i in range(args.clients)]
        counts = [0] * args.subs
        in_order = [True] * args.subs
        delivered = 0

        def receiver(index: int) -> Any:
            def on_msg(seq: int) -> None:
                nonlocal delivered
                delivered += 1
                counts[index] += 1
                if seq != counts[index]:
                    in_order[index] = False

            return on_msg

        for index in range(args.subs):
            await clients[index % args.clients].subscribe(
                CHANNEL, receiver(index), deliver_all=True, max_inflight=args.max_inflight
            )
        rss_subscribed = rss_mb(pid)
        publisher = await stan_client(srv.nats_url, "fanout-pub")
        expected = args.subs * args.messages
        with Sampler(pid, 1.0, lambda: {"delivered": delivered}) as sampler:
            cpu0, began = cpu_seconds(pid), time.perf_counter()
            for _ in range(args.messages):
                publisher.publish_async(CHANNEL, b"x" * args.size)
                await publisher.wait_for_window(timeout=120)
            await publisher.wait_all_acked(timeout=300)
            deadline = time.monotonic() + args.timeout
            while delivered < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - began
            cpu = cpu_seconds(pid) - cpu0
        rss_after = rss_mb(pid)
        for client in [publisher, *clients]:
            await close_client(client)
        sampler.write(DATA / "subs.jsonl")
        return {
            "subscriptions": args.subs,
            "clients": args.clients,
            "messages": args.messages,
            "deliveries_expected": expected,
            "deliveries": delivered,
            "every_sub_complete_in_order": all(c == args.messages for c in counts)
            and all(in_order),
            "seconds": round(elapsed, 1),
            "deliveries_per_s": round(delivered / elapsed),
            "server_cpu_us_per_delivery": round(1e6 * cpu / max(delivered, 1), 1),
            "rss_mb": {
                "start": round(rss0, 1),
                "subscribed": round(rss_subscribed, 1),
                "kb_per_subscription": round((rss_subscribed - rss0) * 1024 / args.subs, 1),
                "peak": round(max((s.rss_mb for s in sampler.samples), default=rss_after), 1),
                "after": round(rss_after, 1),
            },
            "open_files_end": open_files(pid),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--max-inflight", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=170)
    args = parser.parse_args()
    emit(asyncio.run(run(args)), DATA / "subs.json")


if __name__ == "__main__":
    main()
