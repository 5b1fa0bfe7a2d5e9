"""A nats-server's monitor tells its own clients' subscriptions from those of others
(transport/local_interest.py), against a real nats-server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.local_interest import has_local_subscriber
from tests.server.conftest import pytest_pyfunc_call, start_nats_process  # noqa: F401
from tests.transport.conftest import free_port


async def test_only_a_subscription_to_the_subject_itself_counts(tmp_path: Path) -> None:
    monitor = free_port()
    proc, url = start_nats_process(tmp_path, f"http: 127.0.0.1:{monitor}")
    try:
        conn = await NatsConnection.connect(url)
        conn.subscribe("_INBOX.mine", lambda *_: None)
        conn.subscribe("_INBOX.*", lambda *_: None)  # matches every inbox: not a claim
        await conn.flush()
        assert await has_local_subscriber(monitor, "_INBOX.mine")
        assert not await has_local_subscriber(monitor, "_INBOX.other")
        assert not await has_local_subscriber(monitor, "plain.subject")
        await conn.close()
    finally:
        proc.kill()
        proc.wait(10)


async def test_no_monitor_is_an_error_not_an_answer(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await has_local_subscriber(free_port(), "_INBOX.mine")

    # Something that is not nats-server's monitor answers on the port.
    async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.0 404 Not Found\r\n\r\nno")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(not_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ValueError, match="404"):
            await has_local_subscriber(port, "_INBOX.mine")
