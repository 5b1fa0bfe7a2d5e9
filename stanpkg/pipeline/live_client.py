"""Talking to a live STAN server for the ``stan`` source: connecting, finding channels and
their sequence bounds (driver), reading one channel's (start, end] range (executors).

Everything goes through the STAN client protocol, so any STAN server works; the optional
monitoring endpoint only lists channels (STAN clients cannot) and gives their bounds in one
request each. Reads are plain subscriptions started at a sequence: a message removed by
limits before it was read shows up as a gap in the delivered sequences.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from stanpkg.client import (
    MessageCallback,
    StanBenchClient,
    StanError,
    StanSubscription,
)
from stanpkg.pipeline.connection_options import ConnectionOptions
from stanpkg.pipeline.live_options import LiveOptions
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport import NatsConnection, NatsError, build_tls_context
from stanpkg.transport.nuid import next_nuid

__all__ = [
    "ChannelBounds",
    "LiveSourceError",
    "MessageColumns",
    "RangeRead",
    "channel_bounds",
    "check_connection",
    "connected",
    "iter_range",
    "iter_ranges",
]

_MONITOR_PAGE = 1024
_READ_INFLIGHT = 8192  # unacknowledged messages the server may send ahead of our acks


class LiveSourceError(RuntimeError):
    """The live server could not be used (the message says which option or channel)."""


class DataLossError(LiveSourceError):
    """Messages of a micro-batch's range were removed (by limits) before they were read."""


@dataclass(frozen=True)
class ChannelBounds:
    """A channel's first and last sequence (0, 0 when it has no message)."""

    first: int
    last: int


class MessageColumns(NamedTuple):
    """A batch of delivered messages, field by field (the shape Arrow builds from)."""

    sequence: tuple[int, ...]
    subject: tuple[str, ...]
    reply: tuple[str, ...]
    data: tuple[bytes, ...]
    timestamp: tuple[int, ...]
    redelivered: tuple[bool, ...]
    crc32: tuple[int, ...]


_Row = tuple[int, str, str, bytes, int, bool, int]


@dataclass
class RangeRead:
    """What reading one range found (filled while iterating)."""

    messages: int = 0
    payload_bytes: int = 0
    lost: list[tuple[int, int]] = field(default_factory=list)

    @property
    def lost_count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.lost)


# -- connecting ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def connected(options: ConnectionOptions, role: str) -> AsyncIterator[StanBenchClient]:
    """A STAN connection for one job (``role`` names it in the server's client list):
    the live source's and the sink's."""
    tls = None
    if options.uses_tls:
        tls = build_tls_context(
            cert_file=options.tls_cert,
            key_file=options.tls_key,
            ca_file=options.tls_ca,
            skip_verify=options.tls_skip_verify,
        )
    try:
        nc = await asyncio.wait_for(
            NatsConnection.connect(
                options.servers,
                name=f"{options.client_id_prefix}-{role}",
                user=options.user,
                password=options.password,
                token=options.token,
                credentials=options.credentials,
                nkey_seed_file=options.nkey_seed_file,
                tls=tls,
                connect_timeout=options.connect_timeout,
                max_reconnect=0,
            ),
            options.connect_timeout * 2,
        )
    except (NatsError, OSError, TimeoutError) as exc:
        raise LiveSourceError(
            f"servers: cannot connect to NATS at {options.servers}: {exc or type(exc).__name__}"
        ) from None
    try:
        client_id = f"{options.client_id_prefix}-{role}-{next_nuid()}"
        try:
            stan = await StanBenchClient.connect(
                nc, options.cluster_id, client_id, timeout=options.connect_timeout
            )
        except StanError as exc:
            if exc.__cause__ is None:  # the server answered with an error
                raise LiveSourceError(f"the STAN server refused the connection: {exc}") from None
            raise LiveSourceError(
                f"cluster_id: no STAN server of cluster {options.cluster_id!r} answered at "
                f"{options.servers} within {options.connect_timeout:g} s"
            ) from None
        try:
            yield stan
        finally:
            with contextlib.suppress(StanError, NatsError, TimeoutError):
                await stan.close(timeout=options.connect_timeout)
    finally:
        await nc.close()


def check_connection(options: ConnectionOptions) -> None:
    """Fail fast (servers down, wrong cluster ID, bad credentials) with a clear error."""

    async def go() -> None:
        async with connected(options, "check"):
            pass

    asyncio.run(go())


# -- channels and their bounds (driver side) -----------------------------------------------


def channel_bounds(options: LiveOptions, known: Iterable[str] = ()) -> dict[str, ChannelBounds]:
    """Bounds of the channels the options select (and of ``known`` ones still there)."""
    if options.monitor:
        return _monitor_bounds(options, set(known))
    return asyncio.run(_probe_bounds(options, list(options.channels.patterns), set(known)))


def _monitor_get(options: LiveOptions, query: dict[str, str]) -> dict[str, object] | None:
    url = f"{options.monitor}/streaming/channelsz?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(url, timeout=options.connection.connect_timeout) as answer:
            doc = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and "channel" in query:
            return None  # removed since it was listed
        raise LiveSourceError(f"monitor: {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LiveSourceError(f"monitor: {url}: {exc}") from None
    if not isinstance(doc, dict):
        raise LiveSourceError(f"monitor: {url}: not a channelsz document")
    return doc


def _monitor_bounds(options: LiveOptions, known: set[str]) -> dict[str, ChannelBounds]:
    names: list[str] = []
    offset = 0
    while True:
        doc = _monitor_get(options, {"offset": str(offset), "limit": str(_MONITOR_PAGE)})
        assert doc is not None
        cluster = doc.get("cluster_id")
        if cluster is not None and cluster != options.connection.cluster_id:
            raise LiveSourceError(
                f"cluster_id: the server at monitor {options.monitor} is cluster "
                f"{cluster!r}, not {options.connection.cluster_id!r}"
            )
        page = doc.get("names") or []
        assert isinstance(page, list)
        names.extend(str(n) for n in page)
        offset += _MONITOR_PAGE
        total = doc.get("total")
        if not page or not isinstance(total, int) or offset >= total:
            break
    bounds: dict[str, ChannelBounds] = {}
    for name in names:
        if not (options.channels.matches(name) or name in known):
            continue
        one = _monitor_get(options, {"channel": name})
        if one is not None:
            first, last = int(str(one.get("first_seq", 0))), int(str(one.get("last_seq", 0)))
            bounds[name] = ChannelBounds(first if last else 0, last)
    return bounds


async def _probe_bounds(
    options: LiveOptions, names: list[str], known: set[str]
) -> dict[str, ChannelBounds]:
    """First/last sequences by subscribing at First and LastReceived (the first delivered
    message of each); a channel with no message delivers nothing within probeTimeout.
    The first sequence only matters where a channel starts: not probed for ``known`` ones."""

    async def first(name: str) -> int:
        return 1 if name in known else await _probe(stan, options, name, pb.First)

    async with connected(options.connection, "probe") as stan:
        found = await asyncio.gather(
            *(first(name) for name in names),
            *(_probe(stan, options, name, pb.LastReceived) for name in names),
        )
    firsts, lasts = found[: len(names)], found[len(names) :]
    return {
        name: ChannelBounds(first if last else 0, last)
        for name, first, last in zip(names, firsts, lasts, strict=True)
    }


async def _probe(
    stan: StanBenchClient, options: LiveOptions, channel: str, position: pb.StartPosition
) -> int:
    got: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_msg(sequence: int) -> None:
        if not got.done():
            got.set_result(sequence)

    sub = await _subscribe(stan, options, channel, on_msg, position=position, inflight=1)
    try:
        return await asyncio.wait_for(got, options.probe_timeout)
    except TimeoutError:
        return 0
    finally:
        with contextlib.suppress(StanError, NatsError, TimeoutError):
            await stan.close_subscription(sub, timeout=options.connection.connect_timeout)


async def _subscribe(
    stan: StanBenchClient,
    options: LiveOptions,
    channel: str,
    on_msg: Callable[[int], None],
    *,
    position: pb.StartPosition,
    sequence: int = 0,
    inflight: int,
    on_message: MessageCallback | None = None,
    last_wanted: int = 0,
) -> StanSubscription:
    try:
        return await stan.subscribe(
            channel,
            on_msg,
            start_position=position,
            start_sequence=sequence,
            on_message=on_message,
            last_wanted=last_wanted,
            max_inflight=inflight,
            timeout=options.connection.connect_timeout,
        )
    except StanError as exc:
        raise LiveSourceError(f"channel {channel}: subscribing failed: {exc}") from None


# -- reading a range (executor side) -------------------------------------------------------


def iter_ranges(
    options: LiveOptions, ranges: Iterable[tuple[str, int, int, RangeRead]], batch_rows: int
) -> Iterator[tuple[str, MessageColumns]]:
    """The messages of each (channel, start, end] in turn, in order, as (channel, batch of
    <= batch_rows): one connection for them all (a Spark task reads several small ranges).

    The event loop runs only while a list is being filled: between lists the socket is not
    read, so TCP holds the server back while Spark consumes (no unbounded buffering).
    """
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    stan: StanBenchClient | None = None
    try:
        for channel, start, end, read in ranges:
            if start >= end:
                continue
            if stan is None:
                stan = loop.run_until_complete(
                    stack.enter_async_context(connected(options.connection, "read"))
                )
            reader = _RangeReader(stan, options, channel, start, end, batch_rows, read)
            try:
                loop.run_until_complete(reader.open())
                while batch := loop.run_until_complete(reader.next_batch()):
                    yield channel, batch
            finally:
                loop.run_until_complete(reader.close())
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


def iter_range(
    options: LiveOptions, channel: str, start: int, end: int, batch_rows: int, read: RangeRead
) -> Iterator[MessageColumns]:
    """The messages of ``channel`` in (start, end], in order, in batches of <= batch_rows."""
    for _channel, batch in iter_ranges(options, [(channel, start, end, read)], batch_rows):
        yield batch


class _RangeReader:
    def __init__(
        self,
        stan: StanBenchClient,
        options: LiveOptions,
        channel: str,
        start: int,
        end: int,
        batch_rows: int,
        read: RangeRead,
    ) -> None:
        self.stan = stan
        self.options = options
        self.channel = channel
        self.end = end
        self.batch_rows = batch_rows
        self.read = read
        self.next = start + 1  # the sequence expected next
        # Rows of plain values: the MsgProto itself is freed at once, so a batch of thousands
        # does not keep the collector busy (upb messages are tracked by the cyclic GC).
        self.pending: list[_Row] = []
        self.done = False
        self.error: LiveSourceError | None = None
        self.wake = asyncio.Event()
        self.sub: StanSubscription | None = None

    async def open(self) -> None:
        # Not acknowledging the range's last `inflight` messages keeps the server from
        # sending past its end (last_wanted): a range that ends before the channel's head
        # would otherwise cost up to `inflight` messages sent, parsed and dropped.
        self.sub = await _subscribe(
            self.stan,
            self.options,
            self.channel,
            lambda _sequence: None,
            position=pb.SequenceStart,
            sequence=self.next,
            inflight=_READ_INFLIGHT,
            on_message=self.on_message,
            last_wanted=self.end,
        )

    async def close(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(StanError, NatsError, TimeoutError):
                await self.stan.close_subscription(
                    self.sub, timeout=self.options.connection.connect_timeout
                )

    def on_message(self, msg: pb.MsgProto) -> None:
        sequence = msg.sequence
        if self.done or sequence < self.next:
            return  # past the range, or a redelivery of what was read
        if sequence > self.next:
            self.lost(self.next, min(sequence - 1, self.end))
        if sequence > self.end or self.done:
            self.finish()
            return
        self.pending.append(
            (sequence, msg.subject, msg.reply, msg.data, msg.timestamp, msg.redelivered, msg.CRC32)
        )
        self.next = sequence + 1
        if sequence >= self.end:
            self.finish()
        elif len(self.pending) >= self.batch_rows:
            self.wake.set()

    def lost(self, lo: int, hi: int) -> None:
        self.read.lost.append((lo, hi))
        self.next = hi + 1
        if self.options.fail_on_data_loss:
            self.error = DataLossError(
                f"channel {self.channel}: messages {lo}..{hi} were removed (channel limits) "
                "before this query read them; option failOnDataLoss=false skips them"
            )
            self.finish()

    def finish(self) -> None:
        self.done = True
        self.wake.set()

    async def next_batch(self) -> MessageColumns | None:
        while not self.done and len(self.pending) < self.batch_rows:
            self.wake.clear()
            before = self.next
            try:
                await asyncio.wait_for(self.wake.wait(), self.options.idle_timeout)
            except TimeoutError:
                if self.next == before:  # nothing at all for idleTimeout: stalled
                    await self.stalled()
        if self.error is not None:
            raise self.error
        rows, self.pending = self.pending, []
        if not rows:
            return None
        batch = MessageColumns(*zip(*rows, strict=True))
        self.read.messages += len(rows)
        self.read.payload_bytes += sum(map(len, batch.data))
        return batch

    async def stalled(self) -> None:
        """Nothing delivered for idleTimeout: skip only what the server no longer holds.

        A lost connection or a server holding the next message but not delivering it fails
        the task (Spark retries it) whatever failOnDataLoss says: nothing was removed.
        """
        lo = self.next
        if not self.stan.nc.is_connected:
            raise LiveSourceError(
                f"channel {self.channel}: connection to {self.options.connection.servers} "
                f"lost while reading sequences {lo}..{self.end}"
            )
        first, last = await asyncio.gather(
            _probe(self.stan, self.options, self.channel, pb.First),
            _probe(self.stan, self.options, self.channel, pb.LastReceived),
        )
        if first and max(first, lo) <= min(last, self.end):
            raise LiveSourceError(  # a retried task resubscribes and sees any real gap
                f"channel {self.channel}: the server holds messages of {lo}..{self.end} but "
                f"delivered nothing for {self.options.idle_timeout:g} s (option idleTimeout)"
            )
        if self.options.fail_on_data_loss:
            self.error = DataLossError(
                f"channel {self.channel}: no message after sequence {lo - 1} for "
                f"{self.options.idle_timeout:g} s (option idleTimeout) although the range "
                f"ends at {self.end}: messages {lo}..{self.end} are no longer on the server "
                "(removed by limits, or the channel was recreated); option "
                "failOnDataLoss=false skips them"
            )
        self.read.lost.append((lo, self.end))
        self.next = self.end + 1
        self.finish()
