"""Promotion on a real JetStream server: the node that takes the lease loads the records,
checks the shared streams side by side, once each, and reads each channel's figures,
never a stream whole: no message is read but those stored after the figures were
recorded. A stream still
electing (JetStream does not answer for it, as for 4-9 s after its leader died) is asked
again on its own: the records and the streams checked before it are not asked again.
Each channel serves once its own stream answered. One that never answers fails its
channels at the deadline, naming it, and the node steps down."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from stanpkg.stores.base import MessageBatch, StoreError
from stanpkg.stores.jetstream import channel_loads, promotion
from stanpkg.stores.jetstream.connection import API_TIMEOUT, ConnectionClosed, Pipeline
from stanpkg.stores.jetstream.layout import DEFAULT_CHANNEL_STREAMS, channel_stream_index
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.shared_streams import SharedStreams, StoredMessage
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.jetstream.stream_reader import StreamState
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_standby_view import _leader, _publish, _store

CONTENT = {"a.first": 5, "b.voting": 3, "c.first": 2}
ELECTING = channel_stream_index("b.voting", DEFAULT_CHANNEL_STREAMS)


class Faults:
    """Counts each shared stream's ensures and reads; JetStream's answer for stream
    ``electing`` is taken away the first ``times`` times, as while it has no leader."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, electing: int, times: int) -> None:
        self.ensures: Counter[int] = Counter()
        self.reads: Counter[int] = Counter()
        real_ensure, real_read = SharedStreams.ensure, SharedStreams.read
        faults = self

        async def ensure(
            self: SharedStreams, index: int, leader_timeout: float = API_TIMEOUT
        ) -> StreamState:
            faults.ensures[index] += 1
            if index == electing and faults.ensures[index] <= times:
                await asyncio.sleep(min(leader_timeout, 0.2))
                name = self.name(index)
                raise StoreError(f"JetStream did not answer for stream {name} (create or info)")
            return await real_ensure(self, index, leader_timeout)

        def read(
            self: SharedStreams, index: int, state: StreamState, channels: set[str]
        ) -> AsyncIterator[tuple[str, StoredMessage]]:
            faults.reads[index] += 1
            return real_read(self, index, state, channels)

        monkeypatch.setattr(SharedStreams, "ensure", ensure)
        monkeypatch.setattr(SharedStreams, "read", read)


async def _written(url: str, content: dict[str, int] = CONTENT) -> str:
    cluster_id = new_cluster_id()
    leader = await _leader(url, cluster_id)
    try:
        for channel, count in content.items():
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


async def test_a_stream_electing_is_asked_again_alone(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    indexes = {channel_stream_index(name, DEFAULT_CHANNEL_STREAMS) for name in CONTENT}
    assert len(indexes) == 3  # each channel in a stream of its own here
    faults = Faults(monkeypatch, ELECTING, times=3)
    log = LogCapture()
    async with _taking_over(jetstream_url, cluster_id, log) as node:
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        state = node.recover()
        assert state is not None
        msgs = {c.store.name: c.store.msgs for c in state.channels}
        # Each channel serves once its own stream answers: the others do not wait for the
        # one electing (three failed asks, 0.9 s at least).
        await asyncio.wait_for(msgs["a.first"].wait_loaded(), 30)
        await asyncio.wait_for(msgs["c.first"].wait_loaded(), 30)
        assert msgs["b.voting"].loading and not msgs["a.first"].loading
        await asyncio.wait_for(msgs["b.voting"].wait_loaded(), 30)
        got = {name: (m.first_sequence, m.last_sequence) for name, m in msgs.items()}
        assert got == {name: (1, count) for name, count in CONTENT.items()}
        assert faults.ensures == {
            index: 4 if index == ELECTING else 1 for index in range(DEFAULT_CHANNEL_STREAMS)
        }
        assert not faults.reads  # no stream is read whole
        waiting = [line for line in log.lines() if "waiting" in line]
        assert len(waiting) == 1 and f"_ch{ELECTING} " in waiting[0], waiting


async def test_a_stream_that_never_answers_fails_its_channels_at_the_deadline(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    faults = Faults(monkeypatch, ELECTING, times=10**6)
    monkeypatch.setattr(promotion, "PROMOTION_TIMEOUT", 1.5)
    async with _taking_over(jetstream_url, cluster_id) as node:
        lost: list[str] = []
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lost.append), 30)
        state = node.recover()
        assert state is not None
        msgs = {c.store.name: c.store.msgs for c in state.channels}
        # The channels of the streams that answer serve; the node steps down at the
        # deadline (to hand over to a peer that may load the stream).
        await asyncio.wait_for(msgs["a.first"].wait_loaded(), 30)
        with pytest.raises(StoreError, match=rf"_ch{ELECTING}: unable to load the cluster.s state"):
            await asyncio.wait_for(msgs["b.voting"].wait_loaded(), 30)
        assert len(lost) == 1 and f"_ch{ELECTING}" in lost[0], lost
        assert faults.reads[ELECTING] == 0 and faults.ensures[ELECTING] > 1
        # The others were asked side by side, once each: only the electing one again.
        assert all(faults.ensures[i] == 1 for i in range(DEFAULT_CHANNEL_STREAMS) if i != ELECTING)


async def test_many_channels_are_restored_from_their_figures(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 channels in the default streams: no stream read whole, each channel's figures its own."""
    content = {f"many.{n}": 1 + n % 4 for n in range(60)}
    cluster_id = await _written(jetstream_url, content)
    faults = Faults(monkeypatch, -1, times=0)
    async with _taking_over(jetstream_url, cluster_id) as node:
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        state = node.recover()
        assert state is not None
        await node.wait_loaded()
        got = {c.store.name: c.store.msgs.state()[0] for c in state.channels}
        assert got == content
        assert not faults.reads
        assert sum(faults.ensures.values()) == DEFAULT_CHANNEL_STREAMS


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
        assert await msgs.channel_log.last_message() is None
        release.set()
        await asyncio.wait_for(write, 10)
        last = await msgs.channel_log.last_message()
        assert last is not None and last.sequence == 1
        # A record that cannot be written fails the new channel's first write.
        broken[0] = True
        other = node.create_channel("new.two").msgs
        assert isinstance(other, ReplicatedMessages)
        other.store(_batch())
        with pytest.raises(StoreError, match="unable to replicate"):
            await asyncio.wait_for(other.flush(), 10)
        assert await other.channel_log.last_message() is None
    finally:
        node.close()
        await asyncio.sleep(0.2)


def _batch(stamp: int = 1) -> MessageBatch:
    """A publish batch of one message (data b"x") stamped ``stamp``."""
    return MessageBatch(stamp, [("", b"x")])


async def test_a_channel_waited_for_is_read_before_its_turn(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Channels are read a few at a time; the one a publish or a subscription waits for
    does not wait for its turn."""
    content = {f"turn.{n}": 1 for n in range(40)}
    cluster_id = await _written(jetstream_url, content)
    monkeypatch.setattr(channel_loads, "CONCURRENT_READS", 1)
    real = promotion._figures_of

    async def slow(log: Any, recorded: Any) -> Any:
        await asyncio.sleep(0.05)
        return await real(log, recorded)

    monkeypatch.setattr(promotion, "_figures_of", slow)
    async with _taking_over(jetstream_url, cluster_id) as node:
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        state = node.recover()
        assert state is not None
        msgs = {c.store.name: c.store.msgs for c in state.channels}
        last = sorted(msgs)[-1]
        await asyncio.wait_for(msgs[last].wait_loaded(), 30)
        assert msgs[last].last_sequence == 1
        assert sum(m.loading for m in msgs.values()) >= 35  # the others wait their turn
        await node.wait_loaded()
        assert not any(m.loading for m in msgs.values())
