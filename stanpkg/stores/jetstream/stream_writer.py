"""The channels' writes to their shared streams, through our own NATS client.

Every write is a JetStream atomic batch (nats-server 2.12 and later): the messages of one
flush of one channel, stored all in order or none, and answered once, by the commit. One
:class:`BatchWriter` sends every channel's batches on the store's connection with one
reply subscription (a channel costs no subscription); ``channel_log`` decides what each
batch expects. The messages' bytes are ``record_codec``'s.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Sequence
from typing import NamedTuple

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    BATCH_WRONG_LAST_SEQUENCE,
    WRONG_LAST_SEQUENCE,
)
from stanpkg.transport.connection import NatsConnection, decode_headers
from stanpkg.transport.errors import NatsError

__all__ = [
    "ATOMIC_BATCH_MAX",
    "BATCH_DUPLICATE_ID",
    "FENCE_REFUSALS",
    "BatchWriter",
    "StreamFenced",
    "WriteResult",
    "WriteRound",
]

BATCH_DUPLICATE_ID = 10201  # an atomic batch holds a message ID the stream has
# A write refused for what it expected of the channel's subject (or as a duplicate):
# what the subject holds decides whether it was stored, or another node wrote.
FENCE_REFUSALS = (WRONG_LAST_SEQUENCE, BATCH_WRONG_LAST_SEQUENCE, BATCH_DUPLICATE_ID)
ATOMIC_BATCH_MAX = 1000  # messages in one atomic batch (JetStream's limit)
_ACK_SEQUENCE = re.compile(rb'"seq":\s*(\d+)')


class StreamFenced(StoreError):
    """JetStream refused a write at the position this node expected: another node wrote
    to the channel (this one lost the lease) or a write went missing."""


class WriteResult(NamedTuple):
    """What JetStream answered for one atomic batch. ``stored``: the stream sequence of
    its last message (its messages are the ``count`` sequences up to it); 0 when the
    batch failed (``error``)."""

    stored: int = 0
    error: str = ""
    err_code: int = 0

    @property
    def ok(self) -> bool:
        return not self.error


class WriteRound:
    """One batch sent and its answer as it comes."""

    __slots__ = ("answer", "done", "failure", "subject", "token")

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.token = ""
        self.answer: WriteResult | None = None
        self.done = asyncio.Event()
        self.failure = ""  # not sent


class BatchWriter:
    """Atomic batches on one connection, answered on one reply subscription."""

    def __init__(self, conn: NatsConnection) -> None:
        self._conn = conn
        self._prefix = ""
        self._tokens = itertools.count(1)
        self._waiting: dict[str, WriteRound] = {}
        self._batch_ids = itertools.count(1)

    def batch_id(self, writer_id: str) -> str:
        """A batch ID unique on this connection (JetStream keeps batches apart by ID)."""
        return f"{writer_id or 'stan'}-{next(self._batch_ids)}"

    def send(self, subject: str, messages: Sequence[tuple[bytes, bytes]]) -> WriteRound:
        """Publish the (header block, data) messages of one atomic batch now (at most
        ATOMIC_BATCH_MAX, their batch headers made); its answer comes with
        :meth:`answer`. Batches of several channels may be in flight at once."""
        conn = self._conn
        if not self._prefix:
            self._prefix = conn.new_inbox() + "."
            conn.subscribe(self._prefix + "*", self._on_answer, with_headers=True)
        round_ = WriteRound(subject)
        round_.token = token = str(next(self._tokens))
        self._waiting[token] = round_
        try:
            # Only the commit is answered (errors of the batch included).
            conn.publish_run_with_headers(subject, messages, self._prefix + token)
            conn.write_now()
        except NatsError as exc:
            round_.failure = f"unable to write to {subject}: {exc}"
        return round_

    async def answer(self, round_: WriteRound, timeout: float) -> WriteResult:
        """The batch's answer (StoreError when it does not come within ``timeout``: the
        batch may or may not be stored)."""
        try:
            if round_.failure:
                raise StoreError(round_.failure)
            if round_.answer is None:
                await asyncio.wait_for(round_.done.wait(), timeout)
        except TimeoutError:
            raise StoreError(
                f"JetStream did not answer a write to {round_.subject} within {timeout:g} s"
            ) from None
        finally:
            self.abandon(round_)
        assert round_.answer is not None
        return round_.answer

    def abandon(self, round_: WriteRound) -> None:
        """A late answer of the round is ignored."""
        self._waiting.pop(round_.token, None)

    def _on_answer(self, subject: str, reply: str, headers: bytes, payload: bytes) -> None:
        round_ = self._waiting.pop(subject[len(self._prefix) :], None)
        if round_ is None:
            return
        round_.answer = _write_result(headers, payload)
        round_.done.set()


def _write_result(headers: bytes, payload: bytes) -> WriteResult:
    if headers and not payload:  # 503: no stream for the subject, or no leader
        status, _ = decode_headers(headers)
        return WriteResult(error=f"status {status}: no stream or no leader")
    if b'"error"' not in payload and (found := _ACK_SEQUENCE.search(payload)):
        # The common PubAck, without a JSON decode: {"stream":..,"seq":N,"batch":..}
        return WriteResult(stored=int(found[1]))
    try:
        answer = json.loads(payload)
    except ValueError:
        return WriteResult(error=f"unreadable answer: {payload[:80]!r}")
    error = answer.get("error")
    if error:
        return WriteResult(
            error=str(error.get("description", error)), err_code=int(error.get("err_code", 0))
        )
    return WriteResult(stored=int(answer.get("seq", 0)))
