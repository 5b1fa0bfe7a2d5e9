"""The flushes a serving node begins while one of a channel's batches is in flight join
one atomic batch, sent whole when the one ahead is answered (JetStream's cost per
message falls with the batch's size). On a real JetStream server: the messages keep
their order and sequences, each flush's wait ends when its messages are written, and a
joined batch that fails leaves no trace."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import MessageBatch, StoreError
from stanpkg.stores.jetstream.record_codec import message_span
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.stream_writer import WriteRound
from stanpkg.transport.connection import decode_headers
from tests.stores.jetstream.test_standby_view import _leader


def _messages(prefix: str, count: int) -> MessageBatch:
    return MessageBatch(1, [("", f"{prefix}{i}".encode()) for i in range(count)])


def _count_batches(msgs: ReplicatedMessages, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The STAN messages of every atomic batch the channel sends from now on."""
    sent: list[int] = []
    writer = msgs.channel_log._writer

    class Counting:
        """The channel's writer, counting (the writer itself may be compiled, and a
        compiled object's methods cannot be replaced)."""

        def __getattr__(self, name: str) -> object:
            return getattr(writer, name)

        def send(self, subject: str, messages: Sequence[tuple[bytes, bytes]]) -> WriteRound:
            sent.append(sum(message_span(decode_headers(h)[1])[1] for h, _ in messages))
            return writer.send(subject, messages)

    monkeypatch.setattr(msgs.channel_log, "_writer", Counting())
    return sent


async def _stored_payloads(msgs: ReplicatedMessages) -> list[tuple[int, bytes]]:
    last = await msgs.channel_log.last_message()
    assert last is not None
    return [
        (stored.message.sequence, pb.MsgProto.FromString(stored.message.record).data)
        async for stored in msgs.channel_log.read_after(0, last.stream_seq)
    ]


@asynccontextmanager
async def _written_channel(
    url: str, cluster_id: str, first: int
) -> AsyncIterator[ReplicatedMessages]:
    """A serving node's channel "orders" after its first write of ``first`` messages (its
    stream's leader settled); the node is closed after."""
    node = await _leader(url, cluster_id)
    try:
        msgs = node.create_channel("orders").msgs
        assert isinstance(msgs, ReplicatedMessages)
        msgs.store(_messages("a", first))
        await msgs.flush()
        yield msgs
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_flushes_begun_behind_a_batch_in_flight_are_sent_as_one(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _written_channel(jetstream_url, "joined-1", 1) as msgs:
        sent = _count_batches(msgs, monkeypatch)
        msgs.store(_messages("b", 5))
        ahead = msgs.begin_flush()  # sent at once
        msgs.store(_messages("c", 3))
        second = msgs.begin_flush()
        msgs.store(_messages("d", 4))
        third = msgs.begin_flush()
        assert third is second and second is not ahead
        assert msgs.last_assigned_sequence == 13 and msgs.last_sequence == 1
        await ahead
        assert msgs.last_sequence == 6  # the joined ones are not visible before written
        await asyncio.gather(second, third)
        assert sent == [5, 7]
        assert msgs.last_sequence == 13
        expected = [b"a0"] + [f"b{i}".encode() for i in range(5)]
        expected += [f"c{i}".encode() for i in range(3)] + [f"d{i}".encode() for i in range(4)]
        assert await _stored_payloads(msgs) == list(enumerate(expected, start=1))
        assert [msgs.lookup(seq) is not None for seq in range(1, 14)] == [True] * 13
        # Nothing in flight: the next flush is sent at once, alone.
        msgs.store(_messages("e", 2))
        await msgs.begin_flush()
        assert sent == [5, 7, 2] and msgs.last_sequence == 15


async def test_a_joined_batch_that_fails_fails_every_flush_in_it_and_leaves_no_trace(
    jetstream_url: str,
) -> None:
    async with _written_channel(jetstream_url, "joined-2", 2) as msgs:
        msgs.store(_messages("b", 2))
        ahead = msgs.begin_flush()
        msgs.store(_messages("c", 1))
        second = msgs.begin_flush()
        msgs.store(_messages("d", 1))
        third = msgs.begin_flush()
        assert third is second

        def lost_the_lease() -> None:
            raise StoreError("this node's lease expired")

        msgs.fence = lost_the_lease  # checked before the joined batch is sent
        await ahead
        for flush in (second, third):
            with pytest.raises(StoreError, match="lease"):
                await flush
        assert (msgs.last_sequence, msgs.last_assigned_sequence) == (4, 4)
        assert [seq for seq, _ in await _stored_payloads(msgs)] == [1, 2, 3, 4]
        # Once it may write again, its next messages take the sequences that failed.
        msgs.fence = None
        msgs.store(_messages("e", 1))
        await msgs.flush()
        stored = await _stored_payloads(msgs)
        assert stored[-1] == (5, b"e0") and len(stored) == 5
