"""Answering each client through the NATS server it is connected to (clustered mode).

Clients connect to any node's nats-server; one node serves them all. What that node sends
a client on another node (PubAcks, messages) would leave through its own nats-server and
cross a route: two servers handle every such message. The serving node therefore keeps a
connection (a link) to every other nats-server of the cluster and sends what is for a
client through the link to that client's own server, which hands it over directly.

Where a client is: the node whose nats-server holds the client's heartbeat-inbox
subscription says so (``Locate``, clustered.py). Until it has answered, or when no node
claims the client or its link is lost, the client is answered through the serving node's
own server as before: a link only saves work, since nats-server routes whatever reaches
it to wherever the client is now. Links never reconnect (a reconnect could reach another
server of the cluster); a lost one is opened again when a client is next placed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from stanpkg.server.clients import Client, ClientRegistry
    from stanpkg.server.log import Logger
    from stanpkg.server.subscriptions import Subscription
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["PLACEMENTS_IN_FLIGHT", "ClientLinks", "Locate"]

# The name of the nats-server holding a heartbeat inbox's subscription; None if no node
# claims it.
Locate = Callable[[str], Awaitable[str | None]]
# Subscribes a subscription's ack inbox on the acks connection again (its link was lost).
Rehome = Callable[["Subscription"], None]

PLACEMENTS_IN_FLIGHT = 4  # locate requests at a time (a promotion places every client)
LINK_CONNECT_TIMEOUT = 2.0
# A server no link could reach is not tried again for this long (after a host loss its
# address stays among those NATS advertised, and each attempt may wait out the timeout).
UNREACHABLE_FOR = 10.0


class ClientLinks:
    def __init__(
        self,
        conn: NatsConnection,
        endpoint: NatsEndpoint,
        locate: Locate,
        clients: ClientRegistry,
        log: Logger,
        *,
        link_name: str,
        ack_links: list[NatsConnection],
        rehome: Rehome,
    ) -> None:
        self._conn = conn  # the serving node's general connection, to its own server
        self._endpoint = endpoint
        self._locate = locate
        self._clients = clients
        self._log = log
        self._link_name = link_name
        self._ack_links = ack_links  # the handlers' (ack_barrier flushes each)
        self._rehome = rehome
        self._own = str(conn.server_info.get("server_name", ""))
        self._links: dict[str, NatsConnection] = {}  # nats-server name -> link
        self._linked_urls: dict[str, str] = {}  # URL -> nats-server name (own included)
        self._unreachable: dict[str, float] = {}  # URL -> loop time it may be tried again
        self._waiting: deque[Client] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._discovering: asyncio.Lock = asyncio.Lock()
        self._closed = False

    @property
    def links(self) -> dict[str, NatsConnection]:
        """The open links, by the name of the nats-server each reaches."""
        return dict(self._links)

    def place(self, client: Client) -> None:
        """Find ``client``'s server in the background and answer it through its link."""
        if self._closed:
            return
        if client.placing is None or client.placing.done():
            client.placing = asyncio.get_running_loop().create_future()
        self._waiting.append(client)
        if len(self._workers) < PLACEMENTS_IN_FLIGHT:
            task = asyncio.get_running_loop().create_task(self._place_waiting())
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def _place_waiting(self) -> None:
        while self._waiting and not self._closed:
            client = self._waiting.popleft()
            try:
                await self._place(client)
            except Exception as exc:  # a placement only saves work: the client is served
                self._log.debug(f"[Client:{client.id}] Not placed on its NATS server: {exc!r}")
            finally:
                _settle(client)

    async def _place(self, client: Client) -> None:
        name = await self._locate(client.hb_inbox)
        if name is None or name == self._own:
            return
        link = self._links.get(name) or await self._link_to(name)
        if link is not None and self._clients.get(client.id) is client and not self._closed:
            client.out = link
            if self._log.trace_enabled:
                self._log.trace(f"[Client:{client.id}] Answered through NATS server {name}")

    async def _link_to(self, name: str) -> NatsConnection | None:
        """The link to the nats-server called ``name``, opening links to the cluster's
        servers not linked yet (their names are known once connected)."""
        async with self._discovering:
            loop = asyncio.get_running_loop()
            for url in self._conn.known_servers:
                if name in self._links or self._closed:
                    break
                if url in self._linked_urls or self._unreachable.get(url, 0.0) > loop.time():
                    continue
                link = await self._open(url)
                if link is None:
                    self._unreachable[url] = loop.time() + UNREACHABLE_FOR
                    continue
                reached = str(link.server_info.get("server_name", ""))
                self._linked_urls[url] = reached
                if not reached or reached == self._own or reached in self._links:
                    await link.close()
                    continue
                self._links[reached] = link
                self._ack_links.append(link)
                self._log.debug(f"Linked to NATS server {reached} at {url}")
        return self._links.get(name)

    async def _open(self, url: str) -> NatsConnection | None:
        holder: list[NatsConnection] = []

        def closed(_error: Exception | None) -> None:
            if holder:
                self._lost(url, holder[0])

        try:
            link = await NatsConnection.open(
                dataclasses.replace(self._endpoint, url=url),
                name=self._link_name,
                max_reconnect=0,  # see the module's docstring
                connect_timeout=LINK_CONNECT_TIMEOUT,
                on_closed=closed,
            )
        except (NatsError, OSError, TimeoutError) as exc:
            self._log.debug(f"No link to NATS server at {url}: {exc}")
            return None
        holder.append(link)
        # A link whose writes back up holds the publishes the serving node reads.
        link.pause_reading_with(self._conn)
        return link

    def _lost(self, url: str, link: NatsConnection) -> None:
        """A link closed: its clients are answered through the serving node's server."""
        name = self._linked_urls.get(url, "")
        if self._links.get(name) is not link:
            return  # one closed on purpose: it reached our own server, or a linked one
        del self._links[name]
        del self._linked_urls[url]  # tried again at the next placement
        with contextlib.suppress(ValueError):
            self._ack_links.remove(link)
        if self._closed:
            return
        self._log.debug(f"Lost the link to NATS server {name}")
        # Their messages and acks take the serving node's own server again; what was in
        # flight on the link is redelivered once its ack wait is over.
        for client in self._clients.by_id.values():
            if client.out is link:
                client.out = None
            for sub in client.subs:
                if sub.out is link:
                    sub.out = None
                    self._rehome(sub)

    async def close(self) -> None:
        self._closed = True
        for client in self._waiting:
            _settle(client)
        self._waiting.clear()
        for task in list(self._workers):
            task.cancel()
        links, self._links = list(self._links.values()), {}
        self._ack_links.clear()
        for client in self._clients.by_id.values():
            client.out = None
        for link in links:
            with contextlib.suppress(NatsError):
                await link.close()


def _settle(client: Client) -> None:
    """The client's placement is over (placed or not): a waiting subscribe goes on."""
    placing = client.placing
    if placing is not None and not placing.done():
        placing.set_result(None)
