"""Clustered mode: every node of the cluster runs; the one holding the cluster's lease
serves (the reference's Raft leader), the others stand by and take over when it lapses.

The replicated state and the lease live in the store (the clustered store keeps both in
JetStream): this mode only orders the node's start-up the way the reference logs it —
cluster lines and the store limits first, then, once this node leads, the promotion.

A node that loses the lease steps down instead of exiting (as the reference's leader): the
node stops its server and starts a new one with this same mode, which stands by again and
counts its promotions over the process's life."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from functools import partial
from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError
from stanpkg.server.held_requests import HeldRequests
from stanpkg.server.modes.base import ServingMode
from stanpkg.stores.base import FT_STORES_ONLY, LOCKABLE, REPLICATED, StoreError
from stanpkg.stores.jetstream.layout import migrated_subject, node_subject
from stanpkg.transport.errors import NatsError
from stanpkg.transport.local_interest import has_local_subscriber

if TYPE_CHECKING:
    from stanpkg.server.host import ModeHost
    from stanpkg.transport.connection import MsgHandler, NatsConnection

__all__ = ["NODE_PROBE_TIMEOUT", "Clustered", "locate_subject", "membership_subject"]

NODE_PROBE_TIMEOUT = 0.5  # how long a node with our ID has to answer
# An operator's "add" may name a node whose interest has not yet crossed the routes, or
# whose process is busy on a loaded host: it is asked again until this much time is up.
ADD_PROBE_PATIENCE = 5.0
SILENCE_CHECK_INTERVAL = 0.1  # how often a standby looks whether the serving node is silent
# How long the serving node waits for a node to claim a client (each asks its nats-server's
# monitor on loopback, about a millisecond; a client no node claims costs the whole wait).
LOCATE_TIMEOUT = 1.0
# Locate requests a node answers at a time; more are not answered (a flood of them must
# not turn into a flood of HTTP requests to nats-server).
LOCATES_IN_FLIGHT = 64


def membership_subject(cluster_id: str, action: str) -> str:
    """The reference's runtime membership requests (``add`` or ``remove``, payload: the
    node ID), answered by the serving node when ``allow_add_remove_node`` is set."""
    return f"_STAN.raft.{cluster_id}.node.{action}"


def locate_subject(cluster_id: str) -> str:
    """Where the serving node asks which node's nats-server a client is connected to
    (payload: the client's heartbeat inbox); that node answers with its server's name."""
    return f"_STAN.raft.{cluster_id}.locate"


class Clustered(ServingMode):
    def __init__(
        self,
        node_id: str,
        log_path: str,
        peers: tuple[str, ...],
        *,
        allow_add_remove_node: bool = False,
    ) -> None:
        self.node_id = node_id
        self.log_path = log_path
        self.peers = peers
        self.allow_add_remove_node = allow_add_remove_node
        self._leading = False
        self._promotions = 0
        self._runs = 0  # servers this mode ran in: a node that steps down builds another
        self._sid: int | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._locates: set[asyncio.Task[None]] = set()  # locate requests being answered
        self._migrating = asyncio.Lock()
        self._held: HeldRequests | None = None  # publishes, while the serving node is silent

    @property
    def state_name(self) -> str:
        return "CLUSTERED"

    @property
    def promotions(self) -> int:
        # Over the process's life: a node that loses the lease stands by again and may be
        # promoted again; a restarted node counts from 0 (Prometheus' increase() sees each).
        return self._promotions

    @property
    def role(self) -> str:
        return "Leader" if self._leading else "Follower"

    @property
    def standing_by(self) -> bool:
        return not self._leading

    async def before_recovery(self, server: ModeHost) -> None:
        """Refuse to run beside a node with the same ID (its lease would be ours), then
        answer for this ID."""
        subject = node_subject(server.plan.cluster_id, self.node_id)
        self._runs += 1
        if self._runs == 1:  # not after a step-down: the last server's answer may linger
            try:
                await server.conn.request(subject, b"", NODE_PROBE_TIMEOUT)
            except (NatsError, TimeoutError):
                pass
            else:
                raise StartupError(
                    f'cluster node ID "{self.node_id}" is already in use by another node'
                )
        self._sid = server.conn.subscribe(
            subject, lambda _s, reply, _d: server.conn.publish(reply, b"") if reply else None
        )
        self._answer_locates(server)

    async def stop(self) -> None:
        self._leading = False  # a node that stepped down is a follower again
        self._sid = None  # the server's connection closes with it
        self._held = None
        for task in (*self._requests, *self._locates):
            task.cancel()

    async def before_listening(self, server: ModeHost) -> None:
        log = server.log
        if self._runs == 1:  # not again after a step-down
            log.notice(f"Cluster Node ID : {self.node_id}")
            log.notice(f"Cluster Log Path: {self.log_path}")
            if self.peers:
                log.notice("Cluster known peers:")
                for number, peer in enumerate(self.peers, 1):
                    log.notice(f'peer {number}: "{peer}"')
        server.log_store_banner()
        if server.on_standby is not None:
            server.on_standby()  # a follower is a healthy service too
        held = HeldRequests(server.conn)
        watch = asyncio.get_running_loop().create_task(self._hold_while_silent(server, held))
        lockable = server.store.capability(LOCKABLE)
        try:
            if lockable is None:
                raise StoreError(FT_STORES_ONLY)
            # Returns once this node holds the lease, with the store caught up on
            # everything the previous leader had replicated.
            # Losing the lease later stops this server, not the process (step_down).
            await lockable.acquire_exclusive_lock(server.step_down)
        except StoreError as exc:
            raise StartupError(str(exc)) from exc
        finally:
            watch.cancel()
        self._held = held
        self._leading = True
        self._promotions += 1
        log.notice("server became leader, performing leader promotion actions")
        server.recover_state(quiet=True)
        if self.allow_add_remove_node:
            self._answer_membership_requests(server)
        log.notice("finished leader promotion actions")

    # -- requests held during a failover (held_requests.py) -----------------------------

    async def _hold_while_silent(self, server: ModeHost, held: HeldRequests) -> None:
        """Hold the clients' publishes while the serving node is silent."""
        store, log = server.store.capability(REPLICATED), server.log
        if store is None:
            return  # no standby view: nothing tells that the serving node went silent
        while True:
            await asyncio.sleep(SILENCE_CHECK_INTERVAL)
            if store.lock_holder_silent():
                # The publish subject is the cluster's, from its records (a standby that
                # started before the serving node wrote them knows it a little later).
                state = store.standby_state()
                if state is not None and not held.holding:
                    held.hold([f"{state.info.publish}.>"])
                    log.debug("Serving node silent: holding the publishes sent meanwhile")
            elif held.holding:
                log.debug(f"Serving node back: dropping {len(held)} held publish(es)")
                held.drop()

    def subscribe_for_clients(self, conn: NatsConnection, subject: str, handler: MsgHandler) -> int:
        if self._held is not None:
            return self._held.subscribe(subject, handler)
        return conn.subscribe(subject, handler)

    def listening(self, server: ModeHost) -> None:
        if self._leading:
            self._answer_migrations(server)
            if self.nats_monitor_port:  # the other nodes have theirs: they answer locates
                server.route_clients_through(partial(self._locate, server))
        held, self._held = self._held, None
        if held is None:
            return
        answered = held.release()
        if answered:
            server.log.notice(f"Answering {answered} publish(es) sent while no node served")
        if held.overflowed:
            server.log.warn(
                f"{held.overflowed} publish(es) sent while no node served were not kept"
            )

    # -- which node's NATS server a client is on (client_links.py) ------------------------

    def _answer_locates(self, server: ModeHost) -> None:
        """Claim the clients connected to this node's nats-server when the serving node
        asks (every node answers, the serving one included)."""
        conn = server.conn
        name = str(conn.server_info.get("server_name", ""))
        if not self.nats_monitor_port or not name:
            return

        def on_request(_subject: str, reply: str, data: bytes) -> None:
            if reply and data and len(self._locates) < LOCATES_IN_FLIGHT:
                task = asyncio.get_running_loop().create_task(
                    self._answer_locate(conn, name, data, reply)
                )
                self._locates.add(task)
                task.add_done_callback(self._locates.discard)

        conn.subscribe(locate_subject(server.plan.cluster_id), on_request)

    async def _answer_locate(
        self, conn: NatsConnection, name: str, data: bytes, reply: str
    ) -> None:
        port = self.nats_monitor_port
        if not port:
            return
        try:
            here = await has_local_subscriber(port, data.decode())
        except (UnicodeDecodeError, OSError, TimeoutError, ValueError):
            return  # not known here: another node may claim the client
        if here and not conn.is_closed:
            conn.publish(reply, name.encode())
            conn.write_now()

    async def _locate(self, server: ModeHost, hb_inbox: str) -> str | None:
        try:
            answer = await server.conn.request(
                locate_subject(server.plan.cluster_id), hb_inbox.encode(), LOCATE_TIMEOUT
            )
        except (NatsError, TimeoutError):
            return None
        return answer.decode(errors="replace") or None

    # -- migrations into the running cluster (stanpkg migrate) ---------------------------

    def _answer_migrations(self, server: ModeHost) -> None:
        """``stanpkg migrate`` names the channels it wrote: they are served from now on,
        as if loaded at this node's promotion."""

        def on_request(_subject: str, reply: str, data: bytes) -> None:
            task = asyncio.get_running_loop().create_task(self._migrated(server, data, reply))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)

        server.conn.subscribe(migrated_subject(server.plan.cluster_id), on_request)

    async def _migrated(self, server: ModeHost, data: bytes, reply: str) -> None:
        try:
            names = json.loads(data)
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ValueError("not a list of channel names")
        except ValueError as exc:
            answer = f"-ERR invalid request: {exc}"
        else:
            answer = await self._load_migrated(server, names)
        if reply:
            server.conn.publish(reply, answer.encode())
            server.conn.write_now()

    async def _load_migrated(self, server: ModeHost, names: list[str]) -> str:
        async with self._migrating:  # one migration's channels at a time
            replicated = server.store.capability(REPLICATED)
            try:
                if replicated is None:
                    raise StoreError("this store is not replicated")
                loaded = server.adopt_state(await replicated.load_channels(names))
            except StoreError as exc:
                server.log.error(f"Unable to load the migrated channels: {exc}")
                return f"-ERR {exc}"
            except Exception as exc:  # answered all the same: migrate would wait for nothing
                server.log.error(f"Unable to load the migrated channels: {exc!r}")
                return f"-ERR {exc!r}"
        server.log.notice(f"Loaded {loaded} migrated channel(s) of {len(names)} named")
        return f"+OK {loaded}"

    # -- membership requests (allow_add_remove_node) ------------------------------------

    def _answer_membership_requests(self, server: ModeHost) -> None:
        conn, cluster_id = server.conn, server.plan.cluster_id
        for action in ("add", "remove"):

            def on_request(_subject: str, reply: str, data: bytes, action: str = action) -> None:
                task = asyncio.get_running_loop().create_task(
                    self._membership(server, action, data.decode(errors="replace"), reply)
                )
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)

            conn.subscribe(membership_subject(cluster_id, action), on_request)

    async def _membership(self, server: ModeHost, action: str, node: str, reply: str) -> None:
        verb = "adding" if action == "add" else "removing"
        server.log.notice(f"Request to {action} cluster node {node!r}")
        try:
            if not node:
                raise StoreError("invalid node ID")
            if action == "add":
                await self._check_running(server, node)
            elif node != self.node_id:
                replicated = server.store.capability(REPLICATED)
                if replicated is None:
                    raise StoreError("this store is not replicated")
                await replicated.remove_cluster_node(node)
        except StoreError as exc:
            server.log.error(f'Error {verb} node "{node}": {exc}')
            answer = f'-ERR {verb} node "{node}": {exc}'
        else:
            answer = "+OK"
        if reply:
            server.conn.publish(reply, answer.encode())
            server.conn.write_now()
        if action == "remove" and node == self.node_id and answer == "+OK":
            # The reference's leader removed from the cluster steps down and exits 0:
            # a stop as by SIGTERM releases the lease to a standby at once.
            server.log.notice("This node was removed from the cluster: shutting down")
            os.kill(os.getpid(), signal.SIGTERM)

    async def _check_running(self, server: ModeHost, node: str) -> None:
        """A JetStream server joins by its routes; the node must be up to count."""
        subject = node_subject(server.plan.cluster_id, node)
        deadline = asyncio.get_running_loop().time() + ADD_PROBE_PATIENCE
        while True:
            try:
                await server.conn.request(subject, b"", NODE_PROBE_TIMEOUT)
                return
            except (NatsError, TimeoutError):
                if asyncio.get_running_loop().time() >= deadline:
                    break
                await asyncio.sleep(0.1)  # "no responders" comes back at once
        raise StoreError(
            "no node with this ID is running (start it with the cluster's routes first)"
        )
