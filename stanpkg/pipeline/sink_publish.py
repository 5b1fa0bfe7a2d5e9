"""Publishing a task's rows for the ``stan`` sink (executor side; no Spark here).

One STAN connection per task, opened at its first row. Rows are published in the order
they come, with at most ``maxInflight`` PubAcks outstanding, and the task returns only
once every PubAck has come back without error: a task that returns has all its rows on
the server. Anything else (a refused message, no PubAck for ``ackTimeout``, the connection
lost) raises :class:`SinkError`, which fails the task so that Spark retries it: at least
once, a retried task publishes its rows again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from stanpkg.client import StanBenchClient, StanError
from stanpkg.pipeline.live_client import LiveSourceError, connected
from stanpkg.pipeline.sink_options import FAIL_FIRST_ATTEMPT, SinkOptions, channel_problem
from stanpkg.transport import NatsError

__all__ = ["CHANNEL", "DATA", "PublishResult", "SinkError", "publish_batches"]

DATA = "data"
CHANNEL = "channel"

_CHUNK = 1024  # publishes between two turns of the event loop (writes out, PubAcks in)
_POLL = 0.2  # seconds between checks of the connection while PubAcks are awaited


class SinkError(RuntimeError):
    """Publishing failed (the message names the option, column, channel or server)."""


@dataclass
class PublishResult:
    """What a task published (every message acknowledged)."""

    messages: int = 0
    payload_bytes: int = 0
    channels: set[str] = field(default_factory=set)


def publish_batches(
    options: SinkOptions, batches: Iterable[pa.RecordBatch], *, fail_after: int | None = None
) -> PublishResult:
    """Publish every row of ``batches`` (columns ``data``, optional ``channel``) in order
    and wait for all the PubAcks. ``fail_after``: fail on purpose once that many rows are
    acknowledged (tests make Spark retry a task with it)."""
    loop = asyncio.new_event_loop()
    publisher = _Publisher(options, fail_after)
    try:
        # Spark's iterator is read outside the loop: while the next batch is prepared the
        # socket is not read, and PubAcks wait in it (at most maxInflight of them).
        for batch in batches:
            if batch.num_rows:
                loop.run_until_complete(publisher.publish(batch))
        loop.run_until_complete(publisher.finish())
        return publisher.result
    finally:
        loop.run_until_complete(publisher.close())
        loop.close()


class _Publisher:
    def __init__(self, options: SinkOptions, fail_after: int | None) -> None:
        self.options = options
        self.fail_after = fail_after
        self.result = PublishResult()
        self.stack = contextlib.AsyncExitStack()
        self.stan: StanBenchClient | None = None
        self.checked: set[str] = set()  # channel names found valid
        # Refilling the window in chunks keeps maxInflight a bound without one turn of the
        # event loop per PubAck.
        self.chunk = max(1, min(_CHUNK, options.max_inflight // 4))

    async def connect(self) -> StanBenchClient:
        try:
            stan = await self.stack.enter_async_context(connected(self.options.connection, "write"))
        except LiveSourceError as exc:
            raise SinkError(str(exc)) from None
        stan.max_inflight = self.options.max_inflight
        return stan

    async def publish(self, batch: pa.RecordBatch) -> None:
        if self.fail_after is not None:
            batch = batch.slice(0, self.fail_after - self.result.messages)
        data, channels = self.columns(batch)
        stan = self.stan = self.stan or await self.connect()
        publish, max_inflight, chunk = stan.publish_async, self.options.max_inflight, self.chunk
        rows: Iterable[tuple[str, bytes]] = (
            zip(channels, data, strict=True)
            if isinstance(channels, list)
            else ((channels, d) for d in data)
        )
        count = 0
        try:
            for channel, payload in rows:
                if stan.inflight >= max_inflight:
                    await self.wait_acks(max_inflight - chunk)
                publish(channel, payload)
                count += 1
                if count % chunk == 0:
                    await asyncio.sleep(0)  # send what is queued, take the PubAcks in
        except NatsError as exc:
            self.raise_publish_error(exc, batch)
        self.result.messages += count
        self.check_acks()
        if self.fail_after is not None and self.result.messages >= self.fail_after:
            await self.wait_acks(0)
            raise SinkError(
                f"failing this task attempt on purpose after {self.fail_after} acknowledged "
                f"row(s) (option {FAIL_FIRST_ATTEMPT}, for tests only)"
            )
        await asyncio.sleep(0)

    def columns(self, batch: pa.RecordBatch) -> tuple[list[bytes], str | list[str]]:
        """The payloads as bytes, and the channel of every row (or the one of all)."""
        names = batch.schema.names
        data = batch.column(names.index(DATA))
        if data.null_count:
            raise SinkError(
                f"column {DATA}: a row has a null payload (row {_first_null(data)} of a batch "
                "of this task); filter or fill nulls before writing"
            )
        if pa.types.is_string(data.type):
            data = data.cast(pa.binary())
        elif pa.types.is_large_string(data.type):
            data = data.cast(pa.large_binary())
        payloads: list[bytes] = data.to_pylist()
        self.result.payload_bytes += pc.sum(pc.binary_length(data)).as_py() or 0
        default = self.options.channel
        if CHANNEL not in names:
            self.check_channel(default)
            return payloads, default
        channel = batch.column(names.index(CHANNEL))
        if channel.null_count:
            if not default:
                raise SinkError(
                    f"column {CHANNEL}: a row has a null channel (row {_first_null(channel)} "
                    "of a batch of this task) and option channel is not set"
                )
            channel = pc.fill_null(channel, default)
        for name in pc.unique(channel).to_pylist():
            self.check_channel(name)
        return payloads, channel.to_pylist()

    def check_channel(self, name: str) -> None:
        if name in self.checked:
            return
        problem = channel_problem(name)
        if problem:
            raise SinkError(f"column {CHANNEL}: {problem}")
        self.checked.add(name)
        self.result.channels.add(name)

    async def wait_acks(self, at_most: int) -> None:
        """Until at most ``at_most`` PubAcks are outstanding. Fails on a refused message,
        a lost connection, or ackTimeout seconds without a single PubAck."""
        stan = self.stan
        assert stan is not None
        loop = asyncio.get_running_loop()
        acked, since = stan.acked, loop.time()
        while stan.inflight > at_most:
            self.check_acks()
            if not stan.nc.is_connected:
                raise SinkError(
                    f"servers: connection to {self.options.connection.servers} lost with "
                    f"{stan.inflight} message(s) not acknowledged"
                )
            if stan.acked != acked:
                acked, since = stan.acked, loop.time()
            elif loop.time() - since >= self.options.ack_timeout:
                raise SinkError(
                    f"no PubAck from the STAN server for {self.options.ack_timeout:g} s "
                    f"(option ackTimeout) with {stan.inflight} message(s) not acknowledged"
                )
            with contextlib.suppress(StanError):
                await stan.wait_for_inflight(at_most, min(_POLL, self.options.ack_timeout))
        self.check_acks()

    def check_acks(self) -> None:
        stan = self.stan
        if stan is not None and stan.ack_errors:
            where = ", ".join(sorted(self.result.channels)[:5])
            raise SinkError(
                f"the STAN server refused a message ({stan.ack_errors[0]}); "
                f"this task publishes to: {where}"
            )

    def raise_publish_error(self, exc: NatsError, batch: pa.RecordBatch) -> None:
        stan = self.stan
        assert stan is not None
        if not stan.nc.is_connected:
            raise SinkError(
                f"servers: connection to {self.options.connection.servers} lost while publishing"
            ) from None
        largest = pc.max(pc.binary_length(batch.column(batch.schema.names.index(DATA))))
        raise SinkError(
            f"cannot publish: {exc or type(exc).__name__} (the largest payload of the batch is "
            f"{largest.as_py()} bytes; the NATS server's max_payload is {stan.nc.max_payload})"
        ) from None

    async def finish(self) -> None:
        if self.stan is not None:
            await self.wait_acks(0)

    async def close(self) -> None:
        await self.stack.aclose()


def _first_null(column: pa.Array) -> int:
    return int(pc.index(pc.is_null(column), True).as_py())
