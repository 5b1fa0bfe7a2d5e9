"""A clustered server answers a connect, a subscription and a close only once their
records are on a quorum, as the reference answers them once replicated: the node that
takes over learns clients and subscriptions from the records alone. An in-process server
with the clustered store on a real JetStream server; the records' writes are held, or
fail, by replacing the link's write."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from nats.errors import ConnectionClosedError

from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.server import StreamingServer
from stanpkg.stores.jetstream.keys import kv_key
from stanpkg.stores.jetstream.link import JetStreamLink
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, make_plan, new_cluster_id
from tests.server.stan_client import StanClient, StanError
from tests.stores.jetstream.test_standby_view import _store

HELD = 0.5  # how long the records' writes are held before the test looks


class RecordWrites:
    """The link's writes (the records', and the channels' streams'): held until
    :meth:`release`, or failing as on a closed connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.released = asyncio.Event()
        self.released.set()
        self.failing = False
        real = JetStreamLink.publish_all
        writes = self

        async def publish_all(
            self: JetStreamLink, batch: Sequence[Any], *, timeout: float
        ) -> list[Any]:
            if writes.failing:
                return [ConnectionClosedError() for _ in batch]
            await writes.released.wait()
            return await real(self, batch, timeout=timeout)

        monkeypatch.setattr(JetStreamLink, "publish_all", publish_all)

    def hold(self) -> None:
        self.released.clear()

    def release(self) -> None:
        self.released.set()


@asynccontextmanager
async def serving(url: str, tmp_path: Path) -> AsyncIterator[tuple[StreamingServer, str]]:
    cluster_id = new_cluster_id()
    args = ("-st", "file", "-dir", str(tmp_path), "-clustered", "-cluster_node_id", "a")
    plan = make_plan(*args, cluster_id=cluster_id)
    log = LogCapture()
    store = _store(cluster_id, "a", log)
    server = StreamingServer(
        plan, store, Logger(stream=log, debug=False, trace=False), mode=mode_for(plan)
    )
    await server.start(NatsEndpoint(url))
    try:
        await asyncio.sleep(0.3)  # the server's record is out
        yield server, cluster_id
    finally:
        await server.stop()


async def _pending(task: asyncio.Task[Any]) -> bool:
    await asyncio.sleep(HELD)
    return not task.done()


async def test_connect_subscribe_and_close_are_answered_once_replicated(
    jetstream_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = RecordWrites(monkeypatch)
    async with serving(jetstream_url, tmp_path) as (server, cluster_id):
        writes.hold()
        connecting = asyncio.create_task(StanClient.connect(jetstream_url, cluster_id, "c1"))
        assert await _pending(connecting)
        assert server.clients.get("c1") is None  # not registered before it is answered
        writes.release()
        client = await asyncio.wait_for(connecting, 5)
        assert server.clients.get("c1") is not None

        writes.hold()
        subscribing = asyncio.create_task(client.subscribe("orders", durable="d"))
        assert await _pending(subscribing)
        writes.release()
        await asyncio.wait_for(subscribing, 5)

        writes.hold()
        closing = asyncio.create_task(client.close())
        assert await _pending(closing)
        writes.release()
        await asyncio.wait_for(closing, 5)

        store = server.store
        assert isinstance(store, ClusteredStore) and store._state is not None
        records = await store._state.load()
        assert kv_key("client", "c1") not in records
        assert kv_key("channel", "orders") in records
        assert any(key.startswith("sub.orders.") for key in records)  # the durable stays


async def test_a_connect_whose_record_cannot_be_written_fails(
    jetstream_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = RecordWrites(monkeypatch)
    async with serving(jetstream_url, tmp_path) as (server, cluster_id):
        writes.failing = True
        with pytest.raises(StanError, match="unable to replicate"):
            await StanClient.connect(jetstream_url, cluster_id, "lost")
        assert server.clients.get("lost") is None
        writes.failing = False
        client = await StanClient.connect(jetstream_url, cluster_id, "kept")
        await client.publish("orders", b"x")  # the store serves on
        await client.close()
        store = server.store
        assert isinstance(store, ClusteredStore) and store._state is not None
        await store.records_durable()
        records = await store._state.load()
        assert kv_key("client", "lost") not in records  # its failed write was not retried
        assert kv_key("channel", "orders") in records
