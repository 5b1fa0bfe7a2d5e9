"""A channel's messages in the clustered store: appended to its subject of a shared stream
(``channel_log``), kept in the serving node's pages while memory allows and read back from
the stream on demand (``paged_messages``), and the publish IDs of the duplicate window (a
client's resend after a failover is acknowledged, not stored again).

The pages' figures are the authority on the channel's limits (max_msgs, max_bytes,
max_age, as in standalone mode); what they drop is purged from the stream later, lazily,
by the store (:meth:`ReplicatedMessages.purge_dropped`)."""

from __future__ import annotations

import asyncio
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import (
    DeduplicatingMessages,
    MessageBatch,
    MessageStore,
    PipeliningMessages,
    StoredRun,
    StoreError,
)
from stanpkg.stores.jetstream.channel_log import ChannelLog, LastWritten, Write
from stanpkg.stores.jetstream.paged_messages import PagedMessages, ReadMessage
from stanpkg.stores.jetstream.stream_writer import StreamFenced, WriteRound

__all__ = ["DUPLICATE_WINDOW", "RecentGuids", "ReplicatedMessages"]

DUPLICATE_WINDOW = 120.0  # seconds: the shared streams' own window


class ReplicatedMessages(MessageStore, DeduplicatingMessages, PipeliningMessages):
    """A channel's messages: appended to the channel's subject, then kept in memory and
    served from there. A batch enters memory only once the stream has it on a quorum;
    a batch that fails leaves no trace, and memory is then brought level with the stream
    (a write whose answer was lost may have been stored).

    Batches are sent one at a time (each expects where the one before it ended): one is
    sent when its flush begins if none is in flight, else once the one ahead is answered,
    and enters memory after it. The flushes that begin while one is in flight join one
    batch, sent whole when that one is answered: JetStream's cost per message falls
    steeply with the batch's size (a third less at 400 messages than at 100). One that
    fails fails the batches numbered after it too (their sequences counted on it)."""

    def __init__(self, cache: PagedMessages, log: ChannelLog) -> None:
        self.cache = cache
        self.limits = cache.limits
        self.channel_log = log
        self._led_here = False  # the stream's leader was brought to this node's server
        # A new channel's: awaited before its first write (until it succeeds), then dropped.
        self.prepare: Callable[[], Awaitable[None]] | None = None
        # Raises StoreError when this node may no longer write (checked before each batch).
        self.fence: Callable[[], None] | None = None
        # The store's: told the channel's name when its figures change, and when memory
        # dropped messages the stream still holds (both lazily replicated).
        self.on_change: Callable[[str], None] | None = None
        self.on_dropped: Callable[[str], None] | None = None
        self._records: list[bytes] = []
        self._stamps: list[int] = []
        self._guids: list[str] = []
        self._in_flight = 0  # messages of batches being written
        self._in_flight_guids: set[str] = set()
        self._tail: asyncio.Future[Any] | None = None  # the newest write (or purge) under way
        # The newest batch while it waits for the one ahead: later flushes join it.
        self._gathering: tuple[_Batch, asyncio.Future[Any]] | None = None
        self._behind = False  # memory may lack messages the stream has
        self._recent = RecentGuids(DUPLICATE_WINDOW)
        self._stream_first = 0  # the STAN sequence of the first message the stream holds
        # The last sequence of the channel's figures on a quorum (set by the store): its
        # messages all go from the stream only when these figures say where it goes on.
        self.recorded_last = 0
        cache.on_trimmed = self._changed  # the limits applied once a page was read
        # At promotion, until its stream has a leader and its figures are read (the
        # store's ChannelLoads): (count, bytes, first, last) as last recorded, shown
        # meanwhile; nothing is stored or readable until finish_loading.
        self._loading: asyncio.Future[None] | None = None
        self._recorded_figures = (0, 0, 0, 0)
        self.wanted = asyncio.Event()  # a waiter asks for it: it is read first

    # -- loading at promotion ------------------------------------------------------------

    def start_loading(self, count: int, size: int, first: int, last: int) -> None:
        self._loading = asyncio.get_running_loop().create_future()
        self._recorded_figures = (count, size, first, last)

    @property
    def loading(self) -> bool:
        return self._loading is not None

    async def wait_loaded(self) -> None:
        loading = self._loading
        if loading is not None:
            self.wanted.set()
            await asyncio.shield(loading)

    def finish_loading(self, failure: StoreError | None = None) -> None:
        """Loaded (after :meth:`restore` and :meth:`apply_limits`), or not loadable: the
        waiters go on, and deliveries start."""
        loading, self._loading = self._loading, None
        if loading is None or loading.done():
            return
        if failure is None:
            loading.set_result(None)
        else:
            self._loading = loading  # stays unservable: the node steps down
            loading.set_exception(failure)
            loading.exception()  # retrieved: a waiter is optional
            return
        if self.cache.on_readable is not None:
            self.cache.on_readable()

    def restore(self, figures: RestoredFigures, now: int) -> None:
        """The channel at promotion, from its figures (no message read but those written
        after the figures were last recorded, ``figures.tail``, whose publish IDs join
        the duplicate window); then the limits, age included, as a standalone store
        recovers (reading the oldest page when they bind)."""
        log, cache = self.channel_log, self.cache
        last = figures.last_written
        log.start_at(last)
        if last is not None and figures.first:
            cache.restore(figures.first, last.sequence, figures.size, figures.last_timestamp)
        else:
            cache.start_after(max(figures.recorded_last, last.sequence if last else 0))
            if last is None:
                log.last_sequence = figures.recorded_last
        self._stream_first = figures.stream_first if last is not None else 0
        tail = figures.tail
        if tail:
            cache.fill_tail(tail)
            self._recent.add_stamped(figures.tail_guids, [m.timestamp for m in tail])
        self.recorded_last = figures.recorded_last
        cache.expire(now)

    async def apply_limits(self) -> None:
        """After :meth:`restore`: the count and size limits, reading what they need."""
        await self.cache.apply_limits()

    @property
    def on_readable(self) -> Callable[[], None] | None:
        return self.cache.on_readable

    @on_readable.setter
    def on_readable(self, hook: Callable[[], None] | None) -> None:
        self.cache.on_readable = hook

    def has_guid(self, guid: str) -> bool:
        return guid in self._recent or guid in self._in_flight_guids or guid in self._guids

    @property
    def first_sequence(self) -> int:
        if self._loading is not None:
            return self._recorded_figures[2]
        return self.cache.first_sequence

    @property
    def last_sequence(self) -> int:
        if self._loading is not None:
            return self._recorded_figures[3]
        return self.cache.last_sequence  # what subscribers may be sent: written

    @property
    def last_assigned_sequence(self) -> int:
        """The newest sequence handed out by :meth:`store`, written or being written."""
        return self.cache.last_sequence + self._in_flight + len(self._records)

    @property
    def last_timestamp(self) -> int:
        return self._stamps[-1] if self._stamps else self.cache.last_timestamp

    def state(self) -> tuple[int, int]:
        if self._loading is not None:
            return self._recorded_figures[:2]
        return self.cache.state()

    def store(self, batch: MessageBatch) -> StoredRun:
        if self._loading is not None:  # the server waits for wait_loaded first
            raise StoreError(f"channel {self.cache.channel!r} is still being loaded")
        first = self.last_assigned_sequence + 1
        messages = batch.messages
        count = len(messages)
        if not count:
            return StoredRun(first, first - 1)
        stamp = batch.timestamp
        stamps = [stamp] * count
        ids = batch.guids or [""] * count
        self.channel_log.append_run(first, messages, stamps, ids)
        self._records.extend(MsgEncoder(self.cache.channel, stamp).encode_run(first, messages))
        self._stamps.extend(stamps)
        self._guids.extend(ids)
        return StoredRun(first, first + count - 1)

    def lookup(self, sequence: int) -> bytes | None:
        return self.cache.lookup(sequence)

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        return self.cache.lookup_run(first, last)

    def readable_until(self, first: int, last: int) -> int:
        if self._loading is not None:
            return first - 1  # on_readable once loaded
        return self.cache.readable_until(first, last)

    async def find_time(self, timestamp: int) -> None:
        await self.wait_loaded()
        await self.cache.find_time(timestamp)

    async def load(self, first: int, last: int) -> None:
        """The messages first..last in memory, once the channel is loaded."""
        await self.wait_loaded()
        await self.cache.load(first, last)

    def sequence_at_or_after(self, timestamp: int) -> int:
        return self.cache.sequence_at_or_after(timestamp)

    def expire(self, now: int) -> int:
        if self._loading is not None:
            return 0  # restore expires what aged meanwhile
        first = self.cache.first_sequence
        stamp = self.cache.expire(now)
        if self.cache.first_sequence != first:
            self._changed()
        return stamp

    # -- the figures and the purges the store replicates lazily ----------------------------

    def _changed(self) -> None:
        name = self.cache.channel
        if self.on_change is not None:
            self.on_change(name)
        if self.on_dropped is not None and self.needs_purge:
            self.on_dropped(name)

    @property
    def needs_purge(self) -> bool:
        """Whether the stream holds messages of the channel that memory dropped."""
        if not self._stream_first:
            return False
        count, _ = self.cache.state()
        return not count or self.cache.first_sequence > self._stream_first

    def purge_dropped(self) -> Awaitable[str] | None:
        """Start purging from the stream the messages memory dropped (limits, age); what
        is awaited says why it failed ("" when it did not). None when there is nothing to
        purge now. While the channel keeps a message, the purge runs beside the writes
        (the channel's last message, which the next write expects, stays); once it keeps
        none, everything goes, in turn with the writes (the next one then expects none)."""
        if not self.needs_purge:
            return None
        if self.cache.state()[0]:
            first = self.cache.first_sequence
            below = self.channel_log.positions.stream_seq(first) or self.cache.stream_seq_of(first)
            if not below:
                # Not known here: never purge what may be kept. Its page is read, so the
                # next round knows (promotion: what the last node dropped, unpurged).
                self.cache.readable_until(first, first)
                if self.on_dropped is not None:
                    self.on_dropped(self.cache.channel)
                return None
            return asyncio.ensure_future(self._purge(below, first))
        if not self._recorded():
            return None
        task = asyncio.ensure_future(self._purge_all(self._tail))
        self._tail = task
        return task

    async def _purge(self, below: int, first: int) -> str:
        try:
            await self.channel_log.purge_below(below)
        except StoreError as exc:
            return str(exc)
        self._stream_first = max(self._stream_first, first)
        self.channel_log.positions.drop_below(first)
        return ""

    async def _purge_all(self, previous: asyncio.Future[Any] | None) -> str:
        if previous is not None:
            await asyncio.gather(asyncio.shield(previous), return_exceptions=True)
        if self.cache.state()[0] or self._behind or not self.channel_log.fence:
            return ""  # written meanwhile (purged in part later), or not known here
        if not self._recorded():
            return ""
        try:
            await self.channel_log.purge_below(self.channel_log.fence + 1)
        except StoreError as exc:
            return str(exc)
        self._stream_first = 0
        self.channel_log.positions.clear()
        return ""

    def _recorded(self) -> bool:
        """Whether the recorded figures reach the channel's last sequence; if not, the
        purge waits for them (the store is told again)."""
        if self.cache.last_sequence <= self.recorded_last:
            return True
        if self.on_dropped is not None:
            self.on_dropped(self.cache.channel)
        return False

    # -- writing ---------------------------------------------------------------------------

    async def flush(self) -> None:
        await self.begin_flush()

    def begin_flush(self) -> asyncio.Future[Any]:
        records, stamps, guids = self._records, self._stamps, self._guids
        self._records, self._stamps, self._guids = [], [], []
        self._in_flight += len(records)
        self._in_flight_guids.update(guids)
        gathering = self._gathering
        if gathering is not None and gathering[1] is self._tail and not self._tail.done():
            # Joins the batch waiting to be sent (its sequences follow that batch's).
            batch = gathering[0]
            batch.records.extend(records)
            batch.stamps.extend(stamps)
            batch.guids.extend(guids)
            batch.writes.extend(self.channel_log.take())
            return self._tail
        batch = _Batch(records, stamps, guids, self.channel_log.take())
        previous = self._tail
        # Numbered after a batch still in flight: it stands or falls with that one.
        after = previous if previous is not None and not previous.done() else None
        sent = None
        ready = self._led_here and not self._behind and self.prepare is None and self._may_write()
        if batch.writes and ready and after is None:
            sent = self.channel_log.send(batch.writes)
        task = asyncio.get_running_loop().create_task(self._write(batch, sent, previous, after))
        self._tail = task
        self._gathering = (batch, task) if sent is None else None
        return task

    def _close_gathering(self, batch: _Batch) -> None:
        """No flush joins ``batch`` any more: it is written now (or failed)."""
        if self._gathering is not None and self._gathering[0] is batch:
            self._gathering = None

    def _may_write(self) -> bool:
        if self.fence is None:
            return True
        try:
            self.fence()
        except StoreError:
            return False
        return True

    async def _write(
        self,
        batch: _Batch,
        sent: WriteRound | None,
        previous: asyncio.Future[Any] | None,
        after: asyncio.Future[Any] | None,
    ) -> None:
        try:
            if previous is not None:
                try:
                    await asyncio.shield(previous)  # in order: a later batch waits
                except StoreError as exc:
                    if previous is after:
                        if sent is not None:
                            self.channel_log.abandon(sent)
                        raise StoreError(f"an earlier write to the channel failed: {exc}") from exc
            if self.prepare is not None:
                await self.prepare()
                self.prepare = None
            if not self._led_here:
                # Before the first write of this leadership to the stream, with none in
                # flight: a write sent while the stream's leadership moves may go
                # unanswered (5 s).
                await self.channel_log.settle_leader()
                self._led_here = True
            if self._behind:
                await self._catch_up()
            self._close_gathering(batch)
            # The lease is checked before each batch is sent, the first and each retry.
            await self.channel_log.write(batch.writes, sent, check=self.fence)
        except StoreError as exc:
            self._close_gathering(batch)
            self._settled(batch)
            self._behind = True
            if isinstance(exc, StreamFenced):
                channel = self.channel_log.channel
                raise StoreError(f"channel {channel!r} was written by another node: {exc}") from exc
            raise
        except BaseException:
            self._close_gathering(batch)
            self._settled(batch)
            self._behind = True
            raise
        self._settled(batch)
        if batch.records:
            first = batch.writes[0][0]
            stream_seqs = self.channel_log.positions.stream_seqs(first, len(batch.records))
            self._append(batch.records, batch.stamps, batch.guids, first, stream_seqs)

    def _append(
        self,
        records: list[bytes],
        stamps: list[int],
        guids: list[str],
        first: int,
        stream_seqs: Sequence[int] = (),
    ) -> None:
        """Written messages into memory (``first``: their first sequence)."""
        self.cache.append_records(records, stamps, stream_seqs)
        self._recent.add_stamped(guids, stamps)
        if not self._stream_first:
            self._stream_first = first
        self._changed()

    def _settled(self, batch: _Batch) -> None:
        self._in_flight -= len(batch.records)
        self._in_flight_guids.difference_update(batch.guids)

    async def _catch_up(self) -> None:
        """Memory brought level with the stream after a write whose outcome is unknown:
        the channel's messages past the last one this node knows, read from its subject."""
        log = self.channel_log
        last = await log.last_message()
        have = self.cache.last_sequence
        if last is not None and last.sequence > have:
            records: list[bytes] = []
            stamps: list[int] = []
            guids: list[str] = []
            stream_seqs: list[int] = []
            first = 0
            async for stored in log.read_after(log.fence, last.stream_seq):
                message = stored.message
                if message.sequence <= have:
                    continue
                first = first or message.sequence
                records.append(message.record)
                stamps.append(message.timestamp)
                guids.append(message.guid)
                stream_seqs.append(stored.stream_seq)
                log.positions.add(message.sequence, stored.stream_seq, packed=True)
            if records:
                self._append(records, stamps, guids, first, stream_seqs)
        if last is not None:
            log.fence = last.stream_seq
            log.last_sequence = max(last.sequence, have)
        self._behind = False

    def close(self) -> None:
        self.cache.close()


@dataclass(frozen=True, slots=True)
class RestoredFigures:
    """What a promotion knows of a channel without reading its messages: the figures
    last recorded, corrected by its last message in the stream and the messages stored
    after ``recorded_last`` (``tail``, read, with their publish IDs)."""

    first: int  # its first message's sequence (0: none stored)
    size: int  # the bytes of first..last
    last_timestamp: int
    recorded_last: int  # the last sequence of the figures' record
    last_written: LastWritten | None  # its last message in the stream
    tail: Sequence[ReadMessage] = ()
    tail_guids: Sequence[str] = ()
    stream_first: int = 0  # its first message in the stream (dropped ones included)


@dataclass(frozen=True, slots=True)
class _Batch:
    """The messages of one flush and their stream writes."""

    records: list[bytes]
    stamps: list[int]
    guids: list[str]
    writes: list[Write]


class RecentGuids:
    """Publish IDs stored within the duplicate window (by the messages' timestamps), so
    that a client's resend after a failover is acknowledged instead of stored again.

    Flat, not a tuple and list per run: with many channels a run is one or two messages
    (a channel's share of a flush), and objects per run cost more than the IDs
    themselves (measured at 2,000 channels: about 150 bytes a run, 60 MiB for 2
    minutes of writes). The IDs in one deque in the order stored, and each run of one
    timestamp as two array entries (its timestamp and how many IDs it holds)."""

    __slots__ = ("_counts", "_head", "_ids", "_order", "_stamps", "_window_ns")

    def __init__(self, window: float) -> None:
        self._window_ns = int(window * 1e9)
        self._order: deque[str] = deque()  # every kept ID, oldest first
        self._ids: set[str] = set()
        self._stamps = array("q")  # each run's timestamp, from index _head on
        self._counts = array("q")  # and how many IDs of _order it holds
        self._head = 0  # the runs before it are gone (compacted from time to time)

    def __contains__(self, guid: str) -> bool:
        return guid in self._ids

    def __len__(self) -> int:
        return len(self._order)

    def add_stamped(self, guids: Sequence[str], stamps: Sequence[int]) -> None:
        if not guids:
            return
        if stamps[0] == stamps[-1]:  # stamps never decrease: one run
            self._add_run(stamps[-1], guids)
        else:
            start = 0
            for index in range(1, len(stamps) + 1):
                if index == len(stamps) or stamps[index] != stamps[start]:
                    self._add_run(stamps[start], guids[start:index])
                    start = index
        self._expire()

    def _add_run(self, stamp: int, guids: Sequence[str]) -> None:
        run = [guid for guid in guids if guid]
        if not run:
            return
        self._order.extend(run)
        self._ids.update(run)
        stamps, counts = self._stamps, self._counts
        if len(stamps) > self._head and stamps[-1] == stamp:
            counts[-1] += len(run)
        else:
            stamps.append(stamp)
            counts.append(len(run))

    def _expire(self) -> None:
        stamps, counts, order, ids = self._stamps, self._counts, self._order, self._ids
        end = len(stamps)
        head = self._head
        if head == end:
            return
        horizon = stamps[end - 1] - self._window_ns
        while head < end and stamps[head] < horizon:
            for _ in range(counts[head]):
                ids.discard(order.popleft())
            head += 1
        if head > 64 and head * 2 > end:  # compacted once most runs are gone
            del stamps[:head]
            del counts[:head]
            head = 0
        self._head = head
