"""One channel's stream as the clustered store uses it: the wire work is ``stream_writer``'s,
``stream_reader``'s and ``stream_management``'s; this adds what a leader needs around it —
writes retried while a stream elects a new leader, fencing on a write stored anywhere but
where this node expected it, and the records of the messages read back.

It runs on our own NATS client: the channel writes are the hot path of a cluster, and
``NatsConnection`` publishes a pipelined batch with one write and reads the answers
without a JSON decode each (nats-py pays a header dict, a future and a JSON decode per
message).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.jetstream_api import API_TIMEOUT
from stanpkg.stores.jetstream.layout import stream_name, stream_subject
from stanpkg.stores.jetstream.records import Write, from_stream_message, message_guid
from stanpkg.stores.jetstream.stream_management import delete_stream, ensure_stream, stream_config
from stanpkg.stores.jetstream.stream_reader import read_range, stream_state
from stanpkg.stores.jetstream.stream_writer import (
    ATOMIC_BATCH_MAX,
    BATCH_DUPLICATE_ID,
    BATCH_WRONG_LAST_SEQUENCE,
    WRONG_LAST_SEQUENCE,
    StreamFenced,
    StreamWriter,
    WriteResult,
    WriteRound,
)
from stanpkg.transport.connection import NatsConnection

__all__ = ["DUPLICATE_WINDOW", "ChannelStream", "Sent", "StreamFenced", "Writes"]

DUPLICATE_WINDOW = 120.0  # seconds: stream_config's, for the leader's own window
WRITE_BUDGET = 15.0  # seconds of retries while a stream elects a new leader
RETRY_INTERVAL = 0.25

# (sequence, publish ID, reply, timestamp, payload): StreamWriter.append's arguments
Writes = Sequence[Write]
Sent = Sequence[WriteRound]  # the rounds of one send, answered in order


class ChannelStream:
    """Writing and reading one channel's stream."""

    def __init__(
        self,
        conn: NatsConnection,
        cluster_id: str,
        channel: str,
        limits: Limits,
        replicas: int,
        *,
        first_seq: int = 1,
    ) -> None:
        self._conn = conn
        self.channel = channel
        self.name = stream_name(cluster_id, channel)
        self.subject = stream_subject(cluster_id, channel)
        # first_seq: where a new stream starts (a migrated channel keeps its sequences)
        self._config = stream_config(
            cluster_id, channel, limits, replicas=replicas, first_seq=first_seq
        )
        self._writer = StreamWriter(conn, subject=self.subject, last_sequence=0)
        self.writer_id = ""  # unique per leadership: set by the store at promotion
        self._atomic = False  # the stream takes atomic batches
        self._batches = itertools.count(1)
        # Brings the stream's JetStream leader to this node's server (set by the store).
        self.settle_leader_of: Callable[[str], Awaitable[None]] | None = None

    @property
    def last_sequence(self) -> int:
        """The stream's, as this node knows it."""
        return self._writer.last_sequence

    @last_sequence.setter
    def last_sequence(self, value: int) -> None:
        self._writer.last_sequence = value

    async def ensure(self, leader_timeout: float = API_TIMEOUT) -> tuple[int, int]:
        """Create the stream (or bring its limits up to date); its (first, last).
        ``leader_timeout``: how long an existing stream is asked while it elects."""
        try:
            state = await ensure_stream(self._conn, self._config, leader_timeout=leader_timeout)
        except StoreError as exc:
            message = f"unable to create the stream of channel {self.channel!r}: {exc}"
            raise StoreError(message) from exc
        self.last_sequence = state.last_seq
        self._atomic = state.atomic
        return state.first_seq, state.last_seq

    async def settle_leader(self) -> None:
        if self.settle_leader_of is not None:
            await self.settle_leader_of(self.name)

    async def delete(self) -> None:
        await delete_stream(self._conn, self.name)

    async def stream_last(self) -> int:
        return (await stream_state(self._conn, self.name)).last_seq

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, sequence: int, reply: str, timestamp: int, payload: bytes, guid: str = ""
    ) -> None:
        # The publisher's ID: a resend of the same write (after a lost reply) is known to
        # JetStream as a duplicate instead of stored twice.
        guid = guid or f"{self.writer_id}:{sequence}"
        self._writer.append(sequence, guid, reply, timestamp, payload)

    def append_run(
        self,
        first: int,
        messages: Sequence[tuple[str, bytes]],
        timestamps: Sequence[int],
        guids: Sequence[str],
    ) -> None:
        """:meth:`append` of each (reply, payload) of ``messages``, numbered from
        ``first``: one call per batch on the hot path."""
        writer_id = self.writer_id
        self._writer.extend(
            [
                (sequence, guid or f"{writer_id}:{sequence}", reply, stamp, payload)
                for sequence, (reply, payload), stamp, guid in zip(
                    itertools.count(first), messages, timestamps, guids
                )
            ]
        )

    def discard(self) -> None:
        self._writer.discard()

    def take(self) -> Writes:
        """The writes appended since the last take, for :meth:`send` and :meth:`write`."""
        return self._writer.take()

    @property
    def pipelines(self) -> bool:
        """Whether writes may be sent before the writes ahead of them are answered.
        Single writes may: JetStream checks each one's expected last sequence against
        what it has accepted. An atomic batch's is checked against what is stored, so
        a batch sent before the one ahead of it is stored would be refused."""
        return not self._atomic

    def send(self, writes: Writes) -> Sent:
        """Publish ``writes`` now (each write expects its own predecessor, so JetStream
        keeps the order); of an atomic stream, the first batch of them only."""
        writer = self._writer
        if not self._atomic:
            return [writer.send(writes, [write[0] - 1 for write in writes])]
        return [writer.send_atomic(writes[:ATOMIC_BATCH_MAX], self._batch_id())]

    def _batch_id(self) -> str:
        return f"{self.writer_id or 'stan'}-{next(self._batches)}"

    def abandon(self, sent: Sent) -> None:
        """Answers to ``sent`` are no longer awaited."""
        for round_ in sent:
            self._writer.abandon(round_)

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        await self.write(self.take(), budget=budget)

    async def write(
        self, writes: Writes, sent: Sent | None = None, *, budget: float = WRITE_BUDGET
    ) -> None:
        """Every write of ``writes`` on a quorum, in order (``sent``: their first round,
        sent already). While the stream has no leader (an election after a node died)
        they are sent again, for ``budget`` seconds at most; then StoreError, and
        StreamFenced when one was stored anywhere but where this node expected it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        writer = self._writer
        while writes:
            rounds = sent or self.send(writes)
            sent = None
            results: list[WriteResult] = []
            failure = ""
            for index, round_ in enumerate(rounds):
                try:
                    results += await writer.answers(round_, API_TIMEOUT)
                except StoreError as exc:  # unknown: sent again, known by their IDs
                    failure = str(exc)
                    self.abandon(rounds[index + 1 :])
                    break
            wrong_last = duplicate = False
            done = 0
            first = writes[0][0]  # the writes' sequences follow each other
            for result in results:
                if not result.ok:
                    failure = result.error
                    wrong_last = result.err_code in (WRONG_LAST_SEQUENCE, BATCH_WRONG_LAST_SEQUENCE)
                    duplicate = result.err_code == BATCH_DUPLICATE_ID
                    break
                if result.stored != result.sequence:
                    raise StreamFenced(
                        f"stream {self.name} stored {result.sequence} as {result.stored}"
                    )
                done = result.sequence - first + 1  # an atomic batch's commit: all of it
            if done:
                writer.last_sequence = first + done - 1  # each stored as its sequence
            if duplicate:
                done += await self._stored_already(writes[done:], failure)
            writes = writes[done:]
            if not writes:
                return
            if not failure:
                continue  # the next atomic batch
            if wrong_last:
                last = await self.stream_last()
                if last != writes[0][0] - 1:
                    raise StreamFenced(
                        f"stream {self.name} is at {last}, this node expected "
                        f"{writes[0][0] - 1}: {failure}"
                    )
                # else the stream is where it should be (an earlier write's answer was
                # lost): send again
            if loop.time() >= deadline:
                raise StoreError(f"unable to store sequence {writes[0][0]}: {failure}")
            await asyncio.sleep(RETRY_INTERVAL)

    async def _stored_already(self, writes: Writes, failure: str) -> int:
        """An atomic batch refused for a message ID the stream has: this very batch,
        sent again after its answer was lost (the stream then ends with it), or a
        publisher's resend inside it."""
        last = await self.stream_last()
        stored = sum(1 for write in writes if write[0] <= last)
        if not stored:
            raise StoreError(f"stream {self.name} has a message of this batch: {failure}")
        self._writer.last_sequence = max(self._writer.last_sequence, writes[stored - 1][0])
        return stored

    # -- reading ---------------------------------------------------------------------------

    async def read(self, first: int, last: int) -> AsyncIterator[tuple[bytes, str]]:
        """The MsgProto records of sequences first..last still in the stream, each with
        its publish ID."""
        if last < first or last == 0:
            return
        channel = self.channel
        async for sequence, headers, data in read_range(self._conn, self.name, first, last):
            record = from_stream_message(sequence, headers, data, channel=channel)
            yield record, message_guid(headers)
