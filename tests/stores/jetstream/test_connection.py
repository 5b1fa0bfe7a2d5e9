"""The clustered store's connection and JetStream API against real nats-servers: with
JetStream, without it, none at all, and a clustered JetStream that never elects its meta
leader; pipelined writes; first_answer."""

from __future__ import annotations

import asyncio
import gc
import re
from pathlib import Path

import pytest

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    ConnectionClosed,
    JetStreamError,
    Outgoing,
    Pipeline,
    connect,
    elections_of,
    first_answer,
    js_api,
    wait_ready,
)
from stanpkg.stores.jetstream.kv_bucket import KvBucket
from stanpkg.transport.endpoint import NatsEndpoint
from tests.stores.jetstream.conftest import NatsProc, start_jetstream_server, stop_nats
from tests.transport.conftest import free_port


async def test_open_and_wait_ready(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="api-test")
    try:
        await wait_ready(conn, 5)
        assert conn.is_connected
        assert "error" not in await js_api(conn, "INFO", None)
    finally:
        await conn.close()
    assert conn.is_closed


async def test_the_connection_reconnects_forever_with_short_waits(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="api-test")
    try:
        policy = conn._policy
        assert policy.max_reconnect < 0 and policy.reconnect_wait <= 0.5
    finally:
        await conn.close()


async def test_server_without_jetstream_is_refused(nats_url: str) -> None:
    with pytest.raises(StoreError) as caught:
        await connect(NatsEndpoint(nats_url), name="api-test")
    assert str(caught.value) == (
        f"the NATS server at {nats_url} does not have JetStream enabled (clustered mode needs it)"
    )


async def test_unreachable_server_names_the_url() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    expected = re.escape(f"unable to connect to the NATS server at {url}")
    with pytest.raises(StoreError, match=expected):
        await connect(NatsEndpoint(url), name="api-test", timeout=1.0)


async def test_second_url_is_used_when_the_first_is_down(jetstream_url: str) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    conn = await connect(NatsEndpoint(f"{dead},{jetstream_url}"), name="api-test")
    try:
        await wait_ready(conn, 5)
    finally:
        await conn.close()


async def test_wait_ready_times_out_without_a_quorum(tmp_path: Path) -> None:
    # One server of a 3-server JetStream cluster whose peers never come up: no meta leader.
    peers = ", ".join(f'"nats://127.0.0.1:{free_port()}"' for _ in range(2))
    alone = start_jetstream_server(
        tmp_path,
        "lonely",
        f'cluster {{ name: "jstest", listen: "127.0.0.1:{free_port()}", routes: [{peers}] }}\n',
    )
    try:
        conn = await connect(NatsEndpoint(alone[1]), name="api-test")
        try:
            with pytest.raises(StoreError, match=re.escape("is not available after 1.5 s")):
                await wait_ready(conn, 1.5)
        finally:
            await conn.close()
    finally:
        stop_nats([alone])


async def test_closed_connection_is_reported(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="api-test")
    await conn.close()
    with pytest.raises(StoreError, match="is closed"):
        await wait_ready(conn, 1)


async def test_bucket_created_once_by_many_at_once(jetstream_url: str) -> None:
    conns = [await connect(NatsEndpoint(jetstream_url), name=f"n{i}") for i in range(4)]
    try:
        buckets = await asyncio.gather(
            *(KvBucket.ensure(conn, "shared", replicas=1) for conn in conns)
        )
        revision = await buckets[0].create("k", b"v")
        assert await buckets[3].get("k") == (revision, b"v")
    finally:
        for conn in conns:
            await conn.close()


async def test_publish_all_answers_each_write(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="api-test")
    try:
        created = await js_api(
            conn, "STREAM.CREATE.pipelined", {"name": "pipelined", "subjects": ["pipelined.>"]}
        )
        assert "error" not in created
        pipeline = Pipeline(conn)
        writes: list[Outgoing] = [("pipelined.a", f"m{i}".encode(), None) for i in range(500)]
        writes.append(("pipelined.b", b"stale", {"Nats-Expected-Last-Sequence": "1"}))
        writes.append(("nostream.here", b"lost", None))
        results = await pipeline.publish_all(writes, timeout=5)
        assert results[:500] == list(range(1, 501))
        stale, lost = results[500:]
        assert isinstance(stale, JetStreamError) and stale.err_code == 10071
        assert isinstance(lost, JetStreamError) and "no stream for the subject" in str(lost)
        assert lost.status == 503
        assert await pipeline.publish_all([], timeout=1) == []
        await conn.close()
        closed = await pipeline.publish_all(writes[:3], timeout=1)
        assert len(closed) == 3 and all(isinstance(r, ConnectionClosed) for r in closed)
        assert f"the connection to JetStream at {jetstream_url} is closed" in str(closed[0])
    finally:
        await conn.close()


async def test_an_unanswered_write_times_out(jetstream_url: str) -> None:
    """A subscriber that never answers stands in for a stream leader that was just
    elected (it answers nothing sent before)."""
    conn = await connect(NatsEndpoint(jetstream_url), name="api-test")
    try:
        conn.subscribe("silent.>", lambda subject, reply, payload: None)
        await conn.flush()
        results = await Pipeline(conn).publish_all([("silent.a", b"x", None)], timeout=0.3)
        assert len(results) == 1 and isinstance(results[0], JetStreamError)
        assert "no answer from JetStream within 0.3 s" in str(results[0])
        with pytest.raises(JetStreamError, match=re.escape("no answer from silent.b within 0.3 s")):
            await Pipeline(conn).request("silent.b", b"x", timeout=0.3)
    finally:
        await conn.close()


async def test_first_answer_asks_again_until_one_is_answered() -> None:
    """As a stream electing a leader: the requests sent before the election stay unanswered,
    the first one after it is answered at once."""
    loop = asyncio.get_running_loop()
    elected = loop.time() + 0.3
    asked: list[asyncio.Future[str]] = []

    async def ask() -> str:
        if loop.time() < elected:
            never: asyncio.Future[str] = loop.create_future()
            asked.append(never)
            return await never
        return "info"

    start = loop.time()
    assert await first_answer(ask, timeout=5, every=0.05) == "info"
    assert loop.time() - start < 0.6  # not the unanswered request's 5 s
    await asyncio.sleep(0)
    assert asked and all(f.cancelled() for f in asked)  # nothing left waiting


async def test_first_answer_gives_up_with_the_last_error_or_a_timeout() -> None:
    async def hang() -> str:
        await asyncio.sleep(10)
        return "late"

    async def fail() -> str:
        raise ConnectionError("no responders")

    with pytest.raises(TimeoutError):
        await first_answer(hang, timeout=0.2, every=0.05)
    with pytest.raises(ConnectionError, match="no responders"):
        await first_answer(fail, timeout=0.2, every=0.05)


async def test_first_answer_leaves_no_error_unretrieved() -> None:
    """A request answered in the loop turn that cancels it is not cancelled (3.11's
    wait_for returns the answer) and may fail afterwards: its error is looked at, so
    asyncio never logs it from a finalizer (which, during an ast.parse, made CPython 3.11
    raise SystemError and crashed pytest)."""
    loop = asyncio.get_running_loop()
    logged: list[str] = []
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))
    attempts = 0

    async def ask() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                raise RuntimeError("answered late, and failed") from None
        return "answer"

    try:
        assert await first_answer(ask, timeout=5, every=0.05) == "answer"
        await asyncio.sleep(0.05)  # the first request ends with its error
        gc.collect()  # a task's finalizer is where an unretrieved error is logged
        assert logged == []
    finally:
        loop.set_exception_handler(None)


async def test_first_answer_asks_again_when_an_election_is_announced(jetstream_url: str) -> None:
    """A request that waits for a stream's new leader is sent again the moment JetStream
    announces one (its LEADER_ELECTED advisory), not at its next turn (30 s here)."""
    conn = await connect(NatsEndpoint(jetstream_url), name="elections-test")
    announcer = await connect(NatsEndpoint(jetstream_url), name="announcer")
    try:
        loop = asyncio.get_running_loop()
        elected = False
        asked = 0

        async def ask() -> str:
            nonlocal asked
            asked += 1
            if not elected:
                await loop.create_future()  # sent before the election: never answered
            return "info"

        async def elect() -> None:
            nonlocal elected
            await asyncio.sleep(0.3)
            elected = True
            announcer.publish("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.S", b"{}")

        start = loop.time()
        electing = asyncio.ensure_future(elect())
        assert await first_answer(ask, timeout=60, every=30, woken_by=conn) == "info"
        await electing
        assert loop.time() - start < 5 and asked == 2
        # Without the connection to be woken by, only the turns ask again.
        elected, asked = False, 0
        with pytest.raises(TimeoutError):
            await first_answer(ask, timeout=0.6, every=30, woken_by=None)
        assert asked == 1
        # Elections.wait sleeps its time when none comes (one server: no election), and
        # is cut short by one.
        elections = elections_of(conn)
        assert elections is not None
        start = loop.time()
        await elections.wait(0.2)
        assert 0.15 < loop.time() - start < 2
        start = loop.time()
        waiting = asyncio.ensure_future(elections.wait(30))
        await asyncio.sleep(0.1)
        announcer.publish("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.S", b"{}")
        await asyncio.wait_for(waiting, 5)
        assert loop.time() - start < 5
    finally:
        await conn.close()
        await announcer.close()


async def test_elections_are_announced_by_a_real_step_down(
    jetstream_cluster: list[NatsProc],
) -> None:
    urls = [url for _, url in jetstream_cluster]
    conn = await connect(NatsEndpoint(urls[0]), name="elections-test")
    try:
        await wait_ready(conn, 20)
        config = {"name": "ELECTED", "subjects": ["elected.>"], "num_replicas": 3}
        created = await first_answer(
            lambda: js_api(conn, "STREAM.CREATE.ELECTED", config), timeout=20, every=1
        )
        assert "error" not in created, created
        elections = elections_of(conn)
        assert elections is not None
        announced = elections.next()
        for _ in range(100):  # refused while the new stream's replicas are not current
            stepped = await first_answer(
                lambda: js_api(conn, "STREAM.LEADER.STEPDOWN.ELECTED", None), timeout=20, every=1
            )
            if "error" not in stepped:
                break
            await asyncio.sleep(0.2)
        assert "error" not in stepped, stepped
        await asyncio.wait_for(announced, 10)
    finally:
        await conn.close()
    assert elections_of(conn) is elections  # forgotten once another connection comes
    other = await connect(NatsEndpoint(urls[1]), name="elections-test-2")
    try:
        assert elections_of(conn) is None and elections_of(other) is not None
    finally:
        await other.close()
