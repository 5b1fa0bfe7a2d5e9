"""A deleted channel's messages on a real JetStream server: a channel is a subject of its
shared stream, so a new channel of the same name must not find the old one's messages,
whether it is created while the deletion runs or after the deletion failed. The messages
go before the channel's record: a node that takes over never finds messages without a
record (a new channel would be fenced by them)."""

from __future__ import annotations

import asyncio

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import MessageBatch, ServerInfo, StoreError
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.layout import kv_key
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_standby_view import _publish, _store


async def _serving(url: str, log: LogCapture) -> ClusteredStore:
    cluster_id = new_cluster_id()
    node = _store(cluster_id, "a", log)
    await node.connect(NatsEndpoint(url))
    assert await node.acquire_exclusive_lock(lambda _reason: None)
    await node.wait_loaded()  # its streams answer: channels are created at once
    assert node.recover() is None
    node.init(ServerInfo.for_cluster(cluster_id, "_STAN.discover"))
    return node


async def _stream_content(node: ClusteredStore, channel: str) -> list[tuple[int, bytes]]:
    """The channel's (STAN sequence, data) in its shared stream."""
    msgs = node.create_channel(channel).msgs
    assert isinstance(msgs, ReplicatedMessages)
    log = msgs.channel_log
    last = await log.last_message()
    if last is None:
        return []
    return [
        (stored.message.sequence, pb.MsgProto.FromString(stored.message.record).data)
        async for stored in log.read_after(0, last.stream_seq)
    ]


async def _records(node: ClusteredStore) -> dict[str, bytes]:
    records = node._records()
    assert records is not None
    await node.records_durable()
    return await records.load()


async def test_a_channel_created_again_while_its_messages_are_purged(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = await _serving(jetstream_url, LogCapture())
    real_purge = ChannelLog.purge_below

    async def slow_purge(self: ChannelLog, below: int) -> None:
        await asyncio.sleep(0.5)  # JetStream slow to answer
        await real_purge(self, below)

    monkeypatch.setattr(ChannelLog, "purge_below", slow_purge)
    try:
        await _publish(node, "again", 5)
        node.delete_channel("again")
        await _publish(node, "again", 2)  # at once: the old messages' purge is under way
        msgs = node.create_channel("again").msgs
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 2)
        content = await _stream_content(node, "again")
        assert [sequence for sequence, _ in content] == [1, 2]
        assert kv_key("channel", "again") in await _records(node)
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_messages_that_could_not_be_purged_are_purged_by_the_next_creation(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = LogCapture()
    node = await _serving(jetstream_url, log)
    try:
        await _publish(node, "kept", 5)
        real_purge = ChannelLog.purge_below
        failing = [True]

        async def purge(self: ChannelLog, below: int) -> None:
            if failing[0]:
                raise StoreError("JetStream did not answer $JS.API.STREAM.PURGE")
            await real_purge(self, below)

        monkeypatch.setattr(ChannelLog, "purge_below", purge)
        node.delete_channel("kept")
        await asyncio.sleep(0.3)
        assert log.contains("Unable to delete the messages of channel 'kept'")
        # The record stays: a node taking over now serves the channel with its messages
        # instead of finding messages no record names.
        assert kv_key("channel", "kept") in await _records(node)
        # Created again: its first write purges the old messages once more, and fails
        # while that fails.
        msgs = node.create_channel("kept").msgs
        msgs.store(MessageBatch(1, [("", b"")]))
        with pytest.raises(StoreError, match=r"STREAM\.PURGE"):
            await msgs.flush()
        failing[0] = False
        await _publish(node, "kept", 2)
        assert (msgs.first_sequence, msgs.last_sequence) == (1, 2)
        assert [sequence for sequence, _ in await _stream_content(node, "kept")] == [1, 2]
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_the_records_go_once_the_messages_are_gone(jetstream_url: str) -> None:
    node = await _serving(jetstream_url, LogCapture())
    try:
        await _publish(node, "gone", 3)
        await _publish(node, "stays", 2)
        msgs = node.create_channel("gone").msgs
        assert isinstance(msgs, ReplicatedMessages)
        log = msgs.channel_log
        await asyncio.sleep(1.5)  # the figures' record is written
        assert kv_key("state", "gone") in await _records(node)
        node.delete_channel("gone")
        await asyncio.sleep(0.5)
        records = await _records(node)
        assert kv_key("channel", "gone") not in records
        assert kv_key("state", "gone") not in records
        assert await log.last_message() is None
        assert [s for s, _ in await _stream_content(node, "stays")] == [1, 2]
    finally:
        node.close()
        await asyncio.sleep(0.2)
