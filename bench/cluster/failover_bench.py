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
``--publishers P`` runs P such publishers at once, each on its own connection, publisher
i sending the messages n = i mod P (with P = K: one channel each, as applications do); a
round then also reports the median publisher's longest stall.

``--how`` says how the serving node goes (default ``kill``): ``kill`` is kill -9 of every
process of it, as when the host dies; ``crash`` kill -9 of the streaming process only
(stanpkg's Python process, its nats-server left to notice; for Go, whose node is one
process, the same as kill); ``term`` SIGTERM of the streaming process, as a rolling
restart stops it, its exit awaited (``exit_s``, at most 60 s) while the publisher goes on.

A cluster that holds data, as operators fail one over: ``--fill N`` (default 0) stores N
messages of 128 bytes in the freshly started cluster before the round's publisher starts,
message n to ``fill.<n % K>`` for ``--fill-channels K`` (default 4), fast: async
publishes on 4 connections to a follower's URL, 2,500 PubAcks awaited on each. Per round:
how long the fill took (``fill_s``, also on stderr as it ends) and its rate, each node's
RSS in MiB once filled (``rss_mib``; stanpkg: its Python process and its nats-server, Go:
its one process) and the survivors' after the round (``rss_mib_after``), and whether
every fill channel still ends at its last filled sequence (``fill_last_ok``: a
StartWithLastReceived subscription through a survivor, so the new serving node answers;
``fill_last_bad`` names the first channels that do not). Both servers keep 1,000,000
messages a channel by default: fill at most that many per channel. The summary line of
each side names the --how and --fill it ran, and adds the median fill time and the
rounds whose fill channels were intact.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/cluster/failover_bench.py \
        --rounds 3 --fill 1000000 --fill-channels 4 --how term
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
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from cluster_bench import FLAG_HELP, PACK_BYTES_HELP, servers, start_cluster, stop  # noqa: E402 - a sibling script

from stanpkg.client import StanBenchClient, StanSubscription  # noqa: E402
from stanpkg.proto import protocol_pb2 as pb  # noqa: E402
from stanpkg.transport.connection import NatsConnection  # noqa: E402

CHANNEL = "orders"
FILL_CONNECTIONS, FILL_WINDOW = 4, 2500  # the fill: connections, PubAcks awaited on each
FILL_CHECKS_AT_ONCE = 50  # fill channels whose last message is asked for at once
PAYLOAD = bytes(128)  # a fill message
TERM_WAIT = 60  # seconds a SIGTERM'd node gets to exit
BEFORE, AFTER = 300, 300  # acked messages before the kill, and after it to finish


def channel_of(n: int, channels: int) -> str:
    """The channel message n goes to: one, or ``orders.<n % channels>``."""
    return CHANNEL if channels == 1 else f"{CHANNEL}.{n % channels}"


class Publisher:
    """Publish b'p<n>' one at a time, n = first, first + step, ...; on a failure resend n
    through the next URL. Several of them (``step`` > 1) share ``acked``."""

    def __init__(
        self,
        urls: list[str],
        channels: int = 1,
        *,
        first: int = 0,
        step: int = 1,
        acked: list[int] | None = None,
    ) -> None:
        self.urls = urls
        self.channels = channels
        self.first, self.step = first, step
        self.acked: list[int] = [] if acked is None else acked
        self.stalls: list[float] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        n, last_ack, client, conn = self.first, time.monotonic(), None, None
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
                n += self.step
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


async def stored_sequence_of_each(url: str, wanted: set[int], channels: int = 1) -> set[int]:
    """The n of every b'p<n>' the channels hold, read from the first message until every
    n of ``wanted`` came (or 30 s passed)."""
    conn = await NatsConnection.connect(url, name="failover-check")
    client = await StanBenchClient.connect(conn, "bench", "check", timeout=10)
    seen: set[int] = set()
    missing = set(wanted)
    done = asyncio.Event()

    def on_message(msg: pb.MsgProto) -> None:
        n = int(msg.data[1:])
        seen.add(n)
        missing.discard(n)
        if not missing:
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


def children_of(pid: int) -> list[int]:
    """The processes ``pid`` started (stanpkg's nats-server; none for Go)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(child) for child in found.stdout.split()]


def node_rss_mib(proc: subprocess.Popen[bytes]) -> float:
    """The resident memory of a node, in MiB: its process and its children (stanpkg's
    nats-server); 0 for a node that is gone."""
    if proc.poll() is not None:
        return 0.0
    total = 0
    for pid in [proc.pid, *children_of(proc.pid)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return round(total / 1024, 1)


def fill_counts(count: int, channels: int) -> list[int]:
    """How many of ``count`` messages, round-robin, each fill channel gets: its last
    sequence once filled."""
    return [count // channels + (k < count % channels) for k in range(channels)]


async def fill(url: str, count: int, channels: int) -> dict[str, object]:
    """``count`` messages of 128 bytes, message n to ``fill.<n % channels>``: async
    publishes on FILL_CONNECTIONS connections to ``url``, up to FILL_WINDOW PubAcks awaited
    on each. How long it took, and the publishes that failed (a PubAck with an error, or
    a connection's error)."""

    async def one(index: int) -> list[str]:
        conn = await NatsConnection.connect(url, name=f"failover-fill{index}")
        try:
            client = await StanBenchClient.connect(conn, "bench", f"fill{index}", timeout=10)
            for n in range(index, count, FILL_CONNECTIONS):
                client.publish_async(f"fill.{n % channels}", PAYLOAD)
                if client.inflight >= FILL_WINDOW:
                    await client.wait_for_inflight(FILL_WINDOW // 2, timeout=60)
            await client.wait_all_acked(timeout=60)
            return client.ack_errors
        except Exception as exc:  # the round goes on: fill_last_ok tells what was kept
            return [f"{type(exc).__name__}: {exc}"]
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    started = time.monotonic()
    errors = [e for run in await asyncio.gather(*map(one, range(FILL_CONNECTIONS))) for e in run]
    seconds = time.monotonic() - started
    return {
        "fill_s": round(seconds, 2),
        "fill_msgs_per_s": round(count / seconds),
        **({"fill_errors": len(errors), "fill_first_error": errors[0]} if errors else {}),
    }


async def fill_last_sequences(url: str, count: int, channels: int) -> dict[str, object]:
    """Whether every fill channel still ends at its last filled sequence: a subscription
    from its last message (StartWithLastReceived) through ``url``, so the serving node
    answers. The channels that do not, with the sequence found (None: no message)."""
    conn = await NatsConnection.connect(url, name="failover-fill-check")
    client = await StanBenchClient.connect(conn, "bench", "fill-check", timeout=10)
    loop = asyncio.get_running_loop()

    async def last_of(channel: str) -> int | str | None:
        got: asyncio.Future[int] = loop.create_future()

        def on_message(msg: pb.MsgProto) -> None:
            if not got.done():
                got.set_result(msg.sequence)

        try:
            sub = await client.subscribe(
                channel,
                lambda _: None,
                start_position=pb.LastReceived,
                on_message=on_message,
                timeout=10,
            )
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        try:
            return await asyncio.wait_for(got, 30)
        except TimeoutError:
            return None
        finally:
            with contextlib.suppress(Exception):
                await client.close_subscription(sub, timeout=10)

    try:
        wanted = fill_counts(count, channels)
        found: list[int | str | None] = []
        for start in range(0, channels, FILL_CHECKS_AT_ONCE):
            chunk = range(start, min(channels, start + FILL_CHECKS_AT_ONCE))
            found += await asyncio.gather(*(last_of(f"fill.{k}") for k in chunk))
        # A channel given no message (more channels than messages) has none to find.
        bad = {
            f"fill.{k}": [got, wanted[k]]
            for k, got in enumerate(found)
            if got != (wanted[k] or None)
        }
        shown = dict(itertools.islice(bad.items(), 5))
        return {"fill_last_ok": not bad, **({"fill_last_bad": shown} if bad else {})}
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        await conn.close()


def stop_serving_node(proc: subprocess.Popen[bytes], how: str) -> dict[str, object]:
    """kill: kill -9 of every process of the node; crash: of its streaming process only
    (stanpkg's nats-server lives on, for Go the same as kill); term: SIGTERM, and its exit
    awaited (at most TERM_WAIT s). How long it took to exit, and its exit status."""
    started = time.monotonic()
    if how == "kill":
        kill_node(proc)
    elif how == "crash":
        proc.kill()
        proc.wait()
    else:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(TERM_WAIT)
    return {"exit_s": round(time.monotonic() - started, 2), "exit_status": proc.poll()}


def kill_node(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 of the node's process and of its children (stanpkg's nats-server)."""
    for pid in children_of(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def kill_leftovers(pids: list[int]) -> None:
    """kill -9 of the nats-servers of a stopped node still running once the round is over
    (after a crash or a term, they are meant to stop by themselves)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"nats-server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


async def one_round(
    command: list[str],
    name: str,
    *,
    victim: str = "serving",
    keep: bool = False,
    steady: bool = False,
    channels: int = 1,
    filled: int = 0,
    fill_channels: int = 4,
    how: str = "kill",
    publishers: int = 1,
) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix="failover-bench-"))
    # Both servers allow 100 channels by default: more need max_channels lifted.
    limits = ["-mc", "0"] if max(channels, fill_channels if filled else 0) > 100 else []
    procs, followers, serving = start_cluster([*command, *limits], workdir)
    urls = [f"nats://127.0.0.1:{port}" for port in followers]
    # A follower's death: the publisher uses the other follower's URL first.
    dead = serving if victim == "serving" else next(n for n in "abc" if n != serving)
    if victim == "follower":
        urls.reverse()
    dead_proc = procs["abc".index(dead)]
    dead_children = children_of(dead_proc.pid)
    loaded: dict[str, object] = {}
    outcome: dict[str, object] = {}
    try:
        await asyncio.sleep(2)  # let the followers settle
        if filled:
            loaded = await fill(urls[0], filled, fill_channels)
            print(f"{name}: filled {filled} in {loaded['fill_s']} s", file=sys.stderr, flush=True)
            await asyncio.sleep(2)  # the followers caught up, the figures recorded
            loaded["rss_mib"] = {n: node_rss_mib(p) for n, p in zip("abc", procs, strict=True)}
        stopping = partial(stop_serving_node, dead_proc, how)
        if steady:
            result = await _steady_round(stopping, urls[0])
        else:
            result = await _acked_round(
                stopping, urls, channels, name == "stanpkg", dead, publishers
            )
        if filled:
            loaded |= await fill_last_sequences(urls[0], filled, fill_channels)
            loaded["rss_mib_after"] = {
                n: node_rss_mib(p) for n, p in zip("abc", procs, strict=True) if n != dead
            }
        outcome = {
            "server": name,
            "how": how,
            "fill": filled,
            **({"fill_channels": fill_channels} if filled else {}),
            "dead_node": f"{dead} ({victim})",
            **result,
            **loaded,
        }
        return outcome
    finally:
        stop([p for p in procs if p.poll() is None])
        kill_leftovers(dead_children)
        # A round that went wrong keeps its nodes' logs even without --keep: it cannot be
        # run again to see why.
        if keep or went_wrong(outcome):
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def went_wrong(outcome: dict[str, object]) -> bool:
    """No outcome (the round failed), an acknowledged message lost, a failed fill
    publish or a fill channel not ending at its last sequence."""
    return (
        not outcome
        or bool(outcome.get("lost"))
        or bool(outcome.get("fill_errors"))
        or outcome.get("fill_last_ok") is False
    )


async def _acked_round(
    stopping: Callable[[], dict[str, object]],
    urls: list[str],
    channels: int,
    jetstream: bool,
    dead: str,
    publishers: int = 1,
) -> dict[str, object]:
    acked: list[int] = []
    group = [
        Publisher(list(urls), channels, first=first, step=publishers, acked=acked)
        for first in range(publishers)
    ]
    tasks = [asyncio.create_task(publisher.run()) for publisher in group]
    # Every publisher in its stride before the kill.
    while len(acked) < BEFORE or min(len(publisher.stalls) for publisher in group) < 3:
        await asyncio.sleep(0.02)
    leaders = await stream_leaders(urls[0]) if jetstream else []
    killed_wall = time.strftime("%H:%M:%S") + f"{time.time() % 1:.3f}"[1:]
    # In a thread: the publisher goes on while a SIGTERM'd node takes its time to exit.
    exited = await asyncio.to_thread(stopping)
    killed_at = [len(publisher.stalls) for publisher in group]
    deadline = time.monotonic() + 90

    def resumed() -> bool:
        """Every publisher got AFTER PubAcks after the kill (at least one, with several)."""
        wanted = AFTER if publishers == 1 else 1
        return all(
            len(publisher.stalls) >= before + wanted
            for publisher, before in zip(group, killed_at, strict=True)
        )

    while not resumed() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for publisher in group:
        publisher.stop.set()
    await asyncio.gather(*tasks)
    stored = await stored_sequence_of_each(urls[0], set(acked), channels)
    longest = [max(publisher.stalls) for publisher in group]
    # The publishers that waited longest, with the channel of their first message.
    slowest = sorted(
        (
            (round(stall, 3), channel_of(p.first, channels))
            for stall, p in zip(longest, group, strict=True)
        ),
        reverse=True,
    )[:3]
    return {
        "longest_stall": round(max(longest), 3),
        # What one publisher (with one channel each: one channel) waited, at the median.
        **(
            {"publisher_stall_median": round(statistics.median(longest), 3), "slowest": slowest}
            if publishers > 1
            else {}
        ),
        "acked": len(set(acked)),
        "lost": len(set(acked) - stored),
        "resumed": resumed(),
        "killed_at": killed_wall,
        **exited,
        "dead_node_led": dict(collections.Counter(k for k, v in leaders if v == dead)),
    }


async def _steady_round(stopping: Callable[[], dict[str, object]], url: str) -> dict[str, object]:
    publisher = SteadyPublisher(url)
    task = asyncio.create_task(publisher.run())
    while len(publisher.acked) < BEFORE:
        await asyncio.sleep(0.02)
    killed_at = time.monotonic()
    exited = await asyncio.to_thread(stopping)
    killed_count = len(publisher.acked)
    deadline = killed_at + 30
    while len(publisher.acked) < killed_count + AFTER and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    publisher.stop.set()
    await task
    acked = set(publisher.acked)
    stored = await stored_sequence_of_each(url, acked)
    return {
        **publisher.report(killed_at),
        "acked": len(acked),
        "lost": len(acked - stored),
        **exited,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("stanpkg", "go"), help="one side only")
    parser.add_argument("--build", default="", help="a directory with a stanpkg build")
    parser.add_argument("--pack-bytes", default="", help=PACK_BYTES_HELP)
    parser.add_argument("--stanpkg-flag", action="append", default=[], help=FLAG_HELP)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep every round's node logs (a round that went wrong keeps them anyway)",
    )
    parser.add_argument(
        "--kill", choices=("serving", "follower"), default="serving", help="which node dies"
    )
    parser.add_argument(
        "--how",
        choices=("kill", "crash", "term"),
        default="kill",
        help="how the node goes: kill -9 of all its processes (the host dies), of its "
        "streaming process only (stanpkg's nats-server left to notice), or SIGTERM (a rolling "
        "restart), its exit awaited",
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
    parser.add_argument(
        "--publishers",
        type=int,
        default=1,
        help="publishers at once, each its own connection; publisher i sends the messages "
        "n = i mod P (with P = --channels: one channel each, as applications do)",
    )
    parser.add_argument(
        "--fill",
        type=int,
        default=0,
        help="messages of 128 bytes stored in the fresh cluster before the round",
    )
    parser.add_argument(
        "--fill-channels", type=int, default=4, help="channels fill.<k> the fill goes to"
    )
    args = parser.parse_args()
    if args.fill < 0 or args.fill_channels < 1:
        parser.error("--fill must be >= 0 and --fill-channels >= 1")
    if args.publishers < 1 or (args.publishers > 1 and args.steady):
        parser.error("--publishers must be >= 1, and 1 with --steady")
    found = servers(args.build, args.pack_bytes, args.stanpkg_flag)
    if found is None:
        return 2
    _, commands = found
    names = [args.only] if args.only else list(commands)
    results: dict[str, list[dict[str, object]]] = {name: [] for name in names}
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
                    filled=args.fill,
                    fill_channels=args.fill_channels,
                    how=args.how,
                    publishers=args.publishers,
                )
            )
            print(json.dumps({"round": round_no, **result}), flush=True)
            results[name].append(result)
    ran = f"--how {args.how}, --kill {args.kill}, --fill {args.fill}"
    ran += f" over {args.fill_channels} channels" if args.fill else ""
    for name, rounds in results.items():
        print(f"{name} ({ran}): {summary(rounds, steady=args.steady)}")
    return 0


def summary(rounds: list[dict[str, object]], *, steady: bool) -> str:
    """The stalls' median, worst and best; messages lost; the publishes failed (steady);
    the fill's median time and the rounds whose fill channels kept their last sequence."""

    def values(key: str) -> list[float]:
        return [float(r[key]) for r in rounds if key in r]  # type: ignore[arg-type]

    stalls = values("longest_stall")
    line = (
        f"longest stall median {statistics.median(stalls):.2f} s, worst {max(stalls):.2f} s, "
        f"best {min(stalls):.2f} s ({len(stalls)} rounds); lost {sum(values('lost')):.0f}"
    )
    if per_publisher := values("publisher_stall_median"):
        line += f"; one publisher's longest stall, median {statistics.median(per_publisher):.2f} s"
    if steady:
        line += f"; publishes failed, median {statistics.median(values('failed')):.0f}"
    if fill_s := values("fill_s"):
        kept = sum(1 for r in rounds if r.get("fill_last_ok") is True)
        line += f"; fill median {statistics.median(fill_s):.1f} s"
        line += f", fill_last_ok in {kept}/{len(rounds)} rounds"
    return line


if __name__ == "__main__":
    sys.exit(main())
