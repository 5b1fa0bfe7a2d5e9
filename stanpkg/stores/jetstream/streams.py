"""One STAN channel = one JetStream stream, written and read through our own NATS client.

Names. Stream ``STAN_<cluster>_<channel>_<hash>``: the cluster ID (40 characters at most)
and the channel (120) with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``, so
that ``nats stream ls`` stays readable, and 10 hex digits of a hash of the exact pair, so
that two channels whose readable parts agree still get two streams. Subject
``_STAN.ch.<cluster token>.<channel>``: the cluster token is the cluster ID itself when it
is plain (``[A-Za-z0-9][-_A-Za-z0-9]*``), otherwise ``=`` + its base64url (reversible, one
token: the KV key rule of ``kvmap.kv_key``); a channel is a literal subject, so the subjects
of two channels never overlap, and ``_STAN.ch`` is no subject of the STAN protocol. A plain
JetStream consumer finds a channel with ``_STAN.ch.<cluster>.<channel>`` (or all of a
cluster's with ``_STAN.ch.<cluster>.>``).

Messages. The stream message's data is the published payload, as published; STAN's own
fields are headers: ``Nats-Msg-Id`` = the publish GUID (JetStream answers a resend within
the duplicate window with the original sequence), ``Stan-Reply``, ``Stan-Timestamp`` (ns).
STAN sequence = stream sequence.

Writes (:class:`StreamWriter`) are pipelined: a batch goes out at once with one reply
subscription, each write expecting the previous sequence (``Nats-Expected-Last-Sequence``),
so JetStream stores a channel's messages only in order, and a node that lost the lease
cannot append (fencing). Reads (:func:`read_range`) are batched direct gets.

The JetStream API is plain JSON request/reply, so management goes through the same
``NatsConnection`` as the writes: the channel path needs no second client.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, NamedTuple

from stanpkg.plan.limits import Limits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.keys import kv_key
from stanpkg.stores.jetstream.link import first_answer
from stanpkg.transport.connection import NatsConnection, decode_headers
from stanpkg.transport.errors import NatsError

__all__ = [
    "ReplicaBehind",
    "StreamFenced",
    "StreamState",
    "StreamWriter",
    "WriteResult",
    "WriteRound",
    "atomic_batch_messages",
    "batch_headers",
    "delete_stream",
    "ensure_stream",
    "find_stream_state",
    "from_stream_message",
    "lead_stream_from",
    "purge_stream_to",
    "read_range",
    "remove_stream_peer",
    "stream_config",
    "stream_name",
    "stream_replicas",
    "stream_state",
    "stream_subject",
    "to_stream_message",
]

HEADER_MSG_ID = "Nats-Msg-Id"
HEADER_EXPECTED_LAST = "Nats-Expected-Last-Sequence"
HEADER_REPLY = "Stan-Reply"
HEADER_TIMESTAMP = "Stan-Timestamp"
WRONG_LAST_SEQUENCE = 10071  # JetStream's err_code for a failed expected last sequence
BATCH_WRONG_LAST_SEQUENCE = 10164  # the same for an atomic batch
BATCH_DUPLICATE_ID = 10201  # an atomic batch holds a message ID the stream has
ATOMIC_BATCH_MAX = 1000  # messages in one atomic batch (JetStream's limit)
STREAM_NAME_IN_USE = 10058  # create: the stream exists with another configuration
STREAM_NOT_FOUND = 10059
DUPLICATE_WINDOW_NS = 120 * 10**9
API_TIMEOUT = 5.0
LEADER_PROBE_EVERY = 0.25  # seconds between two asks of a stream that may be electing
LAGGING_REPLICA_RETRY = 0.02  # seconds between direct gets a replica could not answer yet
DIRECT_GET_ASK_AGAIN = 0.5  # a direct get not answered at all by then is sent again
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_BREAKS_HEADER = re.compile(r"[\r\n]")
_ACK_SEQUENCE = re.compile(rb'"seq":\s*(\d+)')
_ACK_DUPLICATE = re.compile(rb'"duplicate":\s*true')  # nats-server writes ": true"
# The configuration fields that follow the channel's limits when a stream exists already.
_LIMIT_FIELDS = ("max_msgs", "max_bytes", "max_age", "duplicate_window", "discard", "allow_atomic")


class ReplicaBehind(StoreError):
    """The replica read has not yet applied everything its leader has: reading again
    shortly succeeds."""


class StreamFenced(StoreError):
    """JetStream refused a write at the sequence this node expected: another node wrote
    to the channel (this one lost the lease) or a write went missing."""


class StreamState(NamedTuple):
    first_seq: int
    last_seq: int
    msgs: int
    bytes: int
    atomic: bool = False  # the stream takes atomic batches (nats-server 2.12 and later)


# -- names ---------------------------------------------------------------------------------


def _readable(text: str, limit: int) -> str:
    return _UNSAFE.sub("_", text)[:limit] or "_"


def stream_name(cluster_id: str, channel: str) -> str:
    digest = hashlib.sha256(json.dumps([cluster_id, channel]).encode()).hexdigest()[:10]
    return f"STAN_{_readable(cluster_id, 40)}_{_readable(channel, 120)}_{digest}"


def stream_subject(cluster_id: str, channel: str) -> str:
    return f"_STAN.ch.{kv_key(cluster_id)}.{channel}"


def stream_config(
    cluster_id: str, channel: str, limits: Limits, *, replicas: int, first_seq: int = 1
) -> dict[str, Any]:
    """The JSON configuration of a channel's stream (JetStream: -1 = unlimited, ns)."""
    window = DUPLICATE_WINDOW_NS
    if limits.max_age > 0:
        window = min(window, limits.max_age)  # JetStream refuses a window past max_age
    config: dict[str, Any] = {
        "name": stream_name(cluster_id, channel),
        "description": f"STAN channel {channel} of cluster {cluster_id}",
        "subjects": [stream_subject(cluster_id, channel)],
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_msgs": _unlimited(limits.max_msgs),
        "max_bytes": _unlimited(limits.max_bytes),
        "max_age": max(limits.max_age, 0),
        "max_msgs_per_subject": -1,
        "num_replicas": replicas,
        "duplicate_window": window,
        "allow_direct": True,
        # A flush's messages as one atomic batch: one answer instead of one per message,
        # and all or nothing (servers before 2.12 drop the field: see StreamState.atomic).
        "allow_atomic": True,
    }
    if first_seq > 1:
        config["first_seq"] = first_seq
    return config


def _unlimited(value: int) -> int:
    return value if value > 0 else -1


# -- messages ------------------------------------------------------------------------------


def to_stream_message(
    guid: str,
    reply: str,
    timestamp_ns: int,
    payload: bytes,
    *,
    expected_last: int | None = None,
    batch: str = "",
) -> tuple[bytes, bytes]:
    """(header block, data) of one channel message; ``batch``: its atomic batch headers
    (:func:`batch_headers`)."""
    if _BREAKS_HEADER.search(guid) or _BREAKS_HEADER.search(reply):
        raise ValueError(f"a line break in the publish ID {guid!r} or reply {reply!r}")
    # One format per message on the hot path, not encode_headers' checks per field.
    block = f"NATS/1.0\r\n{HEADER_MSG_ID}: {guid}\r\n{HEADER_TIMESTAMP}: {timestamp_ns}\r\n"
    if reply:
        block += f"{HEADER_REPLY}: {reply}\r\n"
    if expected_last is not None:
        block += f"{HEADER_EXPECTED_LAST}: {expected_last}\r\n"
    return (block + batch + "\r\n").encode(), payload


def atomic_batch_messages(batch: Sequence[_Write], batch_id: str) -> list[tuple[bytes, bytes]]:
    """(header block, data) of each write of an atomic batch: :func:`to_stream_message`
    with :func:`batch_headers`, byte for byte, formatted in one pass (the first write
    expects its predecessor; the checks for line breaks run once over the batch)."""
    fields = "".join(f"{guid}{reply}" for _, guid, reply, _, _ in batch)
    if _BREAKS_HEADER.search(fields):
        for _, guid, reply, timestamp, payload in batch:
            to_stream_message(guid, reply, timestamp, payload)  # raises for the bad one
    count = len(batch)
    head = f"NATS/1.0\r\n{HEADER_MSG_ID}: "
    stamp = f"\r\n{HEADER_TIMESTAMP}: "
    batch_line = f"Nats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: "
    out = []
    for index, (sequence, guid, reply, timestamp, payload) in enumerate(batch, 1):
        block = f"{head}{guid}{stamp}{timestamp}\r\n"
        if reply:
            block += f"{HEADER_REPLY}: {reply}\r\n"
        if index == 1:
            block += f"{HEADER_EXPECTED_LAST}: {sequence - 1}\r\n"
        block += f"{batch_line}{index}\r\n"
        if index == count:
            block += "Nats-Batch-Commit: 1\r\n"
        out.append(((block + "\r\n").encode(), payload))
    return out


def batch_headers(batch_id: str, index: int, count: int) -> str:
    """The atomic batch header lines of message ``index`` (from 0) of ``count``."""
    lines = f"Nats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: {index + 1}\r\n"
    if index == count - 1:
        lines += "Nats-Batch-Commit: 1\r\n"
    return lines


def from_stream_message(sequence: int, headers: bytes, data: bytes, *, channel: str) -> bytes:
    """The serialized MsgProto of a stream message."""
    _, fields = decode_headers(headers)
    return pb.MsgProto(
        sequence=sequence,
        subject=channel,
        reply=fields.get(HEADER_REPLY, ""),
        data=data,
        timestamp=int(fields.get(HEADER_TIMESTAMP) or 0),
    ).SerializeToString()


# -- writing -------------------------------------------------------------------------------


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


_Write = tuple[int, str, str, int, bytes]  # sequence, guid, reply, timestamp (ns), payload


class StreamWriter:
    """The pipelined writes of one channel. ``last_sequence`` follows what JetStream
    stored in order (:meth:`flush`: one at a time; :meth:`send` rounds may overlap)."""

    def __init__(self, conn: NatsConnection, *, subject: str, last_sequence: int) -> None:
        self._conn = conn
        self.subject = subject
        self.last_sequence = last_sequence
        self._queued: list[_Write] = []
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

    def extend(self, writes: list[_Write]) -> None:
        """:meth:`append` of each (sequence, guid, reply, timestamp, payload)."""
        self._queued += writes

    def discard(self) -> None:
        self._queued.clear()

    @property
    def queued(self) -> tuple[_Write, ...]:
        """The writes the next :meth:`flush` sends, as (sequence, guid, reply,
        timestamp, payload): the arguments of :meth:`append`."""
        return tuple(self._queued)

    def take(self) -> list[_Write]:
        """The queued writes, no longer queued."""
        writes, self._queued = self._queued, []
        return writes

    async def flush(self, timeout: float = 5.0) -> list[WriteResult]:
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
        self, batch: Sequence[_Write], expected: Sequence[int], timeout: float
    ) -> list[WriteResult]:
        return await self.answers(self.send(batch, expected), timeout)

    def send(self, batch: Sequence[_Write], expected: Sequence[int]) -> WriteRound:
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

    def send_atomic(self, batch: Sequence[_Write], batch_id: str) -> WriteRound:
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


# -- reading -------------------------------------------------------------------------------


async def read_range(
    conn: NatsConnection,
    stream: str,
    first: int,
    last: int,
    *,
    batch: int = 256,
    timeout: float = API_TIMEOUT,
) -> AsyncIterator[tuple[int, bytes, bytes]]:
    """(sequence, headers, data) of the messages first..last still in the stream, by
    batched direct gets (deleted and expired sequences are skipped by JetStream).

    Any replica answers a direct get, and one may not have the newest messages yet: when
    the answers end before ``last``, the stream's leader says whether that is the end."""
    reader = _BatchReader(conn, stream)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        sequence = max(first, 1)
        while sequence <= last:
            got = await reader.get(sequence, min(batch, last - sequence + 1), timeout)
            if not got:
                if (await stream_state(conn, stream)).last_seq < sequence:
                    return
                if loop.time() > deadline:
                    raise ReplicaBehind(
                        f"the replicas of stream {stream} do not have sequence {sequence} "
                        f"after {timeout:g} s"
                    )
                await asyncio.sleep(LAGGING_REPLICA_RETRY)
                continue
            deadline = loop.time() + timeout
            for message in got:
                if message[0] > last:
                    return
                yield message
            sequence = got[-1][0] + 1
    finally:
        reader.close()


class _BatchReader:
    """One reply subscription for the direct gets of one read.

    A direct get goes to one replica of the stream; one sent while that replica's server
    dies (just killed, its routes not yet closed) is never answered. So a get that nothing
    answered for DIRECT_GET_ASK_AGAIN seconds is sent again, each time with its own reply
    subject; the first of them whose answer begins is read to its end, the others ignored.
    """

    def __init__(self, conn: NatsConnection, stream: str) -> None:
        self._conn = conn
        self._subject = f"$JS.API.DIRECT.GET.{stream}"
        self._inbox = conn.new_inbox()
        self._sid = conn.subscribe(f"{self._inbox}.*", self._on_message, with_headers=True)
        self._replies = itertools.count(1)
        self._asked: set[str] = set()  # reply subjects of the current get's requests
        self._answering = ""  # the one whose answer is being read
        self._got: list[tuple[int, bytes, bytes]] = []
        self._end: asyncio.Future[int] | None = None

    async def get(
        self, sequence: int, count: int, timeout: float
    ) -> list[tuple[int, bytes, bytes]]:
        """The next ``count`` messages from ``sequence`` on; empty past the stream's end."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._got, self._asked, self._answering = [], set(), ""
        self._end = end = loop.create_future()
        request = json.dumps({"seq": sequence, "batch": count}).encode()
        try:
            while not end.done():
                if not self._answering:
                    reply = f"{self._inbox}.{next(self._replies)}"
                    self._asked.add(reply)
                    self._conn.publish(self._subject, request, reply=reply)
                left = deadline - loop.time()
                if left <= 0:
                    raise StoreError(f"no answer from {self._subject} within {timeout:g} s")
                wait = left if self._answering else min(DIRECT_GET_ASK_AGAIN, left)
                await asyncio.wait([end], timeout=wait)
        except NatsError as exc:
            raise StoreError(f"unable to read {self._subject}: {exc}") from exc
        finally:
            self._end = None
        status = end.result()
        if status == 503:
            raise StoreError(f"no stream answers {self._subject} (missing, or no direct get)")
        if status not in (204, 404):
            raise StoreError(f"{self._subject} answered with status {status}")
        return self._got

    def _on_message(self, subject: str, reply: str, headers: bytes, payload: bytes) -> None:
        end = self._end
        if end is None or end.done() or subject not in self._asked:
            return  # late: an earlier get's, or the answer to a request sent again
        if not self._answering:
            self._answering = subject
        elif subject != self._answering:
            return
        status, fields = decode_headers(headers)
        if status:  # 204 end of batch, 404 nothing at or after, 503 no stream...
            end.set_result(status)
            return
        self._got.append((int(fields.get("Nats-Sequence", 0)), headers, payload))

    def close(self) -> None:
        self._conn.unsubscribe(self._sid)


# -- management ----------------------------------------------------------------------------


async def _api(conn: NatsConnection, subject: str, body: dict[str, Any] | None) -> dict[str, Any]:
    payload = json.dumps(body).encode() if body is not None else b""
    try:
        answer = await conn.request(f"$JS.API.{subject}", payload, API_TIMEOUT)
    except NatsError as exc:
        raise StoreError(f"JetStream did not answer $JS.API.{subject}: {exc}") from exc
    result: dict[str, Any] = json.loads(answer)
    return result


def _failure(action: str, answer: dict[str, Any]) -> StoreError:
    error = answer["error"]
    return StoreError(f"unable to {action}: {error.get('description')} ({error.get('err_code')})")


def _state(answer: dict[str, Any]) -> StreamState:
    state = answer.get("state", {})
    return StreamState(
        int(state.get("first_seq", 0)),
        int(state.get("last_seq", 0)),
        int(state.get("messages", 0)),
        int(state.get("bytes", 0)),
        bool(answer.get("config", {}).get("allow_atomic")),
    )


async def stream_state(conn: NatsConnection, stream: str) -> StreamState:
    answer = await _api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise _failure(f"read the state of stream {stream}", answer)
    return _state(answer)


async def find_stream_state(conn: NatsConnection, stream: str) -> StreamState | None:
    """The stream's state; None when there is no such stream."""
    answer = await _api(conn, f"STREAM.INFO.{stream}", None)
    error = answer.get("error")
    if error and error.get("err_code") == STREAM_NOT_FOUND:
        return None
    if error:
        raise _failure(f"read the state of stream {stream}", answer)
    return _state(answer)


async def purge_stream_to(conn: NatsConnection, stream: str, first_seq: int) -> None:
    """Remove every message below ``first_seq``; an empty stream then starts at it."""
    answer = await _api(conn, f"STREAM.PURGE.{stream}", {"seq": first_seq})
    if "error" in answer:
        raise _failure(f"purge stream {stream} up to {first_seq}", answer)


async def ensure_stream(
    conn: NatsConnection, config: dict[str, Any], *, leader_timeout: float = API_TIMEOUT
) -> StreamState:
    """Create the stream, or bring an existing one's limits to ``config``; its state.

    After a serving node's death the stream's leader, JetStream's metadata leader, or both
    may be electing for 4-9 s. A create and a read are sent at once, again every
    LEADER_PROBE_EVERY seconds for ``leader_timeout`` (a server just elected answers only
    what comes after its election), and the first answer that settles it is taken: for a
    stream that exists, only its leader's (see :func:`_create_or_read`)."""
    name = config["name"]
    try:
        kind, answer = await first_answer(
            lambda: _create_or_read(conn, config),
            timeout=leader_timeout,
            every=LEADER_PROBE_EVERY,
        )
    except TimeoutError:
        raise StoreError(f"JetStream did not answer for stream {name} (create or info)") from None
    if kind == "created":
        return _state(answer)
    if kind == "refused":
        raise _failure(f"create stream {name}", answer)
    if kind == "unreadable":
        raise _failure(f"read stream {name}", answer)
    current = dict(answer["config"])  # it exists: its limits brought to config's
    wanted = current | {field: config[field] for field in _LIMIT_FIELDS if field in config}
    if wanted == current:
        return _state(answer)
    answer = await _api(conn, f"STREAM.UPDATE.{name}", wanted)
    if "error" in answer:
        raise _failure(f"update stream {name}", answer)
    return _state(answer)


async def _create_or_read(
    conn: NatsConnection, config: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The first answer that settles whether and how the stream exists: ("created",
    answer) when the create made the stream, ("refused", answer) when it failed for another
    reason than an existing stream, ("exists", info) when the stream's leader answered its
    info, ("unreadable", info) when the info failed for another reason than a missing
    stream. StoreError when neither settles it (no answer, or an info that says "not
    found" and a create that says "exists with another configuration" or does not answer).

    A create of a stream that exists with this configuration is answered, also while the
    stream elects a leader after a node's death, from one replica's local state; that
    replica may not have applied the last writes yet (its leader died before telling it
    they were committed), so the answer can show an empty stream that holds messages.
    Only the stream leader's info is taken for an existing stream; the create settles
    only when it made the stream (``did_create``, or, from a server that does not say,
    when the info found no stream)."""
    name = config["name"]
    create = asyncio.ensure_future(_api(conn, f"STREAM.CREATE.{name}", config))
    info = asyncio.ensure_future(_api(conn, f"STREAM.INFO.{name}", None))
    created: dict[str, Any] | None = None  # a create answered without did_create
    missing = False  # the info said there is no such stream
    try:
        pending: set[asyncio.Future[dict[str, Any]]] = {create, info}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if info in done and info.exception() is None:
                answer = info.result()
                error = answer.get("error")
                if not error:
                    return "exists", answer
                if error.get("err_code") != STREAM_NOT_FOUND:
                    return "unreadable", answer
                missing = True
            if create in done and create.exception() is None:
                answer = create.result()
                error = answer.get("error")
                if error and error.get("err_code") != STREAM_NAME_IN_USE:
                    return "refused", answer
                if not error:
                    if answer.get("did_create"):
                        return "created", answer
                    created = answer
            if missing and created is not None:
                return "created", created
        raise StoreError(f"JetStream did not settle whether stream {name} exists")
    finally:
        create.cancel()
        info.cancel()


async def stream_replicas(conn: NatsConnection, stream: str) -> list[str]:
    """The JetStream servers (names) holding a replica of the stream, leader first."""
    answer = await _api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise _failure(f"read stream {stream}", answer)
    cluster = answer.get("cluster", {})
    names = [cluster["leader"]] if cluster.get("leader") else []
    return names + [str(peer.get("name", "")) for peer in cluster.get("replicas", ())]


async def lead_stream_from(
    conn: NatsConnection, stream: str, server: str, *, ask: bool = True
) -> str:
    """Ask the stream's leader to hand its leadership to JetStream server ``server`` when
    another server leads it and ``server``'s replica is current: "asked"; "here" when
    ``server`` leads it, "not now" when it has no leader or no current replica there (or
    when ``ask`` is false: a move asked before may be under way)."""
    answer = await _api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise _failure(f"read stream {stream}", answer)
    cluster = answer.get("cluster", {})
    leader = cluster.get("leader")
    if leader == server:
        return "here"
    replicas = cluster.get("replicas", ())
    if not leader or not any(p.get("name") == server and p.get("current") for p in replicas):
        return "not now"  # electing, no replica here, or one still catching up
    if not ask:
        return "not now"
    request = {"placement": {"preferred": server}}
    answer = await _api(conn, f"STREAM.LEADER.STEPDOWN.{stream}", request)
    if "error" in answer:
        raise _failure(f"move the leadership of {stream} to {server}", answer)
    return "asked"


async def remove_stream_peer(conn: NatsConnection, stream: str, server: str) -> None:
    """Move the stream's replica off JetStream server ``server`` (to a server that has
    none; StoreError when there is no such server)."""
    request = {"peer": server}
    answer = await _api(conn, f"STREAM.PEER.REMOVE.{stream}", request)
    if "error" in answer:
        raise _failure(f"move the replica of {stream} off {server}", answer)


async def delete_stream(conn: NatsConnection, name: str) -> None:
    """Delete the stream; one that does not exist is no error."""
    answer = await _api(conn, f"STREAM.DELETE.{name}", None)
    error = answer.get("error")
    if error and error.get("err_code") != STREAM_NOT_FOUND:
        raise _failure(f"delete stream {name}", answer)
