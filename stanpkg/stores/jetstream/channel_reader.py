"""Reading a run of one channel's messages from its shared stream, by STAN sequence.

A channel's messages are dense in its subject (sequence n + 1 is stored after n, and
only a prefix is ever purged), so where a sequence is can be bounded from any message
whose stream sequence is known: one stream sequence at least per message between them.
From those bounds a search by direct gets (``next_by_subj`` from a stream sequence,
which JetStream answers from the subject's index) finds the first message wanted; a
channel alone in its stream is found by the first get. Then the run is read in batches.
"""

from __future__ import annotations

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.paged_messages import ReadMessage
from stanpkg.stores.jetstream.record_codec import HEADER_SEQUENCE, decode_message
from stanpkg.stores.jetstream.stream_reader import first_of_subject_from, read_subject
from stanpkg.transport.connection import NatsConnection, decode_headers

__all__ = ["Known", "first_stored", "locate", "read_run"]

Known = tuple[int, int] | None  # (STAN sequence, stream sequence) of a message, if any


def _sequence_of(headers: bytes) -> int:
    try:
        return int(decode_headers(headers)[1][HEADER_SEQUENCE])
    except (KeyError, ValueError):
        raise StoreError(f"a channel message without {HEADER_SEQUENCE}") from None


async def first_stored(conn: NatsConnection, stream: str, subject: str) -> int:
    """The STAN sequence of the first message the stream holds of ``subject`` (0: none)."""
    got = await first_of_subject_from(conn, stream, subject, 1)
    return _sequence_of(got[1]) if got is not None else 0


async def locate(
    conn: NatsConnection, stream: str, subject: str, sequence: int, low: int, high: int
) -> int:
    """The stream sequence of ``subject``'s first message whose STAN sequence is at
    least ``sequence``, searched between stream sequences ``low`` and ``high`` (bounds
    the caller knows hold it); ``low`` when the search did not find it exactly (a gap in
    the channel, a replica behind): reading from there misses nothing."""
    probe = low
    start = low
    while low <= high:
        got = await first_of_subject_from(conn, stream, subject, probe)
        if got is None or got[0] > high:
            high = probe - 1
        else:
            stream_seq, stan = got[0], _sequence_of(got[1])
            if stan == sequence:
                return stream_seq
            if stan > sequence:
                high = min(probe - 1, stream_seq - (stan - sequence))
            else:
                low = stream_seq + (sequence - stan)
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
    before the first of them) up to ``end`` (at or after the last). Sequences the
    stream does not have are left out; StoreError when a replica ends before ``end``."""
    found: list[ReadMessage] = []
    reading = read_subject(conn, stream, subject, start, end)
    try:
        async for stream_seq, headers, data in reading:
            message = decode_message(channel, decode_headers(headers)[1], data)
            if message.sequence > last:
                break
            if message.sequence >= first:
                found.append(
                    ReadMessage(
                        message.sequence,
                        stream_seq,
                        message.record,
                        message.timestamp,
                        message.guid,
                    )
                )
            if message.sequence == last:
                break
    finally:
        await reading.aclose()
    return found
