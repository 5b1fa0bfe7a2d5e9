"""Packs: a flush of small messages kept as one stream message (``record_codec``), and
every reader of a channel (positions, search, runs, the last message, purges) reading
packs and lone messages alike, on a real JetStream server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import MessageBatch, StoreError
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.layout import LAYOUT_KEY
from stanpkg.stores.jetstream.record_codec import (
    decode_layout,
    decode_messages,
    decode_stream_messages,
    pack_runs,
    packed_batch_messages,
)
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.jetstream.stream_positions import StreamPositions
from stanpkg.stores.jetstream.stream_reader import stream_state
from stanpkg.transport.connection import decode_headers
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_channel_log import channel
from tests.stores.jetstream.test_conversion import _records
from tests.stores.jetstream.test_limits import LAZY, LIMITS, _in_stream, _node, _serving
from tests.stores.jetstream.test_on_demand import _msgs, _payload, _read_all, _serve, _stop
from tests.stores.jetstream.test_streams import writes_of

# -- the bytes -------------------------------------------------------------------------------


@given(
    writes_of(40, 30),
    st.integers(min_value=1, max_value=2**40),
    st.integers(min_value=0, max_value=300),
)
def test_packed_messages_read_back_as_written(
    writes: list[tuple[str, str, int, bytes]], first: int, pack_bytes: int
) -> None:
    batch = [(first + i, *write) for i, write in enumerate(writes)]
    runs = pack_runs(batch, pack_bytes)
    assert sum(runs) == len(batch) and all(runs)
    out = packed_batch_messages(batch, runs, "b-1", 7)
    assert len(out) == len(runs)
    read = [m for headers, data in out for m in decode_stream_messages("ch", headers, data)]
    assert [(m.sequence, m.guid, m.timestamp) for m in read] == [
        (sequence, guid, timestamp) for sequence, guid, _, timestamp, _ in batch
    ]
    for message, (sequence, _, reply, timestamp, payload) in zip(read, batch, strict=True):
        assert pb.MsgProto.FromString(message.record) == pb.MsgProto(
            sequence=sequence, subject="ch", reply=reply, data=payload, timestamp=timestamp
        )
    first_fields = decode_headers(out[0][0])[1]
    last_fields = decode_headers(out[-1][0])[1]
    assert first_fields["Nats-Expected-Last-Subject-Sequence"] == "7"
    assert last_fields["Nats-Batch-Commit"] == "1"
    if batch[-1][1]:  # the last message's publish ID, which a lost answer is judged by
        assert last_fields["Stan-Guid"] == batch[-1][1]


def test_a_pack_holds_what_fits_and_a_larger_message_goes_alone() -> None:
    small = [(n, f"g{n}", "", n, b"x" * 10) for n in range(1, 7)]
    big = (7, "g7", "", 7, b"y" * 500)
    entry = 10 + 2 + 16  # payload, publish ID, an entry's overhead
    assert pack_runs(small, 3 * entry) == [3, 3]
    assert pack_runs([*small, big], 7 * entry) == [6, 1]
    assert pack_runs([big, *small], 7 * entry) == [1, 6]
    assert pack_runs(small, 0) == [1] * 6  # no packs


def test_a_damaged_pack_is_a_store_error_not_a_crash() -> None:
    fields = {"Stan-Sequence": "5", "Stan-Count": "3"}
    two = spb.MessagePack(
        Data=[b"a", b"b"], Timestamps=[1, 2], Replies=["", ""], Guids=["g", "h"]
    ).SerializeToString()
    with pytest.raises(StoreError, match="damaged pack of channel 'ch' at 5: not 3 messages"):
        decode_messages("ch", fields, two)
    with pytest.raises(StoreError, match="damaged pack of channel 'ch' at 5"):
        decode_messages("ch", fields, b"\xff\xff\xff")
    with pytest.raises(StoreError, match="without Stan-Sequence"):
        decode_messages("ch", {"Stan-Count": "3"}, two)
    with pytest.raises(StoreError, match="Stan-Sequence 5 of 0"):
        decode_messages("ch", {"Stan-Sequence": "5", "Stan-Count": "0"}, two)


def test_layouts_2_and_3_are_read_and_a_later_one_refused() -> None:
    for version in (2, 3):
        layout = decode_layout(b'{"version": %d, "channel_streams": 4}' % version)
        assert layout is not None and layout.version == version
    with pytest.raises(StoreError, match="layout 4; this release reads layouts 2 and 3"):
        decode_layout(b'{"version": 4, "channel_streams": 4}')
    assert LAYOUT_KEY == "layout"


def test_positions_map_packs_and_lone_messages() -> None:
    positions = StreamPositions()
    positions.add_runs(1, 12, [1, 1, 400])  # 1 at 10, 2 at 11, 3..402 in a pack at 12
    positions.add_runs(403, 14, [1, 1])  # 403 at 13, 404 at 14
    assert [positions.stream_seq(n) for n in (1, 2, 3, 200, 402, 403, 404, 405)] == [
        10, 11, 12, 12, 12, 13, 14, 0,
    ]  # fmt: skip
    assert len(positions) == 3  # the lone messages either side of the pack are one run each
    assert positions.stream_seqs(401, 4) == [12, 12, 13, 14]
    assert positions.stream_seqs(401, 5) == []  # 405 is not known
    positions.drop_below(300)  # inside the pack: it stays
    assert positions.stream_seq(300) == 12 and positions.stream_seq(2) == 0
    # What a catch-up reads back, one message at a time: merged into runs again.
    read = StreamPositions()
    for sequence, stream_seq in [(1, 10), (2, 11), (3, 12), (4, 12), (5, 12), (6, 13)]:
        read.add(sequence, stream_seq, packed=True)
    assert [read.stream_seq(n) for n in range(1, 7)] == [10, 11, 12, 12, 12, 13]
    assert len(read) <= 3


# -- on JetStream ----------------------------------------------------------------------------


def append(log: ChannelLog, first: int, last: int, size: int = 20) -> None:
    for n in range(first, last + 1):
        log.append(
            n, f"_INBOX.{n}" if n % 7 == 0 else "", 1000 + n, b"%d:" % n + b"m" * size, f"g{n}"
        )


def fresh(log: ChannelLog) -> ChannelLog:
    """Another node's view of the same channel: nothing known of its positions."""
    other = ChannelLog(log._conn, log._writer, "x", log.channel, 0)
    other.stream, other.subject = log.stream, log.subject
    return other


async def flushed(log: ChannelLog, pack_bytes: int, first: int, last: int) -> None:
    """Messages first..last written in one flush, in packs of ``pack_bytes``."""
    log.pack_bytes = pack_bytes
    append(log, first, last)
    await log.flush()


async def test_a_flush_of_small_messages_is_a_few_stream_messages_read_back_whole(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as log:
        await flushed(log, 4096, 1, 600)
        state = await stream_state(log._conn, log.stream)
        assert state.msgs == log.fence < 30  # about 4096 / (24 + 4 + 16) messages each
        last = await log.last_message()
        assert last is not None and (last.sequence, last.guid) == (600, "g600")
        assert last.stream_seq == log.fence and last.first < 600
        other = fresh(log)
        other.start_at(last)
        for first, end in [(1, 1), (1, 600), (250, 251), (333, 480), (599, 600), (600, 600)]:
            got = await other.read_messages(first, end)
            # The rest of the pack holding ``end`` comes too (read already).
            assert [m.sequence for m in got] == list(range(first, got[-1].sequence + 1))
            got = [m for m in got if m.sequence <= end]
            assert got[-1].sequence == end, (first, end)
            record = pb.MsgProto.FromString(got[-1].record)
            assert record.data == b"%d:" % end + b"m" * 20 and got[-1].guid == f"g{end}"
            assert record.reply == (f"_INBOX.{end}" if end % 7 == 0 else "")
        read = [stored.message.sequence async for stored in log.read_after(0, log.fence)]
        assert read == list(range(1, 601))


async def test_lone_messages_and_packs_read_alike_in_one_channel(jetstream_url: str) -> None:
    """A channel written before packs (layout 2: a stream message each) and after."""
    async with channel(jetstream_url) as log:
        await flushed(log, 0, 1, 50)  # as layout 2 wrote
        await flushed(log, 1024, 51, 300)
        await flushed(log, 0, 301, 310)
        assert 50 + 10 < log.fence < 50 + 10 + 30
        other = fresh(log)
        other.start_at(await log.last_message())
        for first, end in [(1, 310), (40, 60), (50, 51), (120, 121), (299, 305), (310, 310)]:
            got = await other.read_messages(first, end)
            assert [m.sequence for m in got if m.sequence <= end] == list(range(first, end + 1))
        assert await other.first_stored() == 1


async def test_a_purge_inside_a_pack_keeps_the_pack_and_reads_from_the_first_kept(
    jetstream_url: str,
) -> None:
    async with channel(jetstream_url) as log:
        await flushed(log, 2048, 1, 200)
        keep_from = 130
        pack = log.positions.stream_seq(keep_from)
        assert pack and log.positions.stream_seq(keep_from - 1) == pack  # inside a pack
        await log.purge_below(pack)
        # The pack stays (what it holds before 130 too); a reader skips what was dropped.
        assert await log.first_stored() < keep_from
        other = fresh(log)
        other.start_at(await log.last_message())
        got = await other.read_messages(keep_from, 150)
        assert [m.sequence for m in got if m.sequence <= 150] == list(range(keep_from, 151))
        assert [m.sequence for m in await other.read_messages(1, 5)] == []


async def test_a_pack_whose_answer_was_lost_is_judged_stored_by_its_last_message(
    jetstream_url: str,
) -> None:
    """The fence judgment reads the channel's last message: a pack's last publish ID."""
    async with channel(jetstream_url) as log:
        log.pack_bytes = 1 << 20
        append(log, 1, 40)
        writes = log.take()
        sent = log.send(writes)
        await log._writer.answer(sent, 5)  # stored; its answer "lost"
        await log.write(writes)  # sent again: refused by the fence, judged stored
        assert (log.last_sequence, log.fence) == (40, 1)
        append(log, 41, 45)
        await log.flush()
        last = await log.last_message()
        assert last is not None and (last.sequence, last.stream_seq, last.first) == (45, 2, 41)


# -- through the store -----------------------------------------------------------------------


async def _store_run(node: ClusteredStore, first: int, last: int) -> None:
    """Messages first..last of channel "orders", flushes of 100."""
    msgs = _msgs(node, "orders")
    for start in range(first, last + 1, 100):
        batch = [("", _payload("orders", n)) for n in range(start, min(last, start + 99) + 1)]
        msgs.store(MessageBatch(time.time_ns(), batch))
        await msgs.flush()


async def _layout_version(url: str, cluster_id: str) -> int:
    layout = decode_layout((await _records(url, cluster_id)).get(LAYOUT_KEY))
    assert layout is not None
    return layout.version


async def test_nodes_that_pack_and_nodes_that_do_not_serve_one_cluster(
    jetstream_url: str,
) -> None:
    """A cluster written without packs (layout 2), then by a node that packs (layout 3
    from then on), then served by a node that does not: every message read back."""
    cluster_id = new_cluster_id()
    plain = await _serve(jetstream_url, _node(cluster_id, "a", None, LogCapture()))
    await _store_run(plain, 1, 300)
    await _stop(plain)
    assert await _layout_version(jetstream_url, cluster_id) == 2

    packing = _node(cluster_id, "b", None, LogCapture(), pack_bytes=64 * 1024)
    await _serve(jetstream_url, packing)
    await _store_run(packing, 301, 1300)
    log = _msgs(packing, "orders").channel_log
    assert log.fence == 300 + 10  # 300 lone messages, then a pack a flush
    await _stop(packing)
    assert await _layout_version(jetstream_url, cluster_id) == 3

    reader = await _serve(jetstream_url, _node(cluster_id, "c", None, LogCapture()))
    try:
        msgs = _msgs(reader, "orders")
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 1300)
        got = await _read_all(msgs)
        assert [m.sequence for m in got] == list(range(1, 1301))
        assert [m.data for m in got] == [_payload("orders", n) for n in range(1, 1301)]
        await _store_run(reader, 1301, 1305)  # lone messages again, numbered on
        assert msgs.last_sequence == 1305
    finally:
        await _stop(reader)
    assert await _layout_version(jetstream_url, cluster_id) == 3  # packs may be there


async def test_limits_inside_a_pack_and_the_next_node_agree(
    jetstream_url: str, tmp_path: Path
) -> None:
    """A purge never splits a pack: what the limits dropped stays in it, and the next
    node starts where the figures say, not where the pack does."""
    config = tmp_path / "limits.conf"
    config.write_text(LIMITS)  # capped.*: max_msgs 3
    cluster_id = new_cluster_id()
    node = await _serving(
        jetstream_url, _node(cluster_id, "a", config, LogCapture(), pack_bytes=64 * 1024)
    )
    try:
        capped = _msgs(node, "capped.a")
        capped.store(MessageBatch(time.time_ns(), [("", b"m%d" % n) for n in range(1, 11)]))
        await capped.flush()  # one pack of 10
        assert (capped.first_sequence, capped.last_sequence) == (8, 10)
        await asyncio.sleep(LAZY)
        assert await _in_stream(capped) == list(range(1, 11))
        assert capped.channel_log.fence == 1
    finally:
        await _stop(node)
    other = await _serving(jetstream_url, _node(cluster_id, "b", config, LogCapture()))
    try:
        capped = _msgs(other, "capped.a")
        assert (capped.first_sequence, capped.last_sequence, capped.state()[0]) == (8, 10, 3)
        await capped.load(8, 10)
        assert [pb.MsgProto.FromString(capped.lookup(n) or b"").data for n in (8, 9, 10)] == [
            b"m8",
            b"m9",
            b"m10",
        ]
        assert capped.lookup(7) is None
    finally:
        await _stop(other)
