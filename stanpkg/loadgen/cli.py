"""``stanpkg bench``: the STAN load generator, after the reference's ``stan-bench``.

    stanpkg bench [-s URL] [-c CLUSTER_ID] [-id CLIENT_ID] [-np N] [-ns N] [-n N] [-ms SIZE]
                  [-mpa N] [-qgroup NAME] [-io] [-sync] [-csv FILE] <subject>

Publishers and subscribers are separate NATS connections in one asyncio process (uvloop
when available). Output matches the reference: ``Starting benchmark [...]`` on stderr, the
``Pub stats`` / ``Sub stats`` report on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from stanpkg.client import StanBenchClient, StanError
from stanpkg.loadgen.report import Benchmark, Sample
from stanpkg.transport import NatsConnection, NatsError

DEFAULT_URL = "nats://127.0.0.1:4222"
USAGE = (
    "Usage: stanpkg bench [-s server (nats://127.0.0.1:4222)] [-c CLUSTER_ID] [-id CLIENT_ID] "
    "[-qgroup QUEUE_GROUP_NAME] [-np NUM_PUBLISHERS] [-ns NUM_SUBSCRIBERS] [-n NUM_MSGS] "
    "[-ms MESSAGE_SIZE] [-csv csvfile] [-mpa MAX_NUMBER_OF_PUBLISHED_ACKS_INFLIGHT] [-io] "
    "[-sync] [--creds credentials_file] [-u USERID] [-pw PASSWORD] <subject>"
)
STALL_TIMEOUT = 30.0  # the Go client's publish ack timeout


class BenchError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    # argparse writes its own "usage: " before the synopsis.
    usage = USAGE.removeprefix("Usage: ")
    parser = argparse.ArgumentParser(prog="stanpkg bench", usage=usage, allow_abbrev=False)

    def opt(names: tuple[str, ...], **kwargs: Any) -> None:
        # Go's flag package accepts -name and --name alike.
        parser.add_argument(*names, *(f"-{n}" for n in names if not n.startswith("--")), **kwargs)

    opt(("-s",), dest="urls", default=DEFAULT_URL, help="NATS server URLs (comma separated)")
    opt(("-c", "-cluster"), dest="cluster_id", default="test-cluster", help="cluster ID")
    opt(("-np",), dest="num_pubs", type=int, default=10, help="number of publishers")
    opt(("-ns",), dest="num_subs", type=int, default=0, help="number of subscribers")
    opt(("-n",), dest="num_msgs", type=int, default=100000, help="number of messages")
    opt(("-sync",), dest="sync", action="store_true", help="synchronous publishing")
    opt(("-ms",), dest="msg_size", type=int, default=128, help="message size in bytes")
    opt(("-io",), dest="ignore_old", action="store_true", help="subscribers ignore old messages")
    opt(("-mpa",), dest="max_pub_acks", type=int, default=512, help="max pub acks in flight")
    opt(("-id",), dest="client_id", default="benchmark", help="base client ID")
    opt(("-csv",), dest="csv_file", default="", help="save bench data to a csv file")
    opt(("-qgroup",), dest="queue", default="", help="queue group name")
    opt(("-creds",), dest="creds", default="", help="credentials file")
    opt(("-u",), dest="user", default="", help="user")
    opt(("-pw",), dest="password", default="", help="password")
    parser.add_argument("subject", nargs="?")
    return parser


def msgs_per_client(num_msgs: int, num_clients: int) -> list[int]:
    if num_clients <= 0 or num_msgs <= 0:
        return [0] * max(num_clients, 0)
    base, extra = divmod(num_msgs, num_clients)
    return [base + (1 if i < extra else 0) for i in range(num_clients)]


@dataclass
class QueueProgress:
    """Shared by the members of one queue group (Go: qTotalRecv / qSubsLeft)."""

    total: int = 0
    members_left: int = 0


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.benchmark = Benchmark("NATS Streaming")
        self.payload = bytes(max(args.msg_size, 0))
        self.queue = QueueProgress(members_left=args.num_subs if args.queue else 0)

    async def _nats(self, role: str, client_id: str) -> NatsConnection:
        try:
            return await NatsConnection.connect(
                self.args.urls,
                name="NATS Streaming Benchmark",
                user=self.args.user,
                password=self.args.password,
                credentials=self.args.creds,
            )
        except NatsError as exc:
            raise BenchError(f"{role} {client_id} can't connect: {exc}") from exc

    async def _stan(self, role: str, client_id: str) -> StanBenchClient:
        nc = await self._nats(role, client_id)
        try:
            return await StanBenchClient.connect(nc, self.args.cluster_id, client_id)
        except StanError as exc:
            await nc.close()
            raise BenchError(f"{role} {client_id} can't connect: {exc}") from exc

    async def subscriber(self, client_id: str, started: asyncio.Future[None]) -> None:
        args = self.args
        stan = await self._stan("Subscriber", client_id)
        first = last = 0.0
        received = 0  # counted here: messages may arrive before subscribe() returns
        done = asyncio.get_running_loop().create_future()
        queue = self.queue

        def on_msg(sequence: int) -> None:
            nonlocal first, last, received
            received += 1
            if received == 1:
                first = time.perf_counter()
            if args.queue:
                queue.total += 1
                finished = queue.total >= args.num_msgs
            else:
                finished = received >= args.num_msgs
            if finished and not done.done():
                last = time.perf_counter()
                done.set_result(None)

        try:
            sub = await stan.subscribe(
                args.subject, on_msg, queue=args.queue, deliver_all=not args.ignore_old
            )
        except StanError as exc:
            raise BenchError(f"Subscriber {client_id} can't subscribe: {exc}") from exc
        started.set_result(None)
        await self._until_done(done, lambda: received + queue.total)
        nc = stan.nc
        self.benchmark.subs.add(
            Sample(received, args.msg_size, first, last, io_msgs=nc.in_msgs + nc.out_msgs)
        )
        if args.queue:
            # The other members may still wait for their last message: unblock them.
            queue.members_left -= 1
            if queue.members_left > 0:
                await stan.close_subscription(sub)
                stan.publish_async(args.subject, b"done")
                await stan.wait_all_acked(STALL_TIMEOUT)
        await self._close(stan)

    async def _until_done(self, done: asyncio.Future[None], progress: Any) -> None:
        seen = -1
        while not done.done():
            now = progress()
            if now == seen:
                raise BenchError(f"no progress for {STALL_TIMEOUT:g}s, giving up")
            seen = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), STALL_TIMEOUT)

    async def publisher(self, client_id: str, count: int) -> None:
        args = self.args
        stan = await self._stan("Publisher", client_id)
        stan.max_inflight = max(args.max_pub_acks, 1)
        payload, subject = self.payload, args.subject
        start = time.perf_counter()
        try:
            if args.sync:
                for _ in range(count):
                    await stan.publish(subject, payload, STALL_TIMEOUT)
            else:
                publish = stan.publish_async
                for i in range(count):
                    if stan.inflight >= stan.max_inflight:
                        await stan.wait_for_window(STALL_TIMEOUT)
                    elif i & 127 == 0:
                        await asyncio.sleep(0)  # let acks and the other clients in
                    publish(subject, payload)
                await stan.wait_all_acked(STALL_TIMEOUT)
        except StanError as exc:
            raise BenchError(f"Publisher {client_id!r} got following error: {exc}") from exc
        if stan.ack_errors:
            raise BenchError(f"Publisher {client_id!r} got following error: {stan.ack_errors[0]}")
        end = time.perf_counter()
        nc = stan.nc
        self.benchmark.pubs.add(
            Sample(count, args.msg_size, start, end, io_msgs=nc.in_msgs + nc.out_msgs)
        )
        await self._close(stan)

    async def _close(self, stan: StanBenchClient) -> None:
        with contextlib.suppress(StanError, NatsError):
            await stan.close()
        await stan.nc.close()

    async def run(self) -> None:
        args = self.args
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []
        subscribed: list[asyncio.Future[None]] = []
        for i in range(args.num_subs):
            started: asyncio.Future[None] = loop.create_future()
            subscribed.append(started)
            client_id = f"{args.client_id}-sub-{i}"
            tasks.append(
                loop.create_task(self._guard(self.subscriber(client_id, started), started))
            )
        await asyncio.gather(*subscribed)  # subscribers first, as the reference does
        for i, count in enumerate(msgs_per_client(args.num_msgs, args.num_pubs)):
            tasks.append(loop.create_task(self.publisher(f"{args.client_id}-pub-{i}", count)))
        print(
            f"Starting benchmark [msgs={args.num_msgs}, msgsize={args.msg_size}, "
            f"pubs={args.num_pubs}, subs={args.num_subs}]",
            file=sys.stderr,
            flush=True,
        )
        await asyncio.gather(*tasks)  # the first failure ends the run (asyncio.run cancels)

    @staticmethod
    async def _guard(work: Coroutine[Any, Any, None], started: asyncio.Future[None]) -> None:
        """Run ``work``; a failure before ``started`` is set is reported through it too."""
        try:
            await work
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not args.subject:
        print(USAGE, file=sys.stderr)
        return 1
    bench = Bench(args)
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        asyncio.run(bench.run())
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        asyncio.set_event_loop_policy(None)
    print(bench.benchmark.report(), end="")
    if args.csv_file:
        with open(args.csv_file, "w", encoding="utf-8") as fh:
            fh.write(bench.benchmark.csv())
        print(f"Saved metric data in csv file {args.csv_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
