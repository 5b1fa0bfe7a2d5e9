"""Publishes held by a standby while the cluster's serving node is silent, for the node
that takes over to answer.

When the serving node dies, its clients' publishes go nowhere until another node is
promoted (seconds: JetStream elections), and a STAN client waits 30 s for a PubAck that
will never come (clients do not resend). A standby that sees the lease's holder go silent
subscribes to the publish subjects and keeps what arrives, in order. If it is promoted,
the server's handlers take these subscriptions over and the kept publishes are answered
first; a late answer is harmless (a publish is stored once, by its publish ID). If the
holder shows life again or another node takes over, they are dropped: NATS gave every
subscriber a copy, so the serving node had them too.

Only publishes are held. A connect answered late would register a client that gave up
waiting, and its client ID would then be refused to its retry for as long as the
abandoned connection answers heartbeats; subscription and close requests likewise act
on state the client has moved past.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from stanpkg.transport.connection import MsgHandler, NatsConnection

__all__ = ["MAX_HELD_BYTES", "HeldRequests"]

MAX_HELD_BYTES = 64 * 1024 * 1024  # beyond this a failover's requests are not kept


class HeldRequests:
    """The requests of some subjects, kept until :meth:`release` or :meth:`drop`."""

    def __init__(self, conn: NatsConnection, *, max_bytes: int = MAX_HELD_BYTES) -> None:
        self._conn = conn
        self._max_bytes = max_bytes
        self._sids: dict[str, int] = {}  # subject -> sid
        self._kept: list[tuple[str, str, str, bytes]] = []  # (held subject, subject, reply, data)
        self._handlers: dict[str, MsgHandler] = {}  # of the subscriptions taken over
        self._bytes = 0
        self.overflowed = 0  # requests not kept (over max_bytes)

    @property
    def holding(self) -> bool:
        return bool(self._sids)

    def __len__(self) -> int:
        return len(self._kept)

    def hold(self, subjects: Iterable[str]) -> None:
        """Subscribe to ``subjects`` (NATS wildcards allowed) and keep what arrives."""
        for subject in subjects:
            if subject not in self._sids:
                self._sids[subject] = self._conn.subscribe(subject, partial(self._keep, subject))

    def _keep(self, held: str, subject: str, reply: str, data: bytes) -> None:
        size = len(data) + len(subject) + len(reply)
        if self._bytes + size > self._max_bytes:
            self.overflowed += 1
            return
        self._bytes += size
        self._kept.append((held, subject, reply, data))

    def put_first(self, held: str, earlier: list[tuple[str, str, bytes]]) -> None:
        """Requests of ``held`` another subscriber kept before this one existed
        (``(subject, reply, data)``, claim.py): they come first, and a request both
        were given (the same reply subject) is kept once."""
        replies = {reply for _, reply, _ in earlier if reply}
        self._kept = [(held, *request) for request in earlier] + [
            kept for kept in self._kept if not kept[2] or kept[2] not in replies
        ]

    def drop(self) -> None:
        """Stop holding and forget what was kept."""
        for sid in self._sids.values():
            self._conn.unsubscribe(sid)
        self._sids.clear()
        self._kept.clear()
        self._bytes = 0

    def subscribe(self, subject: str, handler: MsgHandler) -> int:
        """The server's subscription to ``subject``: the held one, handed to ``handler``
        (its kept requests wait for :meth:`release`), or a new one."""
        sid = self._sids.pop(subject, None)
        if sid is not None and self._conn.rehandle(sid, handler):
            self._handlers[subject] = handler
            return sid
        return self._conn.subscribe(subject, handler)

    def release(self) -> int:
        """Give the kept requests, in their order, to the handlers :meth:`subscribe`
        installed (the rest are dropped with the subjects nobody took); how many. In the
        event-loop turn of those :meth:`subscribe` calls: a request that arrives later
        must not be handled before the kept ones."""
        handlers, kept = self._handlers, self._kept
        self._kept, self._handlers = [], {}
        self.drop()
        given = 0
        for held, subject, reply, data in kept:
            handler = handlers.get(held)
            if handler is not None:
                handler(subject, reply, data)
                given += 1
        return given
