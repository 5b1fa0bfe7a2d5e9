"""Losing the server: reconnect and resubscribe, give up cleanly, survive garbage."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from stanpkg.transport import (
    ConnectionClosedError,
    NatsConnection,
    NatsTimeoutError,
    NoServersError,
    ProtocolError,
)
from stanpkg.transport.errors import StaleConnectionError
from tests.transport.conftest import StartNats, free_port

INFO = b'INFO {"server_id":"FAKE","version":"2.10.0","max_payload":1048576,"proto":1} \r\n'


class Events:
    def __init__(self) -> None:
        self.disconnected = asyncio.Event()
        self.reconnected = asyncio.Event()
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.counts = {"disconnected": 0, "reconnected": 0}

    def on_disconnected(self) -> None:
        self.counts["disconnected"] += 1
        self.disconnected.set()

    def on_reconnected(self) -> None:
        self.counts["reconnected"] += 1
        self.reconnected.set()

    def on_closed(self, error: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(error)


async def test_reconnect_after_restart_resubscribes(start_nats: StartNats, loop_kind: str) -> None:
    port = free_port()
    server = start_nats(port=port)
    events = Events()
    nc = await NatsConnection.connect(
        server.url,
        reconnect_wait=0.05,
        max_reconnect=200,
        on_disconnected=events.on_disconnected,
        on_reconnected=events.on_reconnected,
        on_closed=events.on_closed,
    )
    got: list[bytes] = []
    nc.subscribe("events", lambda s, r, p: got.append(p))
    queue_got: list[bytes] = []
    nc.subscribe("events", lambda s, r, p: queue_got.append(p), queue="q")
    nc.publish("events", b"before")
    await nc.flush()

    server.kill()
    await asyncio.wait_for(events.disconnected.wait(), 5)
    assert not nc.is_connected
    nc.publish("events", b"while down")  # buffered until the reconnect
    start_nats(port=port)
    await asyncio.wait_for(events.reconnected.wait(), 10)
    nc.publish("events", b"after")
    await nc.flush()
    assert got == [b"before", b"while down", b"after"]
    assert queue_got == got
    assert events.counts == {"disconnected": 1, "reconnected": 1}
    assert not events.closed.done()
    await nc.close()
    assert await events.closed is None


async def test_requests_work_after_reconnect(start_nats: StartNats) -> None:
    port = free_port()
    server = start_nats(port=port)
    events = Events()
    responder = await NatsConnection.connect(server.url, reconnect_wait=0.05)
    responder.subscribe("svc", lambda s, r, p: responder.publish(r, b"ok"))
    nc = await NatsConnection.connect(
        server.url, reconnect_wait=0.05, on_reconnected=events.on_reconnected
    )
    assert await nc.request("svc", b"", 2) == b"ok"
    server.kill()
    start_nats(port=port)
    await asyncio.wait_for(events.reconnected.wait(), 10)
    await asyncio.sleep(0.3)  # the responder reconnects on its own schedule
    await responder.flush()
    assert await nc.request("svc", b"", 2) == b"ok"
    await nc.close()
    await responder.close()


async def test_gives_up_after_max_reconnect(start_nats: StartNats) -> None:
    server = start_nats()
    events = Events()
    nc = await NatsConnection.connect(
        server.url,
        reconnect_wait=0.02,
        max_reconnect=3,
        on_disconnected=events.on_disconnected,
        on_closed=events.on_closed,
    )
    pending = asyncio.ensure_future(nc.request("never", b"", 30))
    server.kill()
    error = await asyncio.wait_for(events.closed, 5)
    assert isinstance(error, NoServersError)
    assert nc.is_closed
    with pytest.raises(ConnectionClosedError):
        await pending
    with pytest.raises(ConnectionClosedError):
        nc.publish("x", b"")


async def test_no_reconnect_when_disabled(start_nats: StartNats) -> None:
    server = start_nats()
    events = Events()
    nc = await NatsConnection.connect(server.url, max_reconnect=0, on_closed=events.on_closed)
    server.kill()
    assert await asyncio.wait_for(events.closed, 5) is not None
    assert nc.is_closed


# -- fake servers ---------------------------------------------------------------------------
Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def fake_server(behaviour: Behaviour) -> AsyncIterator[str]:
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await behaviour(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.close()
        for writer in writers:
            writer.close()


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(INFO)
    await reader.readline()  # CONNECT
    await reader.readline()  # PING
    writer.write(b"PONG\r\n")
    await writer.drain()


async def test_garbage_instead_of_info_fails_connect() -> None:
    async def http_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async with fake_server(http_server) as url:
        with pytest.raises(ProtocolError, match="nats: protocol exception, INFO not received"):
            await NatsConnection.connect(url, connect_timeout=2)


async def test_silent_server_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async with fake_server(silent) as url:
        with pytest.raises(NatsTimeoutError, match="nats: timeout"):
            await NatsConnection.connect(url, connect_timeout=0.2)


async def test_garbage_after_connect_is_reported_and_reconnects() -> None:
    connections = 0

    async def garbage_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await handshake(reader, writer)
        if connections == 1:
            await asyncio.sleep(0.1)
            writer.write(b"\x00\x01\x02 this is not NATS\r\n")
            await writer.drain()
        await asyncio.sleep(5)

    async with fake_server(garbage_once) as url:
        events = Events()
        errors: list[Exception] = []
        nc = await NatsConnection.connect(
            url,
            reconnect_wait=0.02,
            on_reconnected=events.on_reconnected,
            on_error=errors.append,
        )
        await asyncio.wait_for(events.reconnected.wait(), 5)
        assert len(errors) == 1 and isinstance(errors[0], ProtocolError)
        assert "unknown protocol operation" in str(errors[0])
        assert nc.last_error is errors[0]
        await nc.close()


async def test_garbage_forever_ends_in_closed_not_a_hang() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(INFO + b"MSG x 1 -5\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async with fake_server(garbage) as url:
        with pytest.raises(ProtocolError):
            await NatsConnection.connect(url)


async def test_server_error_during_handshake_is_reported() -> None:
    async def refuses(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(INFO)
        await reader.readline()
        writer.write(b"-ERR 'Maximum Connections Exceeded'\r\n")
        await writer.drain()
        writer.close()

    async with fake_server(refuses) as url:
        with pytest.raises(Exception, match="nats: server maximum connections exceeded"):
            await NatsConnection.connect(url)


async def test_stale_connection_is_detected() -> None:
    connections = 0

    async def no_pongs(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await handshake(reader, writer)
        await asyncio.sleep(5)  # never answers the keep-alive PINGs

    async with fake_server(no_pongs) as url:
        events = Events()
        nc = await NatsConnection.connect(
            url,
            ping_interval=0.05,
            max_pings_out=2,
            max_reconnect=0,
            on_closed=events.on_closed,
        )
        error = await asyncio.wait_for(events.closed, 5)
        assert isinstance(error, StaleConnectionError)
        assert str(error) == "nats: stale connection"
        assert nc.is_closed and connections == 1


async def test_write_backpressure_stops_reading() -> None:
    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)
        await asyncio.sleep(10)  # stop reading: our socket buffers and then the transport fill

    async with fake_server(never_reads) as url:
        nc = await NatsConnection.connect(url)
        other = await NatsConnection.connect(url)
        nc.pause_reading_with(other)
        chunk = b"x" * 60000
        for _ in range(50):
            for _ in range(20):
                nc.publish("sink", chunk)
            await asyncio.sleep(0.01)
            assert nc._transport is not None
            if not nc._transport.is_reading():
                break
        assert nc.pending_bytes > 4 * 1024 * 1024
        assert other._transport is not None and not other._transport.is_reading()
        await nc.close(timeout=0.2)
        assert other._transport.is_reading()  # the hold went away with the connection
        await other.close()


async def test_messages_dribbled_in_tiny_tcp_segments() -> None:
    payloads = [b"p%d" % i + b"\r\n" * (i % 3) for i in range(300)]

    async def dribbler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)
        sub_line = await reader.readline()  # SUB dribble 1
        sid = sub_line.split()[-1]
        stream = b"".join(
            b"MSG dribble %s %d\r\n%s\r\n" % (sid, len(p), p) + (b"PING\r\n" if i % 50 else b"")
            for i, p in enumerate(payloads)
        )
        pos, step = 0, 1
        while pos < len(stream):
            writer.write(stream[pos : pos + step])
            await writer.drain()
            await asyncio.sleep(0)
            pos += step
            step = step % 7 + 1
        await asyncio.sleep(5)

    async with fake_server(dribbler) as url:
        nc = await NatsConnection.connect(url)
        got: list[bytes] = []
        nc.subscribe("dribble", lambda s, r, p: got.append(p))
        deadline = asyncio.get_running_loop().time() + 10
        while len(got) < len(payloads) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert got == payloads
        await nc.close(timeout=0.2)
