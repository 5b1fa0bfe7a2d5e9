"""ChannelStream, the clustered store's writer of one channel: atomic batches where the
server takes them, per-message writes where it does not, writes pipelined ahead of the
answers, a batch sent again after its answer was lost, and fencing."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.channel_streams import ChannelStream, StreamFenced
from stanpkg.stores.jetstream.stream_reader import stream_state
from stanpkg.stores.jetstream.stream_writer import ATOMIC_BATCH_MAX
from stanpkg.transport.connection import NatsConnection
from tests.stores.jetstream.test_streams import UNLIMITED

_clusters = itertools.count(1)


@contextlib.asynccontextmanager
async def channel(
    url: str, name: str = "orders", cluster: str = ""
) -> AsyncIterator[ChannelStream]:
    conn = await NatsConnection.connect(url)
    stream = ChannelStream(conn, cluster or f"cs{next(_clusters)}", name, UNLIMITED, replicas=1)
    stream.writer_id = "w1"
    try:
        await stream.ensure()
        yield stream
    finally:
        with contextlib.suppress(StoreError):
            await stream.delete()
        await conn.close()


def append(stream: ChannelStream, first: int, last: int, prefix: str = "g") -> None:
    for n in range(first, last + 1):
        stream.append(n, "", 1000 + n, f"m{n}".encode(), f"{prefix}{n}")


async def read_all(stream: ChannelStream, last: int) -> list[tuple[int, bytes, str]]:
    out = []
    async for record, guid in stream.read(1, last):
        msg = pb.MsgProto.FromString(record)
        out.append((msg.sequence, msg.data, guid))
    return out


async def test_a_flush_larger_than_one_atomic_batch_is_stored_in_order(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as stream:
        total = ATOMIC_BATCH_MAX + 250
        append(stream, 1, total)
        await stream.flush()
        assert stream.last_sequence == total
        stored = await read_all(stream, total)
        assert [s for s, _, _ in stored] == list(range(1, total + 1))
        assert stored[-1] == (total, f"m{total}".encode(), f"g{total}")


async def test_pipelined_sends_are_stored_in_order(jetstream_url: str) -> None:
    async with channel(jetstream_url) as stream:
        assert not stream.pipelines  # atomic batches: one at a time
        stream._atomic = False  # single writes: sent ahead of the answers
        assert stream.pipelines
        sent = []
        for first in (1, 101, 201):
            append(stream, first, first + 99)
            writes = stream.take()
            sent.append((writes, stream.send(writes)))  # all three in flight at once
        for writes, rounds in sent:
            await stream.write(writes, rounds)
        assert [s for s, _, _ in await read_all(stream, 300)] == list(range(1, 301))


async def test_a_batch_sent_again_after_a_lost_answer_is_stored_once(jetstream_url: str) -> None:
    async with channel(jetstream_url) as stream:
        append(stream, 1, 10)
        writes = stream.take()
        stream.abandon(stream.send(writes))  # stored, but its answer never read
        for _ in range(50):
            if (await stream_state(stream._conn, stream.name)).last_seq == 10:
                break
        stream.last_sequence = 0  # as this node knows it
        await stream.write(writes)  # refused as a duplicate batch: known as ours
        assert stream.last_sequence == 10
        assert len(await read_all(stream, 20)) == 10


async def test_a_resend_of_a_stored_message_inside_a_batch_fails_the_batch(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as stream:
        append(stream, 1, 3)
        await stream.flush()
        stream.append(4, "", 1, b"new", "fresh")
        stream.append(5, "", 1, b"again", "g2")  # a publisher's resend of message 2
        with pytest.raises(StoreError, match="has a message of this batch"):
            await stream.flush(budget=0)
        assert (await stream_state(stream._conn, stream.name)).last_seq == 3  # all or nothing


async def test_another_writer_fences_this_one(jetstream_url: str) -> None:
    cluster = f"cs{next(_clusters)}"
    async with channel(jetstream_url, cluster=cluster) as stream:
        append(stream, 1, 2)
        await stream.flush()
        async with channel(jetstream_url, cluster=cluster) as other:  # a new leader
            other.append(3, "", 1, b"theirs", "t3")
            await other.flush()
            stream.append(3, "", 1, b"mine", "g3")
            with pytest.raises(StreamFenced, match="is at 3, this node expected 2"):
                await stream.flush()


async def test_a_stale_writer_is_fenced_without_atomic_batches(jetstream_url: str) -> None:
    cluster = f"cs{next(_clusters)}"
    async with channel(jetstream_url, cluster=cluster) as stream:
        stream._atomic = False
        append(stream, 1, 2)
        await stream.flush()
        async with channel(jetstream_url, cluster=cluster) as other:
            other.append(3, "", 1, b"theirs", "t3")
            await other.flush()
            stream.append(3, "", 1, b"mine", "g3")
            with pytest.raises(StreamFenced, match="is at 3, this node expected 2"):
                await stream.flush()


async def test_a_server_without_atomic_batches_gets_one_write_per_message(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as stream:
        stream._atomic = False  # as with nats-server before 2.12
        append(stream, 1, 20)
        await stream.flush()
        stored = await read_all(stream, 20)
        assert [s for s, _, _ in stored] == list(range(1, 21))


async def test_a_run_appended_at_once_is_stored_as_appended_one_by_one(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as stream:
        messages = [("", b"a"), ("_INBOX.r", b""), ("", b"c")]
        stream.append_run(1, messages, [11, 12, 12], ["g1", "", "g3"])
        await stream.flush()
        assert stream.last_sequence == 3
        stored = []
        async for record, guid in stream.read(1, 3):
            msg = pb.MsgProto.FromString(record)
            stored.append((msg.sequence, msg.reply, msg.data, msg.timestamp, guid))
        # An empty publish ID becomes the writer's own, as append() makes it.
        assert stored == [
            (1, "", b"a", 11, "g1"),
            (2, "_INBOX.r", b"", 12, "w1:2"),
            (3, "", b"c", 12, "g3"),
        ]
