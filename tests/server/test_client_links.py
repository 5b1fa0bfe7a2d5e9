"""The serving node's links to its clients' NATS servers (server/client_links.py), with
two routed nats-servers: a client placed on the other server is answered through a link
to it; no answer, a wrong one or a failing locate leave it on the serving node's server;
a lost link sends its subscriptions' acks home."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from stanpkg.server.client_links import ClientLinks
from stanpkg.server.clients import Client, ClientRegistry
from stanpkg.server.log import Logger
from stanpkg.stores.base import ClientRecord
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import pytest_pyfunc_call, start_nats_process  # noqa: F401
from tests.transport.conftest import free_port


def start_pair(tmp: Path) -> list[tuple[object, str]]:
    """Two nats-servers, "one" and "two", routed to each other."""
    routes = [free_port(), free_port()]
    started = []
    for index, name in enumerate(("one", "two")):
        other = routes[1 - index]
        conf = (
            f'server_name: "{name}"\n'
            f'cluster {{ name: "links", listen: "127.0.0.1:{routes[index]}", '
            f'routes: ["nats://127.0.0.1:{other}"] }}'
        )
        started.append(start_nats_process(tmp / name, conf))
    return started


async def placed(
    url: str, answer: object, clients: ClientRegistry
) -> tuple[ClientLinks, Client, NatsConnection]:
    conn = await NatsConnection.connect(url)

    async def locate(_inbox: str) -> str | None:
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    links = ClientLinks(
        conn,
        NatsEndpoint(url),
        locate,
        clients,
        Logger(stream=io.StringIO(), debug=True),
        link_name="test-link",
        ack_links=[],
        rehome=lambda sub: None,
    )
    client = clients.register(ClientRecord("c1", "_INBOX.hb"))
    links.place(client)
    assert client.placing is not None
    await asyncio.wait_for(client.placing, 10)
    return links, client, conn


async def test_a_client_on_the_other_server_is_answered_through_a_link(tmp_path: Path) -> None:
    servers = start_pair(tmp_path)
    try:
        url = servers[0][1]
        for answer in ("nowhere", "one", None, RuntimeError("locate failed")):
            links, client, conn = await placed(url, answer, ClientRegistry())
            assert client.out is None, answer  # the serving node's own server
            # Looking for "nowhere" opened the links it could (to "two"): none is used.
            assert set(links.links) <= {"two"}
            await links.close()
            await conn.close()
        clients = ClientRegistry()
        links, client, conn = await placed(url, "two", clients)
        assert client.out is not None and client.out.server_info["server_name"] == "two"
        assert list(links.links) == ["two"]
        # What goes out on the link reaches a subscriber of the other server.
        other = await NatsConnection.connect(servers[1][1])
        got: list[bytes] = []
        other.subscribe("for.client", lambda _s, _r, data: got.append(data))
        await other.flush()
        await asyncio.sleep(0.2)  # the subscription's interest crosses the route
        client.out.publish("for.client", b"hello")
        await client.out.flush()
        await other.flush()
        assert got == [b"hello"]
        # The other server goes: the link is lost and the client is answered at home.
        proc = servers[1][0]
        proc.kill()  # type: ignore[attr-defined]
        proc.wait(10)  # type: ignore[attr-defined]
        for _ in range(100):
            if client.out is None:
                break
            await asyncio.sleep(0.05)
        assert client.out is None
        assert not links.links
        await links.close()
        await conn.close()
    finally:
        for proc, _ in servers:
            proc.kill()  # type: ignore[attr-defined]
            proc.wait(10)  # type: ignore[attr-defined]
