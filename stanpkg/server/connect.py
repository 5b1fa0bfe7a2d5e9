"""Connect, connection close and client PINGs (protocol.md §3, §4, §11.2)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors, non_utf8_requests
from stanpkg.server.clients import Client, is_valid_client_id
from stanpkg.stores.base import ClientRecord, ServerInfo, StoreError

if TYPE_CHECKING:
    from stanpkg.server.handler_context import HandlerContext
    from stanpkg.server.host import HeartbeatControl

__all__ = ["ConnectionRequests"]

DUPLICATE_PROBE_TIMEOUT = 0.5
# Concurrent duplicate-ID probes allowed; beyond that a connect is answered at once as
# a duplicate (a flood of connects for registered IDs must not pile up tasks).
MAX_DUPLICATE_PROBES = 1000

_PING_GONE = pb.PingResponse(error=errors.CLIENT_GONE).SerializeToString()


class ConnectionRequests:
    def __init__(
        self,
        context: HandlerContext,
        *,
        info: ServerInfo,
        heartbeats: HeartbeatControl,
        close_client: Callable[[str, Client | None], Awaitable[str | None]],
    ) -> None:
        self.log = context.log
        self.clients = context.clients
        self.store = context.store
        self.control = context.control
        self.conn = context.conn
        self.acks_conn = context.acks_conn  # duplicate probes go out on the acks connection
        self.ack_barrier = context.ack_barrier
        self.heartbeats = heartbeats
        self.close_client = close_client  # unsubscribe.Removals.close_client
        self.answer_with(info)
        self._probing: set[str] = set()
        self._probe_tasks: set[asyncio.Task[None]] = set()

    def answer_with(self, info: ServerInfo) -> None:
        """The subjects a connect is answered with from now on: the server's, once
        recovered (or adopted from a migration)."""
        self.info = info
        self.ping_subject = f"{info.discovery}.pings"

    # -- connect ----------------------------------------------------------------------

    def on_connect(self, subject: str, reply: str, payload: bytes) -> None:
        self.control.submit(lambda: self._connect(reply, payload))

    def _reply_connect_error(self, reply: str, error: str) -> None:
        if reply:
            self.conn.publish(reply, pb.ConnectResponse(error=error).SerializeToString())

    async def _connect(self, reply: str, payload: bytes) -> None:
        log = self.log
        try:
            req = non_utf8_requests.parse(pb.ConnectRequest, payload)
        except DecodeError:
            error = non_utf8_requests.connect_error(payload)
            log.error(f"Received invalid client connect request: {error}")
            self._reply_connect_error(reply, error)
            return
        if not req.heartbeatInbox:
            log.error("Received invalid client connect request")
            self._reply_connect_error(reply, errors.INVALID_CONN_REQ)
            return
        client_id = req.clientID
        if not is_valid_client_id(client_id):
            log.error(f"Received invalid client ID {client_id!r} in connect request")
            self._reply_connect_error(reply, errors.INVALID_CLIENT_ID)
            return
        old = self.clients.get(client_id)
        if old is None:
            await self._register(req, reply)
            return
        if client_id in self._probing or len(self._probing) >= MAX_DUPLICATE_PROBES:
            log.error(f"[Client:{client_id}] Connect failed; already connected")
            self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
            return
        # Probe the registered client without holding up other requests.
        self._probing.add(client_id)
        task = asyncio.get_running_loop().create_task(self._check_duplicate(old, req, reply))
        self._probe_tasks.add(task)
        task.add_done_callback(self._probe_tasks.discard)

    async def _check_duplicate(self, old: Client, req: pb.ConnectRequest, reply: str) -> None:
        clients, log = self.clients, self.log
        client_id = req.clientID
        try:
            await self.acks_conn.request(old.hb_inbox, b"", DUPLICATE_PROBE_TIMEOUT)
            alive = True
        except asyncio.CancelledError:
            self._probing.discard(client_id)
            raise
        except Exception:
            alive = False
        if alive:
            self._probing.discard(client_id)
            log.error(f"[Client:{client_id}] Connect failed; already connected")
            self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
            return

        async def replace() -> None:
            try:
                if clients.get(client_id) is old:
                    await self.close_client(client_id, old)
                if clients.get(client_id) is not None:
                    # Someone else registered the ID meanwhile.
                    self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
                    return
                if await self._register(req, reply):
                    log.debug(f"[Client:{client_id}] Replaced old client (Inbox={old.hb_inbox})")
            finally:
                self._probing.discard(client_id)

        self.control.submit(replace)

    async def _register(self, req: pb.ConnectRequest, reply: str) -> bool:
        """Register the client and answer; False when the store refused it."""
        record = ClientRecord(
            id=req.clientID,
            hb_inbox=req.heartbeatInbox,
            conn_id=req.connID,
            protocol=req.protocol,
            ping_interval=req.pingInterval,
            ping_max_out=req.pingMaxOut,
        )
        try:
            self.store.add_client(record)
        except StoreError as exc:
            self._reply_connect_error(reply, str(exc))
            return False
        client = self.clients.register(record)
        self.heartbeats.start(client)
        info = self.info
        resp = pb.ConnectResponse(
            pubPrefix=info.publish,
            subRequests=info.subscribe,
            unsubRequests=info.unsubscribe,
            closeRequests=info.close,
            subCloseRequests=info.sub_close,
            protocol=1,
        )
        if req.protocol >= 1:
            resp.pingRequests = self.ping_subject
            resp.pingInterval = req.pingInterval
            resp.pingMaxOut = req.pingMaxOut
        if reply:
            self.conn.publish(reply, resp.SerializeToString())
        self.log.debug(f"[Client:{client.id}] Connected (Inbox={client.hb_inbox})")
        return True

    # -- close ------------------------------------------------------------------------

    def on_close(self, subject: str, reply: str, payload: bytes) -> None:
        self.control.submit(lambda: self._close(reply, payload))

    async def _close(self, reply: str, payload: bytes) -> None:
        try:
            req = non_utf8_requests.parse(pb.CloseRequest, payload)
        except DecodeError:
            self.log.error("Received invalid close request")
            self._reply_close(reply, non_utf8_requests.close_error(payload))
            return
        await self.ack_barrier()
        error = await self.close_client(req.clientID, None)
        self._reply_close(reply, error)

    def _reply_close(self, reply: str, error: str | None) -> None:
        if reply:
            payload = pb.CloseResponse(error=error).SerializeToString() if error else b""
            self.conn.publish(reply, payload)

    # -- pings ------------------------------------------------------------------------

    def on_ping(self, subject: str, reply: str, payload: bytes) -> None:
        if not payload or not reply:
            return
        if len(self.control):
            # A connect may still be queued: answer in order with it.
            async def later() -> None:
                self._ping(reply, payload)

            self.control.submit(later)
            return
        self._ping(reply, payload)

    def _ping(self, reply: str, payload: bytes) -> None:
        try:
            ping = pb.Ping.FromString(payload)
        except DecodeError:
            return
        client = self.clients.by_conn_id.get(ping.connID)
        if client is None:
            self.conn.publish(reply, _PING_GONE)
            return
        if client.failed_hbs > 0:
            self.heartbeats.fire_soon(client)
        self.conn.publish(reply, b"")

    async def close(self) -> None:
        for task in list(self._probe_tasks):
            task.cancel()
        for task in list(self._probe_tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
