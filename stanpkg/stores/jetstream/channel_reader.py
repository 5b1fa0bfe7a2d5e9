"""Reading a run of one channel's messages from its shared stream, by STAN sequence.

A channel's messages are in order in its subject (sequence n + 1 is stored after n, in
the same stream message, a pack, or a later one; only a prefix is ever purged), so where
a sequence is can be bounded by any message whose stream sequence is known. Between
those bounds a binary search by direct gets (``next_by_subj`` from a stream sequence,
which JetStream answers from the subject's index) finds the stream message holding the
first message wanted. Then the run is read in batches.
"""

from __future__ import annotations

from stanpkg.stores.jetstream.paged_messages import ReadMessage
from stanpkg.stores.jetstream.record_codec import decode_messages, message_span
from stanpkg.stores.jetstream.stream_reader import first_of_subject_from, read_subject
from stanpkg.transport.connection import NatsConnection, decode_headers

__all__ = ["Known", "first_stored", "locate", "read_run"]

Known = tuple[int, int] | None  # (STAN sequence, stream sequence) of a message, if any


def _span_of(headers: bytes) -> tuple[int, int]:
    return message_span(decode_headers(headers)[1])


async def first_stored(conn: NatsConnection, stream: str, subject: str) -> int:
    """The STAN sequence of the first message the stream holds of ``subject`` (0: none)."""
    got = await first_of_subject_from(conn, stream, subject, 1)
    return _span_of(got[1])[0] if got is not None else 0


async def locate(
    conn: NatsConnection, stream: str, subject: str, sequence: int, low: int, high: int
) -> int:
    """The stream sequence of ``subject``'s stream message that holds STAN sequence
    ``sequence``, searched between stream sequences ``low`` and ``high`` (bounds the
    caller knows hold it); ``low`` when the search did not find it exactly (a gap in the
    channel, a replica behind): reading from there misses nothing."""
    probe = low
    start = low
    while low <= high:
        got = await first_of_subject_from(conn, stream, subject, probe)
        if got is None or got[0] > high:
            high = probe - 1
        else:
            stream_seq, (first, count) = got[0], _span_of(got[1])
            if first <= sequence < first + count:
                return stream_seq
            if first > sequence:
                high = min(probe - 1, stream_seq - 1)
            else:
                low = stream_seq + 1
        probe = (low + high) // 2
    return start


async def read_run(
    conn: NatsConnection,
    stream: str,
    subject: str,
    channel: str,
    first: int,
    last: int,
    *,
    start: int,
    end: int,
) -> list[ReadMessage]:
    """The channel's messages first..last, read from stream sequence ``start`` (at or
    before the first of them) up to ``end`` (at or after the last), and the rest of the
    pack that holds ``last`` (read already: the caller may keep them). Sequences the
    stream does not have are left out; StoreError when a replica ends before ``end``."""
    found: list[ReadMessage] = []
    reading = read_subject(conn, stream, subject, start, end)
    try:
        async for stream_seq, headers, data in reading:
            fields = decode_headers(headers)[1]
            if message_span(fields)[0] > last:
                break
            found += [
                ReadMessage(
                    message.sequence, stream_seq, message.record, message.timestamp, message.guid
                )
                for message in decode_messages(channel, fields, data)
                if first <= message.sequence
            ]
            if found and found[-1].sequence >= last:
                break
    finally:
        await reading.aclose()
    return found
