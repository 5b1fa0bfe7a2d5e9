"""The streaming server: wires the NATS connection, the store and the request handlers.

One :class:`StreamingServer` runs in one event loop on one NATS connection. Handlers are
called synchronously by the connection's read loop; publishes are batched by
:mod:`publish`, protocol requests serialized by :mod:`serial_requests`, acknowledgements handled
inline by :mod:`delivery`.

:meth:`StreamingServer.start` builds the handlers as soon as its connections are open,
all together (:func:`~stanpkg.server.handlers.build_handlers`, from the
:class:`~stanpkg.server.handler_context.HandlerContext` they share), and the server holds
them as one value, :attr:`StreamingServer.handlers`: ``None`` until then, the whole set
after. They are started once the store is recovered, just before the server listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from stanpkg.plan.limits import render_store_limits
from stanpkg.server import recovery
from stanpkg.server.client_links import ClientLinks, Locate
from stanpkg.server.clients import ClientRegistry
from stanpkg.server.early import EarlyConnections, connection_policy, open_early
from stanpkg.server.errors import NO_CONFIGURED_CHANNEL, StartupError
from stanpkg.server.handler_context import HandlerContext
from stanpkg.server.handlers import Handlers, build_handlers
from stanpkg.server.held_requests import HeldRequests
from stanpkg.server.kept_publishes import FORWARD_WITHIN, KeptPublishes
from stanpkg.server.modes.base import ServingMode
from stanpkg.server.nats_link import NatsLink
from stanpkg.server.serial_requests import SerialExecutor
from stanpkg.server.subscriptions import Subscription
from stanpkg.stores.base import (
    ADOPTS,
    HANDS_OVER,
    NATS_BACKED,
    RecoveredState,
    ServerInfo,
    Store,
    StoreError,
)
from stanpkg.transport.connection import MsgHandler, NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.errors import NatsError
from stanpkg.transport.nuid import Nuid

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.server.log import Logger

__all__ = ["StreamingServer", "fresh_server_info"]

STOP_FLUSH_TIMEOUT = 5.0
STOP_LAST_FLUSH_TIMEOUT = 2.0
STOP_DRAIN_TIMEOUT = 10.0
STOP_HAND_OVER_TIMEOUT = 10.0  # an upper bound: the store bounds each step itself


def fresh_server_info(plan: Plan) -> ServerInfo:
    return ServerInfo.for_cluster(plan.cluster_id, plan.discover_prefix)


class StreamingServer:
    def __init__(
        self,
        plan: Plan,
        store: Store,
        log: Logger,
        *,
        mode: ServingMode,
        server_id: str = "",
        on_fatal: Callable[[str], None] | None = None,
        on_standby: Callable[[], None] | None = None,
        on_step_down: Callable[[str], None] | None = None,
        store_banner: bool = True,
    ) -> None:
        self.plan = plan
        self.store = store
        self.log = log
        self.mode = mode
        self._nuid = Nuid()
        self.server_id = server_id or self._nuid.next()
        self.on_fatal = on_fatal
        self.on_standby = on_standby
        self.on_step_down = on_step_down
        # Monitoring's start_time (wall clock) and uptime (monotonic).
        self.start_time_ns = time.time_ns()
        self.start_monotonic = time.monotonic()
        self.info = fresh_server_info(plan)
        self.clients = ClientRegistry()
        self._sids: list[int] = []
        self._publish_sids: list[int] = []  # of them: kept through a hand-over
        self._recovered: list[Subscription] = []
        self._held: HeldRequests | None = None  # connect requests that came while starting
        self._stopping = False
        self._endpoint: NatsEndpoint | None = None  # as start() got it: links use it too
        # Links to the clients' own NATS servers, once the mode asks for them.
        self._links: ClientLinks | None = None
        # Not again in a server built anew by a node that stepped down.
        self._store_banner_logged = not store_banner
        self.ready = False
        self.nats_link = NatsLink(self._all_connected)
        # Built by start() once the connections are open, all at once: until then None.
        self.handlers: Handlers | None = None

    def _built(self) -> Handlers:
        """The handlers, for what runs only once start() has built them."""
        if self.handlers is None:
            raise RuntimeError("the streaming server has not been started")
        return self.handlers

    @property
    def conn(self) -> NatsConnection:
        """The general connection (:class:`HandlerContext` says what goes where)."""
        return self._built().context.conn

    @property
    def acks_conn(self) -> NatsConnection:
        """The acks connection."""
        return self._built().context.acks_conn

    @property
    def state(self) -> str:
        """The reference's server state names, as monitoring reports them."""
        return "SHUTDOWN" if self._stopping else self.mode.state_name

    @property
    def standing_by(self) -> bool:
        """Running but not serving yet (a fault-tolerant standby)."""
        return self.mode.standing_by

    @property
    def ping_subject(self) -> str:
        return f"{self.info.discovery}.pings"

    def new_inbox(self) -> str:
        return "_INBOX." + self._nuid.next()

    # -- starting ---------------------------------------------------------------------

    async def start(self, endpoint: NatsEndpoint, early: EarlyConnections | None = None) -> None:
        """Connect (or take over the connections ``early`` opened), recover, listen, and
        log the startup lines from "Recovering the state..." to "Streaming Server is
        ready". Raises :class:`StartupError`."""
        plan = self.plan
        self._endpoint = endpoint
        if early is None:
            early = await open_early(
                endpoint,
                cluster_id=plan.cluster_id,
                discovery=self.info.discovery,
                options=connection_policy(plan),
                log=self.log,
                hold=False,
            )
        self._held = early.held
        handlers = self.handlers = self._build_handlers(early)
        early.relay.attach(
            {
                "on_disconnected": self._on_disconnected,
                "on_reconnected": self._on_reconnected,
                "on_closed": self._on_closed,
                "on_error": lambda exc: self.log.error(f"Asynchronous error: {exc}"),
                "on_discovered_servers": self._on_discovered_servers,
            }
        )
        if early.relay.closed_early:
            raise StartupError(early.relay.closed_early)
        nats_backed = self.store.capability(NATS_BACKED)
        try:
            if nats_backed is not None:
                await nats_backed.connect(endpoint)
        except StoreError as exc:
            raise StartupError(str(exc)) from exc
        await self.mode.before_recovery(self)
        partitions = handlers.partitions
        if partitions is not None:
            if not partitions.names:
                raise StartupError(NO_CONFIGURED_CHANNEL)
            partitions.listen()
            await partitions.exchange()
        self.recover_state()
        await self.mode.before_listening(self)
        handlers.context.control.start()
        handlers.publisher.start()
        self._listen()
        if self._held is not None:
            # In the turn of _listen's subscriptions: the held connects come first.
            self._held.release()
            self._held = None
        await handlers.context.conn.flush()
        await handlers.context.acks_conn.flush()
        self.log_store_banner()
        self.log.notice("Streaming Server is ready")
        self.ready = True
        for client in list(self.clients.by_id.values()):
            handlers.heartbeats.start(client)
        recovery.start_recovered(handlers.context.loop, handlers.delivery, self._recovered)
        self._recovered = []
        channels = handlers.channels
        for channel in list(channels.channels.values()):
            channels.arm_age_timer(channel)
            channels.start_inactivity_timer(channel)
        # Everything recovered lives as long as the server: keep it out of the cyclic
        # collector's full passes (with 100k subscriptions each pass stalled the loop ~1 s).
        gc.freeze()

    def _build_handlers(self, early: EarlyConnections) -> Handlers:
        """Every handler, on the connections ``early`` opened; none started yet."""
        context = HandlerContext(
            plan=self.plan,
            log=self.log,
            store=self.store,
            loop=asyncio.get_running_loop(),
            clients=self.clients,
            control=SerialExecutor(self.log),
            conn=early.conn,
            acks_conn=early.acks_conn,
            nats_up=self._nats_up,
        )
        return build_handlers(context, info=self.info, server_id=self.server_id, fatal=self.fatal)

    def recover_state(self, *, quiet: bool = False) -> None:
        """Rebuild clients, channels and subscriptions from the store. Run once at start;
        a mode whose store only now holds the state it serves (a clustered node promoted
        to leader) runs it again, ``quiet``, before the server listens."""
        log = self.log
        if not quiet:
            log.notice("Recovering the state...")
        try:
            state = self.store.recover()
        except StoreError as exc:
            raise StartupError(f"unable to initialize the store: {exc}") from exc
        if state is None:
            if not quiet:
                log.notice("No recovered state")
            self.store.init(self.info)
            return
        info = state.info
        if info.cluster_id != self.plan.cluster_id:
            raise StartupError(
                f'cluster ID "{self.plan.cluster_id}" does not match recovered value of '
                f'"{info.cluster_id}"'
            )
        if not info.sub_close:
            info.sub_close = f"_STAN.subclose.{info.cluster_id}"
            self.store.init(info)
        self._answer_with(info)
        self._recovered.extend(recovery.rebuild(self.clients, self._built().channels, state))
        if not quiet:
            log.notice(f"Recovered {len(state.channels)} channel(s)")

    def _answer_with(self, info: ServerInfo) -> None:
        """The server's subjects from now on, those connects are answered with too."""
        self.info = info
        self._built().connections.answer_with(info)

    def _request_subjects(self, info: ServerInfo) -> list[tuple[str, MsgHandler]]:
        """The subjects clients send requests to under ``info``, with their handlers."""
        handlers = self._built()
        publish, partitions = handlers.publisher.on_publish, handlers.partitions
        if partitions is not None:
            publishes = [(f"{info.publish}.{name}", publish) for name in partitions.names]
        else:
            publishes = [(f"{info.publish}.>", publish)]
        connections, removals = handlers.connections, handlers.removals
        return [
            (info.discovery, connections.on_connect),
            *publishes,
            (info.subscribe, handlers.subscriptions.on_subscribe),
            (info.unsubscribe, removals.on_unsubscribe),
            (info.sub_close, removals.on_sub_close),
            (info.close, connections.on_close),
            (f"{info.discovery}.pings", connections.on_ping),
        ]

    def _adopt_subjects(self, info: ServerInfo) -> None:
        """A migration's subjects (the standalone server's, which the records now hold
        and the next node to serve answers on): answered from now on too, and given to
        the clients that connect from now on; the subjects answered so far stay."""
        if info.cluster_id != self.plan.cluster_id or info == self.info:
            return
        if not info.sub_close:
            info.sub_close = f"_STAN.subclose.{info.cluster_id}"
        answered = {subject for subject, _ in self._request_subjects(self.info)}
        for subject, handler in self._request_subjects(info):
            if subject not in answered:
                self._subscribe_request(subject, handler)
        self._answer_with(info)
        self._log_subjects()

    def adopt_state(self, state: RecoveredState) -> int:
        """Serve channels the store loaded while this server runs (a migration into a
        running cluster) as recovered ones: their clients registered and heartbeated,
        their subscriptions attached and started. The number of channels adopted."""
        handlers = self._built()
        channels, delivery = handlers.channels, handlers.delivery
        adopting = self.store.capability(ADOPTS)
        if adopting is not None:  # a wrapper serves the loaded channels its own way
            state = adopting.adopt(state)
        self._adopt_subjects(state.info)
        known = set(self.clients.by_id)
        online = recovery.rebuild(self.clients, channels, state)
        for sub in online:
            self._subscribe_acks(sub)
        for record in state.clients:
            client = self.clients.get(record.id)
            if client is not None and record.id not in known:
                handlers.heartbeats.start(client)
        recovery.start_recovered(handlers.context.loop, delivery, online)
        for recovered in state.channels:
            channel = channels.channels.get(recovered.store.name)
            if channel is not None:
                channels.arm_age_timer(channel)
                channels.start_inactivity_timer(channel)
        return len(state.channels)

    def _subscribe_request(self, subject: str, handler: MsgHandler) -> None:
        handlers = self._built()
        if self._held is not None:  # the discover subject, held since the connections opened
            sid = self._held.subscribe(subject, handler)
        else:
            sid = self.mode.subscribe_for_clients(handlers.context.conn, subject, handler)
        self._sids.append(sid)
        if handler == handlers.publisher.on_publish:
            self._publish_sids.append(sid)

    def _subscribe_acks(self, sub: Subscription) -> None:
        """``sub``'s acks on the acks connection (recovered, or its link was lost)."""
        handlers = self._built()
        on_ack = partial(handlers.delivery.on_ack, sub)
        sub.ack_sid = handlers.context.acks_conn.subscribe(sub.ack_inbox, on_ack)

    def _listen(self) -> None:
        for subject, handler in self._request_subjects(self.info):
            self._subscribe_request(subject, handler)
        for sub in self._recovered:
            self._subscribe_acks(sub)
        self.mode.listening(self)
        self._log_subjects()

    def _log_subjects(self) -> None:
        info, debug = self.info, self.log.debug
        debug(f"Discover subject:           {info.discovery}")
        debug(f"Publish subject:            {info.publish}.>")
        debug(f"Subscribe subject:          {info.subscribe}")
        debug(f"Subscription Close subject: {info.sub_close}")
        debug(f"Unsubscribe subject:        {info.unsubscribe}")
        debug(f"Close subject:              {info.close}")

    def log_store_banner(self) -> None:
        """The store and its limits, once: before "Streaming Server is ready", or earlier
        when a mode waits after them (a clustered follower, as the reference)."""
        if self._store_banner_logged:
            return
        self._store_banner_logged = True
        log, plan = self.log, self.plan
        log.notice(f"Message store is {plan.store_label}")
        if plan.dir:
            log.notice(f"Store location: {plan.dir}")
        for line in render_store_limits(plan.store_limits):
            log.notice(line)

    # -- connection events ------------------------------------------------------------

    def _connections(self) -> tuple[NatsConnection, NatsConnection]:
        context = self._built().context  # the callbacks below are attached once it is
        return context.conn, context.acks_conn

    def _all_connected(self) -> bool:
        return all(nc.is_connected for nc in self._connections())

    def _nats_up(self) -> bool:
        return self.nats_link.up

    def _on_disconnected(self) -> None:
        if self._stopping:
            return
        self.log.error("connection has been disconnected")
        conns = self._connections()
        errors = [nc.last_error for nc in conns if nc.last_error is not None]
        self.nats_link.lost(str(errors[0]) if errors else "")

    def _on_reconnected(self) -> None:
        self.log.notice(f'reconnected to NATS Server at "{self.conn.client_url}"')
        outage = self.nats_link.down_for()
        if self.nats_link.regained():
            self.log.notice(f"NATS is back after {outage:.1f}s without it: serving again")

    def _on_closed(self, error: Exception | None) -> None:
        if self._stopping:
            return
        reason = f"connection to NATS lost: {error}" if error else "connection to NATS closed"
        self.fatal(reason)

    def _on_discovered_servers(self) -> None:
        partitions = self._built().partitions
        if partitions is not None and self.ready:
            partitions.on_topology_change()

    def fatal(self, reason: str) -> None:
        if self.on_fatal is not None:
            self.on_fatal(reason)

    def step_down(self, reason: str) -> None:
        """This node may serve no more (a clustered node lost the lease): its owner stops
        this server and stands by with a new one; without an owner that can, fatal."""
        if self.on_step_down is not None:
            self.on_step_down(reason)
        else:
            self.fatal(reason)

    def route_clients_through(self, locate: Locate) -> None:
        """From now on, answer each client through the link to its own NATS server, found
        by ``locate`` (client_links.py): the clients registered now and those to come."""
        if self._links is not None or self._endpoint is None:
            return
        links = self._links = ClientLinks(
            self._built().context.conn,
            self._endpoint,
            locate,
            self.clients,
            self.log,
            link_name=f"_NSS-{self.plan.cluster_id}-link",
            ack_links=self._built().context.ack_links,
            rehome=self._subscribe_acks,
        )
        self.clients.on_register = links.place
        for client in list(self.clients.by_id.values()):
            links.place(client)

    # -- stopping ---------------------------------------------------------------------

    async def stop(self, *, stepping_down: bool = False) -> None:
        """Graceful stop, as the reference's: from its first line no request is taken
        (connect, subscribe, publish, close: unanswered); what was taken before is
        finished and answered, then timers are stopped, the store flushed and closed,
        the connections closed. A store that hands the service over (a clustered node)
        first handles what NATS routed before the stop and keeps later publishes for its
        successor. ``stepping_down``: the process goes on (its owner logs why), so no
        stop line."""
        if self._stopping:
            return
        self._stopping = True
        if not stepping_down:
            self.log.notice("Shutting down.")  # the reference's first stop line, word for word
        handlers = self.handlers
        if handlers is None:  # start() did not get as far as opening the connections
            await self.mode.stop()
            await self._close_store()
            return
        context = handlers.context
        conn = context.conn
        kept = KeptPublishes(conn)
        if self.ready and not conn.is_closed:
            if self.store.capability(HANDS_OVER) is None:
                self._refuse_requests(context)
            elif conn.is_connected:
                # The round trip brings in everything NATS routed to us before it; the
                # handlers stay in place until that work is finished. An upper bound
                # only (a loaded machine needs it; an idle one takes ms).
                with contextlib.suppress(NatsError, TimeoutError):
                    await conn.flush(STOP_FLUSH_TIMEOUT)
            # Later publishes are kept for the node the store may hand over to: none is
            # acknowledged here once the store closes (kept_publishes.py).
            kept.keep(self._publish_sids)
            await handlers.publisher.drain(STOP_DRAIN_TIMEOUT)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(context.control.drain(), STOP_DRAIN_TIMEOUT)
        if not conn.is_closed:
            for sid in self._sids:
                if sid not in kept:
                    conn.unsubscribe(sid)
        self._sids.clear()
        await self.mode.stop()
        await handlers.close()
        await context.control.close()
        for client in list(self.clients.by_id.values()):
            client.stop_heartbeats()
        for channel in handlers.channels.channels.values():
            channel.cancel_timers()
            for sub in channel.all_subscriptions():
                sub.cancel_ack_timer()
            with contextlib.suppress(Exception):
                await channel.msgs.flush()
                await channel.subs_store.flush()
        successor = await self._close_store()
        await self._hand_kept_over(kept, successor, conn)
        if self._links is not None:
            self.clients.on_register = None
            await self._links.close()  # after what they carry was written
        for nc in (conn, context.acks_conn):
            if not nc.is_closed:
                # The last acknowledgements out; nothing to wait for with NATS gone.
                if nc.is_connected:
                    with contextlib.suppress(NatsError, OSError, TimeoutError):
                        await asyncio.wait_for(nc.flush(), STOP_LAST_FLUSH_TIMEOUT)
                with contextlib.suppress(NatsError, OSError):
                    await nc.close()

    def _refuse_requests(self, context: HandlerContext) -> None:
        """No request is handled from now on: the request subjects are unsubscribed (what
        the connection has read but not handled yet is dropped with them; publishes go to
        KeptPublishes) and the protocol requests queued but not started are dropped.
        Their clients get no answer, so nothing they are told is lost."""
        for sid in self._sids:
            if sid not in self._publish_sids:
                context.conn.unsubscribe(sid)
        context.control.refuse_new()

    async def _close_store(self) -> str:
        """Close the store; the node it handed the service over to, if it did (it bounds
        each step of a hand-over itself), else ""."""
        try:
            self.store.close()
        except StoreError as exc:
            self.log.error(f"Error closing store: {exc}")
        handing = self.store.capability(HANDS_OVER)
        successor = ""
        if handing is not None:
            with contextlib.suppress(Exception):
                successor = await asyncio.wait_for(handing.wait_closed(), STOP_HAND_OVER_TIMEOUT)
        return successor

    async def _hand_kept_over(
        self, kept: KeptPublishes, successor: str, conn: NatsConnection
    ) -> None:
        """Once the store closed: the publishes kept while stopping go to the node it
        handed the service over to, once that one listens; else nowhere."""
        if not successor or conn.is_closed:
            kept.drop()
            return
        waiting = len(kept)
        forwarded = await kept.forward(self.ping_subject)
        if forwarded is None:
            self.log.warn(
                f'Node "{successor}" did not serve within {FORWARD_WITHIN:.0f} s: '
                f"{waiting} publish(es) received while stopping were not answered"
            )
        elif forwarded:
            self.log.notice(
                f'Passed {forwarded} publish(es) received while stopping to "{successor}"'
            )
