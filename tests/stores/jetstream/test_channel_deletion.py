"""A deleted channel's stream on a real JetStream server: JetStream names the stream after
the channel, so a new channel of the same name must not find the old one's messages,
whether it is created while the deletion runs or after the deletion failed. The stream
goes before the channel's record: a node that takes over never finds a stream without a
record (a new channel would be written after its old messages)."""

from __future__ import annotations

import asyncio

import pytest

from stanpkg.stores.base import MessageBatch, ServerInfo, StoreError
from stanpkg.stores.jetstream.channel_streams import ChannelStream
from stanpkg.stores.jetstream.layout import kv_key
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.jetstream.stream_reader import read_range, stream_state
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_standby_view import _publish, _store


async def _serving(url: str, log: LogCapture) -> ClusteredStore:
    cluster_id = new_cluster_id()
    node = _store(cluster_id, "a", log)
    await node.connect(NatsEndpoint(url))
    assert await node.acquire_exclusive_lock(lambda _reason: None)
    assert node.recover() is None
    node.init(ServerInfo.for_cluster(cluster_id, "_STAN.discover"))
    return node


async def _stream_content(node: ClusteredStore, channel: str) -> list[tuple[int, bytes]]:
    msgs = node.create_channel(channel).msgs
    assert isinstance(msgs, ReplicatedMessages)
    conn, name = msgs.stream._conn, msgs.stream.name
    state = await stream_state(conn, name)
    return [(s, d) async for s, _, d in read_range(conn, name, state.first_seq, state.last_seq)]


async def _records(node: ClusteredStore) -> dict[str, bytes]:
    assert node._state is not None
    await node.records_durable()
    return await node._state.load()


async def test_a_channel_created_again_while_its_stream_is_deleted(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = await _serving(jetstream_url, LogCapture())
    real_delete = ChannelStream.delete

    async def slow_delete(self: ChannelStream) -> None:
        await asyncio.sleep(0.5)  # JetStream slow to answer
        await real_delete(self)

    monkeypatch.setattr(ChannelStream, "delete", slow_delete)
    try:
        await _publish(node, "again", 5)
        node.delete_channel("again")
        await _publish(node, "again", 2)  # at once: the old stream's deletion is under way
        msgs = node.create_channel("again").msgs
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 2)
        content = await _stream_content(node, "again")
        assert [sequence for sequence, _ in content] == [1, 2]
        assert kv_key("channel", "again") in await _records(node)
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_a_stream_that_could_not_be_deleted_is_deleted_by_the_next_creation(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = LogCapture()
    node = await _serving(jetstream_url, log)
    try:
        await _publish(node, "kept", 5)
        real_delete = ChannelStream.delete
        failing = [True]

        async def delete(self: ChannelStream) -> None:
            if failing[0]:
                raise StoreError("JetStream did not answer $JS.API.STREAM.DELETE")
            await real_delete(self)

        monkeypatch.setattr(ChannelStream, "delete", delete)
        node.delete_channel("kept")
        await asyncio.sleep(0.3)
        assert log.contains("Unable to delete the stream of channel 'kept'")
        # The record stays: a node taking over now serves the channel with its messages
        # instead of finding a stream no record names.
        assert kv_key("channel", "kept") in await _records(node)
        # Created again: its first write deletes the old stream once more, and fails
        # while that fails.
        msgs = node.create_channel("kept").msgs
        msgs.store(MessageBatch(1, [("", b"")]))
        with pytest.raises(StoreError, match=r"STREAM\.DELETE"):
            await msgs.flush()
        failing[0] = False
        await _publish(node, "kept", 2)
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 2)
        assert [sequence for sequence, _ in await _stream_content(node, "kept")] == [1, 2]
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_the_record_goes_once_the_stream_is_gone(jetstream_url: str) -> None:
    node = await _serving(jetstream_url, LogCapture())
    try:
        await _publish(node, "gone", 3)
        msgs = node.create_channel("gone").msgs
        assert isinstance(msgs, ReplicatedMessages)
        conn, name = msgs.stream._conn, msgs.stream.name
        node.delete_channel("gone")
        await asyncio.sleep(0.5)
        assert kv_key("channel", "gone") not in await _records(node)
        with pytest.raises(StoreError, match="stream not found"):
            await stream_state(conn, name)
    finally:
        node.close()
        await asyncio.sleep(0.2)
