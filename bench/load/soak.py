"""Soak: one publisher at a steady rate and one subscriber on one channel, for a long time.

First (unless ``--rate`` is given) the same clients measure the maximum rate for
``--max-seconds``: the publisher as fast as its window of 16384 unacknowledged messages
allows, the subscriber acking every message. The soak then runs at half that rate for
``--seconds`` on a fresh server. Every second: the server's RSS, open files, CPU, and the
publish latency (publish to PubAck, every 8th message) of that second. At the end, every
sequence is checked: each PubAck was a success, the subscriber got 1..N in order with no
gap, and /streaming/channelsz says the channel's last sequence is N.

The MEMORY store keeps ``--max-msgs`` messages per channel (older ones are dropped, as in
production), so the store reaches its steady size early and RSS can be flat afterwards.

Usage: ``python bench/load/soak.py [--seconds 1800] [--rate R] [--max-seconds 20]``;
samples go to bench/results/load/soak.jsonl, the summary to stdout and soak.json beside it;
``python bench/load/plot.py`` draws the PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
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

from stanpkg.client import StanBenchClient

CHANNEL = "soak"
LATENCY_EVERY = 8


class Receiver:
    """Checks that sequences arrive 1, 2, 3, ... with nothing missing."""

    def __init__(self) -> None:
        self.expected = 1
        self.delivered = 0
        self.gaps = 0
        self.missing = 0
        self.redelivered = 0

    def on_msg(self, seq: int) -> None:
        self.delivered += 1
        if seq == self.expected:
            self.expected += 1
        elif seq < self.expected:
            self.redelivered += 1
        else:
            self.gaps += 1
            self.missing += seq - self.expected
            self.expected = seq + 1


class Publisher:
    def __init__(self, client: StanBenchClient, size: int) -> None:
        self.client = client
        self.data = b"x" * size
        self.sent = 0
        self.errors = 0
        self.latencies: list[float] = []  # of the current sampling period

    def _timed(self, start: float) -> Any:
        def on_ack(error: str) -> None:
            self.latencies.append(time.perf_counter() - start)
            self.errors += bool(error)

        return on_ack

    def _counted(self, error: str) -> None:
        self.errors += bool(error)

    def publish(self) -> None:
        callback = self._timed(time.perf_counter()) if self.sent % LATENCY_EVERY == 0 else None
        self.client.publish_async(CHANNEL, self.data, callback or self._counted)
        self.sent += 1

    def period_figures(self) -> dict[str, Any]:
        lat, self.latencies = sorted(self.latencies), []
        if not lat:
            return {"sent": self.sent}
        return {
            "sent": self.sent,
            "lat_p50_ms": round(lat[len(lat) // 2] * 1000, 2),
            "lat_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2),
            "lat_max_ms": round(lat[-1] * 1000, 2),
        }


async def flat_out(publisher: Publisher, seconds: float) -> float:
    """Publish as fast as the window allows; messages acknowledged per second."""
    client = publisher.client
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(256):
            publisher.publish()
        await client.wait_for_window()
        await asyncio.sleep(0)
    await client.wait_all_acked()
    return publisher.sent / (time.perf_counter() - start)


async def paced(publisher: Publisher, rate: float, seconds: float) -> None:
    """Publish ``rate`` messages a second, in 10 ms steps, keeping up with the clock."""
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        due = int(rate * elapsed) - publisher.sent
        for _ in range(due):
            publisher.publish()
        await asyncio.sleep(0.01)
    await publisher.client.wait_all_acked(timeout=120)


async def run(args: argparse.Namespace, rate: float | None) -> dict[str, Any]:
    server_args = ["-mm", str(args.max_msgs), "-mc", "0", "-msu", "0"]
    with servers(server_args) as srv:
        pid = srv.stan.pid
        pub_client = await stan_client(srv.nats_url, "soak-pub")
        sub_client = await stan_client(srv.nats_url, "soak-sub")
        receiver = Receiver()
        await sub_client.subscribe(CHANNEL, receiver.on_msg, deliver_all=True, max_inflight=16384)
        publisher = Publisher(pub_client, args.size)

        def extra() -> dict[str, Any]:
            return {**publisher.period_figures(), "delivered": receiver.delivered}

        start_rss, start_fds, start_cpu = rss_mb(pid), open_files(pid), cpu_seconds(pid)
        with Sampler(pid, 1.0, extra) as sampler:
            began = time.perf_counter()
            if rate is None:
                measured = await flat_out(publisher, args.max_seconds)
            else:
                await paced(publisher, rate, args.seconds)
                measured = rate
            elapsed = time.perf_counter() - began
            deadline = time.monotonic() + 120
            while receiver.delivered < publisher.sent and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            delivered_rate = receiver.delivered / (time.perf_counter() - began)
        channel = monitor(srv.monitor_url, f"/streaming/channelsz?channel={CHANNEL}")
        await close_client(pub_client)
        await close_client(sub_client)
        samples = sampler.samples
        late = samples[len(samples) // 10 :]  # after the store has reached its steady size
        result: dict[str, Any] = {
            "phase": "max" if rate is None else "soak",
            "seconds": round(elapsed, 1),
            "published": publisher.sent,
            "publish_errors": publisher.errors + len(pub_client.ack_errors),
            "delivered": receiver.delivered,
            "gaps": receiver.gaps,
            "missing": receiver.missing,
            "redelivered": receiver.redelivered,
            "channel_last_seq": channel["last_seq"],
            "channel_msgs_stored": channel["msgs"],
            "nothing_lost": receiver.gaps == 0
            and receiver.expected - 1 == publisher.sent == channel["last_seq"]
            and publisher.errors == 0,
            "rate_msgs_per_s": round(measured),
            "delivered_msgs_per_s": round(delivered_rate),
            "rss_mb": {"start": round(start_rss, 1), "end": round(rss_mb(pid), 1)},
            "open_files": {"start": start_fds, "end": open_files(pid)},
            "server_cpu_seconds": round(cpu_seconds(pid) - start_cpu, 1),
        }
        if late:
            result["after_first_10pct"] = {
                "rss_mb_min_max": [min(s.rss_mb for s in late), max(s.rss_mb for s in late)],
                "open_files_min_max": [
                    min(s.open_files for s in late),
                    max(s.open_files for s in late),
                ],
                "cpu_percent_median": round(statistics.median(s.cpu_percent for s in late), 1),
                "lat_p50_ms_median": _median(late, "lat_p50_ms"),
                "lat_p99_ms_median": _median(late, "lat_p99_ms"),
                "lat_p99_ms_worst": max((s.extra.get("lat_p99_ms", 0) for s in late), default=0),
            }
        sampler.write(DATA / f"{result['phase']}.jsonl")
        return result


def _median(samples: list[Any], key: str) -> float | None:
    values = [s.extra[key] for s in samples if key in s.extra]
    return round(statistics.median(values), 2) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--rate", type=float, help="skip the maximum measurement")
    parser.add_argument("--max-seconds", type=float, default=20)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--max-msgs", type=int, default=100_000)
    args = parser.parse_args()
    rate = args.rate
    if rate is None:
        maximum = asyncio.run(run(args, None))
        emit(maximum, DATA / "max.json")
        rate = maximum["rate_msgs_per_s"] / 2
    emit(asyncio.run(run(args, rate)), DATA / "soak.json")


if __name__ == "__main__":
    main()
