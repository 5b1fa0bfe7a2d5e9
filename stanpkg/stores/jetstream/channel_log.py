"""One channel in its shared stream: its writes, its reads, and where its messages are.

A channel is one subject of a shared stream (``layout.channel_subject``). Its messages
carry their STAN sequence (``Stan-Sequence``): the store numbers them, never the stream,
so a channel's sequences stay dense and the reference's, whichever stream holds it.

Writes are fenced per channel: each flush is one atomic batch (``stream_writer``) whose
first message expects the stream sequence of the channel's last message
(``Nats-Expected-Last-Subject-Sequence``, 0 for none; :attr:`ChannelLog.fence`), so
JetStream stores a channel's messages only in order and a node that lost the lease
cannot append. A batch is sent once the one before it is answered (the answer says where
its last message went, which the next one expects); other channels' batches are in
flight meanwhile. A batch refused for what it expected is judged by the channel's last
message as the stream's leader has it: stored already (the answer was lost), the stream
where it should be (sent again), or another writer (StreamFenced).

What nats-server 2.15.1 does, checked with a script before this was written:

* an atomic batch takes ``Nats-Expected-Last-Subject-Sequence`` on its first message and
  is refused as a whole when it does not match (err_code 10071, "wrong last sequence: N",
  N the subject's last stream sequence); on a later message of the batch the header is
  refused even with the value that would follow (10164), so only the first carries it;
* a batch's messages get consecutive stream sequences, and its answer (the commit's
  PubAck, ``{"stream", "seq", "batch", "count"}``) gives the last one's: a channel's runs
  of sequences map onto the stream (:class:`StreamPositions`);
* a batch holding a ``Nats-Msg-Id`` the stream has within its duplicate window, whatever
  subject the other message was on, or twice, is refused as a whole (10201, "atomic
  publish batch contains duplicate message id"): one channel's publish ID would refuse
  another channel's write, so publish IDs go in a plain header (``record_codec``), and only
  streams written before that carry them in ``Nats-Msg-Id``;
* a purge with ``filter`` and ``seq`` removes the subject's messages below ``seq``; once
  a subject has none, a write expecting 0 is taken and one expecting the old last refused;
* ``STREAM.MSG.GET`` with ``last_by_subj`` (answered by the stream's leader) gives the
  subject's last message with its headers, err_code 10037 when it has none; a direct get
  with ``next_by_subj`` and ``batch`` reads one subject from any stream sequence, ending
  with status 204 (or 404 when nothing follows);
* one atomic batch may hold several subjects of the stream; a stream without
  ``allow_atomic`` refuses batches (10174).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import NamedTuple

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.channel_reader import Known, first_stored, locate, read_run
from stanpkg.stores.jetstream.connection import API_TIMEOUT
from stanpkg.stores.jetstream.layout import channel_subject, shared_stream_name
from stanpkg.stores.jetstream.paged_messages import ReadMessage
from stanpkg.stores.jetstream.record_codec import (
    HEADER_GUID,
    HEADER_MSG_ID,
    HEADER_SEQUENCE,
    PACK_BYTES,
    Write,
    decode_stream_messages,
    message_span,
    pack_runs,
    packed_batch_messages,
)
from stanpkg.stores.jetstream.shared_streams import StoredMessage
from stanpkg.stores.jetstream.stream_management import purge_subject
from stanpkg.stores.jetstream.stream_positions import StreamPositions
from stanpkg.stores.jetstream.stream_reader import last_of_subject, read_subject
from stanpkg.stores.jetstream.stream_writer import (
    ATOMIC_BATCH_MAX,
    BATCH_DUPLICATE_ID,
    FENCE_REFUSALS,
    BatchWriter,
    StreamFenced,
    WriteResult,
    WriteRound,
)
from stanpkg.transport.connection import NatsConnection

__all__ = ["WRITE_BUDGET", "ChannelLog", "LastWritten", "Write", "Writes"]

WRITE_BUDGET = 15.0  # seconds of retries while a stream elects a new leader
RETRY_INTERVAL = 0.25

Writes = Sequence[Write]  # (sequence, publish ID, reply, timestamp, payload)


class LastWritten(NamedTuple):
    """A channel's last message in its stream: its stream sequence, its STAN sequence
    and its publish ID; ``first``: the first STAN sequence of its stream message (a
    pack's), 0 for the same as ``sequence``."""

    stream_seq: int
    sequence: int
    guid: str
    first: int = 0


class ChannelLog:
    """Writing and reading one channel in its shared stream ``index``."""

    def __init__(
        self,
        conn: NatsConnection,
        writer: BatchWriter,
        cluster_id: str,
        channel: str,
        index: int,
        pack_bytes: int = PACK_BYTES,
    ) -> None:
        self._conn = conn
        self._writer = writer
        self.channel = channel
        self.index = index
        self.stream = shared_stream_name(cluster_id, index)
        self.subject = channel_subject(cluster_id, index, channel)
        self.writer_id = ""  # unique per leadership: set by the store at promotion
        # The stream sequence of the channel's last message (0: none), which the next
        # write expects, and that message's STAN sequence.
        self.fence = 0
        self.last_sequence = 0
        self.positions = StreamPositions()
        # A flush of small messages is packed into stream messages of at most this size
        # (0: none), within what the NATS server takes in one message.
        self.pack_bytes = min(pack_bytes, conn.max_payload // 2)
        self._queued: list[Write] = []
        # Brings the stream's JetStream leader to this node's server (set by the store).
        self.settle_leader_of: Callable[[str], Awaitable[None]] | None = None

    def start_at(self, last: LastWritten | None) -> None:
        """Continue after ``last``, the channel's last message in the stream (None: it
        has none)."""
        self.fence = last.stream_seq if last is not None else 0
        self.last_sequence = last.sequence if last is not None else 0
        self.positions.clear()
        if last is not None:  # a read of the last stream message's messages needs no search
            first = last.first or last.sequence
            self.positions.add(first, last.stream_seq, last.sequence - first + 1, packed=True)

    async def settle_leader(self) -> None:
        if self.settle_leader_of is not None:
            await self.settle_leader_of(self.stream)

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, sequence: int, reply: str, timestamp: int, payload: bytes, guid: str = ""
    ) -> None:
        # A message without a publisher's ID gets the writer's: after a lost answer, the
        # channel's last message then tells this node's write from another node's.
        guid = guid or f"{self.writer_id}:{self.channel}:{sequence}"
        self._queued.append((sequence, guid, reply, timestamp, payload))

    def append_write(self, write: Write) -> None:
        """Queue (sequence, guid, reply, timestamp, payload) as it is (an empty guid stays
        empty: a converted message)."""
        self._queued.append(write)

    def append_run(
        self,
        first: int,
        messages: Sequence[tuple[str, bytes]],
        timestamps: Sequence[int],
        guids: Sequence[str],
    ) -> None:
        """:meth:`append` of each (reply, payload) of ``messages``, numbered from
        ``first``: one call per batch on the hot path."""
        own = f"{self.writer_id}:{self.channel}:"
        self._queued += [
            (sequence, guid or f"{own}{sequence}", reply, stamp, payload)
            for sequence, (reply, payload), stamp, guid in zip(
                range(first, first + len(messages)), messages, timestamps, guids, strict=True
            )
        ]

    def discard(self) -> None:
        self._queued.clear()

    def take(self) -> list[Write]:
        """The writes appended since the last take, for :meth:`send` and :meth:`write`."""
        writes, self._queued = self._queued, []
        return writes

    def send(self, writes: Writes) -> WriteRound:
        """Publish the first atomic batch of ``writes`` now, expecting :attr:`fence`."""
        batch = writes[:ATOMIC_BATCH_MAX]
        messages = packed_batch_messages(
            batch,
            pack_runs(batch, self.pack_bytes),
            self._writer.batch_id(self.writer_id),
            self.fence,
        )
        return self._writer.send(self.subject, messages)

    def abandon(self, sent: WriteRound) -> None:
        """The answer to ``sent`` is no longer awaited."""
        self._writer.abandon(sent)

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        await self.write(self.take(), budget=budget)

    async def write(
        self,
        writes: Writes,
        sent: WriteRound | None = None,
        *,
        budget: float = WRITE_BUDGET,
        check: Callable[[], None] | None = None,
    ) -> None:
        """Every write of ``writes`` on a quorum, in order (``sent``: their first batch,
        sent already). While the stream has no leader (an election after a node died)
        they are sent again, for ``budget`` seconds at most; then StoreError, and
        StreamFenced when the channel is not where this node expected it. ``check`` is
        called before each batch is sent: its StoreError ends the write (the store's: the
        lease went meanwhile, so nothing more may be written; retrying would only delay
        the node's step-down by the budget)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while writes:
            batch = writes[:ATOMIC_BATCH_MAX]
            if sent is None and check is not None:
                check()
            round_ = sent or self.send(batch)
            sent = None
            try:
                result = await self._writer.answer(round_, API_TIMEOUT)
            except StoreError as exc:  # unknown: sent again, then judged by the fence
                result = WriteResult(error=str(exc))
            if result.ok:
                self._stored(batch, result.stored)
                writes = writes[len(batch) :]
                continue
            if result.err_code in FENCE_REFUSALS and await self._judge(batch, result):
                writes = writes[len(batch) :]  # it was stored: its answer was lost
                continue
            if loop.time() >= deadline:
                raise StoreError(f"unable to store sequence {batch[0][0]}: {result.error}")
            if result.err_code not in FENCE_REFUSALS:
                await asyncio.sleep(RETRY_INTERVAL)

    def _stored(self, batch: Writes, last_stream_seq: int) -> None:
        self.positions.add_runs(batch[0][0], last_stream_seq, pack_runs(batch, self.pack_bytes))
        self.fence = last_stream_seq
        self.last_sequence = batch[-1][0]

    async def _judge(self, batch: Writes, result: WriteResult) -> bool:
        """A batch refused for its expectation (or a message ID the stream has): True
        when the stream holds it already (an earlier send's answer was lost); False when
        the stream is where this node expects it (the fence is corrected, the batch is
        sent again). StreamFenced when another writer wrote; StoreError for a message
        ID the stream has in a batch it does not hold."""
        last = await self.last_message()
        expected = batch[0][0] - 1
        if last is not None and last.sequence == batch[-1][0]:
            if last.guid != batch[-1][1]:
                raise StreamFenced(
                    f"channel {self.channel!r}: sequence {last.sequence} in stream "
                    f"{self.stream} was written by another node ({result.error})"
                )
            self._stored(batch, last.stream_seq)
            return True
        # Where this node expects it: after its predecessor, or empty as this node left it.
        expected_here = last.sequence == expected if last is not None else self.fence == 0
        if not expected_here:
            where = f"is at {last.sequence}" if last is not None else "has no message"
            raise StreamFenced(
                f"channel {self.channel!r} {where} in stream {self.stream}, this node "
                f"expected {expected}: {result.error}"
            )
        if result.err_code == BATCH_DUPLICATE_ID:
            raise StoreError(f"stream {self.stream} has a message of this batch: {result.error}")
        self.fence = last.stream_seq if last is not None else 0
        return False

    async def purge_below(self, stream_seq: int) -> None:
        """Remove the channel's messages below stream sequence ``stream_seq`` (all of
        them when it is past :attr:`fence`: the next write then expects 0)."""
        await purge_subject(self._conn, self.stream, self.subject, stream_seq)
        if stream_seq > self.fence:
            self.fence = 0

    # -- reading ---------------------------------------------------------------------------

    async def last_message(self) -> LastWritten | None:
        """The channel's last message as the stream's leader has it; None when the
        channel has none in the stream."""
        found = await last_of_subject(self._conn, self.stream, self.subject)
        if found is None:
            return None
        try:
            first, count = message_span(found.headers)
        except StoreError:
            raise StoreError(
                f"the last message of {self.subject} in stream {self.stream} has no "
                f"{HEADER_SEQUENCE}"
            ) from None
        guid = found.headers.get(HEADER_GUID) or found.headers.get(HEADER_MSG_ID, "")
        return LastWritten(found.stream_seq, first + count - 1, guid, first)

    async def first_stored(self) -> int:
        """The STAN sequence of the channel's first message in the stream (0: none)."""
        return await first_stored(self._conn, self.stream, self.subject)

    async def read_messages(
        self, first: int, last: int, before: Known = None, after: Known = None
    ) -> list[ReadMessage]:
        """The channel's messages first..last (acknowledged: at or before :attr:`fence`)
        from its subject, and the rest of the pack holding ``last``; ``before``/``after``:
        messages whose stream sequences are known (they bound the search for the first,
        see ``channel_reader``)."""
        end = self.fence
        if not end or first > last:
            return []
        start = self.positions.stream_seq(first)
        if not start:
            # A pack holds many messages at one stream sequence: the known messages
            # bound the search, their distance in sequences does not.
            low = before[1] if before is not None else 1
            high = min(end, after[1]) if after is not None else end
            start = await locate(self._conn, self.stream, self.subject, first, low, high)
        return await read_run(
            self._conn, self.stream, self.subject, self.channel, first, last, start=start, end=end
        )

    async def read_after(self, stream_seq: int, last: int) -> AsyncIterator[StoredMessage]:
        """The channel's messages stored after stream sequence ``stream_seq`` up to
        ``last`` (its last message's, from :meth:`last_message`), in order: read from the
        channel's subject only, not the whole stream."""
        async for sequence, headers, data in read_subject(
            self._conn, self.stream, self.subject, stream_seq + 1, last
        ):
            for message in decode_stream_messages(self.channel, headers, data):
                yield StoredMessage(sequence, message)
