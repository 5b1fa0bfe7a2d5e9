"""ChannelLog, the clustered store's writer of one channel in its shared stream: a flush
larger than one atomic batch, a run appended at once, and where its messages are in the
stream (StreamPositions)."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import AsyncIterator

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.channel_log import ChannelLog, StreamPositions
from stanpkg.stores.jetstream.shared_streams import SharedStreams
from stanpkg.stores.jetstream.stream_management import delete_stream
from stanpkg.stores.jetstream.stream_writer import ATOMIC_BATCH_MAX, BatchWriter
from stanpkg.transport.connection import NatsConnection

_clusters = itertools.count(1)


@contextlib.asynccontextmanager
async def channel(url: str, name: str = "orders") -> AsyncIterator[ChannelLog]:
    conn = await NatsConnection.connect(url)
    streams = SharedStreams(conn, f"cl{next(_clusters)}", 1, 1)
    log = ChannelLog(conn, BatchWriter(conn), streams.cluster_id, name, 0)
    log.writer_id = "w1"
    try:
        await streams.ensure(0)
        yield log
    finally:
        with contextlib.suppress(StoreError):
            await delete_stream(conn, streams.name(0))
        await conn.close()


def append(log: ChannelLog, first: int, last: int, prefix: str = "g") -> None:
    for n in range(first, last + 1):
        log.append(n, "", 1000 + n, f"m{n}".encode(), f"{prefix}{n}")


async def read_all(log: ChannelLog) -> list[tuple[int, bytes, str]]:
    out = []
    async for stored in log.read_after(0, log.fence):
        msg = pb.MsgProto.FromString(stored.message.record)
        out.append((msg.sequence, msg.data, stored.message.guid))
    return out


@pytest.mark.parametrize("pack_bytes", [0, 1 << 20])
async def test_a_flush_larger_than_one_atomic_batch_is_stored_in_order(
    jetstream_url: str, pack_bytes: int
) -> None:
    async with channel(jetstream_url) as log:
        log.pack_bytes = pack_bytes
        total = ATOMIC_BATCH_MAX + 250
        append(log, 1, total)
        await log.flush()
        stored = await read_all(log)
        assert [s for s, _, _ in stored] == list(range(1, total + 1))
        assert stored[-1] == (total, f"m{total}".encode(), f"g{total}")
        if pack_bytes:  # two batches, one after the other, a pack each
            assert (log.last_sequence, log.fence) == (total, 2)
            assert log.positions.stream_seqs(1, total) == [1] * ATOMIC_BATCH_MAX + [2] * 250
        else:  # a stream message each: one run
            assert (log.last_sequence, log.fence) == (total, total)
            assert len(log.positions) == 1 and log.positions.stream_seq(total) == total


async def test_a_run_appended_at_once_is_stored_as_appended_one_by_one(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as log:
        messages = [("", b"a"), ("_INBOX.r", b""), ("", b"c")]
        log.append_run(1, messages, [11, 12, 12], ["g1", "", "g3"])
        await log.flush()
        assert log.last_sequence == 3
        stored = []
        async for found in log.read_after(0, log.fence):
            msg = pb.MsgProto.FromString(found.message.record)
            stored.append((msg.sequence, msg.reply, msg.data, msg.timestamp, found.message.guid))
        # An empty publish ID becomes the writer's own, as append() makes it.
        assert stored == [
            (1, "", b"a", 11, "g1"),
            (2, "_INBOX.r", b"", 12, "w1:orders:2"),
            (3, "", b"c", 12, "g3"),
        ]


def test_positions_map_runs_and_forget_the_dropped_ones() -> None:
    positions = StreamPositions()
    positions.add(1, 10, 3)  # 1..3 at 10..12
    positions.add(4, 13, 2)  # follows in both: merged
    positions.add(6, 20)
    positions.add(7, 25, 4)
    assert len(positions) == 3
    assert [positions.stream_seq(n) for n in (1, 3, 5, 6, 7, 10)] == [10, 12, 14, 20, 25, 28]
    assert positions.stream_seq(0) == positions.stream_seq(11) == 0
    positions.drop_below(6)
    assert len(positions) == 2 and positions.stream_seq(5) == 0
    assert positions.stream_seq(6) == 20
    positions.drop_below(8)  # inside a run: it stays
    assert positions.stream_seq(8) == 26 and len(positions) == 1
    positions.clear()
    assert len(positions) == 0 and positions.stream_seq(8) == 0


async def test_a_write_sent_again_checks_first_and_ends_when_the_check_fails(
    jetstream_url: str,
) -> None:
    """A batch JetStream cannot take (here: no stream for its subject) is sent again for
    the write's budget; the check before each send ends it at once (the store's: its
    lease went, so a step-down does not wait out the budget)."""
    async with channel(jetstream_url) as log:
        await delete_stream(log._conn, log.stream)
        append(log, 1, 3)
        checks = []

        def check() -> None:
            checks.append(time.monotonic())
            if len(checks) > 2:
                raise StoreError("this node's lease on the cluster is not current")

        started = time.monotonic()
        with pytest.raises(StoreError, match="lease"):
            await log.write(log.take(), budget=30, check=check)
        assert len(checks) == 3 and time.monotonic() - started < 10
        assert (log.last_sequence, log.fence) == (0, 0)
