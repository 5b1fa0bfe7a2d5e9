"""Per-channel limits in the clustered store, on a real JetStream server: the serving
node's memory applies max_msgs, max_bytes and max_age as a standalone store does (with
wildcard inheritance), what it drops is purged from the shared stream lazily, each
channel's figures are replicated, and the node that takes over loads the same channel,
its sequences going on where they were, also once every message is gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.log import Logger
from stanpkg.stores.base import MessageBatch, ServerInfo
from stanpkg.stores.jetstream.record_codec import ChannelState, decode_records
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore, ClusterSettings
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, make_plan, new_cluster_id

LIMITS = """streaming {
  store_limits {
    channels {
      "capped.*": { max_msgs: 3 }
      "sized": { max_bytes: 200 }
      "aged": { max_age: "1s" }
    }
  }
}
"""
LAZY = 1.6  # past one round of the lazy replication (each second)


def _node(
    cluster_id: str, name: str, config: Path | None, log: LogCapture, *, pack_bytes: int = 0
) -> ClusteredStore:
    args = ["-st", "file", "-dir", "unused", "-clustered", "-cluster_node_id", name]
    if config is not None:
        args = ["-sc", str(config), *args]
    plan = make_plan(*args, cluster_id=cluster_id)
    settings = ClusterSettings(
        cluster_id, name, (), replicas=1, lease_ttl=2.0, pack_bytes=pack_bytes
    )
    return ClusteredStore(plan, Logger(stream=log, debug=False, trace=False), settings)


async def _serving(url: str, node: ClusteredStore) -> ClusteredStore:
    await node.connect(NatsEndpoint(url))
    assert await node.acquire_exclusive_lock(lambda _reason: None)
    await node.wait_loaded()  # every channel's figures read: a promotion's end
    if node.recover() is None:
        node.init(ServerInfo.for_cluster(node.settings.cluster_id, "_STAN.discover"))
    return node


def _msgs(node: ClusteredStore, channel: str) -> ReplicatedMessages:
    msgs = node.create_channel(channel).msgs
    assert isinstance(msgs, ReplicatedMessages)
    return msgs


async def _publish(node: ClusteredStore, channel: str, count: int, size: int = 10) -> None:
    msgs = _msgs(node, channel)
    for _ in range(count):
        msgs.store(MessageBatch(time.time_ns(), [("", b"x" * size)]))
        await msgs.flush()


async def _in_stream(msgs: ReplicatedMessages) -> list[int]:
    """The STAN sequences the channel's subject holds."""
    last = await msgs.channel_log.last_message()
    if last is None:
        return []
    return [
        stored.message.sequence async for stored in msgs.channel_log.read_after(0, last.stream_seq)
    ]


async def _figures(node: ClusteredStore, channel: str) -> ChannelState | None:
    records = node._records()
    assert records is not None
    decoded = decode_records(await records.load())
    assert decoded is not None
    return decoded.states.get(channel)


async def test_limits_drop_from_memory_and_then_from_the_stream(
    jetstream_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "limits.conf"
    config.write_text(LIMITS)
    cluster_id = new_cluster_id()
    node = await _serving(jetstream_url, _node(cluster_id, "a", config, LogCapture()))
    try:
        await _publish(node, "capped.a", 10)  # the wildcard's max_msgs
        await _publish(node, "sized", 10, size=30)  # each record about 45 bytes
        await _publish(node, "aged", 2)
        await _publish(node, "free", 5)
        capped, sized, aged = _msgs(node, "capped.a"), _msgs(node, "sized"), _msgs(node, "aged")
        assert (capped.first_sequence, capped.last_sequence) == (8, 10)
        count, size = sized.state()
        assert size <= 200 and sized.last_sequence == 10 and count < 10
        await asyncio.sleep(1.1)
        aged.expire(time.time_ns())  # the server's timer
        assert aged.state() == (0, 0) and aged.first_sequence == 3
        await asyncio.sleep(LAZY)
        assert await _in_stream(capped) == [8, 9, 10]
        assert await _in_stream(sized) == list(range(11 - count, 11))
        assert await _in_stream(aged) == []  # all gone: the next write expects none
        assert await _in_stream(_msgs(node, "free")) == [1, 2, 3, 4, 5]
        assert await _figures(node, "capped.a") == ChannelState(3, capped.state()[1], 8, 10)
        assert await _figures(node, "aged") == ChannelState(0, 0, 3, 2)
        await _publish(node, "aged", 1)
        assert (aged.first_sequence, aged.last_sequence) == (3, 3)
        assert await _in_stream(aged) == [3]
    finally:
        node.close()
        await asyncio.sleep(0.2)

    # The next node loads the same channels, sequences and figures.
    log = LogCapture()
    other = await _serving(jetstream_url, _node(cluster_id, "b", config, log))
    try:
        capped = _msgs(other, "capped.a")
        assert (capped.first_sequence, capped.last_sequence, capped.state()[0]) == (8, 10, 3)
        assert capped.readable_until(8, 10) == 7  # not in memory: read on demand
        await capped.load(8, 10)
        record = capped.lookup(8)
        assert record is not None and pb.MsgProto.FromString(record).sequence == 8
        aged = _msgs(other, "aged")  # its message 3 may have aged out meanwhile
        assert aged.last_sequence == 3 and aged.first_sequence in (3, 4)
        await _publish(other, "capped.a", 1)
        assert capped.last_sequence == 11 and capped.first_sequence == 9
    finally:
        other.close()
        await asyncio.sleep(0.2)


async def test_a_channel_emptied_by_its_limits_goes_on_after_a_takeover(
    jetstream_url: str, tmp_path: Path
) -> None:
    """Every message of the channel gone from memory and from the stream: the node that
    takes over finds the channel's last sequence in its figures' record."""
    config = tmp_path / "limits.conf"
    config.write_text(LIMITS)
    cluster_id = new_cluster_id()
    node = await _serving(jetstream_url, _node(cluster_id, "a", config, LogCapture()))
    try:
        await _publish(node, "aged", 4)
        await asyncio.sleep(1.1)
        _msgs(node, "aged").expire(time.time_ns())
        await asyncio.sleep(LAZY)
        assert await _in_stream(_msgs(node, "aged")) == []
    finally:
        node.close()
        await asyncio.sleep(0.2)
    other = await _serving(jetstream_url, _node(cluster_id, "b", config, LogCapture()))
    try:
        aged = _msgs(other, "aged")
        assert (aged.first_sequence, aged.last_sequence, aged.state()) == (5, 4, (0, 0))
        await _publish(other, "aged", 1)
        assert (aged.first_sequence, aged.last_sequence) == (5, 5)
    finally:
        other.close()
        await asyncio.sleep(0.2)


async def test_promotion_applies_the_limits_and_purges_the_excess(
    jetstream_url: str, tmp_path: Path
) -> None:
    """A node started with smaller limits than the stream holds (the configuration
    changed): what it reads goes through its limits, as a standalone store's recovery,
    and the excess leaves the stream."""
    cluster_id = new_cluster_id()
    node = await _serving(jetstream_url, _node(cluster_id, "a", None, LogCapture()))
    try:
        await _publish(node, "capped.b", 10)
    finally:
        node.close()
        await asyncio.sleep(0.2)
    config = tmp_path / "limits.conf"
    config.write_text(LIMITS)
    other = await _serving(jetstream_url, _node(cluster_id, "b", config, LogCapture()))
    try:
        capped = _msgs(other, "capped.b")
        assert (capped.first_sequence, capped.last_sequence) == (8, 10)
        await asyncio.sleep(LAZY)
        assert await _in_stream(capped) == [8, 9, 10]
        assert await _figures(other, "capped.b") == ChannelState(3, capped.state()[1], 8, 10)
    finally:
        other.close()
        await asyncio.sleep(0.2)


async def test_an_idle_node_replicates_nothing(jetstream_url: str) -> None:
    """Idle, the serving node writes nothing, however many channels it has: the lazy
    replication visits only the channels that changed."""
    node = await _serving(jetstream_url, _node(new_cluster_id(), "a", None, LogCapture()))
    try:
        for n in range(30):
            await _publish(node, f"idle.{n}", 1)
        await asyncio.sleep(LAZY)
        state = node._records()
        assert state is not None
        writes: list[int] = []
        real = state.flush

        async def counted(budget: float = 10.0) -> None:
            writes.append(state.queued)
            await real(budget)

        state.flush = counted  # type: ignore[method-assign]
        assert node._lazy.idle
        await asyncio.sleep(2 * LAZY)
        assert sum(writes) == 0
    finally:
        node.close()
        await asyncio.sleep(0.2)
