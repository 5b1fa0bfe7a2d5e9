"""HeldRequests: a standby's publishes kept while the serving node is silent, handed in
order to the server's handlers on promotion, or dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from stanpkg.server.held_requests import HeldRequests
from stanpkg.transport.connection import NatsConnection


class Pair:
    """A server's connection and a client's, on one nats-server."""

    def __init__(self, server: NatsConnection, client: NatsConnection) -> None:
        self.server = server
        self.client = client

    async def settle(self) -> None:
        """Until the server has every SUB and message sent so far."""
        for conn in (self.server, self.client, self.server):
            await conn.flush(5)
        await asyncio.sleep(0.05)

    async def send(self, *messages: tuple[str, bytes], reply: str = "") -> None:
        for subject, data in messages:
            self.client.publish(subject, data, reply=reply)
        await self.settle()


@asynccontextmanager
async def pair(url: str) -> AsyncIterator[Pair]:
    server = await NatsConnection.connect(url)
    client = await NatsConnection.connect(url)
    try:
        yield Pair(server, client)
    finally:
        await client.close()
        await server.close()


async def test_kept_requests_go_first_and_in_order_to_the_handlers(nats_url: str) -> None:
    async with pair(nats_url) as p:
        held = HeldRequests(p.server)
        held.hold(["discover.c", "pub.>"])
        await p.settle()
        await p.send(("discover.c", b"c1"), ("pub.a", b"p1"), ("pub.b", b"p2"), reply="r")
        assert len(held) == 3
        got: list[tuple[str, str, bytes]] = []
        connects = held.subscribe("discover.c", lambda s, r, d: got.append((s, r, d)))
        held.subscribe("pub.>", lambda s, r, d: got.append((s, r, d)))
        pings = held.subscribe("ping.c", lambda s, r, d: got.append((s, r, d)))  # not held
        assert connects != pings
        assert held.release() == 3
        assert got == [("discover.c", "r", b"c1"), ("pub.a", "r", b"p1"), ("pub.b", "r", b"p2")]
        await p.settle()  # the new subscription's SUB
        # The same subscriptions go on, to the handlers; nothing is kept any more.
        await p.send(("pub.c", b"p3"), ("ping.c", b"x"))
        assert got[3:] == [("pub.c", "", b"p3"), ("ping.c", "", b"x")]
        assert not held.holding and len(held) == 0


async def test_dropped_requests_are_forgotten_and_no_longer_received(nats_url: str) -> None:
    async with pair(nats_url) as p:
        held = HeldRequests(p.server)
        held.hold(["pub.>"])
        await p.settle()
        await p.send(("pub.a", b"p1"))
        assert len(held) == 1
        held.drop()
        await p.send(("pub.a", b"p2"))
        assert len(held) == 0 and not held.holding
        # After a drop, the server subscribes anew: only what comes now reaches it.
        got: list[bytes] = []
        held.subscribe("pub.>", lambda _s, _r, d: got.append(d))
        assert held.release() == 0
        await p.settle()
        await p.send(("pub.a", b"p3"))
        assert got == [b"p3"]


async def test_requests_over_the_limit_are_counted_not_kept(nats_url: str) -> None:
    async with pair(nats_url) as p:
        held = HeldRequests(p.server, max_bytes=100)
        held.hold(["pub.>"])
        await p.settle()
        await p.send(*[("pub.a", b"x" * 40)] * 3)
        assert (len(held), held.overflowed) == (2, 1)
