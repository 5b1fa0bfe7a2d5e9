"""Promotion on a real JetStream server: the node that takes the lease loads the records,
then the channels. A channel whose stream is still electing (JetStream does not answer
for it, as for 4-9 s after its leader died) is asked again on its own: the records and
the channels loaded before it are not read again (they were, up to 2026-11-26). One that
never answers fails the promotion at the deadline, naming its stream."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from stanpkg.stores.base import MessageBatch, StoreError
from stanpkg.stores.jetstream import channel_streams
from stanpkg.stores.jetstream import store as store_module
from stanpkg.stores.jetstream.channel_streams import ChannelStream
from stanpkg.stores.jetstream.jetstream_api import ConnectionClosed, Pipeline
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.jetstream.stream_reader import StreamState, find_stream_state, stream_state
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_standby_view import _leader, _publish, _store

CONTENT = {"a.first": 5, "b.electing": 3, "c.first": 2}


class Faults:
    """Counts each channel's ensures and reads; JetStream's answer for the stream of
    ``electing`` is taken away the first ``times`` times, as while it has no leader."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, electing: str, times: int) -> None:
        self.ensures: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        real_ensure, real_read = channel_streams.ensure_stream, ChannelStream.read
        faults = self

        def channel_of(stream: str) -> str:
            return next(name for name in CONTENT if f"_{name.replace('.', '_')}_" in stream)

        async def ensure(
            conn: NatsConnection, config: dict[str, Any], *, leader_timeout: float
        ) -> StreamState:
            channel = channel_of(config["name"])
            faults.ensures[channel] += 1
            if channel == electing and faults.ensures[channel] <= times:
                await asyncio.sleep(min(leader_timeout, 0.2))
                name = config["name"]
                raise StoreError(f"JetStream did not answer for stream {name} (create or info)")
            return await real_ensure(conn, config, leader_timeout=leader_timeout)

        def read(self: ChannelStream, first: int, last: int) -> AsyncIterator[tuple[bytes, str]]:
            faults.reads[self.channel] += 1
            return real_read(self, first, last)

        monkeypatch.setattr(channel_streams, "ensure_stream", ensure)
        monkeypatch.setattr(ChannelStream, "read", read)


async def _written(url: str) -> str:
    cluster_id = new_cluster_id()
    leader = await _leader(url, cluster_id)
    try:
        for channel, count in CONTENT.items():
            await _publish(leader, channel, count)
    finally:
        leader.close()  # releases the lease at once
        await asyncio.sleep(0.2)
    return cluster_id


@asynccontextmanager
async def _taking_over(
    url: str, cluster_id: str, log: LogCapture | None = None
) -> AsyncIterator[ClusteredStore]:
    """Node b, connected, about to take the lease of the cluster _written made."""
    node = _store(cluster_id, "b", log)
    await node.connect(NatsEndpoint(url))
    try:
        yield node
    finally:
        node.close()
        await asyncio.sleep(0.2)  # its connections close in the background


async def test_a_channel_electing_is_asked_again_alone(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    faults = Faults(monkeypatch, "b.electing", times=3)
    log = LogCapture()
    async with _taking_over(jetstream_url, cluster_id, log) as node:
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        state = node.recover()
        assert state is not None
        got = {
            c.store.name: (c.store.msgs.first_sequence, c.store.msgs.last_sequence)
            for c in state.channels
        }
        assert got == {name: (1, count) for name, count in CONTENT.items()}
        assert faults.ensures == {"a.first": 1, "b.electing": 4, "c.first": 1}
        assert faults.reads == {"a.first": 1, "b.electing": 1, "c.first": 1}
        waiting = [line for line in log.lines() if "waiting" in line]
        assert len(waiting) == 1 and "b.electing" in waiting[0], waiting


async def test_a_channel_that_never_answers_fails_the_promotion_at_the_deadline(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    faults = Faults(monkeypatch, "b.electing", times=10**6)
    monkeypatch.setattr(store_module, "PROMOTION_TIMEOUT", 1.5)
    async with _taking_over(jetstream_url, cluster_id) as node:
        with pytest.raises(StoreError, match=r"unable to load the cluster.s state.*b\.electing"):
            await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        assert faults.reads["b.electing"] == 0 and faults.ensures["b.electing"] > 1
        assert faults.reads["a.first"] == 1 and "c.first" not in faults.ensures


async def test_a_new_channels_first_write_waits_for_its_record(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node that takes over learns the channels from the records: a message
    acknowledged in a channel whose record was lost would be invisible to it (seen in
    tests/cluster: the records' write went unanswered while their stream's leader moved,
    the channel's did not, and the serving node died). So a new channel's first write
    waits for the records, and fails when they cannot be written."""
    node = await _leader(jetstream_url, new_cluster_id())
    try:
        await asyncio.sleep(0.3)  # the server record is out
        real = Pipeline.publish_all
        release = asyncio.Event()
        broken = [False]

        async def held(
            self: Pipeline, writes: Sequence[Any], *, timeout: float
        ) -> Sequence[int | Exception]:
            if broken[0]:
                return [ConnectionClosed("closed") for _ in writes]
            await release.wait()
            return await real(self, writes, timeout=timeout)

        monkeypatch.setattr(Pipeline, "publish_all", held)
        msgs = node.create_channel("new.one").msgs
        assert isinstance(msgs, ReplicatedMessages)
        msgs.store(_batch())
        write = msgs.begin_flush()
        await asyncio.sleep(0.5)
        assert not write.done()
        assert await find_stream_state(msgs.stream._conn, msgs.stream.name) is None
        release.set()
        await asyncio.wait_for(write, 10)
        state = await stream_state(msgs.stream._conn, msgs.stream.name)
        assert state.last_seq == 1
        # A record that cannot be written fails the new channel's first write.
        broken[0] = True
        other = node.create_channel("new.two").msgs
        assert isinstance(other, ReplicatedMessages)
        other.store(_batch())
        with pytest.raises(StoreError, match="unable to replicate"):
            await asyncio.wait_for(other.flush(), 10)
        assert await find_stream_state(other.stream._conn, other.stream.name) is None
    finally:
        node.close()
        await asyncio.sleep(0.2)


def _batch(stamp: int = 1) -> MessageBatch:
    """A publish batch of one message (data b"x") stamped ``stamp``."""
    return MessageBatch(stamp, [("", b"x")])
