"""Registered clients: lookup by client ID and by connection ID."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from stanpkg.stores.base import ClientRecord

if TYPE_CHECKING:
    from stanpkg.server.subscriptions import Subscription
    from stanpkg.transport.connection import NatsConnection

__all__ = ["Client", "ClientRegistry", "is_valid_client_id"]

_CLIENT_ID = re.compile(r"[a-zA-Z0-9_-]+")
_FAILED_MEMORY = 256  # recently unknown client IDs not waited for again


def is_valid_client_id(client_id: str) -> bool:
    return _CLIENT_ID.fullmatch(client_id) is not None


class Client:
    __slots__ = (
        "conn_id",
        "failed_hbs",
        "hb_handle",
        "hb_inbox",
        "hb_task",
        "id",
        "out",
        "placing",
        "record",
        "subs",
    )

    def __init__(self, record: ClientRecord) -> None:
        self.record = record
        self.id = record.id
        self.hb_inbox = record.hb_inbox
        self.conn_id = record.conn_id
        self.subs: list[Subscription] = []
        self.failed_hbs = 0
        self.hb_handle: asyncio.TimerHandle | None = None
        self.hb_task: asyncio.Task[None] | None = None
        # The connection its PubAcks and messages go out on when not the server's general
        # one: a link to the client's own NATS server (client_links.py).
        self.out: NatsConnection | None = None
        self.placing: asyncio.Future[None] | None = None  # done once its link is known

    def stop_heartbeats(self) -> None:
        """Cancel the client's heartbeat timer and the probe in flight (heartbeats.py)."""
        if self.hb_handle is not None:
            self.hb_handle.cancel()
            self.hb_handle = None
        if self.hb_task is not None:
            self.hb_task.cancel()
            self.hb_task = None


class ClientRegistry:
    def __init__(self) -> None:
        self.by_id: dict[str, Client] = {}
        self.by_conn_id: dict[bytes, Client] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._failed: OrderedDict[str, None] = OrderedDict()
        # Told of each client registered (client_links.py places it on its NATS server).
        self.on_register: Callable[[Client], None] | None = None

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, client_id: str) -> Client | None:
        return self.by_id.get(client_id)

    def register(self, record: ClientRecord) -> Client:
        client = Client(record)
        self.by_id[client.id] = client
        if client.conn_id:
            self.by_conn_id[client.conn_id] = client
        self._failed.pop(client.id, None)
        for waiter in self._waiters.pop(client.id, ()):
            if not waiter.done():
                waiter.set_result(None)
        if self.on_register is not None:
            self.on_register(client)
        return client

    def unregister(self, client_id: str) -> Client | None:
        client = self.by_id.pop(client_id, None)
        if client is not None and self.by_conn_id.get(client.conn_id) is client:
            del self.by_conn_id[client.conn_id]
        return client

    def is_valid_publisher(self, client_id: str, conn_id: bytes) -> bool:
        """protocol.md §3.2: by connID when the message carries one, else by client ID."""
        if conn_id:
            return conn_id in self.by_conn_id
        return client_id in self.by_id

    async def wait_registered(self, client_id: str, timeout: float) -> bool:
        """Partitioning: a publish/subscribe may overtake the connect request it follows.

        IDs that recently failed to show up are not waited for again (a flood of requests
        from unknown clients must not hold everything else up).
        """
        if client_id in self.by_id:
            return True
        if client_id in self._failed:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(client_id, []).append(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            waiters = self._waiters.get(client_id)
            if waiters is not None and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[client_id]
        if client_id in self.by_id:
            return True
        self._failed[client_id] = None
        if len(self._failed) > _FAILED_MEMORY:
            self._failed.popitem(last=False)
        return False
