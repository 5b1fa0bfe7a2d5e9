"""Server → client heartbeats (protocol.md §5).

Each client has one timer. When it fires, a request with an empty payload goes to the
client's heartbeat inbox; any reply within ``hb_timeout`` is a success. The timer is
re-armed after the request completes. More than ``hb_fail_count`` consecutive failures
close the client, serialized behind earlier requests (v0.25 behaviour).

While the server has lost NATS no probe is sent and none counts as failed: the silence
says nothing about the client, and closing it would drop its subscriptions for an outage
of ours. (The reference counts those failures; with its defaults it takes an outage of
several minutes to close a client there.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from stanpkg.server.clients import Client

if TYPE_CHECKING:
    from stanpkg.server.handler_context import HandlerContext

__all__ = ["Heartbeats"]


class Heartbeats:
    def __init__(
        self,
        context: HandlerContext,
        *,
        close_client: Callable[[str, Client | None], Awaitable[str | None]],
    ) -> None:
        plan = context.plan
        self.log = context.log
        self.clients = context.clients
        self.control = context.control
        self.acks_conn = context.acks_conn  # probes go out on the acks connection
        self.ack_barrier = context.ack_barrier
        self.close_client = close_client  # unsubscribe.Removals.close_client
        self.interval = plan.hb_interval / 1e9
        self.timeout = plan.hb_timeout / 1e9
        self.fail_count = plan.hb_fail_count
        self.nats_up = context.nats_up

    def start(self, client: Client, delay: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        wait = self.interval if delay is None else delay
        client.hb_handle = loop.call_later(wait, self._fire, client)

    def fire_soon(self, client: Client) -> None:
        """A PING from a client with failed heartbeats: check it again right away."""
        if client.hb_handle is not None:
            client.hb_handle.cancel()
            self.start(client, 0.001)

    def _fire(self, client: Client) -> None:
        client.hb_handle = None
        loop = asyncio.get_running_loop()
        client.hb_task = loop.create_task(self._probe(client), name=f"stan-hb-{client.id}")

    async def _probe(self, client: Client) -> None:
        ok = False
        if self.nats_up():
            try:
                await self.acks_conn.request(client.hb_inbox, b"", self.timeout)
                ok = True
            except asyncio.CancelledError:
                raise
            except Exception:
                ok = False
        client.hb_task = None
        if self.clients.get(client.id) is not client:
            return  # closed or replaced meanwhile
        if not ok and not self.nats_up():
            self.start(client)  # NATS is away (or went away during the probe): not counted
            return
        had_failed = client.failed_hbs > 0
        client.failed_hbs = 0 if ok else client.failed_hbs + 1
        if client.failed_hbs > self.fail_count:
            self.log.debug(f"[Client:{client.id}] Timed out on heartbeats")

            async def expire() -> None:
                await self.ack_barrier()
                await self.close_client(client.id, client)

            self.control.submit(expire)
            return
        has_failed = client.failed_hbs > 0
        if had_failed != has_failed:
            for sub in client.subs:
                sub.hb_failed = has_failed
        self.start(client)
