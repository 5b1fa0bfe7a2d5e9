"""Load on an installed (clustered) server, run as its own process so the tests can start it
inside a container's network namespace (``nsenter -n``), as stan_roundtrip.py is. It uses
the project's own fast client (stanpkg.client.StanBenchClient on NatsConnection).

``python -m tests.packaging.stan_load fill URL CLUSTER_ID --count N --channels K``
    stores N messages of 128 bytes in channels ``fill.0`` .. ``fill.<K-1>`` (N/K each),
    asynchronous publishes with many in flight; prints one JSON line (the seconds it took).

``python -m tests.packaging.stan_load load URL CLUSTER_ID --out FILE --stop-file PATH``
    publishes 128-byte messages to channel ``load`` as fast as it can with 64 PubAcks in
    flight, until PATH exists (or ``--max-seconds`` pass; ``--max-messages`` bounds it
    too). Message n carries n, its publish number. On a lost connection, a PubAck error or
    a PubAck that does not come within ``--ack-wait`` seconds it connects again (a new
    NATS connection and STAN session, retried until it gets one) and resends every
    unacknowledged message, as a STAN application does. It connects to URL first, then to
    the other servers the cluster advertised (INFO connect_urls), as a NATS client's
    reconnect does (``--local-only``: URL alone): URL is the node's own embedded
    nats-server, which restarts with the node. Writes a JSON summary to FILE: the
    acknowledged publish numbers, the longest time between two consecutive PubAcks (and
    when), the sessions.

``python -m tests.packaging.stan_load check URL CLUSTER_ID --summary FILE --fill-channels K``
    reads channel ``load`` from its first message and says which acknowledged numbers of
    the summary it does not hold (and the sequence of its first message: one past 1 means
    the channel's limits dropped messages), and the last sequence of each fill channel; one
    JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from stanpkg.client import StanBenchClient, StanError
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport import NatsError
from stanpkg.transport.connection import NatsConnection

SIZE = 128
LOAD_CHANNEL = "load"
WINDOW = 64  # PubAcks in flight
NUMBER_DIGITS = 12
FILL_RUN = 500


def payload(n: int) -> bytes:
    """Message n of the load: its number, padded to SIZE bytes."""
    return f"{n:0{NUMBER_DIGITS}d}".encode().ljust(SIZE, b".")


def number_of(data: bytes) -> int:
    return int(data[:NUMBER_DIGITS])


async def connect(urls: str, cluster_id: str, client_id: str) -> StanBenchClient:
    """A NATS connection (no reconnect of its own: the caller starts a new session) and a
    STAN session on it."""
    conn = await NatsConnection.connect(urls, name=client_id, max_reconnect=0)
    try:
        return await StanBenchClient.connect(conn, cluster_id, client_id, timeout=2.0)
    except BaseException:
        await conn.close()
        raise


async def connect_retrying(
    urls: str, cluster_id: str, client_id: str, seconds: float
) -> StanBenchClient:
    """:func:`connect`, again every half second for up to ``seconds`` (the server may
    still be starting)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await connect(urls, cluster_id, client_id)
        except (OSError, NatsError, StanError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


# -- fill ----------------------------------------------------------------------------------
async def fill(url: str, cluster_id: str, count: int, channels: int) -> dict[str, Any]:
    client = await connect_retrying(url, cluster_id, f"fill-{os.getpid()}", 30)
    client.max_inflight = 8192
    data = b"f" * SIZE
    names = [f"fill.{k}" for k in range(channels)]
    per_channel = count // channels
    started = time.monotonic()
    try:
        # Runs of FILL_RUN messages per channel, in turn (the client encodes a run at once).
        for first in range(0, per_channel, FILL_RUN):
            for name in names:
                for _ in range(min(FILL_RUN, per_channel - first)):
                    if client.inflight >= client.max_inflight:
                        await client.wait_for_window(timeout=60)
                    client.publish_async(name, data)
        await client.wait_all_acked(timeout=120)
        seconds = time.monotonic() - started
        if client.ack_errors:
            raise StanError(f"{len(client.ack_errors)} PubAck errors: {client.ack_errors[:3]}")
        await client.close()
    finally:
        await client.nc.close()
    return {
        "stored": per_channel * channels,
        "channels": channels,
        "seconds": round(seconds, 1),
        "per_second": round(per_channel * channels / seconds),
    }


# -- load ----------------------------------------------------------------------------------
class Loader:
    """Publishes message n = 0, 1, 2, ... to LOAD_CHANNEL, WINDOW unacknowledged at most;
    on a failure starts a new session and resends what is unacknowledged."""

    def __init__(
        self, url: str, cluster_id: str, ack_wait: float, follow_cluster: bool, most: int
    ) -> None:
        self.url = url
        self.most = most  # publish numbers at most (a bound on the load, with its time)
        self.cluster_id = cluster_id
        self.ack_wait = ack_wait
        self.follow_cluster = follow_cluster
        self.known: list[str] = []  # the other servers the cluster advertised
        self.next_n = 0
        self.unacked: dict[int, float] = {}  # n -> when its last copy was sent (monotonic)
        self.acked: set[int] = set()
        self.ack_times: list[float] = []  # time.time() of each PubAck, in order
        self.ack_errors: list[str] = []
        self.reconnects: list[dict[str, Any]] = []
        self.resent = 0
        self.session = 0
        self.client: StanBenchClient | None = None
        self.failure = ""
        self.stopping = False

    def urls(self) -> str:
        others = [u for u in self.known if u != self.url] if self.follow_cluster else []
        return ",".join([self.url, *others])

    def _send(self, n: int) -> None:
        assert self.client is not None
        session = self.session
        self.unacked[n] = time.monotonic()
        self.client.publish_async(
            LOAD_CHANNEL, payload(n), lambda error: self._on_ack(n, session, error)
        )

    def _on_ack(self, n: int, session: int, error: str) -> None:
        if error:
            self.ack_errors.append(error)
            if session == self.session and not self.failure:
                self.failure = f"PubAck error: {error}"
            return
        # A PubAck of an earlier session still says the message is stored.
        if n not in self.acked:
            self.acked.add(n)
            self.ack_times.append(time.time())
        self.unacked.pop(n, None)
        if session == self.session and not self.failure and not self.stopping:
            self._refill()

    def _refill(self) -> None:
        try:
            while len(self.unacked) < WINDOW and self.next_n < self.most:
                self._send(self.next_n)
                self.next_n += 1
        except NatsError as exc:
            self.failure = f"publish: {exc!r}"

    async def run(self, stop_file: Path, max_seconds: float, ready_file: Path | None) -> None:
        deadline = time.monotonic() + max_seconds
        olds: list[asyncio.Task[None]] = []
        while not self._stop_now(stop_file, deadline):
            began = time.time()
            try:
                self.client = await connect(
                    self.urls(), self.cluster_id, f"load-{os.getpid()}-{self.session}"
                )
            except (OSError, NatsError, StanError, TimeoutError) as exc:
                self.reconnects.append({"at": began, "failed": repr(exc)[:200]})
                await asyncio.sleep(0.2)
                continue
            self.known = self.client.nc.known_servers
            self.reconnects.append(
                {"at": began, "connected": round(time.time() - began, 3),
                 "url": self.client.nc.client_url, "resend": len(self.unacked)}
            )  # fmt: skip
            self.failure = ""
            for n in sorted(self.unacked):  # resent first, in order
                self._send(n)
                self.resent += 1
            self._refill()
            while not self.failure and not self._stop_now(stop_file, deadline):
                await asyncio.sleep(0.05)
                if ready_file is not None and self.acked and not ready_file.exists():
                    ready_file.write_text("acked\n")
                if self.client.nc.is_closed:
                    self.failure = f"connection lost: {self.client.nc.last_error!r}"
                elif self.unacked and time.monotonic() - min(self.unacked.values()) > self.ack_wait:
                    self.failure = f"no PubAck within {self.ack_wait} s"
            if self.failure:
                self.reconnects[-1]["ended"] = self.failure[:200]
                self.session += 1
                olds.append(asyncio.create_task(self._close_quietly(self.client)))
        self.stopping = True
        # The last PubAcks of what is in flight (the session is still up), then stop.
        drain_until = time.monotonic() + 10
        while self.unacked and self.client is not None and time.monotonic() < drain_until:
            if self.client.nc.is_closed:
                break
            await asyncio.sleep(0.05)
        if self.client is not None:
            await self._close_quietly(self.client)
        for task in olds:
            with contextlib.suppress(Exception):
                await task

    def _stop_now(self, stop_file: Path, deadline: float) -> bool:
        return stop_file.exists() or time.monotonic() > deadline

    @staticmethod
    async def _close_quietly(client: StanBenchClient) -> None:
        """Close a session that failed: a late PubAck may still come on it meanwhile."""
        with contextlib.suppress(Exception):
            if not client.nc.is_closed:
                await client.close(timeout=1.0)
        with contextlib.suppress(Exception):
            await client.nc.close(timeout=1.0)

    def summary(self) -> dict[str, Any]:
        gaps = [(b - a, a) for a, b in itertools.pairwise(self.ack_times)]
        longest, longest_at = max(gaps, default=(0.0, 0.0))
        long_gaps = sorted(([round(g, 3), a] for g, a in gaps if g > 1.0), reverse=True)
        return {
            "acked": len(self.acked),
            "published": self.next_n,
            "resent": self.resent,
            "ack_errors": len(self.ack_errors),
            "ack_error_sample": self.ack_errors[:5],
            "unacked_at_end": len(self.unacked),
            "longest_gap_s": round(longest, 3),
            "longest_gap_from": longest_at,  # time.time() of the PubAck before the gap
            "gaps_over_1s": long_gaps[:20],  # [seconds, time.time() before it]
            "first_ack_at": self.ack_times[0] if self.ack_times else 0.0,
            "last_ack_at": self.ack_times[-1] if self.ack_times else 0.0,
            "sessions": self.reconnects,
            "acked_numbers": sorted(self.acked),
        }


async def load(args: argparse.Namespace) -> dict[str, Any]:
    loader = Loader(
        args.url, args.cluster_id, args.ack_wait, not args.local_only, args.max_messages
    )
    try:
        await loader.run(Path(args.stop_file), args.max_seconds, args.ready_file)
    finally:
        summary = loader.summary()
        Path(args.out).write_text(json.dumps(summary))
    return summary


# -- check ---------------------------------------------------------------------------------
async def check(url: str, cluster_id: str, summary: Path, fill_channels: int) -> dict[str, Any]:
    expected = set(json.loads(summary.read_text())["acked_numbers"])
    client = await connect_retrying(url, cluster_id, f"check-{os.getpid()}", 60)
    seen: set[int] = set()
    state = {"received": 0, "last_at": time.monotonic(), "wanted": len(expected), "first": 0}
    done = asyncio.Event()

    def on_message(msg: pb.MsgProto) -> None:
        n = number_of(msg.data)
        if not state["received"]:
            state["first"] = msg.sequence
        state["received"] += 1
        state["last_at"] = time.monotonic()
        if n not in seen:
            seen.add(n)
            if n in expected:
                state["wanted"] -= 1
                if not state["wanted"]:
                    done.set()

    started = time.monotonic()
    try:
        sub = await client.subscribe(
            LOAD_CHANNEL,
            lambda _: None,
            deliver_all=True,
            on_message=on_message,
            max_inflight=8192,
            timeout=10,
        )
        # Until every acknowledged number came, or nothing came for 15 s.
        while not done.is_set() and time.monotonic() - state["last_at"] < 15:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1)
        read_s = time.monotonic() - started
        await client.close_subscription(sub, timeout=10)
        fill_last = {}
        for k in range(fill_channels):
            fill_last[f"fill.{k}"] = await last_sequence(client, f"fill.{k}")
        with contextlib.suppress(StanError, NatsError):
            await client.close(timeout=5)
    finally:
        await client.nc.close()
    missing = sorted(expected - seen)
    return {
        "expected": len(expected),
        "received": state["received"],
        "first_sequence": state["first"],  # over 1: the channel's limits dropped messages
        "distinct": len(seen),
        "missing": len(missing),
        "missing_sample": missing[:20],
        "read_s": round(read_s, 1),
        "fill_last": fill_last,
    }


async def last_sequence(client: StanBenchClient, channel: str) -> int:
    """The sequence of the channel's last message (0: the channel has none)."""
    got: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_message(msg: pb.MsgProto) -> None:
        if not got.done():
            got.set_result(msg.sequence)

    sub = await client.subscribe(
        channel, lambda _: None, start_position=pb.LastReceived, on_message=on_message, timeout=10
    )
    try:
        return await asyncio.wait_for(got, 15)
    except TimeoutError:
        return 0
    finally:
        await client.close_subscription(sub, timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("fill", "load", "check"):
        sub = commands.add_parser(name)
        sub.add_argument("url")
        sub.add_argument("cluster_id")
        if name == "fill":
            sub.add_argument("--count", type=int, default=200_000)
            sub.add_argument("--channels", type=int, default=4)
        elif name == "load":
            sub.add_argument("--out", required=True, help="the JSON summary")
            sub.add_argument("--stop-file", required=True, help="stops once this exists")
            sub.add_argument("--ready-file", type=Path, help="written at the first PubAck")
            sub.add_argument("--max-seconds", type=float, default=900)
            sub.add_argument("--max-messages", type=int, default=5_000_000)
            sub.add_argument("--ack-wait", type=float, default=2.0)
            sub.add_argument(
                "--local-only", action="store_true", help="never connect to another server"
            )
        else:
            sub.add_argument("--summary", type=Path, required=True)
            sub.add_argument("--fill-channels", type=int, default=4)
    args = parser.parse_args()
    if args.command == "fill":
        result = asyncio.run(fill(args.url, args.cluster_id, args.count, args.channels))
    elif args.command == "load":
        full = asyncio.run(load(args))
        result = {k: v for k, v in full.items() if k != "acked_numbers"}
    else:
        result = asyncio.run(check(args.url, args.cluster_id, args.summary, args.fill_channels))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
