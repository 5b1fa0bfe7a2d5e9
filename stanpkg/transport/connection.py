"""A low-overhead NATS client connection for the streaming server's hot path.

Why hand-written instead of nats-py: the server does about two receives and two sends per
streaming message and must move 50-100k messages/s in one CPython process. nats-py
delivers every message through an asyncio.Queue to a per-subscription task and awaits a
coroutine callback per message, and ``publish`` is itself a coroutine; that per-message
task/future/coroutine overhead caps it far below what the protocol allows (see
bench/transport/README.md for the numbers on this machine). Here:

* incoming bytes are parsed in batches in ``data_received`` and each MSG is handed to its
  handler synchronously (``parser.py``);
* ``publish`` is a plain method that appends to one bytearray, written to the socket once
  per event-loop iteration (``call_soon``) or as soon as it is large;
* backpressure: when the transport's write buffer passes its high-water mark, reading
  stops on this connection (and on any connection registered with
  :meth:`pause_reading_with`) until it drains, the asyncio equivalent of the Go client
  blocking in ``Publish``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, cast, overload

from stanpkg.transport.auth import Credentials
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.errors import (
    BadSubjectError,
    ConnectionClosedError,
    DisconnectedError,
    MaxPayloadError,
    NatsError,
    NatsTimeoutError,
    NoServersError,
    OutboundBufferError,
    ProtocolError,
    StaleConnectionError,
)
from stanpkg.transport.handshake import ConnectSettings, open_protocol, until_deadline
from stanpkg.transport.mux import RequestMux
from stanpkg.transport.nuid import Nuid
from stanpkg.transport.parser import (
    HeaderMsgHandler,
    MsgHandler,
    Subscription,
    decode_headers,
    encode_headers,
)
from stanpkg.transport.policy import ConnectionPolicy
from stanpkg.transport.protocol import ClientProtocol
from stanpkg.transport.servers import ServerPool, parse_urls

__all__ = ["HeaderMsgHandler", "MsgHandler", "NatsConnection", "decode_headers", "encode_headers"]


_FLUSH_AT = 64 * 1024  # write at once instead of waiting for the end of the loop iteration
_WRITE_HIGH_WATER = 4 * 1024 * 1024
_WRITE_LOW_WATER = 1024 * 1024
_SUBJECT_CACHE_MAX = 65536
_WHITESPACE = (" ", "\t", "\r", "\n")


def _check_token(value: str) -> None:
    if not value or any(ch in value for ch in _WHITESPACE):
        raise BadSubjectError()


def _reply_bytes(reply: str) -> bytes:
    """A reply subject of a header message (b"" for none), checked as subjects are. Often
    a one-time inbox: kept out of the subject cache."""
    if not reply:
        return b""
    _check_token(reply)
    return reply.encode()


class NatsConnection:
    """A NATS client connection. Create with :meth:`connect`.

    Not thread-safe: use it from the event loop it was created in.
    """

    def __init__(
        self, pool: ServerPool, settings: ConnectSettings, policy: ConnectionPolicy
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._pool = pool
        self._settings = settings
        self._policy = policy

        self._subs: dict[bytes, Subscription] = {}
        self._next_sid = 0
        self._proto: ClientProtocol | None = None
        self._transport: asyncio.Transport | None = None  # set only while connected
        self._server_info: dict[str, Any] = {}
        self._max_payload = 1024 * 1024
        self._out = bytearray()
        self._flush_pending = False
        self._subject_bytes: dict[str, bytes] = {}
        self._closed = False
        self._finished = False
        self._last_error: Exception | None = None
        self._connected = asyncio.Event()
        self._reconnect_task: asyncio.Task[None] | None = None
        self._ping_timer: asyncio.TimerHandle | None = None
        self._pings_out = 0
        self._read_holds = 0
        self._read_peers: list[NatsConnection] = []
        self._nuid = Nuid()
        self._mux = RequestMux(
            self.new_inbox,
            lambda subject, handler, on_status: self._subscribe(subject, handler, "", on_status),
            self.publish,
        )
        self.out_msgs = 0
        self.out_bytes = 0
        self._in_msgs_before = 0  # counters of earlier (lost) connections
        self._in_bytes_before = 0

    # -- connecting ------------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str = "",
        user: str = "",
        password: str = "",
        token: str = "",
        credentials: str = "",
        nkey_seed_file: str = "",
        tls: ssl.SSLContext | None = None,
        tls_required: bool = False,
        connect_timeout: float = 2.0,
        max_reconnect: int = 60,
        on_disconnected: Callable[[], None] | None = None,
        on_reconnected: Callable[[], None] | None = None,
        on_closed: Callable[[Exception | None], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        on_discovered_servers: Callable[[], None] | None = None,
        tls_hostname: str = "",
        reconnect_wait: float = 2.0,
        ping_interval: float = 120.0,
        max_pings_out: int = 2,
        pending_limit: int = 8 * 1024 * 1024,
    ) -> NatsConnection:
        """Connect to the first reachable server of ``url`` (comma-separated list).

        ``max_reconnect`` is per server (negative: forever, 0: never reconnect).
        ``on_error`` gets asynchronous errors (handler exceptions, permission violations);
        without it they are logged. ``on_discovered_servers`` is called when the server
        announces cluster members not known before. Defaults are the Go client's.
        """
        settings = ConnectSettings(
            name=name,
            credentials=Credentials(user, password, token, credentials, nkey_seed_file),
            tls=tls,
            tls_required=tls_required,
            tls_hostname=tls_hostname,
            connect_timeout=connect_timeout,
        )
        policy = ConnectionPolicy(
            max_reconnect=max_reconnect,
            reconnect_wait=reconnect_wait,
            ping_interval=ping_interval,
            max_pings_out=max_pings_out,
            pending_limit=pending_limit,
            on_disconnected=on_disconnected,
            on_reconnected=on_reconnected,
            on_closed=on_closed,
            on_error=on_error,
            on_discovered_servers=on_discovered_servers,
        )
        conn = cls(ServerPool(parse_urls(url)), settings, policy)
        await conn._connect_first()
        return conn

    @classmethod
    async def open(cls, endpoint: NatsEndpoint, **options: Any) -> NatsConnection:
        """:meth:`connect` to ``endpoint``; ``options`` are the other keywords of
        :meth:`connect` (name, callbacks, reconnect policy)."""
        keywords: dict[str, Any] = {**endpoint.connect_keywords(), **options}
        # Called as a Python object: compiled by mypyc, a native call of ``connect`` with
        # ``**keywords`` passes the mapping as its ``name`` (TypeError at connect).
        connect = getattr(cls, "connect")  # noqa: B009
        return cast("NatsConnection", await connect(endpoint.url, **keywords))

    async def _connect_first(self) -> None:
        error: Exception | None = None
        for server in list(self._pool.servers):
            self._pool.current = server
            server.last_attempt = self._loop.time()
            try:
                proto = await open_protocol(self._new_protocol, server, self._settings)
            except (OSError, TimeoutError) as exc:
                if isinstance(exc, NatsError):
                    error = exc  # handshake timeout
                continue  # refused / unreachable: "no servers" unless something else failed
            except NatsError as exc:
                error = exc
                continue
            self._install(proto)
            self._schedule_ping()
            return
        raise error or NoServersError()

    def _new_protocol(self) -> ClientProtocol:
        return ClientProtocol(self, self._subs)

    def _install(self, proto: ClientProtocol) -> None:
        """Make a handshaken protocol current: resubscribe, then send what was buffered."""
        assert proto.transport is not None and proto.info.done()
        self._proto = proto
        self._transport = proto.transport
        self._transport.set_write_buffer_limits(_WRITE_HIGH_WATER, _WRITE_LOW_WATER)
        self._apply_info(proto.info.result())
        self._pings_out = 0
        resubscribe = bytearray()
        for sub in self._subs.values():
            resubscribe += self._sub_line(sub)
            if sub.max_msgs:
                resubscribe += b"UNSUB %d %d\r\n" % (sub.sid, sub.max_msgs - sub.received)
        self._out[:0] = resubscribe
        self._write_out()
        if self._read_holds:
            self._transport.pause_reading()
        self._connected.set()

    def _apply_info(self, info: dict[str, Any]) -> bool:
        self._server_info = info
        self._max_payload = int(info.get("max_payload", self._max_payload))
        urls = info.get("connect_urls")
        if isinstance(urls, list):
            return self._pool.add_advertised([str(u) for u in urls])
        return False

    def _pong_received(self) -> None:
        self._pings_out = 0

    def _async_info(self, info: dict[str, Any]) -> None:
        if self._apply_info(info):
            self._call(self._policy.on_discovered_servers)

    # -- losing and regaining the connection -----------------------------------------------
    def _connection_lost(self, proto: ClientProtocol, exc: Exception | None) -> None:
        if proto is not self._proto:
            return  # a handshake that failed; _open reports it
        self._proto = None
        self._transport = None
        self._connected.clear()
        self._in_msgs_before += proto.in_msgs
        self._in_bytes_before += proto.in_bytes
        if self._closed:
            return
        error: Exception | None = proto.error or exc
        self._last_error = error
        if isinstance(error, (ProtocolError, StaleConnectionError)):
            self._report(error)  # the server did not fail on its own: tell the owner why
        self._call(self._policy.on_disconnected)
        if self._policy.max_reconnect == 0:
            self._finish_close(error or DisconnectedError("nats: connection closed"))
            return
        self._reconnect_task = self._loop.create_task(self._reconnect(error))

    async def _reconnect(self, error: Exception | None) -> None:
        while not self._closed:
            server = self._pool.next_candidate(self._policy.max_reconnect)
            if server is None:
                break
            wait = server.last_attempt + self._policy.reconnect_wait - self._loop.time()
            if wait > 0:
                await asyncio.sleep(wait + random.uniform(0, 0.1 * self._policy.reconnect_wait))
            if self._closed:
                return
            server.last_attempt = self._loop.time()
            server.reconnects += 1
            try:
                proto = await open_protocol(self._new_protocol, server, self._settings)
            except NatsError as exc:
                error = exc
                continue
            except OSError as exc:  # refused / unreachable, as at the first connect
                error = NoServersError()
                error.__cause__ = exc
                continue
            if self._closed:
                if proto.transport is not None:
                    proto.transport.abort()
                return
            server.reconnects = 0
            self._install(proto)
            self._call(self._policy.on_reconnected)
            return
        if not self._closed:
            self._finish_close(error or NoServersError())

    def _schedule_ping(self) -> None:
        if self._policy.ping_interval > 0 and not self._closed:
            self._ping_timer = self._loop.call_later(self._policy.ping_interval, self._ping_tick)

    def _ping_tick(self) -> None:
        proto = self._proto
        if proto is not None and proto.transport is not None:
            self._pings_out += 1
            if self._pings_out > self._policy.max_pings_out:
                proto.fail(StaleConnectionError())
            else:
                self._write_out()
                proto.pongs.append(None)
                proto.transport.write(b"PING\r\n")
        self._schedule_ping()

    # -- subscriptions ---------------------------------------------------------------------
    @staticmethod
    def _sub_line(sub: Subscription) -> bytes:
        if sub.queue:
            return f"SUB {sub.subject} {sub.queue} {sub.sid}\r\n".encode()
        return f"SUB {sub.subject} {sub.sid}\r\n".encode()

    @overload
    def subscribe(
        self,
        subject: str,
        handler: MsgHandler,
        queue: str = "",
        *,
        with_headers: Literal[False] = False,
    ) -> int: ...

    @overload
    def subscribe(
        self,
        subject: str,
        handler: HeaderMsgHandler,
        queue: str = "",
        *,
        with_headers: Literal[True],
    ) -> int: ...

    def subscribe(
        self,
        subject: str,
        handler: MsgHandler | HeaderMsgHandler,
        queue: str = "",
        *,
        with_headers: bool = False,
    ) -> int:
        """Subscribe; ``handler(subject, reply, payload)`` runs synchronously per message.

        ``with_headers``: ``handler(subject, reply, headers, payload)`` instead, with the
        raw header block (:func:`decode_headers`), empty for messages without headers;
        status messages (503 no responders, 204 end of batch...) come to it as well."""
        if not with_headers:
            return self._subscribe(subject, handler, queue, None)  # type: ignore[arg-type]
        header_handler: HeaderMsgHandler = handler  # type: ignore[assignment]

        def without_headers(subject: str, reply: str, payload: bytes) -> None:
            header_handler(subject, reply, b"", payload)

        return self._subscribe(subject, without_headers, queue, None, header_handler)

    def _subscribe(
        self,
        subject: str,
        handler: MsgHandler,
        queue: str,
        status_handler: Callable[[str, int], None] | None,
        header_handler: HeaderMsgHandler | None = None,
    ) -> int:
        _check_token(subject)
        if queue:
            _check_token(queue)
        if self._closed:
            raise ConnectionClosedError()
        self._next_sid += 1
        sub = Subscription(self._next_sid, subject, queue, handler, status_handler, header_handler)
        self._subs[sub.sid_bytes] = sub
        self._queue(self._sub_line(sub), 0)
        return sub.sid

    def rehandle(self, sid: int, handler: MsgHandler) -> bool:
        """Hand the subscription's next messages to ``handler`` (False: no such sid)."""
        sub = self._subs.get(str(sid).encode())
        if sub is None or sub.header_handler is not None:
            return False
        sub.handler = handler
        return True

    def unsubscribe(self, sid: int, max_msgs: int = 0) -> None:
        """Stop now, or after ``max_msgs`` messages in total. Unknown sids are ignored."""
        sub = self._subs.get(str(sid).encode())
        if sub is None or self._closed:
            return
        if max_msgs > 0 and sub.received < max_msgs:
            sub.max_msgs = max_msgs
            self._queue(b"UNSUB %d %d\r\n" % (sid, max_msgs), 0)
        else:
            del self._subs[sub.sid_bytes]
            self._queue(b"UNSUB %d\r\n" % sid, 0)

    # -- publishing ------------------------------------------------------------------------
    # Every method below frames its messages in one expression per message and hands the
    # bytes to _queue, the one place that buffers and schedules the write. The near-copies
    # that remain are measured fast paths: publish_run looks its subject up once for a
    # whole run (a subscription's deliveries), publish_each once per message; sharing one
    # loop would cost either a lookup or a tuple per delivery. Frames are built by literal
    # ``%`` formats, which the compiled build turns into one concatenation.
    def _encode_subject(self, subject: str) -> bytes:
        _check_token(subject)
        cache = self._subject_bytes
        if len(cache) >= _SUBJECT_CACHE_MAX:
            cache.clear()
        encoded = cache[subject] = subject.encode()
        return encoded

    def publish(self, subject: str, payload: bytes, reply: str = "") -> None:
        """Queue a message; it is written at the end of this event-loop iteration."""
        if self._closed:
            raise ConnectionClosedError()
        subject_b = self._subject_bytes.get(subject) or self._encode_subject(subject)
        size = len(payload)
        if size > self._max_payload:
            raise MaxPayloadError()
        if reply:  # a client's ack inbox, the same each time: cached as subjects are
            reply_b = self._subject_bytes.get(reply) or self._encode_subject(reply)
            self._queue(b"PUB %s %s %d\r\n%s\r\n" % (subject_b, reply_b, size, payload), 1)
        else:
            self._queue(b"PUB %s %d\r\n%s\r\n" % (subject_b, size, payload), 1)

    def publish_run(self, subject: str, payloads: Sequence[bytes]) -> None:
        """:meth:`publish` of each payload to one subject, checked and framed in one pass:
        a subscription's run of deliveries. Raises as :meth:`publish` before queueing
        anything when one of them could not be sent (the caller then sends one by one)."""
        if self._closed:
            raise ConnectionClosedError()
        subject_b = self._subject_bytes.get(subject) or self._encode_subject(subject)
        max_payload = self._max_payload
        frames = []
        for payload in payloads:
            size = len(payload)
            if size > max_payload:
                raise MaxPayloadError()
            frames.append(b"PUB %s %d\r\n%s\r\n" % (subject_b, size, payload))
        self._queue_frames(frames)

    def publish_each(self, messages: Iterable[tuple[str, bytes]]) -> None:
        """:meth:`publish` of each (subject, payload) in one pass (PubAcks: small payloads,
        a few subjects). Raises as :meth:`publish` before queueing anything."""
        if self._closed:
            raise ConnectionClosedError()
        cache = self._subject_bytes
        max_payload = self._max_payload
        frames = []
        for subject, payload in messages:
            subject_b = cache.get(subject) or self._encode_subject(subject)
            size = len(payload)
            if size > max_payload:
                raise MaxPayloadError()
            frames.append(b"PUB %s %d\r\n%s\r\n" % (subject_b, size, payload))
        self._queue_frames(frames)

    def publish_with_headers(
        self, subject: str, headers: bytes, payload: bytes, reply: str = ""
    ) -> None:
        """Queue a message with a header block (:func:`encode_headers`), as ``publish``."""
        if self._closed:
            raise ConnectionClosedError()
        subject_b = self._subject_bytes.get(subject) or self._encode_subject(subject)
        self._queue(self._hpub_frame(subject_b, _reply_bytes(reply), headers, payload), 1)

    def publish_run_with_headers(
        self, subject: str, messages: Sequence[tuple[bytes, bytes]], last_reply: str
    ) -> None:
        """:meth:`publish_with_headers` of each (header block, payload) to one subject,
        framed in one pass, the last one with ``last_reply``: a JetStream atomic batch.
        Raises as :meth:`publish_with_headers` before queueing anything."""
        if self._closed:
            raise ConnectionClosedError()
        subject_b = self._subject_bytes.get(subject) or self._encode_subject(subject)
        reply_b = _reply_bytes(last_reply)
        last = len(messages) - 1
        frames = [
            self._hpub_frame(subject_b, reply_b if index == last else b"", headers, payload)
            for index, (headers, payload) in enumerate(messages)
        ]
        self._queue_frames(frames)

    def _hpub_frame(self, subject: bytes, reply: bytes, headers: bytes, payload: bytes) -> bytes:
        """An HPUB frame (``reply`` empty: none), or MaxPayloadError: headers count."""
        size = len(headers)
        total = size + len(payload)
        if total > self._max_payload:
            raise MaxPayloadError()
        if reply:
            return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, size, total, headers, payload)
        return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, size, total, headers, payload)

    def _queue_frames(self, frames: list[bytes]) -> None:
        if frames:
            self._queue(b"".join(frames), len(frames))

    def _queue(self, data: bytes, count: int) -> None:
        """Buffer ``data``, ``count`` messages or (0) a protocol line such as SUB: written
        at the end of this loop turn, or at once when the buffer passes _FLUSH_AT. Only
        messages count against the pending limit: a subscription change is never refused."""
        out = self._out
        out += data
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._scheduled_flush)
        if count:
            self.out_msgs += count
            if len(out) >= _FLUSH_AT:
                self._write_big(len(data))

    def write_now(self) -> None:
        """Hand what is queued to the socket now instead of at the end of the loop turn: a
        caller at a natural batch boundary saves a loop iteration of latency."""
        self._write_out()

    def _scheduled_flush(self) -> None:
        self._flush_pending = False
        self._write_out()

    def _write_big(self, last: int) -> None:
        if self._transport is not None:
            self._write_out()
        elif len(self._out) > self._policy.pending_limit:
            del self._out[-last:]
            raise OutboundBufferError()

    def _write_out(self) -> None:
        transport = self._transport
        if transport is None or not self._out:
            return  # disconnected: keep buffering until the reconnect
        data = self._out
        self._out = bytearray()  # the transport may keep a reference to the old buffer
        self.out_bytes += len(data)
        transport.write(data)

    @property
    def pending_bytes(self) -> int:
        """Bytes published but not yet handed to the kernel."""
        buffered = self._transport.get_write_buffer_size() if self._transport else 0
        return len(self._out) + buffered

    # -- backpressure ----------------------------------------------------------------------
    def pause_reading_with(self, reader: NatsConnection) -> None:
        """Also stop reading ``reader`` while this connection's writes are backed up.

        For a server that receives on one connection and publishes on another.
        """
        self._read_peers.append(reader)

    def _writes_paused(self, paused: bool) -> None:
        for conn in (self, *self._read_peers):
            conn._hold_reading(paused)

    def _hold_reading(self, hold: bool) -> None:
        self._read_holds += 1 if hold else -1
        transport = self._transport
        if transport is None:
            return
        if hold and self._read_holds == 1:
            transport.pause_reading()
        elif not hold and self._read_holds == 0:
            transport.resume_reading()

    # -- round trips -----------------------------------------------------------------------
    async def flush(self, timeout: float = 5.0) -> None:
        """Round trip to the server: everything published before has been processed."""
        if self._closed:
            raise ConnectionClosedError()
        deadline = self._loop.time() + timeout
        if not self._connected.is_set():
            with contextlib.suppress(NatsTimeoutError):
                await until_deadline(deadline, self._loop.create_task(self._connected.wait()))
        proto = self._proto
        if self._closed:
            raise ConnectionClosedError()
        if proto is None or proto.transport is None:
            raise NatsTimeoutError()
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._write_out()
        proto.pongs.append(waiter)
        proto.transport.write(b"PING\r\n")
        await until_deadline(deadline, waiter)

    def new_inbox(self) -> str:
        return "_INBOX." + self._nuid.next()

    async def request(self, subject: str, payload: bytes, timeout: float) -> bytes:
        """Publish with a reply subject on the shared ``_INBOX.<nuid>.*`` subscription.

        Raises NatsTimeoutError, NoRespondersError (nobody subscribed: fails at once) or
        ConnectionClosedError.
        """
        return await self._mux.request(subject, payload, timeout)

    # -- shutting down ---------------------------------------------------------------------
    async def drain(self) -> None:
        """Unsubscribe all, handle what is in flight, write what is buffered, then close."""
        if self._closed:
            raise ConnectionClosedError()
        for sub in list(self._subs.values()):
            self._queue(b"UNSUB %d\r\n" % sub.sid, 0)
        with contextlib.suppress(NatsError):
            await self.flush()  # messages sent before our UNSUBs have now been dispatched
        self._subs.clear()
        with contextlib.suppress(NatsError):
            await self.flush()  # replies published by those handlers have been processed
        await self.close()

    async def close(self, timeout: float = 2.0) -> None:
        """Write what is buffered (for up to ``timeout`` seconds) and close; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._finish_close(None)
        proto = self._proto
        if proto is not None and proto.transport is not None:
            self._write_out()
            proto.transport.close()  # sends what is buffered first...
            try:
                await asyncio.wait_for(asyncio.shield(proto.lost), timeout)
            except TimeoutError:
                proto.transport.abort()  # ...unless the server stopped reading

    def _finish_close(self, error: Exception | None) -> None:
        """Terminal state: fail every waiter, stop timers, tell the owner once."""
        if self._finished:
            return
        self._finished = True
        self._closed = True
        if self._ping_timer is not None:
            self._ping_timer.cancel()
        task = self._reconnect_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._mux.fail_all(ConnectionClosedError())
        if self._proto is not None:
            self._proto.fail_pongs(ConnectionClosedError())
            self._proto.resume_writing()  # release the reading it held on linked connections
        self._connected.set()  # wake flush() waiters; they see the closed flag
        on_closed = self._policy.on_closed
        if on_closed is not None:
            try:
                on_closed(error)
            except Exception as exc:
                self._report(exc)

    # -- callbacks (the policy's) ----------------------------------------------------------
    def _call(self, callback: Callable[[], None] | None) -> None:
        self._policy.call(callback)

    def _report(self, error: Exception) -> None:
        self._policy.report(error)

    # -- state -----------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self._transport is not None and not self._closed

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def last_error(self) -> Exception | None:
        """Why the connection was last lost, if known."""
        return self._last_error

    @property
    def server_info(self) -> dict[str, Any]:
        return self._server_info

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def client_url(self) -> str:
        return self._pool.current.url

    @property
    def known_servers(self) -> list[str]:
        return [server.url for server in self._pool.servers]

    @property
    def in_msgs(self) -> int:
        return self._in_msgs_before + (self._proto.in_msgs if self._proto else 0)

    @property
    def in_bytes(self) -> int:
        return self._in_bytes_before + (self._proto.in_bytes if self._proto else 0)
