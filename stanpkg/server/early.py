"""The server's NATS connections, opened the moment NATS accepts clients.

A client that connects as soon as the client port accepts sends its connect request
right away; NATS drops a request nobody is subscribed to (or answers "no responders").
So the node opens the server's connections first, before it imports and builds the rest
of the server or reads the store, and subscribes to the discover subject at once:
connect requests that arrive while the server starts are kept (held_requests.py) and
answered, in their order, once it serves (``StreamingServer.start``).

With the embedded nats-server, raw connections already hold the subject from the
moment its port accepts (claim.py): the server's connection takes their requests over.

The twin probe of a standalone server (modes/standalone.py) is published just before
the first subscription to the subject, on the same connection (the claim's, else this
one): NATS handles a connection's commands in order, so the probe reaches only another
server, never the subscription that follows it.

Only a server that serves at once holds connects: a fault-tolerant standby or a
clustered follower does not answer clients.

The connections' callbacks reach the server once it exists (:class:`Relay`); until then
a connection closed for good fails the start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stanpkg.server.claim import DiscoverClaim, merge
from stanpkg.server.errors import StartupError
from stanpkg.server.held_requests import HeldRequests
from stanpkg.server.log import Logger
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan

__all__ = ["EarlyConnections", "Relay", "connection_policy", "open_early"]

_CALLBACKS = ("on_disconnected", "on_reconnected", "on_closed", "on_error")


def connection_policy(plan: Plan) -> dict[str, Any]:
    """How the server's connections reconnect. Forever by default, as the reference
    (nats_max_reconnects: -1): while NATS is away nothing reaches the server, so waiting
    costs nothing and loses nothing."""
    return {
        "max_reconnect": plan.nats_max_reconnects,
        "reconnect_wait": plan.nats_reconnect_wait / 1e9,
    }


class Relay:
    """Connection callbacks that reach the server's once :meth:`attach` gives them."""

    def __init__(self, log: Logger) -> None:
        self._log = log
        self._targets: dict[str, Callable[..., None]] = {}
        self.closed_early: str = ""  # why a connection closed before the server existed

    def attach(self, targets: dict[str, Callable[..., None]]) -> None:
        self._targets = targets

    def options(self, *extra: str) -> dict[str, Any]:
        """The callback keywords of ``NatsConnection.open``: ``_CALLBACKS`` and ``extra``."""
        return {name: self._forwarder(name) for name in (*_CALLBACKS, *extra)}

    def _forwarder(self, name: str) -> Callable[..., None]:
        def forward(*args: Any) -> None:
            target = self._targets.get(name)
            if target is not None:
                target(*args)
            elif name == "on_closed":
                self.closed_early = str(args[0] if args and args[0] else "connection closed")
            elif name == "on_error":
                self._log.error(f"Asynchronous error: {args[0]}")

        return forward


@dataclass
class EarlyConnections:
    """What :func:`open_early` opened, for ``StreamingServer.start`` to take over."""

    conn: NatsConnection
    acks_conn: NatsConnection
    relay: Relay
    held: HeldRequests | None  # the discover subject's connect requests, if held


async def open_early(
    endpoint: NatsEndpoint,
    *,
    cluster_id: str,
    discovery: str,
    options: dict[str, Any],
    log: Logger,
    hold: bool,
    twin_check: Callable[[NatsConnection], Coroutine[Any, Any, None]] | None = None,
    claims: list[DiscoverClaim] | None = None,
) -> EarlyConnections:
    """Open the general and the acks connections (``options``: reconnect policy); with
    ``hold``, keep the connect requests of ``discovery`` from now on (taking over what
    ``claims`` kept since the port opened; the first one probed), after ``twin_check``
    (the mode's probe for another server with the cluster ID: StartupError if there is
    one). Raises :class:`StartupError`."""
    relay = Relay(log)
    try:
        conn = await NatsConnection.open(
            endpoint,
            name=f"_NSS-{cluster_id}-general",
            **options,
            **relay.options("on_discovered_servers"),
        )
    except (NatsError, OSError) as exc:
        raise StartupError(str(exc) or type(exc).__name__) from exc
    held: HeldRequests | None = None
    try:
        claims = claims or []
        if hold and claims and twin_check is not None:
            # The claim probed already; an answer is taken back and refused as below.
            if await claims[0].twin_answered():
                claims[0].close()
                await twin_check(conn)
            twin_check = None
        probe: asyncio.Task[None] | None = None
        if hold and twin_check is not None:
            probe = asyncio.get_running_loop().create_task(twin_check(conn))
            await asyncio.sleep(0)  # the probe's PUB is queued: the SUB below follows it
        if hold:
            held = HeldRequests(conn)
            held.hold([discovery])
        if probe is not None:
            await probe
        if held is not None and claims:
            await conn.flush()  # our subscription is in place: the claims can go...
            kept = await asyncio.gather(*(claim.hand_over() for claim in claims))
            await conn.flush()  # ...and what NATS gave all of us has reached us too
            held.put_first(discovery, merge(list(kept)))
        acks_conn = await NatsConnection.open(
            endpoint, name=f"_NSS-{cluster_id}-acks", **options, **relay.options()
        )
    except (NatsError, OSError) as exc:
        await conn.close()
        raise StartupError(str(exc) or type(exc).__name__) from exc
    except BaseException:
        await conn.close()
        raise
    finally:
        for claim in claims or ():
            claim.close()
    return EarlyConnections(conn, acks_conn, relay, held)
