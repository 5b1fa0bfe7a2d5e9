"""What the server's handlers share: one frozen value, built once per start.

:meth:`StreamingServer.start` builds a :class:`HandlerContext` as soon as its two NATS
connections are open and gives it to every handler (``handlers.py``), beside the few
objects only that handler uses. A handler reads the fields it needs once, in its
constructor: the per-message paths (publish, acks) see plain attributes, not the context.

What changes while the server runs (the subjects it answers on, the recovered state) is
not here: the context is the same from the first request to the last.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.server.clients import ClientRegistry
    from stanpkg.server.log import Logger
    from stanpkg.server.serial_requests import SerialExecutor
    from stanpkg.stores.base import Store
    from stanpkg.transport.connection import NatsConnection

__all__ = ["ACK_BARRIER_TIMEOUT", "HandlerContext"]

ACK_BARRIER_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class HandlerContext:
    plan: Plan
    log: Logger
    store: Store
    loop: asyncio.AbstractEventLoop
    clients: ClientRegistry  # the server's: monitoring reads it too
    control: SerialExecutor  # protocol requests, one at a time (serial_requests.py)
    # Two connections, as the reference: ``conn`` receives publishes and requests and
    # sends everything; ``acks_conn`` receives acks and the replies to the server's own
    # requests (heartbeats, duplicate probes), so a backlog of publishes never delays
    # them. :meth:`ack_barrier` restores the order between the two.
    conn: NatsConnection
    acks_conn: NatsConnection
    nats_up: Callable[[], bool]  # False while the server has lost NATS (nats_link.py)
    # Links to the clients' NATS servers, which carry acks too (client_links.py keeps it).
    ack_links: list[NatsConnection] = field(default_factory=list)

    async def ack_barrier(self) -> None:
        """Process every ack that reached NATS before the request being handled, and have
        NATS register every ack inbox subscribed before (a round trip on each connection
        acks come in on: NATS answers it after what it queued before)."""
        await asyncio.gather(*(self._flushed(nc) for nc in (self.acks_conn, *self.ack_links)))

    @staticmethod
    async def _flushed(conn: NatsConnection) -> None:
        with contextlib.suppress(NatsError, TimeoutError):
            await conn.flush(ACK_BARRIER_TIMEOUT)
