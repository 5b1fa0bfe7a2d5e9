"""Reading the cluster's streams (the channels' shared streams, layout 1's streams, KV
buckets' streams) on the store's one connection: the messages by batched direct gets,
of a whole stream (:func:`read_range`) or of one subject (:func:`read_subject`), a
subject's last message from the stream's leader (:func:`last_of_subject`), the streams'
state by ``STREAM.INFO`` (:func:`stream_state`, through ``connection``'s
:func:`js_api`).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, NamedTuple

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    API_TIMEOUT,
    ASK_AGAIN_EVERY,
    STREAM_NOT_FOUND,
    api_failure,
    first_answer,
    js_api,
)
from stanpkg.transport.connection import NatsConnection, decode_headers
from stanpkg.transport.errors import NatsError

__all__ = [
    "LastMessage",
    "ReplicaBehind",
    "StreamState",
    "find_stream_state",
    "first_of_subject_from",
    "last_of_subject",
    "read_range",
    "read_subject",
    "state_of",
    "stream_state",
]

NO_MESSAGE = 10037  # STREAM.MSG.GET: no message found
LAGGING_REPLICA_RETRY = 0.02  # seconds between direct gets a replica could not answer yet
DIRECT_GET_ASK_AGAIN = 0.5  # a direct get not answered at all by then is sent again


class ReplicaBehind(StoreError):
    """The replica read has not yet applied everything its leader has: reading again
    shortly succeeds."""


class StreamState(NamedTuple):
    first_seq: int
    last_seq: int
    msgs: int
    bytes: int
    atomic: bool = False  # the stream takes atomic batches (nats-server 2.12 and later)


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
            ask = {"seq": sequence, "batch": min(batch, last - sequence + 1)}
            got = await reader.get(ask, timeout)
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


async def read_subject(
    conn: NatsConnection,
    stream: str,
    subject: str,
    first: int,
    last: int,
    *,
    batch: int = 256,
    timeout: float = API_TIMEOUT,
) -> AsyncGenerator[tuple[int, bytes, bytes], None]:
    """(stream sequence, headers, data) of the messages of ``subject`` stored at stream
    sequences first..last, in order, by batched direct gets that JetStream answers from
    the subject's own index (``next_by_subj``): the other subjects of the stream are not
    read. ``last`` is the subject's last message as the stream's leader has it
    (:func:`last_of_subject`); a replica that ends before it is asked again (it may not
    have applied the newest messages yet), ReplicaBehind after ``timeout``."""
    reader = _BatchReader(conn, stream)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        sequence = max(first, 1)
        while sequence <= last:
            ask = {"seq": sequence, "next_by_subj": subject, "batch": batch}
            answered = await reader.get(ask, timeout)
            got = [message for message in answered if message[0] <= last]
            if answered and not got:
                return  # the next one is past ``last``
            if not got:
                if loop.time() > deadline:
                    raise ReplicaBehind(
                        f"the replicas of stream {stream} do not have {subject} up to "
                        f"{last} after {timeout:g} s"
                    )
                await asyncio.sleep(LAGGING_REPLICA_RETRY)
                continue
            deadline = loop.time() + timeout
            for message in got:
                yield message
            sequence = got[-1][0] + 1
    finally:
        reader.close()


async def first_of_subject_from(
    conn: NatsConnection, stream: str, subject: str, stream_seq: int, timeout: float = API_TIMEOUT
) -> tuple[int, bytes, bytes] | None:
    """(stream sequence, headers, data) of the first message of ``subject`` at or after
    stream sequence ``stream_seq`` (a direct get: the replica that answers may be behind);
    None when there is none."""
    reader = _BatchReader(conn, stream)
    try:
        got = await reader.get(
            {"seq": max(stream_seq, 1), "next_by_subj": subject, "batch": 1}, timeout
        )
    finally:
        reader.close()
    return got[0] if got else None


class LastMessage(NamedTuple):
    """A subject's last message: its stream sequence, headers and data."""

    stream_seq: int
    headers: dict[str, str]
    data: bytes


async def last_of_subject(
    conn: NatsConnection, stream: str, subject: str, *, timeout: float = API_TIMEOUT
) -> LastMessage | None:
    """The last message of ``subject`` as the stream's leader has it (``STREAM.MSG.GET``,
    which only the leader answers: a direct get may come from a replica that is behind);
    None when the subject has none. Asked again while unanswered: at promotion the stream
    may be electing, or moving its leader to this node (leader_moves.py)."""
    answer = await first_answer(
        lambda: js_api(conn, f"STREAM.MSG.GET.{stream}", {"last_by_subj": subject}),
        timeout=timeout,
        every=ASK_AGAIN_EVERY,
        woken_by=conn,
    )
    error = answer.get("error")
    if error and error.get("err_code") == NO_MESSAGE:
        return None
    if error:
        raise api_failure(f"read the last message of {subject} in stream {stream}", answer)
    message = answer.get("message") or {}
    raw = base64.b64decode(message.get("hdrs") or "")
    fields = decode_headers(raw)[1] if raw else {}
    data = base64.b64decode(message.get("data") or "")
    return LastMessage(int(message.get("seq", 0)), fields, data)


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

    async def get(self, ask: dict[str, Any], timeout: float) -> list[tuple[int, bytes, bytes]]:
        """The messages one batched direct get (``ask``) answers; empty past the end."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._got, self._asked, self._answering = [], set(), ""
        self._end = end = loop.create_future()
        request = json.dumps(ask).encode()
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


def state_of(answer: dict[str, Any]) -> StreamState:
    state = answer.get("state", {})
    return StreamState(
        int(state.get("first_seq", 0)),
        int(state.get("last_seq", 0)),
        int(state.get("messages", 0)),
        int(state.get("bytes", 0)),
        bool(answer.get("config", {}).get("allow_atomic")),
    )


async def stream_state(conn: NatsConnection, stream: str) -> StreamState:
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise api_failure(f"read the state of stream {stream}", answer)
    return state_of(answer)


async def find_stream_state(conn: NatsConnection, stream: str) -> StreamState | None:
    """The stream's state; None when there is no such stream."""
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None)
    error = answer.get("error")
    if error and error.get("err_code") == STREAM_NOT_FOUND:
        return None
    if error:
        raise api_failure(f"read the state of stream {stream}", answer)
    return state_of(answer)
