"""Stream leaders follow the serving node: JetStream's leader step-down with a preferred
server, on a real 3-server JetStream cluster (server names js1..js3)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time

import nats
import pytest
from nats.js.errors import NoStreamResponseError
from nats.js.kv import KeyValue

from stanpkg.server.log import Logger
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream import leader_moves
from stanpkg.stores.jetstream.layout import LEASE_KEY, kv_stream, lease_bucket, shared_stream_name
from stanpkg.stores.jetstream.leader_moves import LeaderGathering, SharedStreamMoves
from stanpkg.stores.jetstream.settings import ClusterSettings
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.jetstream.stream_management import (
    ensure_stream,
    lead_stream_from,
    shared_stream_config,
    stream_replicas,
)
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.errors import NatsError
from tests.server.conftest import make_plan, new_cluster_id
from tests.stores.file.helpers import LogCapture
from tests.stores.jetstream.conftest import NatsProc
from tests.stores.jetstream.test_streams import connected

pytestmark = pytest.mark.slow


async def make_streams(conn: NatsConnection, clusters: list[str], replicas: int) -> list[str]:
    """A shared stream (index 0) for each of ``clusters``."""
    for cluster in clusters:
        await ensure_stream(conn, shared_stream_config(cluster, 0, replicas=replicas))
    return [shared_stream_name(cluster, 0) for cluster in clusters]


async def leader_of(conn: NatsConnection, stream: str, within: float = 20) -> str:
    """The stream's leader once it has one."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:  # no answer while a step-down hands over
            info = await conn.request(f"$JS.API.STREAM.INFO.{stream}", b"", 2)
            if b'"leader"' in info:
                return (await stream_replicas(conn, stream))[0]
        except (StoreError, NatsError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} has no leader after {within} s")


async def until_led_by(conn: NatsConnection, streams: list[str], server: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        leaders = [await leader_of(conn, stream) for stream in streams]
        if leaders == [server] * len(streams):
            return
        assert time.monotonic() < deadline, f"still led elsewhere: {leaders}"
        await asyncio.sleep(0.1)


async def current_everywhere(conn: NatsConnection, stream: str, within: float = 20) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with contextlib.suppress(NatsError):
            info = await conn.request(f"$JS.API.STREAM.INFO.{stream}", b"", 2)
            if info.count(b'"current":true') == 2:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the replicas of {stream} are not current after {within} s")


async def test_each_stream_moves_its_leadership_to_the_asking_server(
    jetstream_cluster: list[NatsProc],
) -> None:
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[0]) as conn:
        (stream,) = await make_streams(conn, ["orders"], replicas=3)
        await current_everywhere(conn, stream)
        for target in ("js1", "js2", "js3"):
            async with connected(urls[int(target[-1]) - 1]) as there:
                assert there.server_info["server_name"] == target
                before = await leader_of(conn, stream)
                outcome = await lead_stream_from(there, stream, target)
                assert outcome == ("here" if before == target else "asked")
                await until_led_by(conn, [stream], target)
                await current_everywhere(conn, stream)
                assert await lead_stream_from(there, stream, target) == "here"


async def test_a_server_without_a_replica_is_not_asked_and_a_missing_stream_fails(
    jetstream_cluster: list[NatsProc],
) -> None:
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[0]) as conn:
        (single,) = await make_streams(conn, ["solo"], replicas=1)
        holder = await leader_of(conn, single)
        elsewhere = next(name for name in ("js1", "js2", "js3") if name != holder)
        assert await lead_stream_from(conn, single, elsewhere) == "not now"
        assert await leader_of(conn, single) == holder  # untouched
        with pytest.raises(StoreError, match="read stream STAN_nope_ch0"):
            await lead_stream_from(conn, shared_stream_name("nope", 0), "js1")


async def test_a_sweep_gathers_every_stream_and_reports_one_that_fails(
    jetstream_cluster: list[NatsProc],
) -> None:
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[1]) as conn:  # js2
        streams = await make_streams(conn, [f"c{i}" for i in range(6)], replicas=3)
        for stream in streams:
            await current_everywhere(conn, stream)
        log = LogCapture()
        gathering = LeaderGathering(conn, lambda: streams, log)
        await gathering.sweep()  # asks every stream led elsewhere, once
        await until_led_by(conn, streams, "js2")
        assert gathering.moved <= len(streams)
        assert await gathering.sweep() == 0  # nothing left to move
        missing = LeaderGathering(conn, lambda: [*streams, shared_stream_name("gone", 0)], log)
        with pytest.raises(StoreError, match="1 of 7 streams"):
            await missing.sweep()


async def test_lead_here_waits_until_the_stream_is_led_here(
    jetstream_cluster: list[NatsProc],
) -> None:
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[0]) as conn:
        streams = await make_streams(conn, ["first-write"], replicas=3)
        await current_everywhere(conn, streams[0])
        for index in (0, 1, 2, 0):
            async with connected(urls[index]) as there:
                log = LogCapture()
                gathering = LeaderGathering(there, lambda: (), log)
                assert await gathering.lead_here(streams[0]) is True
                assert await leader_of(conn, streams[0]) == f"js{index + 1}"
                assert log.texts("WRN") == []
        log = LogCapture()
        gathering = LeaderGathering(conn, lambda: (), log)
        assert await gathering.lead_here(shared_stream_name("gone", 0)) is False  # says why
        [warning] = log.texts("WRN")
        assert "stays on another server" in warning


async def test_a_first_write_moves_its_stream_again_when_the_move_at_promotion_failed(
    jetstream_cluster: list[NatsProc],
) -> None:
    """The serving node moves its shared streams at promotion; a stream whose move did not
    land then (here: not there yet) is swept with the records until a write waits on it,
    and moved at the first write to any of its channels, once: every channel's first
    write waits for that same move."""
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[2]) as conn:  # js3
        moves = SharedStreamMoves(LeaderGathering(conn, lambda: (), LogCapture()))
        cluster = new_cluster_id()
        stream = shared_stream_name(cluster, 0)
        assert await moves.start(stream) is False  # at promotion: no such stream
        await make_streams(conn, [cluster], replicas=3)
        await current_everywhere(conn, stream)
        if await leader_of(conn, stream) != "js1":  # led elsewhere than here
            await lead_stream_from(conn, stream, "js1")
            await until_led_by(conn, [stream], "js1")
        await current_everywhere(conn, stream)
        assert moves.missed([stream, "other"]) == [stream]  # swept until a write waits
        first, second = moves.settle(stream), moves.settle(stream)
        assert moves.missed([stream]) == []
        await asyncio.gather(first, second)
        assert await leader_of(conn, stream) == "js3"
        moves.cancel()


async def test_a_gathering_not_entitled_asks_nothing(jetstream_cluster: list[NatsProc]) -> None:
    """A node whose lease is gone asks no stream to move (the lease's stream would leave
    the successor): neither a sweep nor a first write's move."""
    urls = [url for _, url in jetstream_cluster]
    async with connected(urls[1]) as conn:  # js2
        streams = await make_streams(conn, ["unentitled"], replicas=3)
        await current_everywhere(conn, streams[0])
        if await leader_of(conn, streams[0]) == "js2":
            await lead_stream_from(conn, streams[0], "js1")
            await until_led_by(conn, streams, "js1")
        entitled = False
        log = LogCapture()
        gathering = LeaderGathering(conn, lambda: streams, log, entitled=lambda: entitled)
        assert await gathering.sweep() == 0
        assert await gathering.lead_here(streams[0]) is False
        assert await leader_of(conn, streams[0]) != "js2" and gathering.moved == 0
        assert log.texts("WRN") == []  # nothing to warn of: the write is refused anyway
        entitled = True
        await current_everywhere(conn, streams[0])
        assert await gathering.sweep() == 1
        await until_led_by(conn, streams, "js2")


async def take_lease_over(kv: KeyValue, within: float = 10) -> None:
    """Write the lease as node b, retrying while its stream's leadership is in flight (the
    serving node has just gathered it; for a moment the stream has no leader to answer)."""
    deadline = time.monotonic() + within
    while True:
        try:
            entry = await kv.get(LEASE_KEY)
            await kv.update(LEASE_KEY, b"b", last=entry.revision)
            return
        except (NoStreamResponseError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_node_that_lost_its_lease_moves_no_leader_to_itself(
    jetstream_cluster: list[NatsProc], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The moves stop when the lease is lost, not when the server's stop closes the store
    (a loaded node took 90 s): else each sweep took the lease's stream from the successor,
    whose renewals then waited out an election, and under load the lease went round."""
    monkeypatch.setattr(leader_moves, "GATHER_INTERVAL", 0.2)
    urls = [url for _, url in jetstream_cluster]
    cluster_id = new_cluster_id()
    plan = make_plan("-st", "file", "-dir", "unused", "-clustered", "-cluster_node_id", "a",
                     cluster_id=cluster_id)  # fmt: skip
    settings = ClusterSettings(cluster_id, "a", ("b", "c"), replicas=3, lease_ttl=2.0)
    store = ClusteredStore(plan, Logger(stream=io.StringIO(), debug=False, trace=False), settings)
    lost: list[str] = []
    lease_stream = kv_stream(lease_bucket(cluster_id))
    try:
        await store.connect(NatsEndpoint(urls[0]))  # js1
        assert await store.acquire_exclusive_lock(lost.append)
        async with connected(urls[1]) as conn:
            await until_led_by(conn, [lease_stream], "js1")  # gathered to the serving node
            nc = await nats.connect(urls[1])
            try:  # another node takes the lease over, as a successor does
                kv = await nc.jetstream().key_value(lease_bucket(cluster_id))
                await take_lease_over(kv)
            finally:
                await nc.close()
            deadline = time.monotonic() + 10
            while not lost:
                assert time.monotonic() < deadline, "the lease's loss went unnoticed"
                await asyncio.sleep(0.05)
            # The successor gathers the lease's stream; the old node, not closed yet,
            # leaves it there through several sweeps.
            await current_everywhere(conn, lease_stream)
            await lead_stream_from(conn, lease_stream, "js2")
            await until_led_by(conn, [lease_stream], "js2")
            await asyncio.sleep(1.5)
            assert await leader_of(conn, lease_stream) == "js2"
    finally:
        store.close()
        await asyncio.sleep(0.2)
