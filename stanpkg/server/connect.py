"""Connect, connection close and client PINGs (protocol.md §3, §4, §11.2)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors, lenient
from stanpkg.server.clients import Client, is_valid_client_id
from stanpkg.stores.base import ClientRecord, StoreError

if TYPE_CHECKING:
    from stanpkg.server.host import ConnectHost

__all__ = ["ConnectionRequests"]

DUPLICATE_PROBE_TIMEOUT = 0.5
# Concurrent duplicate-ID probes allowed; beyond that a connect is answered at once as
# a duplicate (a flood of connects for registered IDs must not pile up tasks).
MAX_DUPLICATE_PROBES = 1000

_PING_GONE = pb.PingResponse(error=errors.CLIENT_GONE).SerializeToString()


class ConnectionRequests:
    def __init__(self, server: ConnectHost) -> None:
        self.server = server
        self._probing: set[str] = set()
        self._probe_tasks: set[asyncio.Task[None]] = set()

    # -- connect ----------------------------------------------------------------------

    def on_connect(self, subject: str, reply: str, payload: bytes) -> None:
        self.server.control.submit(lambda: self._connect(reply, payload))

    def _reply_connect_error(self, reply: str, error: str) -> None:
        if reply:
            self.server.conn.publish(reply, pb.ConnectResponse(error=error).SerializeToString())

    async def _connect(self, reply: str, payload: bytes) -> None:
        server = self.server
        try:
            req = lenient.parse(pb.ConnectRequest, payload)
        except DecodeError:
            error = lenient.connect_error(payload)
            server.log.error(f"Received invalid client connect request: {error}")
            self._reply_connect_error(reply, error)
            return
        if not req.heartbeatInbox:
            server.log.error("Received invalid client connect request")
            self._reply_connect_error(reply, errors.INVALID_CONN_REQ)
            return
        client_id = req.clientID
        if not is_valid_client_id(client_id):
            server.log.error(f"Received invalid client ID {client_id!r} in connect request")
            self._reply_connect_error(reply, errors.INVALID_CLIENT_ID)
            return
        old = server.clients.get(client_id)
        if old is None:
            await self._register(req, reply)
            return
        if client_id in self._probing or len(self._probing) >= MAX_DUPLICATE_PROBES:
            server.log.error(f"[Client:{client_id}] Connect failed; already connected")
            self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
            return
        # Probe the registered client without holding up other requests.
        self._probing.add(client_id)
        task = asyncio.get_running_loop().create_task(self._check_duplicate(old, req, reply))
        self._probe_tasks.add(task)
        task.add_done_callback(self._probe_tasks.discard)

    async def _check_duplicate(self, old: Client, req: pb.ConnectRequest, reply: str) -> None:
        server = self.server
        client_id = req.clientID
        try:
            await server.acks_conn.request(old.hb_inbox, b"", DUPLICATE_PROBE_TIMEOUT)
            alive = True
        except asyncio.CancelledError:
            self._probing.discard(client_id)
            raise
        except Exception:
            alive = False
        if alive:
            self._probing.discard(client_id)
            server.log.error(f"[Client:{client_id}] Connect failed; already connected")
            self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
            return

        async def replace() -> None:
            try:
                if server.clients.get(client_id) is old:
                    await self.close_client(client_id, old)
                if server.clients.get(client_id) is not None:
                    # Someone else registered the ID meanwhile.
                    self._reply_connect_error(reply, errors.CLIENT_ALREADY_REGISTERED)
                    return
                if await self._register(req, reply):
                    server.log.debug(
                        f"[Client:{client_id}] Replaced old client (Inbox={old.hb_inbox})"
                    )
            finally:
                self._probing.discard(client_id)

        server.control.submit(replace)

    async def _register(self, req: pb.ConnectRequest, reply: str) -> bool:
        """Register the client and answer; False when the store refused it."""
        server = self.server
        record = ClientRecord(
            id=req.clientID,
            hb_inbox=req.heartbeatInbox,
            conn_id=req.connID,
            protocol=req.protocol,
            ping_interval=req.pingInterval,
            ping_max_out=req.pingMaxOut,
        )
        try:
            server.store.add_client(record)
        except StoreError as exc:
            self._reply_connect_error(reply, str(exc))
            return False
        client = server.clients.register(record)
        server.heartbeats.start(client)
        info = server.info
        resp = pb.ConnectResponse(
            pubPrefix=info.publish,
            subRequests=info.subscribe,
            unsubRequests=info.unsubscribe,
            closeRequests=info.close,
            subCloseRequests=info.sub_close,
            protocol=1,
        )
        if req.protocol >= 1:
            resp.pingRequests = server.ping_subject
            resp.pingInterval = req.pingInterval
            resp.pingMaxOut = req.pingMaxOut
        if reply:
            server.conn.publish(reply, resp.SerializeToString())
        server.log.debug(f"[Client:{client.id}] Connected (Inbox={client.hb_inbox})")
        return True

    # -- close ------------------------------------------------------------------------

    def on_close(self, subject: str, reply: str, payload: bytes) -> None:
        self.server.control.submit(lambda: self._close(reply, payload))

    async def _close(self, reply: str, payload: bytes) -> None:
        try:
            req = lenient.parse(pb.CloseRequest, payload)
        except DecodeError:
            self.server.log.error("Received invalid close request")
            self._reply_close(reply, lenient.close_error(payload))
            return
        await self.server.ack_barrier()
        error = await self.close_client(req.clientID)
        self._reply_close(reply, error)

    def _reply_close(self, reply: str, error: str | None) -> None:
        if reply:
            payload = pb.CloseResponse(error=error).SerializeToString() if error else b""
            self.server.conn.publish(reply, payload)

    async def close_client(self, client_id: str, expected: Client | None = None) -> str | None:
        """Close a client like a CloseRequest does; ``expected`` guards against closing a
        client that replaced the one a timer or probe was about."""
        server = self.server
        client = server.clients.get(client_id)
        if client is None or (expected is not None and client is not expected):
            server.log.error(f"Unknown client {client_id!r} in close request")
            return errors.UNKNOWN_CLIENT
        # v0.25: unregister first, so a reconnecting client cannot race the removals.
        server.clients.unregister(client_id)
        server.heartbeats.stop(client)
        try:
            server.store.delete_client(client_id)
        except StoreError as exc:
            server.log.error(f"Error unregistering client {client_id!r}: {exc}")
        await server.removals.remove_client_subscriptions(client)
        server.log.debug(f"[Client:{client_id}] Closed (Inbox={client.hb_inbox})")
        return None

    # -- pings ------------------------------------------------------------------------

    def on_ping(self, subject: str, reply: str, payload: bytes) -> None:
        if not payload or not reply:
            return
        if len(self.server.control):
            # A connect may still be queued: answer in order with it.
            async def later() -> None:
                self._ping(reply, payload)

            self.server.control.submit(later)
            return
        self._ping(reply, payload)

    def _ping(self, reply: str, payload: bytes) -> None:
        try:
            ping = pb.Ping.FromString(payload)
        except DecodeError:
            return
        client = self.server.clients.by_conn_id.get(ping.connID)
        if client is None:
            self.server.conn.publish(reply, _PING_GONE)
            return
        if client.failed_hbs > 0:
            self.server.heartbeats.fire_soon(client)
        self.server.conn.publish(reply, b"")

    async def close(self) -> None:
        for task in list(self._probe_tasks):
            task.cancel()
        for task in list(self._probe_tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
