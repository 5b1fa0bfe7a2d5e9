"""A channel's messages in the clustered store: appended to the channel's stream
(``channel_streams``), kept in the leader's memory and served from there, and the publish
IDs of the duplicate window (a client's resend after a failover is acknowledged, not
stored again)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import MessageBatch, MessageStore, StoredRun, StoreError
from stanpkg.stores.jetstream.channel_streams import (
    DUPLICATE_WINDOW,
    ChannelStream,
    Sent,
    StreamFenced,
    Writes,
)
from stanpkg.stores.memory import MemoryMessageStore

__all__ = ["RecentGuids", "ReplicatedMessages"]


class ReplicatedMessages(MessageStore):
    """A channel's messages: appended to the channel's stream, then kept in memory and
    served from there. A batch enters memory only once the stream has it on a quorum;
    a batch that fails leaves no trace, and memory is then brought level with the stream
    (a write whose reply was lost may have been stored).

    Batches are pipelined: each is sent when its flush begins, ahead of the answers for
    the ones before it, and enters memory after them. One that fails fails the batches
    numbered after it too (their sequences counted on it)."""

    deduplicates = True

    def __init__(self, cache: MemoryMessageStore, stream: ChannelStream) -> None:
        self.cache = cache
        self.limits = cache.limits
        self.stream = stream
        self._stream_ready = False
        self._led_here = False  # the stream's leader was brought to this node's server
        # A new channel's: awaited before its first write (until it succeeds), then dropped.
        self.prepare: Callable[[], Awaitable[None]] | None = None
        # Raises StoreError when this node may no longer write (checked before each batch).
        self.fence: Callable[[], None] | None = None
        self._records: list[bytes] = []
        self._stamps: list[int] = []
        self._guids: list[str] = []
        self._in_flight = 0  # messages of batches being written
        self._in_flight_guids: set[str] = set()
        self._tail: asyncio.Task[None] | None = None  # the newest batch being written
        self._behind = False  # memory may lack messages the stream has
        self._recent = RecentGuids(DUPLICATE_WINDOW)

    def restore(
        self, first: int, last: int, records: list[bytes], stamps: list[int], guids: list[str]
    ) -> None:
        """The stream's content at promotion (contiguous: limits only drop the oldest)."""
        self._stream_ready = True
        self.stream.last_sequence = last
        self.cache.start_after(first - 1 if records else last)
        if records:
            self.cache.append_records(records, stamps)
            self._recent.add_stamped(guids, stamps)

    def has_guid(self, guid: str) -> bool:
        return guid in self._recent or guid in self._in_flight_guids or guid in self._guids

    @property
    def first_sequence(self) -> int:
        return self.cache.first_sequence

    @property
    def last_sequence(self) -> int:
        return self.cache.last_sequence  # what subscribers may be sent: written

    @property
    def last_assigned_sequence(self) -> int:
        """The newest sequence handed out by :meth:`store`, written or being written."""
        return self.cache.last_sequence + self._in_flight + len(self._records)

    @property
    def last_timestamp(self) -> int:
        return self._stamps[-1] if self._stamps else self.cache.last_timestamp

    def state(self) -> tuple[int, int]:
        return self.cache.state()

    def store(self, batch: MessageBatch) -> StoredRun:
        first = self.last_assigned_sequence + 1
        messages = batch.messages
        count = len(messages)
        if not count:
            return StoredRun(first, first - 1)
        stamp = batch.timestamp
        stamps = [stamp] * count
        ids = batch.guids or [""] * count
        self.stream.append_run(first, messages, stamps, ids)
        self._records.extend(MsgEncoder(self.cache.channel, stamp).encode_run(first, messages))
        self._stamps.extend(stamps)
        self._guids.extend(ids)
        return StoredRun(first, first + count - 1)

    def lookup(self, sequence: int) -> bytes | None:
        return self.cache.lookup(sequence)

    def sequence_at_or_after(self, timestamp: int) -> int:
        return self.cache.sequence_at_or_after(timestamp)

    def expire(self, now: int) -> int:
        return self.cache.expire(now)  # the stream's max_age drops them there too

    async def flush(self) -> None:
        await self.begin_flush()

    def begin_flush(self) -> asyncio.Task[None]:
        batch = _Batch(self._records, self._stamps, self._guids, self.stream.take())
        self._records, self._stamps, self._guids = [], [], []
        previous = self._tail
        # Numbered after a batch still in flight: it stands or falls with that one.
        after = previous if previous is not None and not previous.done() else None
        sent = None
        ready = (
            self._stream_ready
            and self._led_here
            and not self._behind
            and self.prepare is None
            and self._may_write()
        )
        if batch.writes and ready and (after is None or self.stream.pipelines):
            sent = self.stream.send(batch.writes)
        self._in_flight += len(batch.records)
        self._in_flight_guids.update(batch.guids)
        task = asyncio.get_running_loop().create_task(self._write(batch, sent, previous, after))
        self._tail = task
        return task

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
        sent: Sent | None,
        previous: asyncio.Task[None] | None,
        after: asyncio.Task[None] | None,
    ) -> None:
        try:
            if previous is not None:
                try:
                    await asyncio.shield(previous)  # in order: a later batch waits
                except StoreError as exc:
                    if previous is after:
                        if sent is not None:
                            self.stream.abandon(sent)
                        raise StoreError(f"an earlier write to the channel failed: {exc}") from exc
            if self.prepare is not None:
                await self.prepare()
                self.prepare = None
            if not self._stream_ready:
                await self.stream.ensure()
                self._stream_ready = True
            if not self._led_here:
                # Before the first write of this leadership, with none in flight: a write
                # sent while the stream's leadership moves may go unanswered (5 s).
                await self.stream.settle_leader()
                self._led_here = True
            if self._behind:
                await self._catch_up()
            if sent is None and self.fence is not None:
                self.fence()
            await self.stream.write(batch.writes, sent)
        except StoreError as exc:
            self._settled(batch)
            self._behind = True
            if isinstance(exc, StreamFenced):
                channel = self.stream.channel
                raise StoreError(f"channel {channel!r} was written by another node: {exc}") from exc
            raise
        except BaseException:
            self._settled(batch)
            self._behind = True
            raise
        self._settled(batch)
        if batch.records:
            self.cache.append_records(batch.records, batch.stamps)
            self._recent.add_stamped(batch.guids, batch.stamps)

    def _settled(self, batch: _Batch) -> None:
        self._in_flight -= len(batch.records)
        self._in_flight_guids.difference_update(batch.guids)

    async def _catch_up(self) -> None:
        last = await self.stream.stream_last()
        have = self.cache.last_sequence
        if last > have:
            records: list[bytes] = []
            stamps: list[int] = []
            guids: list[str] = []
            async for record, guid in self.stream.read(have + 1, last):
                records.append(record)
                stamps.append(pb.MsgProto.FromString(record).timestamp)
                guids.append(guid)
            if records:
                self.cache.append_records(records, stamps)
                self._recent.add_stamped(guids, stamps)
        self.stream.last_sequence = max(last, have)
        self._behind = False

    def close(self) -> None:
        self.cache.close()


@dataclass(frozen=True, slots=True)
class _Batch:
    """The messages of one flush and their stream writes."""

    records: list[bytes]
    stamps: list[int]
    guids: list[str]
    writes: Writes


class RecentGuids:
    """Publish IDs stored within the duplicate window (by the messages' timestamps), so
    that a client's resend after a failover is acknowledged instead of stored again.
    Kept by runs of one timestamp: a publish batch is one run (one set update, one entry)."""

    def __init__(self, window: float) -> None:
        self._window_ns = int(window * 1e9)
        self._order: deque[tuple[int, list[str]]] = deque()
        self._ids: set[str] = set()

    def __contains__(self, guid: str) -> bool:
        return guid in self._ids

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
        horizon = self._order[-1][0] - self._window_ns if self._order else 0
        while self._order and self._order[0][0] < horizon:
            self._ids.difference_update(self._order.popleft()[1])

    def _add_run(self, stamp: int, guids: Sequence[str]) -> None:
        run = [guid for guid in guids if guid]
        if run:
            self._order.append((stamp, run))
            self._ids.update(run)
