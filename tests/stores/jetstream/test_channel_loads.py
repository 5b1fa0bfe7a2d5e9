"""Incremental promotion through a real server in clustered mode, on a real JetStream
server: the node that takes the lease serves as soon as it has read the records, and each
channel once its own shared stream answers. While a stream still elects its leader (held
here: JetStream's answers for it are taken away until the test lets them through), the
publishes and subscriptions of its channels wait, in order, and every other channel
serves; once it answers, they are answered with the sequences that follow the stored
ones."""

from __future__ import annotations

import asyncio

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.server import StreamingServer
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import API_TIMEOUT
from stanpkg.stores.jetstream.layout import DEFAULT_CHANNEL_STREAMS, channel_stream_index
from stanpkg.stores.jetstream.shared_streams import SharedStreams
from stanpkg.stores.jetstream.stream_reader import StreamState
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture
from tests.server.stan_client import StanClient
from tests.stores.jetstream.test_promotion import CONTENT, ELECTING, _written
from tests.stores.jetstream.test_standby_view import _store


def _hold_stream(monkeypatch: pytest.MonkeyPatch, index: int) -> asyncio.Event:
    """Stream ``index`` answers no create or info until the event is set."""
    answers = asyncio.Event()
    real_ensure = SharedStreams.ensure

    async def ensure(
        self: SharedStreams, stream: int, leader_timeout: float = API_TIMEOUT
    ) -> StreamState:
        if stream == index and not answers.is_set():
            await asyncio.sleep(min(leader_timeout, 0.2))
            raise StoreError(f"JetStream did not answer for stream {self.name(stream)}")
        return await real_ensure(self, stream, leader_timeout)

    monkeypatch.setattr(SharedStreams, "ensure", ensure)
    return answers


async def test_each_channel_serves_once_its_own_stream_answers(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_id = await _written(jetstream_url)
    assert channel_stream_index("a.first", DEFAULT_CHANNEL_STREAMS) != ELECTING
    answers = _hold_stream(monkeypatch, ELECTING)
    store = _store(cluster_id, "b")
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    server = StreamingServer(store.plan, store, log, mode=mode_for(store.plan))
    await asyncio.wait_for(server.start(NatsEndpoint(jetstream_url)), 30)
    client = await StanClient.connect(jetstream_url, cluster_id, "loads")
    try:
        # Held: its stream elects. Sent first, answered last.
        held = await client.publish_async("b.voting", b"held")
        # A new channel of that stream: its first write waits for the stream too.
        new = next(
            f"new.{n}"
            for n in range(1000)
            if channel_stream_index(f"new.{n}", DEFAULT_CHANNEL_STREAMS) == ELECTING
        )
        created = await client.publish_async(new, b"first")
        replay = asyncio.create_task(client.subscribe("b.voting", start=pb.First))
        await client.publish("a.first", b"served", timeout=10)  # raises on an error
        await asyncio.sleep(0.3)
        assert not held.done() and not replay.done() and not created.done()
        answers.set()
        for waiting in (held, created):
            ack = await asyncio.wait_for(waiting, 30)
            assert not ack.error, ack.error
        sub = await asyncio.wait_for(replay, 30)
        got = await sub.collect(CONTENT["b.voting"] + 1, timeout=10)
        assert [m.sequence for m in got] == list(range(1, CONTENT["b.voting"] + 2))
        assert got[-1].data == b"held"
        late = await client.subscribe("a.first", start=pb.First)
        first = await late.collect(CONTENT["a.first"] + 1, timeout=10)
        assert first[-1].data == b"served" and first[-1].sequence == CONTENT["a.first"] + 1
    finally:
        await client.close()
        await server.stop()
