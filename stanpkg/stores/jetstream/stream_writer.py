"""A channel's writes to its stream, through our own NATS client (:class:`StreamWriter`).

Writes are pipelined: a batch goes out at once with one reply subscription, each write
expecting the previous sequence (``Nats-Expected-Last-Sequence``), so JetStream stores a
channel's messages only in order, and a node that lost the lease cannot append (fencing).
A stream that takes atomic batches gets a flush's messages as one batch: one answer
instead of one per message. The messages' bytes are ``records``'; the stream's name and
subject ``layout``'s.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Sequence
from typing import NamedTuple

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.jetstream_api import (
    API_TIMEOUT,
    BATCH_WRONG_LAST_SEQUENCE,
    WRONG_LAST_SEQUENCE,
)
from stanpkg.stores.jetstream.records import Write, atomic_batch_messages, to_stream_message
from stanpkg.transport.connection import NatsConnection, decode_headers
from stanpkg.transport.errors import NatsError

__all__ = [
    "ATOMIC_BATCH_MAX",
    "BATCH_DUPLICATE_ID",
    "BATCH_WRONG_LAST_SEQUENCE",
    "WRONG_LAST_SEQUENCE",
    "StreamFenced",
    "StreamWriter",
    "WriteResult",
    "WriteRound",
]

BATCH_DUPLICATE_ID = 10201  # an atomic batch holds a message ID the stream has
ATOMIC_BATCH_MAX = 1000  # messages in one atomic batch (JetStream's limit)
_ACK_SEQUENCE = re.compile(rb'"seq":\s*(\d+)')
_ACK_DUPLICATE = re.compile(rb'"duplicate":\s*true')  # nats-server writes ": true"


class StreamFenced(StoreError):
    """JetStream refused a write at the sequence this node expected: another node wrote
    to the channel (this one lost the lease) or a write went missing."""


class WriteResult(NamedTuple):
    """What JetStream answered for one write. ``stored``: the stream sequence (for a
    duplicate, the original message's); 0 when the write failed (``error``). A tuple: an
    atomic batch makes one per message, and a frozen dataclass costs three times as much."""

    sequence: int
    stored: int = 0
    duplicate: bool = False
    error: str = ""
    err_code: int = 0

    @property
    def ok(self) -> bool:
        return not self.error


class StreamWriter:
    """The pipelined writes of one channel. ``last_sequence`` follows what JetStream
    stored in order (:meth:`flush`: one at a time; :meth:`send` rounds may overlap)."""

    def __init__(self, conn: NatsConnection, *, subject: str, last_sequence: int) -> None:
        self._conn = conn
        self.subject = subject
        self.last_sequence = last_sequence
        self._queued: list[Write] = []
        self._prefix = ""
        self._tokens = itertools.count(1)
        # reply token -> the round and the index of the write in it
        self._waiting: dict[str, tuple[WriteRound, int]] = {}

    def append(
        self, sequence: int, guid: str, reply: str, timestamp_ns: int, payload: bytes
    ) -> None:
        """Queue a write of ``sequence``: JetStream stores it only as the sequence after
        ``sequence - 1``."""
        self._queued.append((sequence, guid, reply, timestamp_ns, payload))

    def extend(self, writes: list[Write]) -> None:
        """:meth:`append` of each (sequence, guid, reply, timestamp, payload)."""
        self._queued += writes

    def discard(self) -> None:
        self._queued.clear()

    @property
    def queued(self) -> tuple[Write, ...]:
        """The writes the next :meth:`flush` sends, as (sequence, guid, reply,
        timestamp, payload): the arguments of :meth:`append`."""
        return tuple(self._queued)

    def take(self) -> list[Write]:
        """The queued writes, no longer queued."""
        writes, self._queued = self._queued, []
        return writes

    async def flush(self, timeout: float = API_TIMEOUT) -> list[WriteResult]:
        """Publish every queued write at once and wait for each answer (StoreError when
        one does not come within ``timeout``); the results in the order of the appends.

        StreamFenced when the first refused write was refused for its expected last
        sequence. A write that JetStream recognises as a resend (``duplicate``, with the
        original's sequence) takes no sequence, so the writes after it are sent again
        with the next free sequences: their ``stored`` then differs from ``sequence``.
        Other failures (no stream, no leader) are in the results."""
        batch, self._queued = self._queued, []
        results: list[WriteResult] = []
        expected = [sequence - 1 for sequence, *_ in batch]
        while batch:
            answers = await self._round(batch, expected, timeout)
            settled = self._settle(answers)
            results += settled
            batch = batch[len(settled) :]
            expected = list(range(self.last_sequence, self.last_sequence + len(batch)))
        return results

    def _settle(self, answers: list[WriteResult]) -> list[WriteResult]:
        """The answers up to the first one to send again (after a duplicate)."""
        shifted = False
        for index, answer in enumerate(answers):
            if answer.ok:
                if answer.duplicate and answer.stored != answer.sequence:
                    shifted = True  # a publisher's resend: it takes no sequence
                else:
                    # Stored; or this very write, sent again after its answer was lost:
                    # a resend of another message was stored before this one's place.
                    self.last_sequence = answer.stored
                continue
            if answer.err_code != WRONG_LAST_SEQUENCE:
                return answers  # the first failure stops the channel: report them all
            if shifted:
                return answers[:index]
            raise StreamFenced(
                f"stream write refused at sequence {answer.sequence} (this node expected "
                f"the stream at {self.last_sequence}): {answer.error}"
            )
        return answers

    async def _round(
        self, batch: Sequence[Write], expected: Sequence[int], timeout: float
    ) -> list[WriteResult]:
        return await self.answers(self.send(batch, expected), timeout)

    def send(self, batch: Sequence[Write], expected: Sequence[int]) -> WriteRound:
        """Publish the writes now, each expecting the stream at ``expected[i]``; their
        answers come with :meth:`answers`. Several rounds may be in flight at once."""
        conn = self._conn
        if not self._prefix:
            self._prefix = conn.new_inbox() + "."
            conn.subscribe(self._prefix + "*", self._on_answer, with_headers=True)
        round_ = WriteRound([write[0] for write in batch])
        waiting = self._waiting
        prefix, subject, tokens = self._prefix, self.subject, self._tokens
        try:
            for index, ((_, guid, reply, timestamp, payload), last) in enumerate(
                zip(batch, expected, strict=True)
            ):
                headers, data = to_stream_message(
                    guid, reply, timestamp, payload, expected_last=last
                )
                token = str(next(tokens))
                waiting[token] = (round_, index)
                round_.tokens.append(token)
                conn.publish_with_headers(subject, headers, data, reply=prefix + token)
            conn.write_now()
        except NatsError as exc:
            round_.failure = f"unable to write to {subject}: {exc}"
        return round_

    def send_atomic(self, batch: Sequence[Write], batch_id: str) -> WriteRound:
        """Publish the writes now as one atomic batch (at most ATOMIC_BATCH_MAX), the
        first expecting the stream at its predecessor: stored all in order, or none."""
        conn = self._conn
        if not self._prefix:
            self._prefix = conn.new_inbox() + "."
            conn.subscribe(self._prefix + "*", self._on_answer, with_headers=True)
        round_ = WriteRound([write[0] for write in batch], atomic=True)
        token = str(next(self._tokens))
        self._waiting[token] = (round_, 0)
        round_.tokens.append(token)
        try:
            # Only the commit is answered (errors of the batch included).
            conn.publish_run_with_headers(
                self.subject, atomic_batch_messages(batch, batch_id), self._prefix + token
            )
            conn.write_now()
        except NatsError as exc:
            round_.failure = f"unable to write to {self.subject}: {exc}"
        return round_

    async def answers(self, round_: WriteRound, timeout: float) -> list[WriteResult]:
        """Every answer of the round, in the order of its writes (StoreError when one
        does not come within ``timeout``: the writes may or may not be stored). An atomic
        batch stored as expected has one: its commit's, for its last write."""
        try:
            if round_.failure:
                raise StoreError(round_.failure)
            if round_.missing:
                await asyncio.wait_for(round_.done.wait(), timeout)
        except TimeoutError:
            raise StoreError(
                f"JetStream did not answer {round_.missing} of {len(round_.answers)} writes "
                f"to {self.subject} within {timeout:g} s"
            ) from None
        finally:
            self.abandon(round_)
        if round_.atomic:
            return _batch_results(round_.sequences, round_.answers[0])
        return [answer for answer in round_.answers if answer is not None]

    def abandon(self, round_: WriteRound) -> None:
        """Late answers of the round are ignored."""
        waiting = self._waiting
        for token in round_.tokens:
            waiting.pop(token, None)
        round_.tokens.clear()

    def _on_answer(self, subject: str, reply: str, headers: bytes, payload: bytes) -> None:
        found = self._waiting.pop(subject[len(self._prefix) :], None)
        if found is None:
            return
        round_, index = found
        sequence = round_.sequences[-1 if round_.atomic else index]
        round_.answers[index] = _write_result(sequence, headers, payload)
        round_.missing -= 1
        if round_.missing == 0:
            round_.done.set()


class WriteRound:
    """The writes of one :meth:`StreamWriter.send` and their answers as they come."""

    __slots__ = ("answers", "atomic", "done", "failure", "missing", "sequences", "tokens")

    def __init__(self, sequences: list[int], *, atomic: bool = False) -> None:
        self.sequences = sequences
        self.atomic = atomic  # one answer, for the whole batch
        answers = 1 if atomic else len(sequences)
        self.answers: list[WriteResult | None] = [None] * answers
        self.missing = answers
        self.done = asyncio.Event()
        self.tokens: list[str] = []
        self.failure = ""


def _batch_results(sequences: list[int], answer: WriteResult | None) -> list[WriteResult]:
    """The commit's answer, for each write of an atomic batch; a batch stored where it was
    expected is answered by its commit alone, for its last write (no result per message
    on the hot path of a cluster)."""
    assert answer is not None
    if answer.ok and answer.stored == answer.sequence:
        return [answer]
    if not answer.ok:
        return [answer._replace(sequence=sequence) for sequence in sequences]
    first = answer.stored - len(sequences) + 1
    return [WriteResult(sequence, first + i) for i, sequence in enumerate(sequences)]


def _write_result(sequence: int, headers: bytes, payload: bytes) -> WriteResult:
    if headers and not payload:  # 503: no stream for the subject, or no leader
        status, _ = decode_headers(headers)
        return WriteResult(sequence, error=f"status {status}: no stream or no leader")
    if b'"error"' not in payload and (found := _ACK_SEQUENCE.search(payload)):
        # The common PubAck, without a JSON decode: {"stream":..,"seq":N[,"duplicate":true]}
        return WriteResult(
            sequence, stored=int(found[1]), duplicate=_ACK_DUPLICATE.search(payload) is not None
        )
    try:
        answer = json.loads(payload)
    except ValueError:
        return WriteResult(sequence, error=f"unreadable answer: {payload[:80]!r}")
    error = answer.get("error")
    if error:
        return WriteResult(
            sequence,
            error=str(error.get("description", error)),
            err_code=int(error.get("err_code", 0)),
        )
    return WriteResult(
        sequence, stored=int(answer.get("seq", 0)), duplicate=bool(answer.get("duplicate"))
    )
