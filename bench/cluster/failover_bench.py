"""kill -9 of the serving node under acked publishing, side by side: stanpkg's 3-node
cluster (its streaming process and its nats-server killed together, as when the machine
dies) and the Go reference's (one process), alternating round by round.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/cluster/failover_bench.py --rounds 5

A publisher on the followers' URLs waits for each PubAck and, on a failure, reconnects to
the other survivor and resends the same message, as a STAN client does. Per round: the
longest time without a PubAck, acknowledged messages missing afterwards (must be 0), and
for stanpkg which JetStream servers led the channel, the records and the lease (a stream
led by the dead node waits for JetStream's election). Then the worst and the median stall
of each side.

With ``--steady`` the publisher is an application's instead: async publishes at a steady
rate on one connection, never resent. Per round it counts the publishes that got no
PubAck within 20 s (the client's wait), and when they were sent after the kill.

``--channels K`` spreads the publishes over K channels (message n to ``orders.<n % K>``):
the serving node then leads K channel streams, each of which needs its own election.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from cluster_bench import servers, start_cluster, stop  # noqa: E402 - a sibling script

from stanpkg.client import StanBenchClient, StanSubscription  # noqa: E402
from stanpkg.proto import protocol_pb2 as pb  # noqa: E402
from stanpkg.transport.connection import NatsConnection  # noqa: E402

CHANNEL = "orders"
BEFORE, AFTER = 300, 300  # acked messages before the kill, and after it to finish


def channel_of(n: int, channels: int) -> str:
    """The channel message n goes to: one, or ``orders.<n % channels>``."""
    return CHANNEL if channels == 1 else f"{CHANNEL}.{n % channels}"


class Publisher:
    """Publish b'p<n>' one at a time; on a failure resend n through the next URL."""

    def __init__(self, urls: list[str], channels: int = 1) -> None:
        self.urls = urls
        self.channels = channels
        self.acked: list[int] = []
        self.stalls: list[float] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        n, last_ack, client, conn = 0, time.monotonic(), None, None
        while not self.stop.is_set():
            try:
                if client is None:
                    conn = await NatsConnection.connect(self.urls[0], name="failover-pub")
                    client = await StanBenchClient.connect(conn, "bench", f"pub{n}")
                await client.publish(channel_of(n, self.channels), f"p{n}".encode(), timeout=2.0)
                now = time.monotonic()
                self.stalls.append(now - last_ack)
                last_ack = now
                self.acked.append(n)
                n += 1
            except Exception:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                client = conn = None
                self.urls.append(self.urls.pop(0))
                await asyncio.sleep(0.2)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


class SteadyPublisher:
    """Publish b'p<n>' at a steady rate on one connection (a follower's URL, which lives
    on) and never resend, as an application using a STAN client's async publish does: a
    publish whose PubAck does not come within ACK_WAIT (the client's PubAckWait) is what
    the application sees fail."""

    RATE = 200  # publishes per second
    ACK_WAIT = 20.0

    def __init__(self, url: str) -> None:
        self.url = url
        self.sent_at: list[float] = []
        self.acked_at: dict[int, float] = {}
        self.acked: list[int] = []  # in the order the PubAcks came
        self.stop = asyncio.Event()

    async def run(self) -> None:
        conn = await NatsConnection.connect(self.url, name="failover-steady")
        client = await StanBenchClient.connect(conn, "bench", "steady")
        try:
            while not self.stop.is_set():
                n = len(self.sent_at)
                self.sent_at.append(time.monotonic())
                client.publish_async(CHANNEL, f"p{n}".encode(), partial(self._on_ack, n))
                await asyncio.sleep(1 / self.RATE)
            deadline = self.sent_at[-1] + self.ACK_WAIT
            while client.inflight and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    def _on_ack(self, n: int, error: str) -> None:
        if not error:
            self.acked_at[n] = time.monotonic()
            self.acked.append(n)

    def report(self, killed_at: float) -> dict[str, object]:
        """Publishes sent after the kill: how many failed (no PubAck in time) and over
        which span of send times; the longest time without a PubAck."""
        late = [
            n for n, sent in enumerate(self.sent_at)
            if self.acked_at.get(n, float("inf")) - sent > self.ACK_WAIT
        ]  # fmt: skip
        times = sorted(self.acked_at.values())
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return {
            "publishes": len(self.sent_at),
            "failed": len(late),
            "failed_sent_from_kill": (
                [
                    round(self.sent_at[late[0]] - killed_at, 2),
                    round(self.sent_at[late[-1]] - killed_at, 2),
                ]
                if late
                else []
            ),
            "longest_stall": round(max(gaps, default=0.0), 3),
        }


async def stored_sequence_of_each(url: str, expected: int, channels: int = 1) -> set[int]:
    """The n of every b'p<n>' the channels hold, read from the first message."""
    conn = await NatsConnection.connect(url, name="failover-check")
    client = await StanBenchClient.connect(conn, "bench", "check", timeout=10)
    seen: set[int] = set()
    done = asyncio.Event()

    def on_message(msg: pb.MsgProto) -> None:
        seen.add(int(msg.data[1:]))
        if len(seen) >= expected:
            done.set()

    subs: list[StanSubscription] = [
        await client.subscribe(
            channel_of(index, channels),
            lambda _: None,
            deliver_all=True,
            on_message=on_message,
            timeout=10,
        )
        for index in range(channels)
    ]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), 30)
    for sub in subs:
        await client.close_subscription(sub)
    await conn.close()
    return seen


async def stream_leaders(url: str) -> list[tuple[str, str]]:
    """stanpkg: (kind, the JetStream server leading it) of each of its streams: every
    channel's ("channel"), the records' and the lease's (KV buckets)."""
    import nats

    nc = await nats.connect(url)
    try:
        out = []
        for info in await nc.jetstream().streams_info():
            name = str(info.config.name)
            kind = "channel" if name.startswith("STAN_") else name.rsplit("_", 1)[-1].lower()
            kind = kind if kind in ("channel", "lease") else "records"
            out.append((kind, str(info.cluster.leader if info.cluster else "")))
        return out
    finally:
        await nc.close()


def kill_node(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of the node's process and of its children (stanpkg's nats-server)."""
    children = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    proc.kill()
    proc.wait()


async def one_round(
    command: list[str],
    name: str,
    *,
    victim: str = "serving",
    keep: bool = False,
    steady: bool = False,
    channels: int = 1,
) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix="failover-bench-"))
    # Both servers allow 100 channels by default: more need max_channels lifted.
    limits = ["-mc", "0"] if channels > 100 else []
    procs, followers, serving = start_cluster([*command, *limits], workdir)
    urls = [f"nats://127.0.0.1:{port}" for port in followers]
    # A follower's death: the publisher uses the other follower's URL first.
    dead = serving if victim == "serving" else next(n for n in "abc" if n != serving)
    if victim == "follower":
        urls.reverse()
    try:
        await asyncio.sleep(2)  # let the followers settle
        if steady:
            return await _steady_round(name, procs, dead, victim, urls[0])
        publisher = Publisher(list(urls), channels)
        task = asyncio.create_task(publisher.run())
        while len(publisher.acked) < BEFORE:
            await asyncio.sleep(0.02)
        leaders = await stream_leaders(urls[0]) if name == "stanpkg" else []
        killed_wall = time.strftime("%H:%M:%S") + f"{time.time() % 1:.3f}"[1:]
        kill_node(procs["abc".index(dead)])
        killed_at = len(publisher.acked)
        deadline = time.monotonic() + 90
        while len(publisher.acked) < killed_at + AFTER and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        publisher.stop.set()
        await task
        acked = set(publisher.acked)
        stored = await stored_sequence_of_each(urls[0], max(acked) + 1, channels)
        return {
            "server": name,
            "longest_stall": round(max(publisher.stalls), 3),
            "acked": len(acked),
            "lost": len(acked - stored),
            "resumed": len(publisher.acked) >= killed_at + AFTER,
            "dead_node": f"{dead} ({victim})",
            "killed_at": killed_wall,
            "dead_node_led": dict(collections.Counter(k for k, v in leaders if v == dead)),
        }
    finally:
        stop([p for p in procs if p.poll() is None])
        if keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


async def _steady_round(
    name: str, procs: list[subprocess.Popen[bytes]], dead: str, victim: str, url: str
) -> dict[str, object]:
    publisher = SteadyPublisher(url)
    task = asyncio.create_task(publisher.run())
    while len(publisher.acked) < BEFORE:
        await asyncio.sleep(0.02)
    kill_node(procs["abc".index(dead)])
    killed_at = time.monotonic()
    killed_count = len(publisher.acked)
    deadline = killed_at + 30
    while len(publisher.acked) < killed_count + AFTER and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    publisher.stop.set()
    await task
    acked = set(publisher.acked)
    stored = await stored_sequence_of_each(url, len(acked))
    return {
        "server": name,
        **publisher.report(killed_at),
        "acked": len(acked),
        "lost": len(acked - stored),
        "dead_node": f"{dead} ({victim})",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("stanpkg", "go"), help="one side only")
    parser.add_argument("--build", default="", help="a directory with a stanpkg build")
    parser.add_argument("--keep", action="store_true", help="keep the nodes' logs")
    parser.add_argument(
        "--kill", choices=("serving", "follower"), default="serving", help="which node dies"
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="publish at a steady rate without resending (an application's async "
        "publishes): count the publishes that get no PubAck within 20 s",
    )
    parser.add_argument(
        "--channels", type=int, default=1, help="spread the publishes over this many channels"
    )
    args = parser.parse_args()
    found = servers(args.build)
    if found is None:
        return 2
    _, commands = found
    names = [args.only] if args.only else list(commands)
    stalls: dict[str, list[float]] = {name: [] for name in names}
    failed: dict[str, list[int]] = {name: [] for name in names}
    for round_no in range(args.rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            result = asyncio.run(
                one_round(
                    commands[name],
                    name,
                    victim=args.kill,
                    keep=args.keep,
                    steady=args.steady,
                    channels=args.channels,
                )
            )
            print(json.dumps({"round": round_no, **result}), flush=True)
            stalls[name].append(float(result["longest_stall"]))  # type: ignore[arg-type]
            failed[name].append(int(result.get("failed", 0)))  # type: ignore[call-overload]
    for name, values in stalls.items():
        print(
            f"{name}: longest stall median {statistics.median(values):.2f} s, "
            f"worst {max(values):.2f} s, best {min(values):.2f} s ({len(values)} rounds)"
            + (
                f"; publishes failed, median {statistics.median(failed[name])}"
                if args.steady
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
