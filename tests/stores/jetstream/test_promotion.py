"""Promotion on a real JetStream server: the node that takes the lease loads the records,
then the channels. A channel whose stream is still electing (JetStream does not answer
for it, as for 4-9 s after its leader died) is asked again on its own: the records and
the channels loaded before it are not read again (they were, up to 2026-11-26). One that
never answers fails the promotion at the deadline, naming its stream."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream import channel_streams
from stanpkg.stores.jetstream import store as store_module
from stanpkg.stores.jetstream.channel_streams import ChannelStream
from stanpkg.stores.jetstream.streams import StreamState
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


async def test_a_channel_electing_is_asked_again_alone(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    faults = Faults(monkeypatch, "b.electing", times=3)
    log = LogCapture()
    node = _store(cluster_id, "b", log)
    await node.connect(NatsEndpoint(jetstream_url))
    try:
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
    finally:
        node.close()
        await asyncio.sleep(0.2)


async def test_a_channel_that_never_answers_fails_the_promotion_at_the_deadline(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    faults = Faults(monkeypatch, "b.electing", times=10**6)
    monkeypatch.setattr(store_module, "PROMOTION_TIMEOUT", 1.5)
    node = _store(cluster_id, "b")
    await node.connect(NatsEndpoint(jetstream_url))
    try:
        with pytest.raises(StoreError, match=r"unable to load the cluster.s state.*b\.electing"):
            await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 30)
        assert faults.reads["b.electing"] == 0 and faults.ensures["b.electing"] > 1
        assert faults.reads["a.first"] == 1 and "c.first" not in faults.ensures
    finally:
        node.close()
        await asyncio.sleep(0.2)
