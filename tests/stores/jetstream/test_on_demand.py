"""The serving node keeps each channel's figures, and its messages only in pages read on
demand within ``cluster.read_cache`` (stores/jetstream/paged_messages.py), on a real
JetStream server: a promotion reads no message but those stored after the figures were
recorded; what a subscription needs is read from the stream, in order, exactly as
written; memory stays within the bound however much is stored; the limits apply when
the oldest page is not in memory."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import MessageBatch, ServerInfo
from stanpkg.stores.jetstream import channel_reader, shared_streams
from stanpkg.stores.jetstream.lazy_replication import LazyReplication
from stanpkg.stores.jetstream.paged_messages import PAGE
from stanpkg.stores.jetstream.record_codec import message_span
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.transport.connection import decode_headers
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_limits import _node

MIB = 1024 * 1024


def _with_cache(node: ClusteredStore, budget: int) -> ClusteredStore:
    settings = dataclasses.replace(node.settings, read_cache=budget)
    return ClusteredStore(node.plan, node.log, settings)


async def _serve(url: str, node: ClusteredStore) -> ClusteredStore:
    await node.connect(NatsEndpoint(url))
    assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
    await node.wait_loaded()  # every channel's figures read: a promotion's end
    if node.recover() is None:
        node.init(ServerInfo.for_cluster(node.settings.cluster_id, "_STAN.discover"))
    return node


async def _stop(node: ClusteredStore) -> None:
    node.close()
    await asyncio.sleep(0.3)  # releases the lease in the background


def _msgs(node: ClusteredStore, channel: str) -> ReplicatedMessages:
    msgs = node.create_channel(channel).msgs
    assert isinstance(msgs, ReplicatedMessages)
    return msgs


def _payload(channel: str, seq: int, size: int = 40) -> bytes:
    return f"{channel}#{seq}".encode().ljust(size, b".")


async def _fill(node: ClusteredStore, channel: str, count: int, size: int = 40) -> None:
    """``count`` messages, 100 a batch (payloads name their sequence)."""
    msgs = _msgs(node, channel)
    for start in range(1, count + 1, 100):
        end = min(count, start + 99)
        batch = [("", _payload(channel, seq, size)) for seq in range(start, end + 1)]
        msgs.store(MessageBatch(time.time_ns(), batch))
        await msgs.flush()


async def _read_all(msgs: ReplicatedMessages) -> list[pb.MsgProto]:
    """Every message, as a subscription gets them: what is readable now, then the rest
    once it is read."""
    found: list[pb.MsgProto] = []
    seq = msgs.first_sequence
    while seq <= msgs.last_sequence:
        end = msgs.readable_until(seq, min(msgs.last_sequence, seq + 999))
        if end < seq:
            await msgs.load(seq, seq)
            continue
        for record in msgs.lookup_run(seq, end):
            assert record is not None
            found.append(pb.MsgProto.FromString(record))
        seq = end + 1
    return found


class ReadCounter:
    """STAN messages read from the streams during a promotion, and whole-stream reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.messages = 0
        self.whole_streams = 0
        real_read_subject = channel_reader.read_subject
        real_read = shared_streams.SharedStreams.read
        counter = self

        async def read_subject(*args: object, **kwargs: object) -> AsyncIterator[object]:
            async for message in real_read_subject(*args, **kwargs):  # type: ignore[arg-type]
                counter.messages += message_span(decode_headers(message[1])[1])[1]  # a pack's all
                yield message

        def read(*args: object, **kwargs: object) -> object:
            counter.whole_streams += 1
            return real_read(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(channel_reader, "read_subject", read_subject)
        monkeypatch.setattr(shared_streams.SharedStreams, "read", read)


async def test_a_promotion_reads_no_message_and_subscriptions_read_them_on_demand(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = new_cluster_id()
    first = await _serve(jetstream_url, _node(cluster_id, "a", None, LogCapture()))
    try:
        await _fill(first, "big", 3000)
        await _fill(first, "small", 7)
    finally:
        await _stop(first)  # figures recorded at the stop

    reads = ReadCounter(monkeypatch)
    second = await _serve(jetstream_url, _node(cluster_id, "b", None, LogCapture()))
    try:
        assert reads.messages == 0 and reads.whole_streams == 0
        big = _msgs(second, "big")
        assert (big.first_sequence, big.last_sequence, big.state()[0]) == (1, 3000, 3000)
        assert big.readable_until(1, 3000) == 0  # nothing in memory: read when needed
        got = await _read_all(big)
        assert [m.sequence for m in got] == list(range(1, 3001))
        assert [m.data for m in got] == [_payload("big", n) for n in range(1, 3001)]
        assert {m.subject for m in got} == {"big"}
        # Each page once (and a page ahead), and the packs (a flush of 100 each) its ends
        # fall in once more.
        assert reads.messages <= 3000 + 2 * PAGE + (3000 // PAGE + 1) * 2 * 100
        small = _msgs(second, "small")
        assert [m.data for m in await _read_all(small)] == [
            _payload("small", n) for n in range(1, 8)
        ]
        # Written after the promotion: in memory at once, numbered on.
        await _fill(second, "big", 5)
        assert big.last_sequence == 3005 and big.readable_until(3001, 3005) == 3005
    finally:
        await _stop(second)


async def test_the_messages_stored_after_the_recorded_figures_are_read_at_promotion(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The figures are recorded once a second: a node that dies between two records left
    messages the figures do not count. The next one reads those (and only those), with
    their publish IDs: a client's resend of one is acknowledged, not stored again."""
    cluster_id = new_cluster_id()
    first = await _serve(jetstream_url, _node(cluster_id, "a", None, LogCapture()))
    await _fill(first, "tail", 500)
    await first._lazy.flush()
    # The next ones are written, their figures never recorded: the node "dies".
    msgs = _msgs(first, "tail")
    msgs.store(MessageBatch(time.time_ns(), [("", b"late-1"), ("", b"late-2")], ["g1", "g2"]))
    await msgs.flush()
    expected = msgs.state()
    monkeypatch.setattr(LazyReplication, "flush", _nothing)
    await _stop(first)
    monkeypatch.undo()

    reads = ReadCounter(monkeypatch)
    second = await _serve(jetstream_url, _node(cluster_id, "b", None, LogCapture()))
    try:
        assert reads.messages == 2
        tail = _msgs(second, "tail")
        assert (tail.first_sequence, tail.last_sequence, tail.state()[0]) == (1, 502, 502)
        assert tail.state() == expected == (502, expected[1])
        assert tail.has_guid("g2") and not tail.has_guid("g3")
    finally:
        await _stop(second)


async def _nothing(_self: LazyReplication) -> None:
    return


async def test_memory_stays_within_the_read_cache(jetstream_url: str) -> None:
    cluster_id = new_cluster_id()
    node = _with_cache(_node(cluster_id, "a", None, LogCapture()), MIB)
    await _serve(jetstream_url, node)
    try:
        await _fill(node, "wide", 12000, size=200)  # 2.4 MB of payloads
        assert node._pages.size <= MIB
        msgs = _msgs(node, "wide")
        assert msgs.readable_until(1, 10) == 0  # the oldest were let go
        got = await _read_all(msgs)
        assert [m.sequence for m in got] == list(range(1, 12001))
        assert got[0].data == _payload("wide", 1, 200)
        assert node._pages.size <= MIB
    finally:
        await _stop(node)


async def test_limits_apply_when_the_oldest_page_is_not_in_memory(
    jetstream_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "limits.conf"
    config.write_text("store_limits { channels { capped: { max_msgs: 1000 } } }\n")
    cluster_id = new_cluster_id()
    first = await _serve(jetstream_url, _node(cluster_id, "a", config, LogCapture()))
    try:
        await _fill(first, "capped", 1000)
    finally:
        await _stop(first)
    second = await _serve(jetstream_url, _node(cluster_id, "b", config, LogCapture()))
    try:
        capped = _msgs(second, "capped")
        assert capped.readable_until(1, 1) == 0
        await _fill(second, "capped", 10)
        deadline = time.monotonic() + 10
        while capped.first_sequence != 11 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # the oldest page is read, then the limit applies
        assert (capped.first_sequence, capped.last_sequence, capped.state()[0]) == (11, 1010, 1000)
        got = await _read_all(capped)
        assert [m.sequence for m in got] == list(range(11, 1011))
    finally:
        await _stop(second)
